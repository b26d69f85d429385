"""Margin losses: one module per loss, collected into :data:`REGISTRY` on import."""

from __future__ import annotations

import importlib
import pkgutil

from .._typed import names_attribute
from .base import (REGISTRY, LossInfo, curvature_bound, d1, d2, derivatives, dual_box, hinge_quadratic, mines,
                   value, value_and_derivatives)

# every module of this package declares one loss (see base.py); import them all, in a
# fixed order, so that a new loss needs no edit here
for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _m != "base":
        importlib.import_module(f"{__name__}.{_m}")

__getattr__ = names_attribute(__name__, REGISTRY, "squared-hinge")   # NAMES, read at each use


def get(name: str) -> LossInfo:
    return REGISTRY[name]


def make(params):
    """The kernels' loss tuple for these training parameters."""
    return REGISTRY[params.loss].make(params)


__all__ = ["REGISTRY", "NAMES", "LossInfo", "get", "make", "value", "d1", "d2", "derivatives", "value_and_derivatives", "mines",
           "hinge_quadratic", "curvature_bound", "dual_box"]
