"""Top-k prediction with bounded memory.

Scores are ``x @ w_j + intercept_j``.  The weights are turned feature-major (CSC: for
every feature the labels with a non-zero weight), so a row's scores are the intercepts
plus, for every non-zero ``x_f``, ``x_f * W[:, f]``.  A row whose weight products are few
compared with the labels (a sparse model, a short row) is scored sparsely: only the
labels it touches are accumulated (a float64 accumulator with a touched list), and the
untouched ones -- whose score is exactly their intercept -- come from a list of the labels
sorted by intercept, walked only until an entry cannot enter the top k; the cost is the
row's weight products plus O(touched + k), not O(labels).  Any other row is scored
densely: a buffer of all labels filled with the intercepts, the products added, then
scanned -- when the products are many the scan costs little next to them, and less than
the sparse bookkeeping would.  Both ways give identical scores and ties.  A weight column
set for at least half of the labels is kept dense (``_DENSE_COLUMN``) and added by a
contiguous, vectorised loop: the same products in the same order.  A size-``k``
heap picks the best labels.  Rows are processed in chunks sized by their non-zeros, and
the rows of a chunk are split over threads (the numba kernels release the GIL).  Memory
beyond the inputs and outputs: the feature-major weights, the intercept order (4 bytes
per label), 20 bytes per label and thread, and the preprocessed copy of one chunk of
``X``.

:func:`predict_above` scores rows the same two ways and keeps the labels scoring above a
threshold instead of the best ``k`` (a sparse indicator matrix, the estimator's
``predict``, ``predict --threshold``): in a sparse row, the touched labels that pass,
merged with the untouched labels whose intercept alone passes (a list made once per
call), so its cost too follows the row's weight products, not the label count (24 bytes
per label and thread).

The dense per-row scan replaced the obvious ``(X_chunk @ W.T).toarray()`` +
``np.argpartition``: on 17k rows x 22k labels (1M weights, ~100 non-zeros per row) the
numba kernel was several times faster when it was written (commit 968d553; it never
materialises the score matrix) and gives deterministic ties for free.  The sparse path and
the chunk sizing are for large label counts (measured in docs/benchmarks.md, "Prediction
at 670K labels").

Conventions
-----------
* Output: ``labels`` int32 ``(n, k)`` global label ids (``first_label`` added) and
  ``scores`` float32 ``(n, k)``, each row sorted by score descending; equal scores (as
  float32) are ordered by lower label id first.  Scores are accumulated in float64 and
  rounded to float32 before ranking.
* When fewer than ``k`` labels are available, the rest of the row is padded with label
  ``-1`` and score ``-inf``.  A ``k`` above the label count whose result would exceed
  1 GiB (``DEFAULT_DENSE_LIMIT``) is refused (ParameterError) rather than allocated:
  all but the label count's columns would be padding.
* Labels of a model loaded with ``allow_gaps=True`` that are listed in its
  ``missing_ranges`` are never returned (they have no trained weights).
* ``X`` may be a scipy sparse matrix or a dense 2-d array.  A sparse ``X`` may have
  *fewer* columns than the model has features (the missing trailing features are taken
  as zero, as happens with svmlight files whose highest feature does not occur); a dense
  one must have exactly the model's columns (its width is its feature space); *more*
  columns raise :class:`~headstart.errors.ModelFormatError` naming both numbers.
* A model's preprocessing (feature hashing, value transform, tf-idf, L2
  normalisation; :mod:`.preprocess`) is applied to ``X`` unless ``preprocess=False``
  (for ``X`` that is already transformed).  A model with feature hashing takes ``X`` of
  any width: the raw features are hashed to the model's.  Plain weights
  (a matrix, or a ``(weights, intercept[, first_label])`` tuple) are used as given.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._compile import njit
from .._span import span
from ..errors import ModelFormatError, ParameterError
from ..model.extras import read_extras
from ..model.manifest import read_manifest
from ..model.ranges import missing_ranges_of
from ..model.shards import iter_shards
from ..model.model import OvAModel, Preprocessing, scoring_preprocessing
from .._columns import UsedColumns
from .._threads import resolve_threads, wait_all
from ..validation import check_finite_csr, check_k, check_sparse_structure, real_matrix
from .preprocess import apply_preprocessing

DEFAULT_MAX_MEMORY = 256 * 1024 * 1024
#: a row is scored densely (every label filled and scanned) when its weight products are at
#: least this fraction of the labels; below it only the touched labels are visited.  A
#: touched label costs several times a product of the dense scan (stamp, touched list,
#: scattered accumulator); on 20K labels of the Amazon-670K preset the two break even near
#: 0.2 (benchmarks/predict_scale.py, November 2026), so the sparse path is kept below that.
_DENSE_RATIO = 0.15
#: ``decision_function`` refuses to build a dense score matrix larger than this by default
DEFAULT_DENSE_LIMIT = 1024 * 1024 * 1024
_MIN_BLOCK_ROWS = 64


# --------------------------------------------------------------------------- kernels
# Positions (p, q) and ids (features f, labels j) are unsigned in the loops over
# nonzeros (headstart/_span.py): four signed accesses per weight product here would
# each pay numba's negative-index test.  The values and the order of every sum are
# unchanged.
@njit(nogil=True, cache=True)
def _scores_row(i, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols, intercept,
                buf):  # pragma: no cover
    L = intercept.shape[0]
    for j in range(L):
        buf[j] = intercept[j]
    p0, p1 = span(x_indptr, i)
    for p in range(p0, p1):
        f = np.uint32(x_indices[p])
        v = np.float64(x_data[p])
        c = dmap[f]
        if c >= 0:
            # a dense column (_Predictor.dcols): a contiguous axpy over the labels, which the
            # compiler vectorises across labels; each label still gets its one product (or
            # a +-0 where it has no weight), added in the same order
            col = dcols[c]
            for t in range(np.uint64(0), np.uint64(L)):
                buf[t] += v * col[t]
        else:
            q0, q1 = span(wt_indptr, f)
            for q in range(q0, q1):
                buf[np.uint32(wt_indices[q])] += v * wt_data[q]


@njit(nogil=True, cache=True, inline="always")
def _worse(sa, la, sb, lb):  # pragma: no cover - compiled
    """Is (score sa, label la) ranked below (sb, lb)?  Higher score first, then lower label."""
    return sa < sb or (sa == sb and la > lb)


@njit(nogil=True, cache=True)
def _sift_down(hs, hl, c, n):  # pragma: no cover - compiled
    """Restore the min-heap (worst at the root) below position c, heap size n."""
    while True:
        left = 2 * c + 1
        if left >= n:
            return
        m = left
        right = left + 1
        if right < n and _worse(hs[right], hl[right], hs[left], hl[left]):
            m = right
        if _worse(hs[m], hl[m], hs[c], hl[c]):
            hs[c], hs[m] = hs[m], hs[c]
            hl[c], hl[m] = hl[m], hl[c]
            c = m
        else:
            return


@njit(nogil=True, cache=True)
def _push(hs, hl, n, k, s, j):  # pragma: no cover - compiled
    """Put (score s, label j) into the size-k heap holding n entries, which must either
    have room or rank (s, j) above its root; returns the new n.  The order (score, then
    label) is total over distinct labels, so the heap ends with the same k labels
    whatever order they are offered in."""
    if n < k:
        hs[n] = s
        hl[n] = j
        c = n
        while c > 0:
            parent = (c - 1) // 2
            if _worse(hs[c], hl[c], hs[parent], hl[parent]):
                hs[c], hs[parent] = hs[parent], hs[c]
                hl[c], hl[parent] = hl[parent], hl[c]
                c = parent
            else:
                break
        return n + 1
    hs[0] = s
    hl[0] = j
    _sift_down(hs, hl, 0, k)
    return n


@njit(nogil=True, cache=True)
def _emit(i, hs, hl, n, k, label_offset, out_labels, out_scores):  # pragma: no cover - compiled
    """Row i of the output from its heap of n entries: best first, padded with -1 / -inf."""
    for p in range(n, k):
        out_labels[i, p] = -1
        out_scores[i, p] = -np.inf
    m = n
    while m > 0:  # pop the worst to the back
        out_labels[i, m - 1] = hl[0] + label_offset
        out_scores[i, m - 1] = hs[0]
        m -= 1
        hs[0] = hs[m]
        hl[0] = hl[m]
        _sift_down(hs, hl, 0, m)


@njit(nogil=True, cache=True, inline="always")
def _touch(i, j, stamp, acc, touched, intercept, nt):  # pragma: no cover - compiled
    """Label j's first product in row i: its accumulator starts at its intercept and it
    joins the touched list; returns the list's new length.  (Inlined in numba's IR, so
    the arrays cost no reference counting per call.)"""
    if stamp[j] != i:
        stamp[j] = i
        acc[j] = intercept[j]
        touched[nt] = j
        return nt + 1
    return nt


@njit(nogil=True, cache=True, inline="always")
def _row_work(i, x_indptr, x_indices, wt_indptr, dmap, L):  # pragma: no cover - compiled
    """Row i's weight products: what decides between the sparse and the dense path."""
    work = 0
    p0, p1 = span(x_indptr, i)
    for p in range(p0, p1):
        f = np.uint32(x_indices[p])
        work += L if dmap[f] >= 0 else wt_indptr[f + 1] - wt_indptr[f]
    return work


@njit(nogil=True, cache=True, inline="always")
def _accumulate_touched(i, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols, intercept,
                        stamp, acc, touched):  # pragma: no cover - compiled
    """Row i's scores of the labels its features touch, in ``acc`` (each started at its
    intercept by :func:`_touch`, the products added in the row's order); returns how
    many labels ``touched`` lists."""
    L = intercept.shape[0]
    nt = 0
    p0, p1 = span(x_indptr, i)
    for p in range(p0, p1):
        f = np.uint32(x_indices[p])
        v = np.float64(x_data[p])
        c = dmap[f]
        if c >= 0:
            # a dense column touches every label (reached only where dense_work exceeds
            # L / 2, i.e. never with the default ratio; kept exact anyway)
            col = dcols[c]
            for j in range(L):
                nt = _touch(i, j, stamp, acc, touched, intercept, nt)
                acc[j] += v * col[j]
            continue
        q0, q1 = span(wt_indptr, f)
        for q in range(q0, q1):
            j = np.uint32(wt_indices[q])
            nt = _touch(i, j, stamp, acc, touched, intercept, nt)
            acc[j] += v * wt_data[q]
    return nt


@njit(nogil=True, cache=True)
def _topk_block(r0, r1, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols, intercept,
                by_intercept, k, label_offset, dense_work, out_labels, out_scores):  # pragma: no cover - compiled
    """Top-k of rows [r0, r1) of the chunk into out_*[r0:r1].

    ``intercept`` is float64 with -inf marking labels that must never be returned;
    ``by_intercept`` lists the other labels best intercept first (float32 score, then
    label id).  Two ways to score a row, with identical results:

    * sparse (a row whose weight products are fewer than ``dense_work``): only the labels
      that the row's features touch through the feature-major weights are accumulated, in
      a float64 accumulator with a touched list and a per-label row stamp (nothing is
      cleared between rows); every untouched label scores exactly its intercept, so the
      best of them are the first untouched entries of ``by_intercept``, and the walk stops
      as soon as an entry cannot enter the top k.  Cost per row: the row's weight products
      plus O(touched + k), not O(labels).
    * dense (the other rows): one float64 score per label, set to the intercepts, the
      weight products added, then scanned.  Each
      column's labels are ascending, so the scatter runs forward through the buffer and
      keeps pace with streaming the weights even at 670K labels (5 MB of scores); the
      touched list and stamps would cost more per product than the fill and scan save.

    A label's score is the same float64 sum in the same order either way (intercept first,
    then the row's features in order), rounded once to float32, so ties and results do
    not depend on the path.
    """
    L = intercept.shape[0]
    acc = np.empty(L, dtype=np.float64)
    stamp = np.full(L, -1, dtype=np.int64)
    touched = np.empty(L, dtype=np.int32)
    hs = np.empty(max(k, 1), dtype=np.float32)
    hl = np.empty(max(k, 1), dtype=np.int64)
    for i in range(r0, r1):
        work = _row_work(i, x_indptr, x_indices, wt_indptr, dmap, L)
        n = 0
        if work >= dense_work:
            _scores_row(i, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols, intercept, acc)
            # the root test is written out in the loops: a call per label that passes the
            # heap arrays costs more than the test (reference counting of the arrays)
            for j in range(L):
                s = np.float32(acc[j])
                if acc[j] != -np.inf and (n < k or _worse(hs[0], hl[0], s, j)):
                    n = _push(hs, hl, n, k, s, j)
        else:
            nt = _accumulate_touched(i, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols,
                                     intercept, stamp, acc, touched)
            for t in range(nt):
                j = touched[t]
                s = np.float32(acc[j])
                if acc[j] != -np.inf and (n < k or _worse(hs[0], hl[0], s, j)):
                    n = _push(hs, hl, n, k, s, j)
            for t in range(by_intercept.shape[0]):
                j = by_intercept[t]
                if stamp[j] == i:
                    continue
                s = np.float32(intercept[j])
                if n == k and not _worse(hs[0], hl[0], s, j):
                    break  # every later entry ranks below this one, which cannot enter
                n = _push(hs, hl, n, k, s, j)
        _emit(i, hs, hl, n, k, label_offset, out_labels, out_scores)


@njit(nogil=True, cache=True)
def _dense_block(r0, r1, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols, intercept,
                 out):  # pragma: no cover - compiled
    buf = np.empty(intercept.shape[0], dtype=np.float64)
    for i in range(r0, r1):
        _scores_row(i, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols, intercept, buf)
        for j in range(intercept.shape[0]):
            out[i, j] = np.float32(buf[j])


@njit(nogil=True, cache=True)
def _reserve(out, val, need):  # pragma: no cover - compiled
    """``out`` and ``val`` with room for ``need`` entries (doubled as needed, the first
    entries kept).  Called once per row, so that no loop over labels reassigns the arrays
    (numba then keeps reference counts out of it: a reassignment inside the loop made
    the dense scan ~4x slower)."""
    if need <= out.size:
        return out, val
    size = out.size
    while size < need:
        size *= 2
    grown = np.empty(size, dtype=np.int32)
    grown[:out.size] = out
    grown_v = np.empty(size, dtype=np.float32)
    grown_v[:val.size] = val
    return grown, grown_v


@njit(nogil=True, cache=True)
def _above_block(r0, r1, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols, intercept,
                 threshold, passing, dense_work, counts):  # pragma: no cover - compiled
    """Labels j whose (float32) score exceeds ``threshold[j]`` (float64, one per local
    label) in rows [r0, r1), row by row in increasing label order; ``counts[i]`` = how
    many in row i.  Returns (the local label ids, their float32 scores).

    ``passing`` lists, ascending, the labels whose intercept alone exceeds their
    threshold: an untouched label scores exactly its intercept, so in a row scored
    sparsely (as in :func:`_topk_block`: only the labels its features touch are
    accumulated) the answer is the touched labels that pass, merged with the untouched
    entries of ``passing``.  Cost per row: its weight products plus O(touched + passing),
    not O(labels) -- with a sparse model and a threshold above most intercepts
    (``--threshold 0`` on an OvA model, whose intercepts are negative) that is what
    makes thresholded prediction as cheap as top-k at millions of labels.  Rows with
    ``dense_work`` products or more are scored densely.  The scores are the same float64
    sums in the same order either way, so the two paths decide alike."""
    L = intercept.shape[0]
    P = passing.shape[0]
    acc = np.empty(L, dtype=np.float64)
    stamp = np.full(L, -1, dtype=np.int64)
    touched = np.empty(L, dtype=np.int32)
    hits = np.empty(L, dtype=np.int32)
    out = np.empty(max(16, 4 * (r1 - r0)), dtype=np.int32)
    val = np.empty(out.size, dtype=np.float32)
    m = 0
    for i in range(r0, r1):
        work = _row_work(i, x_indptr, x_indices, wt_indptr, dmap, L)
        m0 = m
        if work >= dense_work:
            _scores_row(i, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols, intercept, acc)
            out, val = _reserve(out, val, m + L)
            for j in range(L):
                s = np.float32(acc[j])
                if s > threshold[j]:
                    out[m] = j
                    val[m] = s
                    m += 1
        else:
            nt = _accumulate_touched(i, x_indptr, x_indices, x_data, wt_indptr, wt_indices, wt_data, dmap, dcols,
                                     intercept, stamp, acc, touched)
            h = 0
            for t in range(nt):
                j = touched[t]
                if np.float32(acc[j]) > threshold[j]:
                    hits[h] = j
                    h += 1
            hits[:h].sort()
            out, val = _reserve(out, val, m + h + P)
            # merge the touched hits with the untouched passing labels, ascending
            a = 0
            for t in range(P + 1):
                bound = passing[t] if t < P else L
                while a < h and hits[a] < bound:
                    j = hits[a]
                    out[m] = j
                    val[m] = np.float32(acc[j])
                    m += 1
                    a += 1
                if t < P and stamp[bound] != i:
                    out[m] = bound
                    val[m] = np.float32(intercept[bound])
                    m += 1
        counts[i] = m - m0
    return out[:m], val[:m]


# --------------------------------------------------------------------------- inputs
@dataclass
class _Predictor:
    wt_indptr: np.ndarray       # int64 (n_features + 1,)
    wt_indices: np.ndarray      # int32 labels, local ids
    wt_data: np.ndarray         # float32
    # dense columns: dmap[f] >= 0 is feature f's row of dcols (float32, one weight per
    # label, 0 where none), and f's column in wt_* is then empty; -1 for the others
    dmap: np.ndarray            # int64 (n_features,)
    dcols: np.ndarray           # float32 (dense columns, labels)
    intercept: np.ndarray       # float64, -inf for excluded labels
    by_intercept: np.ndarray    # int32 labels not excluded, best float32 intercept first, then lower id
    first_label: int
    n_features: int
    preprocessing: Preprocessing | None
    # a dense + sparse model (headstart.shortlist) needs X with all its columns: a sparse
    # file alone has fewer, which would silently score the dense part as zero
    all_features: bool = False
    # the weights' columns when wt holds only them (see _as_predictor): X is renumbered alike
    columns: UsedColumns | None = None

    @property
    def num_labels(self) -> int:
        return int(self.intercept.shape[0])

    def column(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        """Feature f's (labels, float32 weights), as the kernels add them."""
        if self.dmap[f] >= 0:
            return np.arange(self.num_labels), self.dcols[self.dmap[f]]
        a, z = self.wt_indptr[f], self.wt_indptr[f + 1]
        return self.wt_indices[a:z], self.wt_data[a:z]


#: a feature column with a weight for at least this share of the labels is stored dense
#: (a float32 per label, zeros included) and scored by a contiguous loop that the compiler
#: vectorises: 4 bytes a label against the CSC's 8 bytes an entry, so from a half on it
#: also takes no more memory.  Dense embeddings and unpruned models have such columns
#: (delicious embedded in 384 columns, 983 labels: 0.51 -> 0.17 ns per weight product,
#: docs/benchmarks.md "Prediction on dense features").
_DENSE_COLUMN = 0.5


@njit(nogil=True, cache=True)
def _scatter_columns(indptr, indices, data, dmap, dcols, cursor, wt_indices, wt_data):  # pragma: no cover
    """Label-major weights (CSR, one row per label) into the feature-major form of
    :class:`_Predictor` in one pass: an entry of a dense column goes to its row of
    ``dcols``, any other to its column's next free place (``cursor``, from the column's
    start in ``wt_indptr``).  The labels are visited in increasing order, so every column
    lists them ascending, as a CSC conversion would."""
    for j in range(indptr.shape[0] - 1):
        p0, p1 = span(indptr, j)
        for p in range(p0, p1):
            f = np.uint32(indices[p])
            c = dmap[f]
            if c >= 0:
                dcols[c, j] = data[p]
            else:
                q = cursor[f]
                wt_indices[q] = j
                wt_data[q] = data[p]
                cursor[f] = q + 1


@njit(nogil=True, cache=True)
def _column_counts(indices, F):  # pragma: no cover - compiled
    """Entries per column (np.bincount would first copy int32 ids to int64: 8 bytes a weight)."""
    counts = np.zeros(F, dtype=np.int64)
    for p in range(indices.shape[0]):
        counts[np.uint32(indices[p])] += 1
    return counts


def _feature_major(W: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(wt_indptr, wt_indices, wt_data, dmap, dcols) of the canonical float32 CSR ``W``
    (labels x features) -- see :class:`_Predictor`.

    Built straight from ``W``'s rows: no CSC copy of the whole matrix is made and then
    split (that held the CSR, its CSC and the CSC's sparse part at once, about 2.6-3x
    the weights, where this needs ``W`` and the result, at most 2x: a dense column takes
    4 bytes a label where the CSC took 8 an entry, for at least half of the labels).
    The entries and their order are those of ``W.tocsc()``, so the scores are the same."""
    L, F = W.shape
    counts = _column_counts(W.indices[:W.nnz], F)
    dense = np.flatnonzero((counts > 0) & (counts >= _DENSE_COLUMN * L))
    dmap = np.full(F, -1, dtype=np.int64)
    dmap[dense] = np.arange(dense.size)
    counts[dense] = 0
    wt_indptr = np.zeros(F + 1, dtype=np.int64)
    np.cumsum(counts, out=wt_indptr[1:])
    del counts
    stored = int(wt_indptr[-1])
    wt_indices = np.empty(stored, dtype=np.int32)
    wt_data = np.empty(stored, dtype=np.float32)
    dcols = np.zeros((dense.size, L), dtype=np.float32)
    _scatter_columns(W.indptr.astype(np.int64, copy=False), W.indices, W.data, dmap, dcols,
                     wt_indptr[:-1].copy(), wt_indices, wt_data)
    return wt_indptr, wt_indices, wt_data, dmap, dcols


def _by_intercept(intercept: np.ndarray) -> np.ndarray:
    """Labels in the order an untouched label ranks: float32 intercept descending, then id;
    excluded labels (-inf) left out."""
    keep = np.flatnonzero(intercept != -np.inf)
    s = intercept[keep].astype(np.float32)
    return keep[np.lexsort((keep, -s))].astype(np.int32)


def prepare(model_or_weights: Any) -> _Predictor:
    """The scoring form of a model (feature-major weights, intercept order), to be reused
    across many calls of :func:`predict_topk` on the same model."""
    return _as_predictor(model_or_weights)


def _as_predictor(model_or_weights: Any) -> _Predictor:
    if isinstance(model_or_weights, _Predictor):
        return model_or_weights
    exclude: list[tuple[int, int]] = []
    preprocessing = None
    all_features = False
    if isinstance(model_or_weights, OvAModel):
        m = model_or_weights
        W, b, first, n_features = m.weights, m.intercept, int(m.first_label), int(m.n_features)
        preprocessing = scoring_preprocessing(m.preprocessing, getattr(m, "extensions", None))
        exclude = list(getattr(m, "missing_ranges", None) or [])
        all_features = "dense" in (getattr(m, "extensions", None) or {})
        if "tree" in (getattr(m, "extensions", None) or {}):
            raise ModelFormatError(f"this is {_TREE_MODEL}")
    elif isinstance(model_or_weights, tuple) and len(model_or_weights) in (2, 3):
        W, b = model_or_weights[0], model_or_weights[1]
        first = int(model_or_weights[2]) if len(model_or_weights) == 3 else 0
        n_features = int(W.shape[1])
    elif sp.issparse(model_or_weights) or isinstance(model_or_weights, np.ndarray):
        W, b, first, n_features = model_or_weights, None, 0, int(model_or_weights.shape[1])
    else:
        raise TypeError("predict: expected an OvAModel, a weight matrix, or a (weights, intercept[, first_label]) "
                        f"tuple, got {type(model_or_weights).__name__}")
    if sp.issparse(W):
        check_sparse_structure(W, "the weights", ModelFormatError)   # before any conversion (helper-83)
    else:
        W = sp.csr_matrix(W)
    if W.ndim != 2 or W.shape[1] != n_features:
        raise ModelFormatError(f"weights have shape {W.shape}, expected (labels, {n_features})")
    L = int(W.shape[0])
    if b is None:
        intercept = np.zeros(L, dtype=np.float64)
    else:
        intercept = np.asarray(b, dtype=np.float64).reshape(-1).copy()
        if intercept.shape != (L,):
            raise ModelFormatError(f"intercept has {intercept.shape[0]} entries for {L} labels")
    for a, z in exclude:
        lo, hi = max(a - first, 0), min(z - first, L)
        if lo < hi:
            intercept[lo:hi] = -np.inf
    # A header may declare far more features than the weights use (2^26 hashed ids): the
    # feature-major view then holds the columns that occur only (x's other features meet
    # no weight and are dropped; the sums run in the same order, so the same scores)
    W = sp.csr_matrix(W)
    columns = UsedColumns.if_sparse(W)
    if columns is not None:
        W = columns.compact(W)
    # (made before the weights' conversion: its temporaries are then gone when that peaks)
    by_intercept = _by_intercept(intercept)
    if W.dtype != np.float32:
        W = sp.csr_matrix(W, dtype=np.float32)
    if not W.has_canonical_format:
        # one entry per (feature, label): a dense column holds one weight a label.
        # Repeated entries (W's own, which no headstart model has) are summed in float32
        # in the feature-major order, as they always were
        wt = sp.csc_matrix(W)
        wt.sum_duplicates()
        W = wt.tocsr()
        del wt
    wt_indptr, wt_indices, wt_data, dmap, dcols = _feature_major(W)
    return _Predictor(wt_indptr=wt_indptr, wt_indices=wt_indices, wt_data=wt_data, dmap=dmap, dcols=dcols,
                      intercept=intercept, by_intercept=by_intercept, first_label=first,
                      n_features=n_features,
                      preprocessing=preprocessing, all_features=all_features, columns=columns)


def _check_X(X: Any, n_features: int, pre: Preprocessing | None = None, all_features: bool = False) -> Any:
    """``X`` as CSR or a 2-d array; wider than the model only when ``pre`` hashes it
    (hashing takes raw features of any width to the model's); exactly as wide with
    ``all_features`` (a dense + sparse model)."""
    X = real_matrix(X)      # what fit refuses, prediction refuses too (helper-50), and other shapes
    if sp.issparse(X) and not X.dtype.isnative:
        # scipy slices no big-endian matrix (the row blocks below), while fit reads it
        X = X.astype(X.dtype.newbyteorder("="))
    if sp.issparse(X) and X.format != "csr":
        X = X.tocsr()
    if X.shape[1] > n_features and (pre is None or pre.hashing is None):
        raise ModelFormatError(f"X has {X.shape[1]} features but the model was trained on {n_features} "
                               f"features; load the data with n_features={n_features}")
    if X.shape[1] < n_features and not sp.issparse(X) and (pre is None or pre.hashing is None):
        # fewer columns are padded only for sparse rows, whose trailing features may just
        # not occur (svmlight); a dense array's width is its feature space, so fewer
        # columns are other features (a dropped column shifts the rest): the CLI's rule
        raise ModelFormatError(f"X is a dense array of {X.shape[1]} columns but the model was trained on "
                               f"{n_features} features; they must be the same columns")
    if all_features and X.shape[1] != n_features:
        raise ModelFormatError(f"X has {X.shape[1]} features but this dense + sparse model needs all "
                               f"{n_features} (sparse and dense parts): predict with "
                               "headstart.shortlist.predict_model or 'headstart shortlist-predict'")
    return X


def _chunk_csr(X: Any, r0: int, r1: int, pre: Preprocessing | None) -> sp.csr_matrix:
    part = X[r0:r1]
    part = apply_preprocessing(part, pre) if pre is not None else part
    part = sp.csr_matrix(part, dtype=np.float32)
    if not part.has_canonical_format:
        # duplicate entries are summed, as training sums them: each finite, their sum
        # may not be (a copy: the caller's arrays are never changed)
        part = part.copy()
        part.sum_duplicates()
    check_finite_csr(part, "X", first_row=r0)
    return part


def _chunk_rows(chunk_rows: int | None, num_labels: int, max_memory: int) -> int:
    if chunk_rows is not None:
        if not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
            raise ParameterError(f"parameter chunk_rows must be an integer >= 1, got {chunk_rows!r}")
        return int(chunk_rows)
    if max_memory <= 0:
        raise ParameterError(f"parameter max_memory must be > 0 bytes, got {max_memory!r}")
    return max(1, int(max_memory) // (4 * max(num_labels, 1)))


def _topk_chunk_rows(chunk_rows: int | None, X: Any, max_memory: int) -> int:
    """Rows per chunk for top-k: the chunk's preprocessed float32 CSR copy (and the
    conversion's temporaries, ~24 bytes per stored value) within ``max_memory``.  The
    kernel's own scratch is per thread, not per row, so the label count does not enter."""
    if chunk_rows is not None or max_memory <= 0:
        return _chunk_rows(chunk_rows, 1, max_memory)
    per_value = 24.0 * (X.nnz / max(X.shape[0], 1) if sp.issparse(X) else X.shape[1])
    return max(1, int(int(max_memory) // (64 + per_value)))


def _run_blocks(fn: Any, n_rows: int, threads: int, pool: ThreadPoolExecutor | None) -> None:
    nblocks = min(max(1, n_rows // _MIN_BLOCK_ROWS), 4 * threads) if threads > 1 else 1
    bounds = np.linspace(0, n_rows, nblocks + 1).astype(np.int64)
    if pool is None or nblocks == 1:
        for a, z in zip(bounds[:-1], bounds[1:]):
            fn(int(a), int(z))
        return
    wait_all(pool.submit(fn, int(a), int(z)) for a, z in zip(bounds[:-1], bounds[1:]))


def _for_chunks(pred: _Predictor, X: Any, chunk_rows: int, threads: int, preprocess: bool, body: Any) -> None:
    pre = pred.preprocessing if preprocess else None
    pool = ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        for r0 in range(0, X.shape[0], chunk_rows):
            r1 = min(r0 + chunk_rows, X.shape[0])
            part = _chunk_csr(X, r0, r1, pre)
            if pred.columns is not None:
                part = pred.columns.compact(part)
            xi = (part.indptr.astype(np.int64, copy=False), part.indices.astype(np.int32, copy=False),
                  part.data)
            _run_blocks(lambda a, z: body(r0, a, z, xi), r1 - r0, threads, pool)
    finally:
        if pool is not None:
            pool.shutdown()


# --------------------------------------------------------------------------- public API
def predict_topk(model_or_weights: Any, X: Any, k: int = 5, chunk_rows: int | None = None,
                 threads: int | None = 0, *, max_memory: int = DEFAULT_MAX_MEMORY,
                 preprocess: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best labels of every row of ``X``: ``(labels int32 (n,k), scores float32 (n,k))``.

    ``model_or_weights`` may also be the result of :func:`prepare` (reused across calls).
    ``chunk_rows`` rows are preprocessed and scored at a time (default: as many as keep
    their float32 copy within ``max_memory``; each thread also holds 20 bytes per label).
    ``threads`` 0 = all cores.  See the module docstring for ties, padding, feature counts
    and preprocessing.
    """
    k = check_k(k)
    pred = _as_predictor(model_or_weights)
    X = _check_X(X, pred.n_features, pred.preprocessing if preprocess else None, pred.all_features)
    n = X.shape[0]
    if k > pred.num_labels and 8 * n * k > DEFAULT_DENSE_LIMIT:
        raise ParameterError(f"k={k} is more than the model's {pred.num_labels} labels: the {n} x {k} result "
                             f"would take {8 * n * k / 2**30:.1f} GiB, all but {pred.num_labels} columns "
                             f"padding; ask for k <= {pred.num_labels}")
    labels = np.empty((n, k), dtype=np.int32)
    scores = np.empty((n, k), dtype=np.float32)
    if n == 0:
        return labels, scores
    if pred.num_labels == 0:
        labels.fill(-1)
        scores.fill(-np.inf)
        return labels, scores

    dense_work = max(1.0, _DENSE_RATIO * pred.num_labels)

    def body(r0: int, a: int, z: int, xi: tuple) -> None:
        _topk_block(a, z, *xi, pred.wt_indptr, pred.wt_indices, pred.wt_data, pred.dmap, pred.dcols, pred.intercept,
                    pred.by_intercept, k, pred.first_label, dense_work, labels[r0:], scores[r0:])

    _for_chunks(pred, X, _topk_chunk_rows(chunk_rows, X, max_memory), resolve_threads(threads), preprocess, body)
    return labels, scores


def decision_function(model_or_weights: Any, X: Any, *, max_memory: int = DEFAULT_DENSE_LIMIT,
                      chunk_rows: int | None = None, threads: int | None = 0,
                      preprocess: bool = True) -> np.ndarray:
    """Dense scores ``(n, num_labels)`` float32; column ``j`` is label ``first_label + j``.

    Meant for small label counts: refuses (ParameterError) when the result would exceed
    ``max_memory`` bytes (default 1 GiB).  Labels listed in a model's ``missing_ranges``
    score ``-inf``.  The scores are exactly those :func:`predict_topk` ranks.
    """
    pred = _as_predictor(model_or_weights)
    X = _check_X(X, pred.n_features, pred.preprocessing if preprocess else None, pred.all_features)
    n, L = X.shape[0], pred.num_labels
    need = 4 * n * L
    if need > max_memory:
        raise ParameterError(
            f"decision_function would need {need / 2**20:.1f} MiB for {n} x {L} dense scores, more than "
            f"max_memory={max_memory / 2**20:.1f} MiB; use predict_topk for the top labels, or score "
            "fewer rows at a time, or raise max_memory")
    out = np.empty((n, L), dtype=np.float32)
    if n == 0 or L == 0:
        return out

    def body(r0: int, a: int, z: int, xi: tuple) -> None:
        _dense_block(a, z, *xi, pred.wt_indptr, pred.wt_indices, pred.wt_data, pred.dmap, pred.dcols, pred.intercept, out[r0:])

    _for_chunks(pred, X, _chunk_rows(chunk_rows, L, DEFAULT_MAX_MEMORY), resolve_threads(threads), preprocess, body)
    return out


def predict_above(model_or_weights: Any, X: Any, threshold: Any = 0.0, *, n_columns: int | None = None,
                  chunk_rows: int | None = None, threads: int | None = 0, max_memory: int = DEFAULT_MAX_MEMORY,
                  preprocess: bool = True, return_scores: bool = False) -> sp.csr_matrix:
    """Indicator matrix of the labels scoring above ``threshold``: CSR ``(n, n_columns)``
    int32 with a 1 at (i, label) for every label with score > ``threshold`` (with
    ``return_scores``: float32, the score at each such (i, label)).  ``threshold`` is one
    number for every label, or a vector of ``n_columns`` numbers indexed by global label
    id (per-label thresholds, e.g. from :func:`headstart.tuning.scutfbr`).  The float32
    score is compared with the threshold exactly, in float64, for one number as for a
    vector (so ``--threshold 0.1`` and a file of 0.1s decide alike).

    Scores are exactly those of :func:`decision_function` (float32), so the result equals
    ``decision_function(...).astype(np.float64) > threshold`` (numpy itself would round a
    Python float to float32 first) without ever holding the dense scores: memory
    beyond the inputs is 24 bytes per label per thread (scores, row marks, touched
    lists), the preprocessed chunk of rows (within ``max_memory``) and the result.  Rows
    are scored sparsely where the model is (see :func:`_above_block`): the time per row
    follows its weight products, not the label count.  Columns are global
    label ids; ``n_columns`` defaults to the model's label space (else first label +
    number of labels).  Labels in a model's ``missing_ranges`` are never set.
    """
    pred = _as_predictor(model_or_weights)
    if n_columns is None:
        n_columns = getattr(model_or_weights, "label_space", None) or pred.first_label + pred.num_labels
    if n_columns < pred.first_label + pred.num_labels:
        raise ParameterError(f"parameter n_columns must be >= {pred.first_label + pred.num_labels} (the "
                             f"model's last label + 1), got {n_columns!r}")
    thr = _label_thresholds(threshold, int(n_columns))[pred.first_label:pred.first_label + pred.num_labels]
    X = _check_X(X, pred.n_features, pred.preprocessing if preprocess else None, pred.all_features)
    n = X.shape[0]
    counts = np.zeros(n, dtype=np.int64)
    parts: dict[int, np.ndarray] = {}
    vals: dict[int, np.ndarray] = {}
    if n and pred.num_labels:
        # the labels an untouched row entry decides by its intercept alone (float32, as scored)
        passing = np.flatnonzero(pred.intercept.astype(np.float32).astype(np.float64) > thr).astype(np.int32)
        dense_work = max(1.0, _DENSE_RATIO * pred.num_labels)

        def body(r0: int, a: int, z: int, xi: tuple) -> None:
            parts[r0 + a], vals[r0 + a] = _above_block(a, z, *xi, pred.wt_indptr, pred.wt_indices, pred.wt_data,
                                                       pred.dmap, pred.dcols, pred.intercept, thr, passing,
                                                       dense_work, counts[r0:])

        _for_chunks(pred, X, _topk_chunk_rows(chunk_rows, X, max_memory), resolve_threads(threads), preprocess,
                    body)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = (np.concatenate([parts[r] for r in sorted(parts)]) if parts else np.zeros(0, np.int32))
    indices = indices.astype(np.int64 if n_columns > np.iinfo(np.int32).max else np.int32) + pred.first_label
    if return_scores:
        data = np.concatenate([vals[r] for r in sorted(vals)]) if vals else np.zeros(0, np.float32)
    else:
        data = np.ones(indices.size, dtype=np.int32)
    return sp.csr_matrix((data, indices, indptr), shape=(n, int(n_columns)))


def nonfinite_row(result: Any) -> int | None:
    """The first row of a prediction whose scores are not finite, or None: ``result`` is
    top-k's (labels, scores), whose padding (label -1, score -inf) is no score, or
    decisions with their scores as a sparse matrix.  Feature values near float32's limit
    (which the readers and fit accept) times the weights overflow to infinity, or to NaN
    where infinities cancel; the command line and the estimator's ranking refuse them
    (a ranking of infinities means nothing)."""
    if isinstance(result, tuple):
        labels, scores = np.asarray(result[0]), np.asarray(result[1])
        bad = ~np.isfinite(scores) & (labels >= 0)
        return int(np.argmax(bad.any(axis=1))) if bad.any() else None
    data = result.data
    if data.dtype.kind != "f" or np.isfinite(data).all():
        return None
    return int(np.searchsorted(result.indptr, np.argmax(~np.isfinite(data)), side="right") - 1)


def _label_thresholds(threshold: Any, n_columns: int) -> np.ndarray:
    """float64 threshold per global label id, from one number or a vector."""
    if isinstance(threshold, (int, float, np.integer, np.floating)) and not isinstance(threshold, bool):
        if np.isnan(threshold):
            raise ParameterError(f"parameter threshold must be a number, got {threshold!r}")
        return np.full(n_columns, np.float64(threshold))
    array_like = isinstance(threshold, (np.ndarray, list, tuple)) or hasattr(threshold, "__array__")
    t = np.asarray(threshold) if array_like else None
    if t is not None and t.ndim == 0 and t.dtype.kind in "fiu":     # np.array(0.1): one number
        return _label_thresholds(t.item(), n_columns)
    if t is None or t.dtype.kind not in "fiu" or t.shape != (n_columns,):
        got = f"shape {t.shape} dtype {t.dtype}" if t is not None else type(threshold).__name__
        raise ParameterError(f"parameter threshold must be a number or a vector of {n_columns} numbers (one per "
                             f"label), got {got}")
    t = t.astype(np.float64)
    if np.isnan(t).any():
        raise ParameterError(f"parameter threshold: entry {int(np.flatnonzero(np.isnan(t))[0])} is NaN")
    return t


def merge_topk(labels_a: np.ndarray, scores_a: np.ndarray, labels_b: np.ndarray, scores_b: np.ndarray,
               k: int) -> tuple[np.ndarray, np.ndarray]:
    """Combine two top-k lists of the same rows (disjoint labels) into the top ``k``.

    Same order as :func:`predict_topk`: score descending, then lower label; padding
    (label -1, score -inf) goes last.  Merging the per-shard results of a model gives
    exactly the result of the whole model.
    """
    labels = np.concatenate([np.asarray(labels_a), np.asarray(labels_b)], axis=1)
    scores = np.concatenate([np.asarray(scores_a), np.asarray(scores_b)], axis=1).astype(np.float32, copy=False)
    key = np.where(labels < 0, np.iinfo(np.int64).max, labels.astype(np.int64))
    order = np.lexsort((key, -scores), axis=-1)[:, :k]
    out_l = np.take_along_axis(labels, order, axis=1).astype(np.int32, copy=False)
    out_s = np.take_along_axis(scores, order, axis=1)
    if out_l.shape[1] < k:
        pad = k - out_l.shape[1]
        out_l = np.concatenate([out_l, np.full((out_l.shape[0], pad), -1, dtype=np.int32)], axis=1)
        out_s = np.concatenate([out_s, np.full((out_s.shape[0], pad), -np.inf, dtype=np.float32)], axis=1)
    return out_l, out_s


#: why one-vs-all prediction refuses a label-tree model directory
_TREE_MODEL = ("a label-tree model (its rows are tree nodes' outputs, not labels): predict with "
               "headstart.tree.load_tree(path).predict_topk or 'headstart predict'")


def _check_complete(model_dir: Path, m: dict, allow_gaps: bool) -> None:
    """Refuse a model with gaps unless ``allow_gaps`` (its missing labels are then never
    predicted), and a label-tree model (its rows are not labels)."""
    if "tree" in m:
        raise ModelFormatError(f"{model_dir}: {_TREE_MODEL}")
    missing = missing_ranges_of(m)
    if missing and not allow_gaps:
        raise ModelFormatError(f"{model_dir}: model is incomplete, missing {len(missing)} label range(s) "
                               f"starting with [{missing[0][0]}, {missing[0][1]}) "
                               "(allow_gaps=True, on the command line --allow-gaps, predicts with it anyway)")


def predict_topk_streaming(model_dir: str | os.PathLike, X: Any, k: int = 5, chunk_rows: int | None = None,
                           threads: int | None = 0, *, max_memory: int = DEFAULT_MAX_MEMORY,
                           preprocess: bool = True, allow_gaps: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`predict_topk` over a model directory, one shard in memory at a time.

    Equals ``predict_topk(load_model(model_dir), X, k)``.  A model with gaps is refused
    unless ``allow_gaps`` (then the missing labels are simply never returned).
    """
    check_k(k)
    model_dir = Path(model_dir)
    m = read_manifest(model_dir)
    _check_complete(model_dir, m, allow_gaps)
    pre = scoring_preprocessing(read_extras(model_dir, m)[0], m)
    X = _check_X(X, m["n_features"], pre if preprocess else None, "dense" in m)
    if preprocess:
        X = apply_preprocessing(X, pre)
    labels = np.full((X.shape[0], k), -1, dtype=np.int32)
    scores = np.full((X.shape[0], k), -np.inf, dtype=np.float32)
    for first, w, b in iter_shards(model_dir, m):
        la, sa = predict_topk((w, b, first), X, k, chunk_rows, threads, max_memory=max_memory)
        # the shard goes before the merge and the next shard's read: only one is ever held
        del w, b
        labels, scores = merge_topk(labels, scores, la, sa, k)
    return labels, scores


def predict_above_streaming(model_dir: str | os.PathLike, X: Any, threshold: Any = 0.0, *,
                            threads: int | None = 0, max_memory: int = DEFAULT_MAX_MEMORY, preprocess: bool = True,
                            allow_gaps: bool = False, return_scores: bool = False,
                            manifest: dict | None = None, preprocessing: Preprocessing | None = None
                            ) -> sp.csr_matrix:
    """:func:`predict_above` over a model directory, one shard in memory at a time (the
    shards' decisions are their own labels' columns, joined once).  ``manifest`` and
    ``preprocessing`` spare re-reading them for every block of a stream."""
    model_dir = Path(model_dir)
    m = read_manifest(model_dir) if manifest is None else manifest
    _check_complete(model_dir, m, allow_gaps)
    L = int(m["label_space"])
    threshold = _label_thresholds(threshold, L)
    if preprocess:
        pre = scoring_preprocessing(read_extras(model_dir, m)[0] if preprocessing is None else preprocessing, m)
        X = apply_preprocessing(_check_X(X, m["n_features"], pre, "dense" in m), pre)
    parts = []
    for first, w, b in iter_shards(model_dir, m):
        parts.append(predict_above((w, b, first), X, threshold, n_columns=L, threads=threads,
                                   max_memory=max_memory, return_scores=return_scores).tocoo())
        del w, b    # before the next shard is read: only one is ever held
    dtype = np.float32 if return_scores else np.int32
    return sp.csr_matrix((np.concatenate([p.data for p in parts] or [np.zeros(0, dtype)]),
                          (np.concatenate([p.row for p in parts] or [np.zeros(0, np.int64)]),
                           np.concatenate([p.col for p in parts] or [np.zeros(0, np.int64)]))),
                         shape=(X.shape[0], L), dtype=dtype)


__all__ = ["predict_topk", "predict_topk_streaming", "merge_topk", "decision_function", "predict_above",
           "predict_above_streaming", "prepare"]
