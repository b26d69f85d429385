"""The strategy interface shared by all initialisers, and their registry.

An initialiser has two halves (DiSMEC++ ``training/init/``):

* ``prepare(ctx)``, once, in Python: whatever all labels share (the mean instance, the
  OvA-primal vector, a saved model), returned as a *plan*, a ``NamedTuple`` of arrays and
  numbers whose class selects the per-label code (see :mod:`headstart.objective._typed`);
* the per-label start, attached to the generic :func:`initial_weights` for that plan
  class and inlined into the compiled training loop, which never names a strategy.

To add an initialiser, write one module in this package: a plan class, its per-label
function, an :class:`Initializer` subclass, and a call to :func:`register`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..objective._typed import generic, implement
from ..objective.erm import Problem
from ..params import TrainParams

initial_weights = generic("initial_weights", """(plan, P, O, w, psum, pos, label) -> bool.

Write label ``label``'s start into w (n_features + 1, bias weight last), given its
positives ``pos`` (instance ids, ascending) and their sum ``psum`` (bias coordinate
included).  Either set O.wx = X w and return False, or return True: the caller then
computes X w (possibly for several labels in one sweep over X).""")


@dataclass
class TrainingContext:
    """What prepare() may look at: the problem as the kernels see it, and the labels."""

    problem: Problem
    X: sp.csr_matrix          # canonical float32 CSR, without bias column
    Y: sp.csc_matrix          # labels, column j = positives of label j
    params: TrainParams
    colsum: np.ndarray        # sum of all instances, bias coordinate included (n_features + 1)
    threads: int = 1
    feature_order: object = None   # FeatureOrder when the kernels see renumbered features

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def cost_scale(self) -> float:
        """C of the kernels: the loss weight over the regulariser's scale (see
        :mod:`headstart.objective.regularizers.base`)."""
        return float(self.params.C) / float(self.params.reg_scale)

    @property
    def xmean(self) -> np.ndarray:
        """Mean of all instances, bias coordinate included."""
        return self.colsum / max(self.n, 1)


class Initializer:
    """A strategy: ``prepare`` once, then the compiled kernel computes each label's start."""

    name = "?"
    #: True when the start leaves most instances inactive under a loss that mines
    #: negatives (aop scores the mean negative -2): the solver's active sets stay
    #: sparse, and the trainer then forms no direction groups (trainer.use_groups).
    #: False, the safe default, only costs a first run the groups' compile time.
    sparse_start = False

    def prepare(self, ctx: TrainingContext):  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class InitInfo:
    name: str
    make: Callable[[TrainParams], Initializer]
    help: str
    memory: Callable[[int, int], int]   # (n, n_features + 1) -> bytes its plan keeps (memory estimate)


REGISTRY: dict[str, InitInfo] = {}


def register(name: str, make: Callable[[TrainParams], Initializer], help: str,
             memory: Callable[[int, int], int] = lambda n, nv: 0) -> None:
    REGISTRY[name] = InitInfo(name, make, help, memory)


def plan_kernel(plan_cls: type, impl) -> None:
    """Attach the per-label start of a plan class (see :func:`initial_weights`)."""
    implement(initial_weights, plan_cls, impl)
