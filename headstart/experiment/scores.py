"""The one-vs-all decisions ``score > threshold`` of a model as a sparse matrix.

The paper's label-averaged binary precision and recall need, for every test instance,
every label whose classifier fires.  The dense score matrix of a large test set is too
big (debian-deps: 16864 x 22908 float32 = 1.5 GB), so rows are scored in blocks through
:func:`headstart.prediction.topk.decision_function` (same scores, same preprocessing as
top-k prediction) and only the positive decisions are kept.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..prediction.topk import decision_function

#: bytes of dense float32 scores per block of rows
BLOCK_BYTES = 64 * 2**20


def positive_decisions(model, X, threshold: float = 0.0, threads: int = 0,
                       block_bytes: int = BLOCK_BYTES) -> sp.csr_matrix:
    """Boolean CSR ``(n, model.num_labels)``: True where ``x . w_j + b_j > threshold``.

    Column ``j`` is label ``model.first_label + j``.
    """
    n = X.shape[0]
    L = model.num_labels
    rows = max(1, int(block_bytes) // (4 * max(L, 1)))
    blocks = []
    for r0 in range(0, n, rows):
        S = decision_function(model, X[r0:r0 + rows], threads=threads, max_memory=max(block_bytes, 4 * L))
        blocks.append(sp.csr_matrix(S > threshold))
    if not blocks:
        return sp.csr_matrix((0, L), dtype=bool)
    out = sp.vstack(blocks, format="csr")
    return out.astype(bool) if out.dtype != np.bool_ else out
