"""The model's extra files: ``preprocessing.npz`` and ``label_counts.npz``.

``preprocessing.npz`` holds ``normalize`` (bool scalar) and, for tf-idf, ``idf``
(float32, ``n_features``); ``label_counts.npz`` holds ``label_counts`` (int64,
``label_space``) when they are known, else nothing.  Both are checksummed in the
manifest's ``extra_files`` and must agree with its ``preprocessing`` field, which also
holds the value transform and the feature hashing (no arrays: hashing is a function of
its seed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from .archive import check_array, read_npz, write_npz
from .manifest import LABEL_COUNTS_FILE, PREPROCESSING_FILE, read_manifest
from .model import FeatureHashing, Preprocessing


def read_extras(path: str | os.PathLike, m: dict[str, Any] | None = None
                ) -> tuple[Preprocessing, np.ndarray | None]:
    """Validated ``(Preprocessing, label_counts or None)`` of the model directory ``path``."""
    path = Path(path)
    m = read_manifest(path) if m is None else m
    n_features, label_space = m["n_features"], m["label_space"]
    fpath = path / PREPROCESSING_FILE
    arrs = read_npz(fpath, m["extra_files"][PREPROCESSING_FILE], {"normalize"}, {"idf", "idf_ids", "idf_values"})
    check_array(fpath, "normalize", arrs["normalize"], np.bool_, shape=())
    normalize = bool(arrs["normalize"])
    if normalize != m["preprocessing"]["normalize"]:
        raise ModelFormatError(f"{fpath}: normalize={normalize} but the manifest says "
                               f"{m['preprocessing']['normalize']}")
    idf = arrs.get("idf")
    if idf is None and ("idf_ids" in arrs or "idf_values" in arrs):
        idf = _dense_idf(fpath, arrs.get("idf_ids"), arrs.get("idf_values"), n_features)
    if (idf is not None) != m["preprocessing"]["tfidf"]:
        raise ModelFormatError(f"{fpath}: idf vector {'present' if idf is not None else 'absent'} but the "
                               f"manifest says tfidf={m['preprocessing']['tfidf']}")
    if idf is not None:
        check_array(fpath, "idf", idf, np.float32, shape=(n_features,))
        if not np.all(np.isfinite(idf)):
            raise ModelFormatError(f"{fpath}: idf contains NaN or infinite values")
    fpath = path / LABEL_COUNTS_FILE
    arrs = read_npz(fpath, m["extra_files"][LABEL_COUNTS_FILE], set(), {"label_counts"})
    counts = arrs.get("label_counts")
    if counts is not None:
        check_array(fpath, "label_counts", counts, np.int64, shape=(label_space,))
        if label_space and counts.min() < 0:
            raise ModelFormatError(f"{fpath}: negative label count")
    h = m["preprocessing"]["hash"]
    return Preprocessing(normalize=normalize, idf=idf, transform=m["preprocessing"]["transform"],
                         hashing=None if h is None else FeatureHashing(**h)), counts


def _dense_idf(fpath: Path, ids, values, n_features: int) -> np.ndarray:
    """The idf vector of its sparse form (:func:`_extras_arrays`), validated."""
    if ids is None or values is None:
        raise ModelFormatError(f"{fpath}: 'idf_ids' and 'idf_values' go together; one of them is missing")
    check_array(fpath, "idf_ids", ids, np.int64, ndim=1)
    check_array(fpath, "idf_values", values, np.float32, shape=ids.shape)
    if ids.size and (ids[0] < 0 or ids[-1] >= n_features or np.any(ids[1:] <= ids[:-1])):
        raise ModelFormatError(f"{fpath}: 'idf_ids' must be increasing feature ids in [0, {n_features})")
    idf = np.zeros(n_features, dtype=np.float32)
    idf[ids] = values
    return idf


def _extras_arrays(preprocessing: Preprocessing, label_counts: Any, n_features: int,
                   label_space: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    pre = {"normalize": np.asarray(bool(preprocessing.normalize))}
    if preprocessing.idf is not None:
        idf = np.asarray(preprocessing.idf, dtype=np.float32)
        if idf.shape != (n_features,):
            raise ModelFormatError(f"idf has shape {idf.shape}, expected ({n_features},)")
        if not np.all(np.isfinite(idf)):
            raise ModelFormatError("idf contains NaN or infinite values")
        ids = np.flatnonzero(idf)
        if 3 * ids.size < idf.size:
            # a feature without a training document has idf 0: where most features have
            # none (a wide or hashed feature space), the nonzeros alone (12 bytes each
            # against 4 per feature; helper-54: 39 MB for 2,000 features used of 10M)
            pre["idf_ids"] = ids.astype(np.int64)
            pre["idf_values"] = idf[ids]
        else:
            pre["idf"] = idf
    counts: dict[str, np.ndarray] = {}
    if label_counts is not None:
        c = np.asarray(label_counts)
        if c.shape != (label_space,):
            raise ModelFormatError(f"label_counts has shape {c.shape}, expected ({label_space},)")
        ci = c.astype(np.int64)
        if not np.array_equal(ci, c) or (label_space and ci.min() < 0):
            raise ModelFormatError("label_counts must be non-negative integers")
        counts["label_counts"] = ci
    return pre, counts


def write_extras(directory: Path, manifest: dict[str, Any], preprocessing: Preprocessing,
                 label_counts: Any) -> None:
    """Write both extra files into ``directory`` and record their checksums in ``manifest``."""
    pre, counts = _extras_arrays(preprocessing, label_counts, manifest["n_features"], manifest["label_space"])
    manifest["extra_files"] = {PREPROCESSING_FILE: write_npz(directory / PREPROCESSING_FILE, pre),
                               LABEL_COUNTS_FILE: write_npz(directory / LABEL_COUNTS_FILE, counts)}
