"""Readers and writers of data and prediction files.

Every reader raises :class:`headstart.errors.DataFormatError` -- and nothing else -- for
bad file content, including a missing or unreadable file; the error names the file, the
1-based line (the header is line 1), the column and the offending token.  Parsing runs in
Numba kernels over the raw bytes (gzip is detected by magic bytes).  Writers are atomic
(see :mod:`headstart.io.atomic`).

Formats
    xmc      ``read_xmc`` / ``write_xmc`` / ``iter_xmc_chunks`` -- XMC repository text
    libsvm   ``read_libsvm`` -- multi-label svmlight, 1-based features, no header
    slice    ``read_slice`` / ``write_slice`` -- dense ``.npy`` features + label file
    preds    ``read_predictions`` / ``write_predictions`` / ``PredictionWriter`` / ``DecisionWriter`` / ``read_label_names``
"""

from __future__ import annotations

import os

from ..errors import DataFormatError, ParameterError
from ._common import NPY_MAGIC, first_line, header_ints
from .atomic import atomic_write
from .predictions import DecisionWriter, PredictionWriter, read_label_names, read_predictions, write_predictions
from .slice import read_dense_features, read_label_file, read_slice, write_slice
from .xmc import (is_xmc_header, iter_xmc_chunks, read_libsvm, read_xmc, read_xmc_header,
                  write_libsvm, write_xmc)

__all__ = [
    "read_xmc", "read_xmc_header", "iter_xmc_chunks", "write_xmc",
    "read_libsvm", "write_libsvm", "read_slice", "read_label_file", "read_dense_features", "write_slice",
    "read_data", "detect_format",
    "read_predictions", "write_predictions", "PredictionWriter", "DecisionWriter", "read_label_names",
    "atomic_write",
]

FORMATS = ("auto", "xmc", "libsvm", "slice")


def detect_format(path) -> str:
    """``"slice"`` for a ``.npy`` file (by magic bytes or name) or a first line of two
    non-negative integers (DiSMEC++'s dense text matrix; no libsvm line is two bare
    integers), ``"xmc"`` when the first line is three non-negative integers, else
    ``"libsvm"``."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
    except OSError as e:
        raise DataFormatError(f"cannot read file: {e.strerror or e}", path) from e
    if magic == NPY_MAGIC or os.fspath(path).endswith(".npy"):
        return "slice"
    line = first_line(path)
    if header_ints(line, 2) is not None:
        return "slice"
    return "xmc" if header_ints(line, 3) is not None else "libsvm"


def read_data(path, fmt: str = "auto", **kw):
    """Read ``(X, Y)`` from ``path`` in format ``fmt`` (``auto``, ``xmc``, ``libsvm``,
    ``slice``); keyword arguments go to the reader.

    ``slice`` needs the label file: ``read_data("X.npy", labels_path="Y.txt")``.
    ``auto`` picks with :func:`detect_format`.
    """
    if fmt not in FORMATS:
        raise ParameterError(f"fmt must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "xmc":
        return read_xmc(path, **kw)
    if fmt == "libsvm":
        return read_libsvm(path, **kw)
    labels_path = kw.pop("labels_path", None) or kw.pop("labels", None)
    if labels_path is None:
        raise ParameterError("fmt 'slice' (dense .npy features) needs labels_path=<label file>")
    if kw:
        raise ParameterError(f"unexpected arguments for fmt 'slice': {', '.join(kw)}")
    return read_slice(path, labels_path)
