"""The L2-regularised empirical risk of one binary problem,

    f(w) = 0.5 * ||w_r||^2 + C * sum_i phi(y_i * (x_i . w[:d] + bias * w[d]))

where ``w_r`` is ``w`` without the bias weight unless ``regularize_bias`` (LIBLINEAR's
``-B 1`` regularises it; the paper's implementation does not).  The bias is a virtual
feature: it is never stored in X, the kernels add ``bias * w[d]`` instead.

Like LIBLINEAR's ``l2r_erm_fun`` this module answers the solver's questions -- value,
gradient, Hessian-vector product, diagonal preconditioner, line search -- and keeps
the caching contract explicit:

* ``wx`` (the scores X w) is owned by the caller and kept current by
  :func:`linesearch_and_update`, so the value never needs a pass over X;
* :func:`grad_on_support` computes the active set ``act``, per-instance coefficients
  ``gcoef``/``hcoef`` and the support F of the active rows; the Hessian product and
  the preconditioner reuse them, so they touch only the active rows (for the squared
  hinge: the instances with margin < 1, the paper's implicit negative mining) and
  only the coordinates in F -- outside F the objective is the bare regulariser;
* a line-search trial costs O(n): X s is computed once per search.

All functions are numba kernels over plain arrays; the solver calls them directly.
"""

from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from . import losses

# X in CSR (float32 data, int32 indices) plus the scalars that define the objective.
Problem = namedtuple("Problem", ["indptr", "indices", "data", "n_features", "bias", "C", "loss",
                                 "regularize_bias"])


def make_problem(X, bias: float, C: float, loss: str, regularize_bias: bool) -> Problem:
    """Wrap a canonical CSR matrix (float32 data, int32 indices) for the kernels."""
    return Problem(X.indptr.astype(np.int64, copy=False), X.indices.astype(np.int32, copy=False),
                   X.data.astype(np.float32, copy=False), np.int64(X.shape[1]), np.float64(bias),
                   np.float64(C), np.int64(losses.LOSS_CODES[loss]), bool(regularize_bias))


@nb.njit(cache=True, nogil=True)
def scores(P, w, out):
    """out = X w (+ bias * w[d]) over all instances: the one O(nnz) pass."""
    n = P.indptr.size - 1
    d = P.n_features
    wb = P.bias * w[d]
    for i in range(n):
        acc = 0.0
        for k in range(P.indptr[i], P.indptr[i + 1]):
            acc += P.data[k] * w[P.indices[k]]
        out[i] = acc + wb


@nb.njit(cache=True, nogil=True)
def reg_dot(P, a, b):
    """<a, b> restricted to the regularised coordinates."""
    d = P.n_features
    acc = 0.0
    for j in range(d):
        acc += a[j] * b[j]
    if P.regularize_bias:
        acc += a[d] * b[d]
    return acc


@nb.njit(cache=True, nogil=True)
def loss_sum(P, y, wx):
    """C * sum_i phi(y_i * wx_i)."""
    return P.C * _loss_sum_at(P, y, wx, wx, 0.0)


@nb.njit(cache=True, nogil=True, inline="always")
def _loss_sum_at(P, y, wx, xs, alpha):
    """sum_i phi(y_i * (wx_i + alpha * xs_i)), the O(n) work of every line-search trial.

    For the squared hinge only the instances with margin < 1 add anything; skipping the
    others (instead of adding 0.0) takes them out of the chain of dependent additions,
    which otherwise sets the pace of this loop (one add latency per instance).  Adding
    0.0 to a non-negative sum is exact, so the value is bit-identical either way."""
    acc = 0.0
    n = wx.size
    if losses.has_hinge(P.loss):
        for i in range(n):
            m = y[i] * (wx[i] + alpha * xs[i])
            if m < 1.0:
                acc += losses.value(P.loss, m)
    else:
        for i in range(n):
            acc += losses.value(P.loss, y[i] * (wx[i] + alpha * xs[i]))
    return acc


@nb.njit(cache=True, nogil=True)
def fun(P, y, w, wx):
    """Objective value from the cached scores wx (no pass over X)."""
    return 0.5 * reg_dot(P, w, w) + loss_sum(P, y, wx)


@nb.njit(cache=True, nogil=True)
def grad_on_support(P, y, w, wx, g, act, gcoef, hcoef, F, mark, stamp):
    """Gradient on the support of the active rows; returns (nact, nF, ||w_O||^2).

    The active set goes to ``act[:nact]`` with the gradient coefficient
    ``gcoef = C phi'(m) y`` and Hessian weight ``hcoef = C phi''(m)`` of each active
    instance, kept for the Hessian products of this Newton iteration (LIBLINEAR
    l2r_l2_svc_fun::grad keeps its index set I the same way).

    ``F[:nF]`` lists the support: every feature of an active row, then the bias index
    d.  Only g[F] is written.  Outside F the objective is the bare L2 term -- gradient
    w, Hessian I, diag(H) = 1 -- which the solver exploits by carrying vectors there
    as multiples of w; their size enters through the returned ||w_O||^2.  ``mark`` is
    a per-workspace int array and ``stamp`` a value never used before with it, so that
    nothing needs clearing; F is collected in one O(features) sweep, in ascending order.
    """
    n = wx.size
    d = P.n_features
    hinge = losses.has_hinge(P.loss)
    nact = 0
    for i in range(n):
        m = y[i] * wx[i]
        if hinge and m >= 1.0:
            continue
        act[nact] = i
        gcoef[nact] = P.C * losses.d1(P.loss, m) * y[i]
        hcoef[nact] = P.C * losses.d2(P.loss, m)
        nact += 1
    for k in range(nact):
        i = act[k]
        for p in range(P.indptr[i], P.indptr[i + 1]):
            mark[P.indices[p]] = stamp
    # one ordered sweep: F ascending keeps the CG loops cache-friendly when F is large
    nF = 0
    for j in range(d):
        if mark[j] == stamp:
            F[nF] = j
            g[j] = w[j]
            nF += 1
    wout2 = _sumsq_unmarked(w, mark, stamp, d)
    mark[d] = stamp
    F[nF] = d
    nF += 1
    g[d] = w[d] if P.regularize_bias else 0.0
    gb = 0.0
    for k in range(nact):
        i = act[k]
        c = gcoef[k]
        for p in range(P.indptr[i], P.indptr[i + 1]):
            g[P.indices[p]] += c * P.data[p]
        gb += c
    g[d] += gb * P.bias
    return nact, nF, wout2


@nb.njit(cache=True, nogil=True, inline="always")
def _sumsq_unmarked(w, mark, stamp, d):
    """sum of w[j]^2 over j < d with mark[j] != stamp, in four interleaved partial sums:
    one running sum would make every feature wait for the previous addition (~4 cycles
    each, ~30 us per call on 22k features); four chains run in parallel."""
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    d4 = d - d % 4
    for j in range(0, d4, 4):
        v0 = w[j] if mark[j] != stamp else 0.0
        v1 = w[j + 1] if mark[j + 1] != stamp else 0.0
        v2 = w[j + 2] if mark[j + 2] != stamp else 0.0
        v3 = w[j + 3] if mark[j + 3] != stamp else 0.0
        a0 += v0 * v0
        a1 += v1 * v1
        a2 += v2 * v2
        a3 += v3 * v3
    for j in range(d4, d):
        if mark[j] != stamp:
            a0 += w[j] * w[j]
    return (a0 + a1) + (a2 + a3)


@nb.njit(cache=True, nogil=True)
def hess_vec_on_support(P, act, nact, hcoef, v, out, F, nF):
    """out[F] = (H v)[F] = v_r + sum_{i active} C phi''(m_i) (x_i . v) x_i on the support
    F of the active rows (outside it H = I, handled by the caller)."""
    d = P.n_features
    for q in range(nF):
        j = F[q]
        out[j] = v[j]
    out[d] = v[d] if P.regularize_bias else 0.0
    vb = P.bias * v[d]
    ob = 0.0
    for k in range(nact):
        i = act[k]
        lo = P.indptr[i]
        hi = P.indptr[i + 1]
        dot = vb
        for p in range(lo, hi):
            dot += P.data[p] * v[P.indices[p]]
        c = hcoef[k] * dot
        if c != 0.0:
            for p in range(lo, hi):
                out[P.indices[p]] += c * P.data[p]
            ob += c
    out[d] += ob * P.bias


@nb.njit(cache=True, nogil=True)
def diag_precond_on_support(P, act, nact, hcoef, M, F, nF):
    """M[F] = diag(H)[F] = 1_r + sum_{i active} C phi''(m_i) x_i^2 (LIBLINEAR
    get_diag_preconditioner); outside F diag(H) = 1."""
    d = P.n_features
    for q in range(nF):
        M[F[q]] = 1.0
    M[d] = 1.0 if P.regularize_bias else 0.0
    mb = 0.0
    for k in range(nact):
        i = act[k]
        c = hcoef[k]
        for p in range(P.indptr[i], P.indptr[i + 1]):
            x = P.data[p]
            M[P.indices[p]] += c * x * x
        mb += c
    M[d] += mb * P.bias * P.bias


# --- dense forms: the same quantities on all coordinates (reference and tests) -------

@nb.njit(cache=True, nogil=True)
def _support(P, act, nact):
    nv = P.n_features + 1
    F = np.empty(nv, dtype=np.int64)
    mark = np.zeros(nv, dtype=np.int64)
    nF = 0
    for k in range(nact):
        i = act[k]
        for p in range(P.indptr[i], P.indptr[i + 1]):
            j = P.indices[p]
            if mark[j] == 0:
                mark[j] = 1
                F[nF] = j
                nF += 1
    F[nF] = nv - 1
    return F, nF + 1, mark


@nb.njit(cache=True, nogil=True)
def grad(P, y, w, wx, g, act, gcoef, hcoef):
    """g = grad f(w) on every coordinate; returns the size of the active set."""
    nv = w.size
    F = np.empty(nv, dtype=np.int64)
    mark = np.zeros(nv, dtype=np.int64)
    nact, nF, _ = grad_on_support(P, y, w, wx, g, act, gcoef, hcoef, F, mark, 1)
    for j in range(nv - 1):
        if mark[j] != 1:
            g[j] = w[j]
    return nact


@nb.njit(cache=True, nogil=True)
def hess_vec(P, act, nact, hcoef, v, out):
    """out = H v on every coordinate."""
    F, nF, mark = _support(P, act, nact)
    hess_vec_on_support(P, act, nact, hcoef, v, out, F, nF)
    for j in range(v.size - 1):
        if mark[j] == 0:
            out[j] = v[j]


@nb.njit(cache=True, nogil=True)
def diag_precond(P, act, nact, hcoef, M):
    """M = diag(H) on every coordinate."""
    F, nF, mark = _support(P, act, nact)
    diag_precond_on_support(P, act, nact, hcoef, M, F, nF)
    for j in range(M.size - 1):
        if mark[j] == 0:
            M[j] = 1.0


@nb.njit(cache=True, nogil=True)
def reg_dots_on_support(P, w, s, F, nF, wout2, sigma):
    """(s.s, w.s, w.w) over the regularised coordinates, for s = sigma * w outside the
    support F (as :func:`headstart.solver.cg.pcg` leaves it) and ||w_O||^2 = wout2:
    O(|F|) instead of three passes over all features."""
    d = P.n_features
    sTs = sigma * sigma * wout2
    wTs = sigma * wout2
    wTw = wout2
    for q in range(nF):
        j = F[q]
        if j == d and not P.regularize_bias:
            continue
        sTs += s[j] * s[j]
        wTs += w[j] * s[j]
        wTw += w[j] * w[j]
    return sTs, wTs, wTw


@nb.njit(cache=True, nogil=True)
def reg_dots(P, w, s):
    """(s.s, w.s, w.w) over the regularised coordinates, all of them."""
    d = P.n_features
    sTs = 0.0
    wTs = 0.0
    wTw = 0.0
    for j in range(d):
        sTs += s[j] * s[j]
        wTs += w[j] * s[j]
        wTw += w[j] * w[j]
    if P.regularize_bias:
        sTs += s[d] * s[d]
        wTs += w[d] * s[d]
        wTw += w[d] * w[d]
    return sTs, wTs, wTw


@nb.njit(cache=True, nogil=True)
def linesearch_and_update(P, y, w, wx, xs, s, gTs, f, eta, max_steps, sTs, wTs, wTw):
    """Backtracking Armijo search on w + alpha s, alpha = 1, 1/2, 1/4, ...

    Accepts the first alpha with f(w + alpha s) - f(w) <= eta * alpha * g.s
    (LIBLINEAR l2r_erm_fun::linesearch_and_update).  The caller provides xs = X s
    (computed once per search, possibly for several labels in one sweep over X) and
    gTs = g.s, so every trial is O(n).  On success updates w and wx in place and
    returns (alpha, f_new); after ``max_steps`` failed trials returns (0, f), w unchanged.
    The regulariser enters through sTs = s.s, wTs = w.s, wTw = w.w (regularised
    coordinates; :func:`reg_dots_on_support` or :func:`reg_dots`).
    """
    alpha = 1.0
    n = wx.size
    for _ in range(max_steps):
        acc = _loss_sum_at(P, y, wx, xs, alpha)
        f_new = P.C * acc + 0.5 * (wTw + alpha * (2.0 * wTs + alpha * sTs))
        if f_new - f <= eta * alpha * gTs:
            for i in range(n):
                wx[i] += alpha * xs[i]
            for j in range(w.size):
                w[j] += alpha * s[j]
            return alpha, f_new
        alpha *= 0.5
    return 0.0, f
