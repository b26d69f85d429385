"""One number per label, from or to a file: DiSMEC++'s per-label cost files
(``--weighting file``) and the per-label decision thresholds of
:mod:`headstart.tuning`.

Read: a ``.npy`` vector (recognised by its magic bytes), or text with whitespace-separated
numbers (one per line when headstart writes it); a line starting with ``#`` is a comment.
Errors name the file, and for text the line and token.  Written: text, atomically, every
value with the digits that read back to the same float64, after an optional first line
``# headstart {JSON}`` that says what the values were made for (:func:`read_label_header`;
``headstart thresholds`` records its training options there, so that thresholds applied
to a model trained otherwise are noticed).
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import DataFormatError, ParameterError
from ._common import NPY_MAGIC
from .atomic import atomic_write


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
    values = []
    with open(path, encoding="utf-8", errors="replace") as fh:
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


_HEADER = "# headstart "


def write_label_values(path: str | os.PathLike, values: np.ndarray, header: dict | None = None) -> None:
    """One number per line (repr: reads back bit for bit), after the line ``# headstart
    {header as JSON}`` when ``header`` is given; or a float64 .npy vector when ``path``
    ends in .npy (which has no room for the header); written atomically."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if os.fspath(path).endswith(".npy"):
        with atomic_write(path, "wb") as fh:
            np.save(fh, values, allow_pickle=False)
        return
    with atomic_write(path, "w") as fh:
        if header is not None:
            fh.write(_HEADER + json.dumps(header, sort_keys=True) + "\n")
        fh.write("".join(f"{float(v)!r}\n" for v in values))


def read_label_header(path: str | os.PathLike) -> dict | None:
    """The header :func:`write_label_values` wrote in a text file, or None (a .npy file,
    a file written by hand or by another tool, a header that is not a JSON object)."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 20)
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
