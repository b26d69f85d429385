"""Initialisation strategies: where each label's Newton solve starts.

One module per strategy (see :mod:`.base` for the interface); every module of this
package is imported here, so a new strategy needs no edit anywhere else.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..objective._typed import names_attribute
from .base import REGISTRY, InitInfo, Initializer, TrainingContext, initial_weights

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _m != "base":
        importlib.import_module(f"{__name__}.{_m}")

__getattr__ = names_attribute(__name__, REGISTRY, "aop")   # NAMES, read at each use


def make_initializer(params) -> Initializer:
    return REGISTRY[params.init].make(params)


__all__ = ["REGISTRY", "NAMES", "InitInfo", "Initializer", "TrainingContext", "initial_weights",
           "make_initializer"]
