"""One number per label, from or to a file: DiSMEC++'s per-label cost files
(``--weighting file``) and the per-label decision thresholds of
:mod:`headstart.tuning`.

Read: a ``.npy`` vector (recognised by its magic bytes), or text with whitespace-separated
numbers (one per line when headstart writes it); a line starting with ``#`` is a comment.
Errors name the file, and for text the line and token.  Written: text, atomically, every
value with the digits that read back to the same float64, after an optional first line
``# headstart {JSON}`` that says what the values were made for (:func:`read_label_header`;
``headstart thresholds`` records its training options there, so that thresholds applied
to a model trained otherwise are noticed).  A ``.npy`` has no room for that line: its
header goes beside it, in ``FILE.npy.json`` (``{"sha256": ..., "header": {...}}``), which
names the ``.npy`` bytes it describes by their checksum, so that a ``.npy`` replaced by
another (a user's own values) is not taken for the one described.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re

import numpy as np

from ..errors import DataFormatError, ParameterError
from ._common import NPY_MAGIC
from .atomic import atomic_write

log = logging.getLogger(__name__)


def read_label_values(path: str | os.PathLike, num_labels: int, what: str = "label values",
                      one: str = "value", minimum: float | None = None, owner: str = "the data") -> np.ndarray:
    """``num_labels`` finite float64 numbers (each >= ``minimum`` when given) from
    ``path``; ``what`` names them in errors (e.g. "label costs"), ``one`` names one,
    ``owner`` what has ``num_labels`` labels."""
    path = os.fspath(path)
    rule = "a finite number" + ("" if minimum is None else f" >= {minimum:g}")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(len(NPY_MAGIC))
    except OSError as e:
        raise ParameterError(f"{path}: cannot read {what}: {e.strerror}") from None
    if magic == NPY_MAGIC:
        try:
            a = np.load(path, allow_pickle=False)
        except ValueError as e:
            raise DataFormatError(f"{path}: not a plain numeric .npy array: {e}") from None
        if a.ndim == 2 and 1 in a.shape:
            a = a.reshape(-1)
        if a.ndim != 1 or a.dtype.kind not in "fiu":
            raise DataFormatError(f"{path}: expected a numeric vector of {num_labels} {what}, "
                                  f"got shape {a.shape} dtype {a.dtype}")
        a = a.astype(np.float64)
        if a.size != num_labels:
            raise DataFormatError(f"{path}: {a.size} {what}, {owner} has {num_labels} labels")
        bad = np.flatnonzero(~np.isfinite(a) | (False if minimum is None else a < minimum))
        if bad.size:
            raise DataFormatError(f"{path}: entry {bad[0]}: {one} {float(a[bad[0]])!r} is not {rule}")
        return a
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    # every token at once (float() each, as below); the loop below only runs to name the
    # line of an error: at 2M labels it took ~5 s a read (a cost file was then read twice,
    # for the costs and for the model's digest of them: 14 s of an 18 s `train`, cProfile;
    # objective.weighting.read_costs now keeps an unchanged file's values)
    try:
        a = _parse_values(_COMMENTS.sub("", text) if "#" in text else text)
        if a.size == num_labels and np.isfinite(a).all() and (minimum is None or not (a < minimum).any()):
            return a
    except ValueError:
        pass
    values = []
    with io.StringIO(text) as fh:
        for lineno, line in enumerate(fh, 1):
            if line.lstrip().startswith("#"):
                continue
            for tok in line.split():
                try:
                    v = float(tok)
                except ValueError:
                    raise DataFormatError(f"{path}:{lineno}: {tok!r} is not a number") from None
                if not np.isfinite(v) or (minimum is not None and v < minimum):
                    raise DataFormatError(f"{path}:{lineno}: {one} {tok!r} is not {rule}")
                if len(values) == num_labels:
                    raise DataFormatError(f"{path}:{lineno}: more than {num_labels} {what} "
                                          f"({owner} has {num_labels} labels)")
                values.append(v)
    if len(values) != num_labels:
        raise DataFormatError(f"{path}: {len(values)} {what}, {owner} has {num_labels} labels")
    return np.asarray(values, dtype=np.float64)


#: characters of text parsed at a time: the tokens of all 2M lines of a cost file at once
#: took 228 MB at the peak against 91 MB for the line loop; by 1 MB, 50 MB
_BLOCK = 1 << 20


def _parse_values(text: str) -> np.ndarray:
    """float() of every whitespace-separated token of ``text`` (ValueError on one that
    is not a number), a block of lines at a time."""
    parts = []
    i = 0
    while i < len(text):
        j = text.find("\n", i + _BLOCK)
        j = len(text) if j < 0 else j + 1
        parts.append(np.array(list(map(float, text[i:j].split())), dtype=np.float64))
        i = j
    return np.concatenate(parts) if parts else np.zeros(0)


_HEADER = "# headstart "
#: the comment lines read_label_values skips (``line.lstrip().startswith("#")``: ``\s``
#: is str.isspace's whitespace), their newline kept
_COMMENTS = re.compile(r"^[^\S\n]*#[^\n]*", re.MULTILINE)


def write_label_values(path: str | os.PathLike, values: np.ndarray, header: dict | None = None) -> None:
    """One number per line (repr: reads back bit for bit), after the line ``# headstart
    {header as JSON}`` when ``header`` is given; or a float64 .npy vector when ``path``
    ends in .npy, its header in the sidecar ``path + ".json"`` (:func:`sidecar`); each
    file written atomically (the .npy first: the sidecar names its checksum, so a crash
    between the two leaves no sidecar that describes the new values wrongly)."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if os.fspath(path).endswith(".npy"):
        buf = io.BytesIO()
        np.save(buf, values, allow_pickle=False)
        raw = buf.getvalue()
        with atomic_write(path, "wb") as fh:
            fh.write(raw)
        side = sidecar(path)
        if header is not None:
            with atomic_write(side, "w") as fh:
                fh.write(json.dumps({"sha256": hashlib.sha256(raw).hexdigest(), "header": header}, sort_keys=True)
                         + "\n")
        elif os.path.isfile(side):    # it described the values this file held before
            os.unlink(side)
        return
    with atomic_write(path, "w") as fh:
        if header is not None:
            fh.write(_HEADER + json.dumps(header, sort_keys=True) + "\n")
        fh.write("".join(f"{float(v)!r}\n" for v in values))


def sidecar(path: str | os.PathLike) -> str:
    """The file beside a .npy that holds its header (``thr.npy`` -> ``thr.npy.json``)."""
    return os.fspath(path) + ".json"


def read_label_header(path: str | os.PathLike) -> dict | None:
    """The header :func:`write_label_values` wrote: in a text file's first line, or for a
    .npy in its sidecar when that names the .npy's checksum; None for a file written by
    hand or by another tool (a .npy without a sidecar), a header that is not a JSON
    object, or a sidecar of other values (warned: the .npy was replaced after it)."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 20)
            if first.startswith(NPY_MAGIC):
                fh.seek(0)
                return _sidecar_header(path, hashlib.sha256(fh.read()).hexdigest())
    except OSError:
        return None
    text = first.decode("utf-8", errors="replace")
    if not text.startswith(_HEADER):
        return None
    try:
        header = json.loads(text[len(_HEADER):])
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def _sidecar_header(path, sha256: str) -> dict | None:
    side = sidecar(path)
    try:
        with open(side, encoding="utf-8") as fh:
            meta = json.load(fh)
    except FileNotFoundError:
        return None              # a plain .npy (a user's own values)
    except (OSError, ValueError) as e:
        log.warning("%s: cannot read the header of %s (%s): what its values were made for is unknown", side, path, e)
        return None
    header = meta.get("header") if isinstance(meta, dict) else None
    if not isinstance(header, dict):
        log.warning("%s: not a header of %s (a JSON object with 'sha256' and 'header'): ignored", side, path)
        return None
    if meta.get("sha256") != sha256:
        log.warning("%s describes other values than %s holds (its checksum differs: the .npy was replaced after "
                    "it): ignored, what the values were made for is unknown", side, path)
        return None
    return header
