"""The objective of :mod:`.erm` for a problem with few rows, in the span of those rows.

With the L2 regulariser, f(w) = 0.5 ||w_f||^2 + 0.5 r_b w_b^2 + sum_i c_i phi(y_i (x_i . w_f
+ beta w_b)) (w_f the feature weights, w_b the bias weight, beta the bias feature's value,
r_b 1 when the bias is regularised), and a start w0, every point a Newton method visits
lies in

    w_f = tau * w0_f + X^T c,      w_b free,

a space of m + 2 dimensions for m rows, whatever the number of columns: the gradient
is w_f + X^T gamma (gamma_i = c_i phi'(m_i) y_i), and the Newton system's solution is a
combination of the gradient and rows of X (Woodbury's identity, below).  This is the
representer theorem at work (the solution itself is -X^T gamma).  A shortlisted
sub-problem of a tail label has a few dozen rows and thousands of columns, so where the
core's objective pays O(columns) per CG vector operation (about two dozen such loops per
Newton iteration), this one pays O(m^2) per iteration, after forming the Gram matrix
K = X X^T once (sum over columns of their nonzeros squared).

Everything is expressed through K and the start's scores z0 = X w0_f:

* scores: X w_f = tau z0 + K c;
* inner products of two points (tau1, c1), (tau2, c2):
  tau1 tau2 ||w0_f||^2 + tau1 z0.c2 + tau2 z0.c1 + c1 K c2, which with the scores of one of
  them known is O(m) (see :func:`direction`);
* the Newton direction.  The generalised Hessian is H = R + A^T D A, A the rows with
  positive curvature D_i = c_i phi''(m_i) (the active rows of the squared hinge)
  augmented with the bias column, R = diag(1, ..., 1, r_b).  For the feature block
  H0 = I + X_A^T D X_A, Woodbury gives

      H0^-1 v = v - X_A^T D^1/2 M^-1 D^1/2 X_A v,     M = I + D^1/2 K_AA D^1/2,

  M an |A| x |A| matrix with eigenvalues >= 1 (so its Cholesky factorisation is stable
  whatever the curvature); the bias row and column are eliminated by their Schur
  complement, which works whether the bias is regularised or not.  The step is the exact
  Newton step, where the core's truncated Newton method stops CG early (LIBLINEAR's
  Q-decrease rule): the two methods visit different points, and both stop at the same
  gradient test, ||grad f(w)|| <= tol.

This objective is used for sub-problems of at most a few hundred rows that are not the
whole problem (:mod:`headstart.solver.direct`, chosen in
:mod:`headstart.shortlist.training`): |A|^3 / 6 flops per factorisation grow faster
than the truncated Newton method's O(nnz + columns) per CG step.

State.  A :data:`Span` holds flat buffers sized for the largest sub-problem met (K and
the factor L are m x m, row-major, stride m), the per-row vectors and the scalars
``fs``.  The labels y, the costs and the final scores are the core objective's
:data:`.erm.State` (its ``y``, ``fst`` and ``wx``), so the post-processing and the
bookkeeping see the usual state once the solution is written out (:func:`write_out`).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .._compile import njit
from .._span import U64
from . import erm, losses

# K: m*m float64 (row-major, stride m); U: the Cholesky factor (upper triangle, row-major,
# stride |A|); z0, c, cs, gam, D, z, xs, kg (= K gamma), t1, t2, u1, u2, sd (sqrt(D) on A):
# m float64; act: m int64; colptr / crow / cval: the
# sub-problem's transpose (scratch of the Gram product).  fs (float64): the scalars below.
#
# Loops are written as axpy updates over contiguous rows of K or U wherever they can be
# (K is symmetric, so K v is a sum of rows): a dot product is one chain of dependent
# additions, which LLVM may not reorder (no fastmath), while an axpy vectorises.
Span = namedtuple("Span", ["K", "U", "z0", "c", "cs", "gam", "D", "z", "xs", "kg", "t1", "t2", "u1", "u2", "sd",
                           "act", "colptr", "crow", "cval", "fs"])
# TAU, B: the point's tau and bias weight; W0SQ: ||w0_f||^2; WW: ||w_f||^2; TAU_S, S_B:
# the direction's tau and bias part; NACT: rows with positive curvature (as a float);
# GSUM: sum of gamma; G2SCALE: the size of the terms of ||grad f||^2 (see gradient)
TAU, B, W0SQ, WW, TAU_S, S_B, NACT, GSUM, G2SCALE = range(9)
N_SCALARS = 9


@njit(cache=True, nogil=True, inline="always")
def _axpy(a, x, xo, y, yo, n):
    """y[yo:yo+n] += a * x[xo:xo+n].  Unsigned positions (as erm.INDEX_DTYPE explains):
    with signed ones numba tests every index for wrap-around and the loop does not
    vectorise (measured on a 118 x 118 Cholesky factorisation: 418 against 105 us)."""
    xo = U64(xo)
    yo = U64(yo)
    for k in range(U64(n)):
        y[yo + k] += a * x[xo + k]


@njit(cache=True, nogil=True)
def new_span(m, nnz, d):
    mm = max(m, 1)
    return Span(np.zeros(mm * mm), np.zeros(mm * mm), np.zeros(mm), np.zeros(mm), np.zeros(mm), np.zeros(mm),
                np.zeros(mm), np.zeros(mm), np.zeros(mm), np.zeros(mm), np.zeros(mm), np.zeros(mm), np.zeros(mm),
                np.zeros(mm), np.zeros(mm), np.zeros(mm, dtype=np.int64),
                np.zeros(max(d, 1) + 1, dtype=np.int64), np.zeros(max(nnz, 1), dtype=np.int32),
                np.zeros(max(nnz, 1)), np.zeros(N_SCALARS))


@njit(cache=True, nogil=True)
def span_fits(G, m, nnz, d):
    return G.z0.size >= m and G.crow.size >= nnz and G.colptr.size >= d + 1


# --- set-up ---------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def gram(P, G, m):
    """K = X X^T (features only, float64) of the m-row problem P, by columns: each
    column adds the products of its nonzeros, sum_j nnz_j^2 / 2 multiply-adds (a
    sub-problem's rare columns have one or two rows).  The rows of a column come in
    ascending order (the transpose is filled row by row), so only K's upper triangle
    is summed, then mirrored."""
    d = P.n_features
    K = G.K
    colptr = G.colptr
    for j in range(d + 1):
        colptr[j] = 0
    nnz = P.indptr[m] - P.indptr[0]
    for p in range(nnz):
        colptr[P.indices[p] + 1] += 1
    for j in range(d):
        colptr[j + 1] += colptr[j]
    for i in range(m):
        for p in range(P.indptr[i], P.indptr[i + 1]):
            j = P.indices[p]
            q = colptr[j]
            G.crow[q] = i
            G.cval[q] = np.float64(P.data[p])
            colptr[j] = q + 1
    for j in range(d, 0, -1):     # the fill advanced every column's start to the next one's
        colptr[j] = colptr[j - 1]
    colptr[0] = 0
    for k in range(m * m):
        K[k] = 0.0
    for j in range(d):
        for p in range(colptr[j], colptr[j + 1]):
            v = G.cval[p]
            base = U64(G.crow[p]) * U64(m)
            for q in range(U64(p), U64(colptr[j + 1])):
                K[base + U64(G.crow[q])] += v * G.cval[q]
    for i in range(m):
        for k in range(i + 1, m):
            K[k * m + i] = K[i * m + k]


@njit(cache=True, nogil=True)
def start(P, O, G, w, m):
    """The point w (the start, features then bias weight, with O.wx = X w current) as
    tau = 1, c = 0: its scores without the bias are z0."""
    d = P.n_features
    beta = P.bias
    fs = G.fs
    w0sq = 0.0
    for j in range(d):
        w0sq += w[j] * w[j]
    fs[TAU] = 1.0
    fs[B] = w[d]
    fs[W0SQ] = w0sq
    fs[WW] = w0sq
    for i in range(m):
        G.z[i] = O.wx[i]
        G.z0[i] = O.wx[i] - beta * w[d]
        G.c[i] = 0.0


# --- value and gradient -----------------------------------------------------------------

@njit(cache=True, nogil=True)
def _reg(P, ww, b):
    acc = 0.5 * ww
    if P.regularize_bias:
        acc += 0.5 * b * b
    return acc


@njit(cache=True, nogil=True)
def value(P, O, G, m):
    """f at the current point, from its scores z and the tracked ||w_f||^2."""
    acc = 0.0
    y = O.y
    cp = O.fst[erm.COST_POS]
    cn = O.fst[erm.COST_NEG]
    for i in range(m):
        mi = y[i] * G.z[i]
        acc += (cp if y[i] > 0 else cn) * losses.value(P.loss, mi)
    return acc + _reg(P, G.fs[WW], G.fs[B])


@njit(cache=True, nogil=True)
def gradient(P, O, G, m):
    """gamma_i = c_i phi'(m_i) y_i, the curvatures D_i = c_i phi''(m_i) and the rows with
    D_i > 0 (``act``) at the current point; returns ||grad f||^2 computed in the span:
    ||w_f + X^T gamma||^2 = ||w_f||^2 + 2 gamma.(X w_f) + gamma K gamma, plus the bias
    part (r_b w_b + beta sum gamma)^2.  The terms cancel near the solution: their size
    goes to fs[G2SCALE], and a value within rounding of it is to be confirmed on the
    explicit vector (:func:`exact_gradient_norm`)."""
    y = O.y
    cp = O.fst[erm.COST_POS]
    cn = O.fst[erm.COST_NEG]
    beta = P.bias
    fs = G.fs
    K = G.K
    na = 0
    gsum = 0.0
    gxw = 0.0
    for i in range(m):
        c = cp if y[i] > 0 else cn
        g1, g2 = losses.derivatives(P.loss, y[i] * G.z[i])
        gam = c * g1 * y[i]
        G.gam[i] = gam
        G.D[i] = c * g2
        gsum += gam
        gxw += gam * (G.z[i] - beta * fs[B])
        if c * g2 > 0.0:
            G.act[na] = i
            na += 1
    fs[NACT] = na
    fs[GSUM] = gsum
    # kg = K gamma, a sum of the rows of K with gamma != 0
    kg = G.kg
    for i in range(m):
        kg[i] = 0.0
    for k in range(m):
        gk = G.gam[k]
        if gk == 0.0:
            continue
        _axpy(gk, K, k * m, kg, 0, m)
    gkg = 0.0
    for i in range(m):
        gkg += G.gam[i] * kg[i]
    gb = beta * gsum + (fs[B] if P.regularize_bias else 0.0)
    g2 = fs[WW] + 2.0 * gxw + gkg
    fs[G2SCALE] = fs[WW] + 2.0 * abs(gxw) + abs(gkg)
    return max(g2, 0.0) + gb * gb


@njit(cache=True, nogil=True)
def _add_rows(P, coef, m, out):
    """out[:d] += X^T coef (rows with a zero coefficient skipped)."""
    for i in range(m):
        ci = coef[i]
        if ci == 0.0:
            continue
        for p in range(P.indptr[i], P.indptr[i + 1]):
            out[P.indices[p]] += ci * np.float64(P.data[p])


@njit(cache=True, nogil=True)
def write_weights(P, G, w0, m, w):
    """w = (tau w0_f + X^T c, w_b): the point in the core's layout (O(nnz + columns))."""
    d = P.n_features
    tau = G.fs[TAU]
    for j in range(d):
        w[j] = tau * w0[j]
    _add_rows(P, G.c, m, w)
    w[d] = G.fs[B]


@njit(cache=True, nogil=True)
def exact_gradient_norm(P, G, m, w, g):
    """||grad f|| from the explicit weights w (:func:`write_weights`), with ``gam`` of
    the last :func:`gradient`: no cancellation, O(nnz + columns)."""
    d = P.n_features
    for j in range(d):
        g[j] = w[j]
    _add_rows(P, G.gam, m, g)
    acc = 0.0
    for j in range(d):
        acc += g[j] * g[j]
    gb = P.bias * G.fs[GSUM] + (G.fs[B] if P.regularize_bias else 0.0)
    return math.sqrt(acc + gb * gb)


# --- the Newton direction ---------------------------------------------------------------

@njit(cache=True, nogil=True)
def _factor(G, m, na):
    """U^T U = M = I + D^1/2 K_AA D^1/2 (U upper triangular, row-major, stride na), by
    right-looking elimination: each pivot row updates the rows below it with axpys.
    Returns False if a pivot is not positive (cannot happen in exact arithmetic: M >= I)."""
    U = G.U
    K = G.K
    act = G.act
    sd = G.sd
    for a in range(na):
        sd[a] = math.sqrt(G.D[act[a]])
    for a in range(na):
        base = U64(act[a]) * U64(m)
        ra = U64(a) * U64(na)
        sa = sd[a]
        for b in range(U64(a), U64(na)):
            U[ra + b] = sa * sd[b] * K[base + U64(act[b])]
        U[ra + U64(a)] += 1.0
    for j in range(na):
        rj = j * na
        piv = U[rj + j]
        if not piv > 0.0:
            return False
        piv = math.sqrt(piv)
        U[rj + j] = piv
        inv = 1.0 / piv
        for k in range(U64(rj + j + 1), U64(rj + na)):
            U[k] *= inv
        for i in range(j + 1, na):
            _axpy(-U[rj + i], U, rj + i, U, i * na + i, na - i)
    return True


@njit(cache=True, nogil=True)
def _solve_m(G, na, t1, t2, u1, u2):
    """u = D^1/2 M^-1 D^1/2 t for two right-hand sides at once (positions in ``act``):
    U^T y = D^1/2 t forward by rows of U (axpys), U u = y backward (two dot products
    side by side)."""
    U = G.U
    sd = G.sd
    for a in range(na):
        u1[a] = sd[a] * t1[a]
        u2[a] = sd[a] * t2[a]
    for j in range(na):
        rj = j * na
        p = U[rj + j]
        y1 = u1[j] / p
        y2 = u2[j] / p
        u1[j] = y1
        u2[j] = y2
        _axpy(-y1, U, rj + j + 1, u1, j + 1, na - j - 1)
        _axpy(-y2, U, rj + j + 1, u2, j + 1, na - j - 1)
    for j in range(na - 1, -1, -1):
        rj = j * na
        s1 = u1[j]
        s2 = u2[j]
        ur = U64(rj)
        for k in range(U64(j + 1), U64(na)):
            s1 -= U[ur + k] * u1[k]
            s2 -= U[ur + k] * u2[k]
        p = U[rj + j]
        u1[j] = s1 / p
        u2[j] = s2 / p
    for a in range(na):
        u1[a] *= sd[a]
        u2[a] *= sd[a]


@njit(cache=True, nogil=True)
def direction(P, G, m):
    """The exact Newton direction s = -H^-1 g at the current point (after
    :func:`gradient`) into (fs[TAU_S], cs, fs[S_B]) and its scores xs = X s (bias
    included).  Returns (sTs, wTs, gTs): ||s_f||^2 (the bias part is the caller's
    regulariser's), w_f.s_f and g.s, each O(m) once the scores are known (those cost
    O(|A| m)).  Returns gTs = NaN when the factorisation fails (a pivot not positive:
    impossible in exact arithmetic, M >= I; the caller stops with NUMERICAL).

    With g_f = w_f + X^T gamma and h = beta X_A^T D 1 (the bias column of H):
    x1 = H0^-1 g_f and x2 = H0^-1 h need X_A g_f = (X w_f)_A + (K gamma)_A, known from the
    scores and :func:`gradient`, and X_A h = beta K_AA D_A; then
    s_f = -(x1 + s_b x2), s_b from the Schur complement of the bias."""
    fs = G.fs
    K = G.K
    act = G.act
    beta = P.bias
    na = np.int64(fs[NACT])
    tau = fs[TAU]
    b0 = beta * fs[B]
    if not _factor(G, m, na):
        return 0.0, 0.0, math.nan
    dsum = 0.0
    for a in range(na):
        ia = act[a]
        G.t1[a] = G.z[ia] - b0 + G.kg[ia]
        G.t2[a] = 0.0
        dsum += G.D[ia]
    if beta != 0.0:
        for b in range(na):      # t2 = beta K_AA D_A, by rows of K
            ib = act[b]
            f = beta * G.D[ib]
            base = U64(ib) * U64(m)
            for a in range(U64(na)):
                G.t2[a] += f * K[base + U64(act[a])]
    _solve_m(G, na, G.t1, G.t2, G.u1, G.u2)
    # X_A x = t - K_AA u, so h.x = beta sum_A D (t - K_AA u) = beta D.t - u.t2 (K_AA D = t2 / beta)
    hx1 = 0.0
    hx2 = 0.0
    for a in range(na):
        da = G.D[act[a]]
        hx1 += beta * da * G.t1[a] - G.u1[a] * G.t2[a]
        hx2 += beta * da * G.t2[a] - G.u2[a] * G.t2[a]
    rb = 1.0 if P.regularize_bias else 0.0
    gb = beta * fs[GSUM] + rb * fs[B]
    eta = beta * beta * dsum + rb
    schur = eta - hx2
    if schur > 1e-12 * max(eta, 1.0):
        sb = (hx1 - gb) / schur       # with beta = 0: -w_b if the bias is regularised
    elif gb != 0.0:
        # no curvature on the bias (an unregularised bias and no active row): a gradient
        # step for it, so that the direction still descends
        sb = -gb / max(eta, 1.0)
    else:
        sb = 0.0
    # s_f = -(x1 + sb x2): tau_s = -tau, cs = -(c + gamma) + v on A, v = u1 - sb (beta D - u2);
    # X s_f = -tau z0 - K (c + gamma) + K_:A v = -(X w_f) - K gamma + K_:A v
    for i in range(m):
        G.cs[i] = -(G.c[i] + G.gam[i])
        G.xs[i] = -(G.z[i] - b0) - G.kg[i]
    for a in range(na):
        ia = act[a]
        v = G.u1[a] - sb * (beta * G.D[ia] - G.u2[a])
        G.cs[ia] += v
        _axpy(v, K, ia * m, G.xs, 0, m)
    taus = -tau
    fs[TAU_S] = taus
    fs[S_B] = sb
    z0cs = 0.0
    for i in range(m):
        z0cs += G.z0[i] * G.cs[i]
    w0s = taus * fs[W0SQ] + z0cs      # w0_f . s_f
    sTs = taus * w0s
    wTs = tau * w0s
    gTs = 0.0
    for i in range(m):
        sTs += G.cs[i] * G.xs[i]
        wTs += G.c[i] * G.xs[i]
        gTs += G.gam[i] * G.xs[i]
    gTs += wTs + gb * sb
    for i in range(m):
        G.xs[i] += beta * sb
    return sTs, wTs, gTs


# --- line search and step -----------------------------------------------------------------

@njit(cache=True, nogil=True)
def line_search(P, O, G, m, sTs, wTs, gTs, f, eta, max_steps):
    """LIBLINEAR's backtracking Armijo search along the direction (alpha = 1, 1/2, ...;
    accept f(w + alpha s) - f <= eta alpha g.s), each trial O(m).  Returns (alpha, f_new),
    (0, f) after ``max_steps`` failures."""
    y = O.y
    cp = O.fst[erm.COST_POS]
    cn = O.fst[erm.COST_NEG]
    fs = G.fs
    ww = fs[WW]
    b = fs[B]
    sb = fs[S_B]
    alpha = 1.0
    for _ in range(max_steps):
        acc = 0.0
        for i in range(m):
            mi = y[i] * (G.z[i] + alpha * G.xs[i])
            acc += (cp if y[i] > 0 else cn) * losses.value(P.loss, mi)
        f_new = acc + _reg(P, ww + alpha * (2.0 * wTs + alpha * sTs), b + alpha * sb)
        if f_new - f <= eta * alpha * gTs:
            return alpha, f_new
        alpha *= 0.5
    return 0.0, f


@njit(cache=True, nogil=True)
def step(G, m, alpha, sTs, wTs):
    """Move to w + alpha s: tau, c, the bias weight, the scores and ||w_f||^2."""
    fs = G.fs
    fs[TAU] += alpha * fs[TAU_S]
    fs[B] += alpha * fs[S_B]
    fs[WW] += alpha * (2.0 * wTs + alpha * sTs)
    for i in range(m):
        G.c[i] += alpha * G.cs[i]
        G.z[i] += alpha * G.xs[i]
