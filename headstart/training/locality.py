"""Feature order for cache locality.

Every kernel touching weights gathers or scatters w[j] by feature index, and the
batched sweep over X gathers a row of 16 lane values per nonzero.  With features in
their file order, those accesses are spread over the whole weight vector, which for
16 lanes does not fit in a core's L2.  Renumbering features by decreasing frequency
packs the hot ones (in tf-idf data a few percent of the features carry most
nonzeros) into a few cache-resident lines; on debian-deps it makes the sweep about a
fifth faster.  Training runs on a renumbered copy of X, or -- when the caller owns X --
on X renumbered in place and restored afterwards; weights are mapped back before
anyone sees them.

The renumbering also puts the features that never occur last, so the kernels can work on
the features that do (:meth:`FeatureOrder.narrow`): with the L2 (or any) regulariser of
the objective, a weight whose feature never occurs has gradient w_j itself, so from a
start of 0 it stays 0 -- and every vector of the solver, per lane and per thread, is as
long as the features that occur, not the feature space the header declares.  bibtex's
1836 features spread over a space of 10^6 ids took 27 s and 1.26 GB instead of 0.33 s
and 191 MB before this.  Not for starts that may weigh absent features (a pretrained
model).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._compile import njit
from . import pages


@njit(cache=True, nogil=True)
def column_counts(indices, out):
    """out[j] += 1 per non-zero of feature j: ``np.bincount(indices)`` without its
    nnz-long int64 copy of the int32 indices (10.9 MB on debian-deps)."""
    for k in range(indices.size):
        out[indices[k]] += 1


@njit(cache=True, nogil=True)
def renumber(table, indices, out):
    """out[k] = table[indices[k]]: ``np.take(table, indices, out=out)`` without the
    nnz-long int64 copy numpy makes of int32 indices (10.9 MB on debian-deps)."""
    for k in range(indices.size):
        out[k] = table[indices[k]]


@njit(cache=True, nogil=True)
def renumber_rows(table, indptr, indices, data, d, out_indices, out_data):
    """The CSR rows (indptr, indices, data) with every index k renumbered to table[k], each
    row's entries sorted by the new index, into out_indices / out_data (same indptr),
    which may be ``indices`` / ``data`` themselves: each row is read into scratch first
    (renumbering a finished chunk in place spares a copy of it, ~1 MB a thread on
    debian-deps, at the moment the chunk's other buffers are alive too).  A row of at
    least d / 8 entries is ordered by a scan of the d positions (linear: the weights of
    a label are often dense), a shorter one by sorting its new indices.  The result is
    what renumbering and scipy's ``sort_indices`` give (a row's indices are distinct),
    without the per-row sort of the dense rows (on a small problem, sorting a chunk's
    weights was 3% of the fit)."""
    most = 0
    for r in range(indptr.size - 1):
        most = max(most, indptr[r + 1] - indptr[r])
    pos = np.zeros(d if most * 8 >= d else 0, dtype=np.int64)    # entry + 1, 0 = none
    keys = np.empty(most, dtype=np.int64)                         # the row's new indices
    vals = np.empty(most, dtype=data.dtype)                       # and its values
    for r in range(indptr.size - 1):
        a, b = indptr[r], indptr[r + 1]
        m = b - a
        for k in range(m):
            keys[k] = table[indices[a + k]]
            vals[k] = data[a + k]
        if m * 8 >= d:
            for k in range(m):
                pos[keys[k]] = k + 1
            o = a
            for j in range(d):
                p = pos[j]
                if p:
                    out_indices[o] = j
                    out_data[o] = vals[p - 1]
                    pos[j] = 0
                    o += 1
        elif m > 0:
            rank = np.argsort(keys[:m])
            for k in range(m):
                out_indices[a + k] = keys[rank[k]]
                out_data[a + k] = vals[rank[k]]


@njit(cache=True, nogil=True)
def renumber_sorted(keys, table, indices, out):
    """out[k] = table[position of indices[k] in the sorted keys] (binary search): the
    compact form's renumbering, without a table over the whole feature space."""
    for k in range(indices.size):
        j = indices[k]
        lo, hi = 0, keys.size
        while lo < hi:
            mid = (lo + hi) >> 1
            if keys[mid] < j:
                lo = mid + 1
            else:
                hi = mid
        out[k] = table[lo]


class FeatureOrder:
    """``perm``: internal position -> original feature; positions >= ``used`` are the
    features that never occur.  In the compact form (``keys``: the sorted ids of the
    features that occur) only those have positions, and no array is as long as the
    feature space -- for a header declaring far more features than X has nonzeros (a
    file claiming 2e9 features: the full form's tables alone were 48 GB)."""

    def __init__(self, perm: np.ndarray, used: int | None = None, keys: np.ndarray | None = None):
        self.perm = perm.astype(np.int32)
        self.keys = keys
        self.inv = np.empty_like(self.perm)      # original feature (or its rank in keys) -> position
        self.inv[self.perm if keys is None else np.searchsorted(keys, self.perm)] = np.arange(
            self.perm.size, dtype=np.int32)
        self.used = self.perm.size if used is None else int(used)

    @classmethod
    def by_frequency(cls, X: sp.csr_matrix, compact: bool = False) -> "FeatureOrder":
        """Features by decreasing number of nonzeros (ties by id); ``compact`` allows the
        compact form, taken when the feature space exceeds 4 x the nonzeros (the positions
        are the same either way)."""
        if compact and X.shape[1] > 4 * X.nnz:
            keys, counts = np.unique(X.indices, return_counts=True)
            return cls(keys[np.argsort(-counts, kind="stable")], keys.size, keys.astype(np.int32))
        counts = np.zeros(X.shape[1], dtype=np.int64)
        column_counts(X.indices, counts)
        return cls(np.argsort(-counts, kind="stable"), int(np.count_nonzero(counts)))

    def is_identity(self, d: int) -> bool:
        """Whether this order renumbers nothing on ``d`` features (all of them occur)."""
        return self.keys is None and self.used == d == self.perm.size and bool(
            np.array_equal(self.perm, np.arange(d, dtype=self.perm.dtype)))

    def _internal(self, indices: np.ndarray, out: np.ndarray) -> None:
        if self.keys is None:
            renumber(self.inv, indices, out)
        else:
            renumber_sorted(self.keys, self.inv, indices, out)

    def narrow(self, M: sp.csr_matrix) -> sp.csr_matrix:
        """The renumbered M over the features that occur only (the same arrays: a view)."""
        if self.used == M.shape[1]:
            return M
        out = sp.csr_matrix((M.data, M.indices, M.indptr), shape=(M.shape[0], self.used), copy=False)
        out.has_sorted_indices = True
        return out

    def to_internal(self, M: sp.csr_matrix) -> sp.csr_matrix:
        """A renumbered copy of a CSR matrix over features (rows keep sorted indices)."""
        # in mappings of their own (see .pages): returned to the system when training drops them
        indices = pages.empty(M.indices.size, np.int32)
        self._internal(M.indices, indices)
        out = sp.csr_matrix((pages.copy(M.data), indices, pages.copy(M.indptr)), shape=M.shape)
        out.has_sorted_indices = False
        out.sort_indices()       # in place
        return out

    def renumber_inplace(self, M: sp.csr_matrix) -> None:
        """Renumber the caller's CSR matrix itself (no second copy of X); undone exactly by
        :meth:`restore_inplace` (every row's features are distinct, so sorting them back
        restores the original order of indices and values)."""
        self._internal(M.indices, M.indices)
        M.has_sorted_indices = False
        M.sort_indices()

    def restore_inplace(self, M: sp.csr_matrix) -> None:
        renumber(self.perm, M.indices, M.indices)
        M.has_sorted_indices = False
        M.sort_indices()

    def to_original(self, M: sp.csr_matrix) -> sp.csr_matrix:
        """Map a CSR matrix over internal positions back to original features, in place."""
        M.indices = self.perm[M.indices]
        M.has_sorted_indices = False
        M.sort_indices()
        return M
