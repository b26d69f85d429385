"""Rows that hold every feature (dense features) take the kernels' contiguous loops
(``_span.full_row``: no index loads, four rows' products side by side, vectorised
scatters).  They must give bit for bit what the indexed loops give: checked by padding X
with one feature no row has -- the same problem, but no row is full any more, so every
kernel takes its indexed loop -- kernel by kernel and for whole training runs (16 lanes
with and without direction groups, 8 lanes, one lane; squared hinge and logistic; zero,
bias and aop starts), also with a few rows not full (dense data with exact zeros)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from headstart import TrainParams
from headstart.objective import erm
from headstart.training import kernel
from headstart.training.trainer import train_labels


def dense_problem(n=203, d=37, L=6, zeros=False, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)).astype(np.float32)
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    if zeros:       # some rows lose an entry or several: not full, between full ones
        for i in rng.choice(n, n // 5, replace=False):
            A[i, rng.choice(d, rng.integers(1, 4), replace=False)] = 0.0
    X = sp.csr_matrix(A)
    X.sort_indices()
    S = A @ rng.standard_normal((d, L)).astype(np.float32)
    Y = sp.csr_matrix((S > np.quantile(S, 0.8, axis=0)).astype(np.float32))
    return X, Y


def padded(X):
    """X with one more feature that no row has: no row is full."""
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], X.shape[1] + 1))


def problem(X, loss="logistic"):
    P, _ = kernel.prepare_problem(X, TrainParams(loss=loss, bias=1.0, regularize_bias=True))
    return P


@pytest.mark.parametrize("zeros", [False, True])
def test_kernels_on_full_rows_equal_the_indexed_loops(zeros):
    X, Y = dense_problem(zeros=zeros)
    n, d = X.shape
    Pf, Pp = problem(X), problem(padded(X))
    rng = np.random.default_rng(1)

    def pad(v):     # a vector over d + 1 coordinates -> over the padded problem's d + 2
        return np.concatenate([v[:d], [0.0], v[d:]])

    w = rng.standard_normal(d + 1) * 0.1
    v = rng.standard_normal(d + 1)
    outs = []
    for P, wv, vv in ((Pf, w, v), (Pp, pad(w), pad(v))):
        O = erm.make_state(n, P.n_features)
        erm.set_label(O, np.flatnonzero(Y[:, 0].toarray().ravel()).astype(np.int64), 1.0, 1.0)
        erm.scores(P, wv, O.wx)
        g = np.zeros(wv.size)
        gn = erm.gradient(P, O, wv, g)
        hv = np.zeros(wv.size)
        erm.hess_vec(P, O, wv, vv, hv)
        V = np.asarray(rng.standard_normal((P.n_features + 1, kernel.LANES)), dtype=np.float32)
        XV = np.zeros((kernel.LANES, n))
        kernel.lanes_scores(P, np.ascontiguousarray(V) if P is Pf else V, XV, False)
        outs.append((O.wx.copy(), g, gn, hv, O.ist[erm.NACT]))
    (wx_f, g_f, gn_f, hv_f, na_f), (wx_p, g_p, gn_p, hv_p, na_p) = outs
    assert na_f == na_p == n                     # the logistic loss: every row active
    assert np.array_equal(wx_f, wx_p)
    assert np.array_equal(g_f, np.delete(g_p, d)) and gn_f == gn_p
    assert np.array_equal(hv_f, np.delete(hv_p, d))


def test_sweep_and_group_kernels_on_full_rows_equal_the_indexed_loops():
    X, _ = dense_problem(n=101, d=29)
    n, d = X.shape
    Pf, Pp = problem(X), problem(padded(X))
    rng = np.random.default_rng(2)
    V = np.asarray(rng.standard_normal((d + 1, kernel.LANES)), dtype=np.float32)
    Vp = np.insert(V, d, 0.0, axis=0)
    XV, XVp = np.zeros((kernel.LANES, n)), np.zeros((kernel.LANES, n))
    kernel.lanes_scores(Pf, V, XV, False)
    kernel.lanes_scores(Pp, Vp, XVp, False)
    assert np.array_equal(XV, XVp)
    XV8, XVp8 = np.zeros((kernel.HALF_LANES, n)), np.zeros((kernel.HALF_LANES, n))
    kernel.lanes_scores8(Pf, np.ascontiguousarray(V[:, :8]), XV8, False)
    kernel.lanes_scores8(Pp, np.ascontiguousarray(Vp[:, :8]), XVp8, False)
    assert np.array_equal(XV8, XVp8)

    G = erm.GROUP
    U = np.sort(rng.choice(n, 77, replace=False)).astype(erm.ACT_DTYPE)
    C = rng.random((G, n))
    C[1, ::3] = 0.0                              # rows off problem 1's active set
    m = np.arange(G, dtype=np.int64)
    run = np.array([True, True, False, True])
    D = rng.standard_normal((d + 1, G))
    Dp = np.insert(D, d, 0.0, axis=0)
    res = []
    for P, DD in ((Pf, D), (Pp, Dp)):
        HD = np.zeros_like(DD)
        erm.hess_rows_group(P, U, U.size, C, m, run, DD, HD, np.zeros((G, n)))
        GC = C[::-1].copy()
        Gg, H, sums = np.ones_like(DD), np.ones_like(DD), np.zeros((G, 2))
        erm.grad_rows_group(P, U, U.size, GC, C, m, run, Gg, H, sums)
        res.append((HD, Gg, H, sums))
    for a, b in zip(res[0][:3], res[1][:3]):
        assert np.array_equal(a, np.delete(b, d, axis=0))
    assert np.array_equal(res[0][3], res[1][3])


@pytest.mark.parametrize("loss,init", [("squared-hinge", "zero"), ("logistic", "zero"),
                                       ("squared-hinge", "aop"), ("logistic", "aop"), ("squared-hinge", "bias")])
@pytest.mark.parametrize("zeros", [False, True])
def test_training_on_full_rows_equals_the_indexed_loops(loss, init, zeros):
    X, Y = dense_problem(n=257, d=41, L=9, zeros=zeros, seed=3)
    d = X.shape[1]
    p = TrainParams(loss=loss, init=init, bias=1.0, prune=0.0, threads=1)
    labels = np.arange(Y.shape[1])
    for lanes, groups in ((kernel.LANES, True), (kernel.LANES, False), (kernel.HALF_LANES, False), (1, False)):
        W, b, st = train_labels(X, Y, p, labels, lanes=lanes, groups=groups, locality=False)
        Wp, bp, stp = train_labels(padded(X), Y, p, labels, lanes=lanes, groups=groups, locality=False)
        assert np.array_equal(W.toarray(), Wp.toarray()[:, :d]), (lanes, groups)
        assert not Wp[:, d].count_nonzero()
        assert np.array_equal(b, bp)
        for f in ("iterations", "cg_steps", "f_final", "gnorm_final"):
            assert np.array_equal(st[f], stp[f]), (f, lanes, groups)


def shuffled_rows(X, split=False):
    """The same matrix, not canonical: every row's entries in reverse order, and with
    ``split`` each row's first value stored as two halves at its index (scipy sums
    repeated entries; halving a float32 is exact) -- a row of d - 1 features then holds
    d entries, as many as a full row, with one feature twice and one missing."""
    counts, cols, vals = [], [], []
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        idx, val = list(X.indices[a:b][::-1]), list(X.data[a:b][::-1])
        if split and idx:
            val[0] /= 2
            idx.append(idx[0])
            val.append(val[0])
        counts.append(len(idx))
        cols += idx
        vals += val
    return sp.csr_matrix((np.asarray(vals, dtype=np.float32), np.asarray(cols, dtype=np.int32),
                          np.concatenate([[0], np.cumsum(counts)])), shape=X.shape)


@pytest.mark.parametrize("locality", [False, True])
def test_rows_out_of_order_are_summed_against_their_own_features(locality):
    """The kernels take a row of d entries for every feature in order (``full_row``); a
    caller's CSR whose rows are not sorted -- the same matrix -- trained the same weights
    before (each entry gathered by its index), and must still: train_labels sorts a copy
    (locality does not: the renumbering is skipped as the identity on dense features)."""
    X, Y = dense_problem(n=60, d=5, L=3, seed=4)
    p = TrainParams(loss="squared-hinge", init="zero", bias=1.0, prune=0.0, threads=1)
    W, b, _ = train_labels(X, Y, p, np.arange(3), locality=locality)
    Xr = shuffled_rows(X)
    assert not Xr.has_canonical_format and not (Xr != X).nnz
    Wr, br, _ = train_labels(Xr, Y, p, np.arange(3), locality=locality)
    assert np.array_equal(W.toarray(), Wr.toarray()) and np.array_equal(b, br)


def test_shortlisted_rows_out_of_order_and_repeated_are_summed_against_their_own_features():
    """train_shortlisted's sub-problems keep X's order within a row (a sub-problem of one
    row holds every one of its features: full even on sparse data)."""
    from headstart.shortlist.training import train_shortlisted

    X, Y = dense_problem(n=60, d=5, L=3, seed=5, zeros=True)
    Yc = sp.csc_matrix(Y)
    Yc.sort_indices()
    S = sp.csc_matrix(np.eye(60, 3, dtype=np.float32))    # one row more than the positives
    p = TrainParams(loss="squared-hinge", init="zero", bias=1.0, prune=0.0, threads=1)
    W, b, _ = train_shortlisted(X, Yc, S, p, np.arange(3))
    assert np.any(np.diff(X.indptr) == X.shape[1] - 1)     # rows that split values make d entries long
    for split in (False, True):
        Xr = shuffled_rows(X, split=split)
        assert not Xr.has_canonical_format and abs(Xr - X).max() == 0
        Wr, br, _ = train_shortlisted(Xr, Yc, S, p, np.arange(3))
        assert np.array_equal(W.toarray(), Wr.toarray()) and np.array_equal(b, br), split


def test_make_problem_refuses_rows_out_of_order():
    X, _ = dense_problem(n=8, d=3)
    with pytest.raises(ValueError, match="canonical"):
        problem(shuffled_rows(X))


def same_bits(a, b):
    """Equal to the bit: np.array_equal takes -0.0 for 0.0."""
    a, b = np.atleast_1d(a), np.atleast_1d(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def matrix(n, d, seed, zeros=0.0, empty=0):
    """n x d float32 CSR of random values, a share ``zeros`` of them 0 (rows not full),
    ``empty`` rows without any value."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)).astype(np.float32)
    A[rng.random((n, d)) < zeros] = 0.0
    A[rng.choice(n, empty, replace=False)] = 0.0
    return sp.csr_matrix(A)


def each_kernel(X, loss, seed):
    """Every kernel with a full-row branch on X (bits of every output), for the label
    ``seed`` picks and w scaled so that the squared hinge leaves a random active set."""
    n, d = X.shape
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d + 1) * 2.0
    v = rng.standard_normal(d + 1)
    v[rng.random(d + 1) < 0.3] = -0.0        # CG's first direction -g where g is +0.0
    pos = np.flatnonzero(rng.random(n) < 0.4).astype(np.int64)
    V = np.asarray(rng.standard_normal((d + 1, kernel.LANES)), dtype=np.float32)
    G = erm.GROUP
    U = np.sort(rng.choice(n, rng.integers(0, n + 1), replace=False)).astype(erm.ACT_DTYPE)
    C = rng.random((G, n))
    C[:, rng.random(n) < 0.2] = 0.0          # rows off some problems' active sets
    D = rng.standard_normal((d + 1, G))

    def run(P, pad):
        """Outputs over the first d features and the bias (the padded feature cut)."""
        cut = (lambda a: np.delete(a, d, axis=0)) if pad else (lambda a: a)
        grow = (lambda a: np.insert(a, d, 0.0, axis=0)) if pad else (lambda a: a)
        O = erm.make_state(n, P.n_features)
        erm.set_label(O, pos, 1.0, 2.0)
        wp = grow(w)
        erm.scores(P, wp, O.wx)
        g = np.zeros(wp.size)
        gn = erm.gradient(P, O, wp, g)
        hv = np.zeros(wp.size)
        erm.hess_vec(P, O, wp, grow(v), hv)
        XV = np.zeros((kernel.LANES, n))
        kernel.lanes_scores(P, np.ascontiguousarray(grow(V)), XV, False)
        XV8 = np.zeros((kernel.HALF_LANES, n))
        kernel.lanes_scores8(P, np.ascontiguousarray(grow(V)[:, :8]), XV8, False)
        psum = np.zeros(wp.size)
        kernel.positives_sum(P, pos, psum)
        HD = np.zeros((P.n_features + 1, G))
        m, on = np.arange(G, dtype=np.int64), np.array([True, False, True, True])
        erm.hess_rows_group(P, U, U.size, C, m, on, grow(D), HD, np.zeros((G, n)))
        Gg, H, sums = np.ones_like(HD), np.ones_like(HD), np.zeros((G, 2))
        erm.grad_rows_group(P, U, U.size, C[::-1].copy(), C, m, on, Gg, H, sums)
        return (O.wx, O.act[:O.ist[erm.NACT]], cut(g), gn, cut(O.hdiag), cut(hv), XV, XV8, cut(psum), cut(HD),
                cut(Gg), cut(H), sums)

    for a, b in zip(run(problem(X, loss), False), run(problem(padded(X), loss), True)):
        assert same_bits(a, b)


@pytest.mark.parametrize("n,d,zeros,empty", [
    (1, 3, 0.0, 0), (2, 3, 0.0, 0), (3, 3, 0.0, 0), (5, 4, 0.0, 0), (6, 4, 0.0, 0), (7, 4, 0.0, 0),
    (40, 1, 0.0, 0), (40, 1, 0.3, 0), (40, 1, 0.0, 5),    # one feature: every nonempty row full
    (61, 6, 0.05, 3), (64, 2, 0.2, 4), (33, 5, 0.0, 0),
    (9, 0, 0.0, 0)])                                        # no feature: every (empty) row full
@pytest.mark.parametrize("loss", ["squared-hinge", "logistic"])
def test_each_kernel_on_full_rows_equals_the_indexed_loops_to_the_bit(n, d, zeros, empty, loss):
    """Rows few (n < 4), active sets of 1-3 rows and every remainder of 4 and 2, four
    *active* full rows apart in X, full rows between others and empty ones, d = 1 and
    d = 0, directions with -0.0 -- over a few seeds, to the bit (sign of zero included)."""
    X = matrix(n, d, n + d, zeros, empty)
    for seed in range(6):
        each_kernel(X, loss, seed)


def test_hessian_product_skips_rows_without_curvature_as_the_indexed_loop():
    """Four full rows with c = 0 (every hcoef 0: the logistic loss's phi'' underflows):
    the indexed loop adds nothing, so out keeps v's -0.0; adding the rows' zeros made it
    +0.0 (np.array_equal could not tell)."""
    X = sp.csr_matrix(np.abs(np.random.default_rng(0).standard_normal((4, 3))).astype(np.float32))
    outs = []
    for P in (problem(X), problem(padded(X))):
        nv = P.n_features + 1
        O = erm.make_state(4, P.n_features)
        O.act[:4] = np.arange(4)
        O.ist[erm.NACT] = 4
        O.F[:] = np.arange(nv)
        O.ist[erm.NF] = nv
        v = np.ones(nv)
        v[0] = -0.0
        out = np.zeros(nv)
        erm.hess_vec(P, O, np.zeros(nv), v, out)
        outs.append(out[[0, 1, 2, nv - 1]])
    assert np.signbit(outs[0][0]) and same_bits(*outs)
