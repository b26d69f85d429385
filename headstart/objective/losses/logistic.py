"""Logistic loss, log(1 + exp(-m)) (LIBLINEAR -s 0, and -s 7 by its dual).  Every instance stays active: there
is no implicit negative mining, so each Newton iteration touches all of X."""

import math
from typing import NamedTuple

from .base import register


class Logistic(NamedTuple):
    pass


def _value(L, m):
    # written so that neither branch overflows
    if m >= 0.0:
        return math.log1p(math.exp(-m))
    return -m + math.log1p(math.exp(m))


def _d1(L, m):
    # -1 / (1 + exp(m)) = sigmoid(m) - 1
    if m >= 0.0:
        e = math.exp(-m)
        return -e / (1.0 + e)
    return -1.0 / (1.0 + math.exp(m))


def _d2(L, m):
    e = math.exp(-abs(m))
    return e / ((1.0 + e) * (1.0 + e))


def _derivatives(L, m):
    # _d1 and _d2 from one exp (exp(-|m|) is the exp either branch of _d1 takes): the
    # objective asks for both at every instance of every iteration, and with no negative
    # mining that is every instance; the same values bit for bit
    e = math.exp(-abs(m))
    if m >= 0.0:
        g = -e / (1.0 + e)
    else:
        g = -1.0 / (1.0 + e)
    return g, e / ((1.0 + e) * (1.0 + e))


def _value_and_derivatives(L, m):
    # _value and _derivatives from one exp: both branches of _value are
    # max(-m, 0) + log1p(exp(-|m|)); the same values bit for bit
    e = math.exp(-abs(m))
    if m >= 0.0:
        v = math.log1p(e)
        g = -e / (1.0 + e)
    else:
        v = -m + math.log1p(e)
        g = -1.0 / (1.0 + e)
    return v, g, e / ((1.0 + e) * (1.0 + e))


register("logistic", Logistic, value=_value, d1=_d1, d2=_d2, derivatives=_derivatives,
         value_and_derivatives=_value_and_derivatives, mines=False, curvature_bound=lambda L: 0.25,
         # its dual is not a box (entropy terms): solver/dual_lr.py, LIBLINEAR -s 7
         own_dual=True,
         help="log(1 + exp(-m)) (LIBLINEAR -s 0)")
