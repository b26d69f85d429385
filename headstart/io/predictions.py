"""Top-k prediction files.

Format::

    num_points k num_labels
    label:score label:score ...        <- exactly k tokens per line, in the given order

Thresholded decisions (:class:`DecisionWriter`, ``headstart predict --threshold``) have
the layout of a label file (``headstart.io.read_label_file`` reads them as 0/1 labels)::

    num_points num_labels
    label:score label:score ...        <- every label scoring above the threshold, best first

DiSMEC++'s ``predict`` writes the same lines under a header of two numbers,
``num_points k`` (its src/io/prediction.cpp): :func:`read_predictions` reads that too,
with no label count of its own (the ids are then checked against the test data's), and
:class:`PredictionWriter` writes it with ``header="dismec"`` (``headstart predict
--header dismec``).  That is also the header for pyxclib's ``read_sparse_file`` (the
field's evaluation scripts), which takes exactly two numbers from the first line.

With label names (``names=`` :func:`read_label_names`, ``headstart predict --label-names``)
a token is ``name:score`` (the score is what follows the last colon) and the tokens of a
line are separated by a blank -- with ``header="none"`` the file is then laid out as
LibMultiLabel's ``--predict_out_path`` -- or by a tab when a name holds whitespace.  Such
a file is for people and other tools: :func:`read_predictions` reads ids.

Scores are written with 6 significant digits.  Label ids are 0-based, in
``[0, num_labels)``, distinct within a line, and ``k <= num_labels``.  A file written by
:class:`PredictionWriter` without a known row count spools the lines to a temporary file
and writes the header, with the final count, before them at the end.  A name ending in ``.gz`` is gzip-compressed; reading detects
gzip by its magic bytes.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import shutil
import tempfile

import numpy as np

from ..errors import DataFormatError, ParameterError
from . import _kernels as K
from ._common import (HEADER_LIMIT, MAX_DIM, SparseSpec, header_ints, locate, parse_header, read_bytes,
                      sparse_error, token_at, too_few_rows, _show)
from .atomic import atomic_write

log = logging.getLogger(__name__)

PRED_HEADER = ("num_points", "k", "num_labels")
DISMEC_PRED_HEADER = ("num_points", "k")
#: top-k file headers: ours, "num_points k num_labels"; DiSMEC++'s, "num_points k"; none
#: (LibMultiLabel's files: the lines only)
HEADERS = ("headstart", "dismec", "none")
_BLANKS = np.array([32, 11, 12], dtype=np.uint8)   # whitespace a label name may hold (not tab, CR, LF)

__all__ = ["write_predictions", "read_predictions", "PredictionWriter", "DecisionWriter"]


def read_predictions(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a predictions file: ``(labels int32 (n, k), scores float32 (n, k))``.

    Every line must have exactly ``k`` tokens ``label:score`` (the header's k); labels in
    ``[0, num_labels)`` and distinct within the line; scores finite.  Token order is kept.
    Errors are :class:`DataFormatError` with the line number (header = line 1).  A header
    ``num_points k`` (DiSMEC++'s) bounds the labels by the int32 ids only:
    :func:`prediction_label_space` is then None.
    """
    raw = read_bytes(path)
    first_line = _header_line(raw)
    if b":" in first_line:
        # no header (LibMultiLabel's files, '--header none'): k is the first line's token
        # count, the rows are the lines
        body, line1 = 0, 1
        k = len(first_line.split())
        # (blank lines at the end are no rows, as after a header's count: helper-49)
        text = raw.rstrip(b" \t\r\n")
        n, L = text.count(b"\n") + 1, MAX_DIM
    else:
        names = DISMEC_PRED_HEADER if header_ints(first_line, 2) is not None else PRED_HEADER
        vals, body = parse_header(raw, path, names)
        n, k, L = vals if len(vals) == 3 else (*vals, MAX_DIM)
        line1 = 2
    if k > L:
        raise DataFormatError(f"header k = {k} exceeds num_labels = {L}", path, 1,
                              token=str(k))
    buf = np.frombuffer(raw, dtype=np.uint8)
    n_nl, n_colon, _ = K.count_bytes(buf, body, len(buf))
    # rows * k tokens need rows * k colons: size from the content, never from the header
    cap = min(n, n_nl + 1)
    if k > 0:
        cap = min(cap, n_colon // k)
    width = min(k, n_colon)   # == k whenever cap > 0
    labels = np.empty((cap, k), dtype=np.int32)
    scores = np.empty((cap, k), dtype=np.float32)
    tmp = np.empty(width, dtype=np.int64)
    code, pos, aux, rows = K.parse_predictions(buf, body, len(buf), k, L, n, labels, scores,
                                               False, tmp)
    if code == K.E_CAPACITY:
        # The content cannot hold n complete rows.  Find the first bad line (or learn
        # that the file is merely short) by validating the rest without storing it.
        scratch_l = np.empty((1, width), dtype=np.int32)
        scratch_s = np.empty((1, width), dtype=np.float32)
        code, pos, aux, more = K.parse_predictions(buf, pos, len(buf), k, L, n - rows,
                                                   scratch_l, scratch_s, True, tmp)
        if code == K.OK:
            rows += more   # necessarily < n: reported as "file ends after ..." below
    if code != K.OK:
        raise _pred_error(code, pos, aux, buf, body, path, k, L, n, line1)
    if rows != n:
        nl = raw.count(b"\n", body) + (1 if len(raw) > body and not raw.endswith(b"\n") else 0)
        raise too_few_rows(path, rows, n, line1 + nl, "row")
    return labels, scores


def prediction_label_space(line: bytes) -> int | None:
    """num_labels of a predictions file's header line, or None for DiSMEC++'s
    ``num_points k`` (and a line that is no header)."""
    vals = header_ints(line, 3)
    return None if vals is None else vals[2]


def _header_line(raw: bytes) -> bytes:
    end = raw.find(b"\n", 0, HEADER_LIMIT)
    return raw[:end] if end >= 0 else raw[:HEADER_LIMIT]


def _pred_error(code, pos, aux, buf, start, path, k, L, n, line1: int = 2) -> DataFormatError:
    line, col, _ = locate(buf, start, pos, line1)
    if code == K.E_TOO_MANY_TOKENS:
        return DataFormatError(f"more than k = {k} predictions on a line", path, line, col,
                               _show(token_at(buf, pos)))
    if code == K.E_TOO_FEW_TOKENS:
        return DataFormatError(f"{aux} predictions on a line, expected k = {k}", path, line, 1)
    spec = SparseSpec(has_labels=False, n_features=L, n_labels=L, max_rows=n, what="row",
                      feature_word="prediction", label_word="label id", header_rows=n)
    if code == K.E_LABEL_RANGE:
        tok = token_at(buf, pos)
        return DataFormatError(f"label id {_show(tok.partition(b':')[0])} out of range "
                               f"[0, {L})", path, line, col, _show(tok))
    return sparse_error(code, pos, aux, buf, start, spec, path, line1)


def _check_block(labels, scores, k: int, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    labels = np.asarray(labels)
    scores = np.asarray(scores)
    if labels.ndim != 2 or labels.shape != scores.shape or labels.shape[1] != k:
        raise DataFormatError(f"labels and scores must both have shape (rows, {k}); got "
                              f"{labels.shape} and {scores.shape}")
    if labels.dtype.kind not in "iu":
        raise DataFormatError(f"labels must be integers, not {labels.dtype}")
    if labels.size and (labels.min() < 0 or labels.max() >= n_labels):
        raise DataFormatError(f"label ids must be in [0, {n_labels})")
    if k > 1:
        s = np.sort(labels, axis=1)
        if np.any(s[:, 1:] == s[:, :-1]):
            raise DataFormatError("a label appears twice in one row of predictions")
    if scores.dtype.kind not in "fiub":
        raise DataFormatError(f"scores must be numbers, not {scores.dtype}")
    scores = scores.astype(np.float32, copy=False)
    if not np.all(np.isfinite(scores)):
        raise DataFormatError("scores must be finite (NaN or infinity found)")
    return labels.astype(np.int64, copy=False), scores


_NO_NAMES = np.zeros(0, dtype=np.int64)


class PredictionWriter:
    """Stream top-k predictions into a file, atomically.

    ::

        with PredictionWriter("pred.txt", k=5, n_labels=L) as w:
            for X_chunk, _ in iter_xmc_chunks("test.txt.gz"):
                labels, scores = model.topk(X_chunk, 5)
                w.write(labels, scores)

    The output is written to a temporary file in the destination's directory and renamed
    to ``path`` when the ``with`` block (or :meth:`close`) completes; on an exception
    (or :meth:`abort`) the temporary file is removed and nothing appears at ``path``.
    ``n_rows``, when given, is written into the header directly and checked at close;
    otherwise (and for a ``.gz`` name) the body is spooled to a temporary file and written
    after the header, with the final count, at close.
    ``header``: ``"headstart"`` (``num_points k num_labels``), ``"dismec"``
    (``num_points k``, DiSMEC++'s; pyxclib's reader takes exactly two numbers) or
    ``"none"`` (the lines only, as LibMultiLabel writes them).
    """

    def __init__(self, path, k: int, n_labels: int, n_rows: int | None = None, names=None,
                 header: str = "headstart"):
        k = int(k)
        n_labels = int(n_labels)
        if k < 0 or n_labels < 0 or k > n_labels:
            raise DataFormatError(f"need 0 <= k <= n_labels, got k = {k}, n_labels = {n_labels}")
        if header not in HEADERS:
            raise ParameterError(f"parameter header must be one of {', '.join(HEADERS)}, got {header!r}")
        self.header = header
        self.path = os.fspath(path)
        self.k = k
        self.n_labels = n_labels
        self.n_rows = None if n_rows is None else int(n_rows)
        self.rows = 0
        if names is not None and names[0].size != n_labels + 1:
            raise DataFormatError(f"{names[0].size - 1} label names for {n_labels} labels")
        self.names = names
        self._name_bytes = None if names is None else np.diff(names[0])
        # entries separated by a blank, as LibMultiLabel's and DiSMEC++'s files are, unless a
        # name holds whitespace: then by a tab (names never hold one, read_label_names)
        self.separator = 32 if names is None or not np.isin(names[1], _BLANKS).any() else 9
        self._gz = self.path.lower().endswith(".gz")
        self._closed = False
        # the body goes to an anonymous temporary file, written after its header at close,
        # where the file is compressed or its row count is not known yet (a libsvm input has
        # no header): the header is then written final, never padded for a rewrite in place
        # (helper-49, -102: a reader splitting the first line on ' ' failed on the padding)
        self._spooled = self._gz or (self.n_rows is None and self._header(0) != b"")
        if self._spooled:
            self._body = tempfile.TemporaryFile(dir=os.path.dirname(os.path.abspath(self.path)))
            self._f = self._body
        else:
            self._ctx = atomic_write(self.path, "wb")
            self._f = self._ctx.__enter__()
            self._f.write(self._header(self.n_rows))

    def _header(self, n: int | None) -> bytes:
        if self.header == "none":
            return b""
        text = f"{n if n is not None else 0} {self.k}"
        text = (text if self.header == "dismec" else f"{text} {self.n_labels}").encode()
        return text + b"\n"

    def write(self, labels, scores) -> None:
        """Append rows: ``labels`` integer (rows, k), ``scores`` float (rows, k)."""
        if self._closed:
            raise ValueError("write to a closed PredictionWriter")
        lab, sc = _check_block(labels, scores, self.k, self.n_labels)
        if lab.shape[0] == 0:
            return
        longest = 10 if self.names is None else int(self._name_bytes.max(initial=0))
        step = max(1, (32 << 20) // (self.k * (longest + 2 + K.FLOAT_MAX_CHARS) + 1))
        for r0 in range(0, lab.shape[0], step):
            lb = np.ascontiguousarray(lab[r0:r0 + step])
            sb = np.ascontiguousarray(sc[r0:r0 + step]).reshape(-1)
            self._format(np.arange(lb.shape[0] + 1, dtype=np.int64) * self.k, lb.reshape(-1), sb)
        self.rows += lab.shape[0]

    def _format(self, indptr, labels, scores) -> None:
        """Write rows ``[indptr[r], indptr[r + 1])`` of ``labels`` / ``scores``; the buffer
        holds exactly the worst case of these entries (a label's id or name, ':', the
        score, a separator; a newline per row)."""
        label_bytes = 10 * labels.size if self.names is None else int(self._name_bytes[labels].sum())
        out = np.empty(label_bytes + labels.size * (2 + K.FLOAT_MAX_CHARS) + indptr.size, dtype=np.uint8)
        name_ptr, names = self.names if self.names is not None else (_NO_NAMES, _NO_NAMES.view(np.uint8))
        used = K.format_decisions(indptr, labels, scores, name_ptr, names, np.uint8(self.separator), out)
        self._f.write(out[:used].tobytes())

    def close(self) -> None:
        """Finish the file and move it into place."""
        if self._closed:
            return
        try:
            if self.n_rows is not None and self.rows != self.n_rows:
                raise DataFormatError(f"PredictionWriter: {self.rows} rows written but "
                                      f"n_rows = {self.n_rows} was announced", self.path)
            if self._spooled:
                with atomic_write(self.path, "wb") as raw:
                    with (gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0)
                          if self._gz else contextlib.nullcontext(raw)) as out:
                        out.write(self._header(self.rows))
                        self._body.seek(0)
                        shutil.copyfileobj(self._body, out, 1 << 20)
                self._body.close()
            else:
                self._ctx.__exit__(None, None, None)
        except BaseException as e:
            self._closed = True
            self._discard(e)
            self._name(e)
            raise
        self._closed = True

    def _name(self, e: BaseException | None) -> None:
        """An OSError met writing (a full disk: ENOSPC on the temporary file) names the
        file being written, as the trainer's do (helper-120: "No space left on device"
        alone)."""
        if isinstance(e, OSError) and not getattr(e, "filename", None):
            e.filename = self.path

    def _discard(self, exc: BaseException | None) -> None:
        if self._spooled:
            self._body.close()
        else:
            try:
                exc = exc or RuntimeError("PredictionWriter aborted")
                self._ctx.__exit__(type(exc), exc, exc.__traceback__)
            except BaseException:
                pass

    def abort(self) -> None:
        """Drop everything written so far; nothing appears at ``path``."""
        if not self._closed:
            self._closed = True
            self._discard(None)

    def __enter__(self) -> "PredictionWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
            self._name(exc)

    def __del__(self):
        try:
            if not self._closed:
                self.abort()
        except Exception:
            pass


class DecisionWriter(PredictionWriter):
    """Stream thresholded decisions into a file, atomically (as :class:`PredictionWriter`):
    per instance, every label with its score, best score first (then lower label).

    ::

        with DecisionWriter("dec.txt", n_labels=L) as w:
            w.write(predict_above(model, X, 0.0, return_scores=True))
    """

    def __init__(self, path, n_labels: int, n_rows: int | None = None, names=None):
        super().__init__(path, 0, n_labels, n_rows, names)

    def _header(self, n: int | None) -> bytes:
        return f"{n if n is not None else 0} {self.n_labels}".encode() + b"\n"

    def write(self, D) -> None:
        """Append the rows of ``D`` (scipy sparse, n_labels columns): its stored entries are
        the decisions, their values the scores."""
        if self._closed:
            raise ValueError("write to a closed DecisionWriter")
        import scipy.sparse as sp

        if not sp.issparse(D) or D.shape[1] != self.n_labels:
            raise DataFormatError(f"decisions must be a sparse matrix of {self.n_labels} columns, got "
                                  f"{type(D).__name__} of shape {getattr(D, 'shape', None)}")
        D = sp.csr_matrix(D)
        n = D.shape[0]
        if n == 0:
            return
        scores = D.data.astype(np.float32)
        if not np.all(np.isfinite(scores)):
            raise DataFormatError("decision scores must be finite")
        rows = np.repeat(np.arange(n), np.diff(D.indptr))
        order = np.lexsort((D.indices, -scores, rows))    # per row: best score first, then lower label
        labels = D.indices[order].astype(np.int64)
        scores = scores[order]
        self._format(D.indptr.astype(np.int64), labels, scores)
        self.rows += n


def read_label_names(path, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """Label names for :class:`PredictionWriter`: the name of label id ``i`` is line
    ``i + 1`` of ``path`` (UTF-8, a byte-order mark ignored, CRLF or LF, gzip allowed; the
    XMC repository's label map, or the ``labels.txt`` of a text vectorizer -- whose
    directory may be given instead), exactly ``n_labels`` lines.  A name must not hold a
    tab (the separator of named predictions) or a carriage return; an empty line is an
    empty name (with a warning).  Returns ``(offsets,
    bytes)``: name ``i`` is ``bytes[offsets[i]:offsets[i + 1]]``."""
    import codecs

    if os.path.isdir(path):
        path = os.path.join(path, "labels.txt")
    raw = read_bytes(path)
    check = codecs.getincrementaldecoder("utf-8")()
    chunk = 1 << 24      # validated in pieces: the decoded text is never kept
    for at in range(0, max(len(raw), 1), chunk):
        try:
            check.decode(raw[at:at + chunk], final=at + chunk >= len(raw))
        except UnicodeDecodeError as e:
            raise DataFormatError("label names must be UTF-8 text", path,
                                  raw.count(b"\n", 0, at + e.start) + 1) from None
    buf = np.frombuffer(raw, dtype=np.uint8)
    body = 3 if raw.startswith(codecs.BOM_UTF8) else 0
    ends = np.flatnonzero(buf == 10)
    if buf.size > body and buf[-1] != 10:
        ends = np.append(ends, buf.size)       # a last line without its newline
    if ends.size != n_labels:
        blank = ends.size == n_labels + 1 and ends.size >= 2 and raw[ends[-2] + 1:ends[-1]] in (b"", b"\r")
        raise DataFormatError(f"{ends.size} label names (lines) for a model of {n_labels} labels"
                              + ("; the last line is blank: remove it" if blank else ""), path)
    starts = np.concatenate([[body], ends[:-1] + 1]).astype(np.int64)
    cr = (ends > starts) & (buf[np.maximum(ends - 1, 0)] == 13)        # CRLF line ends
    keep = np.ones(buf.size, dtype=bool)
    keep[:body] = False
    keep[ends[ends < buf.size]] = False
    keep[ends[cr] - 1] = False
    for byte, what in ((9, "a tab, the separator of named predictions"), (13, "a carriage return")):
        bad = np.flatnonzero((buf == byte) & keep)
        if bad.size:
            raise DataFormatError(f"a label name holds {what}", path, int(np.searchsorted(ends, bad[0])) + 1)
    lengths = ends - starts - cr
    empty = np.flatnonzero(lengths == 0)
    if empty.size:
        # kept (a label map may lack a title), but said: such a label is written as a
        # nameless ':score' token (helper-102)
        log.warning("%s: %d label name(s) are empty lines (the first is line %d, label id %d): predictions of "
                    "these labels are written as ':score', without a name", path, empty.size, int(empty[0]) + 1,
                    int(empty[0]))
    offsets, names = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), buf[keep]
    _warn_repeated_names(path, offsets, names)
    return offsets, names


def _warn_repeated_names(path, offsets: np.ndarray, names: np.ndarray) -> None:
    """A name given to two labels is allowed (real label maps repeat titles), but the
    predictions written with it cannot be mapped back to one label id: say so, once."""
    text = names.tobytes()
    first: dict[bytes, int] = {}
    repeats = 0
    example = None
    for i in range(offsets.size - 1):     # per label, not per instance: ~1 s a million
        name = text[offsets[i]:offsets[i + 1]]
        j = first.setdefault(name, i)
        if j != i:
            repeats += 1
            example = example or (name, j, i)
    if repeats:
        name, j, i = example
        log.warning("%s: %d label name(s) repeat an earlier line's (e.g. %r on lines %d and %d): predictions "
                    "written with these names cannot be mapped back to one label id", path, repeats,
                    name.decode("utf-8", "replace"), j + 1, i + 1)


def write_predictions(path, labels, scores, n_labels: int, names=None, header: str = "headstart") -> None:
    """Write top-k predictions ``labels`` (n, k) int and ``scores`` (n, k) at once,
    atomically (with ``names`` of :func:`read_label_names`: labels as their names;
    ``header`` as :class:`PredictionWriter`'s)."""
    labels = np.asarray(labels)
    if labels.ndim != 2:
        raise DataFormatError(f"labels must have shape (rows, k), got {labels.shape}")
    with PredictionWriter(path, labels.shape[1], n_labels, n_rows=labels.shape[0], names=names,
                          header=header) as w:
        w.write(labels, scores)
