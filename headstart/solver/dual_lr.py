"""Dual coordinate descent for L2-regularised logistic regression (Yu, Huang and Lin,
"Dual coordinate descent methods for logistic regression and maximum entropy models",
Machine Learning 85, 2011, Algorithm 5 -- the method of LIBLINEAR's -s 7).

For f(w) = ||w||^2 / 2 + sum_i c_i log(1 + exp(-y_i w.x_i)) the dual is

    min_a  a^T Q a / 2 + sum_i [a_i log a_i + (c_i - a_i) log(c_i - a_i)],   0 < a_i < c_i,

with Q_ij = y_i y_j x_i.x_j and w = sum_i a_i y_i x_i.  Unlike the hinge losses' dual
(:mod:`.dual`) it has no closed-form coordinate step and no bound an a_i can sit on: the
entropy terms keep every a_i strictly inside (0, c_i), so there is no shrinking.  One
step minimises the dual in a_i by a few Newton iterations on the one-variable function
g(z) = z log z + (c - z) log(c - z) + a (z - z_old)^2 / 2 + b (z - z_old) (a = ||x_i||^2,
b = y_i w.x_i), kept inside the interval by shrinking z towards 0 whenever a Newton
step would leave it.  The pair (a_i, c_i - a_i) is stored, and the step is taken on the
member nearer to 0, where z log z is steep and a small z can be represented exactly
(the paper's section 3.2: c_i - a_i formed by subtraction would lose all its digits
once a_i is close to c_i).

The rule, as LIBLINEAR's: stop after the first cycle whose largest |g'(z)| at the start
of a step is below ``eps`` (LIBLINEAR's default 0.1 for -s 7).  The inner Newton loop
stops at |g'| < an inner tolerance that starts at 1e-2 and is divided by 10 after every
cycle that took at most n / 10 inner steps (down to min(1e-8, eps)).  What is ours, as
in :mod:`.dual`: the per-label generator of the order, float32 X with float64 weights,
||x_i||^2 computed once for all labels, the abort flag; an instance of cost 0 has
a_i = 0 and no term (LIBLINEAR cannot take a cost of 0 there).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .._compile import njit
from .dual import primal, record_cycle, register_method, row_axpy, row_score
from .glmnet import new_rng, record_end, record_iteration, shuffle
from .newton import CONVERGED, MAX_ITER, RUNNING, now

#: the start a_i = min(START_SHARE c_i, START_MAX): inside the interval, near 0 (LIBLINEAR's)
START_SHARE = 1e-3
START_MAX = 1e-8
#: the inner Newton loop's first tolerance, its floor, and its step cap per coordinate
INNER_EPS = 1e-2
INNER_EPS_MIN = 1e-8
MAX_INNER = 100
#: how far z moves towards 0 when a Newton step would leave (0, c) (the paper's xi)
SHRINK = 0.1


class LogisticDual(NamedTuple):
    """Selects this solver in :func:`.dual.solve_dual` (see training/coordinate.py)."""


@njit(cache=True, nogil=True)
def solve(RP, W, xsq, y, cp, cn, eps, max_iter, seed, rec_f, rec_act, rec_step, rec_cg, rec_time, k, timing,
          abort):
    """Minimise f from the dual's start.  W.alpha holds 2n values: a_i at 2i and c_i - a_i
    at 2i + 1.  Returns (status, cycles, coordinate steps, f(0), f(w), the first cycle's
    largest |g'|, the last one's), as :func:`.dual.solve`."""
    n = RP.n
    d = RP.d
    w = W.w
    alpha = W.alpha
    index = W.index
    for j in range(d + 1):
        w[j] = 0.0
    npos = 0
    for i in range(n):
        index[i] = i
        if y[i] > 0:
            npos += 1
            c, yi = cp, 1.0
        else:
            c, yi = cn, -1.0
        a0 = min(START_SHARE * c, START_MAX) if c > 0.0 else 0.0
        alpha[2 * i] = a0
        alpha[2 * i + 1] = c - a0
        if a0 != 0.0:                      # w = sum_i a_i y_i x_i at the start
            row_axpy(RP, w, i, a0 * yi)
    f0 = math.log(2.0) * (npos * cp + (n - npos) * cn)
    rng = new_rng(seed)
    inner_eps = INNER_EPS
    inner_min = min(INNER_EPS_MIN, eps)
    gmax0 = 0.0
    gmax = 0.0
    steps = 0
    status = MAX_ITER
    it = 0
    cap = rec_f.shape[1]
    t0 = now() if timing else 0.0
    while it < max_iter:
        if abort[0] != 0:
            status = RUNNING
            break
        record_cycle(RP, y, cp, cn, w, f0, rec_f, rec_act, k, it, 1.0)
        shuffle(index, n, rng)
        gmax = 0.0
        inner_total = 0
        cycle_steps = steps
        for s in range(n):
            i = index[s]
            if y[i] > 0:
                yi, c = 1.0, cp
            else:
                yi, c = -1.0, cn
            if c <= 0.0:
                continue                   # cost 0: no term, a_i stays 0
            a = xsq[i]
            b = yi * row_score(RP, w, i)
            # the member of the pair (a_i, c_i - a_i) the minimum moves towards 0
            i1 = 2 * i
            i2 = 2 * i + 1
            sign = 1.0
            if 0.5 * a * (alpha[i2] - alpha[i1]) + b < 0.0:
                i1, i2 = i2, i1
                sign = -1.0
            z_old = alpha[i1]
            z = z_old
            if c - z < 0.5 * c:
                z = SHRINK * z
            gp = a * (z - z_old) + sign * b + math.log(z / (c - z))
            gmax = max(gmax, abs(gp))
            inner = 0
            while inner <= MAX_INNER:
                if abs(gp) < inner_eps:
                    break
                gpp = a + c / (c - z) / z
                t = z - gp / gpp
                z = SHRINK * z if t <= 0.0 else t
                gp = a * (z - z_old) + sign * b + math.log(z / (c - z))
                inner += 1
            inner_total += inner
            if inner > 0:
                alpha[i1] = z
                alpha[i2] = c - z
                row_axpy(RP, w, i, sign * (z - z_old) * yi)
                steps += 1
        if it == 0:
            gmax0 = gmax
        if it < cap:
            t0 = record_iteration(rec_step, rec_cg, rec_time, k, it, 1.0, steps - cycle_steps, timing, t0)
        it += 1
        if gmax < eps:
            status = CONVERGED
            break
        if inner_total <= n // 10:
            inner_eps = max(inner_min, 0.1 * inner_eps)
    f = primal(RP, y, cp, cn, w)
    record_end(rec_f, rec_act, rec_step, rec_cg, rec_time, k, it, f, 1.0, timing, t0)
    return status, it, steps, f0, f, gmax0, gmax


register_method(LogisticDual, solve)
