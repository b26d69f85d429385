"""``zero``: w0 = 0, LIBLINEAR's default start."""

from __future__ import annotations

import numba as nb

from .base import ZERO, Initializer, empty_plan


class ZeroInit(Initializer):
    name = "zero"

    def prepare(self, ctx):
        return empty_plan(ZERO)


@nb.njit(cache=True, nogil=True)
def initial_weights(w, wx):
    w[:] = 0.0
    wx[:] = 0.0
    return False
