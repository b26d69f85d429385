"""Squared hinge, max(0, 1 - m)^2: the loss of DiSMEC and of the paper (section 2)."""

from typing import NamedTuple

import numpy as np

from .base import register


class SquaredHinge(NamedTuple):
    pass


def _value(L, m):
    t = 1.0 - m
    if t > 0.0:
        return t * t
    return 0.0


def _d1(L, m):
    t = 1.0 - m
    if t > 0.0:
        return -2.0 * t
    return 0.0


def _d2(L, m):
    # generalised second derivative: 2 on m < 1, 0 beyond (Mangasarian 2002; LIBLINEAR's
    # l2r_l2_svc_fun, the paper section 2)
    if m < 1.0:
        return 2.0
    return 0.0


register("squared-hinge", SquaredHinge, value=_value, d1=_d1, d2=_d2, mines=True,
         curvature_bound=lambda L: 2.0, hinge_quadratic=True,
         # (C v^2)* is a^2 / (4 C), unbounded: LIBLINEAR -s 1's dual (diagonal 1 / (2 C))
         dual=lambda L: (np.inf, 0.5),
         help="max(0, 1-m)^2 (DiSMEC, the paper)")
