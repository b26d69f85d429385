"""DiSMEC++ model files: import, export, their round trip, and strict errors.

The expected values come from DiSMEC++'s documented format (src/io/model-io.h,
src/io/weights.cpp: a JSON metadata file listing weight files, one label per row) and
from its data pipeline (--transform, then --normalize-instances, then the bias feature
appended by --augment-for-bias), computed here independently of headstart's reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from headstart.cli import main as cli_main
from headstart.errors import DataFormatError, ModelFormatError
from headstart.model import OvAModel, Preprocessing, load_model, save_model
from headstart.model.dismec import read_dismec_model, write_dismec_model
from headstart.params import TrainParams

# 3 labels over 3 features plus DiSMEC++'s bias feature (the last column)
W_ALL = np.array([[1.0, 0.0, 0.0, 0.5],
                  [0.0, 0.0, 0.0, 0.0],
                  [0.0, -2.0, 3.25, -1.0]])


def write_meta(path: Path, d: int, L: int, files: list[tuple[int, int, str, str]]) -> Path:
    meta = {"num-features": d, "num-labels": L, "date": "2021-01-01 - 00:00:00",
            "files": [{"first": a, "count": c, "file": f, "weight-format": fmt} for a, c, f, fmt in files]}
    path.write_text(json.dumps(meta, indent=4))
    return path


def hand_written(tmp_path: Path, fmt: str) -> Path:
    """W_ALL as DiSMEC++ writes it: labels 0-1 in one file, label 2 in another."""
    def sparse_lines(rows):   # DiSMEC++'s SparseTXT: "j:v " pairs, an empty line for no weights
        return "".join("".join(f"{j}:{v:g} " for j, v in enumerate(r) if v != 0) + "\n" for r in rows)

    names = []
    for a, b in ((0, 2), (2, 3)):
        name = f"m.model.weights-{a}-{b - 1}"
        rows = W_ALL[a:b]
        if fmt == "SparseTXT":
            (tmp_path / name).write_text(sparse_lines(rows))
        elif fmt == "DenseTXT":
            (tmp_path / name).write_text("".join(" ".join(f"{v:g}" for v in r) + "\n" for r in rows))
        else:
            with open(tmp_path / name, "wb") as f:
                np.save(f, rows.astype(np.float32))
        names.append((a, b - a, name, fmt))
    return write_meta(tmp_path / "m.model", 4, 3, names)


@pytest.mark.parametrize("fmt", ["SparseTXT", "DenseTXT", "DenseNPY"])
def test_import_hand_written_model(tmp_path, fmt):
    meta = hand_written(tmp_path, fmt)
    m = read_dismec_model(meta, bias_feature=2.0, normalize=True, transform="sqrt")
    assert (m.num_labels, m.n_features, m.label_space, m.first_label) == (3, 3, 3, 0)
    np.testing.assert_array_equal(m.weights.toarray(), W_ALL[:, :3])
    np.testing.assert_array_equal(m.intercept, W_ALL[:, 3] * 2.0)       # bias weight x feature value
    assert m.weights.nnz == 3 and m.weights.dtype == np.float32
    assert m.preprocessing.normalize and m.preprocessing.transform == "sqrt" and m.params.bias == 2.0
    plain = read_dismec_model(meta)           # without --augment-for-bias: the last column is a feature
    np.testing.assert_array_equal(plain.weights.toarray(), W_ALL)
    assert plain.n_features == 4 and not plain.intercept.any() and plain.params.bias == 0.0
    culled = read_dismec_model(meta, culling=1.0)
    np.testing.assert_array_equal(culled.weights.toarray(), np.where(np.abs(W_ALL) > 1.0, W_ALL, 0))


def test_imported_model_scores_as_dismec_predicts(tmp_path):
    """headstart's predictor on the imported model = DiSMEC++'s pipeline done by hand:
    sqrt, normalise, append the bias feature, multiply by the weights."""
    from headstart.prediction.topk import decision_function

    meta = hand_written(tmp_path, "SparseTXT")
    m = read_dismec_model(meta, bias_feature=2.0, normalize=True, transform="sqrt")
    save_model(m, tmp_path / "hs")
    X = sp.csr_matrix(np.array([[4.0, 0.0, 9.0], [0.0, 1.0, 1.0], [0.0, 0.0, 0.0]], dtype=np.float32))
    Z = np.sqrt(X.toarray())
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    Z = np.divide(Z, norms, out=np.zeros_like(Z), where=norms > 0)
    expected = np.hstack([Z, np.full((3, 1), 2.0)]) @ W_ALL.T
    got = decision_function(load_model(tmp_path / "hs"), X)
    np.testing.assert_allclose(np.asarray(got.todense() if sp.issparse(got) else got), expected, rtol=1e-6,
                               atol=1e-6)


@pytest.fixture(scope="module")
def trained(bibtex_dir):
    """A small headstart model of bibtex (20 labels, sqrt + normalised features, bias)."""
    from headstart.estimator import fit_model
    from headstart.io import read_xmc

    X, Y = read_xmc(bibtex_dir / "train.txt.gz")
    Y = Y[:, :20]
    model, _ = fit_model(X, Y, TrainParams(normalize=True, feature_transform="sqrt", threads=2, bias=1.5))
    Xte, _ = read_xmc(bibtex_dir / "test.txt.gz")
    return model, Xte


@pytest.mark.parametrize("fmt", ["SparseTXT", "DenseTXT", "DenseNPY"])
def test_export_then_import_gives_the_same_model_and_predictions(tmp_path, trained, fmt):
    from headstart.model.dismec import dismec_options
    from headstart.prediction.topk import predict_topk

    model, Xte = trained
    assert model.intercept.any()
    files = write_dismec_model(model, tmp_path / "bib.model", fmt=fmt, labels_per_file=7)
    assert [f.name for f in files] == ["bib.model.weights-0-6", "bib.model.weights-7-13",
                                      "bib.model.weights-14-19", "bib.model"]
    meta = json.loads((tmp_path / "bib.model").read_text())
    assert meta["num-features"] == model.n_features + 1 and meta["num-labels"] == 20
    opts = dismec_options(model)
    assert opts == ["--transform", "sqrt", "--normalize-instances", "--augment-for-bias=1.5"]
    back = read_dismec_model(tmp_path / "bib.model", bias_feature=1.5, normalize=True, transform="sqrt")
    np.testing.assert_array_equal(back.weights.toarray(), model.weights.toarray())   # float32 exact
    np.testing.assert_allclose(back.intercept, model.intercept, rtol=2e-7)
    la, sa = predict_topk(model, Xte, k=5)
    lb, sb = predict_topk(back, Xte, k=5)
    np.testing.assert_array_equal(la, lb)
    # the intercept goes through the bias weight (intercept / 1.5, rounded to float32, times
    # 1.5): a float32 rounding of the intercept is the only difference in the scores
    np.testing.assert_allclose(sa, sb, rtol=0, atol=4 * np.finfo(np.float32).eps * np.abs(model.intercept).max())


def test_exported_sparse_txt_is_dismec_layout(tmp_path):
    """One line per label, "index:value" pairs from 0, an empty line for a label without
    weights, the intercept as the last feature's weight."""
    W = sp.csr_matrix(np.array([[0.25, 0, 0], [0, 0, 0]], dtype=np.float32))
    m = OvAModel(W, np.array([0.0, -3.0], dtype=np.float32), 3, 2, params=TrainParams(bias=2.0))
    write_dismec_model(m, tmp_path / "t.model")
    assert (tmp_path / "t.model.weights-0-1").read_text() == "0:0.25\n3:-1.5\n"


def test_export_refuses_what_dismec_cannot_predict(tmp_path):
    W = sp.csr_matrix(np.ones((2, 3), dtype=np.float32))
    tfidf = OvAModel(W, np.zeros(2, np.float32), 3, 2, preprocessing=Preprocessing(idf=np.ones(3, np.float32)))
    with pytest.raises(ModelFormatError, match="tf-idf"):
        write_dismec_model(tfidf, tmp_path / "x.model")
    part = OvAModel(W, np.zeros(2, np.float32), 3, 5, first_label=1)
    with pytest.raises(ModelFormatError, match="weights for some labels only"):
        write_dismec_model(part, tmp_path / "x.model")
    assert list(tmp_path.iterdir()) == []
    # unless as a partial model: labels 1-2 of 5, in the label space's numbering
    write_dismec_model(part, tmp_path / "x.model", allow_gaps=True)
    meta = json.loads((tmp_path / "x.model").read_text())
    assert meta["num-labels"] == 5 and [(f["first"], f["count"]) for f in meta["files"]] == [(1, 2)]


def fail_second_weight_file(monkeypatch, scale: float = 1.0) -> None:
    """Make the export's second weight file fail ("disk full"); the others are written
    with their weights times ``scale``."""
    from headstart.model import dismec

    calls = []
    real = dismec._write_block

    def failing(f, W, fmt):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        real(f, W * scale, fmt)

    monkeypatch.setattr(dismec, "_write_block", failing)


def test_interrupted_export_leaves_no_files(tmp_path, monkeypatch):
    fail_second_weight_file(monkeypatch)
    W = sp.csr_matrix(np.ones((5, 3), dtype=np.float32))
    with pytest.raises(OSError, match="disk full"):
        write_dismec_model(OvAModel(W, np.zeros(5, np.float32), 3, 5), tmp_path / "x.model", labels_per_file=2)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- bad files
def test_bad_sparse_weight_is_located(tmp_path):
    (tmp_path / "w").write_text("0:1 2:0.5\n1:2 2:x\n")
    meta = write_meta(tmp_path / "m.model", 3, 2, [(0, 2, "w", "SparseTXT")])
    with pytest.raises(DataFormatError) as e:
        read_dismec_model(meta)
    assert e.value.path.endswith("w") and e.value.line == 2 and e.value.token == "2:x"


def test_weight_index_out_of_range_is_located(tmp_path):
    (tmp_path / "w").write_text("0:1\n3:2\n")
    meta = write_meta(tmp_path / "m.model", 3, 2, [(0, 2, "w", "SparseTXT")])
    with pytest.raises(DataFormatError) as e:
        read_dismec_model(meta)
    assert e.value.line == 2 and "3" in str(e.value)


@pytest.mark.parametrize("case, expect", [
    ("short_sparse", "ends after 1"),
    ("dense_bad_number", "not a number"),
    ("dense_wrong_width", "2 weights on the line"),
    ("npy_shape", "shape"),
    ("missing_file", "cannot read the weight file"),
    ("gap", "labels 1..1 have no weight file"),
    ("overlap", "inside the labels"),
    ("count", "num-labels is 3"),
    ("format", "weight-format"),
    ("json", "invalid JSON"),
    ("negative", "'num-features' must be an integer"),
])
def test_bad_model_files_are_refused_with_their_location(tmp_path, case, expect):
    meta = tmp_path / "m.model"
    files = [(0, 2, "w", "SparseTXT")]
    d, L = 3, 2
    (tmp_path / "w").write_text("0:1\n1:1\n")
    if case == "short_sparse":
        (tmp_path / "w").write_text("0:1\n")
    elif case == "dense_bad_number":
        (tmp_path / "w").write_text("1 0 0\n0 y 1\n")
        files = [(0, 2, "w", "DenseTXT")]
    elif case == "dense_wrong_width":
        (tmp_path / "w").write_text("1 0 0\n0 1\n")
        files = [(0, 2, "w", "DenseTXT")]
    elif case == "npy_shape":
        np.save(tmp_path / "w.npy", np.zeros((2, 4), np.float32))
        files = [(0, 2, "w.npy", "DenseNPY")]
    elif case == "missing_file":
        files = [(0, 2, "nothere", "SparseTXT")]
    elif case == "gap":
        L = 3
        files = [(0, 1, "w", "SparseTXT"), (2, 1, "w", "SparseTXT")]
    elif case == "overlap":
        files = [(0, 2, "w", "SparseTXT"), (1, 1, "w", "SparseTXT")]
    elif case == "count":
        L = 3
    elif case == "format":
        files = [(0, 2, "w", "Pickle")]
    if case == "json":
        meta.write_text('{"num-features": 3,')
    elif case == "negative":
        meta.write_text('{"num-features": -1, "num-labels": 2, "files": []}')
    else:
        write_meta(meta, d, L, files)
    with pytest.raises(DataFormatError, match=expect) as e:
        read_dismec_model(meta)
    assert e.value.path is not None


def test_cli_import_export_round_trip_and_errors(tmp_path, capsys):
    meta = hand_written(tmp_path, "SparseTXT")
    out = tmp_path / "hs"
    assert cli_main.main(["import-dismec", str(meta), "-o", str(out), "--augment-for-bias",
                          "--normalize-instances", "-q"]) == 0
    m = load_model(out)
    np.testing.assert_array_equal(m.intercept, W_ALL[:, 3])
    assert m.preprocessing.normalize
    capsys.readouterr()
    assert cli_main.main(["export-dismec", str(out), "-o", str(tmp_path / "again.model")]) == 0
    said = capsys.readouterr().out + capsys.readouterr().err
    assert said.rstrip().endswith("--normalize-instances --augment-for-bias")
    again = read_dismec_model(tmp_path / "again.model", bias_feature=1.0, normalize=True)
    np.testing.assert_array_equal(again.weights.toarray(), m.weights.toarray())
    np.testing.assert_array_equal(again.intercept, m.intercept)
    # headstart's export records its predict options: a re-import without options takes
    # them (the same model), one with other options is refused (helper-18: it scored
    # unnormalised features silently)
    assert cli_main.main(["import-dismec", str(tmp_path / "again.model"), "-o", str(tmp_path / "re"), "-q"]) == 0
    re = load_model(tmp_path / "re")
    assert re.preprocessing.normalize and re.params.bias == 1.0
    np.testing.assert_array_equal(re.weights.toarray(), m.weights.toarray())
    np.testing.assert_array_equal(re.intercept, m.intercept)
    capsys.readouterr()
    assert cli_main.main(["import-dismec", str(tmp_path / "again.model"), "-o", str(tmp_path / "re2"),
                          "--augment-for-bias"]) == 2
    assert "exported by headstart for predicting with --normalize-instances --augment-for-bias, not " \
           "--augment-for-bias" in capsys.readouterr().err and not (tmp_path / "re2").exists()
    # an explicit --transform identity is an option given (it was taken for none, and the
    # export's options were used instead of it, silently)
    assert cli_main.main(["import-dismec", str(tmp_path / "again.model"), "-o", str(tmp_path / "re3"),
                          "--transform", "identity"]) == 2
    assert "exported by headstart for predicting with --normalize-instances --augment-for-bias, not " \
           "--transform identity:" in capsys.readouterr().err and not (tmp_path / "re3").exists()
    # a bad file: exit code 2, the location on stderr, no model directory
    (tmp_path / "m.model.weights-2-2").write_text("1:-2 2:3.25 3:oops\n")
    capsys.readouterr()
    bad_out = tmp_path / "bad"
    assert cli_main.main(["import-dismec", str(meta), "-o", str(bad_out)]) == 2
    err = capsys.readouterr().err
    assert "m.model.weights-2-2:1:" in err and "3:oops" in err
    assert not bad_out.exists()
    # the export's record edited by hand: a value of another type is named, with the file
    # (helper-46: "false" was taken as true, "yes" an internal error)
    again = json.loads((tmp_path / "again.model").read_text())
    for key, value, needle in (("normalize-instances", "false", "must be true or false, got 'false'"),
                               ("augment-for-bias", "yes", "must be null or a number > 0, got 'yes'"),
                               ("transform", "log", "'transform' must be one of")):
        edited = dict(again, **{"headstart-export": dict(again["headstart-export"], **{key: value})})
        (tmp_path / "again.model").write_text(json.dumps(edited))
        assert cli_main.main(["import-dismec", str(tmp_path / "again.model"), "-o", str(bad_out)]) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path / 'again.model'}: headstart-export: " in err and needle in err, err
        assert not bad_out.exists()


def test_failed_reexport_keeps_the_earlier_export(tmp_path, monkeypatch):
    """Weight files are renamed into place only when all are written: an export that fails
    over an earlier one leaves the earlier one loadable and unchanged."""
    W = sp.csr_matrix(np.arange(15, dtype=np.float32).reshape(5, 3))
    m = OvAModel(W, np.zeros(5, np.float32), 3, 5)
    write_dismec_model(m, tmp_path / "x.model", labels_per_file=2)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    fail_second_weight_file(monkeypatch, scale=2.0)
    with pytest.raises(OSError, match="disk full"):
        write_dismec_model(m, tmp_path / "x.model", labels_per_file=2)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    np.testing.assert_array_equal(read_dismec_model(tmp_path / "x.model", bias_feature=1.0).weights.toarray(),
                                  W.toarray())


def test_export_killed_before_its_metadata_leaves_the_earlier_export(tmp_path, monkeypatch):
    """A kill after the weight files are in place but before the metadata file is (helper-46:
    the old metadata -- its bias value -- then described the new weights, a wrong model
    imported with exit 0): new weight files never take the names the old metadata lists,
    and the old ones go once the new metadata is there."""
    import headstart.model.dismec as dm

    rng = np.random.default_rng(0)
    old = OvAModel(sp.csr_matrix(rng.normal(size=(5, 3)).astype(np.float32)), np.full(5, 0.5, np.float32), 3, 5,
                   params=TrainParams(bias=1.0))
    new = OvAModel(sp.csr_matrix(rng.normal(size=(5, 3)).astype(np.float32)), np.full(5, -0.25, np.float32), 3,
                   5, params=TrainParams(bias=2.0))
    meta = tmp_path / "x.model"
    write_dismec_model(old, meta, labels_per_file=2)
    before = read_dismec_model(meta)

    def killed(*a, **k):
        raise KeyboardInterrupt     # as a SIGKILL right before the metadata's write

    with monkeypatch.context() as mp:
        mp.setattr(dm, "atomic_write", killed)
        with pytest.raises(KeyboardInterrupt):
            write_dismec_model(new, meta, labels_per_file=2)
    again = read_dismec_model(meta)
    assert json.loads(meta.read_text())["headstart-export"]["augment-for-bias"] == 1.0
    np.testing.assert_array_equal(again.weights.toarray(), before.weights.toarray())
    np.testing.assert_array_equal(again.intercept, before.intercept)
    # completed: the new model, and only its weight files beside the metadata
    files = write_dismec_model(new, meta, labels_per_file=2)
    assert json.loads(meta.read_text())["headstart-export"]["augment-for-bias"] == 2.0
    got = read_dismec_model(meta, bias_feature=2.0)
    np.testing.assert_allclose(got.weights.toarray(), new.weights.toarray(), rtol=1e-6)
    np.testing.assert_allclose(got.intercept, new.intercept, rtol=1e-6)
    listed = {f["file"] for f in json.loads(meta.read_text())["files"]}
    assert listed == {p.name for p in files[:-1]}
    assert all((tmp_path / n).is_file() for n in listed)
    assert not any((tmp_path / f"x.model.weights-{a}-{b}").exists() for a, b in ((0, 1), (2, 3), (4, 4)))


@pytest.mark.parametrize("fmt, content, expect", [
    ("DenseTXT", "1 nan 2\n0 0 1\n", "not a finite float32"),
    ("DenseTXT", "1 0 2\n0 0 1e40\n", "not a finite float32"),
    ("DenseTXT", "1 0 2 0\n0 3\n", "4 weights on the line"),
    ("SparseTXT", "0:1\n1:2\n2:3\n", "more than the 2 labels' rows"),
])
def test_dense_values_and_row_counts_are_checked(tmp_path, fmt, content, expect):
    (tmp_path / "w").write_text(content)
    meta = write_meta(tmp_path / "m.model", 3, 2, [(0, 2, "w", fmt)])
    with pytest.raises(DataFormatError, match=expect) as e:
        read_dismec_model(meta)
    assert e.value.path.endswith("w")
    np.save(tmp_path / "w.npy", np.array([[1, 2, 3], [0, np.inf, 0]], dtype=np.float64))
    meta = write_meta(tmp_path / "m.model", 3, 2, [(0, 2, "w.npy", "DenseNPY")])
    with pytest.raises(DataFormatError, match="row 1, weight 1"):
        read_dismec_model(meta)


def test_partial_model_imports_with_allow_gaps(tmp_path, capsys):
    """A partial DiSMEC++ model (a label range or a run its --timeout ended: weight files
    for some labels; its predict takes those) is refused with the hint, and imported by
    --allow-gaps with the labels it has, the others missing ranges (helper-40)."""
    (tmp_path / "a").write_text("0:1 3:0.5\n\n")        # labels 1..2 of W_ALL's layout, 4 columns
    (tmp_path / "b").write_text("1:-2 2:3.25 3:-1\n")
    meta = write_meta(tmp_path / "m.model", 4, 6, [(1, 2, "a", "SparseTXT"), (4, 1, "b", "SparseTXT")])
    with pytest.raises(DataFormatError, match=r"labels 0..0 have no weight file \(a partial model"):
        read_dismec_model(meta)
    m = read_dismec_model(meta, bias_feature=1.0, allow_gaps=True)
    assert m.missing_ranges == [(0, 1), (3, 4), (5, 6)] and m.num_labels == 6
    np.testing.assert_array_equal(m.weights.toarray()[[1, 2, 4]], W_ALL[:, :3])
    np.testing.assert_array_equal(m.intercept[[1, 2, 4]], W_ALL[:, 3])
    # the command line: refused without the option, then imported, predicted with the labels there are
    out = tmp_path / "imported"
    assert cli_main.main(["import-dismec", str(meta), "-o", str(out), "--augment-for-bias"]) == 2
    assert "--allow-gaps imports the labels it has" in capsys.readouterr().err and not out.exists()
    assert cli_main.main(["import-dismec", str(meta), "-o", str(out), "--augment-for-bias", "--allow-gaps"]) == 0
    assert "3 label(s) without weights in 3 missing range(s), first [0, 1)" in capsys.readouterr().out
    back = load_model(out, allow_gaps=True)
    assert back.missing_ranges == [(0, 1), (3, 4), (5, 6)]
    # the estimator's coef_ / intercept_: every missing label -inf, inside the rows too
    import headstart

    clf = headstart.load(out, allow_gaps=True)
    assert np.isneginf(clf.intercept_[[0, 3, 5]]).all() and np.isfinite(clf.intercept_[[1, 2, 4]]).all()
    Xq = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], np.float32))
    S = clf.decision_function(Xq)
    np.testing.assert_allclose(np.asarray((Xq @ clf.coef_.T).todense()) + clf.intercept_, S, rtol=1e-6)
    capsys.readouterr()     # info says the training parameters are not the model's own
    assert cli_main.main(["info", str(out)]) == 0
    assert "training: not recorded (imported" in capsys.readouterr().out
    (tmp_path / "x.txt").write_text("2 3 6\n0 0:1 1:1\n1 2:1\n")
    assert cli_main.main(["predict", str(out), str(tmp_path / "x.txt"), "-o", str(tmp_path / "p.txt"), "-k", "2",
                     "--allow-gaps"]) == 0
    # it has no training record: --resume says so (it said "trained on 0 instances")
    capsys.readouterr()
    assert cli_main.main(["train", str(tmp_path / "x.txt"), "-o", str(out), "--resume", "--bias", "1"]) == 2
    assert "cannot resume: the model has no training record" in capsys.readouterr().err
    rows = [[int(t.split(":")[0]) for t in line.split()] for line in (tmp_path / "p.txt").read_text().splitlines()[1:]]
    # row 0 scores label 1 at 1 + 0.5, label 4 at -2 - 1, label 2 at 0; row 1: label 4 at 3.25 - 1
    assert rows[0] == [1, 2] and rows[1][0] == 4 and not {0, 3, 5} & {j for r in rows for j in r}
    # and back out as DiSMEC++ writes a partial model: files for the labels there are, in
    # the label space's numbering; refused without the option
    assert cli_main.main(["export-dismec", str(out), "-o", str(tmp_path / "again.model")]) == 2
    assert "--allow-gaps" in capsys.readouterr().err and not (tmp_path / "again.model").exists()
    assert cli_main.main(["export-dismec", str(out), "-o", str(tmp_path / "again.model"), "--allow-gaps"]) == 0
    assert "wrote 3 labels in 2 weight file(s)" in capsys.readouterr().out
    meta2 = json.loads((tmp_path / "again.model").read_text())
    assert meta2["num-labels"] == 6 and [(f["first"], f["count"]) for f in meta2["files"]] == [(1, 2), (4, 1)]
    again = read_dismec_model(tmp_path / "again.model", bias_feature=1.0, allow_gaps=True)
    assert again.missing_ranges == m.missing_ranges
    assert (again.weights != m.weights).nnz == 0 and np.array_equal(again.intercept, m.intercept)
    # a file beyond num-labels is refused, gaps or not
    write_meta(tmp_path / "big.model", 4, 2, [(1, 2, "a", "SparseTXT")])
    with pytest.raises(DataFormatError, match=r"a weight file reaches label 2, beyond num-labels 2 \(labels 0..1\)"):
        read_dismec_model(tmp_path / "big.model", allow_gaps=True)
