"""One start vector for every label (``ovap`` and ``mean`` prepare one): copied, with
its scores X w0 computed once in ``prepare``."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..objective.erm import scores
from .base import plan_kernel, plan_restriction


class SharedPlan(NamedTuple):
    w: np.ndarray     # n_features + 1
    wx: np.ndarray    # X w


def _start(plan, P, O, w, psum, pos, label):
    for j in range(w.size):
        w[j] = plan.w[j]
    wx = O.wx
    for i in range(wx.size):
        wx[i] = plan.wx[i]
    return False


def _local(plan, R):
    # the shared vector was computed on the training columns: gathered, not rescaled;
    # a sub-problem's rows are whole rows of X, so their scores are the shared ones
    nf = R.feats.size
    w = np.empty(nf + 1)
    for q in range(nf):
        w[q] = plan.w[R.feats[q]]
    w[nf] = plan.w[plan.w.size - 1]
    wx = np.empty(R.rows.size)
    for r in range(R.rows.size):
        wx[r] = plan.wx[R.rows[r]]
    return SharedPlan(w, wx)


plan_kernel(SharedPlan, _start)
plan_restriction(SharedPlan, _local)


def shared_plan(problem, w: np.ndarray) -> SharedPlan:
    w = np.ascontiguousarray(w, dtype=np.float64)
    wx = np.empty(problem.indptr.size - 1)
    scores(problem, w, wx)
    return SharedPlan(w, wx)
