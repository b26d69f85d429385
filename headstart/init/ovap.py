"""``ovap`` (OvA-primal, Fang et al. 2019): start every label from the solution of one
virtual label that has no positive instance at all.

The all-negative problem is solved once, from zero.  Its stopping rule matters (paper
section 3 and supplementary): the loose ||grad|| <= 0.01 ||grad f(0)|| gives a much
better start than solving it as strictly as a real label (``ovap-strict``, with the
label's own rule epsilon * 1/n * ||grad f(0)||), whose solution puts every instance
close to margin 1 -- the same trap as bias = -1.
"""

from __future__ import annotations

import numpy as np

from ..objective import losses
from ..objective.erm import scores
from ..solver.newton import Settings, make_workspace, newton
from .base import SHARED, Initializer, empty_plan


def solver_settings(params) -> Settings:
    return Settings(np.int64(params.max_iter), np.float64(params.cg_epsilon), np.float64(params.pcg_alpha),
                    np.float64(params.ls_eta), np.int64(params.ls_max_steps))


class OvAPrimal(Initializer):
    def __init__(self, strict: bool = False):
        self.strict = strict
        self.name = "ovap-strict" if strict else "ovap"
        self.result = None  # (status, iterations, ...) of the all-negative solve, for reports

    def prepare(self, ctx):
        p = ctx.params
        W = make_workspace(ctx.n, ctx.n_features)
        W.y[:] = -1.0
        # grad f(0) = C phi'(0) X^T y = -C phi'(0) * colsum for the all-negative label
        gnorm0 = abs(p.C * losses.d1_at_zero(ctx.problem.loss)) * float(np.linalg.norm(ctx.colsum))
        if self.strict:
            tol = p.epsilon * 1.0 / max(ctx.n, 1) * gnorm0
        else:
            tol = p.ovap_epsilon * gnorm0
        empty = np.zeros(0)
        self.result = newton(ctx.problem, W, solver_settings(p), tol, empty, empty, empty,
                             np.zeros(0, dtype=np.int64), empty, False)
        plan = empty_plan(SHARED)
        wx = np.empty(ctx.n)
        scores(ctx.problem, W.w, wx)
        return plan._replace(shared_w=W.w.copy(), shared_wx=wx)
