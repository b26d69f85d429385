"""LIBLINEAR's primal Newton method with line search (newton.cpp, v2.40+;
Galli & Lin, "A study on truncated Newton methods for linear classification", 2021).

One iteration: diagonal preconditioner mixed as (1 - alpha) + alpha * diag(H), a
truncated PCG step (:mod:`.cg`), a backtracking Armijo line search, a new gradient.
It stops when ||grad f(w)|| <= tol, where the caller passes
tol = epsilon * max(min(#pos, #neg), 1) / n * ||grad f(0)|| -- relative to the gradient
at w = 0 whatever the starting point, so every initialisation meets the same bar.

The solver only asks the objective (:mod:`headstart.objective.erm`) its questions; it
never touches X or the loss itself.  Per-iteration statistics are written into the
caller's record arrays (the paper's figures are built from them).
"""

from __future__ import annotations

import math
import time
from collections import namedtuple

import numba as nb
import numpy as np

from ..objective import erm
from .cg import pcg

# Status codes, also used in the training statistics.
CONVERGED = 0
MAX_ITER = 1
LINE_SEARCH_FAILED = 2
NO_PROGRESS = 3      # |f_old - f| <= 1e-12 |f| (LIBLINEAR "actred too small")
NUMERICAL = 4        # non-finite objective
STATUS_NAMES = ("converged", "max_iter", "line_search_failed", "no_progress", "numerical")

# Buffers of one worker, reused for every label it trains.
Workspace = namedtuple("Workspace", ["w", "g", "s", "r", "d", "z", "Hd", "M",
                                     "wx", "xs", "act", "gcoef", "hcoef", "y"])

# Settings of the solver (from TrainParams).
Settings = namedtuple("Settings", ["max_iter", "eps_cg", "pcg_alpha", "ls_eta", "ls_max_steps"])


def make_workspace(n: int, n_features: int) -> Workspace:
    nv = n_features + 1
    v = lambda: np.zeros(nv, dtype=np.float64)  # noqa: E731
    return Workspace(v(), v(), v(), v(), v(), v(), v(), v(),
                     np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n),
                     np.zeros(n))


@nb.njit(cache=True, nogil=True)
def now():
    with nb.objmode(t="f8"):
        t = time.perf_counter()
    return t


@nb.njit(cache=True, nogil=True)
def _norm(a):
    acc = 0.0
    for j in range(a.size):
        acc += a[j] * a[j]
    return math.sqrt(acc)


@nb.njit(cache=True, nogil=True)
def newton(P, W, S, tol, rec_f, rec_act, rec_step, rec_cg, rec_time, timing):
    """Minimise f from the start W.w (with W.wx = X W.w already current).

    Record arrays get index 0 for the starting point and index k for iteration k, as
    long as they have room.  Returns
    (status, iterations, total CG steps, f_initial, f_final, ||g_initial||, ||g_final||).
    """
    n = W.wx.size
    cap = rec_f.size
    t0 = now() if timing else 0.0
    f = erm.fun(P, W.y, W.w, W.wx)
    nact = erm.grad(P, W.y, W.w, W.wx, W.g, W.act, W.gcoef, W.hcoef)
    gnorm = _norm(W.g)
    f_init = f
    g_init = gnorm
    if cap > 0:
        rec_f[0] = f
        rec_act[0] = nact / max(n, 1)
        rec_step[0] = 0.0
        rec_cg[0] = 0
        rec_time[0] = (now() - t0) if timing else 0.0
    if not math.isfinite(f):
        return NUMERICAL, 0, 0, f_init, f, g_init, gnorm
    if gnorm <= tol:
        return CONVERGED, 0, 0, f_init, f, g_init, gnorm
    status = MAX_ITER
    it = 0
    cg_total = 0
    while it < S.max_iter:
        it += 1
        t_it = now() if timing else 0.0
        erm.diag_precond(P, W.act, nact, W.hcoef, W.M)
        for j in range(W.M.size):
            W.M[j] = (1.0 - S.pcg_alpha) + S.pcg_alpha * W.M[j]
        act_frac = nact / max(n, 1)
        cg_iter = pcg(P, W.act, nact, W.hcoef, W.g, W.M, W.s, W.r, W.d, W.z, W.Hd, S.eps_cg)
        cg_total += cg_iter
        fold = f
        step, f = erm.linesearch_and_update(P, W.y, W.w, W.wx, W.xs, W.s, W.g, f, S.ls_eta,
                                            S.ls_max_steps)
        if step == 0.0:
            status = LINE_SEARCH_FAILED
        else:
            nact = erm.grad(P, W.y, W.w, W.wx, W.g, W.act, W.gcoef, W.hcoef)
            gnorm = _norm(W.g)
        if it < cap:
            rec_f[it] = f
            rec_act[it] = act_frac
            rec_step[it] = step
            rec_cg[it] = cg_iter
            rec_time[it] = (now() - t_it) if timing else 0.0
        if step == 0.0:
            break
        if not math.isfinite(f):
            status = NUMERICAL
            break
        if gnorm <= tol:
            status = CONVERGED
            break
        if abs(fold - f) <= 1.0e-12 * abs(f):
            status = NO_PROGRESS
            break
    return status, it, cg_total, f_init, f, g_init, gnorm
