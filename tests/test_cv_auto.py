"""``cross_validate(Cs="auto")`` / ``headstart cv --Cs auto`` / ``--liblinear "-C ..."``:
LIBLINEAR's search for C (linear.cpp find_parameters / find_parameter_C, 2.50) -- its
starting C by hand, its doubling grid up to 1024, its early stop when no fold's weights
move (5 C's in a row, the first counting), warm starts -- with headstart's multi-label
metric choosing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from headstart import TrainParams
from headstart.errors import ParameterError
from headstart.tuning import auto_grid, cross_validate, start_C
from headstart.tuning import folds as folds_module

import _reference as ref


@pytest.fixture(scope="module")
def bibtex():
    X, Y = ref.checked_dataset("bibtex")
    return X[:600], sp.csr_matrix(Y[:600, :10])


def test_start_C_is_liblinears_by_hand():
    """One row of squared norm 8 (2, 2), one of 1; l = 2.  Squared hinge (-s 2):
    1 / (2 * 2 * 8) = 2^-5 exactly (a power of 2 stays itself: the exponent is exact);
    with the bias feature 1 the largest norm is 9: 1 / 36 -> 2^-6.  Logistic (-s 0):
    1 / 16 = 2^-4, with the bias 1 / 18 -> 2^-5.  headstart's C / reg_scale is LIBLINEAR's
    C, so reg_scale 4 makes it 4 times larger; a start above 1024 is cut to 1024."""
    X = sp.csr_matrix(np.array([[2.0, 2.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32))
    sh = TrainParams(bias=0.0)
    assert start_C(X, sh) == 2.0 ** -5
    assert start_C(X, sh.replace(bias=1.0)) == 2.0 ** -6
    assert start_C(X, sh.replace(loss="logistic")) == 2.0 ** -4
    assert start_C(X, sh.replace(loss="logistic", bias=1.0)) == 2.0 ** -5
    assert start_C(X, sh.replace(reg_scale=4.0)) == 2.0 ** -3
    assert start_C(X * 1e-3, sh) == 1024.0
    # a value between powers of 2: 1 / (2 * 2 * 9.61) = 0.026 -> 2^-6 = 0.015625
    assert start_C(sp.csr_matrix(np.array([[3.1, 0.0], [0.0, 1.0]])), sh) == 2.0 ** -6
    assert list(auto_grid(2.0 ** -2, 4.0)) == [0.25, 0.5, 1.0, 2.0, 4.0]
    # LIBLINEAR searches -s 0 and -s 2 only: no rule for the others
    for other in (dict(loss="huber-hinge"), dict(l2_solver="dual"), dict(regularizer="l1-exact")):
        with pytest.raises(ParameterError, match="LIBLINEAR -s 0 and -s 2 only"):
            start_C(X, sh.replace(**other))


def test_auto_starts_from_the_rule_on_all_the_data_and_doubles_to_the_maximum(bibtex):
    X, Y = bibtex
    p = TrainParams(threads=1)
    first = start_C(X, p)
    # LIBLINEAR's rule on all 600 rows (not a fold's), x with its bias feature 1
    sq = np.asarray(X.multiply(X).sum(axis=1)).max() + 1.0
    assert first == 2.0 ** np.floor(np.log2(1.0 / (2 * 600 * sq)))
    r = cross_validate(X, Y, p, folds=2, Cs="auto", k=3, max_C=first * 4)
    assert list(r.candidates) == [first, 2 * first, 4 * first] and r.stop == "max_C"
    assert r.trainings == 6 and r.best == r.candidates[int(np.argmax([m["P@1"] for m in r.metrics]))]


def _fake_moves(monkeypatch, pattern, folds=2):
    """Training statistics saying, per C (in order), whether the labels moved: the real
    trainings run, only their iteration counts are replaced."""
    real = folds_module.FoldRunner.fit
    calls = []

    def fit(self, rows, params=None):
        model, _ = real(self, rows, params)
        c = len(calls) // folds
        calls.append(c)
        return model, {"iterations": np.full(self.L, 3 if pattern[c] else 0)}

    monkeypatch.setattr(folds_module.FoldRunner, "fit", fit)


def test_the_grid_stops_when_no_weights_moved_at_five_C_s_in_a_row(bibtex, monkeypatch):
    """LIBLINEAR's counter: the first C counts as unchanged, a C at which any fold's
    weights moved sets it back to 0, 5 ends the search."""
    X, Y = bibtex
    p = TrainParams(threads=1)
    # weights still from the second C on: C's 1..5, the first counting
    _fake_moves(monkeypatch, [True] + [False] * 40)
    r = cross_validate(X, Y, p, folds=2, Cs="auto", k=3, first_C=1.0)
    assert r.stop == "unchanged" and list(r.candidates) == [1, 2, 4, 8, 16]
    # a move at the 4th C: 5 still C's after it are needed (C's 5..9)
    _fake_moves(monkeypatch, [True, False, False, True] + [False] * 40)
    r = cross_validate(X, Y, p, folds=2, Cs="auto", k=3, first_C=1.0)
    assert r.stop == "unchanged" and r.candidates.size == 9 and r.trainings == 18
    # always moving: up to the maximum C, 1024
    _fake_moves(monkeypatch, [True] * 40)
    r = cross_validate(X, Y, p, folds=2, Cs="auto", k=3, first_C=64.0)
    assert r.stop == "max_C" and list(r.candidates) == [64, 128, 256, 512, 1024]


def test_warm_starts_continue_each_fold_and_freeze_labels(bibtex, caplog):
    """Each fold at a C starts from its own weights at the C before: at large C many
    labels' warm starts already meet the stopping rule (no Newton step), which never
    happens from the initialisation (every label moves)."""
    X, Y = bibtex
    p = TrainParams(threads=1)
    with caplog.at_level("INFO", logger="headstart.tuning.cv"):
        cross_validate(X, Y, p, folds=2, Cs="auto", k=3, first_C=256.0)
    moved = [int(line.split("; ")[1].split()[0]) for line in caplog.messages if "fold trainings" in line]
    assert moved[0] == 20 and min(moved[1:]) < 20, moved
    caplog.clear()
    with caplog.at_level("INFO", logger="headstart.tuning.cv"):
        cross_validate(X, Y, p, folds=2, Cs="auto", k=3, first_C=256.0, warm_start=False)
    moved = [int(line.split("; ")[1].split()[0]) for line in caplog.messages if "fold trainings" in line]
    assert moved == [20, 20, 20], moved


def test_auto_chooses_as_the_same_list_given(bibtex):
    """The automatic grid's best C is the given list's (the same folds); without warm
    starts every metric is the list's, bit for bit."""
    X, Y = bibtex
    p = TrainParams(threads=1)
    auto = cross_validate(X, Y, p, folds=2, Cs="auto", k=3, first_C=2.0 ** -6, max_C=4.0, warm_start=False)
    given = cross_validate(X, Y, p, folds=2, Cs=list(auto.candidates), k=3)
    assert list(auto.candidates) == [2.0 ** j for j in range(-6, 3)]
    assert auto.metrics == given.metrics and auto.best == given.best
    warm = cross_validate(X, Y, p, folds=2, Cs="auto", k=3, first_C=2.0 ** -6, max_C=4.0)
    assert warm.best == given.best
    assert max(abs(a["P@1"] - b["P@1"]) for a, b in zip(warm.metrics, given.metrics)) <= 0.02


def test_patience_stops_after_the_score_rose_and_fell(bibtex):
    X, Y = bibtex
    r = cross_validate(X, Y, TrainParams(threads=1), folds=2, Cs="auto", k=3, patience=2)
    s = [m["P@1"] for m in r.metrics]
    assert r.stop == "patience", s
    best = max(s)
    assert s[-1] < best and s[-2] < best and max(s[1:]) > s[0]
    assert r.best == r.candidates[s.index(best)]


def test_auto_arguments_are_checked(bibtex):
    X, Y = bibtex
    for kw, words in ((dict(Cs="best"), "positive numbers or 'auto'"), (dict(Cs="auto", patience=0), "patience"),
                      (dict(Cs="auto", first_C=-1.0), "first_C"), (dict(Cs="auto", max_C=float("inf")), "max_C"),
                      (dict(Cs=[1.0], patience=2), "are for Cs='auto'")):
        with pytest.raises(ParameterError, match=words):
            cross_validate(X, Y, TrainParams(threads=1), **kw)
    with pytest.raises(ParameterError, match="-s 0 and -s 2 only"):
        cross_validate(X, Y, TrainParams(threads=1, l2_solver="dual", bias=0.0), Cs="auto")


def run_cli(capsys, *argv):
    """The command line in this process (a subprocess each would spend most of the
    test's time starting); (exit code, stdout, stderr)."""
    from headstart.cli import main as cli_main

    capsys.readouterr()
    try:
        code = cli_main.main([str(a) for a in argv])
    except SystemExit as e:       # argparse's usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_liblinear_C_is_cv_Cs_auto(tmp_path, bibtex, capsys):
    from headstart.io import write_xmc

    X, Y = bibtex
    f = tmp_path / "t.txt"
    write_xmc(f, X[:300], Y[:300, :6])
    # -C -s 0 -c 64 -v 2: logistic, the search from 64, 2 folds
    code, out, err = run_cli(capsys, "cv", f, "--liblinear=-C -s 0 -c 64 -v 2", "--threads", "1", "-k", "3", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert (got["folds"], got["search"], got["results"][0]["C"]) == (2, "auto", 64.0)
    Cs = [x["C"] for x in got["results"]]
    assert Cs == [64.0 * 2 ** j for j in range(len(Cs))] and Cs[-1] <= 1024
    assert got["stop"] in ("unchanged", "max_C") and (got["stop"] == "unchanged" or Cs[-1] == 1024)
    # the same search by --Cs auto --C 64 and the options -s 0 stands for: the same table
    code, out, err = run_cli(capsys, "cv", f, "--Cs", "auto", "--C", "64", "--loss", "logistic", "--bias", "0",
                             "--prune", "0", "--folds", "2", "--threads", "1", "-k", "3", "--json")
    assert code == 0, err
    assert json.loads(out)["results"] == got["results"]
    # -C alone: LIBLINEAR's -s 2 and 5 folds (an explicit --folds wins); printed with the stop
    code, out, err = run_cli(capsys, "cv", f, "--liblinear=-C -c 256", "--threads", "1", "-k", "3", "--folds", "2")
    assert code == 0, err
    assert "search for C from 256 (given) stopped at C = " in out and "2-fold" in out and "<- best" in out
    code, out, err = run_cli(capsys, "cv", "--liblinear=-C", "--print-params")
    p = json.loads(out)
    assert (p["loss"], p["l2_solver"], p["bias"]) == ("squared-hinge", "newton", 0.0)
    # refused: -C with a solver LIBLINEAR does not search; -C outside cv; --patience without auto
    code, out, err = run_cli(capsys, "cv", f, "--liblinear=-C -s 1")
    assert code == 2 and "-C with -s 1" in err
    code, out, err = run_cli(capsys, "train", f, "-o", tmp_path / "m", "--liblinear=-C")
    assert code == 2 and "headstart cv --liblinear" in err
    code, out, err = run_cli(capsys, "cv", f, "--Cs", "1,2", "--patience", "2")
    assert code == 2 and "--patience: only with --Cs auto" in err
