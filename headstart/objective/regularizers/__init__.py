"""Regularisers: one module per family, collected into :data:`REGISTRY` on import."""

from __future__ import annotations

import importlib
import pkgutil

from .base import REGISTRY, RegularizerInfo, d1, d2, get, is_l2, value

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _m != "base":
        importlib.import_module(f"{__name__}.{_m}")


def __getattr__(name: str):
    # NAMES: the regulariser names, the default first, read from the registry at each
    # use, so that a strategy registered after this import (from outside the package)
    # is a choice of TrainParams and the command line too
    if name == "NAMES":
        return tuple(sorted(REGISTRY, key=lambda k: (k != "l2", k)))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make(params):
    return REGISTRY[params.regularizer].make(params)


__all__ = ["REGISTRY", "NAMES", "RegularizerInfo", "get", "make", "value", "d1", "d2", "is_l2"]
