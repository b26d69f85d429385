"""The command line end to end: train/predict/evaluate/info/convert, errors, exit codes."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from headstart.cli import main as cli_main
from headstart.cli.common import option_strings
from headstart.cli.report import format_metrics_table
from headstart.params import TrainParams

REPO = Path(__file__).resolve().parent.parent
LABELS = ["--first-label", "3", "--num-labels", "20"]   # a small label range keeps this quick


def run(capsys, *argv) -> tuple[int, str, str]:
    """Run the CLI in this process; (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        code = cli_main.main([str(a) for a in argv])
    except SystemExit as e:  # argparse usage errors and --help
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def trained(bibtex_dir, tmp_path_factory):
    """A model of labels [3, 23) of bibtex with aop and --normalize, trained by the CLI."""
    d = tmp_path_factory.mktemp("cli")
    model = d / "model"
    code = cli_main.main([
        "train", str(bibtex_dir / "train.txt.gz"), "-o", str(model), "--normalize", "--threads", "2",
        "--stats", str(d / "stats.csv"), *LABELS, "--quiet"])
    assert code == 0
    return d, model


# --------------------------------------------------------------------------- end to end
def test_train_predict_evaluate_match_the_library(trained, bibtex_dir, capsys):
    import headstart
    from headstart.estimator import fit_model
    from headstart.io import read_predictions, read_xmc
    from headstart.metrics import evaluate, propensities
    from headstart.prediction.topk import predict_topk

    d, model_dir = trained
    # the model is what the library trains with the same parameters
    Xtr, Ytr = read_xmc(bibtex_dir / "train.txt.gz")
    ref, _ = fit_model(Xtr, Ytr, TrainParams(normalize=True, threads=2), first_label=3, num_labels=20)
    clf = headstart.load(model_dir, allow_gaps=True)   # a label range: the rest are gaps
    assert clf.model_.first_label == 3 and clf.model_.num_labels == 20
    assert abs(clf.coef_[3:23] - ref.weights).max() == 0   # coef_ row i is label i (classes_[i])
    np.testing.assert_array_equal(clf.intercept_[3:23], ref.intercept)
    assert clf.coef_.shape[0] == Ytr.shape[1] and np.isneginf(clf.intercept_[:3]).all()

    # predictions file == library top-k
    preds = d / "pred.txt"
    code, out, err = run(capsys, "predict", model_dir, bibtex_dir / "test.txt.gz", "-o", preds, "-k", 5,
                         "--allow-gaps")
    assert code == 0, err
    assert "2515 instances" in out
    Xte, Yte = read_xmc(bibtex_dir / "test.txt.gz")
    labels, scores = predict_topk(clf.model_, Xte, 5)
    got_l, got_s = read_predictions(preds)
    np.testing.assert_array_equal(got_l, labels)
    np.testing.assert_allclose(got_s, scores, rtol=1e-5, atol=1e-6)

    # evaluate (model and predictions file) == library metrics
    props = propensities(clf.model_.label_counts, clf.model_.n_train)
    expected = evaluate(Yte, labels, ks=(1, 3, 5), propensities=props)
    code, out, err = run(capsys, "evaluate", model_dir, bibtex_dir / "test.txt.gz", "--json", "--allow-gaps")
    assert code == 0, err
    got = json.loads(out)
    assert list(got) == list(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
    code, out, err = run(capsys, "evaluate", "--predictions", preds, bibtex_dir / "test.txt.gz",
                         "--train", bibtex_dir / "train.txt.gz", "--json")
    assert code == 0, err
    got2 = json.loads(out)
    for key, value in expected.items():
        assert got2[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key

    # the readable table shows the same numbers, in percent
    code, out, err = run(capsys, "evaluate", model_dir, bibtex_dir / "test.txt.gz", "--allow-gaps")
    assert code == 0, err
    assert out == format_metrics_table(expected) + "\n"
    assert f"{100 * expected['P@1']:.2f}" in out and "PSnDCG@k" in out and "coverage@k" in out

    # statistics written as CSV, one row per trained label
    rows = (d / "stats.csv").read_text().splitlines()
    assert len(rows) == 21 and rows[0].startswith("label,")


def test_train_summary_line_and_quiet(bibtex_dir, tmp_path, capsys):
    code, out, err = run(capsys, "train", bibtex_dir / "train.txt.gz", "-o", tmp_path / "m",
                         "--first-label", 0, "--num-labels", 4, "--threads", 1)
    assert code == 0, err
    assert len(out.splitlines()) == 1
    assert re.search(r"trained 4 labels \[0, 4\) of 159 with aop in [\d.]+ s: \d+ Newton iterations, "
                     r"\d+ CG steps, \d+ nonzero weights", out)
    assert "━" not in err  # no progress bar when stderr is not a terminal
    code, out, err = run(capsys, "train", bibtex_dir / "train.txt.gz", "-o", tmp_path / "m",
                         "--num-labels", 2, "--threads", 1, "-q")
    assert code == 0 and out == "" and err == ""


def test_info_on_data_and_model(trained, bibtex_dir, capsys):
    _, model_dir = trained
    code, out, err = run(capsys, "info", bibtex_dir / "train.txt.gz", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert (info["format"], info["instances"], info["features"], info["labels"]) == ("xmc", 4880, 1836, 159)
    assert info["feature_nonzeros"] == 334250 and info["label_nonzeros"] == 11616
    assert info["label_frequency"]["tail_labels"] == 0
    code, out, err = run(capsys, "info", model_dir)
    assert code == 0, err
    assert "model directory" in out and "label space: 159" in out and "labels trained: 20" in out
    assert "covered ranges: [3, 23)" in out and "normalize: True" in out and "init: aop" in out
    code, out, err = run(capsys, "info", model_dir, "--json")
    info = json.loads(out)
    assert info["missing_ranges"] == [[0, 3], [23, 159]]
    assert info["asked_range"] == [[3, 23]] and info["unfinished_ranges"] == []
    assert info["params"] == TrainParams(normalize=True, threads=2).to_dict()


def test_info_names_the_damaged_files_of_a_model(trained, tmp_path, capsys):
    """A shard removed or truncated after training: info lists it and exits 2 (it said
    'missing ranges: none', helper-37); a changed byte inside an archive is found by
    --verify, which checks every file against its manifest checksum."""
    import shutil

    _, model_dir = trained
    code, out, err = run(capsys, "info", model_dir, "--verify", "--json")
    assert code == 0 and "damaged_files" not in json.loads(out), err
    shards = sorted((Path(model_dir) / "shards").iterdir())
    for damage, found_by in (("remove", ()), ("truncate", ()), ("flip", ("--verify",))):
        d = tmp_path / damage
        shutil.copytree(model_dir, d)
        f = d / "shards" / shards[0].name
        raw = bytearray(f.read_bytes())
        if damage == "remove":
            f.unlink()
        elif damage == "truncate":
            f.write_bytes(raw[:len(raw) // 2])
        else:
            raw[len(raw) // 3] ^= 1
            f.write_bytes(raw)
        if found_by:
            code, out, err = run(capsys, "info", d)
            assert code == 0, err
        code, out, err = run(capsys, "info", d, *found_by)
        assert code == 2 and "the model is damaged: 1 file(s)" in err
        assert f"damaged files:\n    shards/{shards[0].name}: " in out
        why = {"remove": "missing", "truncate": "not a whole .npz archive", "flip": "checksum mismatch"}[damage]
        assert out.split(f"shards/{shards[0].name}: ")[1].startswith(why), out


def test_info_reads_a_dense_text_matrix_with_its_labels(tmp_path, capsys):
    """A first line of two numbers and a label file: DiSMEC++'s dense text features, as
    train reads them (helper-53: info took them for a decisions file)."""
    (tmp_path / "x.txt").write_text("2 3\n0.1 0.2 0.3\n0.4 0.5 0.6\n")
    (tmp_path / "y.txt").write_text("2 2\n0\n1\n")
    code, out, err = run(capsys, "info", tmp_path / "x.txt", "--labels", tmp_path / "y.txt", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert (info["format"], info["instances"], info["features"], info["labels"]) == ("slice", 2, 3, 2)
    code, _, err = run(capsys, "info", tmp_path / "x.txt")     # alone: what else it may be
    assert code == 2 and "header is two numbers" in err


def test_data_without_instances_is_refused_by_every_command(trained, tmp_path, capsys):
    """A comment-only libsvm file and an XMC header announcing 0 points: predict (top k,
    thresholds, --liblinear) and evaluate refuse them, naming the file and why, exit 2,
    nothing written (helper-80: an empty predictions file, silently); train says the
    same, not "no labels" (a comment-only file has 0 of both)."""
    _, model = trained
    (tmp_path / "c.svm").write_text("# only a comment\n\n# and another\n")
    (tmp_path / "h.txt").write_text("0 1836 159\n")
    why = {"c.svm": "no data rows, only comments and blank lines", "h.txt": "its header announces 0 points"}
    out = tmp_path / "out.txt"
    for name in why:
        data = tmp_path / name
        for argv, what in ((["predict", model, data, "-o", out, "--allow-gaps"], "predict"),
                           (["predict", model, data, "-o", out, "--allow-gaps", "--threshold", "0"], "predict"),
                           (["evaluate", model, data, "--allow-gaps"], "evaluate"),
                           (["train", data, "-o", tmp_path / "m"], "train on")):
            code, _, err = run(capsys, *argv)
            assert code == 2, (argv, err)
            assert f"{data}: the data has no instances ({why[name]}): there is nothing to {what}" in err, err
            assert not out.exists() and not (tmp_path / "m").exists()


def test_info_describes_a_bare_npy_file(tmp_path, capsys):
    """A .npy without --labels: its shape, dtype and use from its header (helper-80: "need
    their label file"); an object array is named, never loaded; a truncated one exits 2."""
    np.save(tmp_path / "x.npy", np.zeros((5, 3), dtype=np.float32))
    np.save(tmp_path / "v.npy", np.arange(4.0))
    np.save(tmp_path / "o.npy", np.array([1, "a", None], dtype=object), allow_pickle=True)
    np.save(tmp_path / "t.npy", np.zeros((100, 10)))
    with open(tmp_path / "t.npy", "r+b") as f:
        f.truncate(500)
    code, out, err = run(capsys, "info", tmp_path / "x.npy", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert (info["kind"], info["shape"], info["dtype"]) == ("npy", [5, 3], "float32")
    assert info["use"].startswith("dense features (slice format) of 5 instances x 3 features")
    code, out, err = run(capsys, "info", tmp_path / "x.npy")
    assert code == 0 and out.startswith(f"{tmp_path / 'x.npy'}: numpy .npy array\n  shape: 5 x 3\n  dtype: float32\n")
    code, out, err = run(capsys, "info", tmp_path / "v.npy")
    assert code == 0 and "shape: 4\n" in out and "a vector of 4 values, not dense features" in out
    code, out, err = run(capsys, "info", tmp_path / "o.npy")
    assert code == 0 and "dtype: object" in out and "never loads it" in out
    code, out, err = run(capsys, "info", tmp_path / "t.npy")
    assert code == 2 and "truncated: the header claims 8000 bytes of values" in out and "damaged" in err
    # with its labels, still data
    (tmp_path / "y.txt").write_text("5 2\n0\n1\n0\n1\n0,1\n")
    code, out, err = run(capsys, "info", tmp_path / "x.npy", "--labels", tmp_path / "y.txt", "--json")
    assert code == 0 and json.loads(out)["kind"] == "data", err


def test_predict_writes_the_final_header(tmp_path, capsys):
    """Slice features announce their rows (a .npy shape, a dense text header), as XMC
    files do: the header is written final, not padded for a rewrite (helper-54); so it
    is for libsvm input, which announces nothing."""
    rng = np.random.default_rng(3)
    X = rng.random((12, 4)).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "X.txt").write_text("12 4\n" + "".join(" ".join(f"{v:.6g}" for v in row) + "\n" for row in X))
    (tmp_path / "Y.txt").write_text("12 3\n" + "".join(f"{i % 3}\n" for i in range(12)))
    code, _, err = run(capsys, "train", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt", "-o", tmp_path / "m",
                       "--threads", 1, "-q")
    assert code == 0, err
    for features in ("X.npy", "X.txt"):
        out = tmp_path / f"p-{features}.txt"
        code, _, err = run(capsys, "predict", tmp_path / "m", tmp_path / features, "--labels", tmp_path / "Y.txt",
                           "-o", out, "-k", 2)
        assert code == 0, err
        assert out.read_text().split("\n", 1)[0] == "12 2 3", features
    # a libsvm file announces nothing: the lines are spooled and the header still written
    # final, for top-k and for thresholded decisions (helper-102: padded with ~60 blanks)
    (tmp_path / "X.svm").write_text("".join(f"{i % 3} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row))
                                            + "\n" for i, row in enumerate(X)))
    for extra, header in ((["-k", 2], "12 2 3"), (["--threshold", "-1"], "12 3")):
        out = tmp_path / "p-svm.txt"
        code, _, err = run(capsys, "predict", tmp_path / "m", tmp_path / "X.svm", "-o", out, *extra)
        assert code == 0, err
        assert out.read_text().split("\n", 1)[0] == header and out.read_text().count("\n") == 13


def test_info_label_frequency_without_a_count_per_label(tmp_path, capsys):
    """A header declaring 2e9 labels: the summary from the labels that occur (no 16 GB
    array), the median and mean over all of them as numpy's over the full counts."""
    (tmp_path / "h.txt").write_text("3 10 2000000000\n0,7 1:1\n7 2:1\n1999999999 3:1\n")
    code, out, err = run(capsys, "info", tmp_path / "h.txt", "--json")
    assert code == 0, err
    f = json.loads(out)["label_frequency"]
    assert (f["labels"], f["labels_without_positives"], f["max_positives"]) == (2 * 10**9, 2 * 10**9 - 3, 2)
    assert f["median_positives"] == 0.0 and f["mean_positives"] == 4 / (2 * 10**9)
    from headstart.cli.info import label_frequency

    counts = np.array([0, 3, 0, 1, 1, 9])
    for c in (counts, counts[:5], counts[1:2]):
        got = label_frequency(c[c > 0], c.size)
        assert got == label_frequency(c)
        assert got["median_positives"] == np.median(c) and got["tail_labels"] == int(np.sum(c <= 5))


def test_predict_refuses_incomplete_model_unless_allowed(trained, bibtex_dir, tmp_path, capsys):
    _, model_dir = trained
    # the fixture model covers labels [3, 23) of 159: a gap
    code, out, err = run(capsys, "predict", model_dir, bibtex_dir / "test.txt.gz", "-o", tmp_path / "p.txt",
                         "--model-memory", 0)
    assert code == 2 and "--allow-gaps" in err
    assert not (tmp_path / "p.txt").exists()
    # the label tree's beam options on a flat model: said (helper-50: silently ignored)
    code, out, err = run(capsys, "predict", model_dir, bibtex_dir / "test.txt.gz", "-o", tmp_path / "p.txt",
                         "--allow-gaps", "--beam-width", 3, "--sigmoid-a", 2)
    assert code == 0 and "--beam-width/--sigmoid-a: for label-tree models;" in err and "ignored" in err


# --------------------------------------------------------------------------- parameters
def test_every_train_param_is_an_option_with_its_default(capsys):
    code, out, _ = run(capsys, "train", "--help")
    assert code == 0
    text = " ".join(out.split())
    for f in fields(TrainParams):
        assert option_strings(f.name)[0] in out, f.name
        help_start = " ".join(f.metadata["help"].split())[:30]
        assert help_start in text, f.name
    for alias in ("--s", "--t", "--aop-s", "--aop-t", "--pretrained MODEL_DIR", "--print-params", "--params FILE"):
        assert alias in out


def test_help_citing_docs_says_where_they_are(capsys):
    """--help texts cite docs/NAME.md, which an installed wheel does not hold (outsider
    probe): such a help ends saying where they are; each file cited exists (MANIFEST.in
    ships docs/*.md in the sdist, tests/test_packaging.py checks)."""
    import importlib

    names = [importlib.import_module(f"headstart.cli.{m}").NAME for m in cli_main.COMMANDS]
    cited = 0
    for argv in [["--help"]] + [[name, "--help"] for name in names]:
        code, out, _ = run(capsys, *argv)
        assert code == 0, argv
        docs = re.findall(r"docs/([\w.-]+\.md)", out)
        assert out.rstrip().endswith(cli_main.DOCS_WHERE) == bool(docs), argv
        assert [d for d in docs if not (REPO / "docs" / d).is_file()] == [], argv
        cited += bool(docs)
    assert cited >= 5      # headstart, train, predict, tree, shortlist-train at least


def test_print_params_and_params_file_round_trip(tmp_path, capsys):
    code, out, err = run(capsys, "train", "--print-params", "--C", "2", "--s", "0.5", "--t", "-1",
                         "--normalize", "--init", "bias", "--bias-init", "-0.9", "--max-iter", "50")
    assert code == 0, err
    p = json.loads(out)
    assert (p["C"], p["aop_s"], p["aop_t"], p["normalize"], p["init"], p["bias_init"], p["max_iter"]) == \
        (2.0, 0.5, -1.0, True, "bias", -0.9, 50)
    f = tmp_path / "params.json"
    f.write_text(out)
    assert TrainParams.from_json_file(f).to_dict() == p
    code, out2, _ = run(capsys, "train", "--params", f, "--print-params")
    assert code == 0 and json.loads(out2) == p
    # explicit options override the file
    code, out3, _ = run(capsys, "train", "--params", f, "--C", "3", "--no-normalize", "--print-params")
    assert json.loads(out3) == {**p, "C": 3.0, "normalize": False}
    assert json.loads(run(capsys, "train", "--print-params")[1]) == TrainParams().to_dict()
    for text, seconds in (("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("2h", 7200.0), ("1d", 86400.0),
                          ("500ms", 0.5), ("10sec", 10.0), ("5min", 300.0), ("1.5 h", 5400.0)):
        assert json.loads(run(capsys, "train", "--print-params", "--timeout", text)[1])["timeout"] == seconds


def test_a_budget_spent_compiling_says_so(capsys):
    """--timeout is wall-clock time, compiling included (a cluster job's limit is); a first
    run whose kernels took the budget says so and how to avoid it (helper-52)."""
    import argparse

    from headstart.cli.train import _say_timeout

    args = argparse.Namespace(quiet=False, output="m")
    _say_timeout(args, TrainParams(timeout=30.0), 159, 52.5)
    out = capsys.readouterr().out
    assert "time budget of 30 s reached -- this run spent 52.5 s of it compiling kernels" in out
    assert "'headstart compile' does it ahead" in out and "159 label(s) not started" in out
    _say_timeout(args, TrainParams(timeout=30.0), 159, 0.2)
    assert "compiling" not in capsys.readouterr().out


def test_a_model_cut_by_a_time_budget_is_not_replaced_without_resume(bibtex_dir, tmp_path, capsys):
    """headstart train without --shard-size (one spooled shard): a rerun replaces a
    finished model, label ranges included, but refuses one that a --timeout left
    unfinished, which --resume completes (helper-18: it was retrained silently)."""
    data = bibtex_dir / "train.txt.gz"
    out = tmp_path / "m"
    for _ in range(2):
        code, _, err = run(capsys, "train", data, "-o", out, "--num-labels", 3, "--threads", 1, "-q")
        assert code == 0, err
    code, _, err = run(capsys, "train", data, "-o", out, "--timeout", "1e-9", "--threads", 1, "-q")
    assert code == 3, err       # incomplete: not success, not a failure (helper-102: it exited 0)
    # info says which labels the run was asked for and which of them it left (helper-52)
    code, text, err = run(capsys, "info", out)
    assert code == 0 and "asked range: [0, 159)" in text and "unfinished ranges: [" in text, (text, err)
    code, _, err = run(capsys, "train", data, "-o", out, "--threads", 1, "-q")
    assert code == 2 and "an unfinished model is there" in err and "--resume" in err
    # commands that write a new model whole refuse it too (helper-20: import-dismec replaced it)
    code, _, err = run(capsys, "tree", data, "-o", out, "--threads", 1, "-q")
    assert code == 2 and "an unfinished model is there" in err and "train ... --resume" in err
    code, _, err = run(capsys, "merge", out, out)
    assert code == 2 and "an unfinished model is there" in err
    code, _, err = run(capsys, "train", data, "-o", out, "--threads", 1, "-q", "--resume")
    assert code == 0, err
    assert not __import__("headstart").load(out).model_.missing_ranges
    # a label range written by an earlier version (no label_range): replaced, as it was
    code, _, err = run(capsys, "train", data, "-o", out, "--num-labels", 3, "--threads", 1, "-q")
    m = json.loads((out / "manifest.json").read_text())
    del m["label_range"]
    (out / "manifest.json").write_text(json.dumps(m))
    code, _, err = run(capsys, "train", data, "-o", out, "--num-labels", 3, "--threads", 1, "-q")
    assert code == 0, err


def test_evaluate_takes_the_propensity_model_the_labels_were_trained_with(bibtex_dir, tmp_path, capsys):
    data, test = bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz"
    code, _, err = run(capsys, "train", data, "-o", tmp_path / "m", "--weighting", "2pm1", "--propensity-a", "0.5",
                       "--propensity-b", "0.4", "--threads", 1, "-q")
    assert code == 0, err
    got = [json.loads(run(capsys, "evaluate", tmp_path / "m", test, "--json", *o)[1])
           for o in ((), ("--propensity-a", "0.5", "--propensity-b", "0.4"), ("--propensity-a", "0.55"))]
    assert got[0]["PSP@1"] == got[1]["PSP@1"] != got[2]["PSP@1"]


def test_info_names_headstart_files_that_are_not_data_or_models(trained, bibtex_dir, tmp_path, capsys):
    """info on a predictions file, a DiSMEC++ model file or a saved first stage says what
    it is and which command takes it (helper-18: unrelated parse errors)."""
    import scipy.sparse as sp

    from headstart.shortlist import FirstStageParams, build_shortlist

    d, model = trained
    test = bibtex_dir / "test.txt.gz"
    assert run(capsys, "predict", model, test, "-o", tmp_path / "p.txt", "--allow-gaps", "-q")[0] == 0
    X = sp.csr_matrix(np.eye(6, dtype=np.float32))
    build_shortlist(X, sp.csr_matrix(np.eye(6, 3, dtype=np.float32)), FirstStageParams(K=2)).first_stage.save(
        tmp_path / "fs")
    from headstart.model.dismec import write_dismec_model
    from headstart.model.format import load_model

    m = load_model(model, allow_gaps=True)
    write_dismec_model(type(m)(m.weights, m.intercept, m.n_features, m.num_labels), tmp_path / "x.model")
    for path, needle in ((tmp_path / "p.txt", "a predictions file written by 'headstart predict'"),
                         (tmp_path / "x.model", "a DiSMEC++ model (metadata) file"),
                         (tmp_path / "fs", "a first stage saved by 'headstart shortlist --save-first-stage'")):
        code, out, err = run(capsys, "info", path)
        assert code == 2 and needle in err, (path, err)
    assert run(capsys, "info", test)[0] == 0
    # gzipped predictions, the model's own files, thresholds, shortlists, other JSON / npz
    # (were read as data: "malformed label list", "stray carriage return")
    import shutil

    with open(tmp_path / "p.txt", "rb") as src, gzip.open(tmp_path / "p.txt.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    (tmp_path / "th.txt").write_text("-0.25\n0.5\n1e-3\ninf\n")
    # as 'headstart thresholds' writes them: a '# headstart {...}' header line, and whole
    # numbers too (helper-89: read as data, "label id 0.64... is not an integer")
    from headstart.io.labelvec import write_label_values

    write_label_values(tmp_path / "thh.txt", np.array([0.0, 1.0, 2.0]), {"made_by": "headstart thresholds"})
    (tmp_path / "sl.txt").write_text("2 3\n0:1 2:1\n1:1\n")
    (tmp_path / "o.json").write_text('{"a": 1}')
    np.savez(tmp_path / "a.npz", x=np.zeros(3))
    shard = next((Path(model) / "shards").glob("*.npz"))
    for path, needle in ((tmp_path / "p.txt.gz", "a predictions file written by 'headstart predict'"),
                         (Path(model) / "manifest.json", f"part of the model directory {model}"),
                         (shard, f"part of the model directory {model}"),
                         (tmp_path / "th.txt", "one number per line"),
                         (tmp_path / "thh.txt", "one number per line"),
                         (tmp_path / "sl.txt", "header is two numbers"),
                         (tmp_path / "o.json", "a JSON file"), (tmp_path / "a.npz", "numpy .npz archive")):
        code, out, err = run(capsys, "info", path)
        assert code == 2 and needle in err, (path, err)
    # tabs between the tokens of an XMC file are legal: described, not taken for label names
    (tmp_path / "tabs.txt").write_text("2 3 2\n0\t0:1\t2:0.5\n1\t1:1\n")
    code, out, err = run(capsys, "info", tmp_path / "tabs.txt")
    assert code == 0 and "instances: 2" in out, err
    # evaluate --predictions given a decisions file, or the test data (arguments swapped)
    assert run(capsys, "predict", model, test, "-o", tmp_path / "dec.txt", "--threshold", "0", "--allow-gaps")[0] == 0
    assert (tmp_path / "dec.txt").read_text().split("\n", 1)[0] == "2515 159"    # final, not padded (helper-51)
    code, _, err = run(capsys, "evaluate", "--predictions", tmp_path / "dec.txt", test)
    assert code == 2 and "decisions file of 'headstart predict --threshold'" in err
    code, _, err = run(capsys, "evaluate", "--predictions", test, tmp_path / "p.txt")
    assert code == 2 and "looks like a data file" in err


def test_info_names_a_zip_of_a_data_file_as_zip_not_as_npz(tmp_path, capsys):
    """README, Formats: zip data are named as such and refused.  'train' and 'evaluate'
    said so, but 'info' called any zip file 'a numpy .npz archive' (audit s80-h1); an
    .npz (by its name, as the readers tell them apart) is still named an .npz archive."""
    import zipfile

    with zipfile.ZipFile(tmp_path / "data.zip", "w") as z:
        z.writestr("data.txt", "2 3 2\n0 0:1 2:0.5\n1 1:1\n")
    code, _, err = run(capsys, "info", tmp_path / "data.zip")
    assert code == 2 and "zip-compressed data" in err and "npz" not in err.split("(")[0], err
    np.savez(tmp_path / "a.npz", x=np.zeros(3))
    code, _, err = run(capsys, "info", tmp_path / "a.npz")
    assert code == 2 and "numpy .npz archive" in err, err


def test_evaluate_reads_dismec_predictions_with_their_two_number_header(tmp_path, capsys):
    """DiSMEC++'s predict writes 'rows k' (src/io/prediction.cpp); the label space is then
    the test data's.  Hand-computed: ranked by score the rows are [0, 1], [4, 2], [3, 0]
    against {0}, {2, 4}, {3}: P@1 = 1, P@2 = (1/2 + 1 + 1/2) / 3."""
    body = "1:0.5 0:0.9\n4:1.5 2:0.3\n0:0.1 3:0.2\n"
    (tmp_path / "dismec.txt").write_text("3 2\n" + body)
    # headstart's own header says the lines are ranked: listed best first there
    (tmp_path / "ours.txt").write_text("3 2 5\n0:0.9 1:0.5\n4:1.5 2:0.3\n3:0.2 0:0.1\n")
    (tmp_path / "lml.txt").write_text(body)       # LibMultiLabel's: no header (helper-42)
    (tmp_path / "test.txt").write_text("3 3 5\n0 1:1\n4,2 1:1\n3 1:1\n")
    got = [json.loads(run(capsys, "evaluate", "--predictions", tmp_path / p, tmp_path / "test.txt", "-k", 2,
                          "--json")[1]) for p in ("dismec.txt", "ours.txt", "lml.txt")]
    assert got[0] == got[1] == got[2]
    # trailing blank lines of a header-less file are no rows (helper-49)
    (tmp_path / "lml2.txt").write_text(body + "\n\n")
    assert json.loads(run(capsys, "evaluate", "--predictions", tmp_path / "lml2.txt", tmp_path / "test.txt",
                          "-k", 2, "--json")[1]) == got[0]
    # propensity options without training counts: said, not ignored silently (helper-49)
    code, out, err = run(capsys, "evaluate", "--predictions", tmp_path / "ours.txt", tmp_path / "test.txt",
                         "--propensity-a", "0.6")
    assert code == 0 and "no propensity-scored metrics (give --train FILE)" in err and "PSP" not in out
    (tmp_path / "short.txt").write_text("1:0.5 0:0.9\n4:1.5\n")
    code, _, err = run(capsys, "evaluate", "--predictions", tmp_path / "short.txt", tmp_path / "test.txt")
    assert code == 2 and "short.txt:2:1: 1 predictions on a line, expected k = 2" in err
    assert got[0]["P@1"] == pytest.approx(1.0) and got[0]["P@2"] == pytest.approx(2 / 3)
    # libsvm test data has no label count: a predicted label absent from it is a miss, no error
    (tmp_path / "test.svm").write_text("0 1:1\n4,2 1:1\n3 1:1\n")
    (tmp_path / "unseen.txt").write_text("3 2\n1:0.5 0:0.9\n6:1.5 2:0.3\n0:0.1 3:0.2\n")
    got = json.loads(run(capsys, "evaluate", "--predictions", tmp_path / "unseen.txt", tmp_path / "test.svm",
                         "-k", 2, "--json")[1])
    assert got["P@1"] == pytest.approx(2 / 3) and got["P@2"] == pytest.approx(1 / 2)
    (tmp_path / "bad.txt").write_text("3 2\n1:0.5 0:0.9\n7:1.5 2:0.3\n0:0.1 3:0.2\n")
    code, _, err = run(capsys, "evaluate", "--predictions", tmp_path / "bad.txt", tmp_path / "test.txt")
    assert code == 2 and "bad.txt:3: label id 7 out of range [0, 5)" in err


def test_predict_header_dismec_is_two_numbers_as_dismec_and_pyxclib_read_it(trained, bibtex_dir, tmp_path, capsys):
    """--header dismec: 'rows k' (DiSMEC++'s predict), with the same lines as ours; the
    first line splits into exactly two numbers, as pyxclib's read_sparse_file takes it
    (helper-40: our three numbers made it fail), and evaluate scores it alike."""
    _, model = trained
    test = bibtex_dir / "test.txt.gz"
    outs = {}
    for header in ("headstart", "dismec"):
        out = tmp_path / f"{header}.txt"
        assert run(capsys, "predict", model, test, "-o", out, "--allow-gaps", "-k", 3, "--header", header)[0] == 0
        outs[header] = out.read_text().split("\n", 1)
    (ours, body), (theirs, body2) = outs["headstart"], outs["dismec"]
    assert body == body2 and ours.split()[:2] == theirs.split()
    rows, k = map(int, theirs.strip().split(" "))   # pyxclib: f.readline().strip().split(' ')
    # XMC test data announces its rows: the header is written final, not padded with
    # blanks for a rewrite (helper-49: a reader splitting on ' ' without strip failed)
    assert theirs == f"{rows} 3" and ours == f"{rows} 3 159"
    assert (rows, k) == (body.count("\n"), 3) and all(len(line.split()) == 3 for line in body.splitlines())
    got = [json.loads(run(capsys, "evaluate", "--predictions", tmp_path / f"{h}.txt", test, "-k", 3, "--json")[1])
           for h in ("headstart", "dismec")]
    assert got[0] == got[1]
    # only for top-k files: a decisions file's header is 'rows labels' already
    code, _, err = run(capsys, "predict", model, test, "-o", tmp_path / "d.txt", "--threshold", "0", "--header",
                       "dismec", "--allow-gaps")
    assert code == 2 and "--header is for top-k files" in err and not (tmp_path / "d.txt").exists()


def test_evaluate_dismec_metrics_and_save_metrics(tmp_path, capsys):
    """--dismec-metrics adds DiSMEC++'s names (hand-computed on the file above: top-1 labels 0, 4,
    3 all hit, so Abd@1 = 1 and every label 0, 2, 3, 4 predicted at k = 1 is right);
    --save-metrics writes the same numbers as --json, non-finite values as null, atomically."""
    (tmp_path / "p.txt").write_text("3 2\n1:0.5 0:0.9\n4:1.5 2:0.3\n0:0.1 3:0.2\n")
    (tmp_path / "test.txt").write_text("3 3 5\n0 1:1\n4,2 1:1\n3 1:1\n")
    args = ["evaluate", "--predictions", tmp_path / "p.txt", tmp_path / "test.txt", "-k", 2, "--dismec-metrics"]
    code, out, _ = run(capsys, *args, "--save-metrics", tmp_path / "m.json")
    assert code == 0 and "DiSMEC++'s metrics:" in out and "Abd@1           = 1" in out
    saved = json.loads((tmp_path / "m.json").read_text())
    printed = json.loads(run(capsys, *args, "--json")[1])
    assert saved == printed
    assert saved["P@1"] == 1.0 and saved["Abd@1"] == 1.0 and saved["MacroP@1"] == pytest.approx(3 / 5)
    assert saved["MicroP@1"] == 1.0 and saved["MicroR@1"] == pytest.approx(3 / 4)
    assert saved["MacroLR+@1"] is None            # a label without false positives: TPR / 0 = inf
    assert saved["InstanceDCG@2"] == pytest.approx((3 / math.log(2) + 1 / math.log(3)) / 3)   # ranks 1, 1 and 2, 1
    assert saved["InstanceP@1"] == saved["P@1"]
    # checked before any reading (the test file named here does not exist): a missing
    # directory, an input file, a file inside an input directory
    (tmp_path / "model").mkdir()
    missing = ["evaluate", "--predictions", tmp_path / "p.txt", tmp_path / "absent.txt"]
    for argv, target, needle in ((missing, tmp_path / "no" / "m.json", "does not exist"),
                                 (missing, tmp_path / "p.txt", "would replace an input"),
                                 (["evaluate", tmp_path / "model", tmp_path / "absent.txt"],
                                  tmp_path / "model" / "manifest.json", "would be written into")):
        code, _, err = run(capsys, *argv, "--save-metrics", target)
        assert code == 2 and needle in err and "absent.txt" not in err, err
    assert (tmp_path / "p.txt").read_text().startswith("3 2")
    # train's --stats inside the model directory it writes (its manifest: helper-46,
    # which replaced the model's manifest) -- refused before training, sharded or not
    for extra in ((), ("--shard-size", "2")):
        for target in (tmp_path / "model" / "manifest.json", tmp_path / "model" / "stats" / "s.csv"):
            code, _, err = run(capsys, "train", tmp_path / "absent.txt", "-o", tmp_path / "model", *extra,
                               "--stats", target)
            assert code == 2 and "the model directory this command writes" in err, err


def test_export_of_a_label_range_says_to_merge_first(trained, tmp_path, capsys):
    _, model = trained
    code, _, err = run(capsys, "export-dismec", model, "-o", tmp_path / "x.model")
    assert code == 2 and "model is incomplete, missing" in err and "'headstart merge'" in err
    assert "--allow-gaps" in err and not (tmp_path / "x.model").exists()
    # or as DiSMEC++'s partial model: its labels [3, 23) of 159
    assert run(capsys, "export-dismec", model, "-o", tmp_path / "x.model", "--allow-gaps")[0] == 0
    meta = json.loads((tmp_path / "x.model").read_text())
    assert meta["num-labels"] == 159 and [(f["first"], f["count"]) for f in meta["files"]] == [(3, 20)]


def test_unknown_options_are_reported_by_their_command_with_hints(bibtex_dir, capsys):
    """An option the command lacks is the command's usage error (its --help named), with
    DiSMEC++'s names mapped to headstart's and typos matched to close options."""
    data = bibtex_dir / "train.txt.gz"
    code, _, err = run(capsys, "train", data, "-o", "m", "--init-mode", "msi", "--epsilno", "0.1")
    assert code == 2 and err.startswith("headstart train: error: unrecognized arguments: --init-mode msi --epsilno")
    assert "--init-mode is DiSMEC++'s: here --init" in err and "--epsilno: did you mean --epsilon" in err
    assert "(see 'headstart train --help')" in err
    code, _, err = run(capsys, "train", data, "-o", "m", "--init", "msi")
    assert code == 2 and "msi is DiSMEC++'s name: here aop" in err


def test_options_that_nothing_reads_are_refused_or_warned_about(tmp_path, capsys, trained, bibtex_dir):
    """An option the other choices leave unread: a cost file or a model given for
    nothing is refused (DiSMEC++ refuses the file); a number is a warning; a cost file
    alone implies --weighting file, as --pretrained implies --init pretrained."""
    costs = tmp_path / "costs.txt"
    costs.write_text("2.0\n" * 159)
    code, out, err = run(capsys, "train", "--print-params", "--weights-pos-file", costs, "--weighting", "none")
    assert code == 2 and "--weights-pos-file is read only with --weighting file; --weighting is 'none'" in err
    code, out, err = run(capsys, "train", "--print-params", "--pretrained", tmp_path, "--init", "zero")
    assert code == 2 and "--pretrained is read only with --init pretrained (and the Newton-CG method: " in err
    assert "; --init is 'zero'" in err
    # exact L1 and the dual start from zero: the model --pretrained implies a start from was
    # ignored without a word (s80-h2)
    for argv, decided in ((["--regularizer", "l1-exact"], "--regularizer is 'l1-exact'"),
                          (["--init", "pretrained", "--regularizer", "l1-exact", "--l1-solver", "cdn"],
                           "--regularizer is 'l1-exact'"),
                          (["--l2-solver", "dual", "--regularize-bias"], "--l2-solver is 'dual'")):
        code, out, err = run(capsys, "train", "--print-params", "--pretrained", tmp_path, *argv)
        assert code == 2 and "--pretrained is read only with --init pretrained" in err and decided in err, (argv, err)
    code, out, err = run(capsys, "train", "--print-params", "--weights-pos-file", costs)
    assert code == 0 and json.loads(out)["weighting"] == "file" and "WARNING" not in err
    # checked with the parameters, before any data is read (helper-47: after reading it)
    code, out, err = run(capsys, "train", "--print-params", "--weighting", "2pm1", "--propensity-a", "-1")
    assert code == 2 and "propensity_a (--propensity-a) must be a finite number >= 0, got -1" in err, err
    for argv, needle in ((["--init", "zero", "--s", "0.5"], "--aop-s is read only with --init aop or multi-pos"),
                         (["--huber-epsilon", "0.3"], "--huber-epsilon is read only with --loss huber-hinge"),
                         (["--prune", "0.1", "--sparsify", "5"], "--prune is read only with --sparsify 0"),
                         (["--hash-seed", "3"], "--hash-seed is read only with --hash-buckets > 0"),
                         # the reason is what leaves it unread, not --init (helper-36)
                         (["--regularizer", "l1-exact", "--s", "0.5"], "l2_solver dual); --regularizer is 'l1-exact'"),
                         (["--l2-solver", "dual", "--regularize-bias", "--t", "-1"], "--l2-solver is 'dual'"),
                         # the Newton method's settings: the dual leaves them unread (helper-47)
                         (["--l2-solver", "dual", "--regularize-bias", "--cg-epsilon", "0.3"],
                          "--cg-epsilon is read only with --regularizer other than l1-exact, and l2_solver newton; "
                          "--l2-solver is 'dual'")):
        code, out, err = run(capsys, "train", "--print-params", *argv)
        assert code == 0 and "WARNING" in err and needle in err, (argv, err)
    # commands that run other initialisers than --init: their options are read
    for argv in (["experiment", bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz", "--inits", "aop,ovap", "-o", tmp_path / "ex"],
                 ["shortlist-train", "--init-sparse", "ovap"]):
        code, out, err = run(capsys, *argv, "--print-params", "--ovap-epsilon", "0.001")
        assert code == 0 and "WARNING" not in err, (argv, err)
    # what the choices read passes silently
    code, out, err = run(capsys, "train", "--print-params", "--init", "multi-pos", "--s", "0.5", "--max-num-pos", "3")
    assert code == 0 and "WARNING" not in err
    _, model = trained
    test = bibtex_dir / "test.txt.gz"
    code, out, err = run(capsys, "predict", model, test, "-o", tmp_path / "d.txt", "--threshold", "0", "-k", "3",
                         "--allow-gaps")
    assert code == 0 and "-k is not used with --threshold" in err


@pytest.mark.parametrize("argv, needle", [
    (["--C", "-1"], "parameter C (--C) must be a finite number > 0, got -1.0"),
    (["--C", "abc"], "argument --C/-C: expected a number, got 'abc'"),
    (["--max-iter", "1.5"], "argument --max-iter: expected an integer, got '1.5'"),
    (["--init", "magic"], "argument --init: invalid choice: 'magic'"),
    (["--s", "-3"], "parameter aop_t (--aop-t) must be smaller than aop_s=-3.0"),
    (["--num-labels", "0"], "argument --num-labels: must be >= 1"),
    (["--first-label", "500"], "first_label (--first-label) must be an integer in [0, 158]"),
    (["--first-label", "159"], "first_label (--first-label) must be an integer in [0, 158]"),
    (["--stats", "stats.txt"], "must end in .csv, .jsonl or .json"),
    (["--epsilon", "nan"], "parameter epsilon (--epsilon) must be a finite number > 0, got nan"),
    (["--timeout", "2x"], "argument --timeout: expected seconds or a duration like 90s, 30m, 2h, 1d; got '2x'"),
])
def test_bad_option_values_exit_2_and_leave_nothing(argv, needle, bibtex_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "train", bibtex_dir / "train.txt.gz", "-o", tmp_path / "m", *argv)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert os.listdir(tmp_path) == []


def test_params_file_errors(tmp_path, capsys):
    bad = tmp_path / "p.json"
    bad.write_text('{"C": 1.0,\n "nonsense": 2}')
    code, _, err = run(capsys, "train", "--params", bad, "--print-params")
    assert code == 2 and "p.json: unknown parameter(s) nonsense" in err
    bad.write_text('{"C": 1.0,\n "epsilon": }')
    code, _, err = run(capsys, "train", "--params", bad, "--print-params")
    assert code == 2 and "p.json:2:" in err and "not valid JSON" in err
    # a bad value names the file it came from; the same value given as an option names the option
    bad.write_text('{"C": -1.0}')
    code, _, err = run(capsys, "train", "--params", bad, "--print-params")
    assert code == 2 and f"{bad}: parameter C (--C) must be" in err
    code, _, err = run(capsys, "train", "--params", bad, "--C", "-2", "--print-params")
    assert code == 2 and "p.json" not in err and "parameter C (--C) must be" in err and "-2" in err
    code, out, _ = run(capsys, "train", "--params", bad, "--C", "2", "--print-params")
    assert code == 0 and json.loads(out)["C"] == 2
    # a model's manifest (what one reaches for to train 'like that model') is pointed to its params
    code, out, _ = run(capsys, "train", "--C", "3", "--print-params")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"format": "headstart-model", "params": json.loads(out), "shards": []}))
    code, _, err = run(capsys, "train", "--params", manifest, "--print-params")
    assert code == 2 and "is a model's manifest, not a parameters file" in err and "unknown parameter" not in err


# --------------------------------------------------------------------------- malformed files
MALFORMED = {
    # name: (content, [substrings of the message])
    "header_mismatch": ("3 5 4\n0 1:1\n1 2:1\n", ["bad.txt:4", "file ends after 2 points", "announces 3"]),
    "label_out_of_range": ("2 5 4\n0 1:1\n7 2:1\n", ["bad.txt:3:1", "label id 7 out of range", "'7'"]),
    "feature_out_of_range": ("2 5 4\n0 1:1\n1 9:1\n", ["bad.txt:3:3", "feature index 9 out of range", "'9:1'"]),
    "malformed_token": ("2 5 4\n0 1:1\n1 2:abc\n", ["bad.txt:3:3", "not a number", "'2:abc'"]),
    "nan_value": ("2 5 4\n0 1:1\n1 2:nan\n", ["bad.txt:3:3", "NaN or infinite", "'2:nan'"]),
    "infinite_value": ("2 5 4\n0 1:inf\n1 2:1\n", ["bad.txt:2:3", "NaN or infinite", "'1:inf'"]),
    "duplicate_feature": ("2 5 4\n0 1:1\n1 2:1 2:3\n", ["bad.txt:3:7", "duplicate feature index 2", "'2:3'"]),
    "empty_file": ("", ["bad.txt", "empty"]),
}


def _check_error(code, err, needles):
    assert code == 2, err
    assert "Traceback" not in err
    assert 1 <= len(err.strip().splitlines()) <= 2, err
    for n in needles:
        assert n in err, (n, err)


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_training_file(kind, tmp_path, capsys):
    content, needles = MALFORMED[kind]
    data = tmp_path / "bad.txt"
    data.write_text(content)
    code, out, err = run(capsys, "train", data, "-o", tmp_path / "model", "--stats", tmp_path / "s.csv")
    _check_error(code, err, needles)
    assert sorted(os.listdir(tmp_path)) == ["bad.txt"]  # no model, no statistics, no temporaries


@pytest.mark.parametrize("kind", ["header_mismatch", "feature_out_of_range", "malformed_token", "nan_value",
                                  "empty_file"])
def test_malformed_test_file_leaves_no_predictions(kind, trained, tmp_path, capsys):
    _, model_dir = trained
    content, needles = MALFORMED[kind]
    content = content.replace(" 5 4\n", " 1836 159\n").replace("9:1", "1836:1")
    needles = [n.replace("9:1", "1836:1").replace("index 9", "index 1836") for n in needles]
    data = tmp_path / "bad.txt"
    data.write_text(content)
    code, out, err = run(capsys, "predict", model_dir, data, "-o", tmp_path / "p.txt", "--allow-gaps",
                         "--chunk-rows", 1)
    _check_error(code, err, needles)
    assert sorted(os.listdir(tmp_path)) == ["bad.txt"]
    code, out, err = run(capsys, "evaluate", model_dir, data, "--allow-gaps")
    _check_error(code, err, needles)


def test_missing_files(tmp_path, capsys):
    code, _, err = run(capsys, "train", tmp_path / "nope.txt", "-o", tmp_path / "m")
    _check_error(code, err, ["nope.txt", "No such file"])
    code, _, err = run(capsys, "predict", tmp_path / "nomodel", tmp_path / "x.txt", "-o", tmp_path / "p.txt")
    _check_error(code, err, ["nomodel", "does not exist"])
    code, _, err = run(capsys, "info", tmp_path / "nope.txt")
    _check_error(code, err, ["nope.txt", "No such file"])
    assert os.listdir(tmp_path) == []


def test_output_checked_before_training(bibtex_dir, tmp_path, capsys):
    (tmp_path / "notamodel").mkdir()
    (tmp_path / "notamodel" / "keep.txt").write_text("x")
    code, _, err = run(capsys, "train", bibtex_dir / "train.txt.gz", "-o", tmp_path / "notamodel")
    _check_error(code, err, ["notamodel", "not a headstart model"])
    code, _, err = run(capsys, "train", bibtex_dir / "train.txt.gz", "-o", tmp_path / "no" / "such" / "m")
    _check_error(code, err, ["does not exist"])


def test_a_model_directory_holding_a_users_file_is_never_replaced(bibtex_dir, tmp_path, capsys):
    """Commands that replace a model directory refuse one that also holds a file headstart
    did not write (naming it) before any training, and the file stays; --resume, which
    writes into the model in place, still continues it; headstart's own model is
    replaced as before."""
    data = bibtex_dir / "train.txt.gz"
    out = tmp_path / "m"
    code, _, err = run(capsys, "train", data, "-o", out, "--num-labels", 2, "--threads", 1, "-q")
    assert code == 0, err
    (out / "notes.txt").write_text("my results")
    for argv in (("train", data, "-o", out, "--num-labels", 2, "--stats", tmp_path / "s.csv", "--threads", 1),
                 ("train", data, "-o", out, "--num-labels", 2, "--shard-size", 1, "--threads", 1),
                 ("tree", data, "-o", out, "--threads", 1), ("merge", out, out)):
        code, _, err = run(capsys, *argv)
        _check_error(code, err, [str(out), "also holds notes.txt, which headstart did not write",
                                 "refusing to replace it"])
        assert (out / "notes.txt").read_text() == "my results"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]      # no statistics: refused before
    code, _, err = run(capsys, "train", data, "-o", out, "--num-labels", 3, "--threads", 1, "-q", "--resume")
    assert code == 0, err
    assert (out / "notes.txt").read_text() == "my results"
    assert json.loads((out / "manifest.json").read_text())["label_range"] == [0, 3]
    (out / "notes.txt").unlink()
    code, _, err = run(capsys, "train", data, "-o", out, "--num-labels", 2, "--threads", 1, "-q")
    assert code == 0, err
    assert json.loads((out / "manifest.json").read_text())["label_range"] == [0, 2]
    assert sorted(p.name for p in out.iterdir()) == ["label_counts.npz", "manifest.json", "preprocessing.npz",
                                                      "shards"]


def test_edge_cases_found_by_probing(tmp_path, capsys, monkeypatch):
    """helper-27's findings: no labels at all is refused before training; -o naming a link
    to a model leaves no temporary directory behind (the model is written through the
    link: its target gets the new model); merge refuses an output that is an input through a link or lies
    inside one; a label tree of one label is evaluated at k = 1; a start already at the
    optimum of a label whose gradient at 0 is 0 is converged, not 'not converged'; a
    dense conversion larger than memory is refused before it is tried."""
    (tmp_path / "zero.txt").write_text("3 3 0\n 0:1\n 1:1\n 2:1\n")
    code, _, err = run(capsys, "train", tmp_path / "zero.txt", "-o", tmp_path / "z")
    assert code == 2 and "zero.txt: the data has no labels" in err and not (tmp_path / "z").exists()
    (tmp_path / "nof.txt").write_text("3 0 3\n0\n1\n2\n")
    code, _, err = run(capsys, "train", tmp_path / "nof.txt", "-o", tmp_path / "z")
    assert code == 2 and "nof.txt: the data has no features" in err and not (tmp_path / "z").exists()
    one = tmp_path / "one.txt"
    one.write_text("3 3 1\n0 0:1\n 1:1\n0 2:1\n")
    assert run(capsys, "train", one, "-o", tmp_path / "real", "-q")[0] == 0
    (tmp_path / "link").symlink_to(tmp_path / "real")
    before = (tmp_path / "real" / "manifest.json").read_bytes()
    assert run(capsys, "train", one, "-o", tmp_path / "link", "-q", "--C", "2")[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    # written through the link, as files are (helper-109): the link stays, its target is the new model
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real" / "manifest.json").read_bytes() != before
    assert json.loads((tmp_path / "real" / "manifest.json").read_text())["params"]["C"] == 2
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    for out, needle in ((tmp_path / "alias", "is also an input"), (tmp_path / "real" / "x", "lies inside the input")):
        code, _, err = run(capsys, "merge", out, tmp_path / "real", tmp_path / "link")
        assert code == 2 and needle in err
    assert run(capsys, "tree", one, "-o", tmp_path / "t", "-q")[0] == 0
    code, out, err = run(capsys, "evaluate", tmp_path / "t", one, "--json")
    assert code == 0 and set(json.loads(out)) >= {"P@1"} and "P@5" not in json.loads(out), err
    (tmp_path / "w.txt").write_text("4 5 2\n0,1 0:1\n0 \n0 1:0\n0,1 0:-1 1:0\n")
    code, out, err = run(capsys, "train", tmp_path / "w.txt", "-o", tmp_path / "w", "--init", "ovap")
    assert code == 0 and "not converged" not in out, out
    import headstart.resources

    monkeypatch.setattr(headstart.resources, "available_memory", lambda: 1 << 20)    # 1 MiB free
    (tmp_path / "wide.txt").write_text("2 1000000 1\n0 0:1 999999:2\n 5:1\n")      # 16 MB to write
    code, _, err = run(capsys, "convert", tmp_path / "wide.txt", tmp_path / "X.npy", "--to", "slice",
                       "--out-labels", tmp_path / "Y.txt")
    assert code == 2 and "the slice layout is for dense data" in err and not (tmp_path / "X.npy").exists()


def test_internal_errors_exit_1_with_traceback_only_when_verbose(monkeypatch, tmp_path, capsys):
    import headstart.cli.info as info

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(info, "data_info", boom)
    f = tmp_path / "x.txt"
    f.write_text("1 1 1\n0 0:1\n")
    code, _, err = run(capsys, "info", f)
    assert code == 1 and "internal error: RuntimeError: kaboom" in err and "Traceback" not in err
    code, _, err = run(capsys, "info", f, "-v")
    assert code == 1 and "Traceback" in err


# --------------------------------------------------------------------------- formats
def test_convert_between_formats(tmp_path, capsys):
    from headstart.io import read_slice, read_xmc

    lib = tmp_path / "in.svm"
    lib.write_text("0,2 1:0.5 3:2\n1 2:1\n 4:1\n")   # libsvm: 1-based features, no header
    code, out, err = run(capsys, "convert", lib, tmp_path / "out.txt.gz")
    assert code == 0, err
    X, Y = read_xmc(tmp_path / "out.txt.gz")
    np.testing.assert_array_equal(X.toarray(), [[0.5, 0, 2, 0], [0, 1, 0, 0], [0, 0, 0, 1]])
    np.testing.assert_array_equal(Y.toarray(), [[1, 0, 1], [0, 1, 0], [0, 0, 0]])
    code, out, err = run(capsys, "convert", tmp_path / "out.txt.gz", tmp_path / "X.npy", "--to", "slice",
                         "--out-labels", tmp_path / "Y.txt")
    assert code == 0, err
    X2, Y2 = read_slice(tmp_path / "X.npy", tmp_path / "Y.txt")
    np.testing.assert_array_equal(X2, X.toarray())
    code, out, err = run(capsys, "info", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt", "--json")
    assert code == 0, err
    assert json.loads(out)["format"] == "slice"
    code, out, err = run(capsys, "info", tmp_path / "X.npy")     # alone: described, pointing to --labels
    assert code == 0 and "shape: 3 x 4" in out and "--labels Y.txt" in out, err
    # OUT's .npy name means the slice layout (helper-49: XMC text was written into it)
    code, _, err = run(capsys, "convert", lib, tmp_path / "X2.npy", "--out-labels", tmp_path / "Y2.txt")
    assert code == 0, err
    np.testing.assert_array_equal(read_slice(tmp_path / "X2.npy", tmp_path / "Y2.txt")[0], X.toarray())
    for extra, words in (([], ["--to slice writes two files", "--out-labels FILE"]),
                         (["--to", "xmc"], ["ends in .npy", "--to xmc writes text"]),
                         # helper-57: the labels replaced the features, reported as written
                         (["--out-labels", str(tmp_path / "." / "X3.npy")], ["--out-labels", "is OUT"])):
        code, _, err = run(capsys, "convert", lib, tmp_path / "X3.npy", *extra)
        _check_error(code, err, words)
        assert not (tmp_path / "X3.npy").exists()
    # DiSMEC++'s --xmc-one-based-index files: features and labels from 1 (helper-57: the
    # labels stayed 0-based, so DiSMEC++ read label l as l - 1 and refused label 0)
    code, _, err = run(capsys, "convert", lib, tmp_path / "one.txt", "--out-one-based", "--out-one-based-labels")
    assert code == 0, err
    assert (tmp_path / "one.txt").read_text().splitlines()[1:] == ["1,3 1:0.5 3:2", "2 2:1", " 4:1"]
    X1, Y1 = read_xmc(tmp_path / "one.txt", one_based=True, one_based_labels=True)
    assert (X1 != X).nnz == 0 and (Y1 != Y).nnz == 0
    code, _, err = run(capsys, "convert", lib, tmp_path / "one.svm", "--to", "libsvm", "--out-one-based-labels")
    _check_error(code, err, ["--out-one-based-labels is only for --to xmc"])
    # --float64 keeps what float32 would round (helper-57: no way to keep it)
    (tmp_path / "f.txt").write_text("2 3 2\n0 0:3.14159265358979 2:16777217\n1 1:0.1\n")
    for extra, first_line in (([], "0 0:3.1415927 2:16777216"), (["--float64"], "0 0:3.14159265358979 2:16777217")):
        code, _, err = run(capsys, "convert", tmp_path / "f.txt", tmp_path / "f2.txt", *extra)
        assert code == 0 and (tmp_path / "f2.txt").read_text().splitlines()[1] == first_line, err
    code, _, err = run(capsys, "convert", tmp_path / "f.txt", tmp_path / "f.npy", "--out-labels", tmp_path / "fy.txt",
                       "--float64")
    _check_error(code, err, ["--float64 is for --to xmc or libsvm"])


def test_train_on_libsvm_and_slice(tmp_path, capsys):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(60):
        feats = sorted(rng.choice(np.arange(1, 11), size=3, replace=False))
        lab = [str(i % 3)] + ([str(3)] if i % 7 == 0 else [])
        lines.append(",".join(lab) + " " + " ".join(f"{f}:1" for f in feats))
    (tmp_path / "d.svm").write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "train", tmp_path / "d.svm", "-o", tmp_path / "m", "--threads", 1)
    assert code == 0, err
    assert "trained 4 labels" in out
    run(capsys, "convert", tmp_path / "d.svm", tmp_path / "X.npy", "--to", "slice", "--out-labels", tmp_path / "Y.txt")
    code, out, err = run(capsys, "train", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt", "-o",
                         tmp_path / "m2", "--threads", 1)
    assert code == 0, err
    code, out, err = run(capsys, "evaluate", tmp_path / "m2", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt",
                         "--json", "-k", 2)
    assert code == 0, err
    assert set(json.loads(out)) >= {"P@1", "P@2", "nDCG@2", "PSP@2", "R@2", "cov@2"}
    ref = json.loads(out)
    # a second data file has its own format and labels: --labels is DATA's (it made every
    # file of the command slice data: an XMC --train was 'not a .npy file')
    for extra in (["--train", tmp_path / "d.svm"], ["--train", tmp_path / "X.npy", "--train-labels", tmp_path / "Y.txt"]):
        code, out, err = run(capsys, "evaluate", tmp_path / "m2", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt",
                             "--json", "-k", 2, *extra)
        assert code == 0, err
        assert json.loads(out) == ref    # the same counts as the model's: the same propensities
    code, out, err = run(capsys, "evaluate", tmp_path / "m2", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt",
                         "--train", tmp_path / "X.npy")
    _check_error(code, err, ["X.npy", "add --train-labels FILE"])
    code, out, err = run(capsys, "shortlist", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt", "-K", 2, "-o",
                         tmp_path / "sl.txt", "--test", tmp_path / "X.npy", "--test-labels", tmp_path / "Y.txt")
    assert code == 0 and "recall on" in out, err
    code, out, err = run(capsys, "shortlist", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt", "-K", 2, "-o",
                         tmp_path / "sl2.txt", "--test-labels", tmp_path / "Y.txt")
    _check_error(code, err, ["--test-labels is the label file of --test"])
    code, out, err = run(capsys, "evaluate", tmp_path / "m2", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt",
                         "--train-labels", tmp_path / "Y.txt")
    assert code == 2 and "--train-labels is the label file of --train" in err
    # prediction needs no labels: libsvm label ids beyond the model's, a .npy without
    # --labels, an XMC file with another label count
    (tmp_path / "t.svm").write_text("7 1:1\n0 2:1\n")
    code, out, err = run(capsys, "predict", tmp_path / "m", tmp_path / "t.svm", "-o", tmp_path / "ts.txt", "-k", 1)
    assert code == 0, err
    code, out, err = run(capsys, "evaluate", tmp_path / "m", tmp_path / "t.svm")   # label 7: a miss
    assert code == 0 and "1 positive(s) of 1 label id(s) beyond the model's" in err, err
    # features training never saw (ids beyond the model's): ignored with a warning, as
    # LIBLINEAR's predict does -- the same predictions as without them
    (tmp_path / "u.svm").write_text("0 1:1 12:5\n1 2:1\n2 99:1\n")
    (tmp_path / "v.svm").write_text("0 1:1\n1 2:1\n2\n")
    for name in ("u", "v"):
        code, out, err = run(capsys, "predict", tmp_path / "m", tmp_path / f"{name}.svm", "-o", tmp_path / f"{name}.txt")
        assert code == 0, err
    assert (tmp_path / "u.txt").read_bytes() == (tmp_path / "v.txt").read_bytes()
    code, out, err = run(capsys, "evaluate", tmp_path / "m", tmp_path / "u.svm", "--json")
    assert code == 0 and "2 value(s) in 2 instance(s) of feature ids the model was not trained on (beyond its 10 features)" in err
    code, out, err = run(capsys, "predict", tmp_path / "m2", tmp_path / "X.npy", "-o", tmp_path / "nl.txt")
    assert code == 0, err
    code, out, err = run(capsys, "predict", tmp_path / "m2", tmp_path / "X.npy", "--labels", tmp_path / "Y.txt",
                         "-o", tmp_path / "wl.txt")
    assert code == 0 and (tmp_path / "nl.txt").read_bytes() == (tmp_path / "wl.txt").read_bytes()
    code, out, err = run(capsys, "evaluate", tmp_path / "m2", tmp_path / "X.npy")
    assert code == 2 and "--labels" in err
    # a dense array's width is its feature space: fewer columns are refused, not padded
    np.save(tmp_path / "X9.npy", np.load(tmp_path / "X.npy")[:, :9])
    for cmd in (["evaluate", tmp_path / "m2"], ["predict", tmp_path / "m2", "-o", tmp_path / "p.txt"]):
        code, out, err = run(capsys, *cmd[:2], tmp_path / "X9.npy", *cmd[2:], "--labels", tmp_path / "Y.txt")
        assert code == 2 and "X9.npy" in err and "9 columns but the model was trained on 10" in err
        assert not (tmp_path / "p.txt").exists()


def test_a_narrower_feature_header_is_read_with_a_warning(trained, tmp_path, capsys):
    """An XMC file declaring fewer features than the model: its features are the model's
    first ones (the rest absent), said once on stderr."""
    _, model = trained
    (tmp_path / "t.txt").write_text("2 1000 159\n3,4 0:1 7:0.5\n5 999:1\n")
    code, out, err = run(capsys, "evaluate", model, tmp_path / "t.txt", "--allow-gaps", "--json")
    assert code == 0, err
    assert err.count("declares 1000 features, the model was trained on 1836") == 1
    (tmp_path / "u.txt").write_text("2 1836 0\n 0:1 7:0.5\n 999:1\n")   # unlabelled: predict only
    code, out, err = run(capsys, "predict", model, tmp_path / "u.txt", "--allow-gaps", "-o", tmp_path / "p.txt")
    assert code == 0, err
    code, out, err = run(capsys, "evaluate", model, tmp_path / "u.txt", "--allow-gaps")
    assert code == 2 and "0 labels but the model's label space has 159" in err
    # a label space but no positive: the metrics are all 0, which is said (helper-102)
    (tmp_path / "v.txt").write_text("2 1836 159\n 0:1 7:0.5\n 999:1\n")
    code, out, err = run(capsys, "evaluate", model, tmp_path / "v.txt", "--allow-gaps")
    assert code == 0 and "no instance of" in err and "has a label: every metric below is 0" in err, err


def test_evaluate_threshold_gives_libmultilabel_f1_in_memory_and_streamed(trained, bibtex_dir, capsys):
    """--threshold: Micro-/Macro-/Another-Macro-F1 of every label's decision score > T
    (and Macro-F1 over the labels of the test data), the same whether the model is held
    in memory or streamed shard by shard, and equal to the library's of predict_above."""
    import headstart
    from headstart.io import read_xmc
    from headstart.metrics import decision_counts, f1_scores, macro_f1_over_test_labels
    from headstart.prediction.topk import predict_above

    _, model_dir = trained
    test = bibtex_dir / "test.txt.gz"
    X, Y = read_xmc(test)
    clf = headstart.load(model_dir, allow_gaps=True)
    D = predict_above(clf.model_, X, -0.5, n_columns=Y.shape[1])
    want = {**f1_scores(Y, D), "Test-Label-Macro-F1": macro_f1_over_test_labels(*decision_counts(Y, D))}
    assert 0 < want["Micro-F1"] < 1
    for extra in ([], ["--model-memory", "0"]):
        code, out, err = run(capsys, "evaluate", model_dir, test, "--allow-gaps", "--threshold", "-0.5", "--json",
                             *extra)
        assert code == 0, err
        got = json.loads(out)
        assert {k: got[k] for k in want} == pytest.approx(want)
        assert "RP@5" in got
    code, out, err = run(capsys, "evaluate", model_dir, test, "--allow-gaps", "--threshold", "0")
    assert code == 0 and "Micro-F1" in out and "RP@k" in out
    code, out, err = run(capsys, "evaluate", "--predictions", model_dir / "nothere.txt", test, "--threshold", "0")
    assert code == 2 and "--threshold needs the model" in err


def test_evaluate_ranks_a_predictions_file_by_its_scores(trained, bibtex_dir, tmp_path, capsys):
    """A predictions file whose lines do not list the labels best first (another tool's:
    DiSMEC++'s header or none) is ranked by the scores, not by position: the same metrics
    as the sorted file.  headstart's own header says the lines are ranked: kept as listed
    (shortlist-predict's added labels come after the stage's own, helper-106)."""
    _, model_dir = trained
    test = bibtex_dir / "test.txt.gz"
    pred = tmp_path / "p.txt"
    assert run(capsys, "predict", model_dir, test, "-o", pred, "--allow-gaps", "-k", "5")[0] == 0
    head, body = pred.read_text().split("\n", 1)
    rev_body = "".join(" ".join(line.split()[::-1]) + "\n" for line in body.strip("\n").split("\n"))
    code, want, err = run(capsys, "evaluate", "--predictions", pred, test, "--json")
    assert code == 0, err
    for name, header in (("dismec.txt", " ".join(head.split()[:2]) + "\n"), ("none.txt", "")):
        (tmp_path / name).write_text(header + rev_body)
        code, got, err = run(capsys, "evaluate", "--predictions", tmp_path / name, test, "--json")
        assert code == 0, err
        assert json.loads(got) == json.loads(want), name
    (tmp_path / "ours.txt").write_text(head + "\n" + rev_body)
    code, got, err = run(capsys, "evaluate", "--predictions", tmp_path / "ours.txt", test, "--json")
    assert code == 0, err
    assert json.loads(got)["P@1"] < json.loads(want)["P@1"]


def test_predict_writes_label_names(trained, bibtex_dir, tmp_path, capsys):
    """--label-names: each label id written as line id + 1 of the names file (with blanks,
    colons, non-ASCII, CRLF line ends, gzip or a vectorizer directory), tokens separated by
    tabs (blanks if no name holds one), scores as in the id file; a wrong line count or a tab refused before any output."""
    _, model_dir = trained
    test = bibtex_dir / "test.txt.gz"
    names = [f"tag {i}: é{i}" for i in range(159)]
    (tmp_path / "names.txt").write_bytes("".join(f"{x}\r\n" for x in names).encode())
    (tmp_path / "vec").mkdir()
    (tmp_path / "vec" / "labels.txt").write_text("".join(f"{x}\n" for x in names), encoding="utf-8")
    assert run(capsys, "predict", model_dir, test, "-o", tmp_path / "ids.txt", "--allow-gaps")[0] == 0
    ids = (tmp_path / "ids.txt").read_text().splitlines()
    for source, out in (("names.txt", "n.txt"), ("vec", "v.txt.gz")):
        code, _, err = run(capsys, "predict", model_dir, test, "-o", tmp_path / out, "--allow-gaps",
                           "--label-names", tmp_path / source)
        assert code == 0, err
        with gzip.open(tmp_path / out, "rt", encoding="utf-8") if out.endswith(".gz") else open(
                tmp_path / out, encoding="utf-8") as f:
            named = f.read().splitlines()
        assert named[0].split() == ids[0].split() and len(named) == len(ids)
        for a, b in zip(ids[1:], named[1:]):
            want = [(names[int(t.split(":")[0])], t.split(":")[1]) for t in a.split(" ")]
            assert [tuple(t.rsplit(":", 1)) for t in b.split("\t")] == want
    for flag in ([], ["--label-names", tmp_path / "names.txt"]):
        code, _, err = run(capsys, "predict", model_dir, test, "-o", tmp_path / f"d{len(flag)}.txt", "--allow-gaps",
                           "--threshold=-0.5", *flag)
        assert code == 0, err
    ids = (tmp_path / "d0.txt").read_text().splitlines()
    named = (tmp_path / "d2.txt").read_text(encoding="utf-8").splitlines()
    assert len(named) == len(ids) and sum(bool(line) for line in ids[1:]) > 100
    assert [[tuple(t.rsplit(":", 1)) for t in b.split("\t")] if b else [] for b in named[1:]] == \
        [[(names[int(t.split(":")[0])], t.split(":")[1]) for t in a.split()] for a in ids[1:]]
    code, _, err = run(capsys, "evaluate", "--predictions", tmp_path / "n.txt", test)
    assert code == 2 and "holds label names" in err
    # names without blanks: blank-separated, with --header none LibMultiLabel's layout
    # (helper-51: tabs), which evaluate still tells from ids
    (tmp_path / "plain.txt").write_text("".join(f"C{i}\n" for i in range(159)))
    for header, out in (("headstart", "p.txt"), ("none", "lml.txt")):
        code, _, err = run(capsys, "predict", model_dir, test, "-o", tmp_path / out, "--allow-gaps",
                           "--label-names", tmp_path / "plain.txt", "--header", header)
        assert code == 0, err
    lml = (tmp_path / "lml.txt").read_text().splitlines()
    assert len(lml) == len(ids) - 1 and "\t" not in "".join(lml)
    assert [line.split(" ") for line in lml] == [[f"C{t.split(':')[0]}:{t.split(':')[1]}" for t in a.split()]
                                                 for a in (tmp_path / "ids.txt").read_text().splitlines()[1:]]
    for named_file in ("p.txt", "lml.txt"):   # lml.txt: no header (helper-111: no hint there)
        code, _, err = run(capsys, "evaluate", "--predictions", tmp_path / named_file, test)
        assert code == 2 and "holds label names" in err, err
    code, _, err = run(capsys, "predict", model_dir, test, "-o", tmp_path / "vec" / "labels.txt", "--allow-gaps",
                       "--label-names", tmp_path / "vec")
    assert code == 2 and "would be written into" in err
    (tmp_path / "short.txt").write_text("a\nb\n")
    (tmp_path / "tab.txt").write_text("".join(f"{x}\n" for x in names[:7]) + "a\tb\n" +
                                      "".join(f"{x}\n" for x in names[8:]))
    for bad, needle in (("short.txt", "short.txt: 2 label names (lines) for a model of 159 labels"),
                        ("tab.txt", "tab.txt:8: a label name holds a tab")):
        code, _, err = run(capsys, "predict", model_dir, test, "-o", tmp_path / "x.txt", "--allow-gaps",
                           "--label-names", tmp_path / bad)
        assert code == 2 and needle in err
        assert not (tmp_path / "x.txt").exists()


def test_predict_probability_refused_for_other_losses(trained, bibtex_dir, tmp_path, capsys):
    """(What --probability writes for a logistic model: tests/test_sklearn.py.)"""
    code, _, err = run(capsys, "predict", trained[1], bibtex_dir / "test.txt.gz", "-o", tmp_path / "x.txt",
                       "--allow-gaps", "--probability")
    assert code == 2 and "--probability needs a model trained with --loss logistic" in err
    assert not (tmp_path / "x.txt").exists()


def test_predict_threshold_writes_every_decision_with_its_score(trained, bibtex_dir, tmp_path, capsys):
    """predict --threshold T: per instance every label with score > T, best first, its
    score the decision function's; the same file whether the model is held in memory or
    streamed shard by shard, gzip or not; read back as a label file it is predict_above."""
    import headstart
    from headstart.io import read_label_file, read_xmc
    from headstart.prediction.topk import decision_function, predict_above

    _, model_dir = trained
    test = bibtex_dir / "test.txt.gz"
    X, Y = read_xmc(test)
    clf = headstart.load(model_dir, allow_gaps=True)
    S = decision_function(clf.model_, X)                # (n, 20): labels 3..22
    texts = []
    for name, extra in (("d.txt", []), ("d2.txt.gz", ["--model-memory", "0"])):
        out = tmp_path / name
        code, printed, err = run(capsys, "predict", model_dir, test, "-o", out, "--allow-gaps", "--threshold=-0.25",
                                 *extra)
        assert code == 0, err
        assert "2515 instances" in printed
        D = read_label_file(out)
        want = predict_above(clf.model_, X, -0.25, n_columns=Y.shape[1])
        assert D.shape == want.shape and (D != want).nnz == 0 and D.nnz > 100
        raw = (gzip.decompress(out.read_bytes()) if name.endswith(".gz") else out.read_bytes()).decode()
        texts.append(raw.split("\n", 1)[1])
        assert raw.split("\n", 1)[0].split() == ["2515", str(Y.shape[1])]
    assert texts[0] == texts[1]
    for i, line in enumerate(texts[0].split("\n")[:300]):
        toks = [t.split(":") for t in line.split()]
        labs = [int(a) for a, _ in toks]
        scores = [float(b) for _, b in toks]
        assert scores == sorted(scores, reverse=True)
        assert sorted(labs) == [int(j) + 3 for j in np.flatnonzero(S[i] > -0.25)]
        np.testing.assert_allclose(scores, S[i, np.array(labs, dtype=int) - 3], rtol=1e-5, atol=1e-6)
    code, _, err = run(capsys, "predict", model_dir, test, "-o", tmp_path / "x.txt", "--allow-gaps",
                       "--threshold", "nan")
    assert code == 2 and not (tmp_path / "x.txt").exists()


def test_an_instance_the_preprocessing_refuses_is_named_by_its_place_in_the_file(tmp_path, capsys):
    """A test instance outside the model's transform domain is named by the file and its
    line (XMC) or its instance number (libsvm), whatever --chunk-rows (it was the row
    within the block before); a FIFO as output is refused before any work."""
    rng = np.random.default_rng(3)
    n, d = 80, 6
    X = rng.random((n, d)).astype(np.float32)
    Y = (rng.random((n, 3)) < 0.4).astype(np.float32)
    import scipy.sparse as sp
    from headstart.io import write_xmc

    write_xmc(tmp_path / "train.txt", sp.csr_matrix(X), sp.csr_matrix(Y))
    X[70, 0] = -0.5
    write_xmc(tmp_path / "test.txt", sp.csr_matrix(X), sp.csr_matrix(Y))
    body = (tmp_path / "test.txt").read_text().split("\n", 1)[1]
    (tmp_path / "test.svm").write_text("".join(
        line.split(" ", 1)[0] + " " + " ".join(f"{int(t.split(':')[0]) + 1}:{t.split(':')[1]}"
                                               for t in line.split(" ")[1:]) + "\n"
        for line in body.strip().split("\n")))
    model = tmp_path / "m"
    code, _, err = run(capsys, "train", tmp_path / "train.txt", "-o", model, "--transform", "sqrt", "-q")
    assert code == 0, err
    for chunk in ("16", "16384"):
        code, _, err = run(capsys, "predict", model, tmp_path / "test.txt", "-o", tmp_path / "p.txt",
                           "--chunk-rows", chunk)
        assert code == 2 and f"{tmp_path / 'test.txt'}:72: the feature transform sqrt needs values >= 0" in err, err
        code, _, err = run(capsys, "evaluate", model, tmp_path / "test.svm", "--chunk-rows", chunk, "--threshold", "0")
        assert code == 2 and f"{tmp_path / 'test.svm'}: instance 70 (counting from 0): the feature" in err, err
    code, _, err = run(capsys, "train", tmp_path / "test.txt", "-o", tmp_path / "m2", "--transform", "sqrt")
    assert code == 2 and "test.txt:72: the feature transform sqrt" in err
    os.mkfifo(tmp_path / "fifo")
    code, _, err = run(capsys, "predict", model, tmp_path / "train.txt", "-o", tmp_path / "fifo")
    assert code == 2 and "not a regular file" in err
    # a link to a pipe (/dev/stdout into a pipe) is the pipe, not the name it resolves to
    os.symlink(f"/proc/self/fd/{os.open(tmp_path / 'fifo', os.O_RDWR)}", tmp_path / "out")
    code, _, err = run(capsys, "predict", model, tmp_path / "train.txt", "-o", tmp_path / "out")
    assert code == 2 and "not a regular file" in err, err
    code, _, err = run(capsys, "predict", model, tmp_path / "train.txt", "-o", "-")
    assert code == 2 and "not to standard output" in err and not os.path.exists("-")


def test_an_output_where_no_file_can_be_created_is_named_with_the_reason(trained, bibtex_dir, tmp_path, capsys):
    """-o /proc/p.txt said only "/proc/p.txt: No such file or directory", after the
    prediction (outsider probe): /proc exists but takes no new files, which the permission
    bits did not tell (root passes them).  Now refused before the work, with the reason;
    nothing is left behind."""
    from headstart.io.atomic import atomic_write

    _, model = trained
    data = bibtex_dir / "test.txt.gz"
    cases = [(tmp_path / "none" / "p.txt", f"{tmp_path / 'none'} does not exist"),
             (Path(__file__) / "p.txt", f"{Path(__file__)} is not a directory")]
    if os.path.isdir("/proc/self"):
        cases.append((Path("/proc/p.txt"), "cannot create a file in /proc: No such file or directory (the "
                                           "directory exists but takes no new files)"))
    if os.geteuid() != 0:     # (root writes into a mode-555 directory)
        (tmp_path / "ro").mkdir(mode=0o555)
        cases.append((tmp_path / "ro" / "p.txt", f"{tmp_path / 'ro'} is not writable"))
    for out, why in cases:
        code, _, err = run(capsys, "predict", model, data, "-o", out, "--allow-gaps")
        assert code == 2 and f"error: {out}: cannot write the predictions file: {why}" in err, err
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["ro"] if os.geteuid() != 0 else [])
    if os.path.isdir("/proc/self"):
        # the library's writer (no check before it) says the same of the file asked for
        with pytest.raises(FileNotFoundError, match="cannot create a file in /proc") as e:
            with atomic_write("/proc/p.txt", "w"):
                pass
        assert e.value.filename == "/proc/p.txt"



def test_an_output_through_a_symbolic_link_is_checked_where_it_will_be_written(trained, bibtex_dir, tmp_path,
                                                                                capsys):
    """The atomic write creates its file beside a link's target, so the check before the
    work looks there (helper-88): -o /proc/self/fd/N (or /dev/fd/N, as a shell's
    redirection gives) onto a file was refused since /proc takes no new files, and a link
    into a missing directory passed the check and failed after the work."""
    _, model = trained
    data = bibtex_dir / "test.txt.gz"
    (tmp_path / "lnk").symlink_to(tmp_path / "missing" / "p.txt")
    code, _, err = run(capsys, "predict", model, data, "-o", tmp_path / "lnk", "--allow-gaps")
    assert code == 2 and f"cannot write the predictions file: {tmp_path / 'missing'} does not exist" in err, err
    if os.path.isdir("/proc/self/fd"):
        fd = os.open(tmp_path / "out.txt", os.O_WRONLY | os.O_CREAT)
        try:
            code, _, err = run(capsys, "predict", model, data, "-o", f"/proc/self/fd/{fd}", "-k", 1,
                               "--allow-gaps")
        finally:
            os.close(fd)
        assert code == 0, err
        assert len((tmp_path / "out.txt").read_text().splitlines()) == 2516     # header + every test row
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lnk"] + (["out.txt"] if os.path.isdir("/proc/self/fd")
                                                                    else [])

# --------------------------------------------------------------------------- process level
def test_python_dash_m_headstart_exit_codes(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("2 5 4\n0 1:1\n1 2:abc\n")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    r = subprocess.run([sys.executable, "-m", "headstart", "train", str(bad), "-o", str(tmp_path / "m")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("headstart train: error: ")
    assert "bad.txt:3:3" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "m").exists()
    r = subprocess.run([sys.executable, "-m", "headstart", "--version"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("headstart ")


#: a sitecustomize for the child: the start-up stops in the import of $STALL_AT (says so
#: on stderr and sleeps), so that the SIGINT surely lands there
_STALL = """
import os, sys, time


class _Stall:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["STALL_AT"]:
            sys.meta_path.remove(self)
            print("stalled", file=sys.stderr, flush=True)
            time.sleep(60)
            print("not interrupted", file=sys.stderr, flush=True)
        return None


sys.meta_path.insert(0, _Stall())
"""


@pytest.mark.parametrize("stall_at", ["headstart.estimator", "headstart.cli.cache_writes", "headstart.cli.train"])
@pytest.mark.parametrize("how", ["script", "dash-m"])
def test_ctrl_c_while_the_command_starts_is_one_line_and_130(tmp_path, how, stall_at):
    """Ctrl-C in the ~0.6 s the package takes to import (headstart.estimator, in its
    __init__), in the command line's own imports (cli.cache_writes) or after main()
    took over (cli.train) ends every way the command is started with the command's
    one line and exit code 130; it printed a traceback before main() ran."""
    import signal
    import tomllib

    (tmp_path / "sitecustomize.py").write_text(_STALL)
    args = ["train", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "m")]
    if how == "script":
        # what pip writes for the entry point pyproject.toml names
        mod, func = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["headstart"].split(":")
        (tmp_path / "headstart").write_text(f"import re\nimport sys\nfrom {mod} import {func}\n"
                                            f"if __name__ == '__main__':\n    sys.exit({func}())\n")
        cmd = [sys.executable, str(tmp_path / "headstart")] + args
    else:
        cmd = [sys.executable, "-m", "headstart"] + args
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "STALL_AT": stall_at,
           "PYTHONWARNINGS": "ignore"}
    # a child of a process that ignores SIGINT would ignore it too: Python installs its
    # handler only where SIGINT is not ignored
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
                            cwd=str(tmp_path), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = proc.stderr.readline()
        assert first == "stalled\n", first + proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) == 130, rest
    finally:
        proc.kill()
        proc.wait()
    assert rest == "headstart: error: interrupted\n", rest


#: a sitecustomize for the child: at the interpreter's exit (after the command returned
#: and said its last line) a Ctrl-C arrives, as when a large model's arrays are freed
_LATE_SIGINT = """
import atexit, os, signal, time


def _late():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.3)


atexit.register(_late)
"""


@pytest.mark.parametrize("how", ["script", "dash-m"])
def test_ctrl_c_after_the_command_finished_keeps_its_exit_code(tmp_path, how):
    """A Ctrl-C in the interpreter's teardown, after the command's work is committed
    and said, ended the process by the signal (exit -2, nothing said: helper-120, 6 of
    ~40 runs on a 2M-label model): a script checking the code threw a good model away.
    Now both entry points ignore SIGINT once the command has returned its code."""
    import signal
    import tomllib

    (tmp_path / "sitecustomize.py").write_text(_LATE_SIGINT)
    if how == "script":
        mod, func = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["headstart"].split(":")
        (tmp_path / "headstart").write_text(f"import sys\nfrom {mod} import {func}\n"
                                            f"if __name__ == '__main__':\n    sys.exit({func}())\n")
        cmd = [sys.executable, str(tmp_path / "headstart"), "--version"]
    else:
        cmd = [sys.executable, "-m", "headstart", "--version"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "PYTHONWARNINGS": "ignore"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert r.returncode == 0 and r.stdout.startswith("headstart "), (r.returncode, r.stderr)
    assert "KeyboardInterrupt" not in r.stderr and "Traceback" not in r.stderr, r.stderr


# --------------------------------------------------------------------------- documentation
def test_readme_options_table_lists_every_parameter_with_its_default():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = {}
    for line in readme.splitlines():
        m = re.match(r"^\|\s*`(--[\w-]+)`[^|]*\|\s*`([^`]*)`\s*\|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    for f in fields(TrainParams):
        opt = option_strings(f.name)[0]
        assert opt in rows, f"README options table lacks {opt}"
        default = f.default
        shown = {True: "on", False: "off", None: "none"}.get(default, default) \
            if isinstance(default, (bool, type(None))) else default
        assert rows[opt] == str(shown), f"README says {opt} defaults to {rows[opt]}, TrainParams says {shown}"


def test_readme_options_table_is_the_generated_one():
    from headstart.cli.docs import options_table

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert options_table() in readme, \
        "regenerate the README options table: python -m headstart.cli.docs --write README.md"


def test_docs_writer_replaces_only_the_table(tmp_path):
    from headstart.cli.docs import options_table, write_table

    doc = tmp_path / "R.md"
    doc.write_text("# T\n\n| option | default | meaning |\n|---|---|---|\n| `--old` | `1` | gone |\n\nafter\n")
    assert write_table(str(doc)) and not write_table(str(doc))
    assert doc.read_text() == "# T\n\n" + options_table() + "\n\nafter\n"


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "make test" in ci and "make test" in readme and "make demo" in readme


def test_ctrl_c_inside_a_kernel_is_reported_as_an_interruption(bibtex_dir, tmp_path, capsys, monkeypatch):
    """With one training thread the kernel runs in the thread that receives Ctrl-C, and a
    KeyboardInterrupt raised in the kernel's object-mode clock leaves numba as a
    SystemError caused by it: the command still says 'interrupted' (exit 130), not
    'internal error', and writes nothing."""
    from headstart.cli import train as train_cmd

    def interrupted_in_kernel(*a, **kw):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise SystemError("<built-in method now> returned a result with an exception set") from e

    monkeypatch.setattr(train_cmd, "_train", interrupted_in_kernel)
    out = tmp_path / "m"
    rc, _, err = run(capsys, "train", str(bibtex_dir / "train.txt.gz"), "-o", str(out), "--threads", "1")
    assert rc == 130 and "interrupted" in err and "internal error" not in err
    assert not out.exists()


def test_a_ctrl_c_swallowed_while_compiling_still_stops_the_run(bibtex_dir, tmp_path, capsys, monkeypatch):
    """llvmlite swallows a KeyboardInterrupt raised inside its callbacks while numba
    compiles: the run went on, replaced the model at -o and exited 0 (helper-52).  The
    command line's SIGINT handler remembers the signal; the run stops at its next commit
    (here: the new model's rename), says 'interrupted' (exit 130) and leaves the old model."""
    from headstart._threads import INTERRUPTS
    from headstart.training import trainer

    data, out = str(bibtex_dir / "train.txt.gz"), tmp_path / "m"
    assert run(capsys, "train", data, "-o", str(out), "--threads", "1", "--num-labels", 3, "-q")[0] == 0
    before = (out / "manifest.json").read_text()
    compile_kernels = trainer.compile_kernels

    def swallowed(*a, **kw):     # what the handler leaves when llvmlite ate its exception
        seconds = compile_kernels(*a, **kw)
        INTERRUPTS.seen = True
        return seconds

    monkeypatch.setattr(trainer, "compile_kernels", swallowed)
    rc, _, err = run(capsys, "train", data, "-o", str(out), "--threads", "1", "--num-labels", 4)
    assert rc == 130 and "interrupted" in err
    assert (out / "manifest.json").read_text() == before
    monkeypatch.setattr(trainer, "compile_kernels", compile_kernels)
    assert run(capsys, "train", data, "-o", str(out), "--threads", "1", "--num-labels", 4, "-q")[0] == 0   # reset


def test_a_compile_that_fails_after_a_swallowed_ctrl_c_says_interrupted(bibtex_dir, tmp_path, capsys, monkeypatch):
    """A Ctrl-C that llvmlite swallowed can leave numba's compile half done, and it then
    fails with an error of its own (a stress run of interrupted compiles here: "RuntimeError:
    generator raised StopIteration"); the run said 'this is a bug in headstart' (stop 87).
    The command line's SIGINT handler saw the Ctrl-C: 'interrupted', exit 130, no model."""
    from headstart._threads import INTERRUPTS
    from headstart.training import trainer

    def half_done(*a, **kw):
        INTERRUPTS.seen = True      # what the handler leaves when llvmlite ate its exception
        raise RuntimeError("generator raised StopIteration")

    monkeypatch.setattr(trainer, "compile_kernels", half_done)
    out = tmp_path / "m"
    rc, _, err = run(capsys, "train", str(bibtex_dir / "train.txt.gz"), "-o", str(out), "--threads", "1", "--num-labels", 4)
    assert rc == 130 and "interrupted" in err and "bug" not in err and "internal error" not in err
    assert not out.exists()


def test_a_ctrl_c_during_a_kernel_cache_write_is_raised_when_the_write_ends(monkeypatch):
    """numba removes a cache write's temporary file only on an Exception, so a Ctrl-C
    in the middle left ``*.nbc.tmp.*`` in the user's cache (helper-88).  The command
    line holds the interrupt while the main thread writes and raises it afterwards; a
    write in another thread is left alone (signals reach the main thread only)."""
    import signal
    import threading

    from numba.core import caching

    from headstart.cli import main as cli

    finished = []

    def slow_save(self, sig, data):
        signal.raise_signal(signal.SIGINT)      # arrives in the middle of the write
        finished.append(sum(range(10000)))      # (bytecode on which the handler runs)
        return "saved"

    monkeypatch.setattr(caching.Cache, "save_overload", slow_save)
    previous = signal.signal(signal.SIGINT, cli._on_sigint)
    guard = cli.CACHE_WRITES
    try:
        guard.reset()
        assert guard.install() is slow_save
        with pytest.raises(KeyboardInterrupt):
            caching.Cache.save_overload(None, None, None)
        assert finished == [sum(range(10000))] and guard.pending is None and guard.depth == 0
        guard.uninstall()
        assert caching.Cache.save_overload is slow_save          # numba as it was
        other = []
        monkeypatch.setattr(caching.Cache, "save_overload", lambda self, sig, data: "saved")
        guard.install()
        t = threading.Thread(target=lambda: other.append(caching.Cache.save_overload(None, None, None)))
        t.start()
        t.join()
        assert other == ["saved"]
    finally:
        guard.uninstall()
        signal.signal(signal.SIGINT, previous)


def test_the_cache_write_guard_defers_one_action_to_the_end_of_the_outermost_write(monkeypatch):
    """The helper's SIGTERM and the command's Ctrl-C share one guard
    (cli/cache_writes.py): outside a write nothing is deferred; inside nested writes the
    action runs once, after the outermost one, also when the write fails."""
    from numba.core import caching

    from headstart.cli.cache_writes import CacheWriteGuard

    ran = []
    guard = CacheWriteGuard()

    def inner_save(self, sig, data):
        ran.append(("deferred", guard.defer(lambda: ran.append("action"))))
        if data == "nested":
            caching.Cache.save_overload(None, None, "leaf")
        elif data == "fail":
            raise OSError("disk full")
        ran.append(("wrote", data))

    monkeypatch.setattr(caching.Cache, "save_overload", inner_save)
    assert guard.defer(lambda: ran.append("never")) is False and guard.pending is None
    guard.install()
    try:
        caching.Cache.save_overload(None, None, "nested")
        assert ran == [("deferred", True), ("deferred", True), ("wrote", "leaf"), ("wrote", "nested"), "action"]
        ran.clear()
        with pytest.raises(OSError):
            caching.Cache.save_overload(None, None, "fail")
        assert ran == [("deferred", True), "action"] and guard.depth == 0
    finally:
        guard.uninstall()
    assert caching.Cache.save_overload is inner_save


def test_evaluate_cuts_k_to_the_models_labels_in_both_modes(tmp_path, capsys):
    """-k above the labels a model ranks is cut to them, with a warning, when evaluate
    scores the model itself as when it reads predict's file (which predict cut): the
    same metrics either way, not P@10 = hits / 10 on a 3-label model."""
    (tmp_path / "tr.txt").write_text("6 3 3\n0 0:1\n1 1:1\n2 2:1\n0,1 0:1 1:1\n1,2 1:1 2:1\n0 0:1 2:0.5\n")
    (tmp_path / "te.txt").write_text("3 3 3\n0 0:1\n1,2 1:1 2:1\n2 2:1\n")
    assert run(capsys, "train", tmp_path / "tr.txt", "-o", tmp_path / "m", "-q")[0] == 0
    assert run(capsys, "predict", tmp_path / "m", tmp_path / "te.txt", "-o", tmp_path / "p.txt", "-k", 10)[0] == 0
    code, out, err = run(capsys, "evaluate", tmp_path / "m", tmp_path / "te.txt", "-k", 10, "--json")
    assert code == 0 and "the model has only 3 label(s)" in err
    direct = json.loads(out)
    code, out, _ = run(capsys, "evaluate", "--predictions", tmp_path / "p.txt", tmp_path / "te.txt", "-k", 10,
                       "--train", tmp_path / "tr.txt", "--json")    # (the model knows its training counts)
    assert code == 0 and json.loads(out) == direct
    assert "P@3" in direct and "P@10" not in direct and direct["P@3"] == pytest.approx(4 / 9)


def test_predict_blocks_shrink_with_k_and_write_the_same_file(trained, bibtex_dir, tmp_path, capsys,
                                                               monkeypatch):
    """The instances per block shrink with -k so that a block's top k stay within
    resources.TOPK_BLOCK_BYTES (-k 200000 over 500 instances took 2.2 GB as one block),
    and the file is byte for byte that of one block, the model whole or streamed."""
    from headstart import resources

    rows = [resources.topk_block_rows(k, 16384) for k in (5, 512, 2000, 200000, 10 ** 9)]
    assert rows == [16384, 16384, (256 << 20) // (2000 * 32), (256 << 20) // (200000 * 32), 1]
    assert resources.topk_block_rows(200000, 16384, streamed=True) == (256 << 20) // (200000 * 48)
    assert resources.topk_block_rows(200000, 16384, budget=10 ** 12) == 16384    # --chunk-rows still bounds

    _, model = trained
    data = bibtex_dir / "test.txt.gz"
    for extra in ([], ["--model-memory", 0]):
        one = tmp_path / f"one{len(extra)}.txt"
        assert run(capsys, "predict", model, data, "-o", one, "-k", 20, "--allow-gaps", *extra)[0] == 0
        monkeypatch.setattr(resources, "TOPK_BLOCK_BYTES", 7 * resources.topk_row_bytes(20, bool(extra)))
        blocks = tmp_path / f"blocks{len(extra)}.txt"
        code, _, err = run(capsys, "predict", model, data, "-o", blocks, "-k", 20, "--allow-gaps", "-v", *extra)
        monkeypatch.undo()
        assert code == 0 and "-k 20: 7 instances per block" in err, err
        assert blocks.read_bytes() == one.read_bytes()


def test_evaluate_keeps_libsvm_test_labels_the_model_never_saw_as_misses(tmp_path, capsys):
    """A libsvm test file naming a label id beyond the training file's (a label seen only
    in the test split) is evaluated, not refused (helper-42): the label is a positive no
    model ranks, a miss in recall, nDCG and coverage, as the XMC metrics count it; P@k is
    unchanged.  Hand-computed: rows {1, 5} and {2}, top 2 [2, 1] and [2, 3]."""
    (tmp_path / "tr.svm").write_text("1,2 1:0.5 3:0.2\n2 2:0.4 3:0.1\n1 1:0.3 4:0.9\n3 2:0.7\n")
    (tmp_path / "te.svm").write_text("1,5 1:0.5 3:0.2\n2 2:0.4\n")
    (tmp_path / "p.txt").write_text("2 2 4\n2:0.5 1:0.4\n2:0.1 3:-0.3\n")
    code, out, err = run(capsys, "evaluate", "--predictions", tmp_path / "p.txt", tmp_path / "te.svm", "-k", 2,
                         "--json")
    assert code == 0 and "1 positive(s) of 1 label id(s) beyond the model's 4 labels" in err
    got = json.loads(out)
    assert got["P@1"] == pytest.approx(1 / 2) and got["P@2"] == pytest.approx(1 / 2)
    assert got["R@2"] == pytest.approx((1 / 2 + 1) / 2)            # label 5 missed, not dropped
    assert got["cov@2"] == pytest.approx(2 / 3)                     # labels 1, 2 of {1, 2, 5}
    # the same through the model, with the training counts' propensities and with decisions
    assert run(capsys, "train", tmp_path / "tr.svm", "-o", tmp_path / "m", "-q")[0] == 0
    code, out, err = run(capsys, "evaluate", tmp_path / "m", tmp_path / "te.svm", "-k", 2, "--json",
                         "--train", tmp_path / "tr.svm")
    assert code == 0 and "beyond the model's 4 labels" in err
    assert json.loads(out)["R@2"] <= 0.75
    code, out, err = run(capsys, "evaluate", tmp_path / "m", tmp_path / "te.svm", "--threshold", "0", "--json")
    assert code == 0 and json.loads(out)["Micro-F1"] < 1.0
    # said once, though the decisions pass reads the file a second time
    assert err.count("beyond the model's 4 labels") == 1
    # xmc data declares its label count: a test header wider than the model stays an error
    (tmp_path / "te.txt").write_text("2 5 6\n1,5 1:0.5 3:0.2\n2 2:0.4\n")
    code, _, err = run(capsys, "evaluate", "--predictions", tmp_path / "p.txt", tmp_path / "te.txt")
    assert code == 2 and "the test data has 6 labels but the predictions file says num_labels = 4" in err
    code, _, err = run(capsys, "evaluate", tmp_path / "m", tmp_path / "te.txt")      # the same through the model
    assert code == 2 and "the data has 6 labels but the model's label space has 4" in err
    (tmp_path / "none.txt").write_text("0 5 4\n")
    (tmp_path / "p0.txt").write_text("0 2 4\n")
    code, _, err = run(capsys, "evaluate", "--predictions", tmp_path / "p0.txt", tmp_path / "none.txt")
    assert code == 2 and "none.txt" in err and "no instances" in err, err


def test_convert_to_libsvm_warns_when_the_declared_widths_cannot_be_kept(tmp_path, capsys):
    """libsvm has no header: trailing features / labels no row uses are lost on the way
    back -- said, with the counts a reader will see (it printed the declared ones only)."""
    (tmp_path / "d.txt").write_text("3 10 5\n0 1:1 3:2\n1,2 0:1\n0 2:0.5\n")
    code, out, err = run(capsys, "convert", tmp_path / "d.txt", tmp_path / "d.svm", "--to", "libsvm")
    assert code == 0, err
    assert "it has 4 feature(s) and 3 label(s) (the ids it uses), not 10 and 5" in err
    code, out, err = run(capsys, "convert", tmp_path / "d.svm", tmp_path / "back.txt")
    assert code == 0 and "4 features, 3 labels" in out, (out, err)
    (tmp_path / "f.txt").write_text("2 4 3\n0 3:1\n1,2 0:1\n")
    code, out, err = run(capsys, "convert", tmp_path / "f.txt", tmp_path / "f.svm", "--to", "libsvm")
    assert code == 0 and "keeps no header" not in err


def test_out_of_memory_advice_fits_the_command(tmp_path, capsys, monkeypatch):
    """The MemoryError message advises what the command can do (helper-52: train was told
    to predict with a smaller --chunk-rows)."""
    from headstart.cli import predict as predict_cmd
    from headstart.cli import train as train_cmd

    def oom(args):
        raise MemoryError

    for mod, argv, advice in ((train_cmd, ["train", "x.txt", "-o", str(tmp_path / "m")], "--first-label"),
                              (predict_cmd, ["predict", "m", "x.txt", "-o", str(tmp_path / "p")], "--chunk-rows")):
        monkeypatch.setattr(mod, "run", oom)
        code, _, err = run(capsys, *argv)
        assert code == 1 and "out of memory" in err and advice in err, err
    # commands without a label range are not told to train one (a huge label space ran
    # cv, thresholds, tree ... out of memory, and the advice named options they lack)
    from headstart.cli import cv as cv_cmd
    from headstart.cli import experiment as experiment_cmd
    from headstart.cli import merge as merge_cmd
    from headstart.cli import thresholds as thresholds_cmd
    from headstart.cli import tree as tree_cmd

    for mod, argv, advice in ((cv_cmd, ["cv", "x.txt"], "(fewer --threads)"),
                              (thresholds_cmd, ["thresholds", "x.txt", "-o", str(tmp_path / "t")],
                               "(fewer --threads)"),
                              (tree_cmd, ["tree", "x.txt", "-o", str(tmp_path / "m")], "(fewer --threads)"),
                              (experiment_cmd, ["experiment", "x.txt", "y.txt", "-o", str(tmp_path / "r")],
                               "--labels A:B"),
                              (merge_cmd, ["merge", str(tmp_path / "o"), "a", "b"], "out of memory\n")):
        monkeypatch.setattr(mod, "run", oom)
        code, _, err = run(capsys, *argv)
        assert code == 1 and "out of memory" in err and advice in err and "--first-label" not in err, err


def test_foreign_habits_get_pointers(tmp_path, capsys):
    """helper-51: raw LibMultiLabel text given to train, LIBLINEAR's -v N and DiSMEC++'s
    predict --topk / --save-dense-txt each name what headstart does instead."""
    raw = tmp_path / "raw.txt"
    raw.write_text("TAG_a TAG_b\tsome words here\nTAG_b\tmore words\n")
    code, _, err = run(capsys, "train", raw, "-o", tmp_path / "m")
    assert code == 2 and "raw.txt:1" in err and "LibMultiLabel's raw text" in err and "--fit-vectorizer" in err
    assert not (tmp_path / "m").exists()
    code, _, err = run(capsys, "train", raw, "-o", tmp_path / "m", "-v", "5")
    assert code == 2 and "headstart cv --folds N" in err
    # a number after another unknown option is its value, not -v's (helper-53)
    code, _, err = run(capsys, "train", "-s", "2", "-c", "4", raw, "-o", tmp_path / "m")
    assert code == 2 and "--liblinear" in err and "-v" not in err, err
    for argv, words in ((["predict", "m", "t.txt", "-o", "p", "--topk", "5"], "--topk is DiSMEC++'s: here -k K"),
                        (["train", "t.txt", "-o", "m", "--save-dense-txt"], "--format dense-txt")):
        code, _, err = run(capsys, *argv)
        assert code == 2 and words in err, err


def test_scores_that_overflow_name_the_instance(tmp_path, capsys):
    """A feature value the readers accept (3.4e38, float32's largest) whose scores overflow:
    predict (top-k and --threshold) and evaluate refuse the instance by its file and line,
    exit 2, and write no file (helper-106: predict named nothing, evaluate ranked infinities)."""
    rng = np.random.default_rng(0)
    rows = [f"{i % 3} " + " ".join(f"{j}:{v:.3f}" for j, v in enumerate(rng.random(4)) if v > 0.2) for i in range(30)]
    (tmp_path / "train.txt").write_text("30 4 3\n" + "\n".join(rows) + "\n")
    test = tmp_path / "test.txt"
    test.write_text("3 4 3\n0 1:0.5\n1 0:3.4e38 1:3.4e38 2:3.4e38 3:3.4e38\n2 2:0.5\n")
    m = tmp_path / "m"
    assert run(capsys, "train", tmp_path / "train.txt", "-o", m, "-q")[0] == 0
    for extra in (["-k", "2"], ["--threshold", "0"]):
        code, _, err = run(capsys, "predict", m, test, "-o", tmp_path / "p.txt", *extra)
        assert code == 2 and f"{test}:3: the scores of this instance are not finite" in err, err
        assert not (tmp_path / "p.txt").exists()
    code, _, err = run(capsys, "evaluate", m, test)
    assert code == 2 and f"{test}:3: the scores of this instance are not finite" in err, err


def test_a_stopped_command_ends_without_teardown_but_runs_atexit():
    """A run stopped by Ctrl-C / SIGTERM ends by headstart._leave_stopped: atexit's
    callbacks run (here one that prints), buffered output is flushed, the exit code is
    the stop's; the interpreter's teardown, where an interrupted compile's LLVM state
    crashed a process once (stop 87's CI: exit -11 after 'interrupted'), does not."""
    code = ("import atexit, sys, headstart; atexit.register(print, 'atexit ran'); "
            "sys.stdout.write('buffered'); headstart._leave_stopped(143)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 143, proc.stderr
    assert proc.stdout == "bufferedatexit ran\n"


def test_a_ctrl_c_swallowed_by_a_callback_prints_no_traceback(capsys):
    """While the command runs, a KeyboardInterrupt that a ctypes callback swallowed
    (llvmlite's, numba compiling) is not printed as "Exception ignored ..." with a
    traceback once the SIGINT handler has seen the Ctrl-C; other unraisable errors
    still are, and the hook there was is back after the command."""
    import types

    from headstart._threads import INTERRUPTS
    from headstart.cli.main import _QuietSwallowedInterrupts

    seen = []
    hook = _QuietSwallowedInterrupts(seen.append)
    swallowed = types.SimpleNamespace(exc_type=KeyboardInterrupt, exc_value=KeyboardInterrupt(), exc_traceback=None,
                                      err_msg="Exception ignored on calling ctypes callback function", object=None)
    other = types.SimpleNamespace(exc_type=ValueError, exc_value=ValueError("x"), exc_traceback=None,
                                  err_msg=None, object=None)
    try:
        INTERRUPTS.seen = True
        hook(swallowed)
        hook(other)
        assert seen == [other]
        INTERRUPTS.seen = False     # no Ctrl-C seen by the handler: not ours to hide
        hook(swallowed)
        assert seen == [other, swallowed]
    finally:
        INTERRUPTS.seen = False
    before = sys.unraisablehook
    assert run(capsys, "info", "/nonexistent/model")[0] == 2
    assert sys.unraisablehook is before
