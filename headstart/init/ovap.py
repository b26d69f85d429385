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

from ..objective import erm, losses
from ..solver.newton import make_workspace, newton, settings
from .base import Initializer, register
from .shared import shared_plan


class OvAPrimal(Initializer):
    label_free = True     # one start for every label (see Initializer.label_free)

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.name = "ovap-strict" if strict else "ovap"
        self.result = None  # (status, iterations, ...) of the all-negative solve, for reports

    def prepare(self, ctx):
        p = ctx.params
        P = ctx.problem
        O = erm.make_state(ctx.n, ctx.n_features)
        W = make_workspace(ctx.n_features)
        C = ctx.cost_scale
        erm.set_label(O, np.zeros(0, dtype=np.int64), C, C)
        # grad f(0) = C phi'(0) X^T y = -C phi'(0) * colsum for the all-negative label
        gnorm0 = abs(C * losses.get(p.loss).d1_at_zero(p)) * float(np.linalg.norm(ctx.colsum))
        if self.strict:
            tol = p.epsilon * 1.0 / max(ctx.n, 1) * gnorm0
        else:
            tol = p.ovap_epsilon * gnorm0
        empty = np.zeros(0)
        self.result = newton(P, O, W, settings(p), tol, empty, empty, empty, np.zeros(0, dtype=np.int64), empty,
                             False)
        return shared_plan(P, W.w.copy())


def _memory(n: int, nv: int) -> int:
    """The shared start and its scores, plus the one-problem workspace and state of the
    all-negative solve (freed after prepare)."""
    return 8 * (nv + n) + 8 * 9 * nv + (1 + 8 + 8 + 4 + 8 + 8) * n + 8 * nv

register("ovap", lambda p: OvAPrimal(strict=False),
         "the loosely solved all-negative problem (OvA-primal, Fang et al. 2019; paper section 3)", memory=_memory)
register("ovap-strict", lambda p: OvAPrimal(strict=True), "ovap solved as strictly as a real label",
         memory=_memory)
