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
