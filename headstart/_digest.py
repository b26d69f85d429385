"""sha256 of arrays in fixed dtypes, converted piece by piece: the digests that tell one
data set from another of the same shapes (a model's ``data_sha256``, an experiment's
checkpoints) without a second whole copy of a large X.  sha256 is a stream, so the
digest is the one of the whole converted arrays."""

from __future__ import annotations

import numpy as np

#: values converted at a time
STEP = 1 << 22


def update(h, pieces) -> None:
    """Feed ``h`` (a hashlib object) each ``(array, dtype)`` of ``pieces``, converted to
    that dtype ``STEP`` values at a time."""
    for a, dt in pieces:
        a = np.asarray(a).reshape(-1)
        for k in range(0, max(a.size, 1), STEP):
            h.update(np.ascontiguousarray(a[k:k + STEP], dtype=dt).data)
