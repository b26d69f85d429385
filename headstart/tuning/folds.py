"""The cross-validation both tuners run: the training data preprocessed once, folds cut
from it, one one-vs-all training of all labels per fold, and the held-out scores or
decisions of its model."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError
from ..params import TrainParams

#: dense validation scores per block of labels (bytes): the block is B labels x n rows
BLOCK_BYTES = 64 * 2**20


def check_cv(params: TrainParams, folds: Any, seed: Any) -> None:
    """The parameters every tuner needs: folds >= 2, a seed numpy accepts, and every
    label trained in every fold (a time budget would leave labels without a model)."""
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise ParameterError(f"parameter folds must be an integer >= 2, got {folds!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"parameter seed must be an integer >= 0, got {seed!r}")
    if params.timeout > 0:
        raise ParameterError("cross-validation needs every label trained in every fold: parameter timeout "
                             f"must be 0 (no time budget), got {params.timeout!r}")


def split(perm: np.ndarray, folds: int) -> list[np.ndarray]:
    """``folds`` held-out parts of ``perm``, as equal as can be, each sorted (rows of X
    are then read in order)."""
    m = perm.size
    return [np.sort(perm[(f * m) // folds:((f + 1) * m) // folds]) for f in range(folds)]


class FoldRunner:
    """The trainings and held-out scores of a cross-validation on (X, Y) with ``params``.

    Preprocessing (tf-idf, normalisation, transforms, hashing) is fitted once on all of
    the data and the folds are cut from the result, as LibMultiLabel preprocesses before
    its cross-validation; the folds' trainings then run without preprocessing."""

    def __init__(self, X: Any, Y: Any, params: TrainParams, progress: Callable[[int], None] | None,
                 min_rows: int, what: str):
        from ..estimator import prepare_data

        data = prepare_data(X, Y, params)
        if data.n_train < min_rows:
            raise ParameterError(f"{data.n_train} instances are too few for {what} (at least {min_rows} are needed)")
        self.X, self.Y = data.X.tocsr(), sp.csr_matrix(data.Y)
        self.n, self.L = self.Y.shape
        self.params = dataclasses.replace(params, normalize=False, tfidf=False, feature_transform="identity",
                                          hash_buckets=0, remove_no_label_data=False)
        self.progress = progress
        self.trainings = 0
        # labels without a positive in any row: in every fold their cuts and F1 are
        # functions of their own scores alone (see shared_results)
        self.free = np.bincount(self.Y.indices, minlength=self.L)[:self.L] == 0

    def train(self, rows: np.ndarray, params: TrainParams | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
        """(weights, intercept) of all labels trained on ``rows`` (with ``params``
        instead of the runner's own, e.g. other costs)."""
        model, _ = self.fit(rows, params)
        return model.weights, model.intercept

    def fit(self, rows: np.ndarray, params: TrainParams | None = None):
        """(model, training statistics) of all labels trained on ``rows``: the model to
        warm-start the next C from, the statistics to tell whether it moved."""
        from ..estimator import fit_model

        # (no per-iteration trajectories: no tuner reads them, and at a huge label space
        # they were the largest part of a fold's statistics)
        model, stats = fit_model(self.X[rows], self.Y[rows], params or self.params, progress=self.progress,
                                 own_data=True, part=True, trajectories=False)
        self.trainings += 1
        return model, stats

    def decision_counts(self, W: sp.csr_matrix, b: np.ndarray, rows: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per label: true positives, predicted positives and positives of the decisions
        score > 0 on ``rows``."""
        from ..metrics import decision_counts
        from ..prediction.topk import predict_above

        D = predict_above((W, b), self.X[rows], 0.0, threads=self.params.threads, preprocess=False)
        return decision_counts(self.Y[rows], D, 0.5)

    def block_labels(self, n: int) -> int:
        """Labels per block of dense scores on ``n`` instances: the scores and their
        label-major copy within :data:`BLOCK_BYTES`."""
        return max(1, min(self.L, BLOCK_BYTES // max(1, 8 * n)))

    def scores(self, W: sp.csr_matrix, b: np.ndarray, Xv: sp.csr_matrix, out: np.ndarray | None = None
               ) -> np.ndarray:
        """The dense float32 scores of the labels (W, b) on the instances Xv, label-major
        (labels x instances, so that a label's scores are contiguous for the kernels),
        written into ``out`` when given (e.g. a fold's columns of a larger block)."""
        from ..prediction.topk import decision_function

        S = decision_function((W, b), Xv, threads=self.params.threads, preprocess=False,
                              max_memory=max(BLOCK_BYTES, 4 * Xv.shape[0] * W.shape[0]))
        if out is None:
            return np.ascontiguousarray(S.T)
        out[...] = S.T
        return out

    def blocks(self, W: sp.csr_matrix, b: np.ndarray, rows: np.ndarray, labels: np.ndarray | None = None):
        """(sel, S, y_indptr, y_indices) for blocks of ``labels`` (ascending ids; default:
        all): ``sel`` the block's label ids, S their dense float32 scores on ``rows``
        (labels x rows), y_* their positives among ``rows``."""
        Xv = self.X[rows]
        Yv = sp.csc_matrix(self.Y[rows])
        Yv.sort_indices()
        step = self.block_labels(rows.size)
        if labels is None:
            for a in range(0, self.L, step):
                z = min(self.L, a + step)
                yp = (Yv.indptr[a:z + 1] - Yv.indptr[a]).astype(np.int64)
                yi = Yv.indices[Yv.indptr[a]:Yv.indptr[z]].astype(np.int64)
                yield np.arange(a, z), self.scores(W[a:z], b[a:z], Xv), yp, yi
            return
        for a in range(0, labels.size, step):
            sel = labels[a:a + step]
            Yb = Yv[:, sel]
            yield (sel, self.scores(W[sel], b[sel], Xv), Yb.indptr.astype(np.int64),
                   Yb.indices.astype(np.int64))

    def per_label(self, W: sp.csr_matrix, b: np.ndarray, rows: np.ndarray, kernel, outs: list,
                  extra: np.ndarray | None = None) -> list:
        """``kernel(S, y_indptr, y_indices, [extra's rows,] *outs' rows)`` over the labels'
        score blocks on ``rows`` (:meth:`blocks`), for kernels whose result for a label is a
        function of its scores, positives and ``extra`` row alone; labels that may share
        another's result (:meth:`shared_results`) are not scored but take its rows of
        ``outs`` (arrays with a first axis of labels).  Returns ``outs``, shared rows filled."""
        L = self.L
        src = self.shared_results([(W, b)], np.arange(L), extra=extra)
        own = np.flatnonzero(src == np.arange(L))
        for sel, S, yp, yi in self.blocks(W, b, rows, None if own.size == L else own):
            part = [np.empty((sel.size,) + o.shape[1:], dtype=o.dtype) for o in outs]
            given = () if extra is None else (np.ascontiguousarray(extra[sel]),)
            kernel(S, yp, yi, *given, *part)
            for o, p in zip(outs, part):
                o[sel] = p
        return [o[src] for o in outs]

    def shared_results(self, models: list, labels: np.ndarray, extra: np.ndarray | None = None) -> np.ndarray:
        """For each of ``labels`` (ids), the position in ``labels`` of the label whose
        per-label results it may take instead of its own (itself where it must have its
        own), for kernels whose result for a label without positives is a function of
        its scores (and of its row of ``extra``, e.g. its thresholds) alone: the cuts of
        :func:`._kernels.best_cuts` and :func:`._kernels.micromacro_cuts`, the F1 of
        :func:`._kernels.f1_at`.

        A label without a positive in any row whose weight row is empty in every one of
        ``models`` ((W, b) pairs) scores its intercept on every instance: labels of equal
        intercepts (bit for bit, in every model) and equal ``extra`` rows have equal
        scores and so equal results.  In a label space of mostly unused ids these are
        nearly all labels, which then cost one score block per distinct intercept instead
        of a dense block of rows x labels each (2M labels, 300 used, 1,000 rows:
        micromacro 9.8 -> ~3 s, 5,000 rows 35.2 s)."""
        labels = np.asarray(labels, dtype=np.int64)
        src = np.arange(labels.size)
        quiet = self.free[labels]
        for W, _ in models:
            quiet &= W.indptr[labels + 1] == W.indptr[labels]
        q = np.flatnonzero(quiet)
        if q.size < 2:
            return src
        cols = [np.asarray(b)[labels[q]].astype(np.float64) for _, b in models]
        if extra is not None:
            cols.extend(np.asarray(extra, dtype=np.float64)[q].T if np.ndim(extra) == 2 else
                        [np.asarray(extra, dtype=np.float64)[q]])
        key = np.ascontiguousarray(np.column_stack(cols)).view(np.uint64)      # bit patterns: -0.0 is not 0.0
        if np.array_equal(key, np.broadcast_to(key[:1], key.shape)):
            src[q] = q[0]
            return src
        rowkey = key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1]))).ravel()
        _, first, inverse = np.unique(rowkey, return_index=True, return_inverse=True)
        src[q] = q[first[inverse.reshape(-1)]]
        return src
