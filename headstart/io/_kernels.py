"""Numba kernels that parse and format the text formats byte by byte.

Everything here works on a ``uint8`` view of the raw file content and never calls back
into Python.  A parse kernel either succeeds or stops at the first problem and returns an
error code together with the byte offset of the offending token; turning that offset into
a line number, a column and a readable message is done in Python (``_common.py``) and only
on the error path, so the fast path stays a single pass over the bytes.

Capacities: callers size every output array from the content (counts of newlines, colons
and commas, see :func:`count_bytes`), never from a header.  Each stored feature or
prediction consumes one ``:`` byte of the input and each stored label is followed by a
``,`` or ends a line, so those counts bound the outputs; the kernels still check every
write against the array length (``E_CAPACITY``) so that a logic slip cannot write out of
bounds.
"""

from __future__ import annotations

import numpy as np

from .._compile import njit
from .._heapsort import heapsort

# --- error codes returned by the parse kernels -------------------------------------------
OK = 0
E_LABEL_SYNTAX = 1      # label list is not comma-separated non-negative integers
E_LABEL_RANGE = 2       # label id >= number of labels (or absurdly large)
E_LABEL_DUP = 3         # same label twice in one row (pos = line start, aux = label)
E_FEAT_SYNTAX = 4       # feature token is not ``index:value``
E_FEAT_RANGE = 5        # feature index outside [0, n_features) after the base offset
E_FEAT_DUP = 6          # same feature index twice in one row (pos = line start, aux = index)
E_NONFINITE = 7         # NaN, inf, or a value that overflows the output dtype
E_TOO_MANY_ROWS = 8     # a non-blank line after the announced number of rows
E_UNEXPECTED = 9        # a token where none is allowed (label-only files)
E_CAPACITY = 10         # internal: an output array is too small (a bug, never bad input)
E_TOO_MANY_TOKENS = 11  # predictions: more than k tokens on a line
E_TOO_FEW_TOKENS = 12   # predictions: fewer than k tokens on a line
E_BINARY_LABEL = 13     # binary (+1/-1) labels: a label other than +1, 1 or -1

INDEX_MAX = 2147483646          # largest id that still fits int32 as ``id + 1``
#: largest raw feature id of data read for feature hashing (``parse_sparse``'s
#: ``feat_max``): such ids are only keys of the hash (e.g. 64-bit hashes of tokens), kept
#: as int64 column indices of a matrix as wide as the largest id + 1, which int64 holds
RAW_ID_MAX = 9223372036854775806
_UINT_MAX = 9223372036854775807  # integers saturate here: a value >= it is always out of range
_UINT_LAST = 922337203685477580  # _UINT_MAX // 10: one more digit still fits when it is <= 7
_MANT_DIGITS = 18               # significant decimal digits kept when parsing a float

_POW10 = np.array([float(10 ** i) for i in range(309)], dtype=np.float64)
_IPOW10 = np.array([10 ** i for i in range(19)], dtype=np.int64)


# --- scanning helpers ----------------------------------------------------------------------
@njit(nogil=True, cache=True)
def count_bytes(buf, start, end):
    """Return (newlines, colons, commas) in ``buf[start:end]``."""
    nl = 0
    co = 0
    cm = 0
    for i in range(start, end):
        c = buf[i]
        if c == 10:
            nl += 1
        elif c == 58:
            co += 1
        elif c == 44:
            cm += 1
    return nl, co, cm


@njit(nogil=True, cache=True)
def nth_newline(buf, n):
    """Offset of the ``n``-th (1-based) ``\\n`` in ``buf``, or -1 if there are fewer."""
    seen = 0
    for i in range(buf.shape[0]):
        if buf[i] == 10:
            seen += 1
            if seen == n:
                return i
    return -1


@njit(nogil=True, cache=True)
def _is_ws(c):
    return c == 32 or c == 9


@njit(nogil=True, cache=True)
def _at_eol(buf, p, end, comments):
    """True at the end of a line: end of data, ``\\n``, ``\\r\\n``, a final ``\\r``, or ``#``."""
    if p >= end:
        return True
    c = buf[p]
    if c == 10:
        return True
    if c == 13 and (p + 1 >= end or buf[p + 1] == 10):
        return True
    if comments and c == 35:
        return True
    return False


@njit(nogil=True, cache=True)
def _next_line(buf, p, end):
    while p < end and buf[p] != 10:
        p += 1
    return p + 1


@njit(nogil=True, cache=True)
def _parse_uint(buf, p, end):
    """Decimal digits at ``p``: (value, new position, number of digits).

    Exact up to 2^63 - 2; larger values saturate at 2^63 - 1, which is out of range for
    every id we accept (the raw ids of hashed features go up to RAW_ID_MAX).
    """
    v = np.int64(0)
    nd = 0
    while p < end:
        d = np.int64(buf[p]) - 48
        if d < 0 or d > 9:
            break
        if v < _UINT_LAST or (v == _UINT_LAST and d < 7):
            v = v * 10 + d
        else:
            v = _UINT_MAX
        nd += 1
        p += 1
    return v, p, nd


@njit(nogil=True, cache=True)
def _scale(mant, exp10):
    """``mant * 10**exp10`` in float64 (one rounding when |exp10| <= 22)."""
    if mant == 0:
        return 0.0
    if exp10 >= 0:
        if exp10 > 308:
            return np.inf
        return mant * _POW10[exp10]
    e = -exp10
    if e <= 308:
        return mant / _POW10[e]
    e -= 308
    if e > 308:
        return 0.0
    return (mant / _POW10[308]) / _POW10[e]


@njit(nogil=True, cache=True)
def _parse_float(buf, p, end):
    """A decimal floating-point number at ``p``: (value, new position, status).

    Accepts an optional sign, digits with an optional ``.`` (``5.``, ``.5``) and an
    optional exponent.  Status 0: parsed (the value may be inf after overflow);
    1: not a number; 2: a ``nan``/``inf``/``infinity`` literal.
    """
    neg = False
    if p < end and (buf[p] == 45 or buf[p] == 43):
        neg = buf[p] == 45
        p += 1
    if p < end:
        c = buf[p] | 32
        if c == 110:  # n
            if p + 3 <= end and (buf[p + 1] | 32) == 97 and (buf[p + 2] | 32) == 110:
                return np.nan, p + 3, 2
            return 0.0, p, 1
        if c == 105:  # i
            if p + 3 <= end and (buf[p + 1] | 32) == 110 and (buf[p + 2] | 32) == 102:
                q = p + 3
                if (q + 5 <= end and (buf[q] | 32) == 105 and (buf[q + 1] | 32) == 110
                        and (buf[q + 2] | 32) == 105 and (buf[q + 3] | 32) == 116
                        and (buf[q + 4] | 32) == 121):
                    q += 5
                return np.inf, q, 2
            return 0.0, p, 1
    mant = np.int64(0)
    nd = 0
    exp10 = 0
    seen = False
    while p < end:
        d = np.int64(buf[p]) - 48
        if d < 0 or d > 9:
            break
        seen = True
        if nd < _MANT_DIGITS:
            if mant != 0 or d != 0:
                mant = mant * 10 + d
                nd += 1
        else:
            exp10 += 1
        p += 1
    if p < end and buf[p] == 46:
        p += 1
        while p < end:
            d = np.int64(buf[p]) - 48
            if d < 0 or d > 9:
                break
            seen = True
            if nd < _MANT_DIGITS:
                if mant != 0 or d != 0:
                    mant = mant * 10 + d
                    nd += 1
                exp10 -= 1
            p += 1
    if not seen:
        return 0.0, p, 1
    if p < end and (buf[p] | 32) == 101:
        q = p + 1
        eneg = False
        if q < end and (buf[q] == 45 or buf[q] == 43):
            eneg = buf[q] == 45
            q += 1
        ev = 0
        eseen = False
        while q < end:
            d = np.int64(buf[q]) - 48
            if d < 0 or d > 9:
                break
            eseen = True
            if ev < 100000:
                ev = ev * 10 + d
            q += 1
        if not eseen:
            return 0.0, q, 1
        p = q
        if eneg:
            exp10 -= ev
        else:
            exp10 += ev
    v = _scale(mant, exp10)
    if neg:
        v = -v
    return v, p, 0


# --- the sparse body parser ------------------------------------------------------------------
@njit(nogil=True, cache=True)
def parse_sparse(buf, start, end, has_labels, allow_features, feat_offset, n_features, feat_max,
                 n_labels, max_rows, skip_blank, comments, binary, keep_zeros,
                 indptr, indices, data, lptr, labels):
    """Parse lines ``[l1,l2,...] f:v f:v ...`` of ``buf[start:end]`` into CSR arrays.

    has_labels      a line starts with a comma-separated label list; a line that starts
                    with a space or tab has no labels
    allow_features  ``index:value`` tokens may follow (else any further token is an error)
    keep_zeros      keep ``index:0`` tokens (a label file of pairs, where every listed id is
                    a label whatever its value); else explicit zeros are dropped
    feat_offset     subtracted from each feature index (1 for one-based files)
    n_features      exclusive upper bound of the shifted index; -1: unbounded (inferred)
    feat_max        largest shifted index accepted whatever ``n_features`` says: INDEX_MAX
                    (int32 ``indices``), or up to RAW_ID_MAX - feat_offset for the raw ids
                    of hashed features (int64 ``indices``)
    n_labels        exclusive upper bound of label ids; -1: unbounded (inferred)
    max_rows        rows expected; blank lines after that many rows are ignored, any other
                    line is E_TOO_MANY_ROWS; -1: unlimited
    skip_blank      blank lines are skipped (libsvm) instead of being rows without content
    comments        ``#`` starts a comment running to the end of the line (libsvm)
    binary          a line's label is one of ``+1``, ``1`` (label 0) or ``-1`` (no label),
                    as in LIBLINEAR's binary files; anything else is E_BINARY_LABEL

    Features of a row are sorted by index, duplicates rejected, and explicit zeros dropped
    (after the duplicate check).  Labels of a row are sorted, duplicates rejected.

    Returns (code, pos, aux, rows, nnz, nlab, max_feature, max_label).
    """
    # np.int64, not literal 0: a variable that starts as a literal constant makes numba
    # compile every kernel it is passed to once more for that literal (here: the sort)
    rows = np.int64(0)
    nnz = np.int64(0)
    nl = np.int64(0)
    maxf = -1
    maxl = -1
    cap_rows = indptr.shape[0] - 1
    cap_nnz = data.shape[0]
    cap_lab = labels.shape[0]
    indptr[0] = 0
    lptr[0] = 0
    p = start
    blank_row = -1      # where the first blank line read as a row starts (aux of OK and of E_TOO_MANY_ROWS)
    while p < end:
        line_start = p
        if _at_eol(buf, p, end, comments):
            # a blank line
            if skip_blank or (max_rows >= 0 and rows >= max_rows):
                p = _next_line(buf, p, end)
                continue
            if rows >= cap_rows:
                return E_CAPACITY, line_start, 0, rows, nnz, nl, maxf, maxl
            if blank_row < 0:
                blank_row = line_start
            rows += 1
            indptr[rows] = nnz
            lptr[rows] = nl
            p = _next_line(buf, p, end)
            continue
        if max_rows >= 0 and rows >= max_rows:
            return E_TOO_MANY_ROWS, line_start, blank_row, rows, nnz, nl, maxf, maxl
        if rows >= cap_rows:
            return E_CAPACITY, line_start, 0, rows, nnz, nl, maxf, maxl
        # ---- labels
        if has_labels and binary and not _is_ws(buf[p]):
            t = p
            sign = buf[p]
            if sign == 43 or sign == 45:     # '+' / '-'
                p += 1
            v, p, nd = _parse_uint(buf, p, end)
            if nd == 0 or v != 1 or not (_at_eol(buf, p, end, comments) or _is_ws(buf[p])):
                return E_BINARY_LABEL, t, 0, rows, nnz, nl, maxf, maxl
            if sign != 45:
                if nl >= cap_lab:
                    return E_CAPACITY, t, 0, rows, nnz, nl, maxf, maxl
                labels[nl] = 0
                nl += 1
                maxl = 0
        elif has_labels and not _is_ws(buf[p]):
            l0 = nl
            last = -1
            ordered = True
            while True:
                t = p
                v, p, nd = _parse_uint(buf, p, end)
                if nd == 0:
                    return E_LABEL_SYNTAX, t, 0, rows, nnz, nl, maxf, maxl
                if (n_labels >= 0 and v >= n_labels) or v > INDEX_MAX:
                    return E_LABEL_RANGE, t, v, rows, nnz, nl, maxf, maxl
                if not (p < end and buf[p] == 44) and not (_at_eol(buf, p, end, comments)
                                                         or _is_ws(buf[p])):
                    return E_LABEL_SYNTAX, t, 0, rows, nnz, nl, maxf, maxl
                if nl >= cap_lab:
                    return E_CAPACITY, t, 0, rows, nnz, nl, maxf, maxl
                labels[nl] = v
                nl += 1
                if v <= last:
                    ordered = False
                last = v
                if v > maxl:
                    maxl = v
                if p < end and buf[p] == 44:
                    p += 1
                    continue
                break
            if not ordered:
                heapsort(labels, data[:0], l0, nl)
                for r in range(l0 + 1, nl):
                    if labels[r] == labels[r - 1]:
                        return (E_LABEL_DUP, line_start, np.int64(labels[r]), rows, nnz, nl,
                                maxf, maxl)
        # ---- features
        f0 = nnz
        last = -1
        ordered = True
        while True:
            while p < end and _is_ws(buf[p]):
                p += 1
            if _at_eol(buf, p, end, comments):
                break
            t = p
            if not allow_features:
                return E_UNEXPECTED, t, 0, rows, nnz, nl, maxf, maxl
            idx, p, nd = _parse_uint(buf, p, end)
            if nd == 0 or p >= end or buf[p] != 58:
                return E_FEAT_SYNTAX, t, 0, rows, nnz, nl, maxf, maxl
            p += 1
            val, p, st = _parse_float(buf, p, end)
            if st == 2:
                return E_NONFINITE, t, 0, rows, nnz, nl, maxf, maxl
            if st != 0 or not (_at_eol(buf, p, end, comments) or _is_ws(buf[p])):
                return E_FEAT_SYNTAX, t, 0, rows, nnz, nl, maxf, maxl
            j = idx - feat_offset
            if j < 0 or (n_features >= 0 and j >= n_features) or j > feat_max:
                return E_FEAT_RANGE, t, idx, rows, nnz, nl, maxf, maxl
            if nnz >= cap_nnz:
                return E_CAPACITY, t, 0, rows, nnz, nl, maxf, maxl
            data[nnz] = val
            x = data[nnz]
            if x - x != 0:  # inf or nan after the cast to the output dtype
                return E_NONFINITE, t, 0, rows, nnz, nl, maxf, maxl
            indices[nnz] = j
            nnz += 1
            if j <= last:
                ordered = False
            last = j
            if j > maxf:
                maxf = j
        if not ordered:
            heapsort(indices, data, f0, nnz)
            for r in range(f0 + 1, nnz):
                if indices[r] == indices[r - 1]:
                    return (E_FEAT_DUP, line_start, np.int64(indices[r]) + feat_offset, rows, nnz, nl,
                            maxf, maxl)
        # drop explicit zeros
        w = nnz if keep_zeros else f0
        for r in range(w, nnz):
            if data[r] != 0:
                if w != r:
                    data[w] = data[r]
                    indices[w] = indices[r]
                w += 1
        nnz = w
        rows += 1
        indptr[rows] = nnz
        lptr[rows] = nl
        p = _next_line(buf, p, end)
    return OK, end, blank_row, rows, nnz, nl, maxf, maxl


# --- predictions -------------------------------------------------------------------------------
@njit(nogil=True, cache=True)
def _skip_blanks(buf, p, end):
    while p < end and _is_ws(buf[p]):
        p += 1
    return p


@njit(nogil=True, cache=True)
def _float32_token(buf, p, end):
    """A number ending at a blank or the end of the line, as float32: (value, new
    position, OK / E_FEAT_SYNTAX (not a number) / E_NONFINITE (NaN, infinity, or beyond
    float32's range))."""
    val, p, st = _parse_float(buf, p, end)
    if st == 1 or (st == 0 and not (_at_eol(buf, p, end, False) or _is_ws(buf[p]))):
        return np.float32(0.0), p, E_FEAT_SYNTAX
    x = np.float32(val)
    if st == 2 or x - x != 0:
        return np.float32(0.0), p, E_NONFINITE
    return x, p, OK


@njit(nogil=True, cache=True)
def parse_predictions(buf, start, end, k, n_labels, max_rows, out_labels, out_scores,
                      validate_only, tmp):
    """Parse lines of exactly ``k`` tokens ``label:score`` into ``(rows, k)`` arrays.

    Token order is kept.  A blank line is a row only when ``k == 0``; blank lines after
    ``max_rows`` rows are ignored.  ``validate_only``: check the lines but store every
    row in row 0 (error localisation after the output arrays ran out).  ``tmp`` is int64
    scratch; it and the outputs need ``min(k, colons in the text)`` columns only (every
    token holds a colon), so a header claiming a huge k allocates nothing.
    Returns (code, pos, aux, rows).
    """
    rows = 0
    cap_rows = out_labels.shape[0]
    width = min(out_labels.shape[1], tmp.shape[0])
    p = start
    while p < end:
        line_start = p
        blank = _at_eol(buf, _skip_blanks(buf, p, end), end, False)   # blanks only, too
        if max_rows >= 0 and rows >= max_rows:
            if blank:
                p = _next_line(buf, p, end)
                continue
            return E_TOO_MANY_ROWS, line_start, -1, rows    # aux -1: no blank row to point at
        ri = 0 if validate_only else rows
        if ri >= cap_rows:
            return E_CAPACITY, line_start, 0, rows
        c = 0
        while True:
            p = _skip_blanks(buf, p, end)
            if _at_eol(buf, p, end, False):
                break
            t = p
            if c >= k:
                return E_TOO_MANY_TOKENS, t, c, rows
            lab, p, nd = _parse_uint(buf, p, end)
            if nd == 0 or p >= end or buf[p] != 58:
                return E_FEAT_SYNTAX, t, 0, rows
            p += 1
            s, p, code = _float32_token(buf, p, end)
            if code == E_FEAT_SYNTAX:
                return code, t, 0, rows
            if lab >= n_labels:
                return E_LABEL_RANGE, t, lab, rows
            if code != OK:
                return code, t, 0, rows
            if c >= width:
                return E_CAPACITY, t, 0, rows
            out_labels[ri, c] = lab
            out_scores[ri, c] = s
            tmp[c] = lab
            c += 1
        if c < k:
            return E_TOO_FEW_TOKENS, line_start, c, rows
        if k > 1:
            heapsort(tmp, tmp[:0], 0, k)
            for r in range(1, k):
                if tmp[r] == tmp[r - 1]:
                    return E_LABEL_DUP, line_start, tmp[r], rows
        rows += 1
        p = _next_line(buf, p, end)
    return OK, end, 0, rows


@njit(nogil=True, cache=True)
def parse_dense(buf, start, end, n_rows, out):
    """Parse lines of exactly ``out.shape[1]`` blank-separated numbers into ``out``
    (float32, at most ``n_rows`` rows): DiSMEC++'s dense text matrix body.  Blank lines after
    ``n_rows`` rows are ignored; any other line there is an error.
    Returns (code, pos, aux, rows): aux the count of numbers on a short line."""
    d = out.shape[1]
    rows = 0
    p = start
    while p < end:
        line_start = p
        if rows >= n_rows:
            p = _skip_blanks(buf, p, end)
            if _at_eol(buf, p, end, False):
                p = _next_line(buf, p, end)
                continue
            return E_TOO_MANY_ROWS, line_start, 0, rows
        c = 0
        while True:
            p = _skip_blanks(buf, p, end)
            if _at_eol(buf, p, end, False):
                break
            t = p
            if c >= d:
                return E_TOO_MANY_TOKENS, t, c, rows
            x, p, code = _float32_token(buf, p, end)
            if code != OK:
                return code, t, 0, rows
            if rows < out.shape[0]:   # else a line the file's size says cannot be complete
                out[rows, c] = x
            c += 1
        if c < d:
            return E_TOO_FEW_TOKENS, line_start, c, rows
        rows += 1
        p = _next_line(buf, p, end)
    return OK, end, 0, rows


# --- formatting --------------------------------------------------------------------------------
@njit(nogil=True, cache=True)
def _write_uint(out, p, v):
    if v == 0:
        out[p] = 48
        return p + 1
    n = 0
    t = v
    while t > 0:
        n += 1
        t //= 10
    q = p + n
    while v > 0:
        q -= 1
        out[q] = 48 + v % 10
        v //= 10
    return p + n


@njit(nogil=True, cache=True)
def _digits(a, nd):
    """``a > 0`` rounded to ``nd`` significant digits: (m, e), a ~ m * 10**(e - nd + 1)."""
    e = int(np.floor(np.log10(a)))
    for _ in range(3):
        s = nd - 1 - e
        if s >= 0:
            if s <= 308:
                scaled = a * _POW10[s]
            else:
                scaled = (a * _POW10[308]) * _POW10[s - 308]
        else:
            scaled = a / _POW10[-s]
        m = np.int64(np.rint(scaled))
        if m >= _IPOW10[nd]:
            e += 1
        elif m < _IPOW10[nd - 1]:
            e -= 1
        else:
            return m, e
    return m, e


@njit(nogil=True, cache=True)
def write_float(out, p, x, is32, min_digits, max_digits):
    """Write finite ``x`` with the fewest digits in [min_digits, max_digits] that read
    back to the same value (float32 when ``is32``), or ``min_digits`` digits when
    ``min_digits == max_digits``.  Plain notation for 1e-5 <= |x| < 1e16 when at most 3
    zeros have to be appended to the digits, else ``d.ddde±x``.
    """
    if x == 0:
        out[p] = 48
        return p + 1
    if x < 0:
        out[p] = 45
        p += 1
        x = -x
    m = np.int64(0)
    e = 0
    for nd in range(min_digits, max_digits + 1):
        m, e = _digits(x, nd)
        if nd == max_digits:
            break
        back = _scale(m, e - nd + 1)
        if is32:
            if np.float32(back) == np.float32(x):
                break
        elif back == x:
            break
    # strip trailing zeros
    n = 0
    t = m
    while t > 0:
        n += 1
        t //= 10
    while m % 10 == 0 and n > 1:
        m //= 10
        n -= 1
    if -5 <= e < 16 and e < n + 3:
        if e >= n - 1:
            p = _write_uint(out, p, m)
            for _ in range(e - n + 1):
                out[p] = 48
                p += 1
        elif e >= 0:
            hi = m // _IPOW10[n - 1 - e]
            lo = m % _IPOW10[n - 1 - e]
            p = _write_uint(out, p, hi)
            out[p] = 46
            p += 1
            for r in range(n - 2 - e, -1, -1):
                out[p] = 48 + (lo // _IPOW10[r]) % 10
                p += 1
        else:
            out[p] = 48
            out[p + 1] = 46
            p += 2
            for _ in range(-e - 1):
                out[p] = 48
                p += 1
            p = _write_uint(out, p, m)
    else:
        lead = m // _IPOW10[n - 1]
        out[p] = 48 + lead
        p += 1
        if n > 1:
            out[p] = 46
            p += 1
            for r in range(n - 2, -1, -1):
                out[p] = 48 + (m // _IPOW10[r]) % 10
                p += 1
        out[p] = 101
        p += 1
        if e < 0:
            out[p] = 45
            p += 1
            e = -e
        p = _write_uint(out, p, e)
    return p


FLOAT_MAX_CHARS = 32  # bound on the characters written by write_float


@njit(nogil=True, cache=True)
def format_sparse(r0, r1, indptr, indices, data, lptr, labels, feat_offset, with_features,
                  is32, out):
    """Format rows ``[r0, r1)`` as XMC body lines into ``out``; returns bytes written.

    ``out`` must hold at least 2 bytes per row + 12 per label + (13 + FLOAT_MAX_CHARS) per
    feature.  A row without labels starts with a space (the XMC convention).
    """
    max_digits = 9 if is32 else 17
    p = 0
    for r in range(r0, r1):
        a = lptr[r]
        b = lptr[r + 1]
        for q in range(a, b):
            if q > a:
                out[p] = 44
                p += 1
            p = _write_uint(out, p, labels[q])
        if with_features:
            fa = indptr[r]
            fb = indptr[r + 1]
            if a == b and fa == fb:
                out[p] = 32
                p += 1
            for q in range(fa, fb):
                out[p] = 32
                p += 1
                p = _write_uint(out, p, indices[q] + feat_offset)
                out[p] = 58
                p += 1
                p = write_float(out, p, np.float64(data[q]), is32, 6, max_digits)
        out[p] = 10
        p += 1
    return p


@njit(nogil=True, cache=True)
def format_decisions(indptr, labels, scores, name_ptr, names, sep, out):
    """Format rows of variable length, ``label:score`` with 6 significant digits, entries
    separated by the byte ``sep``: row r is entries [indptr[r], indptr[r + 1]) of
    ``labels`` / ``scores``.  Without names (``name_ptr`` empty) a label is its id; with
    names, label ``l`` is the bytes ``names[name_ptr[l]:name_ptr[l + 1]]``."""
    named = name_ptr.shape[0] > 0
    p = 0
    for r in range(indptr.shape[0] - 1):
        for e in range(indptr[r], indptr[r + 1]):
            if e > indptr[r]:
                out[p] = sep
                p += 1
            if named:
                for b in range(name_ptr[labels[e]], name_ptr[labels[e] + 1]):
                    out[p] = names[b]
                    p += 1
            else:
                p = _write_uint(out, p, labels[e])
            out[p] = 58
            p += 1
            p = write_float(out, p, np.float64(scores[e]), True, 6, 6)
        out[p] = 10
        p += 1
    return p
