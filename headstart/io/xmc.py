"""Sparse text formats: the XMC repository format and multi-label libsvm/svmlight.

XMC repository format (``read_xmc`` / ``write_xmc`` / ``iter_xmc_chunks``)::

    num_points num_features num_labels
    l1,l2,... f:v f:v ...          <- one line per point
     f:v f:v ...                   <- a point without labels starts with a space

Exactly what the reader accepts (anything else is a :class:`DataFormatError` naming the
file, the 1-based line -- the header is line 1 -- the column and the offending token):

* plain text or gzip, recognised by the gzip magic bytes (not by the file name);
* ``\\n`` or ``\\r\\n`` line endings; a UTF-8 byte-order mark before the header;
* header: exactly three non-negative decimal integers separated by blanks; the numbers
  of features and labels must be at most 2**31 - 1;
* a label list is comma-separated non-negative decimal integers without blanks
  (``1,5,7``), each < num_labels; it may be unsorted (it is sorted); a label repeated
  within a line is an **error** (we do not merge silently: repeated labels usually mean a
  broken conversion);
* features are ``index:value`` tokens separated by spaces or tabs; indices are decimal
  integers in ``[0, num_features)`` (``[1, num_features]`` with ``one_based=True``);
  values are decimal numbers (``1``, ``-0.5``, ``.5``, ``3.``, ``1e-3``); NaN, infinity
  and values that overflow the output dtype are errors; unsorted features are accepted
  and sorted; a repeated index within a line is an error; explicit zeros are dropped
  (after the duplicate check), and so are values too small for the dtype (underflow);
* every line after the header is one point -- an empty line is a point with no labels
  and no features -- and the number of points must equal ``num_points``; blank lines
  after the last announced point (e.g. a trailing newline) are ignored.

No buffer is ever sized from the header: sizes come from counting the bytes of the body,
so a header claiming 10**12 points fails cleanly ("file ends after ...").

Numbers are parsed by a Numba kernel.  float32 (the default): the decimal is rounded to
float64 once, then to float32, so files written by :func:`write_xmc` read back
bit-exactly.  float64: correctly rounded when the number has at most 15 significant
digits and a decimal exponent within +-22 (all ordinary data); otherwise within about 2
ulp (the parser keeps 18 significant digits and uses no big-number arithmetic).
"""

from __future__ import annotations

import gzip
import logging
import os
import re
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError, ParameterError
from ..validation import check_sparse_structure
from . import _kernels as K
from ._common import (BOM, CR_ONLY_HINT, HEADER_LIMIT, SparseSpec, check_dtype, cr_only, csr, first_line,
                      header_ints, label_matrix, locate, open_stream, parse_header, parse_sparse,
                      too_few_rows)
from .atomic import atomic_write

log = logging.getLogger(__name__)

XMC_HEADER = ("num_points", "num_features", "num_labels")

__all__ = ["read_xmc", "read_xmc_header", "iter_xmc_chunks", "write_xmc", "read_libsvm",
           "to_label_csr", "to_feature_csr"]


def _as_u8(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype=np.uint8)


# --- XMC ------------------------------------------------------------------------------------------
def _wide(wide_ids: bool) -> str | None:
    """parse_header's ``wide``: the count that may exceed int32 when reading for hashing."""
    return "num_features" if wide_ids else None


def read_xmc_header(path, wide_ids: bool = False) -> tuple[int, int, int]:
    """``(num_points, num_features, num_labels)`` from the first line, without the body
    (``wide_ids``: as :func:`read_xmc`)."""
    line = first_line(path)
    if not line.strip():
        raise DataFormatError("file is empty: expected a header line '"
                              + " ".join(XMC_HEADER) + "'", path, 1)
    vals, _ = parse_header(line + b"\n", path, XMC_HEADER, _wide(wide_ids))
    return vals[0], vals[1], vals[2]


def read_xmc(path, one_based: bool = False, dtype=np.float32, one_based_labels: bool = False,
             wide_ids: bool = False) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Read an XMC repository file (plain or gzip) into ``(X, Y)``.

    Parameters
    ----------
    path : file name; gzip is detected by its magic bytes.
    one_based : feature indices in the file start at 1 (column ``i - 1``).
    one_based_labels : label ids in the file start at 1 (label ``l - 1``); by default they
        are 0-based, as in the XMC repository and in libsvm multi-label files.  Both
        together are DiSMEC++'s ``--xmc-one-based-index``.
    dtype : float32 (default) or float64 for ``X``.
    wide_ids : feature ids (and the header's num_features) may go up to 2^63 - 2, not
        2^31 - 2: the raw ids of features that are hashed (``hash_buckets``), e.g. 64-bit
        hashes of tokens.  ``X`` then has int64 indices and is as wide as the header says.

    Returns
    -------
    X : ``csr_matrix`` (num_points x num_features), ``dtype``, canonical (sorted
        indices, no duplicates, no explicit zeros).
    Y : ``csr_matrix`` (num_points x num_labels), float32 with 1.0 for each label,
        canonical.

    Raises :class:`DataFormatError` for any problem with the file (see the module
    docstring for the exact grammar), including a missing or unreadable file.
    """
    # Streamed in blocks and stacked: the whole decompressed text (2-3x the size of the
    # parsed arrays; 657 MB for an Amazon-670K-sized file, plus the compressed bytes
    # while gunzipping) was the peak memory of a training run.  Now the peak is the parsed
    # arrays plus one block; parsing speed is the same.
    dt = check_dtype(dtype)
    n, d, L = read_xmc_header(path, wide_ids)
    xs, ys = [], []
    for Xc, Yc in iter_xmc_chunks(path, chunk_rows=_READ_CHUNK_ROWS, one_based=one_based, dtype=dtype,
                                  block_bytes=1 << 20, one_based_labels=one_based_labels, wide_ids=wide_ids):
        xs.append(Xc)
        ys.append(Yc)
    return stack_rows_consuming(xs, (n, d), dt), stack_rows_consuming(ys, (n, L), np.float32)


# rows per block of read_xmc (a block's text is a few MB at ~100 nonzeros per row)
_READ_CHUNK_ROWS = 1 << 15


def stack_rows_consuming(blocks: list, shape, dtype) -> sp.csr_matrix:
    """vstack of canonical CSR row blocks that empties ``blocks`` as it goes: each block is
    released once copied, and the result's pages are written block by block, so the peak
    is the result plus one block (scipy's vstack holds every block and the result)."""
    nnz = sum(b.nnz for b in blocks)
    rows = sum(b.shape[0] for b in blocks)
    if rows != shape[0]:
        raise ValueError(f"blocks have {rows} rows, expected {shape[0]}")
    indptr = np.empty(rows + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int64 if max(nnz, shape[1]) >= 2 ** 31 else np.int32)
    data = np.empty(nnz, dtype=dtype)
    indptr[0] = 0
    r = 0
    k = 0
    blocks.reverse()   # pop() from the end releases them in row order
    while blocks:
        b = blocks.pop()
        m = b.shape[0]
        indptr[r + 1:r + m + 1] = b.indptr[1:] + k
        indices[k:k + b.nnz] = b.indices
        data[k:k + b.nnz] = b.data
        r += m
        k += b.nnz
        del b
    return csr(indptr, indices, data, shape)


def iter_xmc_chunks(path, chunk_rows: int = 65536, one_based: bool = False,
                    dtype=np.float32, block_bytes: int = 16 << 20, one_based_labels: bool = False,
                    wide_ids: bool = False) -> Iterator[tuple[sp.csr_matrix, sp.csr_matrix]]:
    """Stream an XMC file as ``(X_chunk, Y_chunk)`` blocks of at most ``chunk_rows`` points.

    Same grammar and checks as :func:`read_xmc`; memory is bounded by one chunk plus one
    read block (``block_bytes``) whatever the size of the file.  Every chunk has the full
    width (num_features, num_labels).  ``wide_ids``: as :func:`read_xmc`.  A row-count mismatch with the header can only be
    detected at the end, so it is raised after the earlier chunks were yielded.
    """
    if int(chunk_rows) < 1:
        raise ParameterError(f"chunk_rows must be >= 1, got {chunk_rows}")
    chunk_rows = int(chunk_rows)
    block_bytes = max(int(block_bytes), 1 << 12)
    dt = check_dtype(dtype)
    with open_stream(path) as stream:
        head = stream.readline(HEADER_LIMIT)
        if not head.strip():
            # either an empty file or a blank header line: parse_header tells which
            parse_header(head + stream.read(1 << 16), path, XMC_HEADER, _wide(wide_ids))
        if not head.endswith(b"\n") and len(head) >= HEADER_LIMIT:
            raise DataFormatError("header line too long", path, 1)
        (n, d, L), _ = parse_header(head, path, XMC_HEADER, _wide(wide_ids))
        # 1-based label ids: parsed as ids in [0, L] and shifted, id 0 refused below
        shift = 1 if one_based_labels else 0
        spec = SparseSpec(feat_offset=1 if one_based else 0, n_features=d, n_labels=L + shift,
                          dtype=dt, header_rows=n, label_offset=shift,
                          feat_max=_feat_max(wide_ids, 1 if one_based else 0))
        done = 0
        next_line = 2
        for data, off, cut, before in _line_chunks(stream, chunk_rows, block_bytes, b""):
            first = 2 + before   # the header is line 1
            spec.max_rows = n - done
            buf = _as_u8(data)
            r = parse_sparse(buf, off, cut, spec, path, first)
            if spec.blank_line < 0 and r.blank_at >= 0:
                # named if the file turns out to hold more points than its header says
                spec.blank_line = locate(buf, off, r.blank_at, first)[0]
            done += r.rows
            labels = r.labels
            if shift and labels.size:
                zero = np.flatnonzero(labels == 0)
                if zero.size:       # every line is a point: the row's line is first + row
                    row = int(np.searchsorted(r.lptr, zero[0], side="right")) - 1
                    raise DataFormatError("label id 0 in a file of 1-based label ids (--one-based-labels)", path,
                                          first + row)
                labels = labels - 1
            if r.rows:
                yield (csr(r.indptr, r.indices, r.data, (r.rows, d)),
                       label_matrix(r.lptr, labels, (r.rows, L)))
            next_line = _line_after_range(data, off, cut, first)
        if done != n:
            raise too_few_rows(path, done, n, next_line)


def _feat_max(wide_ids: bool, feat_offset: int) -> int:
    """SparseSpec.feat_max: the largest column of an id in the file (with ``wide_ids``, a
    raw id up to RAW_ID_MAX, whatever the offset, so that the width id + 1 fits int64)."""
    return K.RAW_ID_MAX - feat_offset if wide_ids else K.INDEX_MAX


def _line_after_range(data: bytes, start: int, end: int, first: int) -> int:
    """Number of the line after the text ``data[start:end]`` that begins on line ``first``."""
    n = data.count(b"\n", start, end)
    return first + n + (1 if end > start and data[end - 1] != 10 else 0)


def _line_chunks(stream, chunk_rows: int, block_bytes: int, data: bytes
                 ) -> Iterator[tuple[bytes, int, int, int]]:
    """The text of ``stream`` (after ``data``, bytes already read) in pieces of
    ``chunk_rows`` complete lines (the last one: whatever is left, possibly without a
    final newline): yields ``(buffer, start, end, lines before the piece)`` (lines
    counted from the stream's position).  Reads ``block_bytes`` at a time; the unparsed
    rest is copied once per refill, so the cost stays linear and the memory is one piece
    plus one block."""
    before = 0
    off = 0        # bytes not yet handed out start at data[off]
    have = data.count(b"\n")   # newlines in data[off:]
    eof = False
    while True:
        if have < chunk_rows and not eof:
            parts = [data[off:]]
            while have < chunk_rows:
                block = stream.read(block_bytes)
                if not block:
                    eof = True
                    break
                parts.append(block)
                have += block.count(b"\n")
            data = b"".join(parts)
            off = 0
        if off >= len(data):
            return
        u8 = _as_u8(data)
        if have >= chunk_rows:
            cut = off + K.nth_newline(u8[off:], chunk_rows) + 1
            have -= chunk_rows
        else:  # at EOF: the rest, possibly without a final newline
            cut = len(data)
            have = 0
        yield data, off, cut, before
        before += data.count(b"\n", off, cut)
        off = cut


def to_feature_csr(X, name: str = "X") -> sp.csr_matrix:
    """A canonical float CSR copy-or-view of ``X`` (sparse or dense); finite values only."""
    if sp.issparse(X):
        # indices outside the shape were written out as such: a file the readers refuse
        check_sparse_structure(X, name)
    try:
        M = sp.csr_matrix(X)
    except Exception as e:
        raise DataFormatError(f"{name} cannot be converted to a sparse matrix: {e}") from e
    if M.ndim != 2:
        raise DataFormatError(f"{name} must be 2-dimensional")
    if M.dtype.kind not in "biuf":
        raise DataFormatError(f"{name} has unsupported dtype {M.dtype}")
    if M.dtype.kind != "f":
        M = M.astype(np.float32)
    if not M.has_canonical_format:
        M = M.copy()
        M.sum_duplicates()
    if not np.all(np.isfinite(M.data)):
        raise DataFormatError(f"{name} contains NaN or infinite values")
    if np.any(M.data == 0):
        M = M.copy()
        M.eliminate_zeros()
    return M


def to_label_csr(Y, name: str = "Y") -> sp.csr_matrix:
    """Label sets of ``Y`` (sparse or dense): every non-zero entry is a label."""
    if sp.issparse(Y):
        # indices outside the shape were written out as such: a file the readers refuse
        check_sparse_structure(Y, name)
    try:
        M = sp.csr_matrix(Y)
    except Exception as e:
        raise DataFormatError(f"{name} cannot be converted to a sparse matrix: {e}") from e
    if M.dtype.kind not in "biuf":
        raise DataFormatError(f"{name} has unsupported dtype {M.dtype}")
    if M.dtype.kind == "f" and not np.all(np.isfinite(M.data)):
        raise DataFormatError(f"{name} contains NaN or infinite values")
    M = M.copy()
    M.sum_duplicates()
    M.eliminate_zeros()
    M.data = np.ones(M.nnz, dtype=np.float32)
    return M


def _write_sparse_body(f, X: sp.csr_matrix | None, Y: sp.csr_matrix, feat_offset: int,
                       budget: int = 32 << 20, label_offset: int = 0) -> None:
    """Format rows in blocks of about ``budget`` bytes and write them to ``f``."""
    n = Y.shape[0]
    lptr = Y.indptr.astype(np.int64)
    labels = Y.indices if not label_offset else Y.indices.astype(np.int64) + label_offset
    if X is not None:
        indptr = X.indptr.astype(np.int64)
        indices = X.indices
        data = X.data
        is32 = X.dtype == np.float32
    else:
        indptr = np.zeros(n + 1, dtype=np.int64)
        indices = np.zeros(0, dtype=np.int32)
        data = np.zeros(0, dtype=np.float32)
        is32 = True
    per_feat = 13 + K.FLOAT_MAX_CHARS
    cost = 2 + 12 * np.diff(lptr) + per_feat * np.diff(indptr)
    ends = np.cumsum(cost)
    r0 = 0
    while r0 < n:
        base = ends[r0 - 1] if r0 else 0
        r1 = int(np.searchsorted(ends, base + budget, side="right"))
        r1 = min(max(r1, r0 + 1), n)
        need = int(ends[r1 - 1] - base)
        out = np.empty(need, dtype=np.uint8)
        used = K.format_sparse(r0, r1, indptr, indices, data, lptr, labels, feat_offset,
                               X is not None, is32, out)
        f.write(out[:used].tobytes())
        r0 = r1


def _open_out(f, path):
    """Wrap the atomic temp file in gzip when the destination name ends in ``.gz``."""
    if os.fspath(path).lower().endswith(".gz"):
        return gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=6, mtime=0)
    return None


def write_xmc(path, X, Y, one_based: bool = False, one_based_labels: bool = False) -> None:
    """Write ``(X, Y)`` in the XMC repository format, atomically.

    ``X`` (n x d) and ``Y`` (n x L) may be scipy sparse or dense.  Every non-zero of ``Y``
    is a label; explicit zeros of ``X`` are not written.  float32 values are written with
    the shortest decimal (at most 9 digits) that reads back to the identical float32;
    float64 values with up to 17 digits (read back within about 2 ulp; other dtypes are
    cast to float32).  A name ending in ``.gz`` is gzip-compressed (level 6).
    ``one_based`` writes feature indices starting at 1, ``one_based_labels`` label ids
    starting at 1 (both: the files of DiSMEC++'s ``--xmc-one-based-index``, which
    :func:`read_xmc` reads with the same two flags).
    """
    _write_text(path, X, Y, header=True, feat_offset=1 if one_based else 0, label_offset=int(one_based_labels))


def write_libsvm(path, X, Y) -> None:
    """Write ``(X, Y)`` as multi-label libsvm (svmlight) text, atomically: no header,
    ``l1,l2 f:v ...`` with **1-based** feature indices and the labels' 0-based ids as
    :func:`read_libsvm` reads them back (a line without labels starts with a space).
    Values as :func:`write_xmc` writes them; ``.gz`` compresses."""
    _write_text(path, X, Y, header=False, feat_offset=1)


def _write_text(path, X, Y, header: bool, feat_offset: int, label_offset: int = 0) -> None:
    Xc = to_feature_csr(X, "X")
    Yc = to_label_csr(Y, "Y")
    if Xc.shape[0] != Yc.shape[0]:
        raise DataFormatError(f"X has {Xc.shape[0]} rows but Y has {Yc.shape[0]}")
    if Xc.dtype not in (np.float32, np.float64):
        Xc = Xc.astype(np.float32)
    n, d = Xc.shape
    with atomic_write(path, "wb") as raw:
        gz = _open_out(raw, path)
        f = gz if gz is not None else raw
        if header:
            f.write(f"{n} {d} {Yc.shape[1]}\n".encode())
        _write_sparse_body(f, Xc, Yc, feat_offset, label_offset=label_offset)
        if gz is not None:
            gz.close()


# --- libsvm ------------------------------------------------------------------------------------------
def read_libsvm(path, n_features: int | None = None, n_labels: int | None = None,
                zero_based: bool = False, dtype=np.float32, wide_ids: bool = False
                ) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Read a multi-label libsvm / svmlight file ``l1,l2,... f:v f:v ... [# comment]``.

    * Feature indices are **1-based** by default (the svmlight/libsvm convention: index
      ``i`` goes to column ``i - 1``; an index 0 is an error); ``zero_based=True`` reads
      0-based indices.
    * Label ids are taken **as given, 0-based** (label ``l`` is column ``l`` of ``Y``),
      comma-separated non-negative integers; a line starting with a space has no labels.
    * **Binary files** as LIBLINEAR reads them, with labels ``+1`` / ``-1`` (``1`` for
      ``+1`` too), are recognised by their signed labels: ``Y`` then has one label,
      present on the ``+1`` lines.  A signed label is what marks such a file (found
      anywhere in it: the file is then read again in that mode); a file of ``1`` and
      ``0`` labels is an ordinary two-label file.
    * There is no header.  Blank lines and lines starting with ``#`` are skipped (they
      are not points); ``#`` also starts a comment at the end of a line.
    * ``n_features`` / ``n_labels``: the widths of ``X`` / ``Y``; ids beyond them are
      errors.  ``None`` infers ``max id + 1`` (0 when there are none).
    * ``wide_ids``: feature ids may go up to 2^63 - 2, as in :func:`read_xmc` (for
      features that are hashed).
    * Everything else (values, duplicates, sorting, zeros, line endings, gzip) is as in
      :func:`read_xmc`.
    """
    dt = check_dtype(dtype)
    for name, v, top in (("n_features", n_features, K.RAW_ID_MAX if wide_ids else K.INDEX_MAX),
                         ("n_labels", n_labels, K.INDEX_MAX)):
        if v is not None and not (0 <= int(v) <= top + 1):
            raise ParameterError(f"{name} must be in [0, {top + 1}], got {v}")
    spec = SparseSpec(feat_offset=0 if zero_based else 1,
                      n_features=-1 if n_features is None else int(n_features),
                      n_labels=-1 if n_labels is None else int(n_labels),
                      skip_blank=True, comments=True, dtype=dt, feat_max=_feat_max(wide_ids, 0 if zero_based else 1))
    try:
        return _read_libsvm(path, spec, n_features, n_labels, dt)
    except DataFormatError as e:
        if e.line == 1 and cr_only(first_line(path)):
            raise DataFormatError(e.message + CR_ONLY_HINT, e.path, e.line, e.column, e.token) from None
        signed = e.column == 1 and e.token is not None and _SIGNED_ONE.match(e.token.encode())
        # with one label expected (a binary model's test file), an unsigned '1' above the
        # range may be the binary format's '+1' met before any '-1': try that reading,
        # and keep this error if the file is not binary either
        plain_one = e.column == 1 and e.token == "1" and n_labels is not None and int(n_labels) == 1
        if not (signed or plain_one):
            raise
        first_error = e
    # a signed label (+1 / -1) where a label list was expected: LIBLINEAR's binary format
    spec.binary = True
    if n_labels is not None and int(n_labels) < 1:
        raise ParameterError(f"{path}: binary labels (+1/-1) make one label, but n_labels is {n_labels}")
    try:
        out = _read_libsvm(path, spec, n_features, n_labels, dt)
    except DataFormatError:
        if signed:
            raise
        raise first_error from None
    log.info("%s: binary labels (+1/-1): read as one label, present on the +1 lines", path)
    return out


_SIGNED_ONE = re.compile(rb"[+-][0-9]+\Z")
_NUMBER = re.compile(rb"[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?\Z")


def _read_libsvm(path, spec: SparseSpec, n_features, n_labels, dt):
    # Streamed in pieces of rows, as read_xmc: the whole text in memory (with the
    # compressed bytes while gunzipping) was several times the parsed arrays.  The
    # widths are known only at the end (the largest ids), so the pieces are stacked then.
    xs, ys = [], []
    max_feature = max_label = -1
    seen_text = seen_bytes = False
    with open_stream(path) as stream:
        head = stream.read(len(BOM))
        seen_bytes = bool(head)
        if head == BOM:
            head = b""
        for data, off, cut, before in _line_chunks(stream, _READ_CHUNK_ROWS, 1 << 20, head):
            seen_bytes = True
            seen_text = seen_text or not data[off:cut].isspace()
            try:
                r = parse_sparse(_as_u8(data), off, cut, spec, path, 1 + before)
            except DataFormatError as e:
                if not seen_text and _rest_is_blank(data, cut, stream):
                    # a file of nothing but blanks is empty, whatever stray bytes
                    # (a lone \r) it holds: say so rather than name a line of it
                    raise DataFormatError("file is empty", path, 1) from None
                first = data[off:data.find(b"\n", off)] if before == 0 else b""
                if e.line == 1 and header_ints(first, 3) is not None:
                    raise DataFormatError(e.message + " (line 1 looks like an XMC header "
                                          "'num_points num_features num_labels': use read_xmc)",
                                          e.path, e.line, e.column, e.token) from None
                words = first.split()
                if e.line == 1 and len(words) > 1 and all(w.isdigit() for w in words):
                    raise DataFormatError(e.message + f" (line 1 is {len(words)} integers: an XMC header has "
                                          "3, 'num_points num_features num_labels', and libsvm files have none)",
                                          e.path, e.line, e.column, e.token) from None
                if e.line == 1 and len(words) >= 3 and all(_NUMBER.match(w) for w in words[:3]):
                    # '3.0 5 3', '+3 5 3', '3 5 3 extra': meant as a header, not read as one
                    raise DataFormatError(e.message + " (line 1 looks like an XMC header, which must be exactly "
                                          "three non-negative integers 'num_points num_features num_labels')",
                                          e.path, e.line, e.column, e.token) from None
                raise
            max_feature = max(max_feature, r.max_feature)
            max_label = max(max_label, r.max_label)
            if r.rows:
                xs.append(csr(r.indptr, r.indices, r.data, (r.rows, max(r.max_feature + 1, 0))))
                ys.append(label_matrix(r.lptr, r.labels, (r.rows, max(r.max_label + 1, 0))))
    if not seen_text and not xs:
        # (a line holding only a blank is a point without labels or features, as
        # write_libsvm writes it: a file of only such points is not empty, helper-57)
        raise DataFormatError("file is empty", path, 1 if seen_bytes else None)
    d = max_feature + 1 if n_features is None else int(n_features)
    L = (1 if spec.binary else max_label + 1) if n_labels is None else int(n_labels)
    rows = sum(x.shape[0] for x in xs)
    return stack_rows_consuming(xs, (rows, d), dt), stack_rows_consuming(ys, (rows, L), np.float32)


def _rest_is_blank(data: bytes, start: int, stream, block_bytes: int = 1 << 20) -> bool:
    """True when ``data[start:]`` and the unread rest of ``stream`` hold only whitespace
    (reads at most until the first non-blank block: only used on an error path)."""
    if data[start:].strip():
        return False
    while block := stream.read(block_bytes):
        if block.strip():
            return False
    return True


def is_xmc_header(path) -> bool:
    """True when the first line of ``path`` is three non-negative integers."""
    return header_ints(first_line(path), 3) is not None
