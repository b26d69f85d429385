"""Feedback-driven sparsification (DiSMEC++ ``--sparsify``): per label, a large
pruning threshold tau whose pruned vector w_tau (|w_j| < tau set to 0, the bias kept)
has an objective at most (1 + tol) times the solution's, tol the given percentage / 100.

Like the authors we compare the full objective f = R + sum_i c_i phi (their help text
says "loss"; their code evaluates the objective).  The candidate thresholds are the
weights' magnitudes themselves; we bisect on their sorted order, so the search is exact
among thresholds that change the model and needs about log2(nnz(w)) evaluations, each
one pass over X (the pruned vector's scores) plus O(n + d).  f(w_tau) is not monotone in
tau in general; bisection returns a feasible tau (the last feasible probe), not
necessarily the largest feasible one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._compile import njit
from ..objective import erm
from ..objective._typed import implement
from .base import threshold


class Sparsify(NamedTuple):
    tolerance: float   # allowed relative growth of the objective


@njit(cache=True, nogil=True)
def objective_pruned(P, O, w, tau, wt, scores):
    """f(w_tau), using ``wt`` (n_features + 1) and ``scores`` (n) as scratch."""
    d = w.size - 1
    for j in range(d):
        wt[j] = w[j] if abs(w[j]) >= tau else 0.0
    wt[d] = w[d]
    erm.scores(P, wt, scores)
    return erm.reg_value(P, wt) + erm.loss_sum_at(P, O, scores)


@njit(cache=True, nogil=True)
def largest_threshold(P, O, w, f, tolerance, wt, scores):
    d = w.size - 1
    mags = np.empty(d)
    m = 0
    for j in range(d):
        if w[j] != 0.0:
            mags[m] = abs(w[j])
            m += 1
    if m == 0:
        return 0.0
    a = np.unique(mags[:m])          # ascending, distinct: the thresholds that matter
    bound = (1.0 + tolerance) * f
    # feasible(k): pruning with tau = a[k] (drops a[:k]); k = 0 is the solution itself
    lo = 0
    hi = a.size                      # a.size: every feature weight dropped (tested last)
    tau_all = a[a.size - 1] * 2.0 + 1.0
    if objective_pruned(P, O, w, tau_all, wt, scores) <= bound:
        return tau_all
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if objective_pruned(P, O, w, a[mid], wt, scores) <= bound:
            lo = mid
        else:
            hi = mid
    return a[lo]


implement(threshold, Sparsify,
          lambda plan, P, O, W, f: largest_threshold(P, O, W.w, f, plan.tolerance, W.r, O.xs))
