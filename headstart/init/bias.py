"""``bias``: all feature weights 0, the bias weight set to a constant (paper section 3).

With bias weight -1 (and bias feature 1) every instance scores -1: the minimiser of the
unregularised loss of an all-negative label, but sitting exactly on the kink of the
squared hinge, which makes the first Newton step useless; the paper also tries -0.9
and -2 (Table 1's "bias" column is the -2 variant).
"""

from __future__ import annotations

import numba as nb

from .base import BIAS, Initializer, empty_plan


class BiasInit(Initializer):
    name = "bias"

    def __init__(self, value: float = -1.0):
        self.value = float(value)

    def prepare(self, ctx):
        return empty_plan(BIAS, self.value)


@nb.njit(cache=True, nogil=True)
def initial_weights(w, wx, value, bias):
    w[:] = 0.0
    w[w.size - 1] = value
    wx[:] = value * bias
    return False
