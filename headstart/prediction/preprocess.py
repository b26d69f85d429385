"""Feature transformation shared by training and prediction.

``fit_preprocessing`` learns a :class:`~headstart.model.Preprocessing` on the training
matrix and returns the transformed matrix; ``apply_preprocessing`` applies a stored one
to any matrix (test data, a chunk of rows).  Both do, in this order:

1. **tf-idf** (when requested): every stored value ``c > 0`` becomes
   ``(1 + log c) * idf[j]``; zeros stay zero.  ``idf[j] = log(n / df_j)`` where ``n`` is the
   number of training rows and ``df_j`` the number of training rows with a positive value
   in feature ``j``.  A feature never seen in training (``df_j = 0``) gets ``idf = 0``, so
   it is ignored at prediction time (its weight would be 0 anyway).  A feature present in
   every training row also gets ``idf = log 1 = 0``.  tf-idf is defined on counts: a
   negative or non-finite value raises :class:`~headstart.errors.DataFormatError`.
2. **L2 normalisation** (when requested): every row is divided by its Euclidean norm;
   an all-zero row stays zero.

The transform is row-local once ``idf`` is known, so applying it chunk by chunk gives the
same result as applying it to the whole matrix.  Inputs may be any scipy sparse matrix
(returned as a new CSR float32 matrix with sorted, summed duplicate indices) or a dense
2-d array (returned as a new float32 array).  A matrix with fewer columns than the idf
vector is accepted (missing trailing features count as zero); more columns is an error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..errors import DataFormatError
from ..model.model import Preprocessing


@njit(nogil=True, cache=True)
def _tfidf_inplace(indices, data, idf):  # pragma: no cover - compiled
    """tf-idf in place on CSR values; return the position of a bad value or -1."""
    for p in range(data.shape[0]):
        v = data[p]
        if v > 0 and v < np.inf:
            data[p] = (1.0 + np.log(np.float64(v))) * idf[indices[p]]
        elif v != 0:
            return p
    return -1


@njit(nogil=True, cache=True)
def _l2_normalize_rows(indptr, data):  # pragma: no cover - compiled
    for i in range(indptr.shape[0] - 1):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            s += np.float64(data[p]) * np.float64(data[p])
        if s > 0.0:
            inv = 1.0 / np.sqrt(s)
            for p in range(indptr[i], indptr[i + 1]):
                data[p] = data[p] * inv


def _copy_input(X: Any) -> sp.csr_matrix | np.ndarray:
    if sp.issparse(X):
        Xc = sp.csr_matrix(X, dtype=np.float32, copy=True)
        Xc.sum_duplicates()
        return Xc
    Xd = np.array(X, dtype=np.float32, copy=True)
    if Xd.ndim != 2:
        raise DataFormatError(f"X must be a 2-d matrix, got an array with {Xd.ndim} dimension(s)")
    return Xd


def _tfidf(X: sp.csr_matrix | np.ndarray, idf: np.ndarray) -> None:
    if sp.issparse(X):
        bad = _tfidf_inplace(X.indices, X.data, idf)
        if bad >= 0:
            row = int(np.searchsorted(X.indptr, bad, side="right") - 1)
            raise DataFormatError(f"tf-idf needs non-negative finite counts; row {row}, feature "
                                  f"{int(X.indices[bad])} has value {float(X.data[bad])!r}")
    else:
        bad = ~np.isfinite(X) | (X < 0)
        if bad.any():
            row, col = (int(v[0]) for v in np.nonzero(bad))
            raise DataFormatError(f"tf-idf needs non-negative finite counts; row {row}, feature {col} "
                                  f"has value {float(X[row, col])!r}")
        pos = X > 0
        X[pos] = (1.0 + np.log(X[pos].astype(np.float64))).astype(np.float32)
        X *= idf[np.newaxis, : X.shape[1]]


def _normalize(X: sp.csr_matrix | np.ndarray) -> None:
    if sp.issparse(X):
        _l2_normalize_rows(X.indptr, X.data)
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", X, X, dtype=np.float64))
        norms[norms == 0] = 1.0
        X /= norms[:, np.newaxis].astype(np.float32)


def fit_idf(X: sp.csr_matrix | np.ndarray) -> np.ndarray:
    """``idf[j] = log(n / df_j)`` (0 where ``df_j = 0``) as float32, from the raw counts ``X``."""
    n = X.shape[0]
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        df = np.bincount(X.indices[X.data > 0], minlength=X.shape[1])
    else:
        df = np.count_nonzero(np.asarray(X) > 0, axis=0)
    idf = np.zeros(X.shape[1], dtype=np.float64)
    seen = df > 0
    idf[seen] = np.log(n / df[seen])
    return idf.astype(np.float32)


def fit_preprocessing(X: Any, normalize: bool, tfidf: bool) -> tuple[Preprocessing, Any]:
    """Learn the preprocessing on training data ``X``; return it and the transformed copy."""
    Xc = _copy_input(X)
    idf = None
    if tfidf:
        if sp.issparse(Xc):
            bad = ~np.isfinite(Xc.data) | (Xc.data < 0)
            if bad.any():
                p = int(np.argmax(bad))
                row = int(np.searchsorted(Xc.indptr, p, side="right") - 1)
                raise DataFormatError(f"tf-idf needs non-negative finite counts; row {row}, feature "
                                      f"{int(Xc.indices[p])} has value {float(Xc.data[p])!r}")
        idf = fit_idf(Xc)
    pre = Preprocessing(normalize=bool(normalize), idf=idf)
    return pre, _transform_inplace(Xc, pre)


def apply_preprocessing(X: Any, preprocessing: Preprocessing | None) -> Any:
    """Apply a learned preprocessing to ``X`` (a new matrix; ``X`` is not modified).

    With nothing to do (``None`` or no tf-idf and no normalisation) ``X`` is returned as
    is, not copied.
    """
    if preprocessing is None or (preprocessing.idf is None and not preprocessing.normalize):
        return X
    return _transform_inplace(_copy_input(X), preprocessing)


def _transform_inplace(X: Any, pre: Preprocessing) -> Any:
    if pre.idf is not None:
        idf = np.asarray(pre.idf, dtype=np.float32)
        if X.shape[1] > idf.shape[0]:
            raise DataFormatError(f"X has {X.shape[1]} features but the tf-idf weights cover "
                                  f"{idf.shape[0]} features")
        _tfidf(X, idf)
    if pre.normalize:
        _normalize(X)
    return X
