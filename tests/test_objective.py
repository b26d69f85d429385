"""The objective kernels of headstart.objective.erm against finite differences and an
independent numpy implementation (tests/_reference.py), through the same entry points,
dtypes and State the trainer uses (int8 labels, unsigned 32-bit active sets and marks, the loss and
regulariser tuples of the registries).

Checked for every registered loss, the regularisers (L2, Huber, elastic net), per-instance
costs, sparse and dense-origin X, with and without bias regularisation, bias 1 and 0.5:

* ``scores`` is X w + bias * w_bias, ``value`` the objective value;
* ``gradient`` agrees with central differences of ``value`` and reports the right
  active set and coefficients;
* ``hess_vec`` is the documented (generalised) Hessian: equal to the dense numpy one, and
  to central differences of the gradient wherever the curvature is the true second
  derivative (away from kinks; not on the linear pieces of the hinges and the Huber
  regulariser, where the authors' majorising curvature is used instead);
* ``precond`` is that Hessian's diagonal; the support forms agree with the full ones.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from headstart.objective import erm, losses, regularizers
from headstart.params import TrainParams
from headstart.validation import check_features

import _reference as ref

KINK_GAP = 0.05
EPS_HUBER_LOSS = 0.7
EPS_HUBER_REG = 0.3

# (registry name, reference spec, parameters for the registry's make())
LOSS_CASES = {
    "squared-hinge": ("squared-hinge", {}),
    "logistic": ("logistic", {}),
    "hinge": (("huber-hinge", 0.1), {}),      # DiSMEC++'s hinge: the Huber hinge, epsilon 0.1
    "huber-hinge": (("huber-hinge", EPS_HUBER_LOSS), {"huber_epsilon": EPS_HUBER_LOSS}),
}
#: the margins where each loss's phi' or phi'' jumps (the hinge case: the Huber hinge's
#: corner at 1 - 0.1 and its smoothing's end at 1): random points keep away from them, and
#: a finite-difference step must not cross one (``point``, ``fd_safe_h``)
LOSS_KINKS = {"squared-hinge": (1.0,), "hinge": (1.0, 0.9), "huber-hinge": (1.0, 1.0 - EPS_HUBER_LOSS),
              "logistic": ()}
REG_CASES = {
    "l2": ("l2", {}),
    "huber": (("huber", EPS_HUBER_REG), {"reg_epsilon": EPS_HUBER_REG}),
    "elastic-net": (("elastic", EPS_HUBER_REG, 0.3), {"reg_epsilon": EPS_HUBER_REG, "reg_l2_share": 0.3}),
}


def test_every_registered_loss_is_tested():
    assert set(LOSS_CASES) == set(losses.NAMES) == set(LOSS_KINKS)


def test_every_registered_regularizer_is_tested():
    """Every regulariser the Newton method minimises has a class among REG_CASES (the
    other names are presets of those classes; l1-exact has solvers of its own,
    tests/test_l1_exact.py); the reference refuses a name it has no formula for."""
    newton = {info.cls for info in regularizers.REGISTRY.values() if info.solver == "newton"}
    assert newton <= {regularizers.get(name).cls for name in REG_CASES}
    with pytest.raises(KeyError, match="no reference formula for regulariser 'pseudo-huber'"):
        ref._r(("pseudo-huber", 0.1, 0.2), np.zeros(3))


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
        np.testing.assert_array_equal(X.toarray(), A)
    assert X.dtype == np.float32 and X.indices.dtype == np.int32
    return X


def labels_for(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.35, 1.0, -1.0)
    y[0], y[1] = 1.0, -1.0
    return y


class Kernels:
    """The erm kernels for one problem, in a fresh State per call."""

    def __init__(self, X, y, bias, C, loss, regularize_bias, reg="l2", costs=(1.0, 1.0)):
        lspec, lpar = LOSS_CASES[loss]
        rspec, rpar = REG_CASES[reg]
        fields = dict(loss=loss, regularizer=reg, huber_epsilon=1.0, reg_epsilon=None, reg_l2_share=0.5)
        fields.update(lpar)
        fields.update(rpar)
        p = SimpleNamespace(**fields)
        self.P = erm.make_problem(X, bias, losses.make(p), regularizers.make(p), regularize_bias)
        self.spec = dict(loss=lspec, reg=rspec, regularize_bias=regularize_bias, costs=costs)
        self.C = C
        self.costs = costs
        self.y = np.asarray(y, dtype=np.float64)
        self.pos = np.flatnonzero(self.y > 0).astype(np.int64)
        self.n, self.d = X.shape
        self.nv = self.d + 1
        self.stamp = 0

    def state(self, w):
        O = erm.make_state(self.n, self.d)
        erm.set_label(O, self.pos, self.C * self.costs[0], self.C * self.costs[1])
        assert O.y.dtype == np.int8 and O.act.dtype == erm.ACT_DTYPE == np.uint32 and O.mark.dtype == erm.MARK_DTYPE
        erm.scores(self.P, np.ascontiguousarray(w, dtype=np.float64), O.wx)
        return O

    def wx(self, w):
        return self.state(w).wx.copy()

    def f(self, w):
        w = np.ascontiguousarray(w, dtype=np.float64)
        return erm.value(self.P, self.state(w), w)

    def grad(self, w):
        """(g, act, gcoef, hcoef, O) with g on every coordinate."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        O = self.state(w)
        g = np.full(self.nv, np.nan)
        nact = erm.full_gradient(self.P, O, w, g)
        return g, O.act[:nact].copy(), O.gcoef[:nact].copy(), O.hcoef[:nact].copy(), O

    def hv(self, w, v):
        w = np.ascontiguousarray(w, dtype=np.float64)
        O = self.grad(w)[-1]
        out = np.full(self.nv, np.nan)
        erm.full_hess_vec(self.P, O, w, np.ascontiguousarray(v, dtype=np.float64), out)
        return out

    def hess_dense(self, w):
        return np.column_stack([self.hv(w, e) for e in np.eye(self.nv)])

    def diag(self, w):
        w = np.ascontiguousarray(w, dtype=np.float64)
        O = self.grad(w)[-1]
        M = np.full(self.nv, np.nan)
        erm.full_precond(self.P, O, w, M)
        return M

    # the independent references
    def ref_f(self, Xa, w):
        return ref.objective(Xa, self.y, w, self.C, **self.spec)

    def ref_g(self, Xa, w):
        return ref.gradient(Xa, self.y, w, self.C, **self.spec)

    def ref_H(self, Xa, w):
        return ref.hessian(Xa, self.y, w, self.C, **self.spec)


def exact_curvature(loss: str, reg: str, Xa, y, w) -> bool:
    """True where the documented curvature is the true second derivative at w."""
    m = y * (Xa @ w)
    if loss == "hinge" and np.any(1.0 - m > 0.1):
        return False
    if loss == "huber-hinge" and np.any(1.0 - m > EPS_HUBER_LOSS):
        return False
    if reg != "l2" and np.any(np.abs(w[:-1]) > EPS_HUBER_REG):
        return False
    return True


def point(K: Kernels, Xa, loss: str, seed: int, scale: float = 0.6) -> np.ndarray:
    """A random w with a mix of active and inactive instances and no margin near a kink
    of the loss (1, and 1 - eps for the Huber hinge) nor a weight near the regulariser's."""
    rng = np.random.default_rng(seed)
    for _ in range(2000):
        w = rng.normal(0.0, scale, K.nv)
        m = K.y * (Xa @ w)
        if any(np.min(np.abs(m - k)) <= KINK_GAP for k in LOSS_KINKS[loss]):
            continue
        if K.spec["reg"] != "l2" and np.min(np.abs(np.abs(w) - EPS_HUBER_REG)) <= KINK_GAP:
            continue
        if loss == "logistic" or 0.2 < (m < 1.0).mean() < 0.9:
            return w
    raise AssertionError("no point away from the kinks found")


def fd_safe_h(Xa, y, w, dirs, loss, h):
    """No margin crosses a kink of the loss (``LOSS_KINKS``) within +-h along the
    directions."""
    m = y * (Xa @ w)
    for v in dirs:
        dm = np.abs(Xa @ v) * h
        for k in LOSS_KINKS[loss]:
            assert np.all(np.abs(k - m) > dm), f"finite-difference step crosses the kink at margin {k}"


CASES = [
    pytest.param(loss, kind, rb, bias, id=f"{loss}-{kind}-{'regb' if rb else 'noregb'}-bias{bias}")
    for loss in LOSS_CASES for kind in ("sparse", "dense") for rb in (False, True) for bias in (1.0, 0.5)
]
REG_COST_CASES = [
    pytest.param(loss, reg, costs, id=f"{loss}-{reg}-c{costs[0]}_{costs[1]}")
    for loss in LOSS_CASES for reg in REG_CASES for costs in ((1.0, 1.0), (3.5, 0.4))
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
        assert K.f(w) == pytest.approx(K.ref_f(Xa, w), rel=1e-12)
    # at w = 0 the value is C * n * phi(0)
    phi0 = float(ref._phi(LOSS_CASES[loss][0], np.zeros(1))[0])
    assert K.f(np.zeros(K.nv)) == pytest.approx(C * X.shape[0] * phi0, rel=1e-14)


@pytest.mark.parametrize("loss,kind,rb,bias", CASES)
def test_gradient_matches_finite_differences(loss, kind, rb, bias):
    X = make_X(kind, seed=2)
    y = labels_for(X.shape[0], seed=3)
    K = Kernels(X, y, bias, 1.3, loss, rb)
    Xa = ref.augmented(X, bias)
    check_gradient(K, Xa, y, loss)


def check_gradient(K, Xa, y, loss, seeds=range(3)):
    h = 1e-6
    for seed in seeds:
        w = point(K, Xa, loss, seed)
        g = K.grad(w)[0]
        assert np.all(np.isfinite(g))
        # against the analytic numpy gradient (independent code)
        np.testing.assert_allclose(g, K.ref_g(Xa, w), rtol=1e-10, atol=1e-10)
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
    w = point(K, Xa, loss, 7)
    g, act, gcoef, hcoef, _ = K.grad(w)
    m = y * (Xa @ w)
    lspec = LOSS_CASES[loss][0]
    if loss == "logistic":
        np.testing.assert_array_equal(act, np.arange(X.shape[0]))
    else:
        expect = np.flatnonzero(m < 1.0)           # implicit negative mining
        np.testing.assert_array_equal(act, expect)
        assert 0 < act.size < X.shape[0]
    np.testing.assert_allclose(gcoef, C * ref._dphi(lspec, m[act]) * y[act], rtol=1e-10)
    np.testing.assert_allclose(hcoef, C * ref._d2phi(lspec, m[act]), rtol=1e-10)


@pytest.mark.parametrize("loss,kind,rb,bias", CASES)
def test_hessian_vector_matches_finite_differences(loss, kind, rb, bias):
    X = make_X(kind, seed=6)
    y = labels_for(X.shape[0], seed=7)
    K = Kernels(X, y, bias, 1.1, loss, rb)
    Xa = ref.augmented(X, bias)
    check_hessian(K, Xa, y, loss, "l2", rb)


def check_hessian(K, Xa, y, loss, reg, rb, seeds=range(3)):
    h = 1e-5
    for seed in seeds:
        w = point(K, Xa, loss, 10 + seed)
        H = K.hess_dense(w)
        # against the dense generalised Hessian in numpy
        np.testing.assert_allclose(H, K.ref_H(Xa, w), rtol=1e-10, atol=1e-10)
        # symmetric, positive semidefinite
        np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)
        assert np.linalg.eigvalsh(0.5 * (H + H.T)).min() >= -1e-10
        if exact_curvature(loss, reg, Xa, y, w):
            V = np.vstack([np.eye(K.nv)[[0, K.nv - 1]], np.random.default_rng(seed).normal(size=(3, K.nv))])
            fd_safe_h(Xa, y, w, V, loss, h)
            for v in V:
                Hv = K.hv(w, v)
                fd = (K.grad(w + h * v)[0] - K.grad(w - h * v)[0]) / (2 * h)
                np.testing.assert_allclose(Hv, fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(Hv).max()))


@pytest.mark.parametrize("loss,kind,rb,bias", CASES)
def test_diag_preconditioner_is_hessian_diagonal(loss, kind, rb, bias):
    X = make_X(kind, seed=8)
    y = labels_for(X.shape[0], seed=9)
    K = Kernels(X, y, bias, 0.8, loss, rb)
    Xa = ref.augmented(X, bias)
    w = point(K, Xa, loss, 21)
    M = K.diag(w)
    np.testing.assert_allclose(M, np.diag(K.hess_dense(w)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(M, np.diag(K.ref_H(Xa, w)), rtol=1e-10, atol=1e-12)
    if kind == "sparse":   # the empty column has only the regulariser's 1 on the diagonal
        assert M[5] == 1.0


@pytest.mark.parametrize("loss,reg,costs", REG_COST_CASES)
def test_regularisers_and_costs(loss, reg, costs):
    """Value, gradient (finite differences), Hessian products and preconditioner with every
    regulariser and with per-instance costs c_+ != c_-."""
    X = make_X("sparse", seed=30)
    y = labels_for(X.shape[0], seed=31)
    for rb in (False, True):
        K = Kernels(X, y, 1.0, 1.2, loss, rb, reg=reg, costs=costs)
        Xa = ref.augmented(X, 1.0)
        w = point(K, Xa, loss, 3)
        assert K.f(w) == pytest.approx(K.ref_f(Xa, w), rel=1e-12)
        check_gradient(K, Xa, y, loss, seeds=range(2))
        check_hessian(K, Xa, y, loss, reg, rb, seeds=range(2))
        np.testing.assert_allclose(K.diag(w), np.diag(K.ref_H(Xa, w)), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("loss", list(LOSS_CASES))
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
    for loss in LOSS_CASES:
        Kd = Kernels(Xd, y, 1.0, 1.0, loss, False)
        Ks = Kernels(Xs, y, 1.0, 1.0, loss, False)
        assert Kd.f(w) == Ks.f(w)
        np.testing.assert_array_equal(Kd.grad(w)[0], Ks.grad(w)[0])
        np.testing.assert_array_equal(Kd.hv(w, v), Ks.hv(w, v))
        np.testing.assert_array_equal(Kd.diag(w), Ks.diag(w))


def test_more_features_than_int32_ids_are_refused():
    """Feature ids are int32 throughout: a wider matrix is refused, not wrapped."""
    from headstart.errors import DataFormatError

    X = sp.csr_matrix((np.ones(1), (np.zeros(1, int), np.full(1, 2**31 + 4))), shape=(1, 2**31 + 5))
    with pytest.raises(DataFormatError, match="2147483653 features; at most 2147483647"):
        check_features(X)


@pytest.mark.parametrize("block_bytes", [4, 100, 1 << 24])
def test_dense_features_convert_to_the_same_csr_as_scipy(block_bytes):
    """dense_to_csr (blocks of rows, no COO detour) gives scipy's canonical CSR of the
    float32 values: zero rows, values that vanish in float32, float64/int/Fortran input."""
    from headstart.validation import dense_to_csr

    rng = np.random.default_rng(8)
    A = rng.normal(size=(40, 7))
    A[rng.random(A.shape) < 0.4] = 0.0
    A[5] = 0.0
    A[6, 2] = 1e-50                                  # 0 in float32
    full = rng.normal(size=(9, 3))                   # no zeros: the block fast path
    for M in (A, np.asfortranarray(A), (A * 10).astype(np.int64), full, np.zeros((3, 4)), np.zeros((0, 5))):
        got = dense_to_csr(M, block_bytes=block_bytes)
        want = sp.csr_matrix(np.asarray(M, dtype=np.float32))
        want.eliminate_zeros()
        assert got.has_canonical_format and got.dtype == np.float32 and got.indices.dtype == np.int32
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
        assert np.array_equal(got.data, want.data)


@pytest.mark.parametrize("loss", list(LOSS_CASES))
def test_derivatives_at_once_are_d1_and_d2_bit_for_bit(loss):
    """A loss's fused ``derivatives`` (the logistic loss: one exp for both) returns exactly
    what ``d1`` and ``d2`` return, over margins on both sides of every kink and far out."""
    import numba as nb

    L = losses.get(loss).make(TrainParams(loss=loss, **LOSS_CASES[loss][1]))

    @nb.njit
    def both(L, ms):
        out = np.empty((ms.size, 8))
        for k in range(ms.size):
            a, b = losses.derivatives(L, ms[k])
            out[k, 0] = a
            out[k, 1] = losses.d1(L, ms[k])
            out[k, 2] = b
            out[k, 3] = losses.d2(L, ms[k])
            v, g, h = losses.value_and_derivatives(L, ms[k])   # all three at once (exact L1's line search)
            out[k, 4] = v
            out[k, 5] = losses.value(L, ms[k])
            out[k, 6] = g
            out[k, 7] = h
        return out

    rng = np.random.default_rng(3)
    ms = np.concatenate([[-0.0, 0.0, 1.0, 0.9, 1.1, -1.0, 1e-300, -1e-300, 40.0, -40.0, 800.0, -800.0],
                         rng.normal(0.0, 3.0, 500), np.nextafter(1.0, [0.0, 2.0])])
    out = both(L, ms)
    np.testing.assert_array_equal(out[:, 0].view(np.int64), out[:, 1].view(np.int64))
    np.testing.assert_array_equal(out[:, 2].view(np.int64), out[:, 3].view(np.int64))
    np.testing.assert_array_equal(out[:, 4].view(np.int64), out[:, 5].view(np.int64))
    np.testing.assert_array_equal(out[:, 6].view(np.int64), out[:, 1].view(np.int64))
    np.testing.assert_array_equal(out[:, 7].view(np.int64), out[:, 3].view(np.int64))


def test_logistic_is_stable_for_large_margins():
    """Huge scores must not overflow: value ~ |m| for m << 0, ~ 0 for m >> 0."""
    X = check_features(np.array([[1.0], [1.0], [-1.0]], dtype=np.float32))
    y = np.array([1.0, -1.0, 1.0])
    K = Kernels(X, y, 1.0, 1.0, "logistic", True)
    for big in (50.0, 800.0, 1e5):
        w = np.array([big, 0.0])
        f = K.f(w)
        g = K.grad(w)[0]
        assert np.isfinite(f) and np.all(np.isfinite(g))
        # instance 0: m = +big (loss ~ 0); instances 1, 2: m = -big (loss ~ big each)
        assert f == pytest.approx(0.5 * big * big + 2 * big, rel=1e-12)
        assert np.all(np.isfinite(K.hv(w, np.ones(2))))


@pytest.mark.parametrize("loss", list(LOSS_CASES))
@pytest.mark.parametrize("rb", (False, True))
def test_support_forms_agree_with_dense_forms(loss, rb):
    """The kernels restricted to the support F of the active rows: F is the sorted set of
    features of the active rows plus the bias index, the values on F are those of the full
    gradient / Hessian product / diagonal, and ||w_O||^2 is the norm of w outside F.  The
    marks need no clearing between calls.  A dense active set (at least 1/erm.DENSE_SHARE
    of the rows) has every feature as its support; a label with three positives and a
    start far below zero gives the sparse kind (for the losses that mine)."""
    n, d = 60, 200
    rng = np.random.default_rng(2)
    X = check_features(sp.random(n, d, density=0.02, random_state=2, format="csr",
                                 data_rvs=lambda k: rng.uniform(0.2, 1.5, k)))
    Xa = ref.augmented(X, 0.5)
    y_few = -np.ones(n)
    y_few[[4, 9, 30]] = 1.0
    w_few = rng.normal(0.0, 0.01, d + 1)
    w_few[d] = -6.0                 # scores about -3: only the positives are active
    kinds = set()
    for y, w in ((labels_for(n, seed=3), None), (y_few, w_few)):
        K = Kernels(X, y, 0.5, 1.2, loss, rb)
        if w is None:
            w = point(K, Xa, loss, 5, scale=1.0)
        O = K.state(w)
        H = K.ref_H(Xa, w)
        for _ in range(3):
            g = np.full(d + 1, np.nan)
            gnorm = erm.gradient(K.P, O, w, g)
            nF = O.ist[erm.NF]
            F = O.F[:nF].astype(np.int64)
            rows = O.act[:O.ist[erm.NACT]]
            dense = rows.size * erm.DENSE_SHARE >= n
            kinds.add(dense)
            if dense:
                np.testing.assert_array_equal(F, np.arange(d + 1))
            else:
                np.testing.assert_array_equal(F, np.union1d(np.unique(X[rows].indices), [d]))
            outside = np.setdiff1d(np.arange(d), F)
            assert O.fst[erm.WOUT2] == pytest.approx(float(w[outside] @ w[outside]), rel=1e-12)
            g_ref = K.ref_g(Xa, w)
            np.testing.assert_allclose(g[F], g_ref[F], rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(g_ref[outside], w[outside], rtol=1e-12)   # bare regulariser there
            assert gnorm == pytest.approx(np.linalg.norm(g_ref), rel=1e-10)
            v = rng.normal(size=d + 1)
            out = np.full(d + 1, np.nan)
            erm.hess_vec(K.P, O, w, v, out)
            np.testing.assert_allclose(out[F], (H @ v)[F], rtol=1e-10, atol=1e-10)
            M = np.full(d + 1, np.nan)
            assert erm.precond(K.P, O, w, M) == 1.0
            np.testing.assert_allclose(M[F], np.diag(H)[F], rtol=1e-12)
    if loss != "logistic":
        assert kinds == {False, True}


def test_outside_norm_is_exact_when_the_support_holds_almost_all_of_w():
    """||w_O||^2 = ||w||^2 - ||w_F||^2 loses every digit when w lives on F: it is then summed
    directly, so ||grad f|| can go below 1e-8 ||w|| (strict tolerances, as in LIBLINEAR).
    (One active row of 40 -- a sparse active set, so there is an outside.)"""
    n, d = 40, 50
    rng = np.random.default_rng(9)
    A = np.zeros((n, d), dtype=np.float32)
    A[0, :5] = rng.uniform(0.5, 1.0, 5)                      # the positive: features 0..4 alone
    A[1:, 5:] = rng.uniform(0.5, 1.0, (n - 1, d - 5)) * (rng.random((n - 1, d - 5)) < 0.1)
    X = check_features(sp.csr_matrix(A))
    y = -np.ones(n)
    y[0] = 1.0
    K = Kernels(X, y, 1.0, 1.0, "squared-hinge", False)
    w = 1e-3 * rng.normal(size=d + 1)
    w[:5] = -np.abs(w[:5])       # row 0 stays active when they grow
    w[d] = -3.0                  # the negatives far below -1: inactive
    O = K.state(w)
    g = np.empty(d + 1)
    erm.gradient(K.P, O, w, g)
    assert O.ist[erm.NACT] == 1
    F = O.F[:O.ist[erm.NF]]
    w[F[:-1]] *= 1e6          # nearly all of ||w|| on F now; outside untouched
    erm.scores(K.P, w, O.wx)
    erm.gradient(K.P, O, w, g)
    assert O.ist[erm.NACT] == 1
    F = O.F[:O.ist[erm.NF]]
    outside = np.setdiff1d(np.arange(d), F)
    exact = float(w[outside] @ w[outside])
    assert exact > 0 and exact < erm.EXACT_WOUT_SHARE * float(w @ w)   # the exact branch
    assert O.fst[erm.WOUT2] == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("loss,kind,rb,bias", CASES)
def test_group_hessian_products_are_each_problems_own(loss, kind, rb, bias):
    """erm.hess_rows_group (+ hess_reg) gives GROUP problems -- different labels, points
    and active sets, one of them not taking part, one slot empty -- exactly what
    hess_vec gives each alone, bit for bit, over the union of their active rows."""
    X = make_X(kind, n=60, seed=8)
    n, d = X.shape
    nv = d + 1
    G = erm.GROUP
    rng = np.random.default_rng(9)
    lanes = 3                                    # slot 3 stays empty
    C = np.full((lanes, n), np.nan)              # the coefficient rows (the lanes' xs)
    mask = np.zeros(n, dtype=np.int8)
    D = np.full((nv, G), np.nan)                 # garbage off the supports must not matter
    HD = np.full((nv, G), np.nan)
    want = []
    states = []
    for t in range(lanes):
        y = labels_for(n, seed=20 + t)
        K = Kernels(X, y, bias, 0.9 + 0.1 * t, loss, rb)
        w = rng.normal(0.0, 0.3, nv)
        g, act, gcoef, hcoef, O = K.grad(w)
        assert 0 < act.size
        erm.group_coefficients(O, C[t], mask)
        v = rng.normal(size=nv)
        F = O.F[:O.ist[erm.NF]]
        D[F, t] = v[F]
        alone = np.full(nv, np.nan)
        erm.hess_vec(K.P, O, w, v, alone)
        want.append(alone[F])
        erm.hess_reg(K.P, O, w, D[:, t], HD[:, t])
        states.append(F)
    U = np.zeros(n, dtype=erm.ACT_DTYPE)
    nU = erm.group_rows(mask, U)
    assert not mask.any() and np.all(np.diff(U[:nU]) > 0)
    members = np.array([0, 1, 2, 0], dtype=np.int64)
    run = np.array([True, False, True, False])
    before = HD[:, 1].copy()
    erm.hess_rows_group(K.P, U, nU, C, members, run, D, HD, np.full((erm.GROUP, n), np.nan))
    for t in (0, 2):
        np.testing.assert_array_equal(HD[states[t], t], want[t])
    np.testing.assert_array_equal(HD[:, 1], before)     # a problem not taking part is left alone


def test_prefetched_row_passes_read_the_same_rows_with_empty_and_last_rows():
    """The row prefetch of headstart._prefetch is a hint: a pass over a subset of rows
    that prefetches ahead (empty rows, the last row, rows longer than a cache line)
    gives exactly the sums of the same pass without it."""
    import numba as nb

    from headstart._prefetch import prefetch, prefetch_ahead

    @nb.njit
    def row_sums(indptr, indices, data, rows, ahead):
        out = np.zeros(rows.size)
        for k in range(rows.size):
            if ahead:
                prefetch_ahead(indptr, indices, data, rows, k, rows.size)
                if k + 2 < rows.size and indptr[rows[k + 2] + 1] > indptr[rows[k + 2]]:
                    prefetch(data, indptr[rows[k + 2]])
            i = rows[k]
            for p in range(indptr[i], indptr[i + 1]):
                out[k] += data[p] * indices[p]
        return out

    rng = np.random.default_rng(3)
    X = sp.random(40, 300, density=0.1, format="csr", random_state=5, dtype=np.float32)
    X = sp.csr_matrix(X)
    X.indices = X.indices.astype(np.int32)
    rows_with_data = np.flatnonzero(np.diff(X.indptr) > 0)
    rows = np.sort(rng.choice(rows_with_data, 25, replace=False))
    rows = np.concatenate([rows, [X.shape[0] - 1]]) if X.indptr[-1] > X.indptr[-2] else rows
    want = np.array([float(X.data[X.indptr[i]:X.indptr[i + 1]] @ X.indices[X.indptr[i]:X.indptr[i + 1]].astype(np.float64))
                     for i in rows])
    ip = X.indptr.astype(np.int64)
    got = row_sums(ip, X.indices, X.data, rows.astype(np.int32), True)
    assert np.array_equal(got, row_sums(ip, X.indices, X.data, rows.astype(np.int32), False))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # empty rows: nothing prefetched, nothing read
    E = sp.csr_matrix((3, 5), dtype=np.float32)
    assert row_sums(E.indptr.astype(np.int64), E.indices.astype(np.int32), E.data, np.arange(3, dtype=np.int32),
                    True).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("loss", ["squared-hinge", "logistic"])
@pytest.mark.parametrize("kind", ["sparse", "dense"])
@pytest.mark.parametrize("start", ["zero", "bias", "few-positives", "all-negative", "all-positive"])
def test_class_constant_start_gradient_matches_the_pass_over_the_rows(loss, kind, start):
    """Every row active with one score per class (from zero, or a start that moves only
    the bias): the gradient and Hessian diagonal come from the column sums and the
    smaller class's rows (erm._grad_by_class), and agree with the pass over every row
    (the same problem without column sums) to rounding, costs per class included; a
    start whose scores differ within a class takes the pass over the rows, bit for bit."""
    X = make_X(kind, n=60, d=11, seed=4)
    y = labels_for(60, seed=2)
    if start == "few-positives":
        y[:] = -1.0
        y[[7, 30]] = 1.0
    elif start == "all-negative":
        y[:] = -1.0
    elif start == "all-positive":
        y[:] = 1.0
    K = Kernels(X, y, 1.0, 1.0, loss, False, costs=(2.5, 0.75))
    w = np.zeros(K.nv)
    if start == "bias":
        w[-1] = 0.3
    plain = K.P._replace(colsum=np.empty(0), colsq=np.empty(0))
    x64 = X.data.astype(np.float64)
    np.testing.assert_array_equal(K.P.colsum[:-1], np.bincount(X.indices, weights=x64, minlength=K.d))
    np.testing.assert_allclose(K.P.colsq[:-1], np.bincount(X.indices, weights=x64 * x64, minlength=K.d), rtol=1e-14)
    assert K.P.colsum[-1] == K.n and K.P.colsq[-1] == K.n   # bias 1

    def grad(P, w):
        O = K.state(w)
        g = np.full(K.nv, np.nan)
        gn = erm.gradient(P, O, w, g)
        return g.copy(), O.hdiag.copy(), gn, O.ist[erm.NACT], O.ist[erm.NF]

    g1, h1, n1, a1, f1 = grad(K.P, w)
    g2, h2, n2, a2, f2 = grad(plain, w)
    assert a1 == a2 == K.n and f1 == f2 == K.nv
    scale = np.abs(X).sum() * 5
    np.testing.assert_allclose(g1, g2, rtol=1e-12, atol=1e-13 * scale)
    np.testing.assert_allclose(h1, h2, rtol=1e-12, atol=1e-13 * scale)
    assert n1 == pytest.approx(n2, rel=1e-12)
    # scores that differ within a class: the rows' pass, bit for bit
    w[2] = 0.01
    g1, h1, *_ = grad(K.P, w)
    g2, h2, *_ = grad(plain, w)
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_array_equal(h1, h2)


def test_the_lane_sweep_with_and_without_prefetching_v_gives_the_same_bits():
    """kernel.lanes_scores prefetches V's rows V_AHEAD nonzeros ahead on large X: a hint
    only, so the 16 lanes' scores are bit for bit those without it, and each lane's are
    those of erm.scores (empty rows, the last nonzeros, fewer nonzeros than V_AHEAD);
    the same for the 8-lane sweep (kernel.lanes_scores8)."""
    from headstart.training import kernel

    rng = np.random.default_rng(8)
    for n, d, density in [(300, 50, 0.1), (7, 40, 0.05), (1, 3, 1.0)]:
        X = sp.random(n, d, density=density, format="csr", random_state=int(rng.integers(1000)), dtype=np.float32)
        X = sp.csr_matrix(X)
        X.indices = X.indices.astype(np.int32)
        if n > 3:
            X = sp.vstack([X[:2], sp.csr_matrix((2, d), dtype=np.float32), X[2:]], format="csr")
        X.indices = X.indices.astype(np.int32)
        p = TrainParams()
        P = erm.make_problem(X, 1.0, losses.make(p), regularizers.make(p), False)
        for L, sweep in [(kernel.LANES, kernel.lanes_scores), (kernel.HALF_LANES, kernel.lanes_scores8)]:
            V = rng.standard_normal((d + 1, L)).astype(np.float32)
            V[rng.random(d + 1) < 0.3] = 0.0
            a = np.full((L, X.shape[0]), np.nan)
            b = np.full((L, X.shape[0]), np.nan)
            sweep(P, V, a, True)
            sweep(P, V, b, False)
            assert np.array_equal(a, b)
            for lane in range(L):
                one = np.zeros(X.shape[0])
                erm.scores(P, np.ascontiguousarray(V[:, lane]), one)
                assert np.array_equal(a[lane], one)
