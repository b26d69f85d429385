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
import threading
import time
from collections import OrderedDict
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
    # copies: read_costs' arrays are read-only, and numba types a read-only array
    # apart, so the trainers' kernels would compile again for them (16 MB, ~5 ms
    # at 2M labels, against the parse it saves)
    pos = np.array(read_costs(params.weights_pos_file, L)) if params.weights_pos_file else np.ones(L)
    neg = np.array(read_costs(params.weights_neg_file, L)) if params.weights_neg_file else np.ones(L)
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


#: the cost files read last: (realpath, size, mtime_ns, inode, labels) -> read-only
#: costs.  One training asks for a file's costs several times (the trainer's costs,
#: the manifest's digest of them, the shard planner's shared labels), each parse
#: ~0.25 s at 2M labels; a few entries, so that memory does not grow with the files
#: a long process reads (cost tuning writes one per candidate)
_CACHE: OrderedDict[tuple, np.ndarray] = OrderedDict()
_CACHE_SIZE = 4
_CACHE_LOCK = threading.Lock()
#: a file changed less than this before it is read is not cached: rewritten in place
#: with the same size within the file system's timestamp granularity (a jiffy on
#: ext4, 2 s on FAT) it would keep its key (git's "racy" files)
_RACY_NS = 2_000_000_000


def _file_key(path: str, num_labels: int) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None             # read_label_values says why, in its words
    return os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino, num_labels


def read_costs(path: str | os.PathLike, num_labels: int) -> np.ndarray:
    """One non-negative finite cost per label from ``path``: a .npy vector, or text with
    whitespace-separated numbers.  Errors name the file, line and token.  Read-only:
    the same array is handed out again while the file is unchanged (same size,
    modification time and inode)."""
    from ..io import labelvec

    path = os.fspath(path)
    key = _file_key(path, int(num_labels))
    if key is not None:
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
            if hit is not None:
                _CACHE.move_to_end(key)
                return hit
    a = labelvec.read_label_values(path, num_labels, "label costs", "cost", minimum=0.0)
    a.flags.writeable = False
    # cached only if the file did not change while it was read, nor just before
    if key is not None and _file_key(path, int(num_labels)) == key and time.time_ns() - key[2] > _RACY_NS:
        with _CACHE_LOCK:
            _CACHE[key] = a
            _CACHE.move_to_end(key)
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return a
