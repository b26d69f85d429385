"""remove_no_label_data (LibMultiLabel's option): training rows without any label are
dropped before everything else, on every training path, and nothing else changes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from headstart import TrainParams
from headstart.errors import DataFormatError
from headstart.estimator import fit_model, prepare_data
from headstart.io import read_xmc

P = TrainParams(threads=2, normalize=True)


@pytest.fixture(scope="module")
def data(bibtex_dir):
    """600 bibtex rows; every third one loses its labels (bibtex labels every row)."""
    X, Y = read_xmc(bibtex_dir / "train.txt.gz")
    X, Y = X[:600], sp.lil_matrix(Y[:600])
    for i in range(0, 600, 3):
        Y[i, :] = 0
    Y = sp.csr_matrix(Y)
    Y.eliminate_zeros()
    kept = np.flatnonzero(np.diff(Y.indptr) > 0)
    assert 0 < kept.size < 600
    return X, Y, kept


def _same(a, b, labels=40):
    assert (a.weights[:labels] != b.weights[:labels]).nnz == 0
    assert np.array_equal(a.intercept[:labels], b.intercept[:labels])


def test_the_model_is_that_of_the_labelled_rows_alone(data):
    X, Y, kept = data
    p = P.replace(remove_no_label_data=True)
    prepared = prepare_data(X, Y, p)
    assert prepared.n_train == kept.size and prepared.given_rows == 600
    np.testing.assert_array_equal(prepared.kept_rows, kept)
    assert prepare_data(X[kept], Y[kept], p).kept_rows is None    # nothing dropped: nothing to map
    removed, _ = fit_model(X, Y, p, num_labels=40)
    alone, _ = fit_model(X[kept], Y[kept], P, num_labels=40)
    _same(removed, alone)                     # bit for bit, tf-idf/normalisation fitted on the kept rows
    assert removed.n_train == kept.size and removed.params.remove_no_label_data
    kept_all, _ = fit_model(X, Y, P, num_labels=40)   # the default keeps them, as negatives
    assert kept_all.n_train == 600 and (kept_all.weights != alone.weights).nnz > 0


def test_rows_count_as_labelled_by_any_label_of_the_space(data):
    """A row whose labels all lie outside the trained range stays: every label range
    (shard, task) of one run trains on the same rows."""
    X, Y, kept = data
    outside = Y[:, 40:].getnnz(axis=1) > 0
    assert np.any(outside[kept] & (Y[kept][:, :40].getnnz(axis=1) == 0))
    prepared = prepare_data(X, Y, P.replace(remove_no_label_data=True), first_label=0, num_labels=40)
    assert prepared.n_train == kept.size


def test_sharded_training_drops_the_same_rows(data, tmp_path):
    from headstart.distributed.sharded import train_sharded
    from headstart.model.reader import load_model

    X, Y, kept = data
    p = P.replace(remove_no_label_data=True)
    train_sharded(X, Y, p, tmp_path / "m", num_labels=40, shard_size=16)
    alone, _ = fit_model(X[kept], Y[kept], P, num_labels=40)
    _same(load_model(tmp_path / "m", allow_gaps=True), alone)
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert manifest["params"]["remove_no_label_data"] is True


def test_shortlist_and_dense_rows_follow_the_kept_rows(data, tmp_path):
    """The shortlist's instance ids and the dense part's rows are those of the data as
    given; with the option they are checked against it and cut to the kept rows."""
    from headstart.shortlist.api import fit_shortlisted

    X, Y, kept = data
    rng = np.random.default_rng(0)
    S = sp.random(600, Y.shape[1], density=0.05, format="csc", random_state=1, dtype=np.float32)
    S.data[:] = 1.0
    D = rng.normal(size=(600, 4)).astype(np.float32)
    p = TrainParams(threads=2, remove_no_label_data=True)
    removed, _ = fit_shortlisted(X, Y, p, S, dense=D, num_labels=30)
    alone, _ = fit_shortlisted(X[kept], Y[kept], p.replace(remove_no_label_data=False), S[kept], dense=D[kept],
                               num_labels=30)
    _same(removed, alone)
    # the manifest names the shortlist as given, as the first stage that made it does
    # (helper-59: the cut one's digest made shortlist-predict warn of another shortlist)
    from headstart.shortlist.api import shortlist_fingerprint

    assert removed.extensions["shortlist"]["sha256"] == shortlist_fingerprint(S)
    assert removed.extensions["shortlist"]["nnz"] == S.nnz
    # a model named as before 5b8abd6 (the cut shortlist) still resumes (helper-60)
    from headstart.model.format import load_model
    from headstart.shortlist.api import train_shortlisted_dir

    out = tmp_path / "old"
    train_shortlisted_dir(X, Y, p, S, out, num_labels=10, dense=D)
    man = json.loads((out / "manifest.json").read_text())
    entry = man["shortlist"]
    man["shortlist"] = {"source": entry["source"], "nnz": entry.pop("cut_nnz"), "sha256": entry.pop("cut_sha256")}
    (out / "manifest.json").write_text(json.dumps(man))
    train_shortlisted_dir(X, Y, p, S, out, num_labels=30, dense=D, resume=True)
    _same(load_model(out, allow_gaps=True), removed, labels=30)
    with pytest.raises(DataFormatError, match="dense features have 599 rows"):
        fit_shortlisted(X, Y, p, S, dense=D[:599], num_labels=30)


def test_a_tree_is_that_of_the_labelled_rows_alone(data):
    """A label tree drops the rows once, at its training data: its nodes' problems (whose
    rows without a node's outputs are that node's negatives) are left alone."""
    from headstart.tree.train import fit_tree

    X, Y, kept = data
    a = fit_tree(X, Y, P.replace(remove_no_label_data=True), branching=8, seed=1)
    b = fit_tree(X[kept], Y[kept], P, branching=8, seed=1)
    _same(a.model, b.model, labels=None)


def test_no_labelled_row_is_refused(data):
    X, Y, _ = data
    with pytest.raises(DataFormatError, match="none of the 5 rows has a label"):
        prepare_data(X[:5], sp.csr_matrix((5, Y.shape[1])), P.replace(remove_no_label_data=True))


def test_command_line(data, tmp_path, capsys):
    from headstart.cli.main import main
    from headstart.io import write_xmc

    X, Y, kept = data
    path = tmp_path / "train.txt"
    write_xmc(path, X, Y)
    assert main(["train", str(path), "-o", str(tmp_path / "m"), "--normalize", "--remove-no-label-data",
                 "--num-labels", "40", "-q"]) == 0
    from headstart.model.reader import load_model

    alone, _ = fit_model(X[kept], Y[kept], P, num_labels=40)
    _same(load_model(tmp_path / "m", allow_gaps=True), alone)
    # the propensities' N is the rows trained on, whether the counts come from the model
    # or from --train (helper-48: the two gave 0.7764 and 0.7736 PSP@1)
    capsys.readouterr()
    got = []
    for extra in ([], ["--train", str(path)]):
        assert main(["evaluate", str(tmp_path / "m"), str(path), "--allow-gaps", "--json", "-q", *extra]) == 0
        got.append(json.loads(capsys.readouterr().out))
    assert got[0]["PSP@1"] == got[1]["PSP@1"] and got[0]["PSnDCG@5"] == got[1]["PSnDCG@5"]
    from headstart.metrics import evaluate, propensities
    from headstart.prediction import predict_topk

    labels, _ = predict_topk(load_model(tmp_path / "m", allow_gaps=True), X, 5)
    want = evaluate(Y, labels, ks=(1, 3, 5), propensities=propensities(np.diff(sp.csc_matrix(Y).indptr), kept.size))
    assert got[0]["PSP@1"] == pytest.approx(want["PSP@1"], rel=1e-12)
    assert got[0]["PSP@1"] != pytest.approx(
        evaluate(Y, labels, ks=(1,), propensities=propensities(np.diff(sp.csc_matrix(Y).indptr), 600))["PSP@1"],
        rel=1e-9)
    assert main(["train", "--remove-no-label-data", "--print-params"]) == 0
    assert json.loads(capsys.readouterr().out)["remove_no_label_data"] is True


@pytest.mark.parametrize("command", ["train", "tree", "shortlist-train"])
def test_command_line_refusal_names_the_file(data, tmp_path, capsys, command):
    """A file none of whose rows has a label: exit 2, the message names the file, no
    output folder is left behind."""
    from headstart.cli.main import main
    from headstart.io import write_xmc

    X, Y, _ = data
    path = tmp_path / "train.txt"
    write_xmc(path, X[:5], sp.csr_matrix((5, Y.shape[1])))
    extra = []
    if command == "shortlist-train":
        sl = tmp_path / "sl.txt"
        sl.write_text(f"5 {Y.shape[1]}\n")   # never read: the data is refused first
        extra = ["--shortlist", str(sl)]
    out = tmp_path / "m"
    assert main([command, str(path), "-o", str(out), "--remove-no-label-data", "-q"] + extra) == 2
    err = capsys.readouterr().err
    assert f"{path}: --remove-no-label-data leaves no training row: none of the 5 rows has a label" in err
    assert not out.exists()


def test_a_refused_value_is_named_where_it_was_given(data, tmp_path, capsys):
    """An instance the preprocessing refuses is named as given -- its place in the caller's
    matrix, its line in the file -- not as its place among the rows that have labels
    (helper-64: the command line named line 68 for a value on line 102)."""
    from headstart.cli.main import main
    from headstart.io import write_xmc
    from headstart.shortlist.fileformat import write_shortlist

    X, Y, kept = data
    X, Y = sp.csr_matrix(X[:120], dtype=np.float32), Y[:120]
    bad = 100                             # row 100 has labels (100 % 3 != 0); 33 rows before it do not
    assert bad in kept and np.searchsorted(kept, bad) != bad
    X.data[X.indptr[bad]] = -3.0
    params = P.replace(normalize=False, feature_transform="sqrt", remove_no_label_data=True)
    with pytest.raises(DataFormatError) as e:
        prepare_data(X, Y, params)
    assert e.value.row == bad and f"instance {bad} (counting from 0)" in str(e.value)
    path = tmp_path / "train.txt"
    write_xmc(path, X, Y)
    sl = tmp_path / "sl.txt"
    write_shortlist(sl, sp.csr_matrix(np.ones((120, Y.shape[1]), dtype=np.float32)))
    for command, extra in (("train", []), ("shortlist-train", ["--shortlist", str(sl)])):
        out = tmp_path / command
        capsys.readouterr()
        assert main([command, str(path), "-o", str(out), "--transform", "sqrt", "--remove-no-label-data",
                     "--num-labels", "3", "-q", *extra]) == 2
        err = capsys.readouterr().err
        # the header is line 1: instance 100 is on line 102
        assert f"{path}:{bad + 2}: the feature transform sqrt needs values >= 0" in err, (command, err)
        assert not out.exists()
