"""Prediction through the shortlist: candidates from the first stage, scored by the
trained labels only, top-k out.

Per instance the cost is O(K) weight rows, never O(labels): x is scattered once into a
dense per-thread buffer of the features and each candidate's (sparse, pruned) weight
row is dotted with it -- or, for a row much longer than x, x's features are looked up in
it by binary search (O(nnz(x) log nnz(w_l))).  Where the model declares more features
than :data:`BUFFER_MAX` (a hashed or global vocabulary of 2^26 ids: a buffer would be
0.5 GB per block of rows), x and the row are merged as two sorted lists instead
(O(nnz(x) + nnz(w_l))), the products summed in the same order, so the same scores.
Scores are ``x . w_l + intercept_l`` as in :mod:`headstart.prediction.topk` (float64
accumulation, float32 output, ties to the lower label id); candidates the model does
not cover (outside its label range, or in a gap) are skipped; rows with fewer than k
scored candidates are padded with label -1 and score -inf.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._compile import njit
from ..errors import ParameterError
from ..validation import check_finite_csr, check_k, real_matrix
from .._threads import resolve_threads
from .candidates import _blocks, _drain, _push, check_candidates


# a weight row longer than SEARCH_RATIO x nnz(x) is searched (binary search per feature
# of x), a shorter one scanned against the scattered x
SEARCH_RATIO = 16
# the dense buffer of x (float64 per feature, per block of rows) up to this many features
BUFFER_MAX = 1 << 22


@njit(cache=True, nogil=True)
def score_candidates(r0, r1, x_indptr, x_indices, x_data, cand, w_indptr, w_indices, w_data, intercept,
                     first_label, covered, n_features, out):
    """out[r, a] = x_r . w_l + intercept_l (rounded to float32) for every candidate slot
    whose label l is a row of this block of weights (``first_label`` + row, ``covered``);
    other slots are left as they are.  The weights keep their stored dtypes (int32
    indices, float32 values): converting a 670K-label model to int64 / float64 would
    triple its memory; the products are the same (float32 -> float64 is exact)."""
    dense = n_features <= BUFFER_MAX
    buf = np.zeros(n_features if dense else 0)
    nl = intercept.size
    for r in range(r0, r1):
        nx = x_indptr[r + 1] - x_indptr[r]
        if dense:
            for p in range(x_indptr[r], x_indptr[r + 1]):
                buf[x_indices[p]] = x_data[p]
        for a in range(cand.shape[1]):
            lab = cand[r, a]
            j = lab - first_label
            if lab < 0 or j < 0 or j >= nl or not covered[j]:
                continue
            acc = np.float64(intercept[j])
            lo = w_indptr[j]
            up = w_indptr[j + 1]
            if (up - lo) > SEARCH_RATIO * nx:
                # a long weight row (head labels, which are candidates of most instances):
                # look x's few features up in it instead of scanning it
                for p in range(x_indptr[r], x_indptr[r + 1]):
                    f = x_indices[p]
                    q = lo + np.searchsorted(w_indices[lo:up], f)
                    if q < up and w_indices[q] == f:
                        acc += x_data[p] * np.float64(w_data[q])
            elif dense:
                # unsigned position and feature id: no negative-index test per product
                # (prediction/topk.py, _span)
                for q in range(np.uint64(lo), np.uint64(up)):
                    acc += buf[np.uint32(w_indices[q])] * np.float64(w_data[q])
            else:
                # both sorted: the row's entries in order, x's value where x has the feature
                p = x_indptr[r]
                pe = x_indptr[r + 1]
                for q in range(lo, up):
                    f = w_indices[q]
                    while p < pe and x_indices[p] < f:
                        p += 1
                    if p == pe:
                        break
                    if x_indices[p] == f:
                        acc += x_data[p] * np.float64(w_data[q])
            out[r, a] = np.float32(acc)
        if dense:
            for p in range(x_indptr[r], x_indptr[r + 1]):
                buf[x_indices[p]] = 0.0


@njit(cache=True, nogil=True)
def top_scored(r0, r1, cand, scored, k, primary, out_labels, out_scores):
    """The k best scored candidates of rows r0..r1-1 (NaN: not scored), best first; ties
    go to the lower label id (the order of :mod:`headstart.prediction.topk`).  The
    candidates in columns [0, primary) -- the first stage's own K -- rank before the
    others, which are there only to fill k > K slots (frequent labels and the neighbours'
    labels beyond K, :meth:`FirstStage.prediction_candidates`): so a row's first K labels
    do not depend on k (helper-102: with k > K an added frequent label could take the
    top-1 from the shortlist's)."""
    hs = np.empty(k)
    hi = np.empty(k, dtype=np.int64)
    tmp_s = np.empty(k)
    tmp_i = np.empty(k, dtype=np.int64)
    width = cand.shape[1]
    primary = min(primary, width)
    for r in range(r0, r1):
        at = 0
        a0 = 0
        for tier in range(2):
            a1 = primary if tier == 0 else width
            cap = k - at
            size = 0
            for a in range(a0, a1):
                v = scored[r, a]
                if v == v and cap > 0:
                    size = _push(hs, hi, size, cap, np.float64(v), cand[r, a])
            _drain(hs, hi, size, tmp_s[:size], tmp_i[:size])
            for t in range(size):
                out_labels[r, at + t] = tmp_i[t]
                out_scores[r, at + t] = tmp_s[t]
            at += size
            a0 = a1
        for t in range(at, k):
            out_labels[r, t] = -1
            out_scores[r, t] = -np.inf


class CandidateScores:
    """The scores of every row's candidates, filled block of labels by block: a model
    directory can be scored one shard at a time, so prediction holds one shard of weights
    (plus this (n, K) float32 matrix), never the whole model."""

    def __init__(self, X: sp.csr_matrix, candidates: np.ndarray, n_features: int, threads: int | None = None,
                 label_space: int | None = None):
        # the kernels index x's dense buffer by X's column ids and the label arrays by the
        # candidates' ids without bounds checks: both checked here (helper-90: a column id
        # beyond the shape crashed the process)
        X = sp.csr_matrix(real_matrix(X, "X"))
        if not X.has_sorted_indices:
            X = X.sorted_indices()      # the merge and the binary search walk x in order
        check_finite_csr(X, "X")
        if X.shape[1] > n_features:
            raise ParameterError(f"X has {X.shape[1]} features, the model {n_features}")
        self.n_features = int(n_features)
        self.cand = check_candidates(candidates, X.shape[0], label_space)
        self.scored = np.full(self.cand.shape, np.nan, dtype=np.float32)
        self.x = (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64))
        self.threads = resolve_threads(threads)

    def add(self, weights: sp.csr_matrix, intercept: np.ndarray, first_label: int = 0, covered=None) -> None:
        """Score the candidates that are rows of ``weights`` (labels first_label, ...)."""
        W = sp.csr_matrix(weights)
        if not W.has_sorted_indices:
            W = W.sorted_indices()
        if W.shape[1] != self.n_features:
            raise ParameterError(f"weights have {W.shape[1]} columns, the model {self.n_features} features")
        if covered is None:
            covered = np.ones(W.shape[0], dtype=np.bool_)
        b = np.asarray(intercept)
        if b.ndim != 1 or b.size != W.shape[0]:
            raise ParameterError(f"intercept has shape {b.shape} for {W.shape[0]} rows of weights: one per label")
        covered = np.asarray(covered, dtype=np.bool_)
        if covered.shape != (W.shape[0],):
            raise ParameterError(f"covered has shape {covered.shape} for {W.shape[0]} rows of weights")
        w = (W.indptr.astype(np.int64, copy=False), W.indices, W.data)
        _blocks(self.cand.shape[0], self.threads,
                lambda r0, r1: score_candidates(r0, r1, *self.x, self.cand, *w, b, int(first_label), covered,
                                                self.n_features, self.scored))

    def top_k(self, k: int = 5, primary: int | None = None):
        """(labels int32, scores float32), each (n, k); label -1 and score -inf pad rows
        with fewer than k scored candidates.  ``primary``: the candidates in the first
        ``primary`` columns rank before the rest (:func:`top_scored`; default: all alike)."""
        k = check_k(k)
        n, width = self.cand.shape
        primary = width if primary is None else int(primary)
        labels = np.full((n, k), -1, dtype=np.int64)
        scores = np.full((n, k), -np.inf)
        _blocks(n, self.threads, lambda r0, r1: top_scored(r0, r1, self.cand, self.scored, k, primary, labels,
                                                           scores))
        return labels.astype(np.int32), scores.astype(np.float32)


def predict_candidates(weights: sp.csr_matrix, intercept: np.ndarray, X: sp.csr_matrix, candidates: np.ndarray,
                       k: int = 5, *, first_label: int = 0, missing_ranges=(), threads: int | None = None,
                       label_space: int | None = None, primary: int | None = None):
    """Top-k (labels int32, scores float32), each (n, k), of X (already preprocessed, the
    model's features) among each row's ``candidates`` (n, K) global label ids, each in
    [-1, label_space) and none twice in a row (``label_space`` defaults to first_label +
    the rows of ``weights``; a candidate outside those rows is not scored).  With
    ``primary``, the first ``primary`` columns of candidates rank before the others."""
    check_k(k)
    W = sp.csr_matrix(weights)
    if label_space is None:
        label_space = int(first_label) + W.shape[0]
    # a NaN score would be dropped as "not scored" (stored models are checked finite)
    if not (np.isfinite(W.data).all() and np.isfinite(np.asarray(intercept, dtype=np.float64)).all()):
        raise ParameterError("weights and intercepts must be finite")
    covered = np.ones(W.shape[0], dtype=np.bool_)
    for a, b in missing_ranges:
        covered[max(a - first_label, 0): max(b - first_label, 0)] = False
    sc = CandidateScores(X, candidates, W.shape[1], threads, label_space)
    sc.add(W, intercept, first_label, covered)
    return sc.top_k(k, primary)
