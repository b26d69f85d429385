"""Initialisation strategies: where each label's Newton solve starts.

One module per strategy (see :mod:`.base` for the interface); every module of this
package is imported here, so a new strategy needs no edit anywhere else.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import REGISTRY, InitInfo, Initializer, TrainingContext, initial_weights

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _m != "base":
        importlib.import_module(f"{__name__}.{_m}")

def __getattr__(name: str):
    # NAMES: the initialiser names, the default first, read from the registry at each use, so
    # that a strategy registered after this import (from outside the package) is a
    # choice of TrainParams and the command line too
    if name == "NAMES":
        return tuple(sorted(REGISTRY, key=lambda k: (k != "aop", k)))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_initializer(params) -> Initializer:
    return REGISTRY[params.init].make(params)


__all__ = ["REGISTRY", "NAMES", "InitInfo", "Initializer", "TrainingContext", "initial_weights",
           "make_initializer"]
