"""Feature value transforms: a compiled kernel over CSR (or dense) values.

Part of a model's preprocessing (:mod:`.preprocess` applies it, training and prediction
alike), following what the paper authors' trainer offers (DiSMEC++,
``src/data/transform.cpp``, ``--transform``); where headstart differs, the difference is
said below.

Value transforms (``TrainParams.transform``), on every stored value ``x``:

* ``identity``: ``x``;
* ``log-one-plus``: ``log(1 + x)``, for ``x > -1``;
* ``one-plus-log``: ``1 + log(x)`` for ``x > 0``; a zero stays zero (the sparse reading:
  an absent feature stays absent), a negative value is an error;
* ``sqrt``: ``sqrt(x)``, for ``x >= 0``.

All three map 0 to 0, so they never fill in a sparse matrix and applying them to a
dense array equals applying them to its nonzeros.  They are computed in float64 and
stored as float32.  A value outside the domain raises
:class:`~headstart.errors.DataFormatError` naming row, feature and value (DiSMEC++
does not check and would train on NaN or -inf).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..errors import DataFormatError, ParameterError
from ..params import TRANSFORMS

#: the kernels branch on a transform's position in TRANSFORMS
_CODE = {name: i for i, name in enumerate(TRANSFORMS)}
_LOG_ONE_PLUS, _ONE_PLUS_LOG, _SQRT = _CODE["log-one-plus"], _CODE["one-plus-log"], _CODE["sqrt"]
_DOMAIN = {"log-one-plus": "values > -1", "one-plus-log": "values >= 0 (a zero stays zero)",
           "sqrt": "values >= 0"}


# --------------------------------------------------------------------------- value transforms
@njit(nogil=True, cache=True)
def _transform_values(data, code):  # pragma: no cover - compiled
    """Transform ``data`` in place; return the position of the first value outside the
    domain (left as it was), or -1."""
    for p in range(data.shape[0]):
        v = np.float64(data[p])
        if code == _LOG_ONE_PLUS:
            if not (v > -1.0 and v < np.inf):
                return p
            data[p] = np.log1p(v)
        elif code == _ONE_PLUS_LOG:
            if v > 0.0 and v < np.inf:
                data[p] = 1.0 + np.log(v)
            elif v != 0.0:
                return p
        elif code == _SQRT:
            if not (v >= 0.0 and v < np.inf):
                return p
            data[p] = np.sqrt(v)
    return -1


def check_transform(name: Any) -> str:
    if name not in _CODE:
        raise ParameterError(f"parameter transform must be one of {', '.join(TRANSFORMS)}, got {name!r}")
    return name


def transform_values_inplace(X: sp.csr_matrix | np.ndarray, name: str) -> None:
    """Apply the value transform ``name`` to a float32 CSR matrix or C-contiguous float32 array."""
    if check_transform(name) == "identity":
        return
    if sp.issparse(X):
        bad = _transform_values(X.data, _CODE[name])
        if bad >= 0:
            row = int(np.searchsorted(X.indptr, bad, side="right") - 1)
            col, value = int(X.indices[bad]), float(X.data[bad])
    else:
        flat = X.reshape(-1)  # a view: X is C-contiguous
        bad = _transform_values(flat, _CODE[name])
        if bad >= 0:
            row, col = divmod(int(bad), X.shape[1])
            value = float(flat[bad])
    if bad >= 0:
        raise DataFormatError(f"the feature transform {name} needs {_DOMAIN[name]}; row {row}, feature {col} "
                              f"has value {value!r}")
