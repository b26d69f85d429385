"""L2: r(w) = w^2 / 2 (LIBLINEAR, DiSMEC, the paper)."""

from typing import NamedTuple

from .base import register


class L2(NamedTuple):
    pass


register("l2", L2, value=lambda R, w: 0.5 * w * w, d1=lambda R, w: w, d2=lambda R, w: 1.0, l2=True,
         help="w^2/2 (the default)")
