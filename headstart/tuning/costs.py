"""The positives' cost per label by cross-validation: LibMultiLabel's ``cost_sensitive``
(per label, for Macro-F1) and ``cost_sensitive_micro`` (one cost for all labels, for
Micro-F1), after the MATLAB tools of Fan & Lin's "A study on threshold selection for
multi-label classification" (2007).

For every candidate cost a (LIBLINEAR's ``-w1 a``: the loss of a label's positives
weighted a, of its negatives 1) the decisions ``score > 0`` of a ``folds``-fold
cross-validation are counted per label over all instances; a label's cost is the
candidate with the best F1 of those decisions (``micro``: the one cost with the best
Micro-F1), the first of equals.  Each (cost, fold) is one one-vs-all training of all
labels, ``len(costs) * folds`` trainings on (folds - 1) / folds of the data.  The
result is a cost file for ``headstart train --weighting file --weights-pos-file``,
which trains the final model.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import ParameterError
from ..metrics import label_f1
from ..params import TrainParams
from .folds import FoldRunner, check_cv, split

#: LibMultiLabel's candidate costs (linear.py, ``_cost_sensitive_one_label``)
COSTS = (1.0, 1.33, 1.8, 2.5, 3.67, 6.0, 13.0)


@dataclass
class Costs:
    """``costs[l]``: the positives' cost of label l; ``f1[l, c]`` the cross-validated
    F1 of label l with ``candidates[c]`` (``micro_f1[c]``: Micro-F1 over all labels)."""

    costs: np.ndarray
    candidates: np.ndarray
    f1: np.ndarray
    micro_f1: np.ndarray
    trainings: int


def cost_trainings(folds: int, costs: Any = COSTS) -> int:
    return folds * len(costs)


def cost_sensitive(X: Any, Y: Any, params: TrainParams | None = None, *, folds: int = 3,
                   costs: Any = COSTS, micro: bool = False, seed: int = 0,
                   progress: Callable[[int], None] | None = None) -> Costs:
    """Per-label (or with ``micro`` one shared) positives' costs for one-vs-all models
    trained with ``params`` on (X, Y), by ``folds``-fold cross-validation of the
    decisions score > 0 (see the module docstring)."""
    params = TrainParams() if params is None else params
    cand = np.asarray(costs, dtype=np.float64).reshape(-1)
    check_cv(params, folds, seed)
    if cand.size == 0 or not np.all(np.isfinite(cand)) or np.any(cand <= 0):
        raise ParameterError(f"parameter costs must be positive numbers, got {cand.tolist()!r}")
    if params.weighting != "none":
        raise ParameterError(f"cost tuning chooses the positives' costs itself: weighting must be 'none', "
                             f"got {params.weighting!r}")
    run = FoldRunner(X, Y, params, progress, min_rows=folds, what=f"{folds} folds")
    n, L = run.n, run.L
    parts = split(np.random.default_rng(seed).permutation(n), folds)
    tp, pp = np.zeros((L, cand.size), np.int64), np.zeros((L, cand.size), np.int64)
    relevant = np.zeros(L, np.int64)
    with tempfile.TemporaryDirectory(prefix="headstart-costs-") as tmp:
        for c, a in enumerate(cand):
            # the training reads per-label costs from a file (weighting "file")
            path = os.path.join(tmp, f"pos-{c}.npy")
            np.save(path, np.full(L, a))
            p = dataclasses.replace(run.params, weighting="file", weights_pos_file=path)
            for val in parts:
                W, b = run.train(np.setdiff1d(np.arange(n), val, assume_unique=True), p)
                t, q, r = run.decision_counts(W, b, val)
                tp[:, c] += t
                pp[:, c] += q
                if c == 0:
                    relevant += r
    f1 = label_f1(tp, pp, relevant[:, None])
    micro_f1 = label_f1(tp.sum(0), pp.sum(0), relevant.sum())
    if micro:
        chosen = np.full(L, cand[int(np.argmax(micro_f1))])
    else:
        chosen = cand[np.argmax(f1, axis=1)]          # argmax: the first of equals
    return Costs(costs=chosen, candidates=cand, f1=f1, micro_f1=micro_f1, trainings=run.trainings)
