"""The objective in the span of the rows (objective/rowspan.py) and Newton's method with
exact steps (solver/direct.py), against dense numpy formulas of the same objective and
scipy's minimiser."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from headstart.objective import erm, losses, regularizers, rowspan
from headstart.params import TrainParams
from headstart.solver import direct, newton


def _problem(loss="squared-hinge", bias=1.0, regularize_bias=False, m=23, d=140, seed=0, cp=1.3, cn=0.7):
    rng = np.random.default_rng(seed)
    X = sp.random(m, d, density=0.08, random_state=seed, format="csr", dtype=np.float32)
    X.data = rng.random(X.nnz).astype(np.float32) + np.float32(0.1)
    keep = np.ones(m, dtype=np.float32)
    keep[3] = 0.0         # a row without features
    X = sp.csr_matrix(sp.diags(keep) @ X, dtype=np.float32)
    X.eliminate_zeros()
    X.sort_indices()
    params = TrainParams(loss=loss, bias=bias, regularize_bias=regularize_bias)
    P = erm.make_problem(X, bias, losses.make(params), regularizers.make(params), regularize_bias)
    O = erm.make_state(m, d)
    pos = np.array([0, 2, 5, 7, 11], dtype=np.int64)
    erm.set_label(O, pos, cp, cn)
    w0 = rng.standard_normal(d + 1) * 0.3
    erm.scores(P, w0, O.wx)
    return X, P, O, w0


def _dense_parts(X, O, P, w, loss):
    """(f, gradient, generalised Hessian) of the objective at w, in numpy."""
    A = np.hstack([X.toarray().astype(np.float64), np.full((X.shape[0], 1), P.bias)])
    y = O.y.astype(np.float64)
    c = np.where(y > 0, O.fst[erm.COST_POS], O.fst[erm.COST_NEG])
    m = y * (A @ w)
    if loss == "squared-hinge":
        t = np.maximum(0.0, 1.0 - m)
        val, d1, d2 = t * t, -2.0 * t, np.where(m < 1.0, 2.0, 0.0)
    elif loss == "huber-hinge":     # epsilon 1 (the default): v^2 / 2 for v <= 1, v - 1/2 beyond
        v = np.maximum(0.0, 1.0 - m)
        val = np.where(v > 1.0, v - 0.5, 0.5 * v * v)
        d1 = -np.minimum(v, 1.0)
        d2 = np.where(v > 1.0, 1.0 / np.maximum(v, 1.0), np.where(v > 0.0, 1.0, 0.0))
    else:
        val, d1 = np.logaddexp(0.0, -m), -1.0 / (1.0 + np.exp(m))
        s = 1.0 / (1.0 + np.exp(-m))
        d2 = s * (1.0 - s)
    r = np.ones(A.shape[1])
    if not P.regularize_bias:
        r[-1] = 0.0
    f = 0.5 * np.sum(r * w * w) + np.sum(c * val)
    g = r * w + A.T @ (c * d1 * y)
    H = np.diag(r) + A.T @ ((c * d2)[:, None] * A)
    return f, g, H


def _span_point(X, G, w0, m):
    """(w_f, w_b) of the span's current point, in numpy."""
    fs = G.fs
    wf = fs[rowspan.TAU] * w0[:-1] + X.T @ G.c[:m]
    return np.concatenate([wf, [fs[rowspan.B]]])


CASES = [("squared-hinge", 1.0, False), ("squared-hinge", 1.0, True), ("squared-hinge", 0.0, False),
         ("squared-hinge", 0.0, True), ("logistic", 1.0, False), ("logistic", 2.0, True)]


def test_gram_matrix_is_x_x_transpose():
    X, P, O, w0 = _problem()
    m = X.shape[0]
    G = rowspan.new_span(m, X.nnz, X.shape[1])
    rowspan.gram(P, G, m)
    K = G.K[: m * m].reshape(m, m)
    X64 = X.astype(np.float64)
    np.testing.assert_allclose(K, (X64 @ X64.T).toarray(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loss,bias,regb", CASES)
def test_value_gradient_and_newton_direction_match_the_dense_formulas(loss, bias, regb):
    """At the start and after a step: f and ||grad f|| from the span equal the dense
    formulas, and the direction is the solution of H s = -g with the dense generalised
    Hessian (its scores X s too)."""
    X, P, O, w0 = _problem(loss, bias, regb)
    m = X.shape[0]
    G = rowspan.new_span(m, X.nnz, X.shape[1])
    rowspan.gram(P, G, m)
    rowspan.start(P, O, G, w0, m)
    for move in range(2):
        w = _span_point(X, G, w0, m)
        f, g, H = _dense_parts(X, O, P, w, loss)
        assert rowspan.value(P, O, G, m) == pytest.approx(f, rel=1e-12)
        g2 = rowspan.gradient(P, O, G, m)
        assert np.sqrt(g2) == pytest.approx(np.linalg.norm(g), rel=1e-9)
        buf = np.zeros(w.size)
        rowspan.write_weights(P, G, w0, m, buf)
        np.testing.assert_allclose(buf, w, rtol=1e-12, atol=1e-14)
        assert rowspan.exact_gradient_norm(P, G, m, buf, np.zeros(w.size)) == pytest.approx(np.linalg.norm(g),
                                                                                             rel=1e-12)
        sTs, wTs, gTs = rowspan.direction(P, G, m)
        s_want = np.linalg.lstsq(H, -g, rcond=None)[0]
        s = np.concatenate([G.fs[rowspan.TAU_S] * w0[:-1] + X.T @ G.cs[:m], [G.fs[rowspan.S_B]]])
        if bias == 0.0 and not regb:
            s_want[-1] = 0.0     # no bias feature, no regulariser: the bias weight is no variable
        np.testing.assert_allclose(s, s_want, rtol=1e-7, atol=1e-9)
        A = np.hstack([X.toarray().astype(np.float64), np.full((m, 1), bias)])
        np.testing.assert_allclose(G.xs[:m], A @ s, rtol=1e-9, atol=1e-11)
        assert sTs == pytest.approx(s[:-1] @ s[:-1], rel=1e-9)
        assert wTs == pytest.approx(w[:-1] @ s[:-1], rel=1e-9, abs=1e-12)
        assert gTs == pytest.approx(g @ s, rel=1e-9)
        rowspan.step(G, m, 0.5, sTs, wTs)          # a half step, to test a second point
        assert G.fs[rowspan.WW] == pytest.approx(np.sum(_span_point(X, G, w0, m)[:-1] ** 2), rel=1e-10)


@pytest.mark.parametrize("loss,bias,regb", CASES + [("huber-hinge", 1.0, False), ("huber-hinge", 1.0, True)])
def test_direct_newton_reaches_the_minimiser(loss, bias, regb):
    """The solver stops at the gradient test, at scipy's minimiser of the same objective,
    with O.wx the solution's scores."""
    X, P, O, w0 = _problem(loss, bias, regb, seed=3)
    m, d = X.shape
    S = newton.settings(TrainParams())
    G = rowspan.new_span(m, X.nnz, d)
    w = w0.copy()
    tol = 1e-8
    st, it, f0, f1, g0, g1 = direct.newton(P, O, G, S, tol, w, np.zeros(d + 1), np.zeros(d + 1), m)
    assert st == newton.CONVERGED and g1 <= tol and 1 <= it <= 30
    f_start, _, _ = _dense_parts(X, O, P, w0, loss)
    f_zero, _, _ = _dense_parts(X, O, P, np.zeros(d + 1), loss)
    # a start above f(0) is replaced by w = 0 (solver/newton.py, zero_if_worse), as here
    assert f0 == pytest.approx(min(f_start, f_zero), rel=1e-12)

    def fun(v):
        f, g, _ = _dense_parts(X, O, P, v, loss)
        if bias == 0.0 and not regb:
            g[-1] = 0.0
        return f, g

    ref = minimize(fun, w0, jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10000})
    assert f1 == pytest.approx(ref.fun, rel=1e-9)
    f_w, g_w, _ = _dense_parts(X, O, P, w, loss)
    assert f_w == pytest.approx(f1, rel=1e-12)
    if bias == 0.0 and not regb:
        g_w[-1] = 0.0
    assert np.linalg.norm(g_w) <= tol * 1.01
    A = np.hstack([X.toarray().astype(np.float64), np.full((m, 1), bias)])
    np.testing.assert_allclose(O.wx[:m], A @ w, rtol=1e-9, atol=1e-9)


def test_direct_newton_from_the_solution_stops_at_once():
    X, P, O, w0 = _problem(seed=4)
    m, d = X.shape
    S = newton.settings(TrainParams())
    G = rowspan.new_span(m, X.nnz, d)
    w = w0.copy()
    direct.newton(P, O, G, S, 1e-10, w, np.zeros(d + 1), np.zeros(d + 1), m)
    erm.scores(P, w, O.wx)
    st, it, *_ = direct.newton(P, O, G, S, 1e-6, w, np.zeros(d + 1), np.zeros(d + 1), m)
    assert st == newton.CONVERGED and it == 0


@pytest.mark.parametrize("init", ["aop", "mean"])
def test_shortlisted_sub_problems_meet_the_same_test_by_either_method(bibtex_dir, init):
    """Shortlisted training with small sub-problems solved directly (the default) or all by
    truncated Newton (direct_rows=0): every label passes the same gradient test, the
    direct solutions' objective is never above the truncated ones' by more than the
    test allows, and the truncated solver is what runs with direct_rows=0 (its CG steps).
    aop starts in the span of a sub-problem's rows, mean (one shared vector) does not."""
    from headstart.estimator import prepare_data
    from headstart.io import read_xmc
    from headstart.shortlist.training import train_shortlisted

    X, Y = read_xmc(bibtex_dir / "train.txt.gz")
    p = TrainParams(threads=2, prune=0.0, direct_rows=48, init=init)    # some labels on either side
    data = prepare_data(X[:1500], Y[:1500], p)
    rng = np.random.default_rng(5)
    S = sp.csc_matrix((rng.random(data.Y.shape) < 0.02).astype(np.float32))
    S.sort_indices()
    labels = np.arange(data.Y.shape[1])
    _, _, s_cg = train_shortlisted(data.X, data.Y, S, p.replace(direct_rows=0), labels)
    _, _, s_dir = train_shortlisted(data.X, data.Y, S, p, labels)
    small = s_dir["rows"] <= p.direct_rows
    assert small.sum() > 20 and (~small).sum() > 20
    assert np.all(s_cg["cg_steps"] > 0)
    assert np.all(s_dir["cg_steps"][small] == 0) and np.all(s_dir["cg_steps"][~small] > 0)
    for s in (s_cg, s_dir):
        assert np.all(s["status"] == 0)
        assert np.all(s["gnorm_final"] <= s["tolerance"])
    np.testing.assert_array_equal(s_dir["f_final"][~small], s_cg["f_final"][~small])
    # both stop within the tolerance of the same minimum: the direct solution, an exact
    # Newton step's, is lower or equal up to the gap the gradient test leaves -- f - f* <=
    # ||g||^2 / 2 with the L2 term's curvature >= 1 (a start worse than w = 0 starts from
    # 0, where one exact step can pass the test: mean's label 59, 0.714 against 0.708,
    # ||g|| 0.21)
    gap = s_cg["f_final"][small] - s_dir["f_final"][small]
    allowed = 0.5 * s_dir["gnorm_final"][small] ** 2 + 1e-3 * np.abs(s_cg["f_final"][small])
    assert np.all(gap >= -allowed)
    assert s_dir["iterations"][small].sum() < s_cg["iterations"][small].sum()
