"""Newton's method with exact steps, for problems with few rows.

The same outer method as :mod:`.newton` -- a Newton direction, LIBLINEAR's backtracking
Armijo line search, the same stopping tests (:func:`.newton.conclude`: the gradient
test ||grad f(w)|| <= tol first) -- with the direction solved exactly instead of by
truncated PCG.  The objective (:mod:`headstart.objective.rowspan`) works in the span of
the problem's rows, where a direct solve costs O(active^3 / 6) and every other
operation O(rows^2); the columns enter only through the Gram matrix, formed once, and
the O(nnz + columns) writes of the explicit weights (at the end, and where a gradient
norm is confirmed).  For a sub-problem of a
few dozen rows and thousands of columns that is much less than the truncated method's
O(columns) vector loops (shortlisted training of tail labels, docs/shortlist.md).

The gradient test is evaluated in the span, where the terms of ||g||^2 cancel near the
solution; a point that passes it is confirmed on the explicit weights before the solver
stops there (:func:`headstart.objective.rowspan.exact_gradient_norm`).
"""

from __future__ import annotations

import math

import numpy as np

from .._compile import njit
from ..objective import rowspan
from .newton import NUMERICAL, RUNNING, conclude, start_status, worse_than_zero, zero_start


@njit(cache=True, nogil=True)
def _gnorm(P, O, G, m, w0, w, g, tol):
    """||grad f|| at the current point: the span's value (:func:`rowspan.gradient`), unless
    it could pass the test tol -- below 2 tol, or within rounding of the size of its
    terms, which cancel near the solution -- then the explicit one (the weights and the
    gradient are written into w / g as a side effect)."""
    g2 = rowspan.gradient(P, O, G, m)
    gn = math.sqrt(g2)
    if g2 <= 4.0 * tol * tol + 1e-12 * G.fs[rowspan.G2SCALE]:
        rowspan.write_weights(P, G, w0, m, w)
        gn = rowspan.exact_gradient_norm(P, G, m, w, g)
    return gn


@njit(cache=True, nogil=True)
def newton(P, O, G, S, tol, w, w0, g, m):
    """Minimise the objective from the start in ``w`` (features then bias weight, O.wx =
    X w current) over the m rows of P, with the settings S of :mod:`.newton`.

    ``w0`` and ``g`` are scratch of the size of w (w0 receives the start).  On return w
    holds the solution and O.wx its scores.  Returns (status, iterations, f_initial,
    f_final, ||g_initial||, ||g_final||)."""
    nv = w.size
    rowspan.gram(P, G, m)
    rowspan.start(P, O, G, w, m)
    f = rowspan.value(P, O, G, m)
    if worse_than_zero(P, O, f):    # as the truncated method's start (newton.zero_if_worse)
        zero_start(O, w)
        rowspan.start(P, O, G, w, m)
        f = rowspan.value(P, O, G, m)
    for j in range(nv):
        w0[j] = w[j]
    gnorm = _gnorm(P, O, G, m, w0, w, g, tol)
    f_init = f
    g_init = gnorm
    status = start_status(f, gnorm, tol)
    it = 0
    empty = np.zeros(0)
    empty_int = np.zeros(0, dtype=np.int64)
    while status == RUNNING:
        it += 1
        sTs, wTs, gTs = rowspan.direction(P, G, m)
        if not math.isfinite(gTs):
            status = NUMERICAL     # the factorisation failed (see rowspan.direction)
            break
        fold = f
        alpha = 0.0
        if gTs < 0.0:
            alpha, f = rowspan.line_search(P, O, G, m, sTs, wTs, gTs, f, S.ls_eta, S.ls_max_steps)
        if alpha != 0.0:
            rowspan.step(G, m, alpha, sTs, wTs)
            gnorm = _gnorm(P, O, G, m, w0, w, g, tol)
        status, f, gnorm = conclude(S, it, fold, f, gnorm, tol, alpha, 0.0, 0, empty, empty, empty, empty_int)
    rowspan.write_weights(P, G, w0, m, w)
    for i in range(m):
        O.wx[i] = G.z[i]
    return status, it, f_init, f, g_init, gnorm
