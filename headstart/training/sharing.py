"""Labels that pose one and the same problem are solved once per chunk.

A label without positives has y = -1 on every instance, one without negatives y = +1;
all such labels of equal costs (C+, C-) therefore minimise the same objective.  Where the
solve from there on depends on nothing but the problem -- the Newton path when the
initialiser's start is a function of the positives alone (``Initializer.label_free``),
the coordinate-descent paths, whose random order takes a fixed seed for these labels
(training/coordinate.py) -- every one of them would reach the same weights by the same
steps.  A chunk then hands only the first of them to the kernel and gives its result to
the others: bit for bit what their own solves give, whatever the chunking (threads,
shards), since the solvers are deterministic and independent of the lane or the order.

Why it matters: with a regularised bias (``-B 1`` in LIBLINEAR's -s 0/1/2/3/5/6/7) each
such label is a full solve, and label spaces with many unused ids are common (labels seen
only in the test split, sparse id spaces, a shard of a huge space): bibtex placed in a
1M-label space, 20000 labels of which 4 are used, took 205.7 s with ``-s 2 -B 1``.

This is done around the chunk kernels (:func:`solve_chunk`), not inside them:
the kernels stay as they are, and a chunk without two such labels calls its kernel
unchanged.  (Written into the Newton lane kernel instead, the bookkeeping raised the
peak RSS of an ordinary debian-deps run by 15-20 MB although it never ran there:
docs/design.md.)
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .._compile import njit


class SameProblems:
    """What decides that two labels pose the same problem: their positives' counts (of
    ``n`` instances) and their cost factors (empty arrays: every factor 1)."""

    def __init__(self, y_indptr: np.ndarray, n: int, cost_pos: np.ndarray, cost_neg: np.ndarray):
        # the counts of the labels asked about only (_classes): np.diff of all of them
        # was O(label space) per trainer call, i.e. per Dask task (helper-67)
        self.y_indptr = y_indptr
        self.n = int(n)
        self.cost_pos = cost_pos
        self.cost_neg = cost_neg
        self.copied = 0    # labels that took another's result (chunks.run_chunks counts them)

    def _classes(self, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions of the labels without a positive or a negative, their kind, and
        their costs as rows (C+, C-)): equal rows pose equal problems."""
        npos = self.y_indptr[labels + 1] - self.y_indptr[labels]
        kind = np.full(labels.size, -1.0)
        kind[npos == self.n] = 1.0       # no negative
        kind[npos == 0] = 0.0            # no positive (with n = 0 both: the same problem)
        u = np.flatnonzero(kind >= 0)
        ones = np.ones(u.size)
        cp = self.cost_pos[labels[u]] if self.cost_pos.size else ones
        cn = self.cost_neg[labels[u]] if self.cost_neg.size else ones
        return u, kind[u], np.column_stack([kind[u], cp, cn])

    def shareable(self, labels: np.ndarray, most: int) -> np.ndarray | None:
        """Mask over ``labels`` of those whose solve a chunk may share, when they pose at
        most ``most`` different problems (then a chunk solves at most ``most`` of them
        itself, whatever its length); else None."""
        u, kind, rows = self._classes(labels)
        if u.size < 2:
            return None
        if self.cost_pos.size or self.cost_neg.size:
            classes = np.unique(rows, axis=0).shape[0]
        else:
            classes = np.unique(kind).size
        if classes > most:
            return None
        mask = np.zeros(labels.size, dtype=np.bool_)
        mask[u] = True
        return mask

    def copies(self, chunk: np.ndarray) -> np.ndarray | None:
        """Per position of ``chunk``, the position of the earlier label whose result it
        takes (-1: solved itself); None when every label is solved."""
        u, _, rows = self._classes(chunk)
        if u.size < 2:
            return None
        # return_index: the first occurrence of each (kind, C+, C-) in the chunk
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        src = u[first[inverse.reshape(-1)]]
        if np.array_equal(src, u):
            return None
        copy_of = np.full(chunk.size, -1, dtype=np.int64)
        copy_of[u] = np.where(src == u, -1, src)
        return copy_of


def solve_chunk(kernel: Callable, chunk: np.ndarray, copy_of: np.ndarray | None, state, rec, abort_flag):
    """``kernel(chunk, state, rec, abort_flag)`` (chunks.run_chunks' kernels: indptr,
    indices, data, intercept, statistics, started) for a chunk whose labels at
    ``copy_of >= 0`` take the result of an earlier one: the kernel sees only the others.
    Returns the kernel's results with the weights and intercepts spread back over the
    chunk's first ``kept`` labels, its statistics and records as they are (of the labels
    it solved), ``kept`` and ``spread``: None, or (rows, own) -- kept position i has the
    statistics of the kernel's row ``rows[i]``, its own if ``own[i]`` -- for
    :meth:`.stats.TrainingStats.spread`.  The records are not spread in place: a chunk
    may hold many more labels than the record arrays have rows (chunks.label_chunks
    does not count the labels that take another's result)."""
    if copy_of is None:
        return (*kernel(chunk, state, rec, abort_flag), None)
    solved = np.flatnonzero(copy_of < 0)
    indptr, indices, data, intercept, table, started = kernel(chunk[solved], state, rec, abort_flag)
    # kept: the chunk's positions before the first solved label the kernel did not start
    # (a copy comes after the label it copies, so every kept copy has its result)
    kept = chunk.size if started == solved.size else int(solved[started])
    rank = np.empty(chunk.size, dtype=np.int64)
    rank[solved] = np.arange(solved.size)
    own = copy_of[:kept] < 0
    r = rank[np.where(own, np.arange(kept), copy_of[:kept])]   # each kept position's row of the kernel
    lengths = np.diff(indptr)[r]
    out_indptr = np.zeros(kept + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_indptr[1:])
    out_indices = np.empty(out_indptr[-1], dtype=indices.dtype)
    out_data = np.empty(out_indptr[-1], dtype=data.dtype)
    gather_rows(indptr, indices, data, r, out_indptr, out_indices, out_data)
    return out_indptr, out_indices, out_data, intercept[r], table, kept, (r, own)


@njit(cache=True, nogil=True)
def gather_rows(indptr, indices, data, rows, out_indptr, out_indices, out_data):
    """Row ``rows[i]`` of the CSR (indptr, indices, data) into row i of the output (its
    offsets ``out_indptr`` given): numpy's fancy indexing by an int64 position per entry
    made three such arrays, ~3 MB a chunk on debian-deps beside the chunk itself."""
    for i in range(rows.size):
        a = indptr[rows[i]]
        o = out_indptr[i]
        for k in range(out_indptr[i + 1] - o):
            out_indices[o + k] = indices[a + k]
            out_data[o + k] = data[a + k]
