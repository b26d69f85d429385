"""Shared plumbing of the readers: raw bytes, headers, the sparse parse, error messages."""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass
from typing import IO

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError, ParameterError
from . import _kernels as K

GZIP_MAGIC = b"\x1f\x8b"
NPY_MAGIC = b"\x93NUMPY"
BOM = b"\xef\xbb\xbf"
MAX_DIM = K.INDEX_MAX + 1          # largest number of features / labels (int32 ids)
MAX_RAW_DIM = K.RAW_ID_MAX + 1     # largest number of raw features read for hashing (int64 ids)
HEADER_LIMIT = 1 << 16             # a header line longer than this is not a header

_DECOMPRESS_ERRORS: tuple = (OSError, EOFError, zlib.error, ValueError)
try:        # (lzma's error is no OSError; a Python built without liblzma reads no xz)
    import lzma as _lzma

    _DECOMPRESS_ERRORS += (_lzma.LZMAError,)
except ImportError:  # pragma: no cover
    _lzma = None

#: compressed inputs read transparently, by their first bytes (not their names): gzip, as
#: the XMC repository ships, and the two other compressors of Python's standard library
_READABLE = ((GZIP_MAGIC, "gzip"), (b"\xfd7zXZ\x00", "xz"))
#: bz2's magic is "BZh" and a block size digit, then the first block's (or an empty
#: stream's) own magic: the whole of it, since a text file may start with "BZh" (helper-105)
_BZ2 = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)")
#: recognised but not readable without another library: said, rather than parsed as text
#: (helper-102: a bz2 file was reported as a malformed header)
_UNREADABLE = ((b"\x28\xb5\x2f\xfd", "zstd", "zstd -d FILE"), (b"PK\x03\x04", "zip", "unzip FILE; of a NumPy .npz archive, save the array alone as .npy"),
               (b"7z\xbc\xaf\x27\x1c", "7z", "7z x FILE"))


def compression(head: bytes, path) -> str | None:
    """The compressor of a file starting with ``head`` ("gzip", "bz2", "xz"), None for
    plain bytes; DataFormatError for a compressed form this reader cannot open."""
    if _BZ2.match(head):
        return "bz2"
    for magic, name in _READABLE:
        if head.startswith(magic):
            if name == "xz" and _lzma is None:  # pragma: no cover
                raise DataFormatError("xz-compressed, and this Python has no lzma module: decompress it first "
                                      "(xz -d FILE)", path)
            return name
    if head.startswith(b"PK\x03\x04") and str(path).lower().endswith(".npz"):
        raise DataFormatError("a NumPy .npz archive, not a data file (a model's shards are read through its "
                              "directory; features go in a .npy file)", path)
    for magic, name, how in _UNREADABLE:
        if head.startswith(magic):
            raise DataFormatError(f"{name}-compressed data, which headstart does not read: decompress it first "
                                  f"({how}); gzip, bz2 and xz are read as they are", path)
    return None


def _open_compressed(name: str | None, raw: IO[bytes]) -> IO[bytes]:
    if name == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if name == "bz2":
        import bz2

        return bz2.BZ2File(raw, mode="rb")
    if name == "xz":
        return _lzma.LZMAFile(raw, mode="rb")
    return raw


def check_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ParameterError(f"dtype must be float32 or float64, not {dt}")
    return dt


# --- raw input -----------------------------------------------------------------------------------
def read_bytes(path) -> bytes:
    """The whole content of ``path``, decompressed when it starts with the magic bytes of
    gzip, bz2 or xz (:func:`compression`)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise DataFormatError(f"cannot read file: {e.strerror or e}", path) from e
    name = compression(raw[:16], path)
    if name is not None:
        import io

        try:
            with _open_compressed(name, io.BytesIO(raw)) as f:
                raw = f.read()
        except _DECOMPRESS_ERRORS as e:
            raise DataFormatError(f"corrupt {name} data: {e}", path) from e
    return raw


class _GuardedStream:
    """A binary stream whose read errors (corrupt gzip, bz2 or xz) become DataFormatError."""

    def __init__(self, raw: IO[bytes], inner: IO[bytes], path, name: str | None = None):
        self._raw = raw
        self._inner = inner
        self._path = path
        self._name = name or "compressed"

    def read(self, n: int = -1) -> bytes:
        try:
            return self._inner.read(n)
        except _DECOMPRESS_ERRORS as e:
            raise DataFormatError(f"corrupt {self._name} data or read error: {e}", self._path) from e

    def readline(self, limit: int = -1) -> bytes:
        try:
            return self._inner.readline(limit)
        except _DECOMPRESS_ERRORS as e:
            raise DataFormatError(f"corrupt {self._name} data or read error: {e}", self._path) from e

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            if self._raw is not self._inner:
                self._raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_stream(path) -> _GuardedStream:
    """Open ``path`` for streaming reads, decompressing gzip, bz2 and xz by their magic
    bytes (:func:`compression`)."""
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise DataFormatError(f"cannot read file: {e.strerror or e}", path) from e
    try:
        magic = raw.read(16)
        raw.seek(0)
        name = compression(magic, path)
    except OSError as e:
        raw.close()
        raise DataFormatError(f"cannot read file: {e.strerror or e}", path) from e
    except DataFormatError:
        raw.close()
        raise
    return _GuardedStream(raw, _open_compressed(name, raw), path, name)


def first_line(path) -> bytes:
    """The first line of ``path`` (gunzipped), at most HEADER_LIMIT bytes, without ``\\n``."""
    with open_stream(path) as s:
        return s.readline(HEADER_LIMIT).rstrip(b"\n")


# --- headers ---------------------------------------------------------------------------------------
def header_ints(line: bytes, count: int):
    """Non-negative integers of a header line, or None if it is not ``count`` of them."""
    if line.startswith(BOM):
        line = line[len(BOM):]
    toks = line.rstrip(b"\r").split()
    if len(toks) != count or not all(t.isdigit() for t in toks):
        return None
    return [int(t) for t in toks]


#: said where a file's first line holds line breaks that are a lone CR (helper-80: such a
#: file read as one malformed line)
CR_ONLY_HINT = (" (its lines end in a lone CR, as classic Mac OS wrote them, so the whole file reads as one "
                "line: convert the line endings to LF, e.g. tr '\\r' '\\n' < FILE > NEW)")


def cr_only(line: bytes) -> bool:
    """Whether a line (read up to LF) holds a CR other than just before its end."""
    return b"\r" in line.rstrip(b"\r\n")


def parse_header(buf: bytes, path, names: tuple[str, ...], wide: str | None = None) -> tuple[list[int], int]:
    """Parse the header line of ``buf``: (values, offset of the first body byte).

    ``wide``: the name of a count that may go up to MAX_RAW_DIM (the raw features of data
    read for hashing), not MAX_DIM."""
    if not buf.strip():
        raise DataFormatError("file is empty: expected a header line '" + " ".join(names)
                              + "'", path, 1)
    nlpos = buf.find(b"\n", 0, HEADER_LIMIT)
    if nlpos < 0 and len(buf) > HEADER_LIMIT:
        raise DataFormatError(f"header line longer than {HEADER_LIMIT} bytes", path, 1, 1,
                              token=_show(buf[:40]))
    line = buf[:nlpos] if nlpos >= 0 else buf
    body = nlpos + 1 if nlpos >= 0 else len(buf)
    vals = header_ints(line, len(names))
    if vals is None:
        hint = ""
        if cr_only(line):
            hint = CR_ONLY_HINT
        elif b":" in line:
            hint = " (this looks like a data line: libsvm files have no header)"
        raise DataFormatError(
            f"header must be {len(names)} non-negative integers '{' '.join(names)}'{hint}",
            path, 1, 1, token=_show(line.rstrip(b"\r")))
    for name, v in zip(names[1:], vals[1:]):
        if name == wide and v > MAX_RAW_DIM:
            raise DataFormatError(f"header {name} = {v} exceeds the supported maximum {MAX_RAW_DIM} (raw feature "
                                  "ids of hashed data are int64)", path, 1, token=str(v))
        if name != wide and v > MAX_DIM:
            hint = " without feature hashing (--hash-buckets)" if name == "num_features" else ""
            raise DataFormatError(f"header {name} = {v} exceeds the supported maximum "
                                  f"{MAX_DIM} (ids are int32){hint}", path, 1, token=str(v))
    return vals, body


def _show(b: bytes) -> str:
    return b[:200].decode("utf-8", errors="replace")


# --- the sparse parse --------------------------------------------------------------------------
@dataclass
class SparseSpec:
    """What the kernel accepts; also what the error messages need to know."""

    has_labels: bool = True
    allow_features: bool = True
    feat_offset: int = 0
    label_offset: int = 0         # 1: the file's label ids are 1-based (parsed into [0, n_labels + 1), then shifted)
    n_features: int = -1          # -1: infer
    feat_max: int = K.INDEX_MAX   # largest (shifted) feature id; above INDEX_MAX: int64 indices
    n_labels: int = -1            # -1: infer
    max_rows: int = -1            # -1: unlimited
    skip_blank: bool = False
    comments: bool = False
    binary: bool = False          # LIBLINEAR's binary labels: +1 / 1 -> label 0, -1 -> none
    keep_zeros: bool = False      # keep index:0 tokens (label ids given as pairs); else dropped
    dtype: np.dtype = np.dtype(np.float32)
    what: str = "point"           # "point" or "row": how a line is called in messages
    label_word: str = "label id"
    feature_word: str = "feature"
    header_rows: int | None = None
    blank_line: int = -1          # line of a blank line read as a row in an earlier piece (for messages)


@dataclass
class SparseResult:
    rows: int
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    lptr: np.ndarray
    labels: np.ndarray
    max_feature: int
    max_label: int
    blank_at: int = -1      # byte offset of the first blank line read as a row, -1 if none


def _trim(a: np.ndarray, n: int) -> np.ndarray:
    """``a[:n]``, copied when the view would keep much unused memory alive."""
    if n * 10 >= a.shape[0] * 9:
        return a[:n]
    return a[:n].copy()


def parse_sparse(buf: np.ndarray, start: int, end: int, spec: SparseSpec, path,
                 first_line_no: int) -> SparseResult:
    """Run the kernel on ``buf[start:end]``; raise DataFormatError on the first problem.

    ``first_line_no`` is the 1-based line number of the line beginning at ``start``.
    """
    n_nl, n_colon, n_comma = K.count_bytes(buf, start, end)
    n_lines = n_nl + 1
    rows_cap = n_lines if spec.max_rows < 0 else min(n_lines, spec.max_rows)
    nnz_cap = n_colon if spec.allow_features else 0
    lab_cap = n_comma + n_lines if spec.has_labels else 0
    indptr = np.empty(rows_cap + 1, dtype=np.int64)
    lptr = np.empty(rows_cap + 1, dtype=np.int64)
    indices = np.empty(nnz_cap, dtype=np.int32 if spec.feat_max <= K.INDEX_MAX else np.int64)
    data = np.empty(nnz_cap, dtype=spec.dtype)
    labels = np.empty(lab_cap, dtype=np.int32)
    code, pos, aux, rows, nnz, nlab, maxf, maxl = K.parse_sparse(
        buf, start, end, spec.has_labels, spec.allow_features, spec.feat_offset,
        spec.n_features, spec.feat_max, spec.n_labels, spec.max_rows, spec.skip_blank, spec.comments, spec.binary, spec.keep_zeros,
        indptr, indices, data, lptr, labels)
    if code != K.OK:
        raise sparse_error(code, pos, aux, buf, start, spec, path, first_line_no)
    return SparseResult(rows, indptr[:rows + 1], _trim(indices, nnz), _trim(data, nnz),
                        lptr[:rows + 1], _trim(labels, nlab), maxf, maxl, int(aux))


def csr(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, shape) -> sp.csr_matrix:
    """A canonical CSR matrix from arrays that are already sorted and duplicate-free."""
    idx_t = np.int32 if max(int(indptr[-1]) if len(indptr) else 0, shape[1]) < 2 ** 31 \
        else np.int64
    m = sp.csr_matrix((data, indices.astype(idx_t, copy=False), indptr.astype(idx_t)),
                      shape=shape, copy=False)
    m.has_canonical_format = True
    return m


def label_matrix(lptr: np.ndarray, labels: np.ndarray, shape) -> sp.csr_matrix:
    return csr(lptr, labels, np.ones(labels.shape[0], dtype=np.float32), shape)


# --- error messages -----------------------------------------------------------------------------
_WS = b" \t\n"


def locate(buf: np.ndarray, start: int, pos: int, first_line_no: int) -> tuple[int, int, int]:
    """(line number, 1-based column, offset of the line start) of byte ``pos``."""
    seg = np.asarray(buf[start:pos])
    nls = np.flatnonzero(seg == 10)
    line = first_line_no + len(nls)
    line_start = start + (int(nls[-1]) + 1 if len(nls) else 0)
    return line, pos - line_start + 1, line_start


def token_at(buf: np.ndarray, pos: int, stops: bytes = _WS, limit: int = 200) -> bytes:
    """The token starting at ``pos`` (up to a byte of ``stops``; a final ``\r`` of a
    ``\r\n`` line ending is not part of it)."""
    end = min(len(buf), pos + limit)
    chunk = bytes(buf[pos:end])
    for i, c in enumerate(chunk):
        if c in stops:
            chunk = chunk[:i]
            break
    if chunk.endswith(b"\r"):
        chunk = chunk[:-1]
    return chunk


def line_at(buf: np.ndarray, line_start: int, limit: int = 1 << 20) -> bytes:
    end = min(len(buf), line_start + limit)
    chunk = bytes(buf[line_start:end])
    nl = chunk.find(b"\n")
    if nl >= 0:
        chunk = chunk[:nl]
    return chunk.rstrip(b"\r")


_INT = re.compile(rb"[0-9]+\Z")
_NEG_INT = re.compile(rb"-[0-9]+\Z")
_NUMBER = re.compile(rb"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")


def _find_dup(line: bytes, value: int, kind: str, feat_offset: int) -> tuple[int, bytes]:
    """Column (0-based) and text of the second occurrence of a duplicate id in ``line``."""
    seen = 0
    if kind == "label":
        m = re.match(rb"[^ \t]*", line)
        off = 0
        for piece in m.group(0).split(b","):
            if piece.isdigit() and int(piece) == value:
                seen += 1
                if seen == 2:
                    return off, piece
            off += len(piece) + 1
        # not in a leading list: a predictions file's "label:score" pairs, found as the
        # features' tokens are (helper-120: its duplicates were placed at column 1)
        seen = 0
    for mt in re.finditer(rb"[^ \t]+", line):
        tok = mt.group(0)
        idx, colon, _ = tok.partition(b":")
        if colon and idx.isdigit() and int(idx) == value:
            seen += 1
            if seen == 2:
                return mt.start(), tok
    return 0, b""


def sparse_error(code: int, pos: int, aux: int, buf: np.ndarray, start: int, spec: SparseSpec,
                 path, first_line_no: int) -> DataFormatError:
    line, col, line_start = locate(buf, start, pos, first_line_no)
    fw = spec.feature_word
    if code == K.E_LABEL_SYNTAX:
        piece = token_at(buf, pos, _WS + b",")
        tok = _show(token_at(buf, pos))
        if b"\r" in piece:
            msg = "stray carriage return (\\r) inside a line"
        elif piece == b"":
            msg = f"empty {spec.label_word} in the label list (stray comma)"
        elif _NEG_INT.match(piece):
            msg = f"negative {spec.label_word} {_show(piece)}"
        elif b":" in piece:
            msg = (f"expected a comma-separated label list, found {fw} token "
                   f"(a {spec.what} without labels must start with a space)")
        elif _NUMBER.match(piece):
            msg = f"{spec.label_word} {_show(piece)} is not an integer"
        else:
            msg = f"malformed label list: {spec.label_word}s must be non-negative integers"
        return DataFormatError(msg, path, line, col, tok)
    if code == K.E_BINARY_LABEL:
        return DataFormatError(f"binary labels (+1/-1, as LIBLINEAR's): expected +1, 1 or -1, found "
                               f"{_show(token_at(buf, pos))!r}", path, line, col, _show(token_at(buf, pos)))
    if code == K.E_LABEL_RANGE:
        tok = token_at(buf, pos, _WS + b",:")
        bound = (f"[0, {spec.n_labels})" if spec.n_labels >= 0 else f"[0, {K.INDEX_MAX}]") if not spec.label_offset \
            else f"[1, {spec.n_labels - 1}] (1-based label ids)"
        return DataFormatError(f"{spec.label_word} {_show(tok)} out of range {bound}",
                               path, line, col, _show(token_at(buf, pos)))
    if code == K.E_LABEL_DUP:
        c0, tok = _find_dup(line_at(buf, line_start), aux, "label", 0)
        return DataFormatError(f"duplicate {spec.label_word} {aux} in one {spec.what}",
                               path, line, c0 + 1, _show(tok) or str(aux))
    if code == K.E_FEAT_SYNTAX:
        tok = token_at(buf, pos)
        idx, colon, val = tok.partition(b":")
        if b"\r" in tok:
            msg = "stray carriage return (\\r) inside a line"
        elif not colon:
            msg = f"malformed {fw} token: expected index:value, missing ':'"
        elif _NEG_INT.match(idx):
            msg = f"negative {fw} index {_show(idx)}"
        elif not _INT.match(idx):
            msg = f"{fw} index is not a non-negative integer"
        elif val == b"":
            msg = f"missing {fw} value after ':'"
        else:
            msg = f"{fw} value is not a number"
        return DataFormatError(msg, path, line, col, _show(tok))
    if code == K.E_FEAT_RANGE:
        tok = token_at(buf, pos)
        idx = tok.partition(b":")[0]
        off = spec.feat_offset
        if spec.n_features >= 0:
            bound = f"[{off}, {spec.n_features + off - 1}]" if spec.n_features else "(none: 0 features)"
        else:
            bound = f"[{off}, {spec.feat_max + off}]"
        msg = f"{fw} index {_show(idx)} out of range {bound}"
        if fw == "feature" and (not _INT.match(idx) or int(idx) > spec.feat_max + off):
            # beyond what any header may declare: what would read it
            msg += (" (raw feature ids of hashed data are int64)" if spec.feat_max > K.INDEX_MAX else
                    " (feature ids are int32; with feature hashing, --hash-buckets, raw ids may go up to "
                    f"{K.RAW_ID_MAX})")
        if off == 1 and idx.strip(b"0") == b"":
            msg += " (index 0 in a one-based file; is the file zero-based?)"
        elif off == 0 and spec.n_features > 0 and _INT.match(idx) and int(idx) == spec.n_features:
            msg += " (one past the last index of a zero-based file; is the file one-based?)"
        return DataFormatError(msg, path, line, col, _show(tok))
    if code == K.E_FEAT_DUP:
        c0, tok = _find_dup(line_at(buf, line_start), aux, "feature", spec.feat_offset)
        return DataFormatError(f"duplicate {fw} index {aux} in one {spec.what}",
                               path, line, c0 + 1, _show(tok) or str(aux))
    if code == K.E_NONFINITE:
        tok = token_at(buf, pos)
        val = tok.partition(b":")[2]
        msg = f"{fw} value is NaN or infinite"
        if _NUMBER.match(val):
            msg = f"{fw} value overflows {spec.dtype.name}"
        return DataFormatError(msg, path, line, col, _show(tok))
    if code == K.E_TOO_MANY_ROWS:
        msg = f"more {spec.what}s than the {spec.header_rows} announced in the header (line 1)"
        # an earlier piece's blank line first: it came before, so it shifted the rows first
        blank = spec.blank_line if spec.blank_line >= 0 else locate(buf, start, aux, first_line_no)[0] \
            if aux >= 0 else -1
        if blank >= 0:
            # helper-102: a stray blank line shifts every row and was only seen at the end
            msg += f"; line {blank} is blank, and a blank line is a {spec.what} without labels or features"
        return DataFormatError(msg, path, line, 1, _show(token_at(buf, pos)))
    if code == K.E_UNEXPECTED:
        return DataFormatError("unexpected token after the label list (only "
                               "comma-separated labels are allowed here)", path, line, col,
                               _show(token_at(buf, pos)))
    raise AssertionError(f"internal parser error code {code} at byte {pos}")  # pragma: no cover


def too_few_rows(path, got: int, expected: int, next_line: int, what: str = "point"):
    return DataFormatError(f"file ends after {got} {what}s but the header (line 1) announces "
                           f"{expected}", path, next_line)

