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
* :func:`grad` computes the active set ``act`` and per-instance coefficients
  ``gcoef``/``hcoef``; :func:`hess_vec` and :func:`diag_precond` reuse them, so a
  Hessian product touches only the active rows (for the squared hinge: the instances
  with margin < 1, the paper's implicit negative mining);
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
    acc = 0.0
    for i in range(wx.size):
        acc += losses.value(P.loss, y[i] * wx[i])
    return P.C * acc


@nb.njit(cache=True, nogil=True)
def fun(P, y, w, wx):
    """Objective value from the cached scores wx (no pass over X)."""
    return 0.5 * reg_dot(P, w, w) + loss_sum(P, y, wx)


@nb.njit(cache=True, nogil=True)
def grad(P, y, w, wx, g, act, gcoef, hcoef):
    """g = w_r + X^T (C * phi'(m) * y) over the active set; returns its size.

    Stores the active instances in ``act[:nact]`` with their gradient coefficient
    ``gcoef = C phi'(m) y`` and Hessian weight ``hcoef = C phi''(m)`` for the Hessian
    products of this Newton iteration (LIBLINEAR l2r_l2_svc_fun::grad keeps I the same way).
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
    for j in range(d):
        g[j] = w[j]
    g[d] = w[d] if P.regularize_bias else 0.0
    gb = 0.0
    for k in range(nact):
        i = act[k]
        c = gcoef[k]
        for p in range(P.indptr[i], P.indptr[i + 1]):
            g[P.indices[p]] += c * P.data[p]
        gb += c
    g[d] += gb * P.bias
    return nact


@nb.njit(cache=True, nogil=True)
def hess_vec(P, act, nact, hcoef, v, out):
    """out = H v = v_r + sum_{i in active} C phi''(m_i) (x_i . v) x_i."""
    d = P.n_features
    for j in range(d):
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
def diag_precond(P, act, nact, hcoef, M):
    """M = diag(H) = 1_r + sum_{i in active} C phi''(m_i) x_i^2 (LIBLINEAR get_diag_preconditioner)."""
    d = P.n_features
    for j in range(d):
        M[j] = 1.0
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


@nb.njit(cache=True, nogil=True)
def linesearch_and_update(P, y, w, wx, xs, s, g, f, eta, max_steps):
    """Backtracking Armijo search on w + alpha s, alpha = 1, 1/2, 1/4, ...

    Accepts the first alpha with f(w + alpha s) - f(w) <= eta * alpha * g.s
    (LIBLINEAR l2r_erm_fun::linesearch_and_update).  The caller provides xs = X s
    (computed once per search, possibly for several labels in one sweep over X), so
    every trial is O(n).  On success updates w and wx in place and returns
    (alpha, f_new); after ``max_steps`` failed trials returns (0, f), w unchanged.
    """
    sTs = reg_dot(P, s, s)
    wTs = reg_dot(P, w, s)
    wTw = reg_dot(P, w, w)
    gTs = 0.0
    for j in range(s.size):
        gTs += g[j] * s[j]
    alpha = 1.0
    n = wx.size
    for _ in range(max_steps):
        acc = 0.0
        for i in range(n):
            acc += losses.value(P.loss, y[i] * (wx[i] + alpha * xs[i]))
        f_new = P.C * acc + 0.5 * (wTw + alpha * (2.0 * wTs + alpha * sTs))
        if f_new - f <= eta * alpha * gTs:
            for i in range(n):
                wx[i] += alpha * xs[i]
            for j in range(w.size):
                w[j] += alpha * s[j]
            return alpha, f_new
        alpha *= 0.5
    return 0.0, f
