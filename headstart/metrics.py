"""Evaluation metrics for extreme multi-label classification.

Inputs
------
``Y_true``
    the ground truth, an ``n x L`` scipy sparse matrix (CSR preferred; any sparse
    format or a dense array is converted).  Every *stored non-zero* entry is a relevant
    label; values are not otherwise looked at (duplicates are merged, explicit zeros
    ignored).  The caller's matrix is never modified.
``labels``
    the ranked predictions, an ``n x k`` integer array: ``labels[i, 0]`` is the
    best-scoring label of instance ``i``.  ``-1`` marks an empty slot ("no
    prediction"); an empty slot keeps its rank position and is never a hit.  A row
    must not repeat a label (checked; :class:`~headstart.errors.DataFormatError`).
    Asking for a ``k`` larger than ``labels.shape[1]`` is allowed: the missing
    columns are empty slots.  Predictions given as a score matrix are turned into
    this form with :func:`topk_from_scores`.

Notation used in the docstrings: ``y_i`` is the set of relevant labels of instance
``i`` (``|y_i|`` its size), ``r_ij`` the label in rank ``j = 1..k`` of its prediction
(``-1`` if empty), ``h_ij = 1[r_ij in y_i]``, ``n`` the number of test instances,
``w_l = 1 / p_l`` the inverse propensity of label ``l``, and
``D(m) = sum_{j=1..m} 1 / log2(j + 1)`` the ideal DCG of ``m`` hits.

Conventions (chosen to reproduce pyxclib, ``xclib/evaluation/xc_metrics.py``, the
reference implementation used for the Extreme Classification Repository):

* **Instances without any relevant label stay in the average** for P@k, nDCG@k and
  R@k and contribute 0 (pyxclib divides by ``n`` = all rows; it only drops such rows
  when ``Metrics(remove_invalid=True)`` is asked for, which is not the default).  For
  nDCG pyxclib's normaliser of such a row is ``D(k)`` (an index of ``-1`` into its
  cumulative-discount table, clipped by ``min(., D(k))``) and the DCG is 0, so the
  row scores 0; for R@k pyxclib replaces the divisor ``|y_i| = 0`` by 1, again 0.
* **PSP@k and PSnDCG@k are ratios of means**, not means of per-instance ratios:
  pyxclib returns ``_precision(weighted hits) / _precision(best weighted hits)`` and
  ``_ndcg(weighted hits) / _ndcg(best weighted hits)``, each ``_precision`` /
  ``_ndcg`` being a mean over all ``n`` instances.  The "best" ranking puts an
  instance's own relevant labels in decreasing order of ``w_l`` (ties do not change
  the value).  If the test set has no relevant label at all the ratio is 0/0 and
  ``nan`` is returned.
* **Propensities** follow Jain et al. (2016) exactly as pyxclib's
  ``compute_inv_propesity``: natural logarithm, ``N`` = number of rows of the
  training label matrix (instances without labels included), and the weight used in
  the metrics is ``1 / p_l = 1 + C (N_l + B)^-A``.  This module's
  :func:`propensities` returns ``p_l`` itself (a number in (0, 1] for ``N >= 3``);
  the PS metrics take ``p_l`` and invert it.
* **Coverage@k** is not in pyxclib.  It follows napkinXC's ``coverage_at_k``
  (``python/napkinxc/measures.py``) and the usage in the tail-label literature: the
  number of distinct labels that are a hit (relevant *and* in the top k) for at least
  one test instance, divided by the number of distinct labels that are relevant for at
  least one test instance.  Labels that never occur in the test set cannot be covered
  and are therefore left out of the denominator.

* **RP@k and the F1 scores** follow LibMultiLabel (``libmultilabel/linear/metrics.py``),
  whose users report them: R-precision ``RP@k = mean_i hits_i@k / min(k, |y_i|)``, an
  instance without relevant labels counting 0; Micro-F1 ``2 sum TP / sum (2 TP + FP +
  FN)``, Macro-F1 the mean over all ``L`` labels of ``2 TP_l / (2 TP_l + FP_l + FN_l)``
  (0/0 counted as 0), Another-Macro-F1 the harmonic mean of macro precision and macro
  recall (each a mean over all ``L`` labels, 0/0 counted as 0), the decisions being
  ``score > threshold`` (0: the sign of the linear classifier).  Every declared label is
  in those means, so on a label space most of whose labels occur in no test instance (and
  are never decided) Macro-F1 is small whatever the classifiers do: Test-Label-Macro-F1
  (:func:`macro_f1_over_test_labels`, not LibMultiLabel's) is the mean of the same per-label F1
  over the labels with at least one relevant test instance only (a label decided only
  where it is not relevant is then left out, as it is out of Coverage@k's denominator).

Everything is vectorised over instances (no Python loop per instance) and never
builds a dense ``n x L`` array; memory is ``O(nnz(Y_true) + n k + L)``.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import scipy.sparse as sp

from .errors import DataFormatError, ParameterError
from .validation import check_sparse_structure

__all__ = [
    "topk_from_scores",
    "label_counts",
    "propensities",
    "precision_at_k",
    "ndcg_at_k",
    "recall_at_k",
    "psprecision_at_k",
    "psndcg_at_k",
    "coverage_at_k",
    "rprecision_at_k",
    "evaluate",
    "abandonment_at_k",
    "topk_confusion",
    "confusion_metrics",
    "dismec_metrics",
    "binary_precision_recall",
    "f1_scores",
    "decision_counts",
    "f1_from_counts",
    "macro_f1_over_test_labels",
]

# Rows of a dense score matrix handled at once by topk_from_scores / binary_precision_recall
# are chosen so that one chunk holds about this many entries.
_CHUNK_ENTRIES = 1 << 22


# --------------------------------------------------------------------------- checks
def _check_k(k, name: str = "k") -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def capped_k(k: int, labels: int) -> int:
    """The k of a ranking of ``labels`` labels: ``k`` cut to ``labels``.  A k beyond the
    labels has no more to rank, and P@k's divisor k would count the missing slots as
    misses; every command (predict, evaluate, experiment) reports P@labels instead."""
    return min(k, labels)


def _check_ks(ks) -> list[int]:
    ks = list(ks)
    if not ks:
        raise ParameterError("ks must contain at least one k")
    ks = [_check_k(k, "each k in ks") for k in ks]
    if len(set(ks)) != len(ks):
        raise ParameterError(f"ks must not repeat a value, got {ks}")
    return ks


def _discounts(k: int) -> np.ndarray:
    """``1 / log2(j + 1)`` for ranks ``j = 1..k``."""
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


class _Truth:
    """Ground truth in canonical CSR form plus the lookup structures the metrics share."""

    def __init__(self, Y, name: str = "Y_true"):
        if sp.issparse(Y):
            if Y.ndim != 2:
                raise DataFormatError(f"{name} must be two-dimensional, got shape {Y.shape}")
            check_sparse_structure(Y, name)
            Y = Y.tocsr()
            if not (Y.has_canonical_format and (Y.data.size == 0 or np.all(Y.data != 0))):
                Y = Y.copy()  # never modify the caller's matrix
                Y.sum_duplicates()
                Y.eliminate_zeros()
        else:
            arr = np.asarray(Y)
            if arr.ndim != 2:
                raise DataFormatError(f"{name} must be a two-dimensional matrix, got shape {arr.shape}")
            Y = sp.csr_matrix(arr)
            Y.eliminate_zeros()
        self.n, self.L = (int(s) for s in Y.shape)
        if self.n == 0:
            raise DataFormatError(f"{name} has no rows; there is nothing to evaluate")
        if self.n * self.L >= 2 ** 62:
            raise DataFormatError(f"{name} of shape {Y.shape} is too large to index with int64 keys")
        self.indptr = Y.indptr.astype(np.int64, copy=False)
        self.indices = Y.indices.astype(np.int64, copy=False)
        self.row_counts = np.diff(self.indptr)
        self.nnz = int(self.indices.size)
        self.rows = np.repeat(np.arange(self.n, dtype=np.int64), self.row_counts)
        # canonical CSR => (row, column) pairs are in increasing order => keys are sorted
        self.keys = self.rows * self.L + self.indices
        self._col_counts = None

    @property
    def col_counts(self) -> np.ndarray:
        if self._col_counts is None:
            self._col_counts = np.bincount(self.indices, minlength=self.L)
        return self._col_counts

    def contains(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Boolean array: is ``(rows[t], cols[t])`` a relevant pair?  ``cols`` must be >= 0."""
        if self.nnz == 0 or rows.size == 0:
            return np.zeros(rows.shape, dtype=bool)
        q = rows.astype(np.int64, copy=False) * self.L + cols
        pos = np.searchsorted(self.keys, q)
        np.minimum(pos, self.nnz - 1, out=pos)
        return self.keys[pos] == q


def _prepare_labels(labels, truth: _Truth, k: int) -> np.ndarray:
    """Validate the ranked predictions and return them as an ``n x k`` int64 array."""
    lab = np.asarray(labels)
    if lab.ndim != 2:
        raise DataFormatError(f"labels must be a two-dimensional (n x k) array, got shape {lab.shape}")
    if lab.dtype == np.bool_ or not np.issubdtype(lab.dtype, np.integer):
        raise DataFormatError(f"labels must be an integer array (label ids, -1 = empty), got dtype {lab.dtype}")
    if lab.shape[0] != truth.n:
        raise DataFormatError(
            f"labels has {lab.shape[0]} rows but Y_true has {truth.n}; they must describe the same instances")
    lab = lab[:, :k].astype(np.int64, copy=False)
    if lab.size:
        lo, hi = int(lab.min()), int(lab.max())
        if lo < -1 or hi >= truth.L:
            bad = lo if lo < -1 else hi
            raise DataFormatError(
                f"labels contains {bad}; label ids must lie in [0, {truth.L}) with -1 for an empty slot")
        if lab.shape[1] > 1:
            s = np.sort(lab, axis=1)
            dup = (s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)
            if dup.any():
                row = int(np.nonzero(dup.any(axis=1))[0][0])
                raise DataFormatError(
                    f"labels row {row} predicts the same label twice; rankings must be duplicate-free")
    if lab.shape[1] < k:
        pad = np.full((truth.n, k - lab.shape[1]), -1, dtype=np.int64)
        lab = np.hstack([lab, pad])
    return lab


def _prepare_weights(props, truth: _Truth) -> np.ndarray:
    """Inverse propensities ``w_l = 1 / p_l`` from propensities ``p_l``."""
    p = np.asarray(props, dtype=np.float64).ravel()
    if p.size != truth.L:
        raise ParameterError(f"propensities must have one value per label ({truth.L}), got {p.size}")
    if not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise ParameterError("propensities must be finite and > 0 (pass p_l, not 1/p_l = inverse propensities)")
    return 1.0 / p


class _Ranked:
    """Predictions matched against the truth, shared by all metrics of one evaluation."""

    def __init__(self, Y, labels, k: int, props=None):
        self.k = k
        self.truth = _Truth(Y)
        self.labels = _prepare_labels(labels, self.truth, k)
        n = self.truth.n
        valid = self.labels >= 0
        rows = np.broadcast_to(np.arange(n, dtype=np.int64)[:, None], self.labels.shape)
        hits = np.zeros(self.labels.shape, dtype=bool)
        hits[valid] = self.truth.contains(rows[valid], self.labels[valid])
        self.hits = hits
        self.w = None if props is None else _prepare_weights(props, self.truth)
        self._best = None

    # ideal DCG normaliser per row: D(min(k, |y_i|)), and D(k) for rows without labels
    def idcg(self, k: int) -> np.ndarray:
        D = np.concatenate([[0.0], np.cumsum(_discounts(k))])
        m = np.minimum(self.truth.row_counts, k)
        m[m == 0] = k
        return D[m]

    def gains(self, k: int) -> np.ndarray:
        """``h_ij * w_{r_ij}`` for ranks ``1..k`` (0 for misses and empty slots)."""
        lab = self.labels[:, :k]
        return np.where(self.hits[:, :k], self.w[np.maximum(lab, 0)], 0.0)

    def best(self):
        """Each row's relevant-label weights sorted decreasingly, with their row and rank."""
        if self._best is None:
            t = self.truth
            wv = self.w[t.indices]
            order = np.lexsort((-wv, t.rows))  # rows stay grouped, heaviest first inside a row
            ws = wv[order]
            rank = np.arange(t.nnz, dtype=np.int64) - t.indptr[t.rows]  # t.rows is sorted
            self._best = (ws, t.rows, rank)
        return self._best

    # ------------------------------------------------------------------ metrics
    def precision(self, k):
        return float(self.hits[:, :k].sum()) / (self.truth.n * k)

    def ndcg(self, k):
        dcg = self.hits[:, :k].astype(np.float64) @ _discounts(k)
        return float(np.mean(dcg / self.idcg(k)))

    def recall(self, k):
        found = self.hits[:, :k].sum(axis=1)
        return float(np.mean(found / np.maximum(self.truth.row_counts, 1)))

    def rprecision(self, k):
        found = self.hits[:, :k].sum(axis=1)
        den = np.minimum(self.truth.row_counts, k)
        return float(np.sum(found[den > 0] / den[den > 0])) / self.truth.n

    def psprecision(self, k):
        ws, _, rank = self.best()
        den = float(ws[rank < k].sum())
        if den == 0.0:
            return float("nan")
        return float(self.gains(k).sum()) / den

    def psndcg(self, k):
        ws, rows, rank = self.best()
        sel = rank < k
        disc = _discounts(k)
        best_dcg = np.bincount(rows[sel], weights=ws[sel] * disc[rank[sel]], minlength=self.truth.n)
        idcg = self.idcg(k)
        den = float(np.sum(best_dcg / idcg))
        if den == 0.0:
            return float("nan")
        return float(np.sum((self.gains(k) @ disc) / idcg)) / den

    def abandonment(self, k):
        return float(np.mean(self.hits[:, :k].any(axis=1)))

    def confusion(self, k):
        """Per-label TP, FP, FN, TN of the top-k decisions (empty slots decide nothing)."""
        t, lab = self.truth, self.labels[:, :k]
        tp = np.bincount(lab[self.hits[:, :k]], minlength=t.L).astype(np.int64)
        fp = np.bincount(lab[lab >= 0], minlength=t.L).astype(np.int64) - tp
        fn = t.col_counts.astype(np.int64) - tp
        return tp, fp, fn, t.n - tp - fp - fn

    def coverage(self, k):
        relevant = int(np.count_nonzero(self.truth.col_counts))
        if relevant == 0:
            return float("nan")
        covered = np.unique(self.labels[:, :k][self.hits[:, :k]]).size
        return covered / relevant


# --------------------------------------------------------------------------- helpers
def topk_from_scores(S, k: int):
    """Turn a score matrix into ranked top-k predictions ``(labels, scores)``.

    ``S`` is ``n x L``: a dense array (every entry is a candidate) or a scipy sparse
    matrix (every *stored* entry is a candidate, whatever its sign; positions that are
    not stored are "no prediction").  Returns ``labels`` (``n x k`` int64, ``-1`` in
    empty slots) and ``scores`` (``n x k`` float, sorted in decreasing order per row,
    ``-inf`` in empty slots).  Rows with fewer than ``k`` candidates (sparse input, or
    ``k > L``) are padded at the end.  Ties are broken in favour of the smaller label
    id, except that which of several labels tied *exactly at the k-th place* of a
    dense row is kept is unspecified.  NaN scores are rejected.

    Dense input is processed in blocks of rows, so the extra memory is independent of
    ``n``; sparse input costs ``O(nnz)``.
    """
    k = _check_k(k)
    if sp.issparse(S):
        if S.ndim != 2:
            raise DataFormatError(f"score matrix must be two-dimensional, got shape {S.shape}")
        check_sparse_structure(S, "score matrix")
        S = S.tocsr()
        if not S.has_canonical_format:
            S = S.copy()
            S.sum_duplicates()
        n, L = S.shape
        data = np.asarray(S.data)
        dtype = data.dtype if np.issubdtype(data.dtype, np.floating) else np.float64
        if np.isnan(data).any():
            raise DataFormatError("score matrix contains NaN")
        indptr = S.indptr.astype(np.int64)
        counts = np.diff(indptr)
        rows = np.repeat(np.arange(n, dtype=np.int64), counts)
        order = np.lexsort((S.indices, -data.astype(np.float64), rows))
        rank = np.arange(order.size, dtype=np.int64) - indptr[rows]
        keep = rank < k
        labels = np.full((n, k), -1, dtype=np.int64)
        scores = np.full((n, k), -np.inf, dtype=dtype)
        labels[rows[keep], rank[keep]] = S.indices[order[keep]]
        scores[rows[keep], rank[keep]] = data[order[keep]]
        return labels, scores

    S = np.asarray(S)
    if S.ndim != 2:
        raise DataFormatError(f"score matrix must be two-dimensional, got shape {S.shape}")
    if not (np.issubdtype(S.dtype, np.floating) or np.issubdtype(S.dtype, np.integer)):
        raise DataFormatError(f"score matrix must be numeric, got dtype {S.dtype}")
    n, L = S.shape
    dtype = S.dtype if np.issubdtype(S.dtype, np.floating) else np.float64
    kk = min(k, L)
    labels = np.full((n, k), -1, dtype=np.int64)
    scores = np.full((n, k), -np.inf, dtype=dtype)
    step = max(1, _CHUNK_ENTRIES // max(L, 1))
    for start in range(0, n, step):
        block = S[start:start + step]
        if np.issubdtype(block.dtype, np.floating) and np.isnan(block).any():
            raise DataFormatError("score matrix contains NaN")
        if kk == 0:
            continue
        if kk < L:
            idx = np.argpartition(block, L - kk, axis=1)[:, L - kk:]
        else:
            idx = np.broadcast_to(np.arange(L, dtype=np.int64), block.shape).copy()
        vals = np.take_along_axis(block, idx, axis=1)
        order = np.lexsort((idx, -vals.astype(np.float64)), axis=-1)
        labels[start:start + step, :kk] = np.take_along_axis(idx, order, axis=1)
        scores[start:start + step, :kk] = np.take_along_axis(vals, order, axis=1)
    return labels, scores


def label_counts(Y) -> np.ndarray:
    """Number of instances each label is relevant for (column counts of ``Y``, length L).

    Together with ``Y.shape[0]`` this is the input of :func:`propensities`.
    """
    return _Truth(Y, name="Y").col_counts.copy()


def propensities(train_label_counts, n_train: int, A: float = 0.55, B: float = 1.5) -> np.ndarray:
    """Label propensities of Jain, Prabhu & Varma (KDD 2016).

    ``p_l = 1 / (1 + C * exp(-A * ln(N_l + B)))  =  1 / (1 + C * (N_l + B)^-A)``
    with ``C = (ln N - 1) * (B + 1)^A``, where ``N_l`` is the number of *training*
    instances label ``l`` is relevant for and ``N = n_train`` the number of training
    instances (all of them, also those without labels: pyxclib uses the row count of
    the training label matrix; a model trained with ``remove_no_label_data`` was
    trained on the rows with a label, and its propensity weighting, its manifest's
    ``n_train`` and ``headstart evaluate`` count those).  Logarithms are natural.  The usual constants are
    ``A = 0.55, B = 1.5``; the repository uses ``A = 0.5, B = 0.4`` for
    Wikipedia-derived and ``A = 0.6, B = 2.6`` for Amazon-derived data sets.

    Returns ``p_l`` (not its inverse).  ``p_l`` grows with ``N_l``; it lies in (0, 1]
    whenever ``n_train >= 3`` (for ``n_train <= 2``, ``ln N <= 1`` makes ``C <= 0``).
    The PS metrics weight a hit on label ``l`` by ``1 / p_l``.
    """
    counts = np.asarray(train_label_counts, dtype=np.float64)
    if isinstance(n_train, (bool, np.bool_)) or not isinstance(n_train, (int, np.integer)) or n_train < 1:
        raise ParameterError(f"n_train must be a positive integer, got {n_train!r}")
    if not (np.isfinite(A) and np.isfinite(B)) or B <= -1 or A < 0:
        raise ParameterError(f"need A >= 0 and B > -1, got A={A!r}, B={B!r}")
    if counts.size and (not np.all(np.isfinite(counts)) or counts.min() < 0 or counts.max() > n_train):
        raise ParameterError("train_label_counts must lie in [0, n_train]")
    C = (np.log(n_train) - 1.0) * (B + 1.0) ** A
    return 1.0 / (1.0 + C * np.exp(-A * np.log(counts + B)))


# --------------------------------------------------------------------------- metrics
def precision_at_k(Y_true, labels, k: int, sample_weight=None) -> float:
    """Precision at k.

    ``P@k = (1/n) * sum_i (1/k) * sum_{j=1..k} h_ij``

    The divisor is always ``k``, also when a row has fewer than ``k`` relevant labels or
    fewer than ``k`` predictions (empty slots count as misses), and ``n`` counts every
    instance, including those without relevant labels (which score 0) -- as pyxclib.
    With ``sample_weight`` (one weight >= 0 per row, not all 0) the mean over rows is the
    weighted mean (scikit-learn's convention for a score).
    """
    k = _check_k(k)
    ranked = _Ranked(Y_true, labels, k)
    if sample_weight is None:
        return ranked.precision(k)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (ranked.truth.n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ParameterError(f"sample_weight must be {ranked.truth.n} finite weights >= 0, not all 0 "
                             f"(one per row), got shape {w.shape}")
    per_row = ranked.hits[:, :k].sum(axis=1) / k
    return float(np.average(per_row, weights=w))


def ndcg_at_k(Y_true, labels, k: int) -> float:
    """Normalised discounted cumulative gain at k.

    ``nDCG@k = (1/n) * sum_i DCG_i / D(min(k, |y_i|))``,
    ``DCG_i = sum_{j=1..k} h_ij / log2(j + 1)``, ``D(m) = sum_{j=1..m} 1/log2(j + 1)``.

    An instance without relevant labels has ``DCG_i = 0`` and is normalised by
    ``D(k)``, so it contributes 0 and stays in ``n`` (pyxclib's behaviour).
    """
    k = _check_k(k)
    return _Ranked(Y_true, labels, k).ndcg(k)


def recall_at_k(Y_true, labels, k: int) -> float:
    """Recall at k.

    ``R@k = (1/n) * sum_i (sum_{j=1..k} h_ij) / max(|y_i|, 1)``

    Instances without relevant labels contribute 0 and stay in ``n`` (pyxclib's
    ``recall`` replaces the divisor 0 by 1).
    """
    k = _check_k(k)
    return _Ranked(Y_true, labels, k).recall(k)


def rprecision_at_k(Y_true, labels, k: int) -> float:
    """R-precision at k (LibMultiLabel's ``RP@k``).

    ``RP@k = (1/n) * sum_i (sum_{j=1..k} h_ij) / min(k, |y_i|)``

    Instances without relevant labels contribute 0 and stay in ``n``.  Unlike P@k it
    reaches 1 for an instance with fewer than k labels whose labels all rank first.
    """
    k = _check_k(k)
    return _Ranked(Y_true, labels, k).rprecision(k)


def psprecision_at_k(Y_true, labels, k: int, propensities) -> float:
    """Propensity-scored precision at k, normalised as in pyxclib.

    With ``w_l = 1 / p_l`` (``propensities`` holds ``p_l``, length L) and, per instance,
    ``w*_i1 >= w*_i2 >= ...`` the weights of its relevant labels sorted decreasingly:

    ``PSP@k = [sum_i sum_{j=1..k} h_ij w_{r_ij}] / [sum_i sum_{j=1..min(k,|y_i|)} w*_ij]``

    i.e. the mean over instances of the propensity-weighted precision divided by the
    mean over instances of the best achievable weighted precision (a ratio of means;
    the common factor ``1/(n k)`` cancels).  Instances without labels add 0 to both
    sums.  ``nan`` if no test instance has a relevant label.
    """
    k = _check_k(k)
    return _Ranked(Y_true, labels, k, propensities).psprecision(k)


def psndcg_at_k(Y_true, labels, k: int, propensities) -> float:
    """Propensity-scored nDCG at k, normalised as in pyxclib.

    ``PSnDCG@k = [sum_i PSDCG_i / D_i] / [sum_i BEST_i / D_i]`` with
    ``PSDCG_i = sum_{j=1..k} h_ij w_{r_ij} / log2(j + 1)``,
    ``BEST_i = sum_{j=1..min(k,|y_i|)} w*_ij / log2(j + 1)`` (relevant-label weights
    sorted decreasingly), and ``D_i = D(min(k, |y_i|))`` the ordinary (unweighted)
    ideal DCG, ``D(k)`` for rows without labels.  This is pyxclib's
    ``_ndcg(weighted hits) / _ndcg(best weighted hits)``: a ratio of two means of
    per-instance nDCG-normalised values, not a mean of per-instance ratios.  ``nan``
    if no test instance has a relevant label.
    """
    k = _check_k(k)
    return _Ranked(Y_true, labels, k, propensities).psndcg(k)


def coverage_at_k(Y_true, labels, k: int) -> float:
    """Label coverage at k (napkinXC's definition; pyxclib has none).

    ``cov@k = |{l : exists i, j <= k with r_ij = l and l in y_i}| / |{l : exists i with l in y_i}|``

    The numerator counts distinct labels that are correctly predicted in the top k of
    at least one test instance; the denominator counts distinct labels relevant for at
    least one test instance (labels absent from the test set cannot be covered and are
    excluded).  ``nan`` if the test set has no relevant label.
    """
    k = _check_k(k)
    return _Ranked(Y_true, labels, k).coverage(k)


def evaluate(Y_true, labels, ks: Iterable[int] = (1, 3, 5), propensities=None) -> dict:
    """All ranking metrics at every ``k`` in ``ks``, in one pass.

    Returns an ordered ``dict``: for each ``k`` in the order given, the keys
    ``"P@k"``, ``"nDCG@k"``, ``"PSP@k"``, ``"PSnDCG@k"``, ``"R@k"``, ``"RP@k"``, ``"cov@k"``
    (the two PS keys only when ``propensities`` -- the ``p_l`` of
    :func:`propensities` -- is given).  Values are plain floats, fractions in [0, 1]
    (``nan`` where the docstring of the single metric says so).  Definitions and
    conventions are those of :func:`precision_at_k`, :func:`ndcg_at_k`,
    :func:`psprecision_at_k`, :func:`psndcg_at_k`, :func:`recall_at_k`,
    :func:`rprecision_at_k` and :func:`coverage_at_k`.
    """
    ks = _check_ks(ks)
    r = _Ranked(Y_true, labels, max(ks), propensities)
    out = {}
    for k in ks:
        out[f"P@{k}"] = r.precision(k)
        out[f"nDCG@{k}"] = r.ndcg(k)
        if r.w is not None:
            out[f"PSP@{k}"] = r.psprecision(k)
            out[f"PSnDCG@{k}"] = r.psndcg(k)
        out[f"R@{k}"] = r.recall(k)
        out[f"RP@{k}"] = r.rprecision(k)
        out[f"cov@{k}"] = r.coverage(k)
    return out


# --------------------------------------------------------------------------- DiSMEC++'s set
# DiSMEC++'s prediction program prints, for k = 1, 3 and 5, besides P@k and nDCG@k, the
# abandonment at k, the (unnormalised) DCG at k, and a family of per-label confusion-matrix
# metrics of the top-k decisions, macro- and micro-averaged (its ``prediction/evaluate`` and
# ``utils/confusion_matrix``).  Its users compare runs on these numbers, so they are
# reproduced here with its names and its conventions; the definitions are the standard
# ones (e.g. the "Confusion matrix" article of Wikipedia, which DiSMEC++ also cites).

#: the confusion-matrix metrics, in DiSMEC++'s print order, each reported as MacroX@k and MicroX@k
CONFUSION_METRICS = ("P", "R", "F1", "ACC", "BA", "SPC", "BM", "MK", "FM", "NPV", "MCC", "LR+", "LR-", "DOR")


def abandonment_at_k(Y_true, labels, k: int) -> float:
    """Abandonment at k, DiSMEC++'s ``Abd@k`` (elsewhere "success@k" or the hit rate).

    ``Abd@k = (1/n) * sum_i 1[exists j <= k: h_ij = 1]``: the fraction of instances with at
    least one relevant label among their top k.  Instances without relevant labels count 0
    and stay in ``n``, as for P@k.
    """
    k = _check_k(k)
    return _Ranked(Y_true, labels, k).abandonment(k)


def topk_confusion(Y_true, labels, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-label confusion counts of the top-k decisions: label ``l`` is predicted for
    instance ``i`` iff it is among ``i``'s first ``k`` (non-empty) slots.  Returns int64
    arrays ``(TP, FP, FN, TN)`` of length ``L``, with ``TN = n - TP - FP - FN``."""
    k = _check_k(k)
    return _Ranked(Y_true, labels, k).confusion(k)


def _safe_div(num, den) -> np.ndarray:
    """``num / den`` with ``0 / x = 0`` for every x, 0 included (DiSMEC++'s convention);
    any other division by zero is +-inf."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(num == 0, 0.0, num / den)


def _confusion_values(tp, fp, fn, tn) -> dict:
    """Every metric of :data:`CONFUSION_METRICS` for counts of any (matching) shape."""
    tp, fp, fn, tn = (np.asarray(a, dtype=np.float64) for a in (tp, fp, fn, tn))
    ppv = _safe_div(tp, tp + fp)                # precision
    npv = _safe_div(tn, tn + fn)
    tpr = _safe_div(tp, tp + fn)                # recall
    fnr = _safe_div(fn, tp + fn)
    tnr = _safe_div(tn, tn + fp)                # specificity
    fpr = _safe_div(fp, tn + fp)
    lr_pos = _safe_div(tpr, fpr)
    lr_neg = _safe_div(fnr, tnr)
    # Matthews' coefficient in the form with the eight rates (Wikipedia; DiSMEC++), so a
    # label never predicted or never relevant gets a value instead of 0/0
    mcc = np.sqrt(tpr * tnr * ppv * npv) - np.sqrt(fnr * fpr * (1.0 - npv) * (1.0 - ppv))
    return {"P": ppv, "R": tpr,
            "F1": label_f1(tp, tp + fp, tp + fn),
            "ACC": _safe_div(tp + tn, tp + fp + fn + tn), "BA": (tpr + tnr) / 2.0, "SPC": tnr,
            "BM": tpr + tnr - 1.0, "MK": ppv + npv - 1.0, "FM": np.sqrt(ppv * tpr), "NPV": npv,
            "MCC": mcc, "LR+": lr_pos, "LR-": lr_neg, "DOR": _safe_div(lr_pos, lr_neg)}


def confusion_metrics(tp, fp, fn, tn, k: int) -> dict:
    """DiSMEC++'s confusion-matrix metrics of top-k decisions from :func:`topk_confusion`.

    For each X of :data:`CONFUSION_METRICS` (precision, recall, F1, accuracy, balanced
    accuracy, specificity, informedness, markedness, Fowlkes-Mallows, negative predictive
    value, Matthews' correlation, positive and negative likelihood ratio, diagnostic odds
    ratio): ``MacroX@k``, the mean of the per-label values over all ``L`` labels, and
    ``MicroX@k``, the value of the summed counts.  Ratios follow DiSMEC++: ``0 / 0 = 0``,
    ``x / 0 = inf`` for ``x > 0`` (so a likelihood ratio can be ``inf``).  Also
    ``MicroTP@k``, ``MicroFP@k``, ``MicroFN@k`` and ``MicroTN@k`` (each count's share of
    ``n L``) and ``Cov@k``, the fraction of *all* ``L`` labels with recall > 0 (DiSMEC++'s
    coverage; ``cov@k`` of :func:`evaluate` divides by the labels relevant in the test set
    instead).
    """
    k = _check_k(k)
    tp, fp, fn, tn = (np.asarray(a, dtype=np.int64) for a in (tp, fp, fn, tn))
    L = tp.size
    per_label = _confusion_values(tp, fp, fn, tn)
    micro = _confusion_values(tp.sum(), fp.sum(), fn.sum(), tn.sum())
    total = float(tp.sum() + fp.sum() + fn.sum() + tn.sum())
    out = {f"Cov@{k}": float(np.count_nonzero(per_label["R"] > 0)) / L if L else float("nan")}
    for name, count in (("TP", tp), ("FP", fp), ("FN", fn), ("TN", tn)):
        out[f"Micro{name}@{k}"] = float(_safe_div(count.sum(), total))
    for name in CONFUSION_METRICS:
        out[f"Macro{name}@{k}"] = float(per_label[name].mean()) if L else float("nan")
        out[f"Micro{name}@{k}"] = float(micro[name])
    return out


def dismec_metrics(Y_true, labels, ks: Iterable[int] = (1, 3, 5)) -> dict:
    """The metrics DiSMEC++'s prediction program prints, at every ``k`` in ``ks``, under its
    names (so that its ``--save-metrics`` JSON and ours can be compared key by key):
    ``InstanceP@k`` (:func:`precision_at_k`), ``Abd@k`` (:func:`abandonment_at_k`),
    ``InstanceDCG@k``, ``InstancenDCG@k`` and the :func:`confusion_metrics` of the top-k
    decisions.

    ``InstanceDCG@k = (1/n) * sum_i sum_{j=1..k} h_ij / ln(j + 1)`` uses the natural
    logarithm, as DiSMEC++ does; ``InstancenDCG@k`` is :func:`ndcg_at_k` (the base cancels),
    whose instances without relevant labels score 0 (pyxclib's convention; DiSMEC++
    divides 0 by 0 there).  These are the definitions DiSMEC++'s code means: its own
    printout can differ in the metrics that use false negatives or the true labels' ranks
    (nDCG, recall, F1, ...), because its ``EvaluateMetrics::process_prediction`` appends
    each instance's true labels to a per-thread list it never clears and marks a rank on
    the next true label when a prediction misses.
    """
    ks = _check_ks(ks)
    r = _Ranked(Y_true, labels, max(ks))
    out = {}
    for k in ks:
        out[f"InstanceP@{k}"] = r.precision(k)
        out[f"Abd@{k}"] = r.abandonment(k)
        dcg = r.hits[:, :k].astype(np.float64) @ (1.0 / np.log(np.arange(2, k + 2)))
        out[f"InstanceDCG@{k}"] = float(np.mean(dcg))
        out[f"InstancenDCG@{k}"] = r.ndcg(k)
        out.update(confusion_metrics(*r.confusion(k), k))
    return out


# --------------------------------------------------------------------------- binary
def _positive_pairs(Y_pred, threshold: float, n: int, L: int):
    """Yield ``(rows, cols)`` blocks of the entries with ``Y_pred > threshold``."""
    if sp.issparse(Y_pred):
        if threshold < 0:
            raise ParameterError(
                "a sparse Y_pred needs threshold >= 0: its implicit zeros would otherwise all be positive")
        check_sparse_structure(Y_pred, "Y_pred")
        P = Y_pred.tocsr()
        if P.shape != (n, L):
            raise DataFormatError(f"Y_pred has shape {P.shape} but Y_true has {(n, L)}")
        if not P.has_canonical_format:
            P = P.copy()
            P.sum_duplicates()
        data = np.asarray(P.data)
        if np.issubdtype(data.dtype, np.floating) and np.isnan(data).any():
            raise DataFormatError("Y_pred contains NaN")
        pos = data > threshold
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(P.indptr))
        yield rows[pos], P.indices[pos].astype(np.int64)
        return
    P = np.asarray(Y_pred)
    if P.shape != (n, L):
        raise DataFormatError(f"Y_pred has shape {P.shape} but Y_true has {(n, L)}")
    step = max(1, _CHUNK_ENTRIES // max(L, 1))
    for start in range(0, n, step):
        block = P[start:start + step]
        if np.issubdtype(block.dtype, np.floating) and np.isnan(block).any():
            raise DataFormatError("Y_pred contains NaN")
        r, c = np.nonzero(block > threshold)
        yield r.astype(np.int64) + start, c.astype(np.int64)


def binary_precision_recall(Y_true, Y_pred, threshold: float = 0.0, zero_division="exclude") -> dict:
    """Label-averaged (macro) precision and recall of thresholded one-vs-all decisions.

    ``Y_pred`` is ``n x L``: a binary matrix of predicted positives or the decision
    scores ``w_l . x_i``; an entry is a predicted positive iff ``Y_pred > threshold``
    (default 0, the sign of the linear classifier).  Pass it as a scipy sparse matrix
    holding only the entries with score > 0 when L is large; for sparse input the
    threshold must be >= 0 because unstored entries are zeros.  Dense input is read in
    blocks of rows.

    Per label ``l`` with ``TP_l`` true positives, ``FP_l`` false positives and
    ``FN_l`` false negatives over the test set:

    ``precision_l = TP_l / (TP_l + FP_l)``  and  ``recall_l = TP_l / (TP_l + FN_l)``,

    ``precision = mean of precision_l``, ``recall = mean of recall_l``.

    Labels where a ratio is 0/0 are, by default (``zero_division="exclude"``), left
    out of *that* average: precision is averaged over labels the classifier predicts
    at least once, recall over labels with at least one relevant test instance.
    Reason: in XMC most labels have no positive test instance and many classifiers
    never fire; scoring those 0/0 cases as 0 would swamp the average with labels for
    which the classifier did nothing wrong, and scoring them as 1 would reward
    classifiers that never predict anything.  Excluding them keeps each quantity an
    average of well-defined values, and the two failure modes are still seen: a label
    that never fires but has test positives gets recall 0, and a label that fires
    but has no test positives gets precision 0.  ``zero_division=v`` (a number in
    [0, 1]) instead counts every 0/0 as ``v`` and averages over all L labels.

    Returns a dict with ``"precision"``, ``"recall"`` (``nan`` when no label is
    eligible), ``"n_labels_precision"`` and ``"n_labels_recall"`` (how many labels
    entered each average).
    """
    if isinstance(zero_division, str):
        if zero_division != "exclude":
            raise ParameterError(f"zero_division must be 'exclude' or a number in [0, 1], got {zero_division!r}")
        zd = None
    else:
        zd = float(zero_division)
        if not 0.0 <= zd <= 1.0:
            raise ParameterError(f"zero_division must be 'exclude' or a number in [0, 1], got {zero_division!r}")
    tp, pp, ap = decision_counts(Y_true, Y_pred, threshold)
    L = tp.size

    def average(num, den):
        ok = den > 0
        vals = num[ok] / den[ok]
        if zd is None:
            return (float(vals.mean()) if vals.size else float("nan")), int(ok.sum())
        return float((vals.sum() + zd * (L - vals.size)) / L), L

    prec, n_prec = average(tp, pp)
    rec, n_rec = average(tp, ap)
    return {"precision": prec, "recall": rec, "n_labels_precision": n_prec, "n_labels_recall": n_rec}


#: the keys of :func:`f1_scores`, in its order
F1_NAMES = ("Micro-F1", "Macro-F1", "Another-Macro-F1")


def f1_scores(Y_true, Y_pred, threshold: float = 0.0) -> dict:
    """LibMultiLabel's thresholded one-vs-all scores: ``"Micro-F1"``, ``"Macro-F1"`` and
    ``"Another-Macro-F1"`` of the decisions ``Y_pred > threshold`` (definitions in the
    module docstring; every label of ``Y_true``'s ``L`` columns is in the macro averages,
    0/0 counting 0).  ``Y_pred`` as for :func:`binary_precision_recall`: an ``n x L``
    score or indicator matrix, sparse (only positive entries stored, ``threshold >= 0``)
    or dense (read in blocks); e.g. ``headstart.prediction.topk.predict_above(model, X)``.
    """
    return f1_from_counts(*decision_counts(Y_true, Y_pred, threshold))


def decision_counts(Y_true, Y_pred, threshold: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per label: true positives, predicted positives and relevant instances of the
    decisions ``Y_pred > threshold`` (int64 arrays of length L).  Counts of blocks of
    instances add up: :func:`f1_from_counts` of their sums is :func:`f1_scores` of all."""
    threshold = float(threshold)
    if not np.isfinite(threshold):
        raise ParameterError(f"threshold must be finite, got {threshold!r}")
    truth = _Truth(Y_true)
    n, L = truth.n, truth.L
    tp = np.zeros(L, dtype=np.int64)
    pp = np.zeros(L, dtype=np.int64)
    for rows, cols in _positive_pairs(Y_pred, threshold, n, L):
        pp += np.bincount(cols, minlength=L)
        tp += np.bincount(cols[truth.contains(rows, cols)], minlength=L)
    return tp, pp, truth.col_counts.astype(np.int64)


def label_f1(tp, pp, relevant) -> np.ndarray:
    """F1 = 2 TP / (2 TP + FP + FN) = 2 TP / (predicted + relevant) of counts of any
    shape (per label, per label and setting, or summed: then Micro-F1); 0/0 counts as 0."""
    tp = np.asarray(tp, dtype=np.float64)
    den = np.asarray(pp) + np.asarray(relevant)
    return np.divide(2.0 * tp, den, out=np.zeros(np.broadcast(tp, den).shape), where=den > 0)


#: the key of :func:`macro_f1_over_test_labels` among evaluate's F1 scores
TEST_LABEL_MACRO_F1 = "Test-Label-Macro-F1"


def macro_f1_over_test_labels(tp: np.ndarray, pp: np.ndarray, relevant: np.ndarray) -> float:
    """Macro-F1 over the labels with a relevant test instance (``relevant > 0``) only,
    from :func:`decision_counts`: where Macro-F1 averages over every declared label, and a
    label space mostly unused by the test data makes it small by the labels alone.
    ``nan`` when no label is relevant."""
    used = np.asarray(relevant) > 0
    if not used.any():
        return float("nan")
    return float(label_f1(np.asarray(tp)[used], np.asarray(pp)[used], np.asarray(relevant)[used]).mean())


def f1_from_counts(tp: np.ndarray, pp: np.ndarray, relevant: np.ndarray) -> dict:
    """:func:`f1_scores` from :func:`decision_counts`."""
    L = tp.size
    fp = pp - tp
    fn = relevant - tp

    def ratio(num, den):
        return np.divide(num, den, out=np.zeros(L), where=den > 0)

    micro_den = int(np.sum(2 * tp + fp + fn))
    micro = 2.0 * float(tp.sum()) / micro_den if micro_den else 0.0
    macro = float(label_f1(tp, pp, relevant).sum()) / L if L else 0.0
    mp = float(ratio(tp.astype(np.float64), tp + fp).sum()) / L if L else 0.0
    mr = float(ratio(tp.astype(np.float64), tp + fn).sum()) / L if L else 0.0
    another = 2 * mp * mr / (mp + mr) if mp + mr > 0 else 0.0
    return dict(zip(F1_NAMES, (micro, macro, another)))
