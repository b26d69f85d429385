"""The XMC repository's dense-feature ("slice") layout: a ``.npy`` matrix plus labels.

Features: a NumPy ``.npy`` file holding one 2-D array (points x features) of a real or
integer dtype.  It is opened with ``allow_pickle=False``; object, string, structured and
complex arrays, other dimensionalities, ``.npz`` archives and NaN/infinite values are
rejected.  The result is a C-contiguous float32 array (values beyond the float32 range
count as infinite).

Labels: a text file (plain or gzip), header ``num_points num_labels`` (two non-negative
integers), then one line per point in one of two forms, chosen for the whole file:

* comma-separated label ids ``3,17,42`` (an empty line = a point without labels) --
  the form used when the body contains no ``:`` at all;
* the repository's sparse form ``3:1 17:1 42:1`` (``label:value`` tokens separated by
  blanks) -- used when the body contains a ``:``.  Every listed id is a label, whatever
  its (finite) value, which is not kept: a decisions file of ``headstart predict
  --threshold`` lists scores, and a score of 0 or below is still a decision (helper-58:
  ``label:0`` used to be dropped).

Ids are 0-based, < num_labels, may come unsorted, must not repeat within a line.  Line
endings, blank trailing lines and the row-count check are as in the XMC format.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError
from . import _kernels as K
from ._common import (MAX_DIM, NPY_MAGIC, SparseSpec, _show, label_matrix, locate, open_stream, parse_header,
                      parse_sparse, read_bytes, token_at, too_few_rows)
from .atomic import atomic_write
from .xmc import _open_out, _write_sparse_body, to_label_csr

log = logging.getLogger(__name__)

LABEL_HEADER = ("num_points", "num_labels")

__all__ = ["read_slice", "read_label_file", "read_dense_features", "read_dense_text", "write_slice"]


def read_dense_features(path) -> np.ndarray:
    """Load dense features as a C-contiguous float32 array, all values finite: a 2-D
    numeric ``.npy`` array, or else DiSMEC++'s dense text matrix (see
    :func:`read_dense_text`)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
    except OSError as e:
        raise DataFormatError(f"cannot read file: {e.strerror or e}", path) from e
    if magic != NPY_MAGIC:
        return read_dense_text(path)
    try:
        # mmap first: shape and dtype are validated against the file size without
        # allocating anything the header merely claims
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - any failure here is bad file content
        raise DataFormatError(f"cannot load .npy file: {e}", path) from e
    try:
        if not isinstance(arr, np.ndarray):
            raise DataFormatError("not a single .npy array", path)
        if arr.dtype.hasobject or arr.dtype.kind not in "biuf" or arr.dtype.fields:
            raise DataFormatError(f"features must be a real or integer array, not dtype "
                                  f"{arr.dtype}", path)
        if arr.ndim != 2:
            raise DataFormatError(f"features must be 2-dimensional (points x features), got "
                                  f"shape {arr.shape}", path)
        if arr.shape[1] > MAX_DIM:
            raise DataFormatError(f"features: {arr.shape[1]} columns exceed the supported maximum "
                                  f"{MAX_DIM} (ids are int32)", path)
        with np.errstate(over="ignore", invalid="ignore"):
            X = np.array(arr, dtype=np.float32, order="C", copy=True)
    except DataFormatError:
        raise
    except Exception as e:  # noqa: BLE001 - e.g. a truncated memory map
        raise DataFormatError(f"cannot load .npy file: {e}", path) from e
    # an empty array (a header may claim 10**18 rows of 0 features) has nothing to check
    step = max(1, (8 << 20) // max(1, X.shape[1]))
    for r0 in range(0, X.shape[0] if X.size else 0, step):
        ok = np.isfinite(X[r0:r0 + step])
        if not ok.all():
            r, c = np.argwhere(~ok)[0]
            v = arr[r0 + r, c]
            if arr.dtype.kind == "f" and np.isfinite(v):   # finite, but beyond float32's range
                raise DataFormatError(f"feature value {float(v):g} at row {r0 + r}, column {c} (0-based) is "
                                      f"out of float32's range (|x| <= {float(np.finfo(np.float32).max):.4g})",
                                      path)
            raise DataFormatError(f"features contain NaN or infinite values (first at row "
                                  f"{r0 + r}, column {c}; 0-based)", path)
    del arr
    return X


DENSE_HEADER = ("num_points", "num_features")


def read_dense_text(path) -> np.ndarray:
    """DiSMEC++'s dense text matrix (``io/slice.cpp``, the features of its slice data
    sets when they are not ``.npy``): a header ``num_points num_features``, then one line
    per point holding exactly ``num_features`` numbers separated by blanks (plain or
    gzip).  Parsed strictly by a compiled kernel: a token that is not a number, NaN or
    infinity, a value beyond float32's range, a line with too few or too many numbers,
    or a row count other than the header's is refused with its line and column."""
    raw = read_bytes(path)
    if b"\0" in raw[:4096]:
        raise DataFormatError("neither a .npy file (it lacks the NumPy magic bytes) nor a dense text matrix "
                              "(it holds binary data)", path)
    (n, d), body = parse_header(raw, path, DENSE_HEADER)
    # rows of d numbers take at least 2d bytes each (a digit and a separator per number,
    # the last row's newline optional): no more rows than that are allocated, whatever
    # the header claims, and a file shorter than its header is reported where it ends
    cap = n if d == 0 else min(n, (len(raw) - body + 1) // (2 * d))
    buf = np.frombuffer(raw, dtype=np.uint8)
    X = np.empty((cap, d), dtype=np.float32)
    code, pos, aux, rows = K.parse_dense(buf, body, len(buf), n, X)
    if code != K.OK:
        line, col, _ = locate(buf, body, pos, 2)
        tok = _show(token_at(buf, pos))
        if code == K.E_TOO_MANY_TOKENS:
            raise DataFormatError(f"more than {d} values on a line (the header's num_features)", path, line, col,
                                  tok)
        if code == K.E_TOO_FEW_TOKENS:
            raise DataFormatError(f"{aux} value(s) on a line, expected {d} (the header's num_features)", path,
                                  line, 1)
        if code == K.E_TOO_MANY_ROWS:
            raise DataFormatError(f"more lines than the {n} points the header (line 1) announces", path, line, 1)
        if code == K.E_NONFINITE:
            raise DataFormatError("feature value is NaN, infinite or beyond float32's range", path, line, col, tok)
        raise DataFormatError("feature value is not a number", path, line, col, tok)
    if rows != n:
        raise _ends_early(raw, body, path, rows, n)
    assert cap == n, "rows of d numbers take 2d bytes"
    return X


def _ends_early(raw: bytes, body: int, path, rows: int, n: int) -> DataFormatError:
    """The error of a body that ends after ``rows`` of the header's ``n`` rows."""
    nl = raw.count(b"\n", body) + (1 if len(raw) > body and not raw.endswith(b"\n") else 0)
    return too_few_rows(path, rows, n, 2 + nl)


def read_label_file(path) -> sp.csr_matrix:
    """Read a label file (see the module docstring) into a float32 0/1 CSR matrix."""
    raw = read_bytes(path)
    (n, L), body = parse_header(raw, path, LABEL_HEADER)
    pairs = raw.find(b":", body) >= 0
    buf = np.frombuffer(raw, dtype=np.uint8)
    if pairs:
        spec = SparseSpec(has_labels=False, allow_features=True, n_features=L, n_labels=L,
                          max_rows=n, header_rows=n, feature_word="label", label_word="label",
                          keep_zeros=True)   # "5:0" lists label 5 (a decision of score 0; helper-58)
    else:
        spec = SparseSpec(has_labels=True, allow_features=False, n_features=0, n_labels=L,
                          max_rows=n, header_rows=n)
    r = parse_sparse(buf, body, len(buf), spec, path, 2)
    if r.rows != n:
        raise _ends_early(raw, body, path, r.rows, n)
    if pairs:
        other = np.flatnonzero(r.data != 1)
        if other.size:
            # deliberate (module docstring), but said, so that a file of 0/1 relevance
            # values is not read as all-relevant unnoticed (helper-102): a warning where a
            # value is 0 (such a file's "not relevant"), information otherwise (a
            # decisions file's scores, which are rarely exactly 0)
            row = int(np.searchsorted(r.indptr, other[0], side="right")) - 1
            zeros = int(np.count_nonzero(r.data == 0))
            log.log(logging.WARNING if zeros else logging.INFO,
                    "%s: %d label:value tokens have a value other than 1 (%d of them 0; the first on line %d): "
                    "every listed id is read as a label, whatever its value (as in a decisions file of scores)",
                    os.fspath(path), other.size, zeros, 2 + row)
        return label_matrix(r.indptr, r.indices, (n, L))
    return label_matrix(r.lptr, r.labels, (n, L))


def announced_rows(path) -> int | None:
    """The rows a features file declares without reading its values -- a ``.npy``
    array's shape, a dense text matrix's header -- or None (unreadable, or not of that
    kind: the reader then says what is wrong).  The reader checks that the file holds
    exactly these rows."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
        if magic == NPY_MAGIC:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
            return int(arr.shape[0]) if isinstance(arr, np.ndarray) and arr.ndim == 2 else None
        with open_stream(path) as f:
            first = f.readline(256).split()
    except Exception:  # noqa: BLE001 - any failure: not announced; reading reports it
        return None
    return int(first[0]) if len(first) == 2 and all(t.isdigit() for t in first) else None


def read_slice(features_npy, labels_path) -> tuple[np.ndarray, sp.csr_matrix]:
    """Read the slice layout: ``(X dense float32 (n, d), Y CSR float32 (n, L))``.

    The number of points of the ``.npy`` array and of the label file must agree.
    """
    Y = read_label_file(labels_path)
    X = read_dense_features(features_npy)
    if X.shape[0] != Y.shape[0]:
        raise DataFormatError(f"the features have {X.shape[0]} points but the label file "
                              f"{os.fspath(labels_path)} has {Y.shape[0]}", features_npy)
    return X, Y


def write_slice(features_npy, labels_path, X, Y) -> None:
    """Write the slice layout: ``X`` (dense, saved as float32 ``.npy``) and the labels of
    ``Y`` as ``id:1`` pairs (``.gz`` name: gzip-compressed).  Both writes are atomic, and
    both files are complete before either replaces its old version.

    The label file is the one DiSMEC++ reads (its ``read_binary_matrix_as_lil``: a
    "rows columns" header, then ``index:1`` pairs per point), which skips empty lines:
    a point without labels is a line holding one blank, which it counts as a point.
    (Comma-separated ids, written until helper-57, it refuses; headstart reads both.)"""
    Xd = np.asarray(X.toarray() if sp.issparse(X) else X)
    if Xd.ndim != 2 or Xd.dtype.kind not in "biuf":
        raise DataFormatError(f"X must be a 2-D real array, got shape {Xd.shape}, dtype "
                              f"{Xd.dtype}")
    Xd = Xd.astype(np.float32)
    if not np.all(np.isfinite(Xd)):
        raise DataFormatError("X contains NaN or infinite values")
    Yc = to_label_csr(Y, "Y")
    if Yc.shape[0] != Xd.shape[0]:
        raise DataFormatError(f"X has {Xd.shape[0]} rows but Y has {Yc.shape[0]}")
    # both temporaries are written in full before either is renamed (the features' inside
    # the labels' block): a failure or kill while writing leaves both old files, and only
    # the instant between the two renames could pair new features with old labels
    # (helper-57: one write after the other left a new X.npy beside an old label file
    # for the whole time the labels took)
    with atomic_write(labels_path, "wb") as raw:
        gz = _open_out(raw, labels_path)
        f = gz if gz is not None else raw
        f.write(f"{Yc.shape[0]} {Yc.shape[1]}\n".encode())
        # the labels as the features of rows without labels: ' i:1 j:1' (strtol skips
        # the leading blank), ' ' for a point without any
        ones = sp.csr_matrix((np.ones(Yc.nnz, dtype=np.float32), Yc.indices, Yc.indptr), shape=Yc.shape)
        _write_sparse_body(f, ones, sp.csr_matrix((Yc.shape[0], 0), dtype=np.float32), 0)
        if gz is not None:
            gz.close()
        raw.flush()          # (a full disk or a failing device says so here, before the features
        os.fsync(raw.fileno())   # replace theirs: helper-60, an fsync error after it left them paired wrongly)
        with atomic_write(features_npy, "wb") as fx:
            np.save(fx, Xd, allow_pickle=False)
