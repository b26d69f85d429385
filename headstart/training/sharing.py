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

This is done around the chunk kernels (:func:`solve_chunk`), in numpy, not inside them:
the kernels stay as they are, and a chunk without two such labels calls its kernel
unchanged.  (Written into the Newton lane kernel instead, the bookkeeping raised the
peak RSS of an ordinary debian-deps run by 15-20 MB although it never ran there:
docs/design.md.)
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .kernel import STAT_FIELDS

_SECONDS = STAT_FIELDS.index("seconds")
_ITERATIONS = STAT_FIELDS.index("iterations")
_REC_TIME = 3   # the per-iteration durations among the record arrays of trainer.make_records


class SameProblems:
    """What decides that two labels pose the same problem: their positives' counts (of
    ``n`` instances) and their cost factors (empty arrays: every factor 1)."""

    def __init__(self, y_indptr: np.ndarray, n: int, cost_pos: np.ndarray, cost_neg: np.ndarray):
        self.counts = np.diff(y_indptr)
        self.n = int(n)
        self.cost_pos = cost_pos
        self.cost_neg = cost_neg
        self.copied = 0    # labels that took another's result (trainer.run_chunks counts them)

    def copies(self, chunk: np.ndarray) -> np.ndarray | None:
        """Per position of ``chunk``, the position of the earlier label whose result it
        takes (-1: solved itself); None when every label is solved."""
        npos = self.counts[chunk]
        kind = np.full(chunk.size, -1.0)
        kind[npos == self.n] = 1.0       # no negative
        kind[npos == 0] = 0.0            # no positive (with n = 0 both: the same problem)
        u = np.flatnonzero(kind >= 0)
        if u.size < 2:
            return None
        ones = np.ones(u.size)
        cp = self.cost_pos[chunk[u]] if self.cost_pos.size else ones
        cn = self.cost_neg[chunk[u]] if self.cost_neg.size else ones
        # return_index: the first occurrence of each (kind, C+, C-) in the chunk
        _, first, inverse = np.unique(np.column_stack([kind[u], cp, cn]), axis=0, return_index=True,
                                      return_inverse=True)
        src = u[first[inverse.reshape(-1)]]
        if np.array_equal(src, u):
            return None
        copy_of = np.full(chunk.size, -1, dtype=np.int64)
        copy_of[u] = np.where(src == u, -1, src)
        return copy_of


def solve_chunk(kernel: Callable, chunk: np.ndarray, copy_of: np.ndarray | None, state, rec, abort_flag):
    """``kernel(chunk, state, rec, abort_flag)`` (trainer.run_chunks' kernels, the same
    results: indptr, indices, data, intercept, statistics, started) for a chunk whose
    labels at ``copy_of >= 0`` take the result of an earlier one: the kernel sees only
    the others, and its results are spread back over the whole chunk -- weights,
    intercept, statistics and per-iteration records copied, the copies' seconds 0."""
    if copy_of is None:
        return kernel(chunk, state, rec, abort_flag)
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
    take = np.repeat(indptr[r] - out_indptr[:-1], lengths) + np.arange(out_indptr[-1])
    table = table[r]
    table[~own, _SECONDS] = 0.0
    # the records: only the rows that move, only the iterations recorded (the arrays are
    # iteration-major, trainer.make_records: a page per iteration column)
    moved = np.flatnonzero(r != np.arange(kept))
    top = min(int(table[:, _ITERATIONS].max(initial=0)) + 1, rec[0].shape[1])
    for i, a in enumerate(rec):
        a[moved, :top] = a[r[moved], :top]      # (the right side is a copy)
        if i == _REC_TIME:
            a[np.flatnonzero(~own), :top] = 0.0
    return out_indptr, indices[take], data[take], intercept[r], table, kept
