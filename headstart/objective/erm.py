"""The L2-regularised empirical risk of one binary problem,

    f(w) = 0.5 * ||w_r||^2 + C * sum_i phi(y_i * (x_i . w[:d] + bias * w[d]))

where ``w_r`` is ``w`` without the bias weight unless ``regularize_bias`` (LIBLINEAR's
``-B 1`` regularises it; the paper's implementation does not).  The bias is a virtual
feature: it is never stored in X, the kernels add ``bias * w[d]`` instead.

Like LIBLINEAR's ``l2r_erm_fun`` this module answers the solver's questions -- value,
gradient, Hessian-vector product, diagonal preconditioner, line search -- and keeps
the caching contract explicit:

* ``wx`` (the scores X w) is owned by the caller and kept current by
  :func:`update_and_grad_on_support`, so the value never needs a pass over X;
* :func:`grad_on_support` computes the active set ``act``, per-instance coefficients
  ``gcoef``/``hcoef`` and the support F of the active rows; the Hessian product and
  the preconditioner reuse them, so they touch only the active rows (for the squared
  hinge: the instances with margin < 1, the paper's implicit negative mining) and
  only the coordinates in F -- outside F the objective is the bare regulariser;
* a line-search trial costs O(n): X s is computed once per search, in the split form
  X s = sigma * X w + X delta with delta = s - sigma * w zero outside F (the solver
  carries s as sigma * w there), so the vector the pass over X reads changes only on F.

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
    acc = 0.0
    if losses.has_hinge(P.loss):
        # only margins < 1 add anything; see _trial_loss_sum
        for i in range(wx.size):
            m = y[i] * wx[i]
            if m < 1.0:
                acc += losses.value(P.loss, m)
    else:
        for i in range(wx.size):
            acc += losses.value(P.loss, y[i] * wx[i])
    return P.C * acc


@nb.njit(cache=True, nogil=True, inline="always")
def _trial_loss_sum(P, y, wx, xd, sigma, alpha):
    """sum_i phi(y_i * (wx_i + alpha * (sigma * wx_i + xd_i))): the loss at w + alpha s
    with X s = sigma * wx + xd, the O(n) work of a line-search trial.

    For the squared hinge only the instances with margin < 1 add anything; skipping the
    others (instead of adding 0.0) takes them out of the chain of dependent additions,
    which otherwise sets the pace of this loop (one add latency per instance).  Adding
    0.0 to a non-negative sum is exact, so the value is the same either way."""
    acc = 0.0
    n = wx.size
    if losses.has_hinge(P.loss):
        for i in range(n):
            m = y[i] * (wx[i] + alpha * (sigma * wx[i] + xd[i]))
            if m < 1.0:
                acc += losses.value(P.loss, m)
    else:
        for i in range(n):
            acc += losses.value(P.loss, y[i] * (wx[i] + alpha * (sigma * wx[i] + xd[i])))
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

    ``F[:nF]`` lists the support: every feature of an active row (ascending), then the
    bias index d.  Only g[F] is written.  Outside F the objective is the bare L2 term --
    gradient w, Hessian I, diag(H) = 1 -- which the solver exploits by carrying vectors
    there as multiples of w; their size enters through the returned ||w_O||^2.
    ``mark`` is a per-workspace int array and ``stamp`` a value never used before with
    it, so that nothing needs clearing.
    """
    nact = _active_set(P, y, wx, act, gcoef, hcoef, wx, 0.0, 0.0, False)
    nF, wout2 = _support_and_grad(P, w, g, act, nact, gcoef, F, mark, stamp, _sumsq(w, P.n_features))
    return nact, nF, wout2


@nb.njit(cache=True, nogil=True)
def update_and_grad_on_support(P, y, w, wx, xd, s, sigma, alpha, g, act, gcoef, hcoef, F, mark, old, stamp):
    """Take the step w += alpha * s and compute the new gradient on the new support, in
    as few passes over memory as possible (this runs once per Newton iteration and is,
    with the pass over X, what a tail label's iteration costs).

    The direction is in the solver's split form: ``s`` holds it on the current support
    (features marked ``old``, plus the bias) and equals ``sigma * w`` elsewhere, and
    ``xd = X delta`` for ``delta = s - sigma * w`` (zero outside the support), so that
    X s = sigma * wx + xd.  Scores are updated as in :func:`linesearch`, bit for bit.
    Returns (nact, nF, ||w_O||^2) like :func:`grad_on_support`, with ``stamp`` new.
    """
    d = P.n_features
    # w in one pass, also summing the squares of the new weights (4 chains, see _sumsq)
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    d4 = d - d % 4
    for j in range(0, d4, 4):
        # s_j on the support, sigma * w_j elsewhere (written out as selects: vectorisable)
        v0 = w[j] + alpha * (s[j] if mark[j] == old else sigma * w[j])
        v1 = w[j + 1] + alpha * (s[j + 1] if mark[j + 1] == old else sigma * w[j + 1])
        v2 = w[j + 2] + alpha * (s[j + 2] if mark[j + 2] == old else sigma * w[j + 2])
        v3 = w[j + 3] + alpha * (s[j + 3] if mark[j + 3] == old else sigma * w[j + 3])
        w[j] = v0
        w[j + 1] = v1
        w[j + 2] = v2
        w[j + 3] = v3
        a0 += v0 * v0
        a1 += v1 * v1
        a2 += v2 * v2
        a3 += v3 * v3
    for j in range(d4, d):
        v0 = w[j] + alpha * (s[j] if mark[j] == old else sigma * w[j])
        w[j] = v0
        a0 += v0 * v0
    w[d] += alpha * s[d]
    wsq = (a0 + a1) + (a2 + a3)
    # scores and the new active set in one pass over the instances
    nact = _active_set(P, y, wx, act, gcoef, hcoef, xd, sigma, alpha, True)
    nF, wout2 = _support_and_grad(P, w, g, act, nact, gcoef, F, mark, stamp, wsq)
    return nact, nF, wout2


@nb.njit(cache=True, nogil=True, inline="always")
def _active_set(P, y, wx, act, gcoef, hcoef, xd, sigma, alpha, step):
    """Active set with its coefficients; with ``step`` the scores first move to
    wx + alpha * (sigma * wx + xd) (the accepted line-search step, as in
    :func:`linesearch`), in the same pass."""
    n = wx.size
    hinge = losses.has_hinge(P.loss)
    nact = 0
    for i in range(n):
        if step:
            wx[i] = wx[i] + alpha * (sigma * wx[i] + xd[i])
        m = y[i] * wx[i]
        if hinge and m >= 1.0:
            continue
        act[nact] = i
        gcoef[nact] = P.C * losses.d1(P.loss, m) * y[i]
        hcoef[nact] = P.C * losses.d2(P.loss, m)
        nact += 1
    return nact


@nb.njit(cache=True, nogil=True, inline="always")
def _sumsq(w, d):
    """sum of w[:d]^2 in four interleaved partial sums: a single running sum makes every
    feature wait for the previous addition (~4 cycles each); four chains overlap."""
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    d4 = d - d % 4
    for j in range(0, d4, 4):
        a0 += w[j] * w[j]
        a1 += w[j + 1] * w[j + 1]
        a2 += w[j + 2] * w[j + 2]
        a3 += w[j + 3] * w[j + 3]
    for j in range(d4, d):
        a0 += w[j] * w[j]
    return (a0 + a1) + (a2 + a3)


# Above 1/SWEEP_SHARE of the features a support is listed by one ordered sweep over the
# marks; below it the features met in the active rows are sorted instead (tail labels
# with a good start: a few hundred features, so no O(features) pass at all).
SWEEP_SHARE = 64


@nb.njit(cache=True, nogil=True, inline="always")
def _support_and_grad(P, w, g, act, nact, gcoef, F, mark, stamp, wsq):
    """Support F (ascending, then the bias index d), g on F, and ||w_O||^2 = wsq - ||w_F||^2
    with wsq = ||w[:d]||^2 (the difference loses only absolute accuracy of order
    eps * ||w||^2, negligible wherever ||w_O||^2 enters the solver)."""
    d = P.n_features
    nF = 0
    for k in range(nact):
        i = act[k]
        for p in range(P.indptr[i], P.indptr[i + 1]):
            j = P.indices[p]
            if mark[j] != stamp:
                mark[j] = stamp
                F[nF] = j
                nF += 1
    if nF * SWEEP_SHARE > d:
        # ascending order keeps the CG loops streaming through memory when F is large
        nF = 0
        for j in range(d):
            if mark[j] == stamp:
                F[nF] = j
                nF += 1
    else:
        F[:nF].sort()
    wF2 = 0.0
    for q in range(nF):
        j = F[q]
        g[j] = w[j]
        wF2 += w[j] * w[j]
    wout2 = max(wsq - wF2, 0.0)
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
    return nF, wout2


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
def linesearch(P, y, wx, xd, sigma, gTs, f, eta, max_steps, sTs, wTs, wTw):
    """Backtracking Armijo search on w + alpha s, alpha = 1, 1/2, 1/4, ...

    Accepts the first alpha with f(w + alpha s) - f(w) <= eta * alpha * g.s
    (LIBLINEAR l2r_erm_fun::linesearch_and_update) and returns (alpha, f_new), or
    (0, f) after ``max_steps`` failed trials.  Every trial is O(n): the scores of the
    direction come as X s = sigma * wx + xd (xd = X delta, computed once per search,
    possibly for several labels in one sweep over X; see
    :func:`update_and_grad_on_support`, which then takes the step), the regulariser as
    sTs = s.s, wTs = w.s, wTw = w.w over the regularised coordinates
    (:func:`reg_dots_on_support`), and gTs = g.s.
    """
    alpha = 1.0
    for _ in range(max_steps):
        acc = _trial_loss_sum(P, y, wx, xd, sigma, alpha)
        f_new = P.C * acc + 0.5 * (wTw + alpha * (2.0 * wTs + alpha * sTs))
        if f_new - f <= eta * alpha * gTs:
            return alpha, f_new
        alpha *= 0.5
    return 0.0, f
