"""LIBLINEAR's primal Newton method with line search (newton.cpp, v2.40+;
Galli & Lin, "A study on truncated Newton methods for linear classification", 2021).

One iteration: diagonal preconditioner mixed as (1 - alpha) + alpha * diag(H), a
truncated PCG step (:mod:`.cg`), a backtracking Armijo line search, a new gradient.
It stops when ||grad f(w)|| <= tol, where the caller passes
tol = epsilon * max(min(#pos, #neg), 1) / n * ||grad f(0)|| -- relative to the gradient
at w = 0 whatever the starting point, so every initialisation meets the same bar.

The solver only asks the objective (:mod:`headstart.objective.erm`) its questions; it
never touches X or the loss itself.  The iteration is split into phases --
:func:`start`, :func:`direction`, :func:`advance` -- around the one O(nnz) product
X s the line search needs, so that a scheduler can compute that product for several
labels in one sweep over X (:mod:`headstart.training.kernel`); :func:`newton` strings
the phases together for a single problem.  Per-iteration statistics go into the
caller's record arrays (the paper's figures are built from them).
"""

from __future__ import annotations

import math
import time
import warnings
from collections import namedtuple

import numba as nb
import numpy as np

from ..objective import erm
from .cg import pcg

# Status codes, also used in the training statistics.
RUNNING = -1
CONVERGED = 0
MAX_ITER = 1
LINE_SEARCH_FAILED = 2
NO_PROGRESS = 3      # |f_old - f| <= 1e-12 |f| (LIBLINEAR "actred too small")
NUMERICAL = 4        # non-finite objective
STATUS_NAMES = ("converged", "max_iter", "line_search_failed", "no_progress", "numerical")

# Buffers of one problem, reused for every label trained in them.  ``delta`` holds
# s - sigma * w on the support and zeros elsewhere (see :func:`write_delta`); the lane
# scheduler keeps that vector in its shared sweep buffer instead and gives lanes a
# 1-element ``delta``.
Workspace = namedtuple("Workspace", ["w", "g", "s", "r", "d", "z", "Hd", "M",
                                     "wx", "xs", "act", "gcoef", "hcoef", "y",
                                     "F", "mark", "stamp", "delta"])

# Settings of the solver (from TrainParams).
Settings = namedtuple("Settings", ["max_iter", "eps_cg", "pcg_alpha", "ls_eta", "ls_max_steps"])

# dtypes of the index buffers: instance and feature indices fit int32 (X is validated
# to int32 indices), labels are +-1.  Narrow types matter: a lane's O(n) and O(d)
# passes stream these arrays once or twice per Newton iteration.
ACT_DTYPE = np.int32
Y_DTYPE = np.int8
MARK_DTYPE = np.int32
MAX_STAMP = 2**31 - 2


def make_workspace(n: int, n_features: int) -> Workspace:
    nv = n_features + 1
    v = lambda: np.zeros(nv, dtype=np.float64)  # noqa: E731
    return Workspace(v(), v(), v(), v(), v(), v(), v(), v(),
                     np.zeros(n), np.zeros(n), np.zeros(n, dtype=ACT_DTYPE), np.zeros(n), np.zeros(n),
                     np.zeros(n, dtype=Y_DTYPE), np.zeros(nv, dtype=MARK_DTYPE), np.zeros(nv, dtype=MARK_DTYPE),
                     np.zeros(1, dtype=np.int64), np.zeros(nv))


# The clock below holds the GIL for about a microsecond per call; numba warns that the
# object-mode block is not parallel, which is intended.
warnings.filterwarnings("ignore", message="Code running in object mode won't allow parallel execution",
                        category=nb.NumbaWarning)


@nb.njit(cache=True, nogil=True)
def now():
    # numba has no clock: a brief trip to the interpreter (holds the GIL for ~1 us)
    with nb.objmode(t="f8"):
        t = time.perf_counter()
    return t


@nb.njit(cache=True, nogil=True)
def _next_stamp(W):
    """A mark value never used before in W (marks are int32: renumber when they run out;
    the current support keeps its marks, as value 1)."""
    if W.stamp[0] >= MAX_STAMP:
        cur = W.stamp[0]
        for j in range(W.mark.size):
            W.mark[j] = 1 if W.mark[j] == cur else 0
        W.stamp[0] = 1
    W.stamp[0] += 1
    return W.stamp[0]


@nb.njit(cache=True, nogil=True)
def _gnorm(W, nF, wout2):
    acc = wout2  # outside the support g = w
    for q in range(nF):
        gj = W.g[W.F[q]]
        acc += gj * gj
    return math.sqrt(acc)


@nb.njit(cache=True, nogil=True)
def gradient(P, W):
    """New active set, support and gradient: (nact, nF, ||w_O||^2, ||g||)."""
    stamp = _next_stamp(W)
    nact, nF, wout2 = erm.grad_on_support(P, W.y, W.w, W.wx, W.g, W.act, W.gcoef, W.hcoef, W.F, W.mark, stamp)
    return nact, nF, wout2, _gnorm(W, nF, wout2)


@nb.njit(cache=True, nogil=True)
def start(P, W, tol, rec_f, rec_act):
    """Evaluate the start (W.w with W.wx = X W.w current): (status, f, nact, nF, ||w_O||^2, ||g||)."""
    n = W.wx.size
    f = erm.fun(P, W.y, W.w, W.wx)
    nact, nF, wout2, gnorm = gradient(P, W)
    if rec_f.size > 0:
        rec_f[0] = f
        rec_act[0] = nact / max(n, 1)
    status = RUNNING
    if not math.isfinite(f):
        status = NUMERICAL
    elif gnorm <= tol:
        status = CONVERGED
    return status, f, nact, nF, wout2, gnorm


@nb.njit(cache=True, nogil=True)
def direction(P, S, W, nact, nF, wout2):
    """Newton direction into W.s by PCG on the support; returns (CG steps, g.s, sigma)
    with s = sigma * w outside the support."""
    erm.diag_precond_on_support(P, W.act, nact, W.hcoef, W.M, W.F, nF)
    for q in range(nF):
        j = W.F[q]
        W.M[j] = (1.0 - S.pcg_alpha) + S.pcg_alpha * W.M[j]
    m_out = (1.0 - S.pcg_alpha) + S.pcg_alpha * 1.0
    cg_iter, sigma = pcg(P, W.act, nact, W.hcoef, W.g, W.M, W.s, W.r, W.d, W.z, W.Hd, S.eps_cg, W.F, nF,
                         wout2, m_out)
    # s stays in split form: W.s on the support, sigma * w elsewhere (never written out)
    gTs = sigma * wout2  # g_O . s_O
    for q in range(nF):
        j = W.F[q]
        gTs += W.g[j] * W.s[j]
    return cg_iter, gTs, sigma


@nb.njit(cache=True, nogil=True)
def write_delta(W, nF, sigma, out):
    """out[F] = s - sigma * w on the support; ``out`` must be zero elsewhere.  Then
    X s = sigma * wx + X out: the pass over X needs only this sparse vector."""
    for q in range(nF):
        j = W.F[q]
        out[j] = W.s[j] - sigma * W.w[j]


@nb.njit(cache=True, nogil=True)
def clear_delta(W, nF, out):
    """Undo :func:`write_delta` (call before the support changes)."""
    for q in range(nF):
        out[W.F[q]] = 0.0


@nb.njit(cache=True, nogil=True)
def advance(P, S, W, it, f, nact, nF, wout2, gnorm, tol, cg_iter, gTs, sigma, rec_f, rec_act, rec_step, rec_cg):
    """Line search along s (W.xs = X delta must be current, see :func:`write_delta`), step,
    new gradient, stopping tests for iteration ``it``: returns
    (status, f, nact, nF, ||w_O||^2, ||g||)."""
    n = W.wx.size
    act_frac = nact / max(n, 1)
    fold = f
    sTs, wTs, wTw = erm.reg_dots_on_support(P, W.w, W.s, W.F, nF, wout2, sigma)
    step, f = erm.linesearch(P, W.y, W.wx, W.xs, sigma, gTs, f, S.ls_eta, S.ls_max_steps, sTs, wTs, wTw)
    if step != 0.0:
        old = W.stamp[0]
        stamp = _next_stamp(W)
        if stamp <= old:  # marks were renumbered: the current support is now marked 1
            old = 1
        nact, nF, wout2 = erm.update_and_grad_on_support(P, W.y, W.w, W.wx, W.xs, W.s, sigma, step, W.g, W.act,
                                                         W.gcoef, W.hcoef, W.F, W.mark, old, stamp)
        gnorm = _gnorm(W, nF, wout2)
    if it < rec_f.size:
        rec_f[it] = f
        rec_act[it] = act_frac
        rec_step[it] = step
        rec_cg[it] = cg_iter
    status = RUNNING
    if step == 0.0:
        status = LINE_SEARCH_FAILED
    elif not math.isfinite(f):
        status = NUMERICAL
    elif gnorm <= tol:
        status = CONVERGED
    elif abs(fold - f) <= 1.0e-12 * abs(f):
        status = NO_PROGRESS
    elif it >= S.max_iter:
        status = MAX_ITER
    return status, f, nact, nF, wout2, gnorm


@nb.njit(cache=True, nogil=True)
def newton(P, W, S, tol, rec_f, rec_act, rec_step, rec_cg, rec_time, timing):
    """Minimise f from W.w (with W.wx = X W.w current), one problem on its own.

    Record index 0 is the starting point, index k iteration k (while there is room).
    Returns (status, iterations, total CG steps, f_initial, f_final, ||g_initial||, ||g_final||).
    """
    t0 = now() if timing else 0.0
    status, f, nact, nF, wout2, gnorm = start(P, W, tol, rec_f, rec_act)
    f_init = f
    g_init = gnorm
    if rec_time.size > 0:
        rec_time[0] = (now() - t0) if timing else 0.0
    it = 0
    cg_total = 0
    while status == RUNNING:
        it += 1
        t_it = now() if timing else 0.0
        cg_iter, gTs, sigma = direction(P, S, W, nact, nF, wout2)
        cg_total += cg_iter
        write_delta(W, nF, sigma, W.delta)
        erm.scores(P, W.delta, W.xs)
        clear_delta(W, nF, W.delta)
        status, f, nact, nF, wout2, gnorm = advance(P, S, W, it, f, nact, nF, wout2, gnorm, tol, cg_iter, gTs,
                                                    sigma, rec_f, rec_act, rec_step, rec_cg)
        if it < rec_time.size:
            rec_time[it] = (now() - t_it) if timing else 0.0
    return status, it, cg_total, f_init, f, g_init, gnorm
