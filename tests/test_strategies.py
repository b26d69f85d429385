"""The pluggable parts of training, end to end through the trainer: every loss and
regulariser reaches the exact minimiser (scipy's L-BFGS, LIBLINEAR where it solves the
same problem), instance weighting, the initialisers DiSMEC++ offers, feedback-driven
sparsification and the time budget; and the one Newton driver: ``newton()`` is the
one-lane case of the lane scheduler, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

from headstart.errors import ParameterError
from headstart.init import make_initializer, TrainingContext
from headstart.metrics import propensities
from headstart.objective import erm, weighting
from headstart.params import TrainParams
from headstart.solver import newton as nt
from headstart.training import kernel
from headstart.training.kernel import prepare_problem
from headstart.training.trainer import train_labels
from headstart.validation import check_features, check_labels

import _reference as ref


def _bibtex():
    d = ref.load_dataset("bibtex")
    if d is None:
        pytest.skip("bibtex not found (data/ or ../shared/data)")
    X, Y = d
    X = ref.l2_normalize(X)
    return check_features(X), check_labels(Y, X.shape[0])


@pytest.fixture(scope="module")
def bibtex_small():
    """The first 600 bibtex instances, features they use (a small real problem)."""
    X, Y = _bibtex()
    X = X[:600]
    Y = Y[:600]
    used = np.unique(X.indices)
    X = check_features(sp.csr_matrix(X[:, used]))
    return X, check_labels(sp.csr_matrix(Y), X.shape[0])


def _ref_spec(p: TrainParams):
    loss = ("huber-hinge", p.huber_epsilon) if p.loss == "huber-hinge" else p.loss
    eps = {"l1": 1e-2, "l1-relaxed": 1e-1, "huber": 1.0}
    if p.regularizer == "l2":
        reg = "l2"
    elif p.regularizer in eps:
        reg = ("huber", p.reg_epsilon or eps[p.regularizer])
    else:
        share = {"elastic-50-50": 0.5, "elastic-90-10": 0.9}.get(p.regularizer, p.reg_l2_share)
        reg = ("elastic", p.reg_epsilon or 0.1, share)
    return loss, reg


def lbfgs_minimum(Xa, y, C, loss, reg, rb, costs=None, w0=None):
    """The minimum of the reference objective by scipy's L-BFGS-B at tight tolerances."""
    f = lambda w: ref.objective(Xa, y, w, C, loss, rb, reg, costs)  # noqa: E731
    g = lambda w: ref.gradient(Xa, y, w, C, loss, rb, reg, costs)  # noqa: E731
    w0 = np.zeros(Xa.shape[1]) if w0 is None else w0
    r = scipy.optimize.minimize(f, w0, jac=g, method="L-BFGS-B",
                                options={"maxiter": 20000, "maxcor": 30, "ftol": 1e-15, "gtol": 1e-10})
    return r.fun, r.x


SMOOTH = [
    ("squared-hinge", "l2"), ("logistic", "l2"), ("huber-hinge", "l2"),
    ("squared-hinge", "huber"),
    # the elastic-net presets with the Huber hinge: the kernels huber-hinge-elastic-net compiles (the
    # squared hinge with a non-L2 regulariser stays covered by squared-hinge-huber)
    ("huber-hinge", "elastic-50-50"), ("huber-hinge", "elastic-90-10"),
    ("logistic", "l1-relaxed"), ("huber-hinge", "elastic-net"),
]


@pytest.mark.parametrize("loss,reg", SMOOTH)
def test_minimiser_matches_lbfgs(bibtex_small, loss, reg):
    """Every smooth loss x regulariser reaches scipy's minimum to 1e-6 relative (4 bibtex
    labels, bias unregularised and regularised, reg_scale folded in)."""
    X, Y = bibtex_small
    labels = np.array([0, 3, 17, 40])
    Xa = ref.augmented(X, 1.0)
    for rb, scale in ((False, 1.0), (True, 2.0)):
        p = TrainParams(loss=loss, regularizer=reg, regularize_bias=rb, reg_scale=scale, C=1.0, epsilon=1e-8,
                        prune=0.0, threads=1, huber_epsilon=0.5, max_iter=3000)
        W, b, st = train_labels(X, Y, p, labels)
        lspec, rspec = _ref_spec(p)
        for k, j in enumerate(labels):
            y = ref.label_vector(Y, j)
            w = ref.full_weights(W[k], b[k], 1.0)
            # reg_scale * R + C * L  ==  reg_scale * (R + (C / reg_scale) * L)
            ours = scale * ref.objective(Xa, y, w, 1.0 / scale, lspec, rb, rspec)
            best, _ = lbfgs_minimum(Xa, y, 1.0 / scale, lspec, rspec, rb)
            best *= scale
            assert ours == pytest.approx(best, rel=1e-6), (loss, reg, rb, j, st["status"][k])
            assert ours >= best * (1 - 1e-9)
            assert st["f_final"][k] == pytest.approx(ours, rel=1e-5)


def test_hinge_against_liblinear_dual(bibtex_small):
    """The hinge (DiSMEC++'s: Huber-smoothed, epsilon 0.1) and the Huber hinge at small
    epsilon against LIBLINEAR -s 3, the exact L1-loss SVM in the dual, on the same problem
    (-B 1 regularises the bias): the exact hinge objective of our solution lies above
    LIBLINEAR's by at most the smoothing bound C * n * eps / 2, and the gap closes with
    epsilon (within 0.3% at 0.001)."""
    X, Y = bibtex_small
    labels = np.array([0, 3, 17, 40])
    ll = ref.LiblinearOvA(X)
    Wl, bl = ll.train_all(Y, labels, "-s 3 -B 1 -c 1 -e 1e-6 -q")
    Xa = ref.augmented(X, 1.0)
    gaps = {}
    for loss, eps in (("hinge", 0.1), ("huber-hinge", 0.01), ("huber-hinge", 0.001)):
        p = TrainParams(loss=loss, huber_epsilon=eps, regularize_bias=True, epsilon=1e-8, prune=0.0, threads=1,
                        max_iter=2000)
        W, b, st = train_labels(X, Y, p, labels)
        for k, j in enumerate(labels):
            y = ref.label_vector(Y, j)
            theirs = ref.objective(Xa, y, np.append(Wl[k], bl[k]), 1.0, "hinge", True)
            ours = ref.objective(Xa, y, ref.full_weights(W[k], b[k], 1.0), 1.0, "hinge", True)
            smoothed = ref.objective(Xa, y, ref.full_weights(W[k], b[k], 1.0), 1.0, ("huber-hinge", eps), True)
            assert theirs * (1 - 1e-5) <= ours <= theirs + X.shape[0] * eps / 2, (loss, eps, j)
            assert smoothed <= theirs * (1 + 1e-5)       # the smoothed problem's minimum is below
            gaps[eps] = max(gaps.get(eps, 0.0), ours / theirs - 1)
    assert gaps[0.001] < 3e-3 and gaps[0.001] < gaps[0.01] < gaps[0.1]


@pytest.mark.parametrize("loss,s", [("squared-hinge", 2), ("logistic", 0)])
def test_instance_weights_match_liblinear(bibtex_small, loss, s):
    """Per-label costs c_+ and c_- are LIBLINEAR's class weights -w1 / -w-1."""
    X, Y = bibtex_small
    labels = np.array([1, 5])
    cp, cn = 3.0, 0.25
    ll = ref.LiblinearOvA(X)
    Wl, bl = ll.train_all(Y, labels, f"-s {s} -B 1 -c 1 -e 1e-8 -w1 {cp} -w-1 {cn} -q")
    L = Y.shape[1]
    pos = np.full(L, cp)
    neg = np.full(L, cn)
    import tempfile, os
    with tempfile.TemporaryDirectory() as tmp:
        fp, fn = os.path.join(tmp, "pos.npy"), os.path.join(tmp, "neg.txt")
        np.save(fp, pos)
        with open(fn, "w") as fh:
            fh.write(" ".join(str(v) for v in neg[:10]) + "\n" + "\n".join(str(v) for v in neg[10:]) + "\n")
        p = TrainParams(loss=loss, regularize_bias=True, weighting="file", weights_pos_file=fp, weights_neg_file=fn,
                        epsilon=1e-8, prune=0.0, threads=1)
        W, b, st = train_labels(X, Y, p, labels)
    Xa = ref.augmented(X, 1.0)
    for k, j in enumerate(labels):
        y = ref.label_vector(Y, j)
        theirs = ref.objective(Xa, y, np.append(Wl[k], bl[k]), 1.0, loss, True, costs=(cp, cn))
        ours = ref.objective(Xa, y, ref.full_weights(W[k], b[k], 1.0), 1.0, loss, True, costs=(cp, cn))
        assert ours == pytest.approx(theirs, rel=1e-6), j


def test_propensity_costs():
    counts = np.array([0, 1, 25, 50])
    n = 50
    p = TrainParams(weighting="2pm1")
    pos, neg = weighting.label_costs(p, counts, n)
    prop = propensities(counts, n, 0.55, 1.5)
    np.testing.assert_allclose(pos, 2 / prop - 1)
    np.testing.assert_array_equal(neg, 1)
    # the authors' test values (DiSMEC++ weighting.cpp): N = 50, N_l = 1 and 25
    np.testing.assert_allclose(prop[1:3], [0.25562221863533147, 0.5571545100089221], rtol=1e-12)
    pos, neg = weighting.label_costs(TrainParams(weighting="p2mp"), counts, n)
    np.testing.assert_array_equal(pos, 1)
    np.testing.assert_allclose(neg, prop / (2 - prop))
    # N <= 2: the model's C <= 0 gives propensities outside (0, 1] and negative costs
    for scheme in ("2pm1", "p2mp"):
        for tiny in (1, 2):
            with pytest.raises(ParameterError, match=f"weighting '{scheme}' needs at least 3 training instances"):
                weighting.label_costs(TrainParams(weighting=scheme), np.array([0, 1]), tiny)
        assert np.all(weighting.label_costs(TrainParams(weighting=scheme), np.array([0, 1, 3]), 3)[0] > 0)


def test_weighted_gradient_by_finite_differences(bibtex_small):
    """The weighted objective the trainer minimises: its gradient at the solution is ~0
    by central differences of the independent reference objective."""
    X, Y = bibtex_small
    p = TrainParams(weighting="2pm1", epsilon=1e-9, prune=0.0, threads=1, regularize_bias=True)
    j = 7
    W, b, st = train_labels(X, Y, p, np.array([j]))
    cp, cn = weighting.label_costs(p, np.diff(sp.csc_matrix(Y).indptr), X.shape[0])
    Xa = ref.augmented(X, 1.0)
    y = ref.label_vector(Y, j)
    w = ref.full_weights(W[0], b[0], 1.0)
    costs = (cp[j], cn[j])
    g = ref.gradient(Xa, y, w, 1.0, "squared-hinge", True, costs=costs)
    f0 = ref.objective(Xa, y, w, 1.0, "squared-hinge", True, costs=costs)
    assert np.linalg.norm(g) <= 1e-4 * max(1.0, f0)
    h = 1e-6
    v = np.random.default_rng(0).normal(size=w.size)
    fd = (ref.objective(Xa, y, w + h * v, 1.0, "squared-hinge", True, costs=costs)
          - ref.objective(Xa, y, w - h * v, 1.0, "squared-hinge", True, costs=costs)) / (2 * h)
    assert abs(fd - g @ v) <= 1e-4 * max(1.0, abs(fd))


@pytest.mark.parametrize("init", ["multi-pos", "mean"])
def test_other_initialisers_reach_the_same_minimum(bibtex_small, init):
    X, Y = bibtex_small
    labels = np.arange(0, 40, 3)
    base = TrainParams(epsilon=1e-6, prune=0.0, threads=1)
    W0, b0, s0 = train_labels(X, Y, base, labels)
    W1, b1, s1 = train_labels(X, Y, base.replace(init=init, max_num_pos=3), labels)
    np.testing.assert_allclose(s1["f_final"], s0["f_final"], rtol=1e-4)
    assert np.all(s1["status"] == 0)


def test_multi_pos_start_scores_each_positive(bibtex_small):
    """For a label with <= max_num_pos positives, every positive scores about s and the
    mean negative about t (the ridge 0.01 makes it approximate)."""
    X, Y = bibtex_small
    counts = np.diff(sp.csc_matrix(Y).indptr)
    j = int(np.flatnonzero((counts >= 2) & (counts <= 4))[0])
    p = TrainParams(init="multi-pos", max_num_pos=4)
    P, colsum = prepare_problem(X, p)
    Yc = sp.csc_matrix(Y)
    ctx = TrainingContext(P, X, Yc, p, colsum)
    plan = make_initializer(p).prepare(ctx)
    O = erm.make_state(*X.shape)
    W = nt.make_workspace(X.shape[1])
    pos = Yc.indices[Yc.indptr[j]:Yc.indptr[j + 1]].astype(np.int64)
    kernel.setup_label(P, O, W, plan, colsum, np.zeros(X.shape[1] + 1), pos, j, 0.01, -2.0, 1.0,
                       np.zeros(0), np.zeros(0))
    Xa = ref.augmented(X, 1.0)
    A = Xa.toarray()
    # the same start from its definition, in numpy: basis b_0 = (sum of negatives) / n and
    # the positives, (G + 0.01 I) alpha = (t, s, ..., s), w = B^T alpha
    neg = np.setdiff1d(np.arange(X.shape[0]), pos)
    B = np.vstack([A[neg].sum(axis=0) / X.shape[0], A[pos]])
    alpha = np.linalg.solve(B @ B.T + 0.01 * np.eye(B.shape[0]), np.r_[-2.0, np.ones(pos.size)])
    # setup_label rounds a start whose X w0 the float32 sweep computes to float32 values
    np.testing.assert_allclose(W.w, B.T @ alpha, rtol=2 ** -24 + 1e-9, atol=1e-12)
    assert np.array_equal(W.w, W.w.astype(np.float32))
    scores = A @ W.w
    np.testing.assert_allclose(scores[pos], 1.0, atol=0.15)      # each positive near s
    assert -2.0 <= scores[neg].mean() <= -1.5                     # the ridge shrinks towards 0


def test_sparsify_keeps_the_objective_within_budget(bibtex_small):
    X, Y = bibtex_small
    labels = np.arange(0, 30, 2)
    budget = 2.0  # percent
    p = TrainParams(sparsify=budget, threads=1, epsilon=1e-4)
    W, b, st = train_labels(X, Y, p, labels)
    dense = TrainParams(prune=0.0, threads=1, epsilon=1e-4)
    Wd, bd, sd = train_labels(X, Y, dense, labels)
    Xa = ref.augmented(X, 1.0)
    assert W.nnz < 0.8 * Wd.nnz
    for k, j in enumerate(labels):
        y = ref.label_vector(Y, j)
        f_sparse = ref.objective(Xa, y, ref.full_weights(W[k], b[k], 1.0), 1.0, "squared-hinge", False)
        f_full = ref.objective(Xa, y, ref.full_weights(Wd[k], bd[k], 1.0), 1.0, "squared-hinge", False)
        # float32 storage of the weights costs ~1e-6 relative
        assert f_sparse <= (1 + budget / 100) * f_full * (1 + 1e-5), j


def test_timeout_trains_a_prefix(bibtex_small):
    X, Y = bibtex_small
    labels = np.arange(Y.shape[1])
    p = TrainParams(threads=1, init="zero", epsilon=1e-6)
    import time
    train_labels(X, Y, p, labels, chunk_size=64)                       # compiled now
    t0 = time.perf_counter()
    Wall, ball, _ = train_labels(X, Y, p, labels, chunk_size=64)
    full = time.perf_counter() - t0
    W, b, st = train_labels(X, Y, p.replace(timeout=full / 3), labels, chunk_size=64)
    assert 0 < W.shape[0] < labels.size
    # what was trained is exactly what the full run trained for those labels
    np.testing.assert_array_equal(W.toarray(), Wall[:W.shape[0]].toarray())
    np.testing.assert_array_equal(st["label"], labels[:W.shape[0]])


@pytest.mark.parametrize("loss,reg,init", [
    ("squared-hinge", "l2", "aop"), ("logistic", "l2", "zero"),
    # non-L2 regularisers on problem types test_minimiser_matches_lbfgs compiles (no problem type of their own):
    # a mining loss from zero (dense, then sparse active sets) with the elastic net, was huber-hinge-huber-aop
    ("huber-hinge", "elastic-net", "zero"),
    ("squared-hinge", "l2", "multi-pos"), ("squared-hinge", "l2", "zero"),
    # the Huber regulariser in groups (logistic: dense active sets), its 16-lane kernel shared with
    # test_minimiser_matches_lbfgs[logistic-l1-relaxed]; was squared-hinge-huber-zero
    ("logistic", "l1-relaxed", "aop")])
def test_newton_is_the_one_lane_case_of_the_scheduler(bibtex_small, loss, reg, init):
    """The single-problem driver solver.newton.newton and the 16-lane (and 8-lane)
    scheduler give the same weights and objective values, bit for bit (same operations in the same order).
    Zero starts and the logistic loss make the lanes' active sets dense, so their
    directions are computed in groups (kernel.group_directions) there; forced on here
    (whatever budget.use_groups decides), and without groups the same bits again."""
    X, Y = bibtex_small
    labels = np.arange(0, 48)
    p = TrainParams(loss=loss, regularizer=reg, init=init, prune=0.0, threads=1)
    W, b, st = train_labels(X, Y, p, labels, lanes=kernel.LANES, locality=False, groups=True)
    assert st.meta["groups"]
    W2, b2, st2 = train_labels(X, Y, p, labels, lanes=kernel.LANES, locality=False, groups=False)
    assert not st2.meta["groups"]
    assert (W != W2).nnz == 0 and np.array_equal(b, b2) and np.array_equal(st["f_final"], st2["f_final"])
    # 8 lanes (kernel.lanes_scores8, where 16 do not fit the memory budget): the same bits
    W8, b8, st8 = train_labels(X, Y, p, labels, lanes=kernel.HALF_LANES, locality=False)
    assert not st8.meta["groups"]
    assert (W != W8).nnz == 0 and np.array_equal(b, b8) and np.array_equal(st["f_final"], st8["f_final"])
    assert np.array_equal(st["iterations"], st8["iterations"])
    P, colsum = prepare_problem(X, p)
    Yc = sp.csc_matrix(Y)
    plan = make_initializer(p).prepare(TrainingContext(P, X, Yc, p, colsum))
    S = nt.settings(p)
    from headstart.objective import losses
    d1z = losses.get(loss).d1_at_zero(p)
    empty = np.zeros(0)
    for k, j in enumerate(labels):
        O = erm.make_state(*X.shape)
        Wk = nt.make_workspace(X.shape[1])
        pos = Yc.indices[Yc.indptr[j]:Yc.indptr[j + 1]].astype(np.int64)
        tol, g0, need = kernel.setup_label(P, O, Wk, plan, colsum, np.zeros(X.shape[1] + 1), pos, j, p.epsilon,
                                           d1z, 1.0, empty, empty)
        if need:
            erm.scores(P, Wk.w, O.wx)
        status, it, cg, f0, f, gi, gf = nt.newton(P, O, Wk, S, tol, empty, empty, empty,
                                                  np.zeros(0, dtype=np.int64), empty, False)
        assert it == st["iterations"][k] and cg == st["cg_steps"][k]
        assert f == st["f_final"][k] and f0 == st["f_init"][k]
        row = np.zeros(X.shape[1], dtype=np.float32)
        row[W[k].indices] = W[k].data
        np.testing.assert_array_equal(row, Wk.w[:-1].astype(np.float32))
        assert b[k] == np.float32(Wk.w[-1])


def test_timeout_then_resume_gives_the_full_model(tmp_path):
    """A sharded run stopped by the time budget saves what finished; --resume (here with a
    different timeout, which does not change the weights) completes the same model."""
    from headstart.distributed import train_model_dir
    from headstart.model.format import load_model

    X, Y = _bibtex()
    p = TrainParams(init="zero", threads=2, epsilon=1e-3)
    full = train_model_dir(X, Y, p, tmp_path / "full", shard_size=16)
    assert full.complete
    import time
    t0 = time.perf_counter()
    train_model_dir(X, Y, p, tmp_path / "again", shard_size=16)
    took = time.perf_counter() - t0
    part = train_model_dir(X, Y, p.replace(timeout=took / 4), tmp_path / "m", shard_size=16)
    assert not part.complete and part.trained_labels > 0
    done = train_model_dir(X, Y, p, tmp_path / "m", shard_size=16, resume=True)
    assert done.complete
    a, b = load_model(tmp_path / "full"), load_model(tmp_path / "m")
    assert (a.weights != b.weights).nnz == 0
    np.testing.assert_array_equal(a.intercept, b.intercept)


def test_inplace_renumbering_restores_the_callers_matrix(bibtex_small):
    """inplace=True trains on the caller's X renumbered in place (no copy) and gives it back
    bit for bit, with the same model as training on a copy."""
    X, Y = bibtex_small
    X = X.copy()
    before = (X.indptr.copy(), X.indices.copy(), X.data.copy())
    p = TrainParams(threads=2)
    labels = np.arange(20)
    Wc, bc, _ = train_labels(X, Y, p, labels)
    Wi, bi, _ = train_labels(X, Y, p, labels, inplace=True)
    for a, b in zip(before, (X.indptr, X.indices, X.data)):
        np.testing.assert_array_equal(a, b)
    assert (Wc != Wi).nnz == 0 and np.array_equal(bc, bi)


def test_a_strategy_with_a_wrong_signature_or_no_return_is_refused_where_it_is_written():
    """helper-55: a loss function taking (m) instead of (L, m) failed only inside a kernel,
    as 77 lines of numba typing error pointing at the caller; an initialiser whose start
    function forgot its ``return`` returned None, read as False ("X w is set"), so its
    labels ran from a stale X w without an error.  Both are refused when attached."""
    from typing import NamedTuple

    from headstart.init.base import initial_weights
    from headstart.objective import losses
    from headstart.objective._typed import implement

    class Probe(NamedTuple):
        scale: float = 1.0

    with pytest.raises(TypeError, match=r"test_strategies\.py:\d+: the d1 of Probe takes 1 argument\(s\) \(m\) "
                                        r"but d1 is called with 2"):
        implement(losses.d1, Probe, lambda m: -2.0 * m)

    def start(plan, P, O, w, psum, pos, label):
        w[:] = -0.5 * plan.scale

    with pytest.raises(TypeError, match=r"test_strategies\.py:\d+: the initial_weights of Probe returns no value"):
        implement(initial_weights, Probe, start)

    def nested_return_only(plan, P, O, w, psum, pos, label):
        def helper():
            return True
        w[:] = 0.0

    with pytest.raises(TypeError, match="returns no value"):
        implement(initial_weights, Probe, nested_return_only)


def test_a_strategy_registered_outside_the_package_is_a_choice(tmp_path):
    """The registries' NAMES are read at each use: an initialiser registered by the
    user's own module after ``import headstart`` is accepted by TrainParams and the
    command line (helper-55: NAMES was fixed at import, so it had to be patched)."""
    import subprocess
    import sys

    (tmp_path / "my_start.py").write_text(
        "from headstart.init.base import register\n"
        "from headstart.init.zero import ZeroInit\n"
        "register('my-zero', lambda p: ZeroInit(), 'w0 = 0 again')\n")
    code = ("import headstart, my_start\n"
            "from headstart.params import TrainParams\n"
            "from headstart.cli.main import build_parser\n"
            "assert TrainParams(init='my-zero').init == 'my-zero'\n"
            "args = build_parser().parse_args(['train', 'x.txt', '-o', 'm', '--init', 'my-zero'])\n"
            "print(args.init)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0 and r.stdout.strip() == "my-zero", r.stderr[-2000:]


@pytest.mark.parametrize("init,loss,bias_init,bias,groups", [
    ("zero", "squared-hinge", -1.0, 1.0, True),      # every row active at first
    ("aop", "squared-hinge", -1.0, 1.0, False),      # the mean negative scores -2: sparse
    ("bias", "squared-hinge", -1.0, 1.0, False),     # every instance at margin 1: inactive
    ("bias", "squared-hinge", -2.0, 1.0, False),
    ("bias", "squared-hinge", -0.9, 1.0, True),      # every instance active
    ("bias", "squared-hinge", -1.0, 0.5, True),      # scores -0.5: active
    ("bias", "logistic", -1.0, 1.0, True),           # no negative mining: every row counts
])
def test_which_runs_form_direction_groups(init, loss, bias_init, bias, groups):
    """The trainer forms direction groups unless the start leaves the active sets
    sparse under a loss that mines negatives (budget.use_groups): the bias start
    declares that when every instance scores bias_init * bias <= -1."""
    from headstart.objective import losses
    from headstart.training.budget import use_groups

    p = TrainParams(init=init, loss=loss, bias_init=bias_init, bias=bias)
    sparse, mines = make_initializer(p).sparse_start, losses.get(loss).mines
    assert use_groups(kernel.LANES, sparse, mines) is groups
    assert not use_groups(kernel.HALF_LANES, sparse, mines)
