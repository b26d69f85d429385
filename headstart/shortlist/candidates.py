"""The first stage: for every instance, its K candidate labels.

Two ways to make candidates, both by cosine similarity of L2-normalised sparse rows:

``neighbours`` (default)
    the k nearest *training instances* of x; a label's score is the sum of the
    similarities of the neighbours that have it, and the K best labels are x's
    candidates (a training instance does not count itself).  Measured on debian-deps
    (exact search, K = 100, k = 30, restricting the full one-vs-all model's scores to
    the candidates): P@1/3/5 69.65 / 49.31 / 38.40 against 69.69 / 49.38 / 38.51
    unrestricted, recall of the test positives 68.1%.
``centroids``
    the K labels whose centroid (the mean of its positives, normalised) is most similar
    to x -- the classic first stage.  Same measurement: 65.67 / 45.25 / 34.72 at K = 100
    and still 68.14 / 47.54 / 36.76 at K = 200 (recall 64.1% at K = 100): on this data
    the neighbours' labels are the better shortlist, so they are the default.

Slots that the neighbours' labels leave empty (an x whose neighbours have fewer than K
labels together) are filled with the most frequent training labels, best first, unless
``fill=False``: then such an x has fewer than K candidates.  Measured on debian-deps
(K = 100, exact, all labels): without filling the training shortlist has 3.0M instead of
3.9M pairs, shortlisted training took 9% less CPU time, the test recall was 68.05%
instead of 68.73% and P@1/3/5 69.50 / 48.82 / 37.99 instead of 69.45 / 48.86 / 38.04 --
the filled slots give the most frequent labels easy negatives and few test positives.

Search back-ends (an open registry, :data:`BACKENDS`):

``exact``
    brute force over an inverted index (numba, threads over query rows): per query
    O(sum of the posting lengths of its features), i.e. O(n) for common features --
    fine up to ~10^5 index rows, and the reference for recall.  A query that reaches
    many rows is accumulated densely and selected by one scan (see DENSE_SHARE): on
    debian-deps the training shortlist took 6.0 s instead of 30.7 s (2 threads), the
    same neighbours bit for bit;
``pynndescent``
    approximate search with PyNNDescent (the ``ann`` extra).  Chosen over hnswlib
    and faiss-cpu because it searches *sparse* CSR rows with the cosine metric directly
    (hnswlib and faiss index dense vectors only, so the tf-idf rows would first have to
    be projected: a 256-dimensional truncated SVD cut the centroid recall on debian-deps
    from 64% to 45% at K = 100), it is pure Python + numba like headstart (no compiled
    wheel to match), its index build returns the k-nearest-neighbour graph of the
    indexed rows for free (exactly what the training shortlist needs), and it is
    actively released (0.7.0, 2026).  Its index is not saved (it pickles); a
    :class:`FirstStage` stores its rows and rebuilds the index when loaded.
``pruned``
    the exact search over an inverted index that keeps only each indexed row's
    ``keep`` largest entries (an impact-pruned index; queries keep all their features).
    In tf-idf rows the largest entries are the rare, informative words, so the long
    posting lists of common words, which make the exact search O(n) per query, mostly
    vanish, while the similarities that decide the neighbours keep their largest terms.
    Measured on the Amazon-670K-shaped set at full scale (490K rows, 1,000 training
    rows as queries, one thread; docs/shortlist.md): exact 3.15 ms per query, label
    recall 24.3% (K = 100, k = 30); keep 32: 1.10 ms, 23.9%; keep 16: 0.38 ms,
    22.4%; keep 8: 0.05 ms, 18.8%.  At 5% scale keep 32 had the exact search's recall
    (21.0% against 20.9%).  Chosen over pynndescent for large sets because its cost is
    predictable and small (no graph to build: pynndescent took 115 s to index the
    39K rows of debian-deps) and it needs nothing beyond headstart's own kernels.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .._compile import njit
from .._span import U32, span
from ..prediction.topk import _push as _heap_push, _sift_down, _worse
import scipy.sparse as sp

from .._columns import UsedColumns
from .._threads import resolve_threads, wait_all
from ..errors import DataFormatError, MissingExtraError, ModelFormatError, ParameterError
from ..validation import check_features, check_labels

log = logging.getLogger(__name__)

#: multiply-adds of an exact search beyond which it is worth a warning: helper-65 measured
#: 6.7e10 (centroids of 2M labels, 100K rows) run for more than 13 minutes on one thread
EXACT_WORK_WARNING = 2e10

METHODS = ("neighbours", "centroids")


# --------------------------------------------------------------------------- kernels
# The bounded min-heap of (score, id) pairs is the top-k predictor's (same total order:
# higher score, then lower id).
@njit(cache=True, nogil=True)
def _push(hs, hi, size, k, s, i):
    """Keep the k best (score, id) pairs in a min-heap (worst at the root)."""
    if size >= k and not _worse(hs[0], hi[0], s, i):
        return size
    return _heap_push(hs, hi, size, k, s, i)


@njit(cache=True, nogil=True)
def _drain(hs, hi, size, out_s, out_i):
    """Empty the heap into out_*, best first (popping the worst into the last free slot);
    the rest of out_* padded with (-inf, -1)."""
    for a in range(size, out_i.size):
        out_s[a] = -np.inf
        out_i[a] = -1
    while size > 0:
        size -= 1
        out_s[size] = hs[0]
        out_i[size] = hi[0]
        hs[0] = hs[size]
        hi[0] = hi[size]
        _sift_down(hs, hi, 0, size)


# A query whose posting lists add up to more than n_index / DENSE_SHARE entries is scored
# into a dense accumulator and selected by one scan over it; others keep a list of the
# rows they touch.  The list costs a data-dependent branch per posting (is this row new?),
# which mispredicts about once per new row: on debian-deps, where most queries share a
# common word with a third of the rows, that branch made the search 17 ns per posting;
# the scan costs under 1 ns per index row and the branch-free accumulation ~1-2 ns.
DENSE_SHARE = 8


# Unsigned positions and ids in the loops over postings (headstart/_span.py).


@njit(cache=True, nogil=True)
def exact_search_block(r0, r1, q_indptr, q_indices, q_data, t_indptr, t_rows, t_data, n_index, k, self_offset,
                       out_ids, out_sims):
    """Top-k index rows by inner product for query rows r0..r1-1 (an inverted index:
    ``t_*`` is the index matrix in CSC, feature -> rows).  With ``self_offset`` >= 0,
    query row r never returns index row r + self_offset (a training row and itself).
    Only rows with a nonzero inner product are returned."""
    acc = np.zeros(n_index)
    touched = np.empty(n_index, dtype=np.int64)
    hs = np.empty(k)
    hi = np.empty(k, dtype=np.int64)
    for r in range(r0, r1):
        work = 0
        for p in range(*span(q_indptr, r)):
            f = U32(q_indices[p])
            work += t_indptr[f + 1] - t_indptr[f]
        size = 0
        skip = r + self_offset if self_offset >= 0 else -1
        if work * DENSE_SHARE > n_index:
            for p in range(*span(q_indptr, r)):
                f = U32(q_indices[p])
                v = np.float64(q_data[p])
                for t in range(*span(t_indptr, f)):
                    acc[U32(t_rows[t])] += v * t_data[t]
            # ascending j: a row can only enter a full heap with a higher score than the root
            for j in range(n_index):
                a = acc[j]
                if a != 0.0 and (size < k or a > hs[0]) and j != skip:
                    size = _heap_push(hs, hi, size, k, a, j)
            acc[:] = 0.0
        else:
            nt = 0
            for p in range(*span(q_indptr, r)):
                f = U32(q_indices[p])
                v = np.float64(q_data[p])
                for t in range(*span(t_indptr, f)):
                    j = U32(t_rows[t])
                    if acc[j] == 0.0:
                        touched[nt] = j
                        nt += 1
                    acc[j] += v * t_data[t]
                    if acc[j] == 0.0:     # cancelled to exactly zero: keep it listed
                        acc[j] = 1e-300
            for q in range(nt):
                j = touched[q]
                a = acc[j]
                acc[j] = 0.0
                if j != skip and a != 1e-300:
                    size = _push(hs, hi, size, k, a, j)
        _drain(hs, hi, size, out_sims[r], out_ids[r])


@njit(cache=True, nogil=True)
def labels_from_neighbours(r0, r1, nb_ids, nb_sims, y_indptr, y_indices, n_labels, K, prior, out_labels,
                           out_scores):
    """Candidate labels of rows r0..r1-1 from their neighbours: label score = sum of the
    similarities of the neighbours that have it; K best; empty slots filled from
    ``prior`` (labels, most frequent first) with score 0."""
    acc = np.zeros(n_labels)
    seen = np.zeros(n_labels, dtype=np.bool_)
    touched = np.empty(n_labels, dtype=np.int64)
    hs = np.empty(K)
    hi = np.empty(K, dtype=np.int64)
    for r in range(r0, r1):
        nt = 0
        for a in range(nb_ids.shape[1]):
            i = nb_ids[r, a]
            if i < 0:
                continue
            s = max(nb_sims[r, a], 0.0)
            for p in range(y_indptr[i], y_indptr[i + 1]):
                lab = y_indices[p]
                if not seen[lab]:
                    seen[lab] = True
                    touched[nt] = lab
                    nt += 1
                acc[lab] += s
        size = 0
        for q in range(nt):
            lab = touched[q]
            size = _push(hs, hi, size, K, acc[lab], lab)
        _drain(hs, hi, size, out_scores[r], out_labels[r])
        nt = _fill_slots(out_labels[r], out_scores[r], prior, 0.0, seen, touched, nt)
        for q in range(nt):
            acc[touched[q]] = 0.0
            seen[touched[q]] = False


@njit(cache=True, nogil=True)
def _fill_slots(labels, scores, prior, fill, seen, touched, nt):
    """One row's empty slots (label -1) get the most frequent labels (``prior`` order)
    not ``seen`` yet, with score ``fill``; each is marked seen and appended to
    ``touched[nt:]`` for the caller's reset.  Returns the new ``nt``."""
    q = 0
    for a in range(labels.size):
        if labels[a] >= 0:
            continue
        while q < prior.size and seen[prior[q]]:
            q += 1
        if q >= prior.size:
            break
        labels[a] = prior[q]
        scores[a] = fill
        seen[prior[q]] = True
        touched[nt] = prior[q]
        nt += 1
    return nt


@njit(cache=True, nogil=True)
def fill_from_prior(r0, r1, labels, scores, prior, n_labels):
    """Rows r0..r1-1 of (labels, scores): each empty slot (label -1) gets the most frequent
    label (``prior`` order) the row does not hold yet, with score -inf (no similarity) --
    the centroid search's rows that reach fewer than K centroids, e.g. a row without
    features, as labels_from_neighbours fills the neighbours' rows."""
    seen = np.zeros(n_labels, dtype=np.bool_)
    touched = np.empty(labels.shape[1], dtype=np.int64)
    for r in range(r0, r1):
        nt = 0
        for a in range(labels.shape[1]):
            if labels[r, a] >= 0 and not seen[labels[r, a]]:
                seen[labels[r, a]] = True
                touched[nt] = labels[r, a]
                nt += 1
        nt = _fill_slots(labels[r], scores[r], prior, -np.inf, seen, touched, nt)
        for q in range(nt):
            seen[touched[q]] = False


@njit(cache=True, nogil=True)
def count_hits(r0, r1, cand, y_indptr, y_indices, n_labels):
    """Number of (row, label) positives of rows r0..r1-1 found among their candidates."""
    mark = np.zeros(n_labels, dtype=np.bool_)
    hits = 0
    for r in range(r0, r1):
        for a in range(cand.shape[1]):
            if cand[r, a] >= 0:
                mark[cand[r, a]] = True
        for p in range(y_indptr[r], y_indptr[r + 1]):
            if mark[y_indices[p]]:
                hits += 1
        for a in range(cand.shape[1]):
            if cand[r, a] >= 0:
                mark[cand[r, a]] = False
    return hits


# --------------------------------------------------------------------------- helpers
def _blocks(n: int, threads: int, fn: Callable[[int, int], None], block: int = 1024,
            progress: Callable[[int], None] | None = None) -> None:
    """fn(r0, r1) over blocks of rows, on ``threads`` threads (the kernels release the GIL);
    ``progress(rows)`` after each block."""
    if progress is not None:
        work = fn

        def fn(a: int, b: int) -> None:
            work(a, b)
            progress(b - a)
    spans = [(a, min(a + block, n)) for a in range(0, n, block)]
    if threads <= 1 or len(spans) <= 1:
        for a, b in spans:
            fn(a, b)
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="headstart-cand") as pool:
        wait_all(pool.submit(fn, a, b) for a, b in spans)


def normalize_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    """L2-normalised float32 copy (zero rows stay zero)."""
    X = sp.csr_matrix(X, dtype=np.float32, copy=True)
    # canonical (sorted, no duplicates): scipy's multiply of matrices not known to be so
    # takes O(columns) scratch, 0.8 GB for a 2^26-feature header
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    X.data *= np.repeat(scale, np.diff(X.indptr)).astype(np.float32)
    return X


def label_centroids(X: sp.csr_matrix, Y: sp.spmatrix) -> sp.csr_matrix:
    """L2-normalised sum (= direction of the mean) of every label's positive rows.

    The product runs over the columns that occur (scipy's keeps O(columns) scratch),
    its rows mapped back to X's feature ids."""
    Yc = sp.csc_matrix(Y, dtype=np.float32)
    cols = UsedColumns.of(X)
    C = sp.csr_matrix(Yc.T @ cols.compact(X))
    C = sp.csr_matrix((C.data, cols.used[C.indices], C.indptr), shape=(C.shape[0], X.shape[1]))
    return normalize_rows(C)


@njit(cache=True, nogil=True)
def largest_entries(indptr, data, keep, out_mask):
    """Mark each row's ``keep`` entries of largest magnitude (ties: the earlier entry)."""
    for r in range(indptr.size - 1):
        lo, up = indptr[r], indptr[r + 1]
        if up - lo <= keep:
            out_mask[lo:up] = True
            continue
        # stable sort of -|v|: equal magnitudes keep their order, so the result is
        # deterministic and the same on every machine
        order = np.argsort(-np.abs(data[lo:up]), kind="mergesort")
        for j in range(keep):
            out_mask[lo + order[j]] = True


def keep_largest(rows: sp.csr_matrix, keep: int) -> sp.csr_matrix:
    """Each row of ``rows`` cut to its ``keep`` entries of largest magnitude."""
    rows = sp.csr_matrix(rows)
    mask = np.zeros(rows.nnz, dtype=np.bool_)
    largest_entries(rows.indptr.astype(np.int64), rows.data, int(keep), mask)
    lens = np.minimum(np.diff(rows.indptr), keep)
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    return sp.csr_matrix((rows.data[mask], rows.indices[mask], indptr), shape=rows.shape)


# --------------------------------------------------------------------------- back-ends
class ExactIndex:
    """Brute-force cosine search over an inverted index (see the module docstring)."""

    name = "exact"

    def __init__(self, rows: sp.csr_matrix, threads: int | None = None, **_: Any):
        self.rows = rows
        self.n = rows.shape[0]
        # posting lists of the columns that occur only: a header's 2^26 declared features
        # would otherwise cost 0.8 GB of pointers (queries are renumbered the same way)
        self.columns = UsedColumns.of(rows)
        T = sp.csc_matrix(self.columns.compact(rows))
        T.sort_indices()
        # int32 row ids: the posting lists are streamed once per query that has the feature
        self._t = (T.indptr.astype(np.int64), T.indices.astype(np.int32), T.data.astype(np.float32))
        self.threads = resolve_threads(threads)

    def search(self, Q: sp.csr_matrix, k: int, exclude_self: bool = False,
               progress: Callable[[int], None] | None = None):
        Q = self.columns.compact(Q)
        n = Q.shape[0]
        ids = np.full((n, k), -1, dtype=np.int64)
        sims = np.full((n, k), -np.inf)
        q = (Q.indptr.astype(np.int64), Q.indices.astype(np.int64), Q.data.astype(np.float32))
        off = 0 if exclude_self else -1
        self._warn_of_work(Q)
        _blocks(n, self.threads, lambda a, b: exact_search_block(a, b, *q, *self._t, self.n, k, off, ids, sims),
                progress=progress)
        return ids, sims

    def _warn_of_work(self, Q: sp.csr_matrix) -> None:
        """The exact search costs a multiply-add per (query nonzero, posting of its column):
        with features common to most indexed rows (label centroids of millions of labels)
        that is O(rows) per query -- said before it starts, with the way out."""
        if self.name != "exact" or Q.nnz == 0:
            return
        postings = np.diff(self._t[0])
        work = float(np.dot(np.bincount(Q.indices, minlength=postings.size)[:postings.size].astype(np.float64),
                            postings))
        if work > EXACT_WORK_WARNING:
            log.warning("the exact search does about %.2g multiply-adds (%.3g per query row, against %d indexed "
                        "rows): at this size it may take hours; backend 'pruned' (each indexed row cut to its "
                        "largest entries: --backend pruned --keep N) bounds it", work, work / Q.shape[0], self.n)


class PyNNDescentIndex:
    """Approximate cosine search with PyNNDescent (``pip install headstart[ann]``)."""

    name = "pynndescent"

    def __init__(self, rows: sp.csr_matrix, threads: int | None = None, n_neighbors: int = 30,
                 random_state: int = 0, **_: Any):
        try:
            import pynndescent
        except ImportError:
            raise MissingExtraError("backend 'pynndescent' needs the pynndescent package: pip install "
                                    "'headstart[ann]' (backend 'exact' needs no extra)") from None
        self.rows = rows
        self.n = rows.shape[0]
        self.columns = UsedColumns.of(rows)
        self.index = pynndescent.NNDescent(self.columns.compact(rows), metric="cosine", n_neighbors=max(n_neighbors, 5),
                                           random_state=random_state, n_jobs=resolve_threads(threads),
                                           compressed=False)
        self._prepared = False

    def search(self, Q: sp.csr_matrix, k: int, exclude_self: bool = False,
               progress: Callable[[int], None] | None = None):
        out = self._search(Q, k, exclude_self)
        if progress is not None:
            progress(Q.shape[0])
        return out

    def _search(self, Q: sp.csr_matrix, k: int, exclude_self: bool):
        if exclude_self and k + 1 <= self.index.n_neighbors:
            # the index's own k-NN graph (built anyway) holds each row's neighbours, itself first
            ids, dist = self.index.neighbor_graph
            return self._drop_self(ids, dist, k)
        if not self._prepared:
            self.index.prepare()
            self._prepared = True
        ids, dist = self.index.query(self.columns.compact(Q), k=k + 1 if exclude_self else k)
        if exclude_self:
            return self._drop_self(ids, dist, k)
        return ids.astype(np.int64), 1.0 - dist.astype(np.float64)

    @staticmethod
    def _drop_self(ids, dist, k):
        n = ids.shape[0]
        ids = ids.astype(np.int64)
        sims = 1.0 - dist.astype(np.float64)
        keep = ids != np.arange(n)[:, None]
        out_i = np.full((n, k), -1, dtype=np.int64)
        out_s = np.full((n, k), -np.inf)
        for r in range(n):  # rows whose list lacks themselves keep their k best
            sel = np.flatnonzero(keep[r])[:k]
            out_i[r, :sel.size] = ids[r, sel]
            out_s[r, :sel.size] = sims[r, sel]
        return out_i, out_s


class PrunedIndex(ExactIndex):
    """Exact search over the index rows cut to their ``keep`` largest entries
    (approximate; see the module docstring)."""

    name = "pruned"

    def __init__(self, rows: sp.csr_matrix, threads: int | None = None, keep: int = 32, **_: Any):
        super().__init__(keep_largest(rows, keep), threads)
        self.rows = rows


#: open registry of search back-ends: name -> class(rows, threads=..., **options)
BACKENDS: dict[str, type] = {"exact": ExactIndex, "pynndescent": PyNNDescentIndex, "pruned": PrunedIndex}


# --------------------------------------------------------------------------- the first stage
@dataclass
class FirstStageParams:
    method: str = "neighbours"     # neighbours | centroids
    K: int = 100                   # candidate labels per instance
    neighbours: int = 30           # k nearest training instances (method neighbours)
    backend: str = "exact"         # a key of BACKENDS
    fill: bool = True              # fill empty candidate slots with the most frequent labels (neighbours)
    keep: int = 32                 # backend pruned: entries kept per indexed row
    train_K: int = 0               # candidate labels per training instance (the shortlist); 0: K
    random_negatives: int = 0      # random training instances added to every label's shortlist
    seed: int = 0                  # of the random negatives

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ParameterError(f"parameter method must be one of {', '.join(METHODS)}, got {self.method!r}")
        for name, least in (("K", 1), ("neighbours", 1), ("keep", 1), ("train_K", 0), ("random_negatives", 0),
                            ("seed", 0)):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < least:
                raise ParameterError(f"parameter {name} must be an integer >= {least}, got {v!r}")
        if 0 < self.train_K < self.K:
            # labels would rank instances unlike any negative they were trained on: P@1 64.15
            # against 68.50 on debian-deps when trained at K = 50 and asked among 100
            raise ParameterError(f"parameter train_K ({self.train_K}) must be 0 or at least K ({self.K}): "
                                 "prediction must not rank a label among more candidates than its training "
                                 "shortlist was made of (docs/shortlist.md)")
        if self.backend not in BACKENDS:
            raise ParameterError(f"parameter backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if not isinstance(self.fill, (bool, np.bool_)):
            raise ParameterError(f"parameter fill must be true or false, got {self.fill!r}")

    @property
    def training_K(self) -> int:
        """Candidate labels per training instance: ``train_K``, or K when it is 0."""
        return int(self.train_K or self.K)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "K": int(self.K), "neighbours": int(self.neighbours),
                "backend": self.backend, "fill": bool(self.fill), "keep": int(self.keep),
                "train_K": int(self.train_K), "random_negatives": int(self.random_negatives), "seed": int(self.seed)}

    @classmethod
    def from_dict(cls, meta: dict[str, Any], backend: str | None = None) -> "FirstStageParams":
        """From :meth:`to_dict`'s keys; those a file of an earlier version lacks take their
        defaults (which are what that version did)."""
        return cls(meta["method"], meta["K"], meta["neighbours"], backend or meta["backend"], meta.get("fill", True),
                   meta.get("keep", 32), meta.get("train_K", 0), meta.get("random_negatives", 0),
                   meta.get("seed", 0))


@dataclass
class FirstStage:
    """A fitted first stage: the normalised rows it searches and what maps hits to labels."""

    params: FirstStageParams
    rows: sp.csr_matrix            # normalised training rows (neighbours) or centroids
    Y: sp.csr_matrix | None        # training labels (neighbours), instances x labels
    prior: np.ndarray              # labels by training frequency, most frequent first
    n_features: int
    n_labels: int
    threads: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    _index: Any = None

    @classmethod
    def fit(cls, X: sp.csr_matrix, Y: sp.spmatrix, params: FirstStageParams | None = None,
            threads: int | None = None) -> "FirstStage":
        params = params or FirstStageParams()
        X = check_features(X, "X")
        Yr = check_labels(Y, X.shape[0], "Y")
        Yr.sort_indices()
        counts = np.asarray(Yr.sum(axis=0)).ravel()
        prior = np.lexsort((np.arange(counts.size), -counts)).astype(np.int64)
        if params.method == "neighbours":
            rows, Ykeep = normalize_rows(X), Yr
        else:
            rows, Ykeep = label_centroids(X, Yr), None
        return cls(params, rows, Ykeep, prior, int(X.shape[1]), int(Yr.shape[1]), threads)

    @property
    def index(self):
        if self._index is None:
            t0 = time.perf_counter()
            self._index = BACKENDS[self.params.backend](self.rows, threads=self.threads,
                                                        n_neighbors=max(self.params.neighbours + 1, 30),
                                                        keep=self.params.keep)
            self.info["index_seconds"] = time.perf_counter() - t0
        return self._index

    def candidates(self, X: sp.csr_matrix, *, training: bool = False, K: int | None = None,
                   fill: bool | None = None, progress: Callable[[int], None] | None = None):
        """(labels, scores), each (n, K): the candidates of every row of X, best first
        (label -1 where there are fewer).  ``training``: X is the training data the stage
        was fitted on, and (method neighbours) a row does not count itself; K defaults to
        the stage's ``training_K`` then, else to its K.  ``fill``
        (default: the stage's own setting) fills empty slots with the most frequent
        training labels.  ``progress(rows)`` as the search goes (a back-end of the
        registry whose ``search`` takes no ``progress`` reports nothing)."""
        search = self.index.search
        if progress is not None and _takes(search, "progress"):
            search = functools.partial(search, progress=progress)
        K = int(K or (self.params.training_K if training else self.params.K))
        fill = self.params.fill if fill is None else bool(fill)
        X = check_features(X, "X")
        if X.shape[1] > self.n_features:
            raise ParameterError(f"X has {X.shape[1]} features, the first stage was fitted on {self.n_features}")
        Q = normalize_rows(X)
        if Q.shape[1] < self.n_features:
            Q = sp.csr_matrix((Q.data, Q.indices, Q.indptr), shape=(Q.shape[0], self.n_features))
        t0 = time.perf_counter()
        if self.params.method == "centroids":
            labels, scores = search(Q, min(K, self.n_labels))
            if labels.shape[1] < K:
                labels = np.pad(labels, ((0, 0), (0, K - labels.shape[1])), constant_values=-1)
                scores = np.pad(scores, ((0, 0), (0, K - scores.shape[1])), constant_values=-np.inf)
            if fill and (labels < 0).any():
                labels = np.ascontiguousarray(labels, dtype=np.int64)
                scores = np.ascontiguousarray(scores, dtype=np.float64)
                _blocks(Q.shape[0], resolve_threads(self.threads),
                        lambda a, b: fill_from_prior(a, b, labels, scores, self.prior, self.n_labels))
        else:
            nb_ids, nb_sims = search(Q, self.params.neighbours, exclude_self=training)
            labels = np.full((Q.shape[0], K), -1, dtype=np.int64)
            scores = np.full((Q.shape[0], K), -np.inf)
            yi = (self.Y.indptr.astype(np.int64), self.Y.indices.astype(np.int64))
            prior = self.prior if fill else self.prior[:0]
            _blocks(Q.shape[0], resolve_threads(self.threads),
                    lambda a, b: labels_from_neighbours(a, b, nb_ids, nb_sims, *yi, self.n_labels, K, prior,
                                                        labels, scores))
        self.info["search_seconds"] = self.info.get("search_seconds", 0.0) + time.perf_counter() - t0
        return labels, scores

    def prediction_candidates(self, X: sp.csr_matrix, k: int):
        """The candidates that prediction scores: at least k per row (the stage's K, or k
        if larger), empty slots filled with the most frequent training labels whatever
        the stage's ``fill`` (which shapes training shortlists), so that every row has k
        labels to rank whenever the label space has them."""
        return self.candidates(X, K=max(int(self.params.K), int(k)), fill=True)

    def check_model(self, label_space: int, n_features: int, where: str = "the model") -> None:
        """Refuse a model of another label space or feature width than this stage's."""
        if int(label_space) != self.n_labels:
            raise ParameterError(f"the first stage was made for {self.n_labels} labels, {where} has "
                                 f"{label_space}: they must come from the same training data")
        if int(n_features) != self.n_features:
            raise ParameterError(f"the first stage was made on {self.n_features} features, {where} on "
                                 f"{n_features}: they must come from the same training data")

    # ---- on disk: params JSON + arrays npz (no pickle); the ANN index is rebuilt
    def save(self, path: str | os.PathLike, train_shortlist_sha256: str | None = None) -> None:
        """Write the stage to the directory ``path``; ``train_shortlist_sha256``: the
        fingerprint of the training shortlist it made (shortlist.api.shortlist_fingerprint),
        so that prediction can tell a model trained on another shortlist."""
        from ..io.atomic import atomic_write

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        arrays = {"rows_indptr": self.rows.indptr.astype(np.int64), "rows_indices": self.rows.indices.astype(np.int32),
                  "rows_data": self.rows.data.astype(np.float32),
                  "rows_shape": np.asarray(self.rows.shape, dtype=np.int64), "prior": self.prior}
        if self.Y is not None:
            arrays.update({"y_indptr": self.Y.indptr.astype(np.int64), "y_indices": self.Y.indices.astype(np.int32)})
        with atomic_write(path / "first_stage.npz", "wb") as fh:
            np.savez(fh, **arrays)
        meta = {"format": "headstart-first-stage", "version": 1, **self.params.to_dict(),
                "n_features": self.n_features, "n_labels": self.n_labels}
        if train_shortlist_sha256 is not None:
            meta["train_shortlist_sha256"] = str(train_shortlist_sha256)
        with atomic_write(path / "first_stage.json", "w") as fh:
            fh.write(json.dumps(meta, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike, threads: int | None = None, backend: str | None = None) -> "FirstStage":
        path = Path(path)
        try:
            meta = json.loads((path / "first_stage.json").read_text(encoding="utf-8"))
            z = np.load(path / "first_stage.npz", allow_pickle=False)
        except FileNotFoundError as e:
            raise ModelFormatError(f"{path}: no first stage there ({e.filename} is missing; made by "
                                   "'headstart shortlist --save-first-stage')") from None
        except (ValueError, OSError) as e:
            raise ModelFormatError(f"{path}: unreadable first stage: {e}") from None
        if not isinstance(meta, dict) or meta.get("format") != "headstart-first-stage" or meta.get("version") != 1:
            raise ModelFormatError(f"{path / 'first_stage.json'}: not a headstart first stage (version 1)")
        try:
            params = FirstStageParams.from_dict(meta, backend)
            with z:
                shape = tuple(int(v) for v in z["rows_shape"])
                rows = sp.csr_matrix((z["rows_data"], z["rows_indices"], z["rows_indptr"]), shape=shape)
                rows.check_format(full_check=True)
                prior = z["prior"].astype(np.int64)
                Y = None
                if "y_indptr" in z.files:
                    yi = z["y_indices"]
                    Y = sp.csr_matrix((np.ones(yi.size, dtype=np.float32), yi, z["y_indptr"]),
                                      shape=(shape[0], int(meta["n_labels"])))
                    Y.check_format(full_check=True)
        except (KeyError, ValueError, TypeError) as e:
            raise ModelFormatError(f"{path}: corrupt first stage: {e}") from None
        if (params.method == "neighbours") != (Y is not None) or shape[1] != meta["n_features"]:
            raise ModelFormatError(f"{path}: first stage arrays do not match its description")
        fs = cls(params, rows, Y, prior, int(meta["n_features"]), int(meta["n_labels"]), threads)
        if isinstance(meta.get("train_shortlist_sha256"), str):
            fs.info["train_shortlist_sha256"] = meta["train_shortlist_sha256"]
        return fs


# --------------------------------------------------------------------------- shortlists
@njit(cache=True, nogil=True)
def _first_bad_candidate(cand, n_labels):
    """(row, slot, what) of the first candidate slot that is not a label id in
    [-1, n_labels) (what 1; n_labels < 0: no upper bound) or repeats an earlier one of
    its row (what 2); (-1, -1, 0) when all are good.  O(n K) with a mark per label."""
    bound = n_labels if n_labels >= 0 else 0
    seen = np.zeros(bound, dtype=np.bool_)
    for r in range(cand.shape[0]):
        bad = -1
        what = 0
        for a in range(cand.shape[1]):
            lab = cand[r, a]
            if lab < -1 or (n_labels >= 0 and lab >= n_labels):
                bad, what = a, 1
                break
            if lab >= 0 and n_labels >= 0:
                if seen[lab]:
                    bad, what = a, 2
                    break
                seen[lab] = True
        for a in range(cand.shape[1]):          # unmark what this row marked
            lab = cand[r, a]
            if 0 <= lab < bound:
                seen[lab] = False
        if bad >= 0:
            return r, bad, what
    return -1, -1, 0


def check_candidates(labels: Any, n_rows: int | None, n_labels: int | None,
                     name: str = "candidates") -> np.ndarray:
    """(n, K) candidate label ids as a C-ordered int64 array: refused with the first bad
    place unless 2-D, of an integer dtype (a float id would be cut silently), with
    ``n_rows`` rows (when given), every id in [-1, n_labels) (-1: an empty slot; no upper
    bound when ``n_labels`` is None) and no label twice in a row (when ``n_labels`` is
    known: prediction would rank it twice).  The kernels index label arrays by these
    ids without bounds checks, so this runs at every public entry that takes them."""
    a = np.asarray(labels)
    if a.ndim != 2:
        raise DataFormatError(f"{name} must be a 2-D (instances x K) array of label ids, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise DataFormatError(f"{name} must hold integer label ids (-1 for an empty slot), got dtype {a.dtype}")
    if n_rows is not None and a.shape[0] != n_rows:
        raise DataFormatError(f"{name} has {a.shape[0]} rows but there are {n_rows} instances: one row of "
                              "candidates per instance")
    a = np.ascontiguousarray(a, dtype=np.int64)
    r, slot, what = _first_bad_candidate(a, -1 if n_labels is None else int(n_labels))
    if what == 1:
        space = f"[-1, {n_labels})" if n_labels is not None else "-1 or above"
        raise DataFormatError(f"{name}: row {r}, slot {slot} holds the label id {a[r, slot]}, outside {space}")
    if what == 2:
        raise DataFormatError(f"{name}: row {r} lists label {a[r, slot]} twice (slot {slot})")
    return a


def candidates_to_shortlist(labels: np.ndarray, n_labels: int) -> sp.csc_matrix:
    """Instances x labels 0/1 CSC (per label its instances, sorted) from (n, K) candidates."""
    labels = check_candidates(labels, None, n_labels)
    n, K = labels.shape
    rows = np.repeat(np.arange(n, dtype=np.int64), K)
    cols = labels.ravel()
    keep = cols >= 0
    M = sp.csc_matrix((np.ones(int(keep.sum()), dtype=np.float32), (rows[keep], cols[keep])), shape=(n, n_labels))
    M.sum_duplicates()
    M.sort_indices()
    return M


def recall(labels: np.ndarray, Y: sp.spmatrix, threads: int | None = None) -> float:
    """Fraction of the positives of Y (rows = instances) found among their candidates:
    an upper bound of the final recall at any k <= K."""
    Yr = check_labels(Y, Y.shape[0] if hasattr(Y, "shape") else len(Y), "Y")
    Yr.sort_indices()
    lab = check_candidates(labels, Yr.shape[0], Yr.shape[1])
    if Yr.nnz == 0:
        return math.nan
    hits = np.zeros(1, dtype=np.int64)
    yi = (Yr.indptr.astype(np.int64), Yr.indices.astype(np.int64))
    n = Yr.shape[0]
    parts = []

    def run(a, b):
        parts.append(count_hits(a, b, lab, *yi, Yr.shape[1]))

    _blocks(n, resolve_threads(threads), run, block=4096)
    hits[0] = sum(parts)
    return float(hits[0]) / Yr.nnz


@dataclass
class ShortlistResult:
    shortlist: sp.csc_matrix       # training instances x labels
    first_stage: FirstStage
    train_candidates: np.ndarray   # (n, K) labels
    seconds: float
    train_recall: float


def _takes(fn: Callable, name: str) -> bool:
    """Whether ``fn`` takes a keyword ``name`` (False where its signature is unknown: a
    builtin or extension callable of a registered back-end)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def build_shortlist(X: sp.csr_matrix, Y: sp.spmatrix, params: FirstStageParams | None = None,
                    threads: int | None = None, progress: Callable[[int], None] | None = None) -> ShortlistResult:
    """Fit the first stage on (X, Y) and make every training instance's ``training_K``
    candidates (leave-one-out for ``neighbours``), inverted into per-label instance
    lists, to which each label gets ``random_negatives`` random instances
    (:func:`add_random_negatives`); ``progress(rows)`` as the instances are searched.
    The recall is the candidates' (without the random instances)."""
    t0 = time.perf_counter()
    X = check_features(X, "X")         # once here: the steps below see it canonical (no copy)
    Y = check_labels(Y, X.shape[0], "Y")
    fs = FirstStage.fit(X, Y, params, threads)
    labels, _ = fs.candidates(X, training=True, progress=progress)
    sl = candidates_to_shortlist(labels, fs.n_labels)
    if fs.params.random_negatives > 0:
        sl = add_random_negatives(sl, fs.params.random_negatives, fs.params.seed)
    rec = recall(labels, Y, threads)
    return ShortlistResult(sl, fs, labels, time.perf_counter() - t0, rec)


# Random negatives.  A label trained on hard negatives only never sees the instances far
# from it, so nothing anchors its scores there, and the labels' scores are compared with
# each other when an instance's candidates are ranked.  A few instances drawn uniformly
# are mostly easy negatives that do: on debian-deps (training shortlist K = 40, candidates
# K = 20) P@1/3/5 went from 68.72/48.38/37.62 to 69.02/48.53/37.70 with 8 per label, and
# at K = 30 from 67.07/46.75/36.50 to 68.55/47.68/36.97 with ~4 (docs/shortlist.md,
# "Smaller shortlists").  An easy negative leaves the active set at once (squared hinge),
# so it costs its row's nonzeros in the sub-problem's passes, little in the Newton steps.
def add_random_negatives(shortlist: sp.csc_matrix, per_label: int, seed: int = 0) -> sp.csc_matrix:
    """``shortlist`` (instances x labels CSC 0/1) with ``per_label`` instances drawn
    uniformly (with replacement, numpy's PCG64 from ``seed``) added to every label's
    column; an instance drawn twice or already listed counts once, a positive drawn is
    only a positive in training.  Deterministic for a given (shape, per_label, seed)."""
    n, L = shortlist.shape
    if per_label <= 0 or n == 0 or L == 0:
        return shortlist
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, size=L * per_label, dtype=np.int64)
    cols = np.repeat(np.arange(L, dtype=np.int64), per_label)
    R = sp.csc_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, L))
    out = sp.csc_matrix(shortlist + R)
    out.data[:] = 1.0
    out.sort_indices()
    return out
