"""newGLMNET: exact L1-regularised training (LIBLINEAR's -s 6 solver; Yuan, Ho and Lin,
"An improved GLMNET for L1-regularized logistic regression", JMLR 2012), for any margin
loss of :mod:`headstart.objective.losses`.

Each outer iteration forms the quadratic model of the loss term at w (gradient and
curvature per instance, :func:`headstart.objective.columns.loss_and_terms_at`) and minimises
model + sum_j lam_j |w_j + d_j| by cyclic coordinate descent in random order, each
coordinate's step the exact minimiser of its one-variable problem (a soft threshold);
a backtracking line search on the true objective (Armijo with the model's decrease,
sigma = 0.01, halving at most 20 times) then accepts w + t d.  Two shrinking rules
keep the cost proportional to the weights that can move: a zero weight whose gradient
lies well inside [-lam_j, lam_j] (by max violation / n of the previous pass) sits out
the outer iteration's inner loop, and within the inner loop likewise for later
cycles until the inner loop may stop (then every coordinate of the iteration is
brought back once); every outer iteration starts with all coordinates.

LIBLINEAR's choices are kept where they define the result: the stopping rule -- the
1-norm of the minimum-norm subgradient over the coordinates in play at most
``tol`` times its value at the start, tol = eps * max(min(#pos, #neg), 1) / n -- the
inner tolerance (1, then a quarter of itself after an inner loop of one cycle), nu =
1e-12 added to the curvature, steps clipped to [-10, 10], 1000 inner cycles at most,
and the stop after ten outer iterations whose inner loop changed nothing.  What is
ours: the loss is a compiled strategy, not the logistic loss written in; the
coordinate order comes from a per-label generator (seeded by the label id), so the
result does not depend on which thread trains a label; the squared hinge is solved
by the same method with its generalised second derivative (LIBLINEAR's -s 5 uses a
different coordinate descent, CDN, on the same objective).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .._compile import njit
from ..objective import columns
from .newton import CONVERGED, LINE_SEARCH_FAILED, MAX_ITER, NUMERICAL, RUNNING, now

#: status when ten outer iterations in a row changed no weight (LIBLINEAR stops there too)
NO_PROGRESS = 3

NU = 1e-12           # added to every coordinate's curvature (a zero-curvature column)
SIGMA = 0.01         # Armijo constant of the line search
MAX_HALVINGS = 20
MAX_CYCLES = 1000    # inner coordinate-descent cycles per outer iteration
MAX_STEP = 10.0      # one coordinate's step is clipped to [-MAX_STEP, MAX_STEP]
NO_CHANGE_LIMIT = 10

# The solver's per-thread buffers: per coordinate (features + 1) the weights w, the
# trial point wpd, gradient, curvature and the coordinate order; per instance the
# scores wx, the direction's scores xd, and the loss's coefficients gc / hc with a
# spare pair gc2 / hc2 (a line-search trial's, swapped in when it is accepted).
# CDN (.cdn) also uses ``signed``: X's values times the label's y, one per nonzero (empty
# for newGLMNET).
Work = namedtuple("Work", ["w", "wpd", "grad", "hdiag", "index", "wx", "xd", "gc", "hc", "gc2", "hc2", "signed"])


def make_work(n: int, n_features: int, nnz_signed: int = 0) -> Work:
    nv = n_features + 1
    return Work(np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv, dtype=np.int64),
                np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n),
                np.zeros(nnz_signed, dtype=np.float32))


@njit(cache=True, nogil=True)
def _next(state):
    """xorshift64*: a small deterministic generator per label (state: 1-element uint64)."""
    x = state[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    state[0] = x
    return x * np.uint64(2685821657736338717)


@njit(cache=True, nogil=True)
def new_rng(seed):
    """The per-label generator's state, from the label id (so that a label's result does
    not depend on the thread that trains it)."""
    return np.full(1, np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1), dtype=np.uint64)


@njit(cache=True, nogil=True)
def shuffle(index, count, rng):
    """A random permutation of index[:count] in place (Fisher-Yates)."""
    for s in range(count):
        r = s + np.int64(_next(rng) % np.uint64(count - s))
        t = index[r]
        index[r] = index[s]
        index[s] = t


@njit(cache=True, nogil=True, inline="always")
def record_iteration(rec_step, rec_cg, rec_time, k, it, step, inner, timing, t0):
    """The records of label k's iteration ``it`` (the caller checks there is room): its
    step, its inner count and, with ``timing``, its seconds; returns the new t0."""
    rec_step[k, it] = step
    rec_cg[k, it] = inner
    if timing:
        t1 = now()
        rec_time[k, it] = t1 - t0
        return t1
    return t0


@njit(cache=True, nogil=True, inline="always")
def record_end(rec_f, rec_act, rec_step, rec_cg, rec_time, k, it, f, active_share, timing, t0):
    """The closing record of label k after ``it`` iterations, where there is room."""
    if it < rec_f.shape[1]:
        rec_f[k, it] = f
        rec_act[k, it] = active_share
        rec_step[k, it] = 0.0
        rec_cg[k, it] = 0
        rec_time[k, it] = (now() - t0) if timing else 0.0


@njit(cache=True, nogil=True)
def _violation(g, lam, wj):
    """|minimum-norm subgradient| of lam |w_j| + g w_j at w_j; -1 when w_j = 0 and the
    gradient lies inside [-lam, lam] (no violation: the shrinking candidate)."""
    gp = g + lam
    gn = g - lam
    if wj == 0.0:
        if gp < 0.0:
            return -gp
        if gn > 0.0:
            return gn
        return -1.0
    if wj > 0.0:
        return abs(gp)
    return abs(gn)


@njit(cache=True, nogil=True)
def solve(CP, W, y, cp, cn, tol, max_iter, seed, rec_f, rec_act, rec_step, rec_cg, rec_time, k, timing, abort):
    """Minimise f from w = 0 for the labels ``y`` (+-1 per instance) with costs cp / cn;
    W's buffers are overwritten, the solution is left in W.w (coordinates 0..nv-1) and
    the scores in W.wx.  Per-iteration records go into rec_*[k, it] while they fit
    (durations only with ``timing``).  Once ``abort`` (one byte shared with the thread
    that called) is set, the solve returns at its next outer iteration with the status
    RUNNING: Ctrl-C stops a long label within an iteration, not at its end.

    Returns (status, outer iterations, inner cycles, f(0), f, subgradient 1-norm at the
    start, at the end)."""
    n = CP.n
    d = CP.d
    bias = CP.bias
    indptr = CP.indptr
    indices = CP.indices
    data = CP.data
    nv = columns.n_coords(CP)
    # lam_j is 1 on every feature; read CP once here, never per coordinate: passing the
    # tuple to a helper per coordinate cost ~60 ns each (its ~25 fields are arguments)
    lam_bias = columns.l1_weight(CP, d)
    w = W.w
    wpd = W.wpd
    grad = W.grad
    hdiag = W.hdiag
    index = W.index
    wx = W.wx
    xd = W.xd
    gc = W.gc
    hc = W.hc
    gc2 = W.gc2
    hc2 = W.hc2
    for j in range(nv):
        w[j] = 0.0
        wpd[j] = 0.0
        index[j] = j
    for i in range(n):
        wx[i] = 0.0
    rng = new_rng(seed)
    for i in range(n):
        xd[i] = 0.0
    loss = columns.loss_and_terms_at(CP, y, cp, cn, wx, xd, gc, hc)
    f0 = loss
    reg = 0.0                      # sum_j lam_j |w_j|
    active = nv
    gmax_old = np.inf
    inner_eps = 1.0
    no_change = 0
    gnorm_init = 0.0
    gnorm = 0.0
    cycles_total = 0
    status = MAX_ITER
    it = 0
    cap = rec_f.shape[1]
    t0 = now() if timing else 0.0
    while True:
        # gradient and curvature of every coordinate, in column order (X's columns are
        # streamed, not visited in the last inner loop's random order: 4-5x slower on
        # rcv1-subset1); the zero weights well inside their subgradient interval sit out
        # this iteration (outer shrinking), the others are listed in index[:active]
        columns.gradient_pass(indptr, indices, data, gc, hc, NU, grad, hdiag)
        if nv > d:
            g, h = columns.bias_grad_and_curvature(bias, gc, hc)
            grad[d] = g
            hdiag[d] = h + NU
        gmax = 0.0
        gnorm = 0.0
        active = 0
        for j in range(nv):
            g = grad[j]
            lam = 1.0 if j < d else lam_bias
            v = _violation(g, lam, w[j])
            if v < 0.0:
                if g + lam > gmax_old / n and g - lam < -gmax_old / n:
                    continue
                v = 0.0
            index[active] = j
            active += 1
            gmax = max(gmax, v)
            gnorm += v
        if it == 0:
            gnorm_init = gnorm
        if it < cap:
            rec_f[k, it] = reg + loss
            rec_act[k, it] = active / max(nv, 1)
        if gnorm <= tol * gnorm_init:
            status = CONVERGED
            break
        if abort[0] != 0:
            status = RUNNING
            break
        if no_change >= NO_CHANGE_LIMIT:
            status = NO_PROGRESS
            break
        if it >= max_iter:
            status = MAX_ITER
            break
        no_change += 1
        # coordinate descent on the quadratic model over the coordinates in play
        for i in range(n):
            xd[i] = 0.0
        qp_active = active
        qp_gmax_old = np.inf
        cycles = 0
        while cycles < MAX_CYCLES:
            qp_gmax = 0.0
            qp_gnorm = 0.0
            shuffle(index, qp_active, rng)
            s = 0
            while s < qp_active:
                j = index[s]
                h = hdiag[j]
                lam = 1.0 if j < d else lam_bias
                g = grad[j] + (wpd[j] - w[j]) * NU
                if j < d:
                    g += columns.curvature_dot(indptr, indices, data, j, hc, xd)
                else:
                    g += columns.bias_curvature_dot(bias, hc, xd)
                gp = g + lam
                gn = g - lam
                v = _violation(g, lam, wpd[j])
                if v < 0.0:
                    if gp > qp_gmax_old / n and gn < -qp_gmax_old / n:
                        qp_active -= 1
                        index[s] = index[qp_active]
                        index[qp_active] = j
                        continue
                    v = 0.0
                # the one-variable problem's minimiser (a soft threshold around wpd_j)
                if gp < h * wpd[j]:
                    z = -gp / h
                elif gn > h * wpd[j]:
                    z = -gn / h
                else:
                    z = -wpd[j]
                s += 1
                if abs(z) < 1e-12:
                    if z == -wpd[j] and wpd[j] != 0.0:
                        # a weight zero but for rounding (-1.9e-13 on a one-row problem,
                        # helper-47): its step to zero is too small to take as a step, yet
                        # its violation |g -+ lam| keeps the rule from ever holding (the
                        # solver stopped with no_progress at the optimum); set it to zero,
                        # as cdn.py does
                        columns.coordinate_add(indptr, indices, data, bias, d, j, z, xd)
                        wpd[j] = 0.0
                    continue
                z = min(max(z, -MAX_STEP), MAX_STEP)
                no_change = 0
                qp_gmax = max(qp_gmax, v)
                qp_gnorm += v
                wpd[j] += z
                columns.coordinate_add(indptr, indices, data, bias, d, j, z, xd)
            cycles += 1
            if qp_gnorm <= inner_eps * gnorm_init:
                if qp_active == active:
                    break
                qp_active = active           # bring the shrunk coordinates back once
                qp_gmax_old = np.inf
                continue
            qp_gmax_old = qp_gmax
        cycles_total += cycles
        # line search on the true objective along d = wpd - w
        delta = 0.0
        reg_new = 0.0
        for s in range(active):
            j = index[s]
            delta += grad[j] * (wpd[j] - w[j])
            reg_new += (1.0 if j < d else lam_bias) * abs(wpd[j])
        delta += reg_new - reg
        step = 1.0
        accepted = False
        for _ in range(MAX_HALVINGS):
            loss_new = columns.loss_and_terms_at(CP, y, cp, cn, wx, xd, gc2, hc2)
            if reg_new - reg + loss_new - loss <= SIGMA * delta:
                accepted = True
                break
            step *= 0.5
            delta *= 0.5
            reg_new = 0.0
            for s in range(active):
                j = index[s]
                wpd[j] = 0.5 * (w[j] + wpd[j])
                reg_new += (1.0 if j < d else lam_bias) * abs(wpd[j])
            for i in range(n):
                xd[i] *= 0.5
        if it < cap:
            t0 = record_iteration(rec_step, rec_cg, rec_time, k, it, step if accepted else 0.0, cycles, timing, t0)
        it += 1
        if not accepted:
            for s in range(active):
                j = index[s]
                wpd[j] = w[j]
            status = LINE_SEARCH_FAILED
            break
        for s in range(active):
            j = index[s]
            w[j] = wpd[j]
        for i in range(n):
            wx[i] += xd[i]
        reg = reg_new
        loss = loss_new
        gc, gc2 = gc2, gc              # the accepted trial's coefficients
        hc, hc2 = hc2, hc
        if not np.isfinite(loss):
            status = NUMERICAL
            break
        if cycles == 1:
            inner_eps *= 0.25
        gmax_old = gmax
    record_end(rec_f, rec_act, rec_step, rec_cg, rec_time, k, it, reg + loss, active / max(nv, 1), timing, t0)
    return status, it, cycles_total, f0, reg + loss, gnorm_init, gnorm
