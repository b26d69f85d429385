"""``multi-pos`` (DiSMEC++ ``--init-mode multi-pos``): for a label with at most
``max_num_pos`` positives, a start that scores *each* positive about s and the mean
negative about t; for labels with more, the mean-separating start (``aop``).

With few positives the mean of the positives is a poor summary (one outlier moves it).
The start is sought in the span of b_0 = (sum of the negatives) / n and the positives
a_1..a_k (bias coordinate included in all of them): w = alpha_0 b_0 + sum_i alpha_i a_i
with (G + lambda I) alpha = (t, s, ..., s), G the Gram matrix of the basis and lambda =
0.01 (the authors' ridge, which keeps nearly dependent positives solvable).  The Gram
matrix is computed exactly (the authors' multi-pos initialiser in DiSMEC++ drops some
cross terms of G_00 and shifts the index of G_0i).  Cost per label: O(k^2 * row length + d).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._compile import njit
from .aop import mean_separating
from .base import Initializer, plan_kernel, plan_restriction, register

RIDGE = 0.01


class MultiPosPlan(NamedTuple):
    xmean: np.ndarray   # mean of all instances, bias coordinate included
    s: float
    t: float
    max_pos: int
    ridge: float


@njit(cache=True, nogil=True)
def _row_dot_dense(P, i, v):
    """x_i . v over the stored features plus the bias coordinate."""
    acc = 0.0
    for p in range(P.indptr[i], P.indptr[i + 1]):
        acc += P.data[p] * v[P.indices[p]]
    return acc + P.bias * v[v.size - 1]


@njit(cache=True, nogil=True)
def multi_positive(P, w, n, psum, pos, xmean, s, t, ridge):
    """w = alpha_0 b_0 + sum_i alpha_i a_i (see the module text); ``w`` doubles as scratch."""
    nv = w.size
    k = pos.size
    inv_n = 1.0 / n
    G = np.zeros((k + 1, k + 1))
    # G_00 = ||xbar - psum/n||^2
    acc = 0.0
    for j in range(nv):
        b = xmean[j] - psum[j] * inv_n
        acc += b * b
    G[0, 0] = acc
    for a in range(k):
        ia = pos[a]
        # scatter a_a into w, then dot with every a_b (b >= a)
        w[:] = 0.0
        for p in range(P.indptr[ia], P.indptr[ia + 1]):
            w[P.indices[p]] = P.data[p]
        w[nv - 1] = P.bias
        for b in range(a, k):
            G[a + 1, b + 1] = _row_dot_dense(P, pos[b], w)
            G[b + 1, a + 1] = G[a + 1, b + 1]
        g0 = _row_dot_dense(P, ia, xmean) - _row_dot_dense(P, ia, psum) * inv_n
        G[0, a + 1] = g0
        G[a + 1, 0] = g0
    rhs = np.full(k + 1, s)
    rhs[0] = t
    for a in range(k + 1):
        G[a, a] += ridge
    alpha = np.linalg.solve(G, rhs)
    for j in range(nv):
        w[j] = alpha[0] * (xmean[j] - psum[j] * inv_n)
    for a in range(k):
        i = pos[a]
        for p in range(P.indptr[i], P.indptr[i + 1]):
            w[P.indices[p]] += alpha[a + 1] * P.data[p]
        w[nv - 1] += alpha[a + 1] * P.bias


def _start(plan, P, O, w, psum, pos, label):
    n = O.wx.size
    if pos.size > plan.max_pos:
        mean_separating(P, w, n, psum, pos.size, plan.xmean, plan.s, plan.t)
    else:
        multi_positive(P, w, n, psum, pos, plan.xmean, plan.s, plan.t, plan.ridge)
    return True


def _local(plan, R):
    # as aop's: the sub-problem's own mean instance
    return MultiPosPlan(R.xmean, plan.s, plan.t, plan.max_pos, plan.ridge)


plan_kernel(MultiPosPlan, _start)
plan_restriction(MultiPosPlan, _local)


class MultiPositive(Initializer):
    name = "multi-pos"
    label_free = True     # (see Initializer.label_free)

    def __init__(self, s: float, t: float, max_pos: int):
        self.s, self.t, self.max_pos = float(s), float(t), int(max_pos)

    @property
    def sparse_start(self) -> bool:
        return self.t <= -1.0   # as aop's

    def prepare(self, ctx):
        return MultiPosPlan(ctx.xmean, self.s, self.t, self.max_pos, RIDGE)


register("multi-pos", lambda p: MultiPositive(p.aop_s, p.aop_t, p.max_num_pos),
         "labels with at most --max-num-pos positives: each positive scores --s, the mean negative --t; "
         "others as aop (DiSMEC++ multi-pos)", memory=lambda n, nv: 8 * nv)
