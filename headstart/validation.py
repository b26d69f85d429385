"""Validation of in-memory inputs at the public boundary; internals trust what passes."""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from .errors import DataFormatError, ParameterError

log = logging.getLogger(__name__)


def _numeric(A: np.ndarray, name: str) -> np.ndarray:
    """An object array of numbers as float64 (a TypeError, as numpy's, for non-numbers such
    as dicts; a DataFormatError for strings that are not numbers)."""
    try:
        return A.astype(np.float64)
    except ValueError as e:
        raise DataFormatError(f"{name} must be numeric: {e}") from None


def real_matrix(X, name: str = "X"):
    """X as a scipy sparse matrix or a 2-D numpy array of real (or boolean) values, as
    given otherwise: what training and prediction both accept.  Complex values (a cast
    would drop the imaginary parts), strings that are not numbers and other shapes are
    refused; an object array of numbers becomes float64 (None: NaN, refused later)."""
    if sp.issparse(X):
        if X.dtype != np.bool_ and (not np.issubdtype(X.dtype, np.number)
                                    or np.issubdtype(X.dtype, np.complexfloating)):
            raise DataFormatError(f"{name} must have real values, got dtype {X.dtype}")
        return X
    X = np.asarray(X)
    if np.iscomplexobj(X):
        raise DataFormatError(f"Complex data not supported: {name} has dtype {X.dtype}")
    if X.dtype == object:
        X = _numeric(X, name)
    if X.ndim != 2:
        raise DataFormatError(f"{name} must be a 2-D numeric array or scipy sparse matrix, "
                              f"got shape {getattr(X, 'shape', None)} dtype {X.dtype}")
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_):
        raise DataFormatError(f"{name} must be numeric, got dtype {X.dtype}")
    return X


def check_features(X, name: str = "X", n_features: int | None = None, raw_ids: bool = False) -> sp.csr_matrix:
    """Return X as canonical CSR float32 (sorted indices, no duplicates, no explicit zeros).

    Dense arrays (e.g. the "slice" embeddings) are converted to CSR: the kernels are
    written once, over CSR; a dense row costs d stored values either way.

    ``raw_ids``: X holds raw features that are hashed next (``hash_buckets``), whose ids
    are only keys of the hash: X may then be wider than 2^31 - 1 (e.g. 64-bit hashes of
    tokens, as the readers' ``wide_ids`` give), its indices stay int64.
    """
    given = X
    X = real_matrix(X, name)
    # binary features (as scikit-learn takes them) become 1.0 / 0.0 in dense_to_csr, a
    # block of rows at a time
    X = sp.csr_matrix(X) if sp.issparse(X) else dense_to_csr(X)
    if X.dtype != np.float32:
        X = X.astype(np.float32)
    canonical = X.has_canonical_format
    if (not canonical or not X.data.all()) and shares_arrays(X, given):
        # sorting, summing and dropping zeros work in place: on the caller's own arrays
        # they would change (or, dropping zeros, corrupt) the caller's matrix
        X = X.copy()
    if not canonical:
        X.sum_duplicates()
    X.eliminate_zeros()
    # after summing: duplicate entries, each finite, may add up to more than float32 holds
    check_finite_csr(X, name, "" if canonical else "; duplicate entries are summed")
    if X.shape[1] > np.iinfo(np.int32).max:
        if raw_ids:   # hashing maps them to int32 ids: left as they are
            return X
        # feature ids are int32 throughout (as the file readers and model manifests refuse)
        raise DataFormatError(f"{name} has {X.shape[1]} features; at most {np.iinfo(np.int32).max} are supported "
                              "without feature hashing (hash_buckets)")
    if X.indices.dtype != np.int32:
        X.indices = X.indices.astype(np.int32)
    if X.indptr.dtype != np.int32 and X.nnz <= np.iinfo(np.int32).max:
        # scipy's in-place kernels (sort_indices, used to renumber the features for
        # training) refuse int32 indices with an int64 indptr; scikit-learn's
        # load_svmlight_file gives int64 ones
        X.indptr = X.indptr.astype(np.int32)
    if n_features is not None and X.shape[1] != n_features:
        raise DataFormatError(f"{name} has {X.shape[1]} features, expected {n_features}")
    return X


def check_finite_csr(X: sp.csr_matrix, name: str, note: str = "", first_row: int = 0) -> None:
    """DataFormatError naming the row, column and value of X's first NaN or inf (rows
    numbered from ``first_row``: X may be a block of the caller's rows)."""
    if not np.all(np.isfinite(X.data)):
        bad = np.flatnonzero(~np.isfinite(X.data))[0]
        row = first_row + int(np.searchsorted(X.indptr, bad, side="right") - 1)
        raise DataFormatError(f"{name} has a NaN or infinite value (row {row}, column {X.indices[bad]}, "
                              f"value {X.data[bad]}; values beyond float32's range become infinite{note})")


def shares_arrays(A, B) -> bool:
    """Whether the sparse matrix A holds any array of B (a sparse matrix or anything):
    then A is the caller's data, not ours to change in place."""
    if not sp.issparse(B):
        return False
    mine = [getattr(A, k, None) for k in ("data", "indices", "indptr")]
    theirs = [getattr(B, k, None) for k in ("data", "indices", "indptr", "row", "col")]
    return any(a is not None and b is not None and np.may_share_memory(a, b) for a in mine for b in theirs)


def dense_to_csr(A: np.ndarray, block_bytes: int = 1 << 24) -> sp.csr_matrix:
    """float32 CSR of the nonzeros of a dense 2-D array, a block of rows at a time.

    ``sp.csr_matrix(A)`` goes through COO with int64 row and column ids for every entry:
    its peak was 7x the float32 matrix (a 40 MB 256-d embedding of debian-deps peaked at
    476 MB RSS).  Here the transient is one block; the result is 8 bytes per nonzero."""
    n, d = A.shape
    step = max(1, block_bytes // max(4 * d, 1))
    blocks = range(0, n, step)
    counts = np.zeros(n, dtype=np.int64)
    for r in blocks:
        counts[r:r + step] = np.count_nonzero(A[r:r + step].astype(np.float32, copy=False), axis=1)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    nnz = int(indptr[-1])
    index_dtype = np.int32 if nnz < 2**31 else np.int64
    indices = np.empty(nnz, dtype=np.int32)
    data = np.empty(nnz, dtype=np.float32)
    for r in blocks:
        B = A[r:r + step].astype(np.float32, copy=False)
        at = slice(int(indptr[r]), int(indptr[min(r + step, n)]))
        if at.stop - at.start == B.size:          # no zero in the block (embeddings)
            data[at] = B.ravel()
            indices[at].reshape(B.shape)[:] = np.arange(d, dtype=np.int32)
        else:                                     # a mask, not np.nonzero's int64 pairs
            keep = B != 0
            data[at] = B[keep]
            indices[at] = np.broadcast_to(np.arange(d, dtype=np.int32), B.shape)[keep]
    return sp.csr_matrix((data, indices, indptr.astype(index_dtype)), shape=(n, d))


def check_labels(Y, n_rows: int, name: str = "Y") -> sp.csr_matrix:
    """Return Y as CSR of 0/1 (float32).

    Every stored value must be 0 or 1 (True/False): other values are refused rather than
    read as positives, because the usual mistakes -- -1/+1 targets, class ids, label
    counts, continuous targets -- would otherwise train silently on the wrong labels."""
    if Y is None:
        raise DataFormatError(f"training requires y to be passed, but the target y is None: {name} must be "
                              "a 2-D (instances x labels) 0/1 matrix")
    if not sp.issparse(Y):
        try:
            Y = np.asarray(Y)
        except ValueError as e:   # ragged rows: label id lists of varying length
            raise DataFormatError(f"{name} must be a 2-D (instances x labels) 0/1 indicator matrix; lists of label "
                                  "ids per instance (rows of different lengths) are not one: convert them with "
                                  f"sklearn.preprocessing.MultiLabelBinarizer ({e})") from None
        if Y.dtype == object or Y.dtype.kind in "US":
            Y = _numeric(Y.astype(object), name)   # strings: the same check and message as object arrays
        if Y.ndim != 2:
            hint = (": a 1-D target holds one class per instance; one-vs-all multi-label training needs "
                    "one 0/1 column per label (e.g. sklearn.preprocessing.MultiLabelBinarizer, or "
                    "y.reshape(-1, 1) for a single binary label)") if Y.ndim == 1 else ""
            raise DataFormatError(f"{name} must be a 2-D (instances x labels) matrix, got shape {Y.shape}{hint}")
        if Y.dtype.kind == "f" and Y.dtype not in (np.float32, np.float64):
            Y = Y.astype(np.float32)   # scipy.sparse has no float16 (nor long double); 0/1 are exact in float32
        Y = sp.csr_matrix(Y)
    if Y.format == "coo" and not np.iscomplexobj(Y.data):
        # converting sums the entries listed twice (a repeated (row, label) pair would read
        # as the value 2): each listed value is checked as given, then each pair counts once
        _check_indicator(Y.data, lambda i: (int(Y.row[i]), int(Y.col[i])), name)
        Y = sp.coo_matrix(((Y.data != 0).astype(np.float32), (Y.row, Y.col)), shape=Y.shape).tocsr()
        Y.data = (Y.data != 0).astype(np.float32)
    Y = sp.csr_matrix(Y)
    if Y.shape[0] != n_rows:
        raise DataFormatError(f"{name} has {Y.shape[0]} rows but X has {n_rows}: one label row per instance")
    if np.iscomplexobj(Y.data):
        raise DataFormatError(f"Complex data not supported: {name} has dtype {Y.dtype}")
    _check_indicator(Y.data, lambda i: (int(np.searchsorted(Y.indptr, i, side="right") - 1), int(Y.indices[i])),
                     name)
    Y = Y.copy()
    Y.sum_duplicates()
    Y.data = (Y.data != 0).astype(np.float32)
    Y.eliminate_zeros()
    return Y


def _check_indicator(values: np.ndarray, where, name: str) -> None:
    """DataFormatError naming the first stored value that is neither 0 nor 1 and its
    (row, column), ``where(i)`` for the i-th stored value."""
    bad = np.flatnonzero((values != 0) & (values != 1))
    if bad.size:
        row, col = where(bad[0])
        value = values[bad[0]].item()
        hint = " (for -1/+1 targets pass y > 0)" if value == -1 else ""
        raise DataFormatError(f"{name} must be a 0/1 indicator matrix (one column per label), found the value "
                              f"{value!r} at row {row}, column {col}{hint}")


def check_k(k) -> int:
    """``k`` of a top-k prediction as an int, or ParameterError (booleans are refused)."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"parameter k must be an integer >= 1, got {k!r}")
    return int(k)


def same_feature_space(X: sp.csr_matrix, n_features: int, path) -> sp.csr_matrix:
    """X (CSR) of another file -- test data, data to shortlist -- at the training data's
    ``n_features`` columns: fewer (an xmc header's count) are widened, ids below them mean
    the same features; more are refused, naming ``path``, before any work (helper-48:
    the shortlist's first stage refused them, unnamed, after its output was written).
    (A libsvm file read for a model is already cut to its width, as LIBLINEAR's predict
    ignores features no training row had.)"""
    if X.shape[1] > n_features:
        raise DataFormatError(f"the data has {X.shape[1]} features but the training data {n_features}; they must "
                              "be the same feature ids", path)
    if X.shape[1] < n_features:
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    return X


def model_width(X, n_features: int | None, path):
    """X (CSR) at the model's width: feature ids beyond it -- features no training
    instance had, so no weight -- are dropped with a warning, as LIBLINEAR's predict
    ignores them.  (For a libsvm file, which declares no width; an xmc header that
    declares more features than the training data is refused instead, by
    :func:`same_feature_space`.)"""
    if n_features is None or X.shape[1] == n_features:
        return X
    if X.shape[1] > n_features:
        keep = X.indices < n_features
        kept = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
        dropped = np.diff(X.indptr) - np.diff(kept[X.indptr])
        log.warning("%s: %d value(s) in %d instance(s) of feature ids the model was not trained on (beyond its "
                    "%d features): ignored, as LIBLINEAR does", path, int(dropped.sum()),
                    int(np.count_nonzero(dropped)), n_features)
        return sp.csr_matrix((X.data[keep], X.indices[keep], kept[X.indptr]), shape=(X.shape[0], n_features))
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
