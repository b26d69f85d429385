"""Labels that pose one and the same problem are solved once per chunk.

A label without positives has y = -1 on every instance, one without negatives y = +1;
all such labels of equal costs (C+, C-) therefore minimise the same objective.  Where the
solve from there on depends on nothing but the problem -- the Newton path when the
initialiser's start is a function of the positives alone (``Initializer.label_free``),
or each label's own row taken as it is, for the labels whose rows are equal bit for bit
(``Initializer.start_rows``: a pretrained model's, whose unused labels have equal rows),
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


#: no start rows (:class:`SameProblems`' ``starts``): every label starts outside them
NO_ROWS = (0, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32),
           np.zeros(0, dtype=np.float32))


class SameProblems:
    """What decides that two labels pose the same problem: their positives' counts (of
    ``n`` instances), their cost factors (empty arrays: every factor 1) and, for a start
    that is each label's own row (``starts``, :meth:`.Initializer.start_rows`: a
    pretrained model's), that row."""

    def __init__(self, y_indptr: np.ndarray, n: int, cost_pos: np.ndarray, cost_neg: np.ndarray,
                 starts: tuple | None = None):
        # the counts of the labels asked about only (_classes): np.diff of all of them
        # was O(label space) per trainer call, i.e. per Dask task (helper-67)
        self.y_indptr = y_indptr
        self.n = int(n)
        self.cost_pos = cost_pos
        self.cost_neg = cost_neg
        # equal problems are equal bits (what np.unique over the rows (kind, C+, C-)
        # compared before, which was 1.4 s of a 2M-label run: _first_of_problem)
        self._bits_pos = _bits(cost_pos, np.float64, np.int64)
        self._bits_neg = _bits(cost_neg, np.float64, np.int64)
        first, indptr, indices, data, intercept = NO_ROWS if starts is None else starts
        self._starts = (np.int64(first), np.ascontiguousarray(indptr, dtype=np.int64),
                        np.ascontiguousarray(indices, dtype=np.int32), _bits(data, np.float32, np.int32),
                        _bits(intercept, np.float32, np.int32))
        self.copied = 0    # labels that took another's result (chunks.run_chunks counts them)

    def _classes(self, labels: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(positions of the labels without a positive or a negative; per such position,
        the position of the first of them that poses the same problem; how many
        problems they pose -- counted up to ``most + 1``, where the search stops)."""
        npos = self.y_indptr[labels + 1] - self.y_indptr[labels]
        u = np.flatnonzero((npos == 0) | (npos == self.n))
        # kind: no negative (True) or no positive (with n = 0 both: the same problem)
        first, distinct = _first_of_problem(np.ascontiguousarray(labels[u]), npos[u] != 0, self._bits_pos,
                                            self._bits_neg, *self._starts, np.int64(max(most, 0)))
        return u, first, distinct

    def shareable(self, labels: np.ndarray, most: int) -> np.ndarray | None:
        """Mask over ``labels`` of those whose solve a chunk may share, when they pose at
        most ``most`` different problems (then a chunk solves at most ``most`` of them
        itself, whatever its length); else None."""
        u, _, classes = self._classes(labels, most)
        if u.size < 2 or classes > most:
            return None
        mask = np.zeros(labels.size, dtype=np.bool_)
        mask[u] = True
        return mask

    def copies(self, chunk: np.ndarray) -> np.ndarray | None:
        """Per position of ``chunk``, the position of the earlier label whose result it
        takes (-1: solved itself); None when every label is solved."""
        u, first, _ = self._classes(chunk, chunk.size)
        if u.size < 2:
            return None
        src = u[first]
        if np.array_equal(src, u):
            return None
        copy_of = np.full(chunk.size, -1, dtype=np.int64)
        copy_of[u] = np.where(src == u, -1, src)
        return copy_of


def _bits(a: np.ndarray, dtype, as_int) -> np.ndarray:
    """The values of ``a`` (as ``dtype``) as integers of the same bits."""
    return np.ascontiguousarray(a, dtype=dtype).view(as_int)


@njit(cache=True, nogil=True)
def _mix(h, v):
    """h and v hashed into one int64 (a multiply that carries v's bits up, a shift that
    brings the high bits down: costs and floats differ in their high bits)."""
    h = (h ^ v) * np.int64(0x5851F42D4C957F2D)
    return h ^ (h >> 32)


@njit(cache=True, nogil=True)
def _first_of_problem(labels, kind, bits_pos, bits_neg, first, indptr, indices, data, intercept, most):
    """(per i, the first i' whose label poses the problem of ``labels[i]``; the number
    of problems, counted up to ``most + 1``, where it stops).  One problem: equal kind,
    equal cost bits (empty arrays: all equal) and the same start row, bit for bit --
    row ``label - first`` of the CSR (indptr, indices, data bits) with its intercept
    bits, or no row (the zero start: labels outside the rows).

    One pass with a hash table of at most ``most + 1`` entries, where np.unique(axis=0)
    sorted (kind, C+, C-) rows as bytes: 1.4 s for the labels of a 2M-label space with
    per-label costs, once per run and again chunk by chunk.  (Written inline: helpers
    taking the arrays, called per label, cost ~40 ns a call even with no row to read.)"""
    m = labels.size
    rows = indptr.size - 1
    size = 4
    while size < 2 * min(m, most + 1):
        size *= 2
    table = np.full(size, -1, dtype=np.int64)
    out = np.empty(m, dtype=np.int64)
    distinct = 0
    for i in range(m):
        lab = labels[i]
        a = bits_pos[lab] if bits_pos.size else np.int64(0)
        b = bits_neg[lab] if bits_neg.size else np.int64(0)
        r = lab - first
        own = 0 <= r < rows
        h = _mix(_mix(np.int64(kind[i]), a), b)
        if own:
            h = _mix(h, np.int64(intercept[r]))
            for k in range(indptr[r], indptr[r + 1]):
                h = _mix(h, np.int64(indices[k]) << 32 | (np.int64(data[k]) & 0xFFFFFFFF))
        slot = h & (size - 1)
        while True:
            j = table[slot]
            if j < 0:
                table[slot] = i
                out[i] = i
                distinct += 1
                break
            o = labels[j]
            ro = o - first
            same = kind[j] == kind[i] and (0 <= ro < rows) == own
            if same and bits_pos.size:
                same = bits_pos[o] == a
            if same and bits_neg.size:
                same = bits_neg[o] == b
            if same and own:
                length = indptr[r + 1] - indptr[r]
                same = intercept[ro] == intercept[r] and indptr[ro + 1] - indptr[ro] == length
                p, q = indptr[r], indptr[ro]
                k = 0
                while same and k < length:
                    same = indices[p + k] == indices[q + k] and data[p + k] == data[q + k]
                    k += 1
            if same:
                out[i] = j
                break
            slot = (slot + 1) & (size - 1)
        if distinct > most:
            break
    return out, distinct


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
