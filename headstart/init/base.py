"""The strategy interface shared by all initialisers, and their registry.

An initialiser has two halves (DiSMEC++ ``training/init/``):

* ``prepare(ctx)``, once, in Python: whatever all labels share (the mean instance, the
  OvA-primal vector, a saved model), returned as a *plan*, a ``NamedTuple`` of arrays and
  numbers whose class selects the per-label code (see :mod:`headstart.objective._typed`);
* the per-label start, attached to the generic :func:`initial_weights` for that plan
  class and inlined into the compiled training loop, which never names a strategy.

To add an initialiser, write one module in this package: a plan class, its per-label
function, an :class:`Initializer` subclass, and a call to :func:`register`.  If its plan
holds arrays (per feature or per instance, e.g. the mean instance), the same module also
says how the plan restricts to a sub-problem -- a label's positives plus its shortlist,
or a node of a label tree, in their own row and column numbering -- with
:func:`plan_restriction` (:func:`local_plan`); a plan of numbers only needs none.
Without one, shortlisted training and the tree's small nodes refuse the initialiser by
name (:func:`plan_supported`), before any training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import numpy as np
import scipy.sparse as sp
from numba.core import types as _nbtypes
from numba.extending import overload as _overload

from ..objective._typed import generic, implement
from ..objective.erm import Problem
if TYPE_CHECKING:      # annotations only: headstart.params asks this package for its names
    from ..params import TrainParams

initial_weights = generic("initial_weights", """(plan, P, O, w, psum, pos, label) -> bool.

Write label ``label``'s start into w (n_features + 1, bias weight last), given its
positives ``pos`` (instance ids, ascending) and their sum ``psum`` (bias coordinate
included).  Either set O.wx = X w and return False, or return True: the caller then
computes X w (possibly for several labels in one sweep over X).""", arity=7, returns=True)


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
    labels: np.ndarray | None = None   # the labels trained (ascending), when known: a start that
                                       # holds per-label data prepares those only

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
    #: sparse, and the trainer then forms no direction groups (budget.use_groups).
    #: False, the safe default, only costs a first run the groups' compile time.
    sparse_start = False
    #: True when the start is a function of the label's positives alone (its per-label
    #: kernel ignores ``label``): labels without positives (negatives) of equal costs are
    #: then one problem, solved once per chunk (training/sharing.py).  False, the safe
    #: default, solves each such label itself -- unless :meth:`start_rows` says more.
    label_free = False

    def prepare(self, ctx: TrainingContext):  # pragma: no cover - interface
        raise NotImplementedError

    def start_rows(self, plan) -> tuple | None:
        """For a start that is not ``label_free`` but each label's own row of a matrix,
        taken as it is (a pretrained model's): ``(first label, indptr, indices, data,
        intercept)`` of the rows of ``plan`` (CSR, float32 data and intercepts), labels
        outside them starting from zero.  Labels without positives (negatives) of equal
        costs whose rows are equal, bit for bit, are then one problem too
        (training/sharing.py).  None, the default: each such label is solved itself."""
        return None

    def planned_rows(self, first: int, stop: int) -> tuple | None:
        """The rows of :meth:`start_rows` for labels ``[first, stop)`` without the
        training data, for planning shards and tasks by work (distributed/sharded.py):
        where these are equal the trainer's are (they may differ in the feature order
        and the intercept's scale, not in which labels' rows are equal).  None, the
        default or when they cannot be read: every such label counts as solved."""
        return None


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


# --------------------------------------------------------------------------- sub-problems
class SubProblem(NamedTuple):
    """What a plan needs to be restricted to one sub-problem (see :func:`local_plan`)."""

    feats: np.ndarray    # int32: the plan's feature id of every local column (ascending)
    rows: np.ndarray     # int64: the data set's row id of every local row (ascending)
    xmean: np.ndarray    # float64: mean of the sub-problem's rows, bias coordinate last
    scale: np.ndarray    # float64: per local column, original weight = training weight * scale
    label: int           # the label (global id) whose problem this is


local_plan = generic("local_plan", """(plan, R) -> plan.

The plan an initialiser prepared on the whole data, restricted to the sub-problem R
(:class:`SubProblem`): in R's local feature and row numbering, computed from R's rows
where the initialiser computes from the data (the mean instance).""", arity=2, returns=True)

_RESTRICTED: set[type] = set()


def plan_restriction(plan_cls: type, impl) -> None:
    """Attach the restriction of a plan class to a sub-problem (see :func:`local_plan`)."""
    implement(local_plan, plan_cls, impl)
    _RESTRICTED.add(plan_cls)


def _scalars_only(ty) -> bool:
    return (isinstance(ty, _nbtypes.BaseNamedTuple) and ty.instance_class not in _RESTRICTED
            and all(isinstance(t, (_nbtypes.Number, _nbtypes.Boolean)) for t in ty.types))


@_overload(local_plan, prefer_literal=False)
def _local_plan_of_scalars(plan, R):
    # a plan of numbers only has no rows or columns to renumber: it is its own restriction
    if _scalars_only(plan):
        return lambda plan, R: plan
    return None


def plan_supported(plan) -> bool:
    """Whether :func:`local_plan` can restrict ``plan`` (Python side, before compiling)."""
    if type(plan) in _RESTRICTED:
        return True
    return all(isinstance(v, (bool, int, float, np.number, np.bool_)) for v in plan)
