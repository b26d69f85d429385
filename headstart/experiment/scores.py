"""The one-vs-all decisions ``score > threshold`` of a model as a sparse matrix.

The paper's label-averaged binary precision and recall need, for every test instance,
every label whose classifier fires.  They come from
:func:`headstart.prediction.topk.predict_above` (the scores of top-k prediction, same
preprocessing), which keeps only the positive decisions and scores a row by its weight
products: neither the dense score matrix of a large test set (debian-deps: 16864 x 22908
float32 = 1.5 GB) nor a pass over every label of every row is made.  (Dense scores in
blocks of rows cost O(rows x labels) time: 2.1 s a model for 500 test rows in a label
space of 2M mostly unused labels, 4.2 s for 2,500, against milliseconds here.)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..prediction.topk import predict_above

#: bytes of preprocessed test rows scored at a time (predict_above's max_memory)
BLOCK_BYTES = 64 * 2**20


def positive_decisions(model, X, threshold: float = 0.0, threads: int = 0,
                       block_bytes: int = BLOCK_BYTES) -> sp.csr_matrix:
    """Boolean CSR ``(n, model.num_labels)``: True where ``x . w_j + b_j > threshold``
    (the float32 score compared with ``threshold`` exactly, as predict_above does).

    Column ``j`` is label ``model.first_label + j``.
    """
    first, L = int(model.first_label), int(model.num_labels)
    D = predict_above(model, X, threshold, n_columns=first + L, threads=threads, max_memory=int(block_bytes))
    indices = D.indices - D.indices.dtype.type(first) if first else D.indices
    return sp.csr_matrix((np.ones(indices.size, dtype=np.bool_), indices, D.indptr), shape=(X.shape[0], L))
