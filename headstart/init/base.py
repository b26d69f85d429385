"""The strategy interface shared by all initialisers, and the registry."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..objective.erm import Problem
from ..params import TrainParams

# Codes for the compiled dispatch in headstart.training.kernel.
ZERO, BIAS, SHARED, AOP, PRETRAINED = 0, 1, 2, 3, 4

# Everything the per-label kernels may need. Unused fields hold empty arrays so that
# every strategy compiles to the same numba signature.
InitPlan = namedtuple("InitPlan", [
    "code",            # one of the codes above
    "value",           # BIAS: the bias weight
    "shared_w",        # SHARED: the common start vector (n_features + 1)
    "shared_wx",       # SHARED: X @ shared_w
    "xmean",           # AOP: mean of all instances, bias coordinate included (n_features + 1)
    "s", "t",          # AOP: target scores of the positive and negative means
    "pre_indptr", "pre_indices", "pre_data", "pre_intercept",  # PRETRAINED: CSR rows
    "pre_first", "pre_count",                                   # PRETRAINED: label range held
])


def empty_plan(code: int, value: float = 0.0) -> InitPlan:
    z = np.zeros(0, dtype=np.float64)
    return InitPlan(np.int64(code), np.float64(value), z, z, z, np.float64(0.0), np.float64(0.0),
                    np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32),
                    np.zeros(0, dtype=np.float32), np.int64(0), np.int64(0))


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


class Initializer:
    """A strategy: ``prepare`` once, then the compiled kernel computes each label's start."""

    name = "?"

    def prepare(self, ctx: TrainingContext) -> InitPlan:  # pragma: no cover - interface
        raise NotImplementedError


def make_initializer(params: TrainParams) -> Initializer:
    from .aop import AverageOfPositives
    from .bias import BiasInit
    from .ovap import OvAPrimal
    from .pretrained import Pretrained
    from .zero import ZeroInit

    if params.init == "zero":
        return ZeroInit()
    if params.init == "bias":
        return BiasInit(params.bias_init)
    if params.init == "ovap":
        return OvAPrimal(strict=False)
    if params.init == "ovap-strict":
        return OvAPrimal(strict=True)
    if params.init == "aop":
        return AverageOfPositives(params.aop_s, params.aop_t)
    if params.init == "pretrained":
        return Pretrained(params.pretrained)
    raise AssertionError(params.init)  # validated in TrainParams
