"""Elastic net: r(w) = (1 - s) * huber_eps(w) + s * w^2 / 2, s the L2 share (DiSMEC++
``elastic-50-50`` and ``elastic-90-10``: s = 0.5 and 0.9, epsilon 0.1).  The L1 part is
the Huber function of :mod:`.huber`, for the same reason as there."""

from typing import NamedTuple

from .base import epsilon_of, get, register
from .huber import huber_d1, huber_d2, huber_value


class ElasticNet(NamedTuple):
    epsilon: float
    l2_share: float


def _value(R, w):
    return (1.0 - R.l2_share) * huber_value(R.epsilon, w) + R.l2_share * 0.5 * w * w


def _d1(R, w):
    return (1.0 - R.l2_share) * huber_d1(R.epsilon, w) + R.l2_share * w


def _d2(R, w):
    return (1.0 - R.l2_share) * huber_d2(R.epsilon, w) + R.l2_share


def _make(name, share):
    def make(p):
        s = share if share is not None else float(p.reg_l2_share)
        return ElasticNet(epsilon_of(p, get(name)), s)
    return make


for _name, _share, _help in (("elastic-50-50", 0.5, "50% Huber-L1 + 50% L2, epsilon 0.1 (DiSMEC++ elastic-50-50)"),
                             ("elastic-90-10", 0.9, "10% Huber-L1 + 90% L2, epsilon 0.1 (DiSMEC++ elastic-90-10)"),
                             ("elastic-net", None, "Huber-L1 + L2 with L2 share --reg-l2-share, epsilon 0.1")):
    register(_name, ElasticNet, value=_value, d1=_d1, d2=_d2, help=_help + "; --reg-epsilon overrides",
             make=_make(_name, _share), default_epsilon=0.1)
