"""Huber-smoothed hinge (DiSMEC++ ``huber-hinge``; its ``hinge`` is this loss with
epsilon 0.1).  With v = max(0, 1 - m):

    phi = v - eps/2          if v > eps     (the hinge, shifted)
        = v^2 / (2 eps)      otherwise      (a parabola joining it to 0 at m = 1)

phi is C^1.  Its curvature is 1/eps on the parabola and 0 on the linear part; like the
authors (margin_losses.h) the Newton method uses 1/v there instead, the curvature of the
parabola through the current point that majorises the line (so the Hessian is positive
on every active instance and a Newton step does not overshoot along the hinge's slope).
"""

from typing import NamedTuple

from .base import register


class HuberHinge(NamedTuple):
    epsilon: float


def _value(L, m):
    v = 1.0 - m
    if v <= 0.0:
        return 0.0
    if v > L.epsilon:
        return v - 0.5 * L.epsilon
    return 0.5 * v * v / L.epsilon


def _d1(L, m):
    v = 1.0 - m
    if v <= 0.0:
        return 0.0
    if v > L.epsilon:
        return -1.0
    return -v / L.epsilon


def _d2(L, m):
    v = 1.0 - m
    if v <= 0.0:
        return 0.0
    if v > L.epsilon:
        return 1.0 / v
    return 1.0 / L.epsilon


def _dual(L):
    # phi is the hinge's Moreau envelope of width eps, so (C phi)*(-a) = -a + eps a^2 / (2 C)
    # on 0 <= a <= C: LIBLINEAR -s 3's box with eps / C on the dual's diagonal (eps = 0:
    # the exact hinge, -s 3 itself; only the dual solver takes that)
    return 1.0, L.epsilon


register("huber-hinge", HuberHinge, value=_value, d1=_d1, d2=_d2, mines=True,
         curvature_bound=lambda L: 1.0 / L.epsilon,
         dual=_dual,
         make=lambda p: HuberHinge(float(p.huber_epsilon)),
         help="hinge smoothed by a parabola on 1-eps < m < 1 (--huber-epsilon; DiSMEC++ huber-hinge, "
              "and its 'hinge' with epsilon 0.1)")
