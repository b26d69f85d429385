"""Regularisers: one module per family, collected into :data:`REGISTRY` on import."""

from __future__ import annotations

import importlib
import pkgutil

from .._typed import names_attribute
from .base import REGISTRY, RegularizerInfo, d1, d2, get, is_l2, value

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _m != "base":
        importlib.import_module(f"{__name__}.{_m}")

__getattr__ = names_attribute(__name__, REGISTRY, "l2")   # NAMES, read at each use


def make(params):
    return REGISTRY[params.regularizer].make(params)


__all__ = ["REGISTRY", "NAMES", "RegularizerInfo", "get", "make", "value", "d1", "d2", "is_l2"]
