"""``mean``: every label starts from minus the mean instance (DiSMEC++ ``--init-mode
mean``), bias coordinate included: every instance scores about -||xbar||^2, a cheap
all-negative guess."""

from __future__ import annotations

from .base import Initializer, register
from .shared import shared_plan


class MeanInit(Initializer):
    name = "mean"
    label_free = True     # (see Initializer.label_free)

    def prepare(self, ctx):
        return shared_plan(ctx.problem, -ctx.xmean)


register("mean", lambda p: MeanInit(), "minus the mean instance (DiSMEC++ mean)",
         memory=lambda n, nv: 8 * (nv + n))   # the shared start and its scores
