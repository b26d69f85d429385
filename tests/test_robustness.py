"""Numerical robustness through the public API, and resource limits.

Training (``headstart.OvAClassifier(...).fit(X, Y)``) on degenerate data -- all-zero
rows, duplicate rows, labels without positives or positive everywhere, huge and tiny
feature values, C at its extremes, dense features with constant columns -- must give
finite weights; when the solver stops early the statistics carry the status
(``stats_['status']``, names in ``headstart.solver.newton.STATUS_NAMES``) and a warning
names the labels.

Resource limits: ``headstart.resources`` estimates (checked against the memory a real
run touches), ``headstart train`` refusing with exit code 2 unless
``--no-memory-check``, ``headstart predict --max-memory``.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import headstart
from headstart import resources
from headstart.cli import main as cli_main
from headstart.errors import DataFormatError, ParameterError, ResourceError
from headstart.io import read_predictions, write_xmc
from headstart.params import TrainParams
from headstart.solver.newton import STATUS_NAMES

REPO = Path(__file__).resolve().parent.parent
#: the logger of the trainer's reports (training/chunks.py: report_problems), by the name
#: they had when they lived in training/trainer.py
REPORT_LOG = "headstart.training.trainer"


# --------------------------------------------------------------------------- data
def base_problem(n: int = 60, d: int = 15, L: int = 5, seed: int = 3):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, format="csr", dtype=np.float32, random_state=seed)
    Y = sp.csr_matrix((rng.random((n, L)) < 0.3).astype(np.float32))
    return X, Y


def _zero_rows():
    X, Y = base_problem()
    X = X.tolil()
    X[:10] = 0
    return X.tocsr(), Y, {}


def _duplicate_rows():
    X, Y = base_problem()
    return sp.vstack([X[:30], X[:30], X[:5]]).tocsr(), sp.vstack([Y[:30], Y[:30], Y[:5]]).tocsr(), {}


def _no_positives_and_all_positive():
    X, Y = base_problem()
    Yd = Y.toarray()
    Yd[:, 0] = 0
    Yd[:, 3] = 1
    return X, sp.csr_matrix(Yd), {}


def _scaled(factor):
    def make():
        X, Y = base_problem()
        return (X * factor).astype(np.float32), Y, {}
    return make


def _C(c):
    def make():
        X, Y = base_problem()
        return X, Y, {"C": c}
    return make


def _dense_constant_columns():
    rng = np.random.default_rng(5)
    X = rng.random((60, 15)).astype(np.float32)
    X[:, 0] = 1.0
    X[:, 7] = 5.0
    X[:, 9] = 0.0
    Y = (X[:, 1:6] > 0.6).astype(np.float32)
    return X, Y, {}


def _mixed_scales():
    X, Y = base_problem()
    X = X.tolil()
    X[:5] = X[:5] * 1e30
    X[5:10] = X[5:10] * 1e-30
    return X.tocsr().astype(np.float32), Y, {}


CASES = {
    "all-zero rows": _zero_rows,
    "duplicate rows": _duplicate_rows,
    "label without positives, label positive everywhere": _no_positives_and_all_positive,
    "huge values 1e30": _scaled(1e30),
    "tiny values 1e-30": _scaled(1e-30),
    "C=1e-8": _C(1e-8),
    "C=1e8": _C(1e8),
    "dense, constant columns": _dense_constant_columns,
    "rows 1e30 and 1e-30 mixed": _mixed_scales,
}


def check_fit(clf, n_labels: int, records) -> None:
    """Finite weights; a status per label; every label that stopped early is named in a
    warning of the trainer (at most the first 10 per status are listed)."""
    W, b = clf.coef_, clf.intercept_
    assert W.shape[0] == n_labels and b.shape == (n_labels,)
    assert np.all(np.isfinite(W.data)), "non-finite weight"
    assert np.all(np.isfinite(b)), f"non-finite intercept {b}"
    status = np.asarray(clf.stats_["status"])
    labels = np.asarray(clf.stats_["label"])
    assert status.shape == (n_labels,)
    assert set(status.tolist()) <= set(range(len(STATUS_NAMES)))
    warnings = [r.getMessage() for r in records if r.name == REPORT_LOG and r.levelno == logging.WARNING]
    for code in sorted(set(status.tolist()) - {0}):
        bad = labels[status == code]
        msg = [m for m in warnings if f"status {STATUS_NAMES[code]}:" in m]
        assert msg, f"no warning for status {STATUS_NAMES[code]} (labels {bad.tolist()}): {warnings}"
        named = [int(x) for x in re.findall(r"\d+", msg[0].split(":", 1)[1])]
        assert set(bad[:10].tolist()) <= set(named), (bad, msg)
        assert msg[0].startswith(f"{bad.size} label(s)")
    if not (status != 0).any():
        # (a start worse than w = 0 for most labels is said, and is expected on such data;
        # so is a bias-only model where the features' scale leaves every weight below --prune)
        assert not [m for m in warnings if "mostly a zero start" not in m and "kept no weight but the bias" not in m], \
            warnings


@pytest.mark.parametrize("init", ["aop", "ovap"])
@pytest.mark.parametrize("loss", ["squared-hinge", "logistic"])
@pytest.mark.parametrize("case", list(CASES))
def test_degenerate_data_gives_finite_weights_and_reports_early_stops(case, loss, init, trainer_log):
    X, Y, extra = CASES[case]()
    clf = headstart.OvAClassifier(threads=1, loss=loss, init=init, **extra).fit(X, Y)
    check_fit(clf, Y.shape[1], trainer_log.records)
    labels, scores = clf.predict_topk(X, k=2, threads=1)
    assert np.all(np.isfinite(scores)) and labels.min() >= 0


def test_label_without_positives_is_logged_and_counted(trainer_log):
    X, Y, _ = _no_positives_and_all_positive()
    clf = headstart.OvAClassifier(threads=1).fit(X, Y)
    assert int(clf.stats_["n_pos"][0]) == 0 and int(clf.stats_["n_pos"][3]) == X.shape[0]
    info = [r.getMessage() for r in trainer_log.records if r.name == REPORT_LOG and r.levelno == logging.INFO]
    assert any(m.startswith("1 label(s) have no positive training instance") and m.endswith(": 0") for m in info)
    # the all-negative label scores below every instance's best label
    scores = clf.decision_function(X)
    assert np.all(scores[:, 0] < 0)


def test_label_reports_keep_the_logger_name_users_filter_on(caplog):
    """The label reports (report_problems, restarts) moved from training/trainer.py to
    training/chunks.py; a user who silenced or routed them by the logger
    "headstart.training.trainer" must still reach them by that name (the move was meant
    to change no behaviour)."""
    from headstart.training import chunks

    assert chunks.log.name == "headstart.training.trainer"
    X, Y = base_problem()
    top = logging.getLogger("headstart")
    old = top.propagate
    top.propagate = True
    try:
        with caplog.at_level(logging.WARNING, logger="headstart"):
            logging.getLogger("headstart.training.trainer").setLevel(logging.ERROR)    # the user's filter
            try:
                headstart.OvAClassifier(threads=1, max_iter=1).fit(X, Y)
            finally:
                logging.getLogger("headstart.training.trainer").setLevel(logging.NOTSET)
    finally:
        top.propagate = old
    assert not [r for r in caplog.records if "status max_iter" in r.getMessage()]


def test_solver_stopping_early_sets_status_and_warns(trainer_log):
    """max_iter=1 stops every label that needs a second Newton step: status max_iter
    (1) in the statistics and one warning naming them."""
    X, Y = base_problem()
    clf = headstart.OvAClassifier(threads=1, max_iter=1, init="zero").fit(X, Y)
    status = np.asarray(clf.stats_["status"])
    assert (status == 1).any()
    check_fit(clf, Y.shape[1], trainer_log.records)
    assert clf.stats_.summary()["not_converged"]["max_iter"] == int((status == 1).sum())


def _no_active_instance_after_aop():
    """One positive (feature 0) scored s = 1 by aop, nine identical negatives scored
    t = -2: no instance is active at the start, so diag(H) is 0 on the unregularised bias."""
    X = np.zeros((10, 3), dtype=np.float32)
    X[0, 0] = 1.0
    X[1:, 1] = 1.0
    Y = np.zeros((10, 1), dtype=np.int8)
    Y[0, 0] = 1
    return sp.csr_matrix(X), Y


@pytest.mark.parametrize("alpha", [0, 1, 0.0, 1.0, -0.5, 1.5, float("nan")])
def test_pcg_alpha_outside_the_open_interval_is_refused(alpha):
    """At alpha = 1 the preconditioner is diag(H) alone and training the label above
    divided by zero (ZeroDivisionError in CG); the boundary refuses it, and 0, before
    anything runs."""
    with pytest.raises(ParameterError, match=r"parameter pcg_alpha must be a number in \(0, 1\), got "):
        TrainParams(pcg_alpha=alpha)
    with pytest.raises(ParameterError, match="pcg_alpha"):
        headstart.OvAClassifier(threads=1, pcg_alpha=alpha).fit(*_no_active_instance_after_aop())


def test_pcg_alpha_near_one_trains_the_label_without_active_instances():
    X, Y = _no_active_instance_after_aop()
    ref = headstart.OvAClassifier(threads=1, prune=0.0).fit(X, Y)
    clf = headstart.OvAClassifier(threads=1, prune=0.0, pcg_alpha=0.999).fit(X, Y)
    assert np.asarray(clf.stats_["status"]).tolist() == [0]
    # the same minimiser (strictly convex in w, the bias pinned by the data)
    np.testing.assert_allclose(clf.coef_.toarray(), ref.coef_.toarray(), atol=1e-3)
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, atol=1e-3)


def test_cli_refuses_pcg_alpha_one_with_exit_2(tmp_path, capsys):
    X, Y = _no_active_instance_after_aop()
    data = tmp_path / "train.txt"
    write_xmc(data, X, sp.csr_matrix(Y))
    capsys.readouterr()
    code = cli_main.main(["train", str(data), "-o", str(tmp_path / "model"), "--pcg-alpha", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == ("headstart train: error: parameter pcg_alpha (--pcg-alpha) must be a number "
                           "in (0, 1), got 1.0")
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize("value, needle", [(-1, "found the value -1.0 at row 2, column 1 "
                                               "(for -1/+1 targets pass y > 0)"),
                                           (2, "found the value 2.0 at row 2, column 1"),
                                           (0.5, "found the value 0.5 at row 2, column 1"),
                                           (np.nan, "found the value nan at row 2, column 1")])
def test_labels_other_than_0_1_are_refused(value, needle):
    X, Y = base_problem()
    Y = np.asarray(sp.csr_matrix(Y).toarray(), dtype=np.float64)
    Y[2, 1] = value
    for given in (Y, sp.csr_matrix(Y), sp.coo_matrix(Y)):
        with pytest.raises(DataFormatError, match=re.escape("Y must be a 0/1 indicator matrix (one column per "
                                                            "label), " + needle)):
            headstart.OvAClassifier(threads=1).fit(X, given)


def test_label_strings_that_are_no_numbers_are_refused_by_name():
    X, Y = base_problem()
    bad = sp.csr_matrix(Y).toarray().astype(str)
    bad[0, 0] = "yes"                             # numpy's <U array: was scipy's "does not support dtype <U32"
    with pytest.raises(DataFormatError, match="Y must be numeric: could not convert string to float: 'yes'"):
        headstart.OvAClassifier(threads=1).fit(X, bad)


def test_the_library_refuses_an_empty_label_range_like_the_command_line(tmp_path):
    """num_labels=0, or a label matrix of no columns, made an empty model directory that
    called itself complete (helper-56); the command line already refused both."""
    from headstart.distributed import train_sharded
    from headstart.estimator import fit_model

    X, Y = base_problem()
    with pytest.raises(ParameterError, match=r"num_labels \(--num-labels\) must be an integer in \[1, "):
        fit_model(X, Y, TrainParams(), num_labels=0)
    with pytest.raises(DataFormatError, match=r"Y has 0 label\(s\)"):
        headstart.OvAClassifier(threads=1).fit(X, sp.csr_matrix((X.shape[0], 0)))
    with pytest.raises(ParameterError, match="num_labels"):
        train_sharded(X, Y, TrainParams(), tmp_path / "m", num_labels=0)
    assert not (tmp_path / "m").exists()


def test_label_matrices_of_any_0_1_kind_train_the_same():
    X, Y = base_problem()
    Y = sp.csr_matrix(Y).toarray() != 0
    ref = headstart.OvAClassifier(threads=1).fit(X, Y.astype(np.int8))
    C = sp.coo_matrix(Y.astype(np.float32))
    twice = sp.coo_matrix((np.r_[C.data, C.data[:3]], (np.r_[C.row, C.row[:3]], np.r_[C.col, C.col[:3]])),
                          shape=C.shape)      # three (row, label) pairs listed twice: still one positive each
    strings = Y.astype(np.int8).astype(str)       # '0' / '1' as numpy strings, as an object array of them
    for given in (Y, Y.astype(np.float64), sp.csr_matrix(Y), C, twice, Y.tolist(), strings, strings.astype(object)):
        clf = headstart.OvAClassifier(threads=1).fit(X, given)
        assert (clf.coef_ != ref.coef_).nnz == 0 and np.array_equal(clf.intercept_, ref.intercept_)


def test_values_near_float32_max_give_finite_weights_with_aop(trainer_log):
    """Column sums near float32's maximum must not overflow (they are accumulated in float64)."""
    X, Y = base_problem()
    clf = headstart.OvAClassifier(threads=1, prune=0.0).fit((X * 1e38).astype(np.float32), Y)
    check_fit(clf, Y.shape[1], trainer_log.records)
    assert np.all(np.asarray(clf.stats_["status"]) == 0)


@pytest.mark.parametrize("init", ["zero", "bias"])
def test_values_near_float32_max_train_like_smaller_values(init):
    X, Y = base_problem()
    ref = headstart.OvAClassifier(threads=1, prune=0.0, init=init).fit((X * 1e37).astype(np.float32), Y)
    clf = headstart.OvAClassifier(threads=1, prune=0.0, init=init).fit((X * 1e38).astype(np.float32), Y)
    assert np.all(np.isfinite(np.asarray(clf.stats_["gnorm_zero"])))
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, atol=1e-3)


def test_tiny_values_lose_nothing():
    """X * 1e-30 with C = 1e60 is the same problem as X with C = 1 (substitute v = 1e-30 w):
    features down to 1e-30 (and weights up to 1e30) train to the same model, scaled."""
    X, Y = base_problem()
    ref = headstart.OvAClassifier(threads=1, prune=0.0).fit(X, Y)
    clf = headstart.OvAClassifier(threads=1, prune=0.0, C=1e60).fit((X * 1e-30).astype(np.float32), Y)
    assert np.all(np.asarray(clf.stats_["status"]) == 0)
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, atol=2e-2)
    np.testing.assert_allclose(clf.coef_.toarray() * 1e-30, ref.coef_.toarray(), atol=3e-2)


# --------------------------------------------------------------------------- resources
def test_lanes_kept_wherever_they_fit_half_the_memory():
    """16 lanes per thread unless their buffers exceed half of the memory the process may
    use (at least 2 GiB): the Amazon-670K shape at 64 threads keeps them on a 256 GiB
    machine (they take ~15 GiB), halves them on a 24 GiB one and gives them up on an 8 GiB
    one.  The estimate follows the trainer: X there is larger than the cache, so the
    threads share 16 lanes per team of four (budget.share_lanes) by default whatever the
    start and loss: ~4 GiB with aop, ~7 GiB from zero or with the logistic loss (their
    direction groups), against ~15 GiB with share_lanes='no' (issue 12: a thread's
    memory must not grow as lanes x (n + d))."""
    from headstart.training.kernel import HALF_LANES, LANES
    from headstart.training.budget import choose_lanes, lane_budget

    assert lane_budget(256 * 2**30) == 128 * 2**30 and lane_budget(1 * 2**30) == 2 * 2**30
    assert choose_lanes(490449, 135909, 64, lane_budget(256 * 2**30)) == LANES
    assert choose_lanes(490449, 135909, 64, lane_budget(8 * 2**30)) == 1
    # in between, 8 lanes (one sweep per 8 labels instead of one per label)
    assert choose_lanes(490449, 135909, 64, lane_budget(24 * 2**30)) == HALF_LANES
    assert choose_lanes(490449, 135909, 2, lane_budget(8 * 2**30)) == LANES
    from headstart.training.budget import team_workspace_bytes

    e = resources.estimate_training_memory(490449, 135909, 490449 * 75, 670091, 64, memory=256 * 2**30,
                                           collect=False, init="zero", share_lanes="no")
    assert e.details["lanes"] == LANES and not e.details["shared_lanes"] and e.parts["workspaces"] > 12 * 2**30
    for kw in ({"init": "zero"}, {"loss": "logistic"}):
        z = resources.estimate_training_memory(490449, 135909, 490449 * 75, 670091, 64, memory=256 * 2**30,
                                               collect=False, **kw)
        assert z.details["shared_lanes"] and z.details["team_threads"] == 4, kw
        assert z.parts["workspaces"] < 0.5 * e.parts["workspaces"], kw
    t = resources.estimate_training_memory(490449, 135909, 490449 * 75, 670091, 64, memory=256 * 2**30,
                                           collect=False)
    assert t.details["shared_lanes"] and t.details["threads"] == 64 and t.details["team_threads"] == 4
    assert t.parts["workspaces"] == team_workspace_bytes(490449, 135909, 64) < 4.5 * 2**30


def test_the_memory_is_probed_only_when_the_lanes_exceed_every_budgets_floor(monkeypatch):
    """plan_lanes asks the system for its memory (/proc, cgroups: ~0.2 ms) only when 16
    lanes of all threads would exceed MIN_LANE_BUDGET, which every budget has."""
    from headstart.training import budget
    from headstart.training.kernel import HALF_LANES, LANES

    probes = []
    monkeypatch.setattr(budget, "lane_budget", lambda memory=None: probes.append(1) or 12 * 2**30)
    assert budget.plan_lanes(5000, 3000, 2) == (LANES, None) and not probes
    assert budget.thread_workspace_bytes(490449, 135909, LANES) * 64 > budget.MIN_LANE_BUDGET
    assert budget.plan_lanes(490449, 135909, 64) == (HALF_LANES, 12 * 2**30) and len(probes) == 1
    assert budget.plan_lanes(490449, 135909, 64, 4 * 2**30) == (1, 4 * 2**30) and len(probes) == 1


def test_fewer_lanes_are_reported(monkeypatch, caplog):
    """When the lane buffers do not fit the budget the trainer says how many lanes it
    took: 8 at INFO, one (several times slower) as a WARNING; the weights are the same."""
    from headstart.validation import check_features, check_labels
    from headstart.params import TrainParams
    from headstart.training.budget import thread_workspace_bytes
    from headstart.training import budget as budget_module, trainer

    rng = np.random.default_rng(3)
    X = check_features(sp.random(300, 60, density=0.1, format="csr", random_state=3, dtype=np.float32))
    Y = check_labels(sp.csr_matrix((rng.random((300, 20)) < 0.1).astype(np.float32)), 300)
    n, d = X.shape
    p = TrainParams(threads=1)
    labels = np.arange(20)
    W16, _, st16 = trainer.train_labels(X, Y, p, labels)
    assert st16.meta["lanes"] == 16
    for budget, lanes, level in [(thread_workspace_bytes(n, d, 8), 8, logging.INFO),
                                 (thread_workspace_bytes(n, d, 1), 1, logging.WARNING)]:
        monkeypatch.setattr(budget_module, "lane_budget", lambda memory=None, b=budget: b)
        # a budget below the floor no real machine gets (lane_budget >= MIN_LANE_BUDGET,
        # which lets plan_lanes skip the memory probe for small problems)
        monkeypatch.setattr(budget_module, "MIN_LANE_BUDGET", 0)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="headstart.training.trainer"):
            W, _, st = trainer.train_labels(X, Y, p, labels)
        assert st.meta["lanes"] == lanes and (W != W16).nnz == 0
        hits = [r for r in caplog.records if "lanes per thread" in r.getMessage()]
        assert len(hits) == 1 and hits[0].levelno == level and hits[0].getMessage().startswith(f"lanes per thread: {lanes} instead of 16")


def test_more_threads_than_cores_are_run_as_asked_and_reported(monkeypatch, caplog):
    """A thread count beyond the usable cores is honoured (the weights do not depend on
    it) but named in a warning: each thread holds a lane workspace and gains nothing.
    Not said when the threads fit the cores, nor when the labels make fewer chunks, nor
    twice in a process (a Dask worker trains many ranges)."""
    from headstart.validation import check_features, check_labels
    from headstart.params import TrainParams
    from headstart.training import trainer

    rng = np.random.default_rng(4)
    X = check_features(sp.random(200, 40, density=0.1, format="csr", random_state=4, dtype=np.float32))
    Y = check_labels(sp.csr_matrix((rng.random((200, 12)) < 0.1).astype(np.float32)), 200)
    labels = np.arange(12)
    W1, _, _ = trainer.train_labels(X, Y, TrainParams(threads=1), labels)
    from headstart import _threads

    monkeypatch.setattr(_threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(_threads, "_OVERSUBSCRIBED", set())
    for threads, chunk_size, warned in [(2, 4, False), (3, 4, True), (3, 6, False), (3, 4, False)]:
        # (12 / 6: two chunks; the last: said once per process already)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="headstart.training.trainer"):
            W, _, st = trainer.train_labels(X, Y, TrainParams(threads=threads), labels, chunk_size=chunk_size)
        assert (W != W1).nnz == 0 and st.meta["threads"] == min(threads, 12 // chunk_size)
        hits = [r.getMessage() for r in caplog.records if "usable core" in r.getMessage()]
        assert hits == ([WARNING_3_ON_2] if warned else [])
    # shortlisted training, on the same threads of its own (once per process: not again)
    from headstart.shortlist import train_shortlisted

    every = sp.csc_matrix(np.ones((200, 12), dtype=np.float32))
    for threads, warned in [(4, True), (4, False)]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="headstart.shortlist.training"):
            train_shortlisted(X, sp.csc_matrix(Y), every, TrainParams(threads=threads), labels, chunk_size=2)
        hits = [r.getMessage() for r in caplog.records if "usable core" in r.getMessage()]
        assert hits == ([WARNING_3_ON_2.replace("3 training", "4 training")] if warned else [])


WARNING_3_ON_2 = ("3 training threads on 2 usable core(s) (affinity mask / CPU quota): each thread takes its own "
                  "workspace and runs no faster; threads=2 (or 0) would do")


def test_training_estimate_follows_the_trainer():
    from headstart._threads import usable_cores
    from headstart.training.budget import choose_lanes, team_workspace_bytes

    # by default two threads with a core each share their lanes as a team where X is
    # larger than the cache (aop, no direction groups: budget.share_lanes); where it
    # fits, or lanes are given, each thread runs its own
    big = 9 * 2**20
    t = resources.estimate_training_memory(100000, 500, big, 64, 2, label_nnz=300000)
    assert t.details["shared_lanes"] == (usable_cores() >= 2)
    if t.details["shared_lanes"]:
        assert t.parts["workspaces"] == team_workspace_bytes(100000, 500, 2) and t.details["threads"] == 2
    assert not resources.estimate_training_memory(100000, 500, big, 64, 2, label_nnz=300000,
                                                  lanes=16).details["shared_lanes"]
    e = resources.estimate_training_memory(1000, 500, 20000, 64, 2, label_nnz=3000)
    assert not e.details["shared_lanes"]
    assert e.details["lanes"] == choose_lanes(1000, 500, e.details["threads"])
    assert e.total == sum(e.parts.values()) > 0
    # the lane workspaces: what make_lane_workspace allocates for the lanes of a thread,
    # per thread, + the float32 sweep buffer (lanes columns), three float64 scratch vectors
    # of d + 1 (the recomputed start, the positives' sum, the exact remainder) and, with 16
    # lanes, the direction group (seven float64 vectors of d + 1 per member, per instance
    # 5 bytes and the members' gradient coefficients, a float64 each)
    from headstart.objective.erm import GROUP
    from headstart.training.kernel import LANES, make_lane_workspace

    L = e.details["lanes"]
    ws, state = make_lane_workspace(1000, 500, L)
    lanes = sum(a.nbytes for a in (*ws, *state))
    group = 0    # aop with the squared hinge: no direction groups (budget.use_groups)
    assert e.parts["workspaces"] == e.details["threads"] * (lanes + 3 * 501 * 8 + L * 501 * 4 + group)
    assert e.parts["data"] == 20000 * 8 + 1001 * 8 + 3000 * 8 + 1001 * 8
    # from zero the threads form direction groups: their buffers on top, per thread (and
    # per member its lane, CG scalars and run flag)
    from headstart.solver.cg import CG_SCALARS

    g = resources.estimate_training_memory(1000, 500, 20000, 64, 2, label_nnz=3000, init="zero")
    assert not g.details["shared_lanes"]
    if g.details["lanes"] == LANES:
        assert g.parts["workspaces"] - e.parts["workspaces"] == g.details["threads"] * (
            7 * GROUP * 501 * 8 + 5000 + GROUP * 1000 * 8 + GROUP * (8 + CG_SCALARS * 8 + 1))
    bigger = resources.estimate_training_memory(2000, 500, 20000, 64, 2, label_nnz=3000, lanes=16)
    assert bigger.parts["workspaces"] > e.parts["workspaces"]
    sharded = resources.estimate_training_memory(1000, 500, 20000, 64, 2, label_nnz=3000, collect=False, lanes=16)
    assert sharded.parts["weights"] == 0 and sharded.total < e.total
    bare = resources.estimate_training_memory(1000, 500, 20000, 64, 2, label_nnz=3000, collect=False,
                                              trajectories=False, lanes=16)
    # per label: the label, the kernel's 14 statistics, shared_with and the trajectory
    # offset, times the concatenation's peak; the label ids and the spool's label, row
    # length and intercept
    assert bare.parts["statistics"] == int(resources._STATS_PEAK * 64 * 17 * 8) < sharded.parts["statistics"]
    assert bare.parts["label arrays"] == 64 * (8 + 20) and e.parts["label arrays"] == 64 * (8 + 12)
    # a problem whose 8 lanes exceed 2 GiB falls back to one lane per thread, as the trainer does
    wide = resources.estimate_training_memory(10, 50_000_000, 10, 1, 1)
    assert wide.details["lanes"] == 1 and "workspaces" in wide.describe()


_MEASURE = r"""
import sys, numpy as np, scipy.sparse as sp, headstart
from headstart import resources
from headstart.params import TrainParams
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
rng = np.random.default_rng(0)
X = sp.random(20000, 4000, density=0.002, format="csr", dtype=np.float32, random_state=0)
Y = sp.csr_matrix((rng.random((20000, 16)) < 0.05).astype(np.float32))
headstart.OvAClassifier(threads=1, max_iter=2).fit(X[:50], Y[:50])     # compile / load caches first
p = TrainParams(threads=1, prune=0.0, max_iter=8)
est = resources.training_memory_for(X, Y, p)
open("/proc/self/clear_refs", "w").write("5")                          # reset the peak (VmHWM)
base = status("VmRSS")
headstart.OvAClassifier(**p.to_dict()).fit(X, Y)
print(status("VmHWM") - base, est.without("data"))
"""


def test_training_estimate_bounds_the_memory_a_run_touches():
    """The estimate (beyond the data) is at least the peak RSS growth of a real run and
    not wildly above it (np.zeros pages that are never touched count in the estimate)."""
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux /proc")
    r = subprocess.run([sys.executable, "-c", _MEASURE], capture_output=True, text=True, timeout=300, cwd=REPO)
    if r.returncode != 0 and "clear_refs" in r.stderr:
        pytest.skip("cannot reset the peak RSS here")
    assert r.returncode == 0, r.stderr[-2000:]
    measured, estimate = (int(v) for v in r.stdout.split()[-2:])
    assert measured <= estimate <= 4 * measured + (8 << 20), (measured, estimate)


def test_available_memory_reads_meminfo_and_honours_ulimit():
    avail = resources.available_memory()
    assert avail is None or 0 < avail
    if os.path.exists("/proc/meminfo"):
        total = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1)) * 1024
        assert avail <= total
    code = ("import resource, os; from headstart import resources as r;"
            "vm = int(open('/proc/self/statm').read().split()[0]) * os.sysconf('SC_PAGE_SIZE');"
            "resource.setrlimit(resource.RLIMIT_AS, (vm + (300 << 20), resource.RLIM_INFINITY));"
            "print(r.available_memory(), r.available_memory(threads=2), r.thread_address_space())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    plain, two, per_thread = (int(v) for v in out.stdout.split())
    assert plain <= 300 << 20 and per_thread >= 64 << 20
    # the threads a run starts reserve address space that the limit counts (helper-52)
    assert two <= max(0, plain - 2 * per_thread) + (1 << 20)


def test_check_memory_message_names_both_numbers_and_the_option():
    with pytest.raises(ResourceError) as e:
        resources.check_memory(3 << 30, "training 5 labels", available=1 << 30, breakdown="workspaces 3.0 GiB")
    text = str(e.value)
    assert "needs an estimated 3.0 GiB" in text and "only 1.0 GiB is available" in text
    assert "--no-memory-check" in text and "workspaces 3.0 GiB" in text
    resources.check_memory(1 << 20, "x", available=1 << 30)   # fits: no error


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = cli_main.main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_train_refuses_what_cannot_fit(tmp_path):
    """A 40-byte file claiming 2e9 labels: their statistics alone would need ~500 GiB.
    headstart train refuses before allocating anything: exit 2, both numbers, the option.
    (A file claiming 2e9 *features* trains: the kernels work on the features that occur,
    test_training.py.)"""
    data = tmp_path / "wide.txt"
    data.write_bytes(b"2 10 2000000000\n0 5:1 7:2\n1 3:1\n")
    r = subprocess.run([sys.executable, "-m", "headstart", "train", str(data), "-o", str(tmp_path / "m")],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 2, r.stderr
    assert re.search(r"needs an estimated [\d.]+ GiB of memory but only [\d.]+ [GMT]iB is available", r.stderr)
    assert "--no-memory-check" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "m").exists()


def test_no_memory_check_goes_on(tmp_path, capsys, monkeypatch):
    X, Y = base_problem()
    write_xmc(tmp_path / "d.txt", X, Y)
    monkeypatch.setattr(resources, "available_memory", lambda threads=0: 1 << 14)    # 16 KiB "available"
    code, _, err = run_cli(capsys, "train", tmp_path / "d.txt", "-o", tmp_path / "m", "--threads", "1", "-q")
    assert code == 2 and "is available" in err and not (tmp_path / "m").exists()
    code, _, err = run_cli(capsys, "train", tmp_path / "d.txt", "-o", tmp_path / "m", "--threads", "1", "-q",
                           "--no-memory-check")
    assert code == 0, err
    assert headstart.load(tmp_path / "m").coef_.shape == (Y.shape[1], X.shape[1])
    # sharded training keeps no weights: a smaller estimate, the same refusal path
    code, _, err = run_cli(capsys, "train", tmp_path / "d.txt", "-o", tmp_path / "s", "--threads", "1", "-q",
                           "--shard-size", "2")
    assert code == 2 and "--shard-size" not in err.split("available")[1]


@pytest.mark.parametrize("command", [["cv", "--folds", "2"], ["thresholds", "--folds", "2", "-o", "{out}"],
                                     ["tree", "-o", "{out}"],
                                     ["shortlist-train", "--shortlist", "{shortlist}", "-o", "{out}"],
                                     ["train", "-o", "{out}", "--dask-workers", "1"],
                                     ["shortlist-train", "--shortlist", "{shortlist}", "-o", "{out}",
                                      "--dask-workers", "1"]])
def test_every_training_command_refuses_what_cannot_fit(tmp_path, command):
    """cv, thresholds, tree and shortlist-train check the memory as train does: on a file
    declaring 2e9 labels they were killed by the kernel (exit 137, ~16 GB for Y's column
    pointer or the shortlist's label counts) before stop 84; now exit 2 with both numbers
    and the option, nothing written.  On Dask the client's part is checked (the labels'
    statistics and arrays come back to it): 2e8 labels on one local worker grew the
    client past 15 GB until the kernel killed it (exit 137) before stop 85."""
    data = tmp_path / "wide.txt"
    data.write_bytes(b"2 10 2000000000\n0 5:1 7:2\n1 3:1\n")
    (tmp_path / "sl.txt").write_bytes(b"2 2000000000\n0:1\n1:0\n")
    out = tmp_path / "out"
    argv = [a.format(out=out, shortlist=tmp_path / "sl.txt") for a in command]
    r = subprocess.run([sys.executable, "-m", "headstart", argv[0], str(data), *argv[1:]],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 2, r.stderr
    assert re.search(r"needs an estimated [\d.]+ [GT]iB of memory but only [\d.]+ [GMT]iB is available", r.stderr)
    assert "--no-memory-check" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


def test_memory_refusal_advises_what_would_shrink_the_need(tmp_path, capsys, monkeypatch):
    """helper-120: at --threads 1, with the labels' statistics most of the need, the
    refusal said "use fewer --threads" (and "sharded" of a run that was not)."""
    data = tmp_path / "wide.txt"
    data.write_bytes(b"2 10 2000000\n0 5:1 7:2\n1 3:1\n")      # the statistics of 2M labels: ~0.5 GiB
    monkeypatch.setattr(resources, "available_memory", lambda threads=0: 1 << 20)
    for threads in ("1", "2"):
        code, _, err = run_cli(capsys, "train", data, "-o", tmp_path / "m", "--threads", threads, "-q")
        assert code == 2 and "statistics" in err
        assert "fewer --threads" not in err and "--first-label/--num-labels" in err, err
        assert "sharded" not in err
    code, _, err = run_cli(capsys, "cv", data, "--folds", "2", "--threads", "1", "-q")
    assert code == 2 and "fewer --threads" not in err and "--first-label" not in err, err


def test_cross_validation_memory_check_and_its_option(tmp_path, capsys, monkeypatch):
    """cv and thresholds count the fold copies of the data beside a fold's training
    (and every fold's model); --no-memory-check goes on anyway."""
    X, Y = base_problem()
    write_xmc(tmp_path / "d.txt", X, Y)
    monkeypatch.setattr(resources, "available_memory", lambda threads=0: 1 << 14)    # 16 KiB "available"
    code, _, err = run_cli(capsys, "cv", tmp_path / "d.txt", "--folds", "2", "--threads", "1", "-q")
    assert code == 2 and "is available" in err and "data copies" in err
    code, _, err = run_cli(capsys, "thresholds", tmp_path / "d.txt", "-o", tmp_path / "t.txt", "--folds", "2",
                           "--threads", "1", "-q")
    assert code == 2 and "is available" in err and not (tmp_path / "t.txt").exists()
    code, out, err = run_cli(capsys, "cv", tmp_path / "d.txt", "--folds", "2", "--threads", "1", "-q",
                             "--no-memory-check")
    assert code == 0, err
    assert "best" in out or "C" in out
    # scutfbr's inner folds copy from the whole data, one copy at a time (helper-121):
    # the same estimate as micromacro's
    need = {}
    for method in ("micromacro", "scutfbr"):
        code, _, err = run_cli(capsys, "thresholds", tmp_path / "d.txt", "-o", tmp_path / "t.txt", "--folds", "3",
                               "--method", method, "--threads", "1", "-q")
        assert code == 2
        need[method] = re.search(r"needs an estimated ([\d.]+ \w+)", err).group(1)
    assert need["scutfbr"] == need["micromacro"]
    # experiment --print-params prints, whatever the data (it trained, helper-121)
    code, out, _ = run_cli(capsys, "experiment", tmp_path / "d.txt", tmp_path / "d.txt", "-o", tmp_path / "e",
                           "--print-params")
    assert code == 0 and '"init"' in out and not (tmp_path / "e").exists()


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("maxmem")
    rng = np.random.default_rng(1)
    X = sp.random(3000, 400, density=0.05, format="csr", dtype=np.float32, random_state=1)
    Y = sp.csr_matrix((rng.random((3000, 40)) < 0.1).astype(np.float32))
    write_xmc(d / "test.txt", X, Y)
    headstart.OvAClassifier(threads=1, max_iter=20).fit(X, Y).save(d / "model", shard_size=10)
    return d


def test_predict_max_memory_bounds_the_blocks_and_keeps_the_predictions(small_model, capsys):
    d = small_model
    code, _, err = run_cli(capsys, "predict", d / "model", d / "test.txt", "-o", d / "all.txt", "-q")
    assert code == 0, err
    ref = read_predictions(d / "all.txt")
    from headstart.cli import predict as cli_predict

    args = cli_main.build_parser().parse_args(["predict", str(d / "model"), str(d / "test.txt"), "-o", "x",
                                               "--max-memory", "1", "--threads", "1"])
    rows_1mb = cli_predict.ModelScorer(args.model, args).chunk_rows(args, 5)
    assert 1 <= rows_1mb < 3000
    args.max_memory = 64
    assert cli_predict.ModelScorer(args.model, args).chunk_rows(args, 5) > rows_1mb
    for mb, streamed in (("1", "0"), ("1", "1024"), ("64", "1024")):   # --model-memory 0: shard by shard
        code, _, err = run_cli(capsys, "predict", d / "model", d / "test.txt", "-o", d / f"p{mb}.txt", "-q",
                               "--max-memory", mb, "--threads", "1", "--model-memory", streamed)
        assert code == 0, err
        labels, scores = read_predictions(d / f"p{mb}.txt")
        np.testing.assert_array_equal(labels, ref[0])
        np.testing.assert_array_equal(scores, ref[1])


def test_predict_max_memory_too_small_is_refused(small_model, capsys, tmp_path):
    d = small_model
    code, _, err = run_cli(capsys, "predict", d / "model", d / "test.txt", "-o", tmp_path / "p.txt",
                           "--max-memory", "1", "--threads", "4096")
    assert code == 2
    assert "--max-memory 1.0 MiB is too small" in err and "Traceback" not in err
    assert not (tmp_path / "p.txt").exists()
    with pytest.raises(ResourceError):
        resources.prediction_chunk_rows(1 << 20, 10, 10 ** 6, 10 ** 6, 5, 1)
    assert resources.prediction_chunk_rows(1 << 30, 10, 100, 1000, 5, 1, row_bytes=100, limit=7) == 7


@pytest.fixture(scope="module")
def one_shard_model(tmp_path_factory):
    """An unpruned model's shape, written as 'headstart train' writes it without
    --shard-size (one shard): every label has weights on the frequent features (columns
    set for most labels, kept dense for scoring) and on a share of the rest."""
    from headstart.model import OvAModel, save_model

    d_ = tmp_path_factory.mktemp("oneshard")
    rng = np.random.default_rng(3)
    L, d = 400, 4000
    keep = rng.random((L, d)) < np.minimum(1.0, 12.0 / np.sqrt(np.arange(1, d + 1)))
    W = sp.csr_matrix(np.where(keep, rng.standard_normal((L, d)), 0.0).astype(np.float32))
    save_model(OvAModel(weights=W, intercept=rng.standard_normal(L).astype(np.float32), n_features=d,
                        label_space=L), d_ / "model")
    X = sp.random(300, d, density=0.01, format="csr", dtype=np.float32, random_state=4)
    write_xmc(d_ / "test.txt", X, sp.csr_matrix((300, L), dtype=np.float32))
    return d_, X, W.nnz


def _traced_peak(fn):
    """fn()'s peak of traced allocations (numpy reports its arrays to tracemalloc), run once
    untraced first: what a first call loads (numba's cached kernels) is not its memory."""
    import tracemalloc

    fn()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_predict_model_memory_within_the_estimate(one_shard_model):
    """Reading a one-shard model and turning it into its scoring form peaks at about twice
    its weights -- the shard file's bytes and the arrays parsed from them, then the CSR and
    the feature-major form built straight from it -- and the estimate that sizes
    --max-memory's blocks (and refuses a bound too small) counts that peak, within 15%.
    Measured when written: 9.34 MB for 4.39 MB of weights (2.13x), estimate 9.6 MB; the
    CSC copy split into its dense columns afterwards peaked at 13.4 MB (3.06x), and the
    estimate said 8.4 MB.  A shard scored for a block of rows, as the streamed model is,
    stays within the streamed estimate (9.34 MB, estimate 9.9 MB)."""
    from headstart.model.reader import load_model
    from headstart.prediction.topk import predict_topk_streaming, prepare

    d_, X, nnz = one_shard_model
    L, d = 400, 4000
    weight_bytes = 8 * nnz
    peak = _traced_peak(lambda: prepare(load_model(d_ / "model")))
    est = resources.estimate_prediction_memory(1, d, L, nnz, 5, 1)
    assert peak <= 2.2 * weight_bytes, (peak, weight_bytes)
    assert peak <= est.details["model_peak"] <= 1.15 * peak, (peak, est.details)

    row_bytes = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / X.shape[0]
    peak = _traced_peak(lambda: predict_topk_streaming(d_ / "model", X, 5, threads=1))
    est = resources.estimate_prediction_memory(X.shape[0], d, L, nnz, 5, 1, row_bytes=row_bytes, streamed=True,
                                               shard_labels=L, shard_nnz=nnz)
    assert peak <= est.total <= 1.25 * peak, (peak, est.total, est.describe())


def test_predict_max_memory_below_one_shard_says_to_shard(one_shard_model, capsys, tmp_path):
    """A bound that one shard alone exceeds is refused before anything is read, saying to
    write smaller shards; the same model in smaller shards predicts within it, the same
    labels and scores."""
    d_, _, nnz = one_shard_model
    code, _, err = run_cli(capsys, "predict", d_ / "model", d_ / "test.txt", "-o", tmp_path / "p.txt",
                           "--max-memory", "4", "--threads", "1")
    assert code == 2 and "Traceback" not in err
    assert "largest shard (400 labels" in err and "--shard-size" in err and "save(NEW_DIR, shard_size=N)" in err
    assert not (tmp_path / "p.txt").exists()
    headstart.load(d_ / "model").save(tmp_path / "sharded", shard_size=40)
    code, _, err = run_cli(capsys, "predict", tmp_path / "sharded", d_ / "test.txt", "-o", tmp_path / "p.txt",
                           "--max-memory", "4", "--threads", "1", "-q")
    assert code == 0, err
    code, _, err = run_cli(capsys, "predict", d_ / "model", d_ / "test.txt", "-o", tmp_path / "ref.txt",
                           "--threads", "1", "-q")
    assert code == 0, err
    got, ref = read_predictions(tmp_path / "p.txt"), read_predictions(tmp_path / "ref.txt")
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])


# --------------------------------------------------------------------------- cores
def test_threads_zero_means_the_cores_this_process_may_use(monkeypatch, tmp_path):
    """``threads=0`` follows the affinity mask (taskset, SLURM) and a cgroup CPU quota
    (containers), not the machine's core count."""
    from headstart import _threads
    from headstart.params import TrainParams

    quota = _threads.cgroup_cpu_quota
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {0, 5, 7}, raising=False)
    monkeypatch.setattr(_threads, "cgroup_cpu_quota", lambda: None)
    assert TrainParams(threads=0).effective_threads() == 3
    assert TrainParams(threads=8).effective_threads() == 8       # asked for: as asked
    monkeypatch.setattr(_threads, "cgroup_cpu_quota", lambda: 2)
    assert TrainParams().effective_threads() == 2

    def cgroups(name: str, own: str, files: dict[str, str]):
        base = tmp_path / name
        for rel, text in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)
        (tmp_path / f"{name}.own").write_text(own)
        return quota(base / "fs", tmp_path / f"{name}.own")

    # v2, a process in its own namespace ("/"): the root's cpu.max; 1.5 CPUs -> 2 threads
    assert cgroups("a", "0::/\n", {"fs/cgroup.controllers": "cpu", "fs/cpu.max": "150000 100000\n"}) == 2
    assert cgroups("b", "0::/\n", {"fs/cgroup.controllers": "cpu", "fs/cpu.max": "max 100000\n"}) is None
    # v2, a nested cgroup (a systemd slice with a quota above a service without one)
    assert cgroups("c", "0::/box.slice/job.service\n", {
        "fs/cgroup.controllers": "cpu", "fs/box.slice/cpu.max": "300000 100000\n",
        "fs/box.slice/job.service/cpu.max": "max 100000\n"}) == 3
    # ... and the smallest on the way up wins
    assert cgroups("d", "0::/s/t\n", {
        "fs/cgroup.controllers": "cpu", "fs/s/cpu.max": "300000 100000\n",
        "fs/s/t/cpu.max": "100000 100000\n"}) == 1
    # v1, under cpu,cpuacct, nested; -1 is no quota
    assert cgroups("e", "12:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n", {
        "fs/cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "fs/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        "fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "400000\n",
        "fs/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"}) == 4
    assert cgroups("f", "12:cpu:/\n", {"fs/cpu/cpu.cfs_quota_us": "-1\n",
                                       "fs/cpu/cpu.cfs_period_us": "100000\n"}) is None
    # no cgroup file system at all (not Linux)
    assert quota(tmp_path / "none", tmp_path / "none.own") is None


def test_threads_arguments_of_prediction_and_the_first_stage_are_checked_alike(monkeypatch):
    """Prediction and the shortlist's first stage read ``threads`` through one rule
    (``_threads.resolve_threads``): None or 0 are the usable cores, anything but an
    integer >= 0 is refused by name -- the first stage used to take -1 as 'all cores'."""
    from headstart import _threads
    from headstart.errors import ParameterError
    from headstart.shortlist.candidates import recall

    monkeypatch.setattr(_threads, "usable_cores", lambda: 3)
    assert _threads.resolve_threads(None) == 3
    assert _threads.resolve_threads(0) == 3
    assert _threads.resolve_threads(np.int64(2)) == 2
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ParameterError, match="threads"):
            _threads.resolve_threads(bad)
    Y = sp.csr_matrix(np.array([[1, 0], [0, 1]], dtype=np.float32))
    assert recall(np.array([[0, 1], [1, 0]]), Y, threads=1) == 1.0
    with pytest.raises(ParameterError, match="threads"):
        recall(np.array([[0, 1], [1, 0]]), Y, threads=-1)


def test_fit_takes_int64_index_arrays_and_leaves_the_callers_matrix_alone(bibtex_dir):
    """scikit-learn's load_svmlight_file gives int64 index arrays (a crash in scipy's
    sort while the features were renumbered, found by probing); unsorted rows and
    explicit zeros are put right on a copy, not in the caller's arrays (dropping zeros
    in place corrupted the caller's matrix); and a matrix that needs nothing is not
    renumbered in place while training (the caller's, not ours)."""
    from headstart import OvAClassifier

    X, Y = headstart.read_xmc(str(bibtex_dir / "train.txt.gz"))[:2]
    X, Y = X[:600], Y[:600, :12]
    ref = OvAClassifier(threads=1).fit(X, Y)
    X64 = sp.csr_matrix((X.data.copy(), X.indices.astype(np.int64), X.indptr.astype(np.int64)), shape=X.shape)
    messy = X.copy()
    for i in range(0, 600, 7):                        # rows reversed, explicit zeros added
        a, b = messy.indptr[i], messy.indptr[i + 1]
        messy.indices[a:b] = messy.indices[a:b][::-1].copy()
        messy.data[a:b] = messy.data[a:b][::-1].copy()
    messy.has_sorted_indices = False
    zeros = sp.csr_matrix((np.r_[X.data, np.zeros(3, np.float32)], np.r_[X.indices, [0, 1, 2]],
                           np.r_[X.indptr[:-1], X.indptr[-1] + 3]), shape=X.shape)   # last row: three zeros more
    for given in (X64, messy, zeros, X):
        kept = (given.data.copy(), given.indices.copy(), given.indptr.copy())
        m = OvAClassifier(threads=1).fit(given, Y)
        assert (m.coef_ != ref.coef_).nnz == 0 and np.array_equal(m.intercept_, ref.intercept_)
        for a, b in zip((given.data, given.indices, given.indptr), kept):
            assert np.array_equal(a, b)
    # read-only arrays (a memory-mapped matrix, joblib's shared inputs): scipy's in-place
    # zero dropping refused them even with nothing to drop (helper-90)
    ro = X.copy()
    for a in (ro.data, ro.indices, ro.indptr):
        a.flags.writeable = False
    for kw in ({}, {"normalize": True}):
        m = OvAClassifier(threads=1, **kw).fit(ro, Y)
        want = ref if not kw else OvAClassifier(threads=1, **kw).fit(X, Y)
        assert (m.coef_ != want.coef_).nnz == 0 and np.array_equal(m.intercept_, want.intercept_)


def test_pruning_every_weight_of_most_labels_is_warned_about(trainer_log):
    """Features of a large scale give weights below --prune's absolute threshold: the
    default 0.01 removed every weight of every label and the model scored all rows alike,
    with no word (helper-78: features x 1e30, P@3 38.6 against 47.4 with prune 0)."""
    rng = np.random.default_rng(7)
    X = sp.random(200, 30, density=0.2, format="csr", random_state=rng, dtype=np.float32)
    Y = sp.csr_matrix((X[:, :4].toarray() > 0.5).astype(np.float32))
    big = (X * 1e30).astype(np.float32)
    said = lambda: [r.getMessage() for r in trainer_log.records if "kept no weight but the bias" in r.getMessage()]
    clf = headstart.OvAClassifier(threads=1).fit(big, Y)
    assert clf.coef_.nnz == 0
    assert len(said()) == 1 and said()[0].startswith("4 of 4 label(s)") and "--normalize" in said()[0]
    trainer_log.clear()
    # the same data without pruning, or normalised, or at unit scale: weights kept, no warning
    for kw, data in (({"prune": 0}, big), ({"normalize": True}, big), ({}, X)):
        clf = headstart.OvAClassifier(threads=1, **kw).fit(data, Y)
        assert clf.coef_.nnz > 0 and not said(), kw
