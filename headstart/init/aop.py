"""``aop``: average of positives, the paper's mean-separating start (section 4).

w0 = u * pbar + v * xbar, with pbar the mean of the label's positives and xbar the mean
of all instances (bias coordinate included in both), chosen so that

    <w0, pbar> = s   and   <w0, nbar> = t      (defaults s = 1, t = -2),

nbar being the mean of the negatives.  Because |N| nbar = n xbar - |P| pbar, nbar is
never formed: per label this costs one pass over the positives' rows plus O(d).
With alpha = |P| / n, the paper's equations (calc-u) and (calc-v) give

    u = (<xbar,pbar> (t + (s - t) alpha) - s <xbar,xbar>) / (<pbar,xbar>^2 - <pbar,pbar><xbar,xbar>)
    v = (s - u <pbar,pbar>) / <xbar,pbar>.

Supplementary, "What happens if the denominator of aop is zero": if pbar and xbar are
linearly dependent the system has no solution and w0 = 0; if |<xbar,pbar>| << 1,
substitute 0 for it: u = s / <pbar,pbar>, v = (|N| t + |P| s) / (n <xbar,xbar>).
A label with no positive has no pbar: it starts from the bias-only vector that scores
every instance t (the zero vector if there is no bias feature).
"""

from __future__ import annotations

import math

from typing import NamedTuple

import numpy as np

from .._compile import njit
from .base import Initializer, plan_kernel, plan_restriction, register

# Relative thresholds for the two degenerate cases of the supplementary.  Cauchy-Schwarz
# gives den = <p,x>^2 - <p,p><x,x> <= 0 with equality iff p, x are dependent.
DEPENDENT_RTOL = 1e-10
SMALL_XP_RTOL = 1e-8


class AopPlan(NamedTuple):
    xmean: np.ndarray   # mean of all instances, bias coordinate included
    s: float
    t: float


class AverageOfPositives(Initializer):
    name = "aop"
    label_free = True     # (see Initializer.label_free)

    def __init__(self, s: float = 1.0, t: float = -2.0):
        self.s, self.t = float(s), float(t)

    @property
    def sparse_start(self) -> bool:
        # the mean negative scores t: at t <= -1 most negatives start inactive
        return self.t <= -1.0

    def prepare(self, ctx):
        return AopPlan(ctx.xmean, float(self.s), float(self.t))


@njit(cache=True, nogil=True)
def coefficients(pp, xp, xx, npos, n, s, t):
    """(u, v) of the paper's equations, with the supplementary's degenerate cases."""
    alpha = npos / n
    den = xp * xp - pp * xx
    if abs(den) <= DEPENDENT_RTOL * pp * xx or pp == 0.0 or xx == 0.0:
        return 0.0, 0.0
    if abs(xp) <= SMALL_XP_RTOL * math.sqrt(pp * xx):
        return s / pp, ((n - npos) * t + npos * s) / (n * xx)
    u = (xp * (t + (s - t) * alpha) - s * xx) / den
    v = (s - u * pp) / xp
    return u, v


@njit(cache=True, nogil=True)
def mean_separating(P, w, n, psum, npos, xmean, s, t):
    """w0 = u pbar + v xbar from the positives' sum ``psum`` (bias coordinate included);
    for npos > 0."""
    nv = w.size
    inv = 1.0 / npos
    pp = 0.0
    xp = 0.0
    xx = 0.0
    for j in range(nv):
        p = psum[j] * inv
        pp += p * p
        xp += p * xmean[j]
        xx += xmean[j] * xmean[j]
    u, v = coefficients(pp, xp, xx, npos, n, s, t)
    for j in range(nv):
        w[j] = u * psum[j] * inv + v * xmean[j]


@njit(cache=True, nogil=True)
def no_positive_start(P, O, w, t):
    """A label with no positive: the bias-only vector that scores every instance t; the
    zero vector if there is no bias feature or the bias is regularised.

    With an unregularised bias that start is the optimum of the squared hinge (every
    margin beyond 1, f = 0).  With a regularised one (LIBLINEAR's -B) it costs
    (t / bias)^2 / 2 -- 2.0 at t = -2 -- while its gradient, |t| / bias, lies below the
    relative tolerance, which scales with the gradient at zero (about C n): the solve
    stopped at once, at up to 8x the optimum (a checking helper: 2.0 against 0.27 for
    LIBLINEAR -s 2 -c 100 -B 1; 2.0 against 0.0038 on count features at C = 1).  From
    zero it is LIBLINEAR's own problem and path."""
    nv = w.size
    w[:] = 0.0
    biased = P.bias > 0.0 and not P.regularize_bias
    if biased:
        w[nv - 1] = t / P.bias
    O.wx[:] = t if biased else 0.0


def _start(plan, P, O, w, psum, pos, label):
    if pos.size == 0:
        no_positive_start(P, O, w, plan.t)
        return False
    mean_separating(P, w, O.wx.size, psum, pos.size, plan.xmean, plan.s, plan.t)
    return True


def _local(plan, R):
    # on a sub-problem the means are its own: pbar from its positives (the caller's
    # psum), xbar the mean of its rows (R.xmean), so the start separates the sub-problem
    return AopPlan(R.xmean, plan.s, plan.t)


plan_kernel(AopPlan, _start)
plan_restriction(AopPlan, _local)
register("aop", lambda p: AverageOfPositives(p.aop_s, p.aop_t),
         "average of positives: the mean positive scores --s, the mean negative --t (the paper; DiSMEC++ msi)",
         memory=lambda n, nv: 8 * nv)    # the mean instance
