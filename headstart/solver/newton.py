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
from collections import namedtuple

import numpy as np

from .._clock import now  # noqa: F401  (the kernels' clock: nt.now)
from .._compile import njit
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

# The solver's own vectors, reused for every label trained in them: w, the gradient g,
# the direction s and PCG's r, d, Hd, M.  ``delta`` is the projected direction the
# pass over X reads (:func:`headstart.objective.erm.project`); the lane scheduler keeps
# it in its shared sweep buffer instead and gives lanes a 1-element one.  Everything
# the objective caches lives in its own :data:`headstart.objective.erm.State`.
Workspace = namedtuple("Workspace", ["w", "g", "s", "r", "d", "Hd", "M", "delta"])

# Settings of the solver (from TrainParams).
Settings = namedtuple("Settings", ["max_iter", "eps_cg", "pcg_alpha", "ls_eta", "ls_max_steps"])


# The projected direction the pass over X reads is float32 (see erm.project: the pass is
# bound by the bytes it gathers per nonzero).
DELTA_DTYPE = np.float32


def make_workspace(n_features: int) -> Workspace:
    nv = n_features + 1
    return Workspace(*(np.zeros(nv) for _ in range(7)), np.zeros(nv, dtype=DELTA_DTYPE))


def settings(params) -> Settings:
    return Settings(np.int64(params.max_iter), np.float64(params.cg_epsilon), np.float64(params.pcg_alpha),
                    np.float64(params.ls_eta), np.int64(params.ls_max_steps))


@njit(cache=True, nogil=True)
def relative_tolerance(epsilon, npos, n):
    """LIBLINEAR's stopping rule ||grad f(w)|| <= tol, tol as a fraction of
    ||grad f(0)||, for a label with ``npos`` positives among ``n`` rows (linear.cpp:
    primal_solver_tol = eps * max(min(pos, neg), 1) / l).  Every solver path uses it
    (full, sub-problems, the coordinate solvers)."""
    return epsilon * max(min(npos, n - npos), 1) / max(n, 1)


@njit(cache=True, nogil=True)
def start(P, O, W, tol, rec_f, rec_act):
    """Evaluate the start (W.w with O.wx = X W.w current), or w = 0 where the start is
    worse (:func:`zero_if_worse`): (status, f, ||g||)."""
    n = O.wx.size
    f = zero_if_worse(P, O, W.w, erm.value(P, O, W.w))
    gnorm = erm.gradient(P, O, W.w, W.g)
    if rec_f.size > 0:
        rec_f[0] = f
        rec_act[0] = O.ist[erm.NACT] / max(n, 1)
    return start_status(f, gnorm, tol), f, gnorm


# f(w0) may exceed f(0) by this share before the start is replaced (the two sums round
# differently: a zero start must not be "replaced" by itself), or by the rounding bound of
# a sum of n terms (n units of float64 roundoff) where that is larger: with the logistic
# loss a zero start's f, n log 2 summed term by term, came out above f(0) = n log 2 by
# more than 1e-12 on the Amazon-670K shape (490K rows), and every label was reported
# "started from w = 0 because the init 'zero' scored above f(0)"
START_SLACK = 1e-12
ROUNDOFF = 2.0**-52


@njit(cache=True, nogil=True)
def zero_if_worse(P, O, w, f):
    """f of the start w (O.wx = X w), or -- where f(w) > f(0) -- w = 0, its scores and
    its f, with O.fst[ZEROED] set.  A start is meant to be closer to the optimum than
    LIBLINEAR's w = 0; where one value of a feature dwarfs the rest, aop's (which matches
    mean scores) can be far worse (a single 1e6 among unit values: f(w0) 890 against
    f(0) 400), and LIBLINEAR's rule, relative to ||grad f(0)|| -- 2e6 there --, may hold
    at once: the label would keep that start, "converged" after 0 iterations.  From
    w = 0 it gets what LIBLINEAR gets.  O(1) unless it replaces the start."""
    if worse_than_zero(P, O, f):
        zero_start(O, w)
        return erm.value(P, O, w)
    return f


@njit(cache=True, nogil=True)
def worse_than_zero(P, O, f):
    """Whether a start of value f is above f(0) (beyond the rounding slack)."""
    return f > erm.value_at_zero(P, O) * (1.0 + max(START_SLACK, O.wx.size * ROUNDOFF))


@njit(cache=True, nogil=True)
def zero_start(O, w):
    """w = 0 and its scores, recorded in O.fst[ZEROED]."""
    w[:] = 0.0
    O.wx[:] = 0.0
    O.fst[erm.ZEROED] = 1.0


@njit(cache=True, nogil=True)
def start_status(f, gnorm, tol):
    """The status of a start with value f and gradient norm gnorm: NUMERICAL if f, the
    norm or the tolerance is not finite, CONVERGED if it passes the gradient test
    already, else RUNNING.  (A huge C -- about 1e154 -- overflows the squared norms:
    inf <= inf would otherwise pass the test at the start, helper-90.)"""
    if not (math.isfinite(f) and math.isfinite(gnorm) and math.isfinite(tol)):
        return NUMERICAL
    if gnorm <= tol:
        return CONVERGED
    return RUNNING


@njit(cache=True, nogil=True)
def direction(P, S, O, W):
    """Newton direction into W.s by PCG on the objective's support; returns
    (CG steps, g.s, sigma) with s = sigma * w outside the support."""
    m_out = preconditioner(P, S, O, W.w, W.M)
    cg_iter, sigma = pcg(P, O, W.w, W.g, W.M, W.s, W.r, W.d, W.Hd, S.eps_cg, m_out)
    # s stays in split form: W.s on the support, sigma * w elsewhere (never written out)
    return cg_iter, slope(O, W.g, W.s, sigma), sigma


@njit(cache=True, nogil=True)
def preconditioner(P, S, O, w, M):
    """M = (1 - alpha) + alpha * diag(H) on the support (LIBLINEAR's mixed diagonal
    preconditioner); returns its value outside the support."""
    F = O.F
    full = erm.support_is_all(O)   # then F[q] == q: index directly
    m_out = erm.precond(P, O, w, M)
    for q in range(O.ist[erm.NF]):
        j = q if full else F[q]
        M[j] = (1.0 - S.pcg_alpha) + S.pcg_alpha * M[j]
    return (1.0 - S.pcg_alpha) + S.pcg_alpha * m_out


@njit(cache=True, nogil=True)
def slope(O, g, s, sigma):
    """g.s for s in split form (s on the support, sigma * w outside, where g = w)."""
    F = O.F
    full = erm.support_is_all(O)   # then F[q] == q: index directly
    gTs = sigma * O.fst[erm.WOUT2]  # g_O . s_O
    for q in range(O.ist[erm.NF]):
        j = q if full else F[q]
        gTs += g[j] * s[j]
    return gTs


@njit(cache=True, nogil=True)
def advance(P, S, O, W, it, f, gnorm, tol, cg_iter, gTs, sigma, rec_f, rec_act, rec_step, rec_cg):
    """Line search along s (O.xs = X delta must be current, see
    :func:`headstart.objective.erm.project`), step, new gradient, stopping tests for
    iteration ``it``: returns (status, f, ||g||)."""
    act_frac = active_fraction(O)
    fold = f
    alpha, f = erm.line_search(P, O, W.w, W.s, sigma, gTs, f, S.ls_eta, S.ls_max_steps)
    if alpha != 0.0:
        gnorm = erm.step(P, O, W.w, W.s, sigma, alpha, W.g)
    return conclude(S, it, fold, f, gnorm, tol, alpha, act_frac, cg_iter, rec_f, rec_act, rec_step, rec_cg)


@njit(cache=True, nogil=True)
def active_fraction(O):
    return O.ist[erm.NACT] / max(O.wx.size, 1)


@njit(cache=True, nogil=True)
def conclude(S, it, fold, f, gnorm, tol, alpha, act_frac, cg_iter, rec_f, rec_act, rec_step, rec_cg):
    """The end of :func:`advance` once the new gradient is known (a scheduler may compute
    it later, for several labels at once): records of iteration ``it`` and the stopping
    tests; returns (status, f, ||g||)."""
    if it < rec_f.size:
        rec_f[it] = f
        rec_act[it] = act_frac
        rec_step[it] = alpha
        rec_cg[it] = cg_iter
    status = RUNNING
    if alpha == 0.0:
        status = LINE_SEARCH_FAILED
    elif not (math.isfinite(f) and math.isfinite(gnorm)):
        status = NUMERICAL
    elif gnorm <= tol:
        status = CONVERGED
    elif abs(fold - f) <= 1.0e-12 * abs(f):
        # tol = eps ||g(0)|| is 0 only where g(0) = 0: then w = 0 minimises f (convex), the
        # rule above can never hold, and a step that changes nothing is the minimum reached
        status = CONVERGED if tol == 0.0 else NO_PROGRESS
    elif it >= S.max_iter:
        status = MAX_ITER
    return status, f, gnorm


@njit(cache=True, nogil=True)
def newton(P, O, W, S, tol, rec_f, rec_act, rec_step, rec_cg, rec_time, timing):
    """Minimise f from W.w (with O.wx = X W.w current), one problem on its own: the
    one-lane case of :func:`headstart.training.kernel.train_chunk`, the same phases in
    the same order (the test suite checks the two bit for bit).

    Record index 0 is the starting point, index k iteration k (while there is room).
    Returns (status, iterations, total CG steps, f_initial, f_final, ||g_initial||, ||g_final||).
    """
    t0 = now() if timing else 0.0
    status, f, gnorm = start(P, O, W, tol, rec_f, rec_act)
    f_init = f
    g_init = gnorm
    if rec_time.size > 0:
        rec_time[0] = (now() - t0) if timing else 0.0
    it = 0
    cg_total = 0
    lo = np.zeros(0)   # scratch of erm.remainder, made when first needed
    while status == RUNNING:
        it += 1
        t_it = now() if timing else 0.0
        cg_iter, gTs, sigma = direction(P, S, O, W)
        cg_total += cg_iter
        exact = erm.project(O, W.w, W.s, sigma, W.delta)
        erm.scores(P, W.delta, O.xs)
        if exact:
            if lo.size == 0:
                lo = np.zeros(W.w.size)
            erm.remainder(P, O, W.w, W.s, sigma, W.delta, lo)
        erm.unproject(O, W.delta)
        status, f, gnorm = advance(P, S, O, W, it, f, gnorm, tol, cg_iter, gTs, sigma,
                                   rec_f, rec_act, rec_step, rec_cg)
        if it < rec_time.size:
            rec_time[it] = (now() - t_it) if timing else 0.0
    return status, it, cg_total, f_init, f, g_init, gnorm
