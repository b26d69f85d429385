"""``bias``: all feature weights 0, the bias weight set to a constant (paper section 3).

With bias weight -1 (and bias feature 1) every instance scores -1: the minimiser of the
unregularised loss of an all-negative label, but sitting exactly on the kink of the
squared hinge, which makes the first Newton step useless; the paper also tries -0.9
and -2 (Table 1's "bias" column is the -2 variant).
"""

from __future__ import annotations

from typing import NamedTuple

from .base import Initializer, plan_kernel, register


class BiasPlan(NamedTuple):
    value: float


def _start(plan, P, O, w, psum, pos, label):
    w[:] = 0.0
    w[w.size - 1] = plan.value
    O.wx[:] = plan.value * P.bias
    return False


plan_kernel(BiasPlan, _start)


class BiasInit(Initializer):
    name = "bias"
    label_free = True     # (see Initializer.label_free)

    def __init__(self, value: float = -1.0, bias: float = 1.0):
        self.value = float(value)
        self.bias = float(bias)   # the bias feature's value: every instance scores value * bias

    @property
    def sparse_start(self) -> bool:
        # every instance scores value * bias: at <= -1 every negative starts inactive under
        # a loss that mines negatives, as after aop's start, and the direction groups cost
        # time: squared hinge, groups against none, 1-2 threads, 2026-12-02: 5-11% slower
        # on medical, scene, corel5k, bibtex, rcv1-subset1, delicious and debian-deps
        # labels 0:1000 (docs/design.md, "Which runs form direction groups")
        return self.value * self.bias <= -1.0

    def prepare(self, ctx):
        return BiasPlan(float(self.value))


register("bias", lambda p: BiasInit(p.bias_init, p.bias), "feature weights 0, bias weight --bias-init (paper section 3)")
