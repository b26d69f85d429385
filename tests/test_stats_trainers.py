"""Every trainer reports like the Newton trainer: the statistics carry what
``report_problems`` needs (the run's ``rows`` and ``prune``), so a model whose weights
were all pruned away is said whichever trainer made it -- exact L1 (newGLMNET, CDN),
the dual, shortlisted training and label trees (helper-81: all but the Newton trainer
were silent)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from headstart import TrainParams
from headstart.estimator import fit_model
from headstart.shortlist.api import fit_shortlisted
from headstart.tree import fit_tree

PRUNED = "kept no weight but the bias after pruning"
EMPTY_OPTIMUM = "have no weight but the bias at the solver's optimum"

#: the trainers by their parameters; "shortlist" and "tree*" name the other entry points
TRAINERS = {
    "newton": {},
    "newglmnet": dict(regularizer="l1-exact"),
    "cdn": dict(regularizer="l1-exact", l1_solver="cdn"),
    "dual": dict(l2_solver="dual", regularize_bias=True),
    "dual-logistic": dict(l2_solver="dual", loss="logistic", regularize_bias=True),
    "shortlist": {},
    "tree": {},
    "tree-dual": dict(l2_solver="dual", regularize_bias=True),
}


def _data(labels: int = 4):
    """200 rows of unit-scale features; label j is 'feature j above 0.5', so every label
    has positives and negatives and a weight that matters."""
    rng = np.random.default_rng(7)
    X = sp.random(200, 30, density=0.2, format="csr", random_state=rng, dtype=np.float32)
    return X, sp.csr_matrix((X[:, :labels].toarray() > 0.5).astype(np.float32))


def _shortlist(Y: sp.csr_matrix, negatives: int) -> sp.csc_matrix:
    """Each label's positives plus its first ``negatives`` negative rows."""
    Yd = Y.toarray()
    S = Yd.copy()
    for j in range(Yd.shape[1]):
        S[np.flatnonzero(Yd[:, j] == 0)[:negatives], j] = 1
    return sp.csc_matrix(S)


def _train(trainer: str, X, Y, **kw):
    """The weights of ``trainer`` on (X, Y), and its statistics (None for a tree: its
    entry point returns the model only)."""
    params = TrainParams(threads=1, **TRAINERS[trainer], **kw)
    if trainer == "shortlist":
        return fit_shortlisted(X, Y, params, _shortlist(Y, 60))
    if trainer.startswith("tree"):
        return fit_tree(X, Y, params, branching=3).model, None
    return fit_model(X, Y, params)


def _said(log, text: str) -> list[str]:
    return [r.getMessage() for r in log.records if text in r.getMessage()]


def _labels(trainer: str) -> int:
    return 12 if trainer.startswith("tree") else 4      # a tree of more than a root


@pytest.mark.parametrize("trainer", list(TRAINERS))
def test_weights_all_below_prune_are_warned_about(trainer, trainer_log):
    """--prune above every weight the run learns (measured with --prune 0) removes them
    all: warned; the same run at --prune 0 keeps them and says nothing."""
    X, Y = _data(_labels(trainer))
    model, st = _train(trainer, X, Y, prune=0.0)
    assert model.weights.nnz > 0 and not _said(trainer_log, PRUNED)
    if st is not None:
        assert st.meta["rows"] == X.shape[0] and st.meta["prune"] == 0.0
    above = 2 * float(np.abs(model.weights.data).max())
    trainer_log.clear()
    model, st = _train(trainer, X, Y, prune=above)
    assert model.weights.nnz == 0
    said = _said(trainer_log, PRUNED)
    # a tree says it for its root (one-vs-all training) and once for all other nodes
    assert len(said) == (2 if trainer.startswith("tree") else 1), trainer_log.text
    assert all(f"(|w| < {above:g}, --prune / prune=)" in m for m in said)
    if st is not None:
        assert st.meta["prune"] == above and not np.any(st["nnz"])


@pytest.mark.parametrize("trainer", [t for t in TRAINERS if TRAINERS[t].get("regularizer") != "l1-exact"])
def test_features_far_below_unit_scale_are_warned_about(trainer, trainer_log):
    """Features x 1e-6: every L2 weight is ~1e-5 or less, below the default --prune of
    0.01 -- said, with the way out; normalised rows keep their weights, silently."""
    X, Y = _data(_labels(trainer))
    tiny = (X * 1e-6).astype(np.float32)
    model, _ = _train(trainer, tiny, Y)
    assert model.weights.nnz == 0
    said = _said(trainer_log, PRUNED)
    assert len(said) == (2 if trainer.startswith("tree") else 1) and all("--normalize" in m for m in said)
    trainer_log.clear()
    model, _ = _train(trainer, tiny, Y, normalize=True)
    assert model.weights.nnz > 0 and not _said(trainer_log, PRUNED)


@pytest.mark.parametrize("trainer", ["newglmnet", "cdn"])
def test_an_exact_l1_optimum_without_weights_is_not_blamed_on_prune(trainer, trainer_log):
    """Exact L1 on features x 1e-6: the optimum itself is w = 0 (the loss' gradient at 0
    is far below the L1 kink), at any --prune.  Said as such, not as pruning -- a lower
    --prune would change nothing; the statistics hold the nonzeros before pruning."""
    X, Y = _data()
    tiny = (X * 1e-6).astype(np.float32)
    for prune in (0.01, 0.0):
        trainer_log.clear()
        model, st = _train(trainer, tiny, Y, prune=prune)
        assert model.weights.nnz == 0 and not np.any(st["nnz_unpruned"])
        assert not _said(trainer_log, PRUNED)
        assert _said(trainer_log, EMPTY_OPTIMUM)
    trainer_log.clear()
    model, st = _train(trainer, X, Y, prune=0.0)
    assert np.array_equal(st["nnz_unpruned"], st["nnz"]) and not _said(trainer_log, EMPTY_OPTIMUM)


def test_shortlisted_labels_without_negatives_are_not_counted_as_pruned(trainer_log):
    """Shortlisted training compares each label with its own sub-problem's rows: a label
    whose shortlist brings no negative learns w = 0 at any --prune (said as such), and
    counted against the run's instances it would have been blamed on pruning."""
    X, Y = _data()
    model, st = fit_shortlisted(X, Y, TrainParams(threads=1), _shortlist(Y, 0))
    assert model.weights.nnz == 0 and np.array_equal(st["rows"], st["n_pos"])
    assert _said(trainer_log, "had no negative among their shortlisted rows")
    assert not _said(trainer_log, PRUNED)


def test_shortlisted_statistics_count_shared_solves_and_start_preparation():
    """Labels without a row (no positive, nothing shortlisted) take one solve per chunk:
    marked in ``shared_with`` as the core trainer marks its shared solves, left out of the
    work totals, counted in ``shared_solves``; the starts' preparation is timed."""
    X, Y = _data()
    unused = sp.csr_matrix((X.shape[0], 5), dtype=np.float32)          # labels 4-8: no row at all
    S = sp.hstack([_shortlist(Y, 60), unused], format="csc")
    model, st = fit_shortlisted(X, sp.hstack([Y, unused], format="csr"), TrainParams(threads=1), S)
    shared = st["shared_with"]
    assert np.array_equal(shared[:5], [-1] * 5) and np.array_equal(shared[5:], [4] * 4)
    assert st.meta["shared_solves"] == 4 and st.meta["init_prepare_seconds"] > 0
    assert st.summary()["newton_iterations"] == int(st["iterations"][:5].sum())
    assert st.meta["rows"] == X.shape[0] and st.meta["solver"] == "newton"


def test_sparsify_records_no_absolute_threshold():
    """--sparsify replaces --prune by a threshold per label that keeps the objective within
    that many percent: the run records prune 0, so no all-pruned label is blamed on the
    features' scale (the advice of that warning would not apply)."""
    X, Y = _data()
    _, st = fit_model(X, Y, TrainParams(threads=1, sparsify=1.0))
    assert st.meta["prune"] == 0.0 and st.meta["rows"] == X.shape[0]


NO_VALUES = "X has no feature values"


@pytest.mark.parametrize("trainer", ["newton", "newglmnet", "shortlist", "tree"])
def test_data_without_feature_values_is_said_as_such(trainer, caplog):
    """Every row empty: nothing to learn but the bias.  Said first by the library, and
    that the all-pruned warning after it is about this (helper-80: only that warning,
    advising --normalize); the same data with values says nothing of the kind."""
    X, Y = _data(_labels(trainer))
    with caplog.at_level("WARNING", logger="headstart"):
        model, _ = _train(trainer, sp.csr_matrix(X.shape, dtype=np.float32), Y)
    assert model.weights.nnz == 0
    said = _said(caplog, NO_VALUES)
    assert len(said) == 1 and "(every row is empty): there is nothing to learn but the bias" in said[0]
    if trainer in ("newton", "newglmnet"):
        # and only that: the all-pruned warning (advising --normalize or a lower --prune)
        # would blame the scale of features that are not there
        assert not _said(caplog, "no weight but the bias"), caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="headstart"):
        _train("newton", sp.csr_matrix(np.ones((20, 3), dtype=np.float32)), Y[:20], tfidf=True)
    said = _said(caplog, NO_VALUES)
    assert len(said) == 1 and "after preprocessing (tf-idf weighs a feature present in every row 0" in said[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="headstart"):
        _train(trainer, X, Y)
    assert not _said(caplog, NO_VALUES)


@pytest.mark.parametrize("command", ["train", "tree", "cv"])
def test_cli_refuses_data_without_feature_values(command, tmp_path, capsys):
    """The command line refuses such a file as it refuses a feature count of 0: exit 2,
    the file named, nothing written."""
    from headstart.cli import main as cli_main

    (tmp_path / "e.txt").write_text("4 10 2\n0\n1\n0,1\n\n")
    argv = [command, str(tmp_path / "e.txt"), "--threads", "1"]
    argv += ["-o", str(tmp_path / "out")] if command != "cv" else ["--folds", "2", "--Cs", "1"]
    assert cli_main.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'e.txt'}: the data has no feature values (all 4 instances are empty rows): there is nothing " \
           "to learn but the bias" in err, err
    assert not (tmp_path / "out").exists()
