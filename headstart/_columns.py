"""The columns that occur in a sparse matrix, and matrices renumbered to them.

A data file's header may declare far more features than its rows use (a hashed or
global vocabulary: 2^26 or 2e9 ids).  Structures indexed by feature -- an inverted
index's posting-list pointers, k-means centroids, scipy's own O(columns) scratch in a
transpose or product -- would then cost memory and time for columns that hold nothing.
The first stage of shortlisting and the label tree therefore work at the width of the
columns that occur; the training kernels do the same their own way
(:mod:`headstart.training.locality`).

Renumbering keeps the columns' order, so per-row sums over the columns run in the same
order and give the same bits as at full width.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


#: entries renumbered at a time by :meth:`UsedColumns.compact`
_PIECE = 1 << 20


class UsedColumns:
    """The ascending ids of the columns that occur (``used``) out of ``width``."""

    def __init__(self, used: np.ndarray, width: int):
        self.used = np.asarray(used, dtype=np.int64)
        self.width = int(width)

    @classmethod
    def of(cls, M: sp.spmatrix) -> "UsedColumns":
        M = sp.csr_matrix(M)
        width = M.shape[1]
        if width <= 4 * M.nnz:
            # a byte per column costs no more than the nonzeros, and no sort
            mask = np.zeros(width, dtype=bool)
            mask[M.indices] = True
            return cls(np.flatnonzero(mask), width)
        return cls(np.unique(M.indices), width)

    @classmethod
    def if_sparse(cls, M: sp.spmatrix) -> "UsedColumns | None":
        """The columns that occur in M where the absent ones outnumber M's nonzeros --
        then a renumbered copy of M's indices costs less than any table over all the
        columns --, else None (work at M's own width)."""
        width, nnz = M.shape[1], M.nnz
        if width - min(nnz, width) <= nnz:
            return None
        cols = cls.of(M)
        return None if cols.width - cols.used.size <= nnz else cols

    @property
    def all(self) -> bool:
        """Whether every column occurs (nothing to renumber)."""
        return self.used.size == self.width

    def compact(self, M: sp.spmatrix) -> sp.csr_matrix:
        """CSR of M over the used columns only, renumbered in order; M's entries in
        other columns (a query's words the indexed rows never use) are dropped, as
        they meet nothing there.  M itself is returned when every column occurs."""
        M = sp.csr_matrix(M)
        if M.shape[1] != self.width:
            M = sp.csr_matrix((M.data, M.indices, M.indptr), shape=(M.shape[0], self.width))
        if self.all:
            return M
        k = self.used.size
        idx = M.indices[:M.nnz]
        # in pieces: the int64 positions and their checks of all the entries at once took
        # 25 bytes an entry beside M (a model's weights, renumbered for prediction)
        pos = np.empty(idx.size, dtype=np.int32)
        hit = np.zeros(idx.size, dtype=bool)
        if k:
            for a in range(0, idx.size, _PIECE):
                part = idx[a:a + _PIECE]
                p = np.searchsorted(self.used, part)
                np.minimum(p, k - 1, out=p)
                hit[a:a + _PIECE] = self.used[p] == part
                pos[a:a + _PIECE] = p
        if hit.all():
            return sp.csr_matrix((M.data[:M.nnz], pos, M.indptr), shape=(M.shape[0], k))
        kept = np.concatenate([[0], np.cumsum(hit, dtype=np.int64)])
        return sp.csr_matrix((M.data[:M.nnz][hit], pos[hit], kept[M.indptr]), shape=(M.shape[0], k))
