"""Shard files: the weights of a contiguous range of labels, one checksummed ``.npz`` each.

A shard holds the CSR arrays of its labels (``indptr`` int64, ``indices`` int32,
``data`` float32), ``intercept`` (float32), ``shape`` (int64 ``[num_labels,
n_features]``) and ``first_label`` (int64 scalar).  Reading one checks it against its
manifest entry (checksum, first label, shape, nnz) and checks the CSR structure
(monotone ``indptr``, sorted unique column indices within ``[0, n_features)``) and
finiteness, so what comes out can be used without further checks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import scipy.sparse as sp

from ..errors import ModelFormatError
from .archive import check_array, load_npz, read_verified, write_npz
from .manifest import read_manifest, shard_file_name
from ..validation import check_sparse_structure

SHARD_KEYS = {"indptr", "indices", "data", "intercept", "shape", "first_label"}


def _shard_arrays(first_label: int, weights: sp.csr_matrix, intercept: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "indptr": weights.indptr.astype(np.int64, copy=False),
        "indices": weights.indices.astype(np.int32, copy=False),
        "data": weights.data.astype(np.float32, copy=False),
        "intercept": intercept.astype(np.float32, copy=False),
        "shape": np.asarray(weights.shape, dtype=np.int64),
        "first_label": np.asarray(first_label, dtype=np.int64),
    }


def canonical_weights(weights: Any, n_features: int, what: str) -> sp.csr_matrix:
    """float32 CSR with sorted unique indices and finite values, or ModelFormatError."""
    if not sp.issparse(weights):
        weights = np.asarray(weights)
        if weights.ndim != 2:
            raise ModelFormatError(f"{what}: weights must be a 2-d matrix, got {weights.ndim} dimension(s)")
    else:
        # before scipy converts them: its conversions trust the indices (helper-83)
        check_sparse_structure(weights, what, ModelFormatError)
    # no copy unless a conversion is needed: a model can be most of the memory in use
    w = sp.csr_matrix(weights, dtype=np.float32)
    if w.shape[1] != n_features:
        raise ModelFormatError(f"{what}: weights have {w.shape[1]} columns, the model has {n_features} features")
    if not w.has_canonical_format:
        w = w.copy()
        w.sum_duplicates()  # sorts indices, merges duplicates
    if not np.all(np.isfinite(w.data)):
        raise ModelFormatError(f"{what}: weights contain NaN or infinite values")
    return w


def row_view(w: sp.csr_matrix, a: int, z: int) -> sp.csr_matrix:
    """Rows a..z-1 of a canonical CSR sharing its data and indices (no copy)."""
    lo, hi = int(w.indptr[a]), int(w.indptr[z])
    out = sp.csr_matrix((w.data[lo:hi], w.indices[lo:hi], w.indptr[a:z + 1] - lo), shape=(z - a, w.shape[1]),
                        copy=False)
    out.has_canonical_format = True
    return out


def canonical_intercept(intercept: Any, num_labels: int, what: str) -> np.ndarray:
    """float32 vector of ``num_labels`` finite values (zeros for ``None``), or ModelFormatError."""
    b = np.asarray(intercept, dtype=np.float32).reshape(-1) if intercept is not None else \
        np.zeros(num_labels, dtype=np.float32)
    if b.shape != (num_labels,):
        raise ModelFormatError(f"{what}: intercept has shape {b.shape}, expected ({num_labels},)")
    if not np.all(np.isfinite(b)):
        raise ModelFormatError(f"{what}: intercept contains NaN or infinite values")
    return b


def write_shard_file(directory: Path, first_label: int, w: sp.csr_matrix, b: np.ndarray) -> dict[str, Any]:
    """Write the shard of canonical weights ``w`` atomically; return its manifest entry."""
    name = shard_file_name(first_label, w.shape[0])
    digest = write_npz(directory / name, _shard_arrays(first_label, w, b))
    return {"file": name, "first_label": int(first_label), "num_labels": int(w.shape[0]),
            "nnz": int(w.nnz), "sha256": digest}


def validate_shard(path: Path, arrs: dict[str, np.ndarray], entry: dict[str, Any],
                   n_features: int) -> tuple[int, sp.csr_matrix, np.ndarray]:
    """``(first_label, weights, intercept)`` of the parsed shard ``arrs`` if it matches ``entry``."""
    first, num, nnz = entry["first_label"], entry["num_labels"], entry["nnz"]
    check_array(path, "shape", arrs["shape"], np.int64, shape=(2,))
    check_array(path, "first_label", arrs["first_label"], np.int64, shape=())
    if int(arrs["first_label"]) != first:
        raise ModelFormatError(f"{path}: first_label is {int(arrs['first_label'])}, the manifest says {first}")
    shape = tuple(int(v) for v in arrs["shape"])
    if shape != (num, n_features):
        raise ModelFormatError(f"{path}: shape mismatch: shard is {shape[0]} labels x {shape[1]} features, "
                               f"the manifest says {num} labels x {n_features} features")
    check_array(path, "indptr", arrs["indptr"], np.int64, shape=(num + 1,))
    check_array(path, "indices", arrs["indices"], np.int32, ndim=1)
    check_array(path, "data", arrs["data"], np.float32, ndim=1)
    check_array(path, "intercept", arrs["intercept"], np.float32, shape=(num,))
    indptr, indices, data = arrs["indptr"], arrs["indices"], arrs["data"]
    if indices.shape != data.shape:
        raise ModelFormatError(f"{path}: shape mismatch: {indices.shape[0]} indices but {data.shape[0]} values")
    if indices.shape[0] != nnz:
        raise ModelFormatError(f"{path}: holds {indices.shape[0]} weights, the manifest says nnz={nnz}")
    if indptr[0] != 0 or indptr[-1] != nnz or np.any(np.diff(indptr) < 0):
        raise ModelFormatError(f"{path}: indptr is not a monotone row pointer from 0 to nnz={nnz}")
    if nnz and (indices.min() < 0 or indices.max() >= n_features):
        raise ModelFormatError(f"{path}: column index out of range [0, {n_features})")
    # (min and max are NaN when a value is, +-inf when one is infinite: no temporary of a
    # byte per weight, which np.isfinite would make while the file's bytes may be in memory)
    if nnz and not (np.isfinite(data.min()) and np.isfinite(data.max())):
        raise ModelFormatError(f"{path}: weights contain NaN or infinite values")
    if not np.all(np.isfinite(arrs["intercept"])):
        raise ModelFormatError(f"{path}: intercept contains NaN or infinite values")
    w = sp.csr_matrix((data, indices, indptr), shape=(num, n_features), copy=False)
    if not w.has_canonical_format:
        raise ModelFormatError(f"{path}: column indices are not sorted and unique within each label row")
    return first, w, arrs["intercept"]


def read_shard_checked(directory: Path, entry: dict[str, Any], n_features: int
                       ) -> tuple[bytes, tuple[int, sp.csr_matrix, np.ndarray]]:
    """The verified bytes of the shard ``entry`` of ``directory`` and its validated content."""
    fpath = directory / entry["file"]
    raw = read_verified(fpath, entry["sha256"])
    return raw, validate_shard(fpath, load_npz(fpath, raw, SHARD_KEYS), entry, n_features)


def read_shard(directory: Path, entry: dict[str, Any], n_features: int) -> tuple[int, sp.csr_matrix, np.ndarray]:
    """Validated ``(first_label, weights_csr, intercept)`` of the shard ``entry``.

    The file's bytes (as large as the arrays parsed from them) are let go as soon as
    they are parsed, before the checks: a shard costs its size twice only while it is
    read, which the prediction memory estimate (:mod:`headstart.resources`) counts."""
    fpath = directory / entry["file"]
    arrs = load_npz(fpath, read_verified(fpath, entry["sha256"]), SHARD_KEYS)
    return validate_shard(fpath, arrs, entry, n_features)


def iter_shards(path: str | os.PathLike, manifest: dict[str, Any] | None = None
                ) -> Iterator[tuple[int, sp.csr_matrix, np.ndarray]]:
    """Yield validated ``(first_label, weights_csr, intercept)`` shard by shard, in label order.

    Only one shard is in memory at a time (plus whatever the caller keeps).
    """
    path = Path(path)
    m = read_manifest(path) if manifest is None else manifest
    for entry in sorted(m["shards"], key=lambda s: s["first_label"]):
        yield read_shard(path, entry, m["n_features"])
