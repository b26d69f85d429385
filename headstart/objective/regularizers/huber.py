"""Huber: the smooth stand-in for L1 (DiSMEC++ ``l1``, ``l1-relaxed``, ``huber``):

    r(w) = |w| - eps/2      if |w| > eps
         = w^2 / (2 eps)    otherwise.

Curvature: 1/eps inside (r'' exactly; DiSMEC++ uses half of it there) and 1/|w| outside,
where r'' = 0: the curvature of the parabola through w that majorises |w| (so Newton steps
on the linear part behave like iteratively reweighted least squares, as in the authors'
trainer).  Weights do not become exactly zero; the pruning threshold (--prune or
--sparsify) turns the small ones into zeros.
"""

from typing import NamedTuple

from ..._compile import njit
from .base import epsilon_of, get, register


class Huber(NamedTuple):
    epsilon: float


@njit(cache=True, nogil=True)
def huber_value(eps, w):
    a = abs(w)
    if a > eps:
        return a - 0.5 * eps
    return 0.5 * w * w / eps


@njit(cache=True, nogil=True)
def huber_d1(eps, w):
    if w > eps:
        return 1.0
    if w < -eps:
        return -1.0
    return w / eps


@njit(cache=True, nogil=True)
def huber_d2(eps, w):
    a = abs(w)
    if a > eps:
        return 1.0 / a
    return 1.0 / eps


def _value(R, w):
    return huber_value(R.epsilon, w)


def _d1(R, w):
    return huber_d1(R.epsilon, w)


def _d2(R, w):
    return huber_d2(R.epsilon, w)


def _make(name):
    return lambda p: Huber(epsilon_of(p, get(name)))


for _name, _eps, _help in (("l1", 1e-2, "L1 by its Huber smoothing with epsilon 0.01 (DiSMEC++ l1)"),
                           ("l1-relaxed", 1e-1, "Huber with epsilon 0.1 (DiSMEC++ l1-relaxed)"),
                           ("huber", 1.0, "Huber with epsilon 1 (DiSMEC++ huber)")):
    register(_name, Huber, value=_value, d1=_d1, d2=_d2, help=_help + "; --reg-epsilon overrides",
             make=_make(_name), default_epsilon=_eps)

