"""Exact L1: r(w) = |w| (LIBLINEAR -s 5 / -s 6).  Not differentiable at 0, so the
Newton-CG core cannot take it (that is why DiSMEC++'s ``l1`` is the Huber function of
:mod:`.huber`); it is solved by coordinate descent instead (newGLMNET,
:mod:`headstart.solver.glmnet`, or CDN, :mod:`headstart.solver.cdn`), which sets weights
exactly to zero.  value and d1 are
declared for the objective's bookkeeping; d2 is never used by that solver."""

from typing import NamedTuple

from .base import register


class L1Exact(NamedTuple):
    pass


def _d1(R, w):
    if w > 0.0:
        return 1.0
    if w < 0.0:
        return -1.0
    return 0.0


register("l1-exact", L1Exact, value=lambda R, w: abs(w), d1=_d1, d2=lambda R, w: 0.0, solver="coordinate",
         help="|w| exactly (LIBLINEAR -s 5 / -s 6): coordinate descent (newGLMNET, or CDN with --l1-solver cdn) "
              "from w = 0, exactly sparse weights; --init is not read")
