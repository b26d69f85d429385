"""DiSMEC++'s shortlist file (the ``--shortlist`` input of its ``cascade`` program).

The format, as DiSMEC++ reads it (``io::read_binary_matrix_as_lil``): a binary sparse
matrix in text form, instances x labels --

* line 1: the header ``NUM_INSTANCES NUM_LABELS``, two positive integers and nothing else;
* then one line per instance, in order, listing the labels that instance is a
  shortlisted (hard-negative or positive) candidate for, as ``label:1`` tokens
  separated by blanks (0-based ids, value exactly 1);
* lines that are empty or start with ``#`` are skipped (they are *not* instances: an
  instance without candidates is a line holding only blanks).

DiSMEC++ then inverts it to a list of instances per label and requires both header
numbers to match the training data.  Reading it here is strict: a bad token, an id
outside ``[0, NUM_LABELS)``, a value other than 1, a repeated label on a line, more or
fewer instance lines than the header says, or a header that disagrees with the data is
refused with the file, line (1-based, the header is line 1), column and token.
Gzip-compressed files are read transparently.

Difference from DiSMEC++: its cascade trainer trains a label on exactly its shortlisted
instances; headstart always adds the label's positives (``training``), so a file may
list only negatives.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from .._compile import njit
from ..errors import DataFormatError
from ..io import _kernels as K
from ..io._common import read_bytes
from ..io.atomic import atomic_write

OK, E_SYNTAX, E_RANGE, E_VALUE, E_DUP, E_TOO_MANY = 0, 1, 2, 3, 4, 5
_MESSAGES = {
    E_SYNTAX: "expected a token 'label:1'",
    E_RANGE: "label id out of range",
    E_VALUE: "the value of a shortlist entry must be 1",
    E_DUP: "label listed twice on this line",
    E_TOO_MANY: "more instance lines than the header announces",
}


@njit(cache=True, nogil=True)
def _parse_body(buf, p, end, n_rows, n_labels, row_of, col_of, seen):
    """Parse instance lines from ``p``.  Returns (code, rows, nnz, error position, line
    start of the error).  ``seen`` (n_labels, int64) holds the row+1 that last used a
    label, to catch repeats in O(1)."""
    row = 0
    nnz = 0
    while p < end:
        ls = p
        # skipped lines: empty, or a comment
        if buf[p] == 10 or (buf[p] == 13 and (p + 1 >= end or buf[p + 1] == 10)):
            p = K._next_line(buf, p, end)
            continue
        if buf[p] == 35:
            p = K._next_line(buf, p, end)
            continue
        if row >= n_rows:
            return E_TOO_MANY, row, nnz, p, ls
        while True:
            while p < end and K._is_ws(buf[p]):
                p += 1
            if K._at_eol(buf, p, end, False):
                break
            tok = p
            v, p, nd = K._parse_uint(buf, p, end)
            if nd == 0 or p >= end or buf[p] != 58:
                return E_SYNTAX, row, nnz, tok, ls
            p += 1
            val, p, status = K._parse_float(buf, p, end)
            if status != 0 or not (p >= end or K._is_ws(buf[p]) or K._at_eol(buf, p, end, False)):
                return E_SYNTAX, row, nnz, tok, ls
            if v >= n_labels:
                return E_RANGE, row, nnz, tok, ls
            if val != 1.0:
                return E_VALUE, row, nnz, tok, ls
            if seen[v] == row + 1:
                return E_DUP, row, nnz, tok, ls
            seen[v] = row + 1
            if nnz >= row_of.size:
                return E_SYNTAX, row, nnz, tok, ls  # cannot happen: one ':' per entry
            row_of[nnz] = row
            col_of[nnz] = v
            nnz += 1
        p = K._next_line(buf, p, end)
        row += 1
    return OK, row, nnz, p, p


def _location(raw: bytes, pos: int) -> tuple[int, int, str]:
    line = raw.count(b"\n", 0, pos) + 1
    ls = raw.rfind(b"\n", 0, pos) + 1
    le = raw.find(b"\n", pos)
    le = len(raw) if le < 0 else le
    rest = raw[pos:le].split()
    token = rest[0].decode("utf-8", "replace") if rest else ""
    return line, pos - ls + 1, token


def read_shortlist(path, n_instances: int | None = None, n_labels: int | None = None) -> sp.csc_matrix:
    """Read a shortlist file: an instances x labels 0/1 matrix in CSC (per label, its
    instances, sorted).  ``n_instances``/``n_labels``, when given, must match the header."""
    raw = read_bytes(path)
    nl = raw.find(b"\n")
    head = raw[: nl if nl >= 0 else len(raw)]
    toks = head.strip().split()
    if len(toks) != 2 or not all(t.isdigit() for t in toks) or int(toks[0]) <= 0 or int(toks[1]) <= 0:
        raise DataFormatError("the header must be 'NUM_INSTANCES NUM_LABELS' (two positive integers)",
                              path, 1, 1, head.decode("utf-8", "replace").strip() or None)
    rows, cols = int(toks[0]), int(toks[1])
    if cols > K.INDEX_MAX or rows > K.INDEX_MAX:
        raise DataFormatError(f"header claims {rows} x {cols}, beyond the supported maximum (int32 ids)", path, 1)
    if n_labels is not None and cols != n_labels:
        raise DataFormatError(f"the shortlist has {cols} labels (header), the training data has {n_labels}; "
                              "refused", path, 1, None, head.decode().strip())
    if n_instances is not None and rows != n_instances:
        raise DataFormatError(f"the shortlist has {rows} instances (header), the training data has "
                              f"{n_instances}; refused", path, 1, None, head.decode().strip())
    buf = np.frombuffer(raw, dtype=np.uint8)
    start = nl + 1 if nl >= 0 else len(raw)
    cap = raw.count(b":", start)
    row_of = np.empty(cap, dtype=np.int32)
    col_of = np.empty(cap, dtype=np.int32)
    seen = np.zeros(cols, dtype=np.int64)
    code, got, nnz, pos, _ = _parse_body(buf, start, len(raw), rows, cols, row_of, col_of, seen)
    if code != OK:
        line, col, token = _location(raw, pos)
        msg = _MESSAGES[code]
        if code == E_RANGE:
            msg += f": labels are 0..{cols - 1} (header)"
        elif code == E_TOO_MANY:
            msg += f" ({rows})"
        raise DataFormatError(msg, path, line, col, token or None)
    if got != rows:
        raise DataFormatError(f"the header announces {rows} instance lines but the file has {got} "
                              "(empty lines and '#' lines do not count; write an instance without "
                              "candidates as a line of blanks)", path, raw.count(b"\n") + 1)
    M = sp.csc_matrix((np.ones(nnz, dtype=np.float32), (row_of[:nnz], col_of[:nnz])), shape=(rows, cols))
    M.sort_indices()
    return M


@njit(cache=True, nogil=True)
def _format_rows(r0, r1, indptr, indices, out):
    """The lines of rows r0..r1-1 ('j:1 j:1 ...', a row without ids as one blank) into
    the byte buffer ``out``; returns the bytes used.  (A Python loop over 49M ids took
    about two minutes of the Amazon-670K-sized shortlist.)"""
    digits = np.empty(20, dtype=np.uint8)
    p = 0
    for r in range(r0, r1):
        lo, up = indptr[r], indptr[r + 1]
        if lo == up:
            out[p] = 32
            p += 1
        for q in range(lo, up):
            if q > lo:
                out[p] = 32
                p += 1
            v = np.int64(indices[q])
            nd = 0
            while True:
                digits[nd] = 48 + v % 10
                v //= 10
                nd += 1
                if v == 0:
                    break
            for t in range(nd):
                out[p + t] = digits[nd - 1 - t]
            p += nd
            out[p] = 58      # ':'
            out[p + 1] = 49  # '1'
            p += 2
        out[p] = 10
        p += 1
    return p


def write_shortlist(path: str | os.PathLike, shortlist: sp.spmatrix) -> None:
    """Write an instances x labels 0/1 matrix in the format above (atomically; a name
    ending in ``.gz`` is gzip-compressed, level 6 like the other writers)."""
    import gzip

    M = sp.csr_matrix(shortlist)
    M.sort_indices()
    n, L = M.shape
    if M.nnz and (M.indices.min() < 0 or M.indices.max() >= L):   # the kernel's buffer assumes ids < L
        raise DataFormatError(f"shortlist label ids must be in [0, {L}), got {M.indices.min()}..{M.indices.max()}")
    indptr = M.indptr.astype(np.int64)
    indices = M.indices
    width = len(str(max(L - 1, 0))) + 3          # digits, ':1' and the blank or newline
    with atomic_write(path, "wb") as raw:
        fh = (gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0)
              if os.fspath(path).lower().endswith(".gz") else raw)
        fh.write(f"{n} {L}\n".encode())
        step = 65536
        for r0 in range(0, n, step):
            r1 = min(r0 + step, n)
            out = np.empty(int(indptr[r1] - indptr[r0]) * width + 2 * (r1 - r0), dtype=np.uint8)
            used = _format_rows(r0, r1, indptr, indices, out)
            fh.write(out[:used].tobytes())
        if fh is not raw:
            fh.close()
