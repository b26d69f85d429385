"""Per-label decision thresholds by cross-validation: SCut with the fbr fallback, the
method of LibMultiLabel's ``train_thresholding`` up to version 0.3.3 (from 0.4.0 it is
another method, "micromacro-freq"; docs/benchmarks.md compares both) (Fan & Lin, "A study on threshold
selection for multi-label classification", 2007; SCut: Yang, SIGIR 2001).

A one-vs-all classifier decides ``score > 0``; for a rare label that threshold is
badly placed (the loss is dominated by the negatives), which is why Macro-F1 rises
when every label gets its own threshold.  The thresholds are chosen on held-out
instances, never on the ones a model was trained on:

* SCut (one fold): the threshold with the best F1 on the fold's instances;
* fbr: if that F1 is not above ``fbr``, the label's cut is not trusted and its
  threshold becomes one that predicts nothing in that fold (just above its largest
  score, never below 0: :func:`headstart.tuning._kernels._no_decision`) -- rare labels
  otherwise get a threshold that fits one or two held-out positives;
* ``scutfbr(rows, fbr)``: the mean over ``folds`` inner folds of those thresholds;
* ``fbr`` itself is chosen per label from ``fbr_values`` by an outer cross-validation
  (the mean F1 of ``scutfbr`` on the outer folds' held-out instances), ties to the
  largest value, and the final threshold is ``scutfbr(all rows, the chosen fbr)``.

That is LibMultiLabel's nested procedure.  Where it runs one LIBLINEAR problem per
label and fold, here each fold is one one-vs-all training of all labels at once (the
same folds for every label, which sharing the trainings needs), so the cost is
``folds * (folds + 1) + folds`` trainings on 4/9, 2/3 or all of the data: about 9
full trainings for 3 folds.  The model to use the thresholds with is the ordinary one
trained on all the data with the same parameters (``headstart train``), as in
LibMultiLabel.

Preprocessing (tf-idf, normalisation, transforms, hashing) is fitted once on all the
training data and the folds are cut from the result, as LibMultiLabel preprocesses
before its cross-validation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import ParameterError
from ..params import TrainParams
from ._kernels import best_cuts, f1_at, micromacro_cuts
from .folds import FoldRunner, check_cv, split

#: LibMultiLabel's candidate fbr values (linear.py, ``_thresholding_one_label``, <= 0.3.3)
FBR_VALUES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


@dataclass
class Thresholds:
    """The result: ``thresholds[l]`` for every label of the label space (decide
    ``score > thresholds[l]``), the fbr chosen per label, and the mean outer-fold F1
    of every fbr value (labels x values)."""

    thresholds: np.ndarray
    fbr: np.ndarray
    fbr_values: np.ndarray
    outer_f1: np.ndarray
    trainings: int

    def __array__(self, dtype=None, copy=None):
        # the record stands for its thresholds wherever a vector is expected
        # (``predict(X, threshold=scutfbr(...))``), as micromacro's plain array does
        t = self.thresholds if dtype is None else self.thresholds.astype(dtype)
        return t.copy() if copy else t


def trainings_needed(folds: int) -> int:
    """How many one-vs-all trainings :func:`scutfbr` runs for ``folds`` folds."""
    return folds * (folds + 1) + folds


def scutfbr(X: Any, Y: Any, params: TrainParams | None = None, *, folds: int = 3,
            fbr_values: tuple[float, ...] | np.ndarray = FBR_VALUES, seed: int = 0,
            progress: Callable[[int], None] | None = None) -> Thresholds:
    """Per-label thresholds of one-vs-all models trained with ``params`` on (X, Y), by
    nested ``folds``-fold cross-validation (see the module docstring).

    ``progress`` is called with the number of labels of each training as it finishes
    (``trainings_needed(folds) * L`` in all)."""
    params = TrainParams() if params is None else params
    fbr_values = np.asarray(fbr_values, dtype=np.float64).reshape(-1)
    check_cv(params, folds, seed)
    if fbr_values.size == 0 or not np.all(np.isfinite(fbr_values)) or np.any((fbr_values < 0) | (fbr_values >= 1)):
        raise ParameterError(f"parameter fbr_values must be numbers in [0, 1), got {fbr_values.tolist()!r}")
    run = FoldRunner(X, Y, params, progress, min_rows=folds * folds, what=f"{folds} x {folds} nested folds")
    n, L = run.n, run.L
    rng = np.random.default_rng(seed)

    outer = split(rng.permutation(n), folds)
    f1_sum = np.zeros((L, fbr_values.size))
    for val in outer:
        train = np.setdiff1d(np.arange(n), val, assume_unique=True)
        t_fbr = _inner_thresholds(run, train, fbr_values[None, :], folds, rng)        # L x values
        W, b = run.train(train)
        F, = run.per_label(W, b, val, f1_at, [np.empty_like(t_fbr)], extra=t_fbr)
        f1_sum += F
    mean_f1 = f1_sum / folds
    # the largest fbr among the best; where every F1 is 0 the smallest (LibMultiLabel)
    best = fbr_values.size - 1 - np.argmax(mean_f1[:, ::-1], axis=1)
    chosen = fbr_values[best]
    chosen[mean_f1.max(axis=1) == 0] = fbr_values.min()
    final = _inner_thresholds(run, np.arange(n), chosen[:, None], folds, rng)[:, 0]
    return Thresholds(thresholds=final, fbr=chosen, fbr_values=fbr_values, outer_f1=mean_f1,
                      trainings=run.trainings)


def _inner_thresholds(run: FoldRunner, rows: np.ndarray, fbr: np.ndarray, folds: int,
                      rng: np.random.Generator) -> np.ndarray:
    """scutfbr(rows): for each label (rows of ``fbr``, or one row broadcast) and fbr
    value, the mean over ``folds`` folds of ``rows`` of the fold's SCut threshold when its
    F1 is above fbr, else of the fold's no-decision threshold."""
    L = run.L
    acc = np.zeros((L, fbr.shape[1]))
    for val_local in split(rng.permutation(rows.size), folds):
        val = rows[val_local]
        train = np.setdiff1d(rows, val, assume_unique=True)
        W, b = run.train(train)
        t, f, top = run.per_label(W, b, val, best_cuts, [np.empty(L) for _ in range(3)])
        acc += np.where(f[:, None] > fbr, t[:, None], top[:, None])
    return acc / folds


def micromacro(X: Any, Y: Any, params: TrainParams | None = None, *, folds: int = 3, seed: int = 0,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
    """Per-label thresholds by the micromacro-freq method (Li, Lin et al., "On the
    thresholding strategy for infrequent labels in multi-label classification", CIKM
    2023; LibMultiLabel's ``train_thresholding`` from version 0.4): one ``folds``-fold
    cross-validation; labels in decreasing frequency (ties: lower id first), each label's
    cut in each fold maximising Micro-F1 of the counts so far plus its own F1 share (see
    :func:`headstart.tuning._kernels.micromacro_cuts`), its threshold the mean of its
    folds'.  ``folds`` trainings on (folds - 1) / folds of the data; with the same folds
    for every label (LibMultiLabel draws them per label).  Returns one threshold per
    label (decide score > threshold)."""
    params = TrainParams() if params is None else params
    check_cv(params, folds, seed)
    run = FoldRunner(X, Y, params, progress, min_rows=folds, what=f"{folds} folds")
    n, L = run.n, run.L
    parts = split(np.random.default_rng(seed).permutation(n), folds)
    models = [run.train(np.setdiff1d(np.arange(n), val, assume_unique=True)) for val in parts]
    rows = np.concatenate(parts)                  # the held-out rows, fold after fold
    offsets = np.concatenate([[0], np.cumsum([p.size for p in parts])]).astype(np.int64)
    Yv = run.Y[rows].tocsc()
    Yv.sort_indices()
    counts = np.diff(Yv.indptr)
    order = np.lexsort((np.arange(L), -counts))
    # the labels without positives come last, and each one's cuts are a function of its
    # scores alone (the counts so far only weigh cuts below a positive): labels of equal
    # constant scores take one another's threshold (FoldRunner.shared_results)
    z = int(np.count_nonzero(counts))
    tail = order[z:]
    src = run.shared_results(models, tail)
    scored = np.concatenate([order[:z], tail[src == np.arange(tail.size)]])
    Xf = [run.X[val] for val in parts]
    stats = np.zeros(4)
    thresholds = np.zeros(L)
    step = run.block_labels(n)
    for a in range(0, scored.size, step):
        labels = scored[a:a + step]
        S = np.empty((labels.size, n), dtype=np.float32)
        for f, ((W, b), Xv) in enumerate(zip(models, Xf)):
            run.scores(W[labels], b[labels], Xv, out=S[:, offsets[f]:offsets[f + 1]])
        Yb = Yv[:, labels]
        t = np.empty(labels.size)
        micromacro_cuts(S, offsets, Yb.indptr.astype(np.int64), Yb.indices.astype(np.int64), stats, t)
        thresholds[labels] = t
    thresholds[tail] = thresholds[tail[src]]
    return thresholds
