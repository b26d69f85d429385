"""Per-label instance costs: the c_+ (positives) and c_- (negatives) of the objective.

For missing labels (Qaraei et al., "Convex surrogates for unbiased loss functions in
extreme classification with missing labels", WWW 2021; DiSMEC++ training/weighting.cpp)
a label's observed positives are a sample with propensity p_l of the true ones, with
p_l from the label's training count by Jain et al.'s model (the one the PSP@k metrics
use, :func:`headstart.metrics.propensities`, A = 0.55 and B = 1.5 by default):

* ``2pm1``: positives weighted 2/p_l - 1, negatives 1 (the unbiased estimate's weights);
* ``p2mp``: positives 1, negatives down-weighted by p_l / (2 - p_l) (the same ratio,
  with the loss scale of the positives unchanged);
* ``file``: one positive and/or one negative cost per label, from ``.npy`` vectors or
  whitespace-separated text (DiSMEC++ ``from-file``); a missing file means costs of 1;
* ``constant``: the same two costs for every label, ``weight_pos`` and ``weight_neg``
  (LIBLINEAR's ``-w1`` and ``-w-1`` on each label's +1 / -1 problem).

The kernels multiply C into both, so a label's problem is
R(w) + sum_i C c_i phi(m_i); the stopping rule uses the weighted grad f(0) (LIBLINEAR
does the same with -wi).  To add a scheme, add a function to :data:`SCHEMES`.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np


def _none(counts, n, params):
    return np.ones(counts.size), np.ones(counts.size)


def _propensities(counts, n, params):
    from ..errors import ParameterError
    from ..metrics import propensities
    if n < 3:
        # C = (ln N - 1)(B + 1)^A <= 0 there: propensities outside (0, 1], negative costs
        raise ParameterError(f"weighting {params.weighting!r} needs at least 3 training instances (Jain et al.'s "
                             f"propensity model is defined for N >= 3), got {n}")
    return np.asarray(propensities(counts, n, params.propensity_a, params.propensity_b), dtype=np.float64)


def _pos_2pm1(counts, n, params):
    p = _propensities(counts, n, params)
    return 2.0 / p - 1.0, np.ones(counts.size)


def _neg_p2mp(counts, n, params):
    p = _propensities(counts, n, params)
    return np.ones(counts.size), p / (2.0 - p)


def _from_file(counts, n, params):
    L = counts.size
    pos = read_costs(params.weights_pos_file, L) if params.weights_pos_file else np.ones(L)
    neg = read_costs(params.weights_neg_file, L) if params.weights_neg_file else np.ones(L)
    return pos, neg


def _constant(counts, n, params):
    return np.full(counts.size, float(params.weight_pos)), np.full(counts.size, float(params.weight_neg))


SCHEMES: dict[str, Callable] = {"none": _none, "2pm1": _pos_2pm1, "p2mp": _neg_p2mp, "file": _from_file,
                                "constant": _constant}
NAMES = tuple(SCHEMES)


def label_costs(params, label_counts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(c_+, c_-) for every label, before C: float64 arrays of len(label_counts)."""
    counts = np.asarray(label_counts, dtype=np.float64)
    pos, neg = SCHEMES[params.weighting](counts, int(n), params)
    return np.ascontiguousarray(pos, dtype=np.float64), np.ascontiguousarray(neg, dtype=np.float64)


def read_costs(path: str | os.PathLike, num_labels: int) -> np.ndarray:
    """One non-negative finite cost per label from ``path``: a .npy vector, or text with
    whitespace-separated numbers.  Errors name the file, line and token."""
    from ..io.labelvec import read_label_values

    return read_label_values(path, num_labels, "label costs", "cost", minimum=0.0)
