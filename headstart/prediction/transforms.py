"""Feature value transforms and feature hashing: compiled kernels over CSR arrays.

Both are part of a model's preprocessing (:mod:`.preprocess` applies them, training and
prediction alike) and follow what the paper authors' trainer offers (DiSMEC++,
``src/data/transform.cpp``: ``--transform``, ``--hash-buckets``, ``--hash-repeat``,
``--hash-seed``); where headstart differs, the difference is said below.

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

Feature hashing (``hash_buckets`` B > 0, ``hash_functions`` R, ``hash_seed`` s) maps a
row of any width to ``R * B`` features: hash function ``r`` sends feature ``j`` to column
``r * B + h_r(j)``, so every feature appears once in each of the R blocks, and values
that land in the same column add up (no random signs: as in DiSMEC++, collisions
are summed, not cancelled in expectation).  A column whose sum is exactly zero is not
stored.  DiSMEC++ stores only positive sums; headstart keeps negative ones (for
non-negative features, the usual case, the two agree).

The hash functions: DiSMEC++ draws a table ``features x R`` of uniform buckets from a
seeded generator, which ties the hashing to the training feature count and would need
the table in the model.  headstart computes ``h_r(j)`` instead, so a feature id that
training never saw (a wider test file) still has its buckets and the model stores just
``(B, R, s)``: ``h_r(j) = mix(salt_r XOR j) mod B`` with ``salt_r = mix(s * 2^32 + r)``
and ``mix`` the 64-bit finaliser of splitmix64 (Steele, Lea and Flood, "Fast splittable
pseudorandom number generators", OOPSLA 2014; the shifts and multipliers of Stafford's
"Mix13", as in Java's SplittableRandom), a bijection of 64-bit integers whose every
output bit depends on every input bit.  Same seed, same buckets, on every
machine and in every run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from .._compile import njit
from ..errors import DataFormatError, ParameterError
from ..params import TRANSFORMS

#: the kernels branch on a transform's position in TRANSFORMS
_CODE = {name: i for i, name in enumerate(TRANSFORMS)}
_LOG_ONE_PLUS, _ONE_PLUS_LOG, _SQRT = _CODE["log-one-plus"], _CODE["one-plus-log"], _CODE["sqrt"]
_DOMAIN = {"log-one-plus": "values > -1", "one-plus-log": "values >= 0 (a zero stays zero)",
           "sqrt": "values >= 0"}

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


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


def transform_values_inplace(X: sp.csr_matrix | np.ndarray, name: str, *, hashed: bool = False) -> None:
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
        what = "hashed feature" if hashed else "feature"
        raise DataFormatError(f"the feature transform {name} needs {_DOMAIN[name]}; {what} {col} "
                              f"has value {value!r}", row=row)


# --------------------------------------------------------------------------- feature hashing
@njit(nogil=True, cache=True)
def _mix(x):  # pragma: no cover - compiled
    """splitmix64's finaliser (uint64 in, uint64 out; multiplication wraps modulo 2^64)."""
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


def hash_salts(functions: int, seed: int) -> np.ndarray:
    """``salt_r = mix(seed * 2^32 + r)`` for ``r < functions`` (uint64)."""
    keys = (np.uint64(seed) << np.uint64(32)) | np.arange(functions, dtype=np.uint64)
    return np.array([_mix(k) for k in keys], dtype=np.uint64)


@njit(nogil=True, cache=True)
def _hash_rows(indptr, indices, data, salts, buckets, out_indptr, out_indices, out_data):  # pragma: no cover
    """Hash every row of the CSR (indptr, indices, data) into out_* (room for nnz * R
    entries); return the number of entries written.  A row's columns come out sorted,
    and the values of a column are added in float64 in the order of the input."""
    R = salts.shape[0]
    B = np.uint64(buckets)
    longest = 0
    for i in range(indptr.shape[0] - 1):
        longest = max(longest, indptr[i + 1] - indptr[i])
    # one int64 key per (value, hash function): column << 32 | position in the row, so an
    # in-place sort orders by column and, within a column, by input order
    keys = np.empty(longest * R, dtype=np.int64)
    vals = np.empty(longest * R, dtype=np.float64)
    pos = 0
    out_indptr[0] = 0
    for i in range(indptr.shape[0] - 1):
        m = 0
        for p in range(indptr[i], indptr[i + 1]):
            key = np.uint64(indices[p])
            v = np.float64(data[p])
            for r in range(R):
                col = r * buckets + np.int64(_mix(salts[r] ^ key) % B)
                keys[m] = (col << 32) | m
                vals[m] = v
                m += 1
        row = keys[:m]
        row.sort()
        q = 0
        while q < m:
            c = row[q] >> 32
            s = 0.0
            while q < m and (row[q] >> 32) == c:
                s += vals[row[q] & 0xFFFFFFFF]
                q += 1
            v32 = np.float32(s)
            if v32 != 0:
                out_indices[pos] = c
                out_data[pos] = v32
                pos += 1
        out_indptr[i + 1] = pos
    return pos


def hash_features(X: Any, buckets: int, functions: int, seed: int) -> sp.csr_matrix:
    """The hashed copy (CSR float32, ``n x buckets*functions``, canonical) of ``X``.

    ``X`` is a scipy sparse matrix or a dense 2-d array of any width; its values are
    taken as float32 (as training takes them).  ``X`` is not modified.
    """
    for name, v, lo in (("hash_buckets", buckets, 1), ("hash_functions", functions, 1)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
            raise ParameterError(f"parameter {name} must be an integer >= {lo}, got {v!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise ParameterError(f"parameter hash_seed must be an integer in [0, 2^32), got {seed!r}")
    Xc = sp.csr_matrix(X, dtype=np.float32) if sp.issparse(X) else sp.csr_matrix(np.asarray(X, dtype=np.float32))
    n, width, R = Xc.shape[0], int(buckets) * int(functions), int(functions)
    if width > 2**31 - 1:
        raise ParameterError(f"feature hashing to {width} features: more than 2^31-1 (feature ids are int32)")
    room = int(Xc.nnz) * R
    out_indptr = np.empty(n + 1, dtype=np.int64)
    out_indices = np.empty(room, dtype=np.int32)
    out_data = np.empty(room, dtype=np.float32)
    used = _hash_rows(Xc.indptr.astype(np.int64, copy=False), Xc.indices, Xc.data,
                      hash_salts(R, int(seed)), int(buckets), out_indptr, out_indices, out_data)
    if used < room:  # collisions (or cancellations) left room unused: do not keep it
        out_indices, out_data = out_indices[:used].copy(), out_data[:used].copy()
    out = sp.csr_matrix((out_data, out_indices, out_indptr), shape=(n, width), copy=False)
    out.has_canonical_format = True
    return out
