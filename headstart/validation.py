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
        check_sparse_structure(X, name)
        if X.dtype != np.bool_ and (not np.issubdtype(X.dtype, np.number)
                                    or np.issubdtype(X.dtype, np.complexfloating)):
            raise DataFormatError(f"{name} must have real values, got dtype {X.dtype}")
        return X
    if X is None:       # (numpy would make it a NaN of shape ())
        raise DataFormatError(f"{name} is None: give a 2-D numeric array or scipy sparse matrix (rows x features)")
    try:
        X = np.asarray(X)
    except ValueError as e:    # rows of different lengths: numpy's words only
        raise DataFormatError(f"{name} must be a 2-D numeric array or scipy sparse matrix; its rows have different "
                              f"lengths ({e})") from None
    if np.iscomplexobj(X):
        raise DataFormatError(f"Complex data not supported: {name} has dtype {X.dtype}")
    if X.dtype == object:
        X = _numeric(X, name)
    if X.ndim != 2:
        raise DataFormatError(f"{name} must be a 2-D numeric array or scipy sparse matrix (rows x features), "
                              f"got shape {X.shape} dtype {X.dtype}" +
                              (". Reshape your data, e.g. X.reshape(1, -1) for a single instance"
                               if X.ndim == 1 and X.size else ""))
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_):
        raise DataFormatError(f"{name} must be numeric, got dtype {X.dtype}")
    return X


def check_sparse_structure(A, name: str, error: type = DataFormatError) -> None:
    """``error`` (DataFormatError; ModelFormatError for weights) unless the index arrays of the sparse matrix A describe a matrix of
    its shape: every column (row) index of a CSR (CSC, BSR) matrix inside the shape, an
    index pointer that starts at 0, never decreases and ends within the arrays, COO's row
    and column ids inside the shape.

    scipy checks none of this when a matrix is built from ``(data, indices, indptr)``
    (``check_format(full_check=False)``) or when its arrays are changed afterwards, and its
    own conversions, numpy's fancy indexing and the numba kernels trust the indices: a
    column id beyond the declared width (a vocabulary cut after the matrix was built)
    crashed fit and prediction with a segmentation fault, a negative one trained silently
    on the column it wrapped to (helper-83).  O(nnz), before anything reads A.  scipy's
    sparse arrays may also be 1-D or n-D (coo_array, dok_array): refused here by their
    shape, not by an IndexError of the first code that reads ``shape[1]``."""
    if A.ndim != 2:
        raise error(f"{name} must be a 2-D (rows x columns) matrix, got a {A.ndim}-D sparse array of shape "
                    f"{A.shape}" + (" (one row: reshape(1, -1); one column, e.g. a single label: reshape(-1, 1))"
                                    if A.ndim == 1 else ""))
    fmt = A.format
    if fmt == "coo":
        data = np.asarray(A.data)
        for ids, axis, what in ((A.row, 0, "row"), (A.col, 1, "column")):
            ids = np.asarray(ids)
            if ids.shape != data.shape:
                raise error(f"{name} is not a valid COO matrix: {ids.size} {what} ids for {data.size} values")
            outside = (ids < 0) | (ids >= A.shape[axis])
            if outside.any():
                i = int(np.flatnonzero(outside)[0])
                raise error(f"{name} is not a valid COO matrix: entry {i} has {what} id {ids[i]}, outside "
                                      f"[0, {A.shape[axis]}) of its shape {A.shape}")
        return
    if fmt not in ("csr", "csc", "bsr"):
        return          # lil, dok, dia: scipy's own structures, kept consistent by scipy
    major, minor = (A.shape if fmt != "csc" else A.shape[::-1])
    if fmt == "bsr":
        major, minor = major // A.blocksize[0], minor // A.blocksize[1]
    line, cross = {"csr": ("row", "column"), "csc": ("column", "row"), "bsr": ("block row", "block column")}[fmt]
    ptr, idx, data = np.asarray(A.indptr), np.asarray(A.indices), np.asarray(A.data)
    bad = f"{name} is not a valid {fmt.upper()} matrix of shape {A.shape}: "
    if ptr.ndim != 1 or ptr.size != major + 1 or idx.ndim != 1:
        raise error(bad + f"its index pointer (indptr) has {ptr.size} entries, expected {major + 1} "
                              f"(one per {line}, plus 1)")
    stored = min(idx.size, data.shape[0])
    falls = np.flatnonzero(ptr[1:] < ptr[:-1])
    if ptr[0] != 0 or falls.size or ptr[-1] > stored:
        what = (f"starts at {ptr[0]}" if ptr[0] != 0 else
                f"gives {line} {falls[0]} a negative length ({ptr[falls[0]]} to {ptr[falls[0] + 1]})" if falls.size else
                f"ends at {ptr[-1]}, beyond the {stored} stored values")
        raise error(bad + f"its index pointer (indptr) {what}; it must start at 0, never decrease and end "
                              "within the stored values")
    used = idx[:int(ptr[-1])]
    # min and max first: no temporary array in the common (valid) case, 10M indices in ~5 ms
    if used.size and (used.min() < 0 or used.max() >= minor):
        i = int(np.flatnonzero((used < 0) | (used >= minor))[0])
        at = int(np.searchsorted(ptr, i, side="right") - 1)
        hint = " (a matrix built from (data, indices, indptr) with too small a shape?)" if used[i] >= minor else ""
        raise error(bad + f"{line} {at} holds the {cross} index {used[i]}, outside [0, {minor}){hint}")


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
    zeros = not X.data.all()
    if (not canonical or zeros) and shares_arrays(X, given):
        # sorting, summing and dropping zeros work in place: on the caller's own arrays
        # they would change (or, dropping zeros, corrupt) the caller's matrix
        X = X.copy()
    if not canonical:
        X.sum_duplicates()
    if zeros or not canonical:
        # only then: scipy's in-place kernel needs writeable arrays even when it has
        # nothing to drop, and a caller's canonical matrix may be read-only (memory-mapped
        # arrays, joblib's shared inputs: helper-90)
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
    # nested Python lists of equal length become a 2-D array of label *ids*: said as such
    # when a value is an id above 1 (LibMultiLabel's and pyxclib's users hold label lists)
    id_lists = isinstance(Y, (list, tuple))
    if sp.issparse(Y):
        check_sparse_structure(Y, name)
    else:
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
                     name, id_lists)
    Y = Y.copy()
    Y.sum_duplicates()
    Y.data = (Y.data != 0).astype(np.float32)
    Y.eliminate_zeros()
    return Y


def _check_indicator(values: np.ndarray, where, name: str, id_lists: bool = False) -> None:
    """DataFormatError naming the first stored value that is neither 0 nor 1 and its
    (row, column), ``where(i)`` for the i-th stored value; ``id_lists``: the values came
    from nested lists, which may be label ids per instance."""
    bad = np.flatnonzero((values != 0) & (values != 1))
    if bad.size:
        row, col = where(bad[0])
        value = values[bad[0]].item()
        hint = " (for -1/+1 targets pass y > 0)" if value == -1 else ""
        if id_lists and value > 1 and float(value).is_integer():
            hint = (" (lists of label ids per instance are not an indicator matrix: convert them with "
                    "sklearn.preprocessing.MultiLabelBinarizer)")
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
