"""``zero``: w0 = 0, LIBLINEAR's default start."""

from __future__ import annotations

from typing import NamedTuple

from .base import Initializer, plan_kernel, register


class ZeroPlan(NamedTuple):
    pass


def _start(plan, P, O, w, psum, pos, label):
    w[:] = 0.0
    O.wx[:] = 0.0
    return False


plan_kernel(ZeroPlan, _start)


class ZeroInit(Initializer):
    name = "zero"
    label_free = True     # (see Initializer.label_free)

    def prepare(self, ctx):
        return ZeroPlan()


register("zero", lambda p: ZeroInit(), "w0 = 0 (LIBLINEAR's start, the paper's baseline)")
