"""What a regulariser is: R(w) = sum_j r(w_j), a point-wise function of each weight
(DiSMEC++ ``objective/pointwise.h``), as value r, derivative r' and curvature q.

The L2 norm r = w^2 / 2 is special: with it, the objective is the bare quadratic
||w||^2 / 2 on every feature that no active instance touches, which the solver exploits
(see :mod:`headstart.objective.erm`).  ``is_l2`` says so; every other regulariser is
treated on all coordinates.

The regulariser's scale is not a parameter here: minimising s R(w) + C L(w) is
minimising R(w) + (C/s) L(w) (the same minimiser and the same stopping rule, which is
relative to grad f(0)), so the trainer folds it into C and reports objective values
multiplied back by s.

To add a regulariser, write one module in this package that calls :func:`register`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .._typed import generic, implement_once

value = generic("value", "r(w_j)", 2)
d1 = generic("d1", "r'(w_j)", 2)
d2 = generic("d2", "curvature of r at w_j used by the Newton method (r'' or a majorising one)", 2)
is_l2 = generic("is_l2", "True for r = w^2/2 (the solver's split form applies)", 1)


@dataclass(frozen=True)
class RegularizerInfo:
    name: str
    cls: type
    help: str
    make: Callable[[Any], Any]   # TrainParams -> an instance of cls
    default_epsilon: float | None = None
    #: "newton" (the Newton-CG core, which needs value, d1 and d2) or "coordinate"
    #: (newGLMNET over X's columns, headstart.training.coordinate: exact L1 only)
    solver: str = "newton"


REGISTRY: dict[str, RegularizerInfo] = {}


def register(name: str, cls: type, *, value, d1, d2, l2: bool = False, help: str,
             make: Callable[[Any], Any] | None = None, default_epsilon: float | None = None,
             solver: str = "newton") -> None:
    """Declare a regulariser; several names may share one class (presets of its
    parameters): its functions are attached once."""
    flag = bool(l2)
    implement_once(cls, {globals()["value"]: value, globals()["d1"]: d1, globals()["d2"]: d2,
                         globals()["is_l2"]: lambda R: flag})
    REGISTRY[name] = RegularizerInfo(name, cls, help, make or (lambda params: cls()), default_epsilon, solver)


def epsilon_of(params, info: RegularizerInfo) -> float:
    """The regulariser's epsilon: --reg-epsilon if given, else the preset's."""
    eps = getattr(params, "reg_epsilon", None)
    return float(info.default_epsilon if eps is None else eps)


def get(name: str) -> RegularizerInfo:
    return REGISTRY[name]
