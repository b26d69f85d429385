"""Feature preprocessing shared by training and prediction.

``fit_preprocessing`` learns a :class:`~headstart.model.Preprocessing` on the training
matrix and returns the transformed matrix; ``apply_preprocessing`` applies a stored one
to any matrix (test data, a chunk of rows).  Both do, in this order:

1. **feature hashing** (when requested, :mod:`.transforms`): the raw features, of any
   width, become ``hash_buckets * hash_functions`` hashed features; everything after
   this step, and the model's weights, live in the hashed space.
2. **value transform** (:mod:`.transforms`): ``log-one-plus``, ``one-plus-log`` or
   ``sqrt`` of every stored value.  Hashing first, then the transform, is DiSMEC++'s
   order (``DataProcessing::load``): the transform sees the summed value of a bucket.
3. **tf-idf** (when requested): every stored value ``c > 0`` becomes
   ``(1 + log c) * idf[j]``; zeros stay zero.  ``idf[j] = log(n / df_j)`` where ``n`` is the
   number of training rows and ``df_j`` the number of training rows with a positive value
   in feature ``j`` (after steps 1 and 2).  A feature never seen in training (``df_j = 0``)
   gets ``idf = 0``, so it is ignored at prediction time (its weight would be 0 anyway).
   A feature present in every training row also gets ``idf = log 1 = 0``.  tf-idf is
   defined on counts: a negative or non-finite value raises
   :class:`~headstart.errors.DataFormatError` (``one-plus-log`` makes values below 1/e
   negative, so it does not combine with tf-idf on such data).
4. **L2 normalisation** (when requested): every row is divided by its Euclidean norm;
   an all-zero row stays zero.  Last, as in DiSMEC++, so every row has norm 1 whatever
   came before.

The steps are row-local once ``idf`` is known, so applying them chunk by chunk gives the
same result as applying them to the whole matrix.  Inputs may be any scipy sparse matrix
(returned as a new CSR float32 matrix with sorted, summed duplicate indices) or a dense
2-d array (returned as a new float32 array; as CSR when hashing).  Without hashing, a
matrix with fewer columns than the idf vector is accepted (missing trailing features
count as zero); more columns is an error.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._compile import njit
from ..errors import DataFormatError
from ..model.model import FeatureHashing, Preprocessing
from .transforms import check_transform, hash_features, transform_values_inplace

log = logging.getLogger(__name__)


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
def _tfidf_dense_inplace(X, idf):  # pragma: no cover - compiled
    """The CSR kernel row by row over a dense C-contiguous array (the same arithmetic, so
    dense and sparse input give the same float32 values); flat position of a bad value or -1."""
    cols = np.arange(X.shape[1])
    for i in range(X.shape[0]):
        bad = _tfidf_inplace(cols, X[i], idf)
        if bad >= 0:
            return i * X.shape[1] + bad
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


def _copy_input(X: Any, hashing: FeatureHashing | None = None) -> sp.csr_matrix | np.ndarray:
    """A float32 copy of ``X`` to transform in place: hashed (a new CSR) when ``hashing``."""
    if hashing is not None:
        if not sp.issparse(X):
            X = np.asarray(X)
            if X.ndim != 2:
                raise DataFormatError(f"X must be a 2-d matrix, got an array with {X.ndim} dimension(s)")
        return hash_features(X, hashing.buckets, hashing.functions, hashing.seed)
    if sp.issparse(X):
        Xc = sp.csr_matrix(X, dtype=np.float32, copy=True)
        Xc.sum_duplicates()
        return Xc
    Xd = np.array(X, dtype=np.float32, copy=True, order="C")
    if Xd.ndim != 2:
        raise DataFormatError(f"X must be a 2-d matrix, got an array with {Xd.ndim} dimension(s)")
    return Xd


def _tfidf(X: sp.csr_matrix | np.ndarray, idf: np.ndarray, after: str = "") -> None:
    if sp.issparse(X):
        bad = _tfidf_inplace(X.indices, X.data, idf)
        if bad >= 0:
            row, col = int(np.searchsorted(X.indptr, bad, side="right") - 1), int(X.indices[bad])
            value = float(X.data[bad])
    else:
        bad = _tfidf_dense_inplace(X, idf)
        if bad >= 0:
            row, col = divmod(int(bad), X.shape[1])
            value = float(X[row, col])
    if bad >= 0:
        raise DataFormatError(f"tf-idf needs non-negative finite counts; feature {col} has value "
                              f"{value!r}{after}", row=row)


def _normalize(X: sp.csr_matrix | np.ndarray) -> None:
    if sp.issparse(X):
        _l2_normalize_rows(X.indptr, X.data)
    else:  # a dense row is a CSR row that stores every column: the same sums, in the same order
        _l2_normalize_rows(np.arange(X.shape[0] + 1, dtype=np.int64) * X.shape[1], X.reshape(-1))


def fit_idf(X: sp.csr_matrix | np.ndarray) -> np.ndarray:
    """``idf[j] = log(n / df_j)`` (0 where ``df_j = 0``) as float32, from the raw counts ``X``.

    Beyond the float32 result, memory goes with the features that occur, not the feature
    space: a file of 2,000 feature ids below 2^31 took 17.9 GB in per-feature int64 and
    float64 temporaries (helper-54)."""
    n = X.shape[0]
    idf = np.zeros(X.shape[1], dtype=np.float32)
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        ids, df = np.unique(X.indices[X.data > 0], return_counts=True)
        idf[ids] = np.log(n / df)
    else:
        df = np.count_nonzero(np.asarray(X) > 0, axis=0)
        seen = df > 0
        idf[seen] = np.log(n / df[seen])
    return idf


def fit_preprocessing(X: Any, normalize: bool, tfidf: bool, transform: str = "identity",
                      hashing: FeatureHashing | None = None) -> tuple[Preprocessing, Any]:
    """Learn the preprocessing on training data ``X``; return it and the transformed copy."""
    pre = Preprocessing(normalize=bool(normalize), transform=check_transform(transform), hashing=hashing)
    Xc = _copy_input(X, hashing)
    transform_values_inplace(Xc, pre.transform, hashed=hashing is not None)
    if tfidf:
        if sp.issparse(Xc):
            bad = ~np.isfinite(Xc.data) | (Xc.data < 0)
            if bad.any():
                p = int(np.argmax(bad))
                row = int(np.searchsorted(Xc.indptr, p, side="right") - 1)
                raise DataFormatError(f"tf-idf needs non-negative finite counts; feature "
                                      f"{int(Xc.indices[p])} has value {float(Xc.data[p])!r}"
                                      + _after(pre), row=row)
        _warn_fractional_counts(Xc.data if sp.issparse(Xc) else np.asarray(Xc).ravel())
        pre.idf = fit_idf(Xc)
    return pre, _weigh_and_normalize(Xc, pre)


def _warn_fractional_counts(values: np.ndarray) -> None:
    """tf-idf's term weight 1 + log(tf) is meant for counts: a stored value below 1 weighs
    a present feature less than its idf, one below 1/e negatively -- less than an absent
    one.  Data already weighted (tf-idf, real-valued features) needs no --tfidf: said, not
    refused, since the values are legal."""
    frac = int(np.count_nonzero((values > 0) & (values < 1)))
    if frac:
        neg = int(np.count_nonzero((values > 0) & (values < np.exp(-1.0))))
        log.warning("tf-idf expects counts (its term weight is 1 + log(count)): %d of the %d stored values are "
                    "below 1%s; data that is already weighted or real-valued needs no --tfidf (tfidf=False)",
                    frac, values.size, f", {neg} of them below 1/e and so weighted negatively" if neg else "")


def apply_preprocessing(X: Any, preprocessing: Preprocessing | None) -> Any:
    """Apply a learned preprocessing to ``X`` (a new matrix; ``X`` is not modified).

    With nothing to do (``None`` or the identity) ``X`` is returned as is, not copied.
    """
    if preprocessing is None or preprocessing.is_identity:
        return X
    Xc = _copy_input(X, preprocessing.hashing)
    transform_values_inplace(Xc, preprocessing.transform, hashed=preprocessing.hashing is not None)
    return _weigh_and_normalize(Xc, preprocessing)


def _after(pre: Preprocessing) -> str:
    steps = (["hashing"] if pre.hashing is not None else []) + (
        [f"the transform {pre.transform}"] if pre.transform != "identity" else [])
    return f" (after {' and '.join(steps)})" if steps else ""


def _weigh_and_normalize(X: Any, pre: Preprocessing) -> Any:
    """Steps 3 and 4 (tf-idf, normalisation) in place."""
    if pre.idf is not None:
        idf = np.asarray(pre.idf, dtype=np.float32)
        if X.shape[1] > idf.shape[0]:
            raise DataFormatError(f"X has {X.shape[1]} features but the tf-idf weights cover "
                                  f"{idf.shape[0]} features")
        _tfidf(X, idf, _after(pre))
    if pre.normalize:
        _normalize(X)
    return X
