"""Feature order for cache locality.

Every kernel touching weights gathers or scatters w[j] by feature index, and the
batched sweep over X gathers a row of 8 lane values per nonzero.  With features in
their file order, those accesses are spread over the whole weight vector, which for
8 lanes does not fit in a core's L2.  Renumbering features by decreasing frequency
packs the hot ones (in tf-idf data a few percent of the features carry most
nonzeros) into a few cache-resident lines; on debian-deps it makes the sweep about a
fifth faster.  Training runs on a renumbered copy of X (the caller's matrix is never
modified); weights are mapped back before anyone sees them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


class FeatureOrder:
    def __init__(self, perm: np.ndarray):
        self.perm = perm.astype(np.int32)                 # internal position -> original feature
        self.inv = np.empty_like(self.perm)               # original feature -> internal position
        self.inv[self.perm] = np.arange(self.perm.size, dtype=np.int32)

    @classmethod
    def by_frequency(cls, X: sp.csr_matrix) -> "FeatureOrder":
        counts = np.bincount(X.indices, minlength=X.shape[1])
        return cls(np.argsort(-counts, kind="stable"))

    def to_internal(self, M: sp.csr_matrix) -> sp.csr_matrix:
        """A renumbered copy of a CSR matrix over features (rows keep sorted indices)."""
        out = sp.csr_matrix((M.data.copy(), self.inv[M.indices], M.indptr.copy()), shape=M.shape)
        out.sort_indices()
        return out

    def to_original(self, M: sp.csr_matrix) -> sp.csr_matrix:
        """Map a CSR matrix over internal positions back to original features, in place."""
        M.indices = self.perm[M.indices]
        M.has_sorted_indices = False
        M.sort_indices()
        return M
