"""The objective kernels of headstart.objective.erm against finite differences and an
independent numpy implementation (tests/_reference.py).

Checked for both losses, sparse and dense-origin X, with and without bias
regularisation, bias values 1 and 0.5:

* ``scores`` is X w + bias * w_bias, ``fun`` the objective value;
* ``grad`` agrees with central differences of ``fun`` (coordinate-wise and along
  random directions) and reports the right active set;
* ``hess_vec`` agrees with central differences of ``grad`` and with the dense Hessian;
  it is symmetric and positive (semi)definite;
* ``diag_precond`` is the diagonal of that Hessian.

For the squared hinge every evaluation point is kept away from the kink (no margin
within ``KINK_GAP`` of 1) so that the objective is a smooth quadratic around it.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from headstart.objective import erm
from headstart.validation import check_features

import _reference as ref

LOSSES = ("squared-hinge", "logistic")
KINK_GAP = 0.05


# ----------------------------------------------------------------------------- helpers
def make_X(kind: str, n: int = 40, d: int = 9, seed: int = 0):
    """A small feature matrix as the library sees it (canonical float32 CSR).

    ``sparse``: a scipy CSR with ~40% density, an empty row and an empty column;
    ``dense``: a numpy array (with some zeros) converted by ``check_features``."""
    rng = np.random.default_rng(seed)
    if kind == "sparse":
        A = sp.random(n, d, density=0.4, random_state=seed, format="csr",
                      data_rvs=lambda k: rng.normal(0.0, 1.0, k))
        A = A.tolil()
        A[3, :] = 0          # an instance without features
        A[:, 5] = 0          # a feature no instance has
        X = check_features(sp.csr_matrix(A))
    else:
        A = rng.normal(0.0, 1.0, (n, d)).astype(np.float32)
        A[rng.random((n, d)) < 0.2] = 0.0
        X = check_features(A)
        assert sp.isspmatrix_csr(X) or sp.issparse(X)
        np.testing.assert_array_equal(X.toarray(), A)
    assert X.dtype == np.float32
    return X


def labels_for(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.35, 1.0, -1.0)
    y[0], y[1] = 1.0, -1.0
    return y


class Kernels:
    """The erm kernels for one problem, with fresh output buffers per call."""

    def __init__(self, X, y, bias, C, loss, regularize_bias):
        self.P = erm.make_problem(X, bias, C, loss, regularize_bias)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.n, self.d = X.shape
        self.nv = self.d + 1

    def wx(self, w):
        out = np.empty(self.n)
        erm.scores(self.P, np.ascontiguousarray(w, dtype=np.float64), out)
        return out

    def f(self, w):
        w = np.ascontiguousarray(w, dtype=np.float64)
        return erm.fun(self.P, self.y, w, self.wx(w))

    def grad(self, w):
        """(g, act[:nact], gcoef[:nact], hcoef[:nact])."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        g = np.full(self.nv, np.nan)
        act = np.full(self.n, -7, dtype=np.int64)
        gcoef = np.full(self.n, np.nan)
        hcoef = np.full(self.n, np.nan)
        nact = erm.grad(self.P, self.y, w, self.wx(w), g, act, gcoef, hcoef)
        return g, act[:nact].copy(), gcoef[:nact].copy(), hcoef[:nact].copy(), (act, hcoef, nact)

    def hv(self, w, v):
        *_, (act, hcoef, nact) = self.grad(w)
        out = np.full(self.nv, np.nan)
        erm.hess_vec(self.P, act, nact, hcoef, np.ascontiguousarray(v, dtype=np.float64), out)
        return out

    def hess_dense(self, w):
        *_, (act, hcoef, nact) = self.grad(w)
        H = np.empty((self.nv, self.nv))
        out = np.empty(self.nv)
        for j in range(self.nv):
            e = np.zeros(self.nv)
            e[j] = 1.0
            erm.hess_vec(self.P, act, nact, hcoef, e, out)
            H[:, j] = out
        return H

    def diag(self, w):
        *_, (act, hcoef, nact) = self.grad(w)
        M = np.full(self.nv, np.nan)
        erm.diag_precond(self.P, act, nact, hcoef, M)
        return M


def point_away_from_kink(K: Kernels, Xa, loss: str, seed: int, scale: float = 0.6) -> np.ndarray:
    """A random w with a mix of active and inactive instances, no margin near 1."""
    rng = np.random.default_rng(seed)
    for _ in range(1000):
        w = rng.normal(0.0, scale, K.nv)
        m = K.y * (Xa @ w)
        if loss != "squared-hinge":
            return w
        active = m < 1.0
        if np.min(np.abs(1.0 - m)) > KINK_GAP and 0.2 < active.mean() < 0.9:
            return w
    raise AssertionError("no point away from the kink found")


def fd_safe_h(Xa, y, w, dirs, loss, h):
    """For the squared hinge, check that no margin crosses 1 within +-h along the directions."""
    if loss != "squared-hinge":
        return
    m = y * (Xa @ w)
    for v in dirs:
        dm = np.abs(Xa @ v) * h
        assert np.all(np.abs(1.0 - m) > dm), "finite-difference step crosses the kink"


CASES = [
    pytest.param(loss, kind, rb, bias, id=f"{loss}-{kind}-{'regb' if rb else 'noregb'}-bias{bias}")
    for loss in LOSSES for kind in ("sparse", "dense") for rb in (False, True) for bias in (1.0, 0.5)
]


# ------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("loss,kind,rb,bias", CASES)
def test_value_and_scores_match_numpy(loss, kind, rb, bias):
    X = make_X(kind)
    y = labels_for(X.shape[0])
    C = 0.7
    K = Kernels(X, y, bias, C, loss, rb)
    Xa = ref.augmented(X, bias)
    for seed in range(3):
        w = np.random.default_rng(seed).normal(0, 0.8, K.nv)
        np.testing.assert_allclose(K.wx(w), Xa @ w, rtol=1e-12, atol=1e-12)
        f_ref = ref.objective(Xa, y, w, C, loss, rb)
        assert K.f(w) == pytest.approx(f_ref, rel=1e-12)
    # at w = 0 the value is C * n * phi(0)
    phi0 = 1.0 if loss == "squared-hinge" else np.log(2.0)
    assert K.f(np.zeros(K.nv)) == pytest.approx(C * X.shape[0] * phi0, rel=1e-14)


@pytest.mark.parametrize("loss,kind,rb,bias", CASES)
def test_gradient_matches_finite_differences(loss, kind, rb, bias):
    X = make_X(kind, seed=2)
    y = labels_for(X.shape[0], seed=3)
    C = 1.3
    K = Kernels(X, y, bias, C, loss, rb)
    Xa = ref.augmented(X, bias)
    h = 1e-6
    for seed in range(3):
        w = point_away_from_kink(K, Xa, loss, seed)
        g, act, gcoef, hcoef, _ = K.grad(w)
        assert np.all(np.isfinite(g))
        # against the analytic numpy gradient (independent code)
        np.testing.assert_allclose(g, ref.gradient(Xa, y, w, C, loss, rb), rtol=1e-10, atol=1e-10)
        # coordinate-wise central differences of the kernel's own objective
        E = np.eye(K.nv)
        fd_safe_h(Xa, y, w, E, loss, h)
        fd = np.array([(K.f(w + h * e) - K.f(w - h * e)) / (2 * h) for e in E])
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(g).max()))
        # random directions
        V = np.random.default_rng(100 + seed).normal(size=(4, K.nv))
        fd_safe_h(Xa, y, w, V, loss, h)
        for v in V:
            dd = (K.f(w + h * v) - K.f(w - h * v)) / (2 * h)
            assert g @ v == pytest.approx(dd, rel=1e-6, abs=1e-6 * np.linalg.norm(g) * np.linalg.norm(v))


@pytest.mark.parametrize("loss,kind,rb,bias", CASES)
def test_active_set_and_coefficients(loss, kind, rb, bias):
    X = make_X(kind, seed=4)
    y = labels_for(X.shape[0], seed=5)
    C = 0.9
    K = Kernels(X, y, bias, C, loss, rb)
    Xa = ref.augmented(X, bias)
    w = point_away_from_kink(K, Xa, loss, 7)
    g, act, gcoef, hcoef, _ = K.grad(w)
    m = y * (Xa @ w)
    if loss == "squared-hinge":
        expect = np.flatnonzero(m < 1.0)           # implicit negative mining
        np.testing.assert_array_equal(np.sort(act), expect)
        assert 0 < act.size < X.shape[0]
        np.testing.assert_allclose(hcoef, 2.0 * C)
        np.testing.assert_allclose(gcoef, C * (-2.0) * (1.0 - m[act]) * y[act], rtol=1e-12)
    else:
        np.testing.assert_array_equal(np.sort(act), np.arange(X.shape[0]))
        sig = 1.0 / (1.0 + np.exp(-m[act]))
        np.testing.assert_allclose(hcoef, C * sig * (1 - sig), rtol=1e-10)
        np.testing.assert_allclose(gcoef, C * (sig - 1.0) * y[act], rtol=1e-10)


@pytest.mark.parametrize("loss,kind,rb,bias", CASES)
def test_hessian_vector_matches_finite_differences(loss, kind, rb, bias):
    X = make_X(kind, seed=6)
    y = labels_for(X.shape[0], seed=7)
    C = 1.1
    K = Kernels(X, y, bias, C, loss, rb)
    Xa = ref.augmented(X, bias)
    h = 1e-5
    for seed in range(3):
        w = point_away_from_kink(K, Xa, loss, 10 + seed)
        V = np.vstack([np.eye(K.nv)[[0, K.nv - 1]], np.random.default_rng(seed).normal(size=(3, K.nv))])
        fd_safe_h(Xa, y, w, V, loss, h)
        for v in V:
            Hv = K.hv(w, v)
            assert np.all(np.isfinite(Hv))
            fd = (K.grad(w + h * v)[0] - K.grad(w - h * v)[0]) / (2 * h)
            scale = max(1.0, np.abs(Hv).max())
            np.testing.assert_allclose(Hv, fd, rtol=1e-5, atol=1e-6 * scale)
        # against the dense generalised Hessian in numpy
        H = K.hess_dense(w)
        np.testing.assert_allclose(H, ref.hessian(Xa, y, w, C, loss, rb), rtol=1e-10, atol=1e-10)
        # symmetric, positive semidefinite (definite on the regularised coordinates)
        np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)
        eig = np.linalg.eigvalsh(0.5 * (H + H.T))
        assert eig.min() >= -1e-10
        if rb:
            assert eig.min() >= 1.0 - 1e-10


@pytest.mark.parametrize("loss,kind,rb,bias", CASES)
def test_diag_preconditioner_is_hessian_diagonal(loss, kind, rb, bias):
    X = make_X(kind, seed=8)
    y = labels_for(X.shape[0], seed=9)
    C = 0.8
    K = Kernels(X, y, bias, C, loss, rb)
    Xa = ref.augmented(X, bias)
    w = point_away_from_kink(K, Xa, loss, 21)
    M = K.diag(w)
    H = K.hess_dense(w)
    np.testing.assert_allclose(M, np.diag(H), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(M, np.diag(ref.hessian(Xa, y, w, C, loss, rb)), rtol=1e-10, atol=1e-12)
    # the empty column has only the regulariser's 1 on the diagonal
    if kind == "sparse":
        assert M[5] == 1.0


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("rb", (False, True))
def test_bias_zero_disables_bias_feature(loss, rb):
    """bias = 0: the bias weight does not affect the scores, nor the loss part of the
    gradient and Hessian."""
    X = make_X("sparse", seed=11)
    y = labels_for(X.shape[0], seed=12)
    K = Kernels(X, y, 0.0, 1.0, loss, rb)
    w = np.random.default_rng(0).normal(0, 0.3, K.nv)
    w2 = w.copy()
    w2[-1] += 5.0
    np.testing.assert_array_equal(K.wx(w), K.wx(w2))
    g = K.grad(w)[0]
    assert g[-1] == pytest.approx(w[-1] if rb else 0.0, abs=1e-15)
    e = np.zeros(K.nv)
    e[-1] = 1.0
    np.testing.assert_allclose(K.hv(w, e), e if rb else np.zeros(K.nv), atol=1e-15)


def test_dense_and_sparse_origin_give_same_kernels():
    """The same values given densely or as CSR produce identical objective quantities."""
    rng = np.random.default_rng(3)
    A = rng.normal(size=(25, 6)).astype(np.float32)
    A[rng.random(A.shape) < 0.5] = 0.0
    Xd = check_features(A)
    Xs = check_features(sp.csr_matrix(A))
    y = labels_for(25, seed=4)
    w = rng.normal(0, 0.5, 7)
    v = rng.normal(size=7)
    for loss in LOSSES:
        Kd = Kernels(Xd, y, 1.0, 1.0, loss, False)
        Ks = Kernels(Xs, y, 1.0, 1.0, loss, False)
        assert Kd.f(w) == Ks.f(w)
        np.testing.assert_array_equal(Kd.grad(w)[0], Ks.grad(w)[0])
        np.testing.assert_array_equal(Kd.hv(w, v), Ks.hv(w, v))
        np.testing.assert_array_equal(Kd.diag(w), Ks.diag(w))


def test_logistic_is_stable_for_large_margins():
    """Huge scores must not overflow: value ~ |m| for m << 0, ~ 0 for m >> 0."""
    X = check_features(np.array([[1.0], [1.0], [-1.0]], dtype=np.float32))
    y = np.array([1.0, -1.0, 1.0])
    K = Kernels(X, y, 1.0, 1.0, "logistic", True)
    for big in (50.0, 800.0, 1e5):
        w = np.array([big, 0.0])
        f = K.f(w)
        g, *_ = K.grad(w)
        assert np.isfinite(f) and np.all(np.isfinite(g))
        # instance 0: m = +big (loss ~ 0); instances 1, 2: m = -big (loss ~ big each)
        assert f == pytest.approx(0.5 * big * big + 2 * big, rel=1e-12)
        assert np.all(np.isfinite(K.hv(w, np.ones(2))))


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("rb", (False, True))
def test_support_forms_agree_with_dense_forms(loss, rb):
    """The kernels restricted to the support F of the active rows (when the library has
    them): F is the sorted set of features of the active rows plus the bias index, the
    values on F are those of the full gradient / Hessian product / diagonal, and
    ||w_O||^2 is the norm of w outside F.  ``mark`` needs no clearing between calls."""
    if not hasattr(erm, "grad_on_support"):
        pytest.skip("no support forms in this version")
    n, d = 60, 200
    rng = np.random.default_rng(2)
    X = check_features(sp.random(n, d, density=0.02, random_state=2, format="csr",
                                 data_rvs=lambda k: rng.uniform(0.2, 1.5, k)))
    y = labels_for(n, seed=3)
    bias, C = 0.5, 1.2
    K = Kernels(X, y, bias, C, loss, rb)
    Xa = ref.augmented(X, bias)
    w = point_away_from_kink(K, Xa, loss, 5, scale=1.0)
    wx = K.wx(w)
    mark = np.zeros(d + 1, dtype=np.int64)
    for stamp in (1, 2, 3):
        g = np.full(d + 1, np.nan)
        act = np.empty(n, dtype=np.int64)
        gcoef, hcoef = np.empty(n), np.empty(n)
        F = np.empty(d + 1, dtype=np.int64)
        nact, nF, wout2 = erm.grad_on_support(K.P, K.y, w, wx, g, act, gcoef, hcoef, F, mark, stamp)
        F = F[:nF]
        rows = act[:nact]
        expect_F = np.union1d(np.unique(X[rows].indices), [d])
        np.testing.assert_array_equal(np.sort(F), expect_F)
        outside = np.setdiff1d(np.arange(d), F)
        assert wout2 == pytest.approx(float(w[outside] @ w[outside]), rel=1e-12)
        g_ref = ref.gradient(Xa, y, w, C, loss, rb)
        np.testing.assert_allclose(g[F], g_ref[F], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(g_ref[outside], w[outside], rtol=1e-12)   # bare regulariser there
        v = rng.normal(size=d + 1)
        out = np.full(d + 1, np.nan)
        erm.hess_vec_on_support(K.P, act, nact, hcoef, v, out, F.astype(np.int64), nF)
        Hv = ref.hessian(Xa, y, w, C, loss, rb) @ v
        np.testing.assert_allclose(out[F], Hv[F], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(Hv[outside], v[outside], rtol=1e-12)
        M = np.full(d + 1, np.nan)
        erm.diag_precond_on_support(K.P, act, nact, hcoef, M, F.astype(np.int64), nF)
        np.testing.assert_allclose(M[F], np.diag(ref.hessian(Xa, y, w, C, loss, rb))[F], rtol=1e-12)
