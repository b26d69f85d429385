"""Fuzzing every reader: hostile bytes either parse to a valid matrix or raise the
library's own error, with a location -- never another exception, a hang or an allocation
sized by a claim in the file.

What this adds to the property tests of tests/test_io.py (byte mutations of one fixed
file, round trips) and tests/test_model_format.py (one test per kind of tampering):

* a grammar-aware generator of XMC / libsvm text (valid and broken tokens, hostile
  header claims, CR/LF, tabs, comments) checked against an independent *reference
  parser* written from the grammar in ``headstart/io/xmc.py``: same accept/reject
  decision, same matrices, and the error names the same line;
* ``.npy`` files with generated headers (every dtype kind, byte orders, Fortran order,
  claimed shapes up to 10**18, truncated payloads);
* model manifests mutated structurally (any field replaced, removed or added) and shard
  archives with flipped bytes *and a recomputed checksum* (so the archive parser itself
  is exercised, not only the checksum);
* hostile size claims in every format, read in a subprocess whose address space is
  limited, so an attempt to allocate what the header claims fails the test;
* a bounded run of the atheris harness in fuzz/ (when atheris is installed).

See docs/robustness.md for the guarantees and the figures of the long fuzz run.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import headstart
from headstart.errors import DataFormatError, ModelFormatError
from headstart.io import (iter_xmc_chunks, read_dense_features, read_label_file, read_libsvm,
                          read_predictions, read_slice, read_xmc)
from headstart.model.format import load_model, read_manifest

REPO = Path(__file__).resolve().parent.parent
INDEX_MAX = 2147483646
MAX_DIM = INDEX_MAX + 1
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: HEADSTART_FUZZ_SCALE=100 multiplies every example count (the long run of docs/robustness.md)
SCALE = float(os.environ.get("HEADSTART_FUZZ_SCALE", "1"))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


# ----------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def time_limit(seconds: float = 10.0):
    """Fail (instead of hanging) when a Python-level loop runs away; a compiled kernel
    cannot be interrupted, the subprocess tests cover that case."""
    def boom(signum, frame):
        raise TimeoutError(f"reader took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def never_unpickle():
    """Any attempt to unpickle while loading a model fails the test."""
    import pickle
    from unittest import mock

    def refuse(*args, **kwargs):
        raise AssertionError("a model file was unpickled")

    with mock.patch.object(pickle, "load", refuse), mock.patch.object(pickle, "loads", refuse):
        yield


_SCRATCH = Path(tempfile.mkdtemp(prefix="headstart-fuzz-"))
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)


def put(data: bytes, name: str = "f.txt") -> Path:
    p = _SCRATCH / name
    p.write_bytes(data)
    return p


def assert_valid_csr(M, shape=None, dtype=np.float32) -> None:
    """Canonical CSR: consistent arrays, sorted unique indices, finite non-zero values."""
    assert isinstance(M, sp.csr_matrix), type(M)
    if shape is not None:
        assert M.shape == shape, (M.shape, shape)
    assert M.dtype == dtype
    M.check_format(full_check=True)
    assert M.has_canonical_format
    ip = M.indptr
    assert ip[0] == 0 and ip[-1] == M.nnz and np.all(np.diff(ip) >= 0)
    for r in range(M.shape[0]):
        idx = M.indices[ip[r]:ip[r + 1]]
        assert np.all(np.diff(idx) > 0)
    if M.nnz:
        assert M.indices.min() >= 0 and M.indices.max() < M.shape[1]
        assert np.all(np.isfinite(M.data)) and np.all(M.data != 0)


def assert_located(e: DataFormatError, path: Path, n_lines: int | None = None) -> None:
    """The error names the file, and (for content errors) a line that exists."""
    assert isinstance(e, DataFormatError)
    assert e.path == str(path)
    assert str(e).startswith(str(path))
    if e.line is not None:
        assert e.line >= 1
        if n_lines is not None:
            assert e.line <= n_lines + 1, (e.line, n_lines, str(e))
    if e.column is not None:
        assert e.column >= 1


def outcome(call, path: Path):
    """("ok", result) or ("err", DataFormatError); anything else propagates (a bug)."""
    try:
        with time_limit():
            return "ok", call(path)
    except DataFormatError as e:
        return "err", e


# ----------------------------------------------------------------------------- reference parser
class Reject(Exception):
    def __init__(self, line: int | None):
        super().__init__(line)
        self.line = line


_DIGITS = re.compile(rb"[0-9]+")
_NUMBER = re.compile(rb"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _eol(line: bytes, i: int, comments: bool) -> bool:
    if i >= len(line):
        return True
    c = line[i:i + 1]
    return (c == b"\r" and i == len(line) - 1) or (comments and c == b"#")


def _ws(line: bytes, i: int) -> bool:
    return i < len(line) and line[i:i + 1] in (b" ", b"\t")


def ref_line(line: bytes, *, feat_offset: int, d: int, L: int, comments: bool):
    """Labels and features of one non-blank line, or ValueError; ``d``/``L`` -1 = unbounded.

    Written from the grammar of headstart/io/xmc.py: labels first (checked token by
    token, then for repeats), then ``index:value`` tokens (checked token by token, then
    for repeats); NaN/inf literals and float32 overflow are errors, zeros are dropped
    after the repeat check.  Returns (labels, [(j, value)], max_j, max_label)."""
    i = 0
    labels: list[int] = []
    if not _ws(line, 0):
        while True:
            m = _DIGITS.match(line, i)
            if not m:
                raise ValueError("label syntax")
            v = int(m.group())
            i = m.end()
            if (L >= 0 and v >= L) or v > INDEX_MAX:
                raise ValueError("label range")
            if not (line[i:i + 1] == b"," or _eol(line, i, comments) or _ws(line, i)):
                raise ValueError("label syntax")
            labels.append(v)
            if line[i:i + 1] == b",":
                i += 1
                continue
            break
        if len(set(labels)) != len(labels):
            raise ValueError("label repeated")
    feats: list[tuple[int, np.float32]] = []
    while True:
        while _ws(line, i):
            i += 1
        if _eol(line, i, comments):
            break
        m = _DIGITS.match(line, i)
        if not m or line[m.end():m.end() + 1] != b":":
            raise ValueError("feature syntax")
        idx = int(m.group())
        i = m.end() + 1
        s = i + 1 if line[i:i + 1] in (b"+", b"-") else i
        if line[s:s + 1] in (b"n", b"N", b"i", b"I"):
            raise ValueError("nan/inf literal or syntax")
        m = _NUMBER.match(line, i)
        if not m:
            raise ValueError("value syntax")
        i = m.end()
        if not (_eol(line, i, comments) or _ws(line, i)):
            raise ValueError("value syntax")
        j = idx - feat_offset
        if j < 0 or (d >= 0 and j >= d) or j > INDEX_MAX:
            raise ValueError("feature range")
        with np.errstate(over="ignore"):
            val = np.float32(float(m.group()))
        if not np.isfinite(val):
            raise ValueError("overflow")
        feats.append((j, val))
    if len({j for j, _ in feats}) != len(feats):
        raise ValueError("feature repeated")
    maxj = max((j for j, _ in feats), default=-1)
    return sorted(labels), [(j, v) for j, v in feats if v != 0], maxj, max(labels, default=-1)


def _lines(body: bytes) -> list[bytes]:
    lines = body.split(b"\n")
    if body == b"" or body.endswith(b"\n"):
        lines = lines[:-1]
    return lines


def ref_xmc(raw: bytes, one_based: bool = False):
    """(n, d, L, rows) of an XMC file, or raise Reject(line)."""
    if not raw.strip():
        raise Reject(1)
    nl = raw.find(b"\n", 0, 1 << 16)
    if nl < 0 and len(raw) > 1 << 16:
        raise Reject(1)
    head = raw[:nl] if nl >= 0 else raw
    body = raw[nl + 1:] if nl >= 0 else b""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    toks = head.rstrip(b"\r").split()
    if len(toks) != 3 or not all(t.isdigit() for t in toks):
        raise Reject(1)
    n, d, L = (int(t) for t in toks)
    if d > MAX_DIM or L > MAX_DIM:
        raise Reject(1)
    rows = []
    lines = _lines(body)
    for k, ln in enumerate(lines):
        blank = ln in (b"", b"\r")
        if len(rows) >= n:
            if blank:
                continue
            raise Reject(2 + k)
        if blank:
            rows.append(([], []))
            continue
        try:
            labels, feats, _, _ = ref_line(ln, feat_offset=int(one_based), d=d, L=L, comments=False)
        except ValueError:
            raise Reject(2 + k) from None
        rows.append((labels, feats))
    if len(rows) != n:
        raise Reject(2 + len(lines))
    return n, d, L, rows


_SIGNED = re.compile(rb"[+-][0-9]+\Z")
_BINARY_LABEL = re.compile(rb"[+-]?[0-9]+")


def ref_binary_line(line: bytes, *, feat_offset: int):
    """A line of a binary (+1/-1) file: the label token +1, 1 (label 0) or -1 (none),
    then features as in ref_line; ValueError otherwise."""
    labels = []
    i = 0
    if not _ws(line, 0):
        m = _BINARY_LABEL.match(line)
        if not m or int(m.group().lstrip(b"+-")) != 1 or not (_eol(line, m.end(), True) or _ws(line, m.end())):
            raise ValueError("binary label")
        labels = [] if line.startswith(b"-") else [0]
        i = m.end()
    _, feats, mj, _ = ref_line(b" " + line[i:], feat_offset=feat_offset, d=-1, L=-1, comments=True)
    return labels, feats, mj, 0 if labels else -1


def ref_libsvm(raw: bytes, zero_based: bool = False, binary: bool = False):
    """(n, d, L, rows) of a libsvm file, or raise Reject(line).  A line rejected for a
    first token that is a signed integer (+1, -1, ...) makes the file binary: it is
    parsed again with ref_binary_line (as read_libsvm does)."""
    start = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    if not raw[start:].strip():
        # only blanks: empty, unless its lines are points without labels or features
        # (" ", as write_libsvm writes them); an empty file has no line to name
        try:
            got = _ref_libsvm_lines(raw, start, zero_based, binary)
        except Reject:
            raise Reject(1 if raw else None) from None
        if not got[0]:
            raise Reject(1 if raw else None)
        return got
    return _ref_libsvm_lines(raw, start, zero_based, binary)


def _ref_libsvm_lines(raw: bytes, start: int, zero_based: bool, binary: bool):
    rows, maxf, maxl = [], -1, -1
    off = 0 if zero_based else 1
    for k, ln in enumerate(_lines(raw[start:])):
        if _eol(ln, 0, True):
            continue
        try:
            if binary:
                labels, feats, mj, ml = ref_binary_line(ln, feat_offset=off)
            else:
                labels, feats, mj, ml = ref_line(ln, feat_offset=off, d=-1, L=-1, comments=True)
        except ValueError:
            first = re.split(rb"[ \t]", ln, maxsplit=1)[0]
            if first.endswith(b"\r"):
                first = first[:-1]
            if not binary and not _ws(ln, 0) and _SIGNED.match(first):
                return ref_libsvm(raw, zero_based, binary=True)
            raise Reject(1 + k) from None
        maxf, maxl = max(maxf, mj), max(maxl, ml)
        rows.append((labels, feats))
    return len(rows), maxf + 1, 1 if binary else maxl + 1, rows


def ref_matrices(n, d, L, rows):
    X = sp.lil_matrix((n, d), dtype=np.float32)
    Y = sp.lil_matrix((n, L), dtype=np.float32)
    for i, (labels, feats) in enumerate(rows):
        for j, v in feats:
            X[i, j] = v
        for lab in labels:
            Y[i, lab] = 1
    return X.tocsr(), Y.tocsr()


def assert_same_matrix(A, B) -> None:
    assert A.shape == B.shape
    A, B = A.tocsr(), B.tocsr()
    A.sort_indices()
    B.sort_indices()
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_allclose(A.data, B.data, rtol=2e-7, atol=0)


# ----------------------------------------------------------------------------- text generator
VALUES = [b"1", b"0", b"-0", b"2.5", b"-0.125", b".5", b"3.", b"+7", b"1e-3", b"1E+2", b"0.0", b"00012",
          b"1e-50", b"1e39", b"-1e39", b"3.4e38", b"1e400", b"12345678901234567890123", b"0.000001",
          b"nan", b"NaN", b"inf", b"-Infinity", b"1e", b"1e+", b"1.2.3", b".", b"-", b"+.5e-2", b"1.e5",
          b"x", b"1,5", b"", b"9" * 60]
IDS = st.one_of(st.integers(0, 12), st.sampled_from([INDEX_MAX, INDEX_MAX + 1, 10 ** 12, 10 ** 20]))
HEADER_DIMS = st.one_of(st.integers(0, 12), st.sampled_from([0, 1, MAX_DIM, MAX_DIM + 1, 10 ** 12]))


@st.composite
def feature_token(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.sampled_from([b"x", b":", b"1:", b":1", b"1::2", b"#", b"-1:2", b"1 :2", b"a:b",
                                     b"\r", b"\x00", b"\xff", b"1:2\r3", b"\xef\xbb\xbf"]))
    return b"%d:%s" % (draw(IDS), draw(st.sampled_from(VALUES)))


@st.composite
def text_line(draw, comments: bool) -> bytes:
    parts = []
    if draw(st.booleans()):  # a label list
        labels = draw(st.lists(IDS, max_size=4))
        text = b",".join(b"%d" % v for v in labels)
        pick = draw(st.integers(0, 9))
        if pick == 0:
            text = draw(st.sampled_from([b"1,", b",1", b"1,,2", b"-1", b"1.5", b"a", b"1:1", b"1,1"]))
        elif pick == 1:   # LIBLINEAR's binary labels, and near misses (libsvm reads them as binary)
            text = draw(st.sampled_from([b"+1", b"-1", b"1", b"+01", b"-2", b"+1,2", b"-1#", b"+"]))
        parts.append(text)
    else:
        parts.append(draw(st.sampled_from([b"", b" ", b"\t"])))
    for tok in draw(st.lists(feature_token(), max_size=5)):
        parts.append(draw(st.sampled_from([b" ", b"\t", b"  ", b""])) + tok)
    if comments and draw(st.integers(0, 5)) == 0:
        parts.append(b" # a comment 1:2")
    return b"".join(parts)


@st.composite
def text_file(draw, header: bool, comments: bool = False) -> bytes:
    lines = draw(st.lists(text_line(comments), max_size=6))
    if comments:
        for _ in range(draw(st.integers(0, 2))):
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from([b"", b"# c", b"\r", b"  "])))
    out = []
    if header:
        n = draw(st.one_of(st.just(len(lines)), st.integers(0, 8), st.sampled_from([10 ** 12, 10 ** 18])))
        head = b"%d %d %d" % (n, draw(HEADER_DIMS), draw(HEADER_DIMS))
        if draw(st.integers(0, 7)) == 0:
            head = draw(st.sampled_from([b"", b"1 2", b"1 2 3 4", b"-1 2 3", b"1 2 x", b"\xef\xbb\xbf" + head,
                                         b" " + head + b" \t", b"1\t2\t3", b"\x0b1 2 3"]))
        out.append(head)
    out += lines
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    text = eol.join(out)
    if draw(st.booleans()):
        text += eol
    if draw(st.integers(0, 5)) == 0:
        text += draw(st.sampled_from([b"\n", b"\n\n", b" \n", b"\r", b"1:1\n"]))
    return text


def _n_lines(raw: bytes) -> int:
    return raw.count(b"\n") + 1


# ----------------------------------------------------------------------------- text readers
@settings(max_examples=examples(300), **SETTINGS)
@given(text_file(header=True), st.booleans(), st.booleans())
def test_xmc_agrees_with_the_reference_parser(raw, one_based, gz):
    """read_xmc and iter_xmc_chunks accept exactly what the grammar accepts, return the
    same matrices as the reference parser, and reject at the same line."""
    path = put(gzip.compress(raw, mtime=0) if gz else raw, "x.txt.gz" if gz else "x.txt")
    try:
        expected = ("ok", ref_xmc(raw, one_based))
    except Reject as r:
        expected = ("err", r.line)
    got = outcome(lambda p: read_xmc(p, one_based=one_based), path)
    chunk_rows = 1 + len(raw) % 3
    chunks = outcome(lambda p: list(iter_xmc_chunks(p, chunk_rows=chunk_rows, one_based=one_based,
                                                    block_bytes=1)), path)
    assert got[0] == expected[0], (raw, expected, got)
    if got[0] == "ok":
        n, d, L, rows = expected[1]
        X, Y = got[1]
        assert_valid_csr(X, (n, d))
        assert_valid_csr(Y, (n, L))
        Xr, Yr = ref_matrices(n, d, L, rows)
        assert_same_matrix(X, Xr)
        assert_same_matrix(Y, Yr)
        assert chunks[0] == "ok", chunks
        if n:
            assert (sp.vstack([c[0] for c in chunks[1]]) != X).nnz == 0
            assert (sp.vstack([c[1] for c in chunks[1]]) != Y).nnz == 0
            assert all(c[0].shape[1] == d and c[1].shape[1] == L for c in chunks[1])
    else:
        assert_located(got[1], path, _n_lines(raw))
        assert got[1].line == expected[1], (raw, str(got[1]))
        assert chunks[0] == "err"
        assert_located(chunks[1], path, _n_lines(raw))
        assert chunks[1].line == expected[1], (raw, str(chunks[1]))


@settings(max_examples=examples(250), **SETTINGS)
@given(text_file(header=False, comments=True), st.booleans())
@example(b"\r\n\r\r\n", False)   # all blanks but a stray \r: an empty file, not a bad line 2
def test_libsvm_agrees_with_the_reference_parser(raw, zero_based):
    path = put(raw, "l.svm")
    try:
        expected = ("ok", ref_libsvm(raw, zero_based))
    except Reject as r:
        expected = ("err", r.line)
    got = outcome(lambda p: read_libsvm(p, zero_based=zero_based), path)
    assert got[0] == expected[0], (raw, expected, got)
    if got[0] == "ok":
        n, d, L, rows = expected[1]
        X, Y = got[1]
        assert_valid_csr(X, (n, d))
        assert_valid_csr(Y, (n, L))
        Xr, Yr = ref_matrices(n, d, L, rows)
        assert_same_matrix(X, Xr)
        assert_same_matrix(Y, Yr)
    else:
        assert_located(got[1], path, _n_lines(raw))
        assert got[1].line == expected[1], (raw, str(got[1]))


@settings(max_examples=examples(200), **SETTINGS)
@given(st.data())
def test_label_files_and_predictions_parse_or_raise_with_location(data):
    """Label files (both forms), read_slice and prediction files built from the same hostile tokens."""
    lines = data.draw(st.lists(st.one_of(
        st.lists(IDS, max_size=4).map(lambda v: b",".join(b"%d" % x for x in v)),
        st.lists(feature_token(), max_size=4).map(b" ".join)), max_size=5))
    n = data.draw(st.one_of(st.just(len(lines)), st.integers(0, 6), st.just(10 ** 12)))
    L = data.draw(HEADER_DIMS)
    k = data.draw(st.one_of(st.integers(0, 4), st.sampled_from([MAX_DIM, 10 ** 12])))
    body = b"\n".join(lines) + data.draw(st.sampled_from([b"", b"\n", b"\r\n"]))
    for raw, reader, width in ((b"%d %d\n" % (n, L) + body, read_label_file, 2),
                               (b"%d %d %d\n" % (n, k, L) + body, read_predictions, 3)):
        path = put(raw, "p.txt")
        got = outcome(reader, path)
        if got[0] == "err":
            assert_located(got[1], path, _n_lines(raw))
            continue
        assert n < 10 ** 12
        if reader is read_label_file:
            assert_valid_csr(got[1], (n, L))
        else:
            labels, scores = got[1]
            assert labels.shape == scores.shape == (n, k)   # k <= num_labels, or it is an error
            assert labels.dtype == np.int32 and scores.dtype == np.float32
            assert np.all(np.isfinite(scores))
            if labels.size:
                assert labels.min() >= 0 and labels.max() < L
                assert all(len(set(r)) == len(r) for r in labels.tolist())
    # read_slice: the label file with a .npy of (about) as many rows
    rows = data.draw(st.sampled_from([n, n + 1, max(n - 1, 0)])) if n < 100 else 3
    np.save(_SCRATCH / "s.npy", np.ones((rows, 2), dtype=np.float32))
    labels_path = put(b"%d %d\n" % (n, L) + body, "s.txt")
    got = outcome(lambda p: read_slice(p, labels_path), _SCRATCH / "s.npy")
    if got[0] == "ok":
        X, Y = got[1]
        assert X.shape == (rows, 2) and rows == n
        assert_valid_csr(Y, (n, L))
    else:
        assert got[1].path in (str(_SCRATCH / "s.npy"), str(labels_path))


# ----------------------------------------------------------------------------- .npy
def npy_bytes(descr: str, fortran: bool, shape, payload: bytes, version: int = 1) -> bytes:
    header = ("{'descr': %r, 'fortran_order': %s, 'shape': %r, }" % (descr, fortran, tuple(shape))).encode()
    pre = 10 if version == 1 else 12
    header += b" " * ((64 - (pre + len(header) + 1) % 64) % 64) + b"\n"
    size = len(header).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + size + header + payload


DESCRS = ["<f4", ">f4", "<f8", ">f8", "<f2", "<i1", "|u1", "<i8", ">u8", "|b1", "<c8", "<c16", "|O", "<U3",
          "|S2", "<m8", "<M8[s]", "|V4", "<f16", "[('a', '<f4')]"]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")   # numpy's memmap size check
@settings(max_examples=examples(200), **SETTINGS)
@given(st.sampled_from(DESCRS), st.booleans(),
       st.lists(st.one_of(st.integers(0, 5), st.sampled_from([10 ** 6, 10 ** 12, 10 ** 18, 2 ** 32, 2 ** 62, -1])),
                min_size=0, max_size=3),
       st.integers(0, 200), st.sampled_from([1, 2]), st.binary(max_size=16), st.integers(0, 3))
def test_npy_features_parse_or_raise(descr, fortran, shape, payload_len, version, noise, special):
    """Generated .npy headers: any dtype, order, claimed shape (up to 10**18 rows) and
    payload length; the result is a finite C-contiguous float32 2-d array or a
    DataFormatError naming the file -- in bounded time, without allocating the claim."""
    rng = np.random.default_rng(payload_len)
    payload = rng.integers(0, 256, payload_len, dtype=np.uint8).tobytes()
    if special == 1:     # NaN / inf payload values
        payload = np.array([np.nan, np.inf, 1.0, -np.inf] * 8, dtype="<f4").tobytes()[:payload_len]
    raw = npy_bytes(descr, fortran, shape, payload, version)
    if special == 2:     # a corrupted header
        raw = raw[:8] + noise + raw[8 + len(noise):]
    elif special == 3:   # truncated anywhere
        raw = raw[:len(noise) * 8]
    path = put(raw, "f.npy")
    got = outcome(read_dense_features, path)
    if got[0] == "err":
        assert_located(got[1], path)
        return
    X = got[1]
    assert isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float32
    assert X.flags.c_contiguous and np.all(np.isfinite(X)) and X.shape[1] <= MAX_DIM


def test_npy_claiming_1e18_empty_rows_is_read_in_bounded_time():
    """Regression (found by the test above): a header (10**18, 0) made the finiteness
    check loop 10**11 times; a header (0, 10**12) claimed more columns than int32 ids."""
    with time_limit(5):
        X = read_dense_features(put(npy_bytes("<f4", False, (10 ** 18, 0), b""), "e.npy"))
    assert X.shape == (10 ** 18, 0)
    with pytest.raises(DataFormatError, match="columns exceed"):
        read_dense_features(put(npy_bytes("<f4", False, (0, 10 ** 12), b""), "w.npy"))


def test_slice_reader_mismatches(tmp_path):
    X = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "Y.txt").write_bytes(b"2 4\n0,1\n3\n")
    with pytest.raises(DataFormatError, match="3 points but the label file") as e:
        read_slice(tmp_path / "X.npy", tmp_path / "Y.txt")
    assert_located(e.value, tmp_path / "X.npy")


# ----------------------------------------------------------------------------- model manifests
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    X = sp.random(40, 12, density=0.3, format="csr", dtype=np.float32, random_state=1)
    Y = sp.csr_matrix((rng.random((40, 6)) < 0.3).astype(np.float32))
    path = tmp_path_factory.mktemp("fuzz-model") / "model"
    headstart.OvAClassifier(threads=1, tfidf=True).fit(X, Y).save(path, shard_size=2)
    return path


JSON_VALUES = [None, True, False, 0, -1, 1, 2, 6, 12, 2 ** 31, 2 ** 63, 10 ** 12, 1.5, float("nan"),
               float("inf"), "", "x", [], {}, "shards/labels-0000000-0000001.npz", "../../etc/passwd",
               "/etc/passwd", "a" * 64, "0" * 64, [1], {"a": 1}, 1e308, "headstart-model"]


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for key, v in obj.items():
            yield from _paths(v, prefix + (key,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


def _assert_loaded_model_is_valid(model, manifest_path: Path) -> None:
    W = model.weights
    assert isinstance(W, sp.csr_matrix)
    W.check_format(full_check=True)
    assert W.shape[1] == model.n_features <= MAX_DIM
    assert np.all(np.isfinite(W.data)) and np.all(np.isfinite(model.intercept))
    assert model.intercept.shape == (W.shape[0],)
    assert model.first_label + W.shape[0] <= model.label_space <= MAX_DIM


@settings(max_examples=examples(150), **SETTINGS)
@given(st.data())
def test_mutated_manifest_loads_or_is_refused(model_dir, data):
    """Any field replaced by a hostile value, removed, or an unknown one added; or random
    bytes flipped: load_model returns a valid model or raises ModelFormatError."""
    original = json.loads((model_dir / "manifest.json").read_text())
    m = copy.deepcopy(original)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = list(_paths(m))
        where = data.draw(st.sampled_from(paths))
        action = data.draw(st.sampled_from(["set", "set", "delete", "add"]))
        if not where:
            if action == "set":
                m = copy.deepcopy(data.draw(st.sampled_from(JSON_VALUES)))
            continue
        parent = m
        for key in where[:-1]:
            parent = parent[key]
        if action == "set":
            parent[where[-1]] = copy.deepcopy(data.draw(st.sampled_from(JSON_VALUES)))
        elif action == "delete":
            del parent[where[-1]]
        elif isinstance(parent[where[-1]], dict):
            parent[where[-1]]["unexpected"] = 1
        elif isinstance(parent[where[-1]], list):
            parent[where[-1]].append(copy.deepcopy(data.draw(st.sampled_from(JSON_VALUES))))
    raw = bytearray(json.dumps(m).encode())
    for _ in range(data.draw(st.integers(0, 2))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    work = _SCRATCH / "mmodel"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(model_dir, work)
    (work / "manifest.json").write_bytes(bytes(raw))
    allow_gaps = data.draw(st.booleans())
    try:
        with time_limit(), never_unpickle():
            model = load_model(work, allow_gaps=allow_gaps)
    except ModelFormatError as e:
        assert str(work) in str(e)
        return
    _assert_loaded_model_is_valid(model, work / "manifest.json")


@settings(max_examples=examples(120), **SETTINGS)
@given(st.data())
def test_corrupted_shard_with_matching_checksum_is_refused_or_valid(model_dir, data):
    """Flip bytes of a shard or an extra file and write its new sha256 into the manifest
    (a deliberate forgery): the archive parser and the array checks must still refuse
    it or give a valid model, and nothing is unpickled."""
    work = _SCRATCH / "smodel"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(model_dir, work)
    m = json.loads((work / "manifest.json").read_text())
    targets = [("shard", i) for i in range(len(m["shards"]))] + [("extra", k) for k in m["extra_files"]]
    kind, key = data.draw(st.sampled_from(targets))
    rel = m["shards"][key]["file"] if kind == "shard" else key
    raw = bytearray((work / rel).read_bytes())
    how = data.draw(st.sampled_from(["flip", "truncate", "append"]))
    if how == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    elif how == "truncate":
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    else:
        raw += data.draw(st.binary(min_size=1, max_size=64))
    (work / rel).write_bytes(bytes(raw))
    digest = hashlib.sha256(bytes(raw)).hexdigest()
    if kind == "shard":
        m["shards"][key]["sha256"] = digest
    else:
        m["extra_files"][key] = digest
    (work / "manifest.json").write_text(json.dumps(m))
    try:
        with time_limit(), never_unpickle():
            model = load_model(work)
    except ModelFormatError as e:
        assert str(work) in str(e)
        return
    _assert_loaded_model_is_valid(model, work / "manifest.json")


def test_manifest_claiming_huge_dimensions_is_refused(model_dir, tmp_path):
    """Regression (found by fuzzing): n_features or label_space of 10**12 in a 1 KB
    manifest made loading (allow_gaps) and prediction allocate 7 TiB."""
    for key in ("n_features", "label_space"):
        work = tmp_path / key
        shutil.copytree(model_dir, work)
        m = json.loads((work / "manifest.json").read_text())
        m[key] = 10 ** 12
        (work / "manifest.json").write_text(json.dumps(m))
        with pytest.raises(ModelFormatError, match=f"{key}' is 1000000000000, more than the supported"):
            read_manifest(work)


def _forge(work: Path, rel: str, raw: bytes) -> None:
    """Replace a file of the model directory and write its sha256 into the manifest."""
    (work / rel).write_bytes(raw)
    m = json.loads((work / "manifest.json").read_text())
    digest = hashlib.sha256(raw).hexdigest()
    if rel in m["extra_files"]:
        m["extra_files"][rel] = digest
    else:
        next(s for s in m["shards"] if s["file"] == rel)["sha256"] = digest
    (work / "manifest.json").write_text(json.dumps(m))


def _zip(members: dict[str, bytes], compression=0) -> bytes:
    import zipfile

    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return b.getvalue()


@pytest.mark.parametrize("forgery", ["huge claim", "huge claim, deflated", "encrypted flag", "unknown compression",
                                     "zip version", "not an npy member"])
def test_forged_archive_members_are_refused(model_dir, tmp_path, forgery):
    """Regression (found by the forgery fuzz above): a member header claiming 10**11
    values made numpy allocate 373 GiB; zipfile's NotImplementedError / RuntimeError
    escaped.  All are ModelFormatError now, nothing is allocated or unpickled."""
    work = tmp_path / "m"
    shutil.copytree(model_dir, work)
    normalize = npy_bytes("|b1", False, (), b"\x00")
    if forgery == "huge claim":
        raw = _zip({"normalize.npy": normalize, "idf.npy": npy_bytes("<f4", False, (10 ** 11,), b"\0" * 16)})
    elif forgery == "huge claim, deflated":   # (deflated members may expand 1032-fold, no more)
        raw = _zip({"normalize.npy": normalize, "idf.npy": npy_bytes("<f4", False, (10 ** 11,), b"\0" * 16)}, 8)
    elif forgery == "not an npy member":
        raw = _zip({"normalize.npy": normalize, "idf.npy": b"not an array"})
    else:
        raw = bytearray(_zip({"normalize.npy": normalize, "idf.npy": npy_bytes("<f4", False, (12,), b"\0" * 48)}))
        cd = raw.rfind(b"PK\x01\x02")            # central directory entry of the last member
        if forgery == "encrypted flag":
            raw[cd + 8] |= 1
        elif forgery == "unknown compression":
            raw[cd + 10] = 99
        else:
            raw[cd + 6] = 64                      # "version needed to extract" 6.4
        raw = bytes(raw)
    _forge(work, "preprocessing.npz", raw)
    with never_unpickle(), pytest.raises(ModelFormatError, match="preprocessing.npz"):
        load_model(work)


# ----------------------------------------------------------------------------- hostile claims, memory-capped
_CLAIMS = r"""
import json, os, resource, shutil, sys
import numpy as np
from pathlib import Path
from headstart.errors import DataFormatError, ModelFormatError
from headstart.io import iter_xmc_chunks, read_dense_features, read_label_file, read_libsvm, read_predictions, read_xmc
from headstart.model.format import load_model
d = Path(sys.argv[1])
def put(name, data):
    (d / name).write_bytes(data)
    return d / name
def npy(descr, shape, payload=b""):
    h = ("{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (descr, shape)).encode()
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + payload
cases = [
    (read_xmc, put("a.txt", b"1000000000000 2147483647 2147483647\n0 1:1\n")),
    (lambda p: list(iter_xmc_chunks(p)), d / "a.txt"),
    (read_xmc, put("b.txt", b"1000000000000000000 5 5\n" + b"\n" * 100)),
    (read_libsvm, put("c.svm", b"2147483646 2147483647:1\n")),
    (read_label_file, put("d.txt", b"1000000000000 2147483647\n0\n")),
    (read_predictions, put("e.txt", b"1000000000000 2147483647 2147483647\n0:1\n")),
    (read_predictions, put("f.txt", b"3 2147483647 2147483647\n" + b"\n" * 3)),
    (read_dense_features, put("g.npy", npy("<f4", (1000000, 1000000)))),
    (read_dense_features, put("h.npy", npy("<f8", (10**18, 0)))),
    (read_dense_features, put("i.npy", npy("<f8", (10**12, 10**6)))),
]
src = Path(sys.argv[2])
for key, value in (("n_features", 10**12), ("label_space", 10**12), ("n_features", 2**31 - 1)):
    work = d / f"model-{key}-{value}"
    shutil.copytree(src, work)
    m = json.loads((work / "manifest.json").read_text())
    m[key] = value
    (work / "manifest.json").write_text(json.dumps(m))
    cases.append((lambda p: load_model(p, allow_gaps=True), work))
import hashlib, io, zipfile
work = d / "model-forged-npz"
shutil.copytree(src, work)
b = io.BytesIO()
with zipfile.ZipFile(b, "w") as z:
    z.writestr("normalize.npy", npy("|b1", (), b"\x00"))
    z.writestr("idf.npy", npy("<f4", (10**11,), b"\x00" * 16))
(work / "preprocessing.npz").write_bytes(b.getvalue())
m = json.loads((work / "manifest.json").read_text())
m["extra_files"]["preprocessing.npz"] = hashlib.sha256(b.getvalue()).hexdigest()
(work / "manifest.json").write_text(json.dumps(m))
cases.append((load_model, work))
for reader, path in cases:      # warm up (compile / load caches) before the limit
    try:
        reader(path)
    except (DataFormatError, ModelFormatError):
        pass
    except MemoryError:
        pass
vm = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
bad = []
for reader, path in cases:
    try:
        reader(path)        # a valid file (ids at the int32 limit) may be read: it is small
    except (DataFormatError, ModelFormatError):
        pass
    except BaseException as e:
        bad.append(f"{path.name}: {type(e).__name__}: {e}")
print("\n".join(bad) or "OK")
"""


def test_hostile_size_claims_never_allocate(model_dir, tmp_path):
    """Headers and manifests claiming 10**12 - 10**18 rows, 2**31 features/labels/k or
    10**12 x 10**6 arrays, read with the address space capped 256 MB above the process's
    size: every one is refused with the library's error, none tries to allocate."""
    r = subprocess.run([sys.executable, "-c", _CLAIMS, str(tmp_path), str(model_dir)], capture_output=True,
                       text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "OK", r.stdout


# ----------------------------------------------------------------------------- atheris
def test_bounded_atheris_run(tmp_path):
    """The coverage-guided harness of fuzz/ for a few thousand inputs (about 20 s):
    no reader raises anything but the library's errors."""
    pytest.importorskip("atheris")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONHASHSEED="0")
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "fuzz" / "corpus", corpus)
    proc = subprocess.Popen([sys.executable, str(REPO / "fuzz" / "fuzz_readers.py"), "-runs=3000",
                             "-max_total_time=20", "-seed=1", f"-artifact_prefix={tmp_path}/", "-print_final_stats=1",
                             str(corpus)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for base in ("/dev/shm", tempfile.gettempdir()):   # the harness's scratch directory
            shutil.rmtree(Path(base) / f"headstart-atheris-{proc.pid}", ignore_errors=True)
    assert proc.returncode == 0, err[-4000:]
    m = re.search(r"stat::number_of_executed_units:\s*(\d+)", err)
    assert m and int(m.group(1)) >= 500, err[-2000:]
