"""The on-disk model format: a directory of checksummed, sharded ``.npz`` files.

Layout of a model directory::

    manifest.json                  what is in the directory; the single source of truth
    preprocessing.npz              ``normalize`` (bool) and, for tf-idf, ``idf`` (float32)
    label_counts.npz               ``label_counts`` (int64, label_space) when known
    shards/labels-AAAAAAA-BBBBBBB.npz   weights of labels AAAAAAA..BBBBBBB (inclusive)

``manifest.json``::

    {"format": "headstart-model", "version": 1,
     "n_features": F, "label_space": L, "n_train": N,
     "params": {... TrainParams.to_dict() ...},
     "preprocessing": {"normalize": bool, "tfidf": bool},
     "shards": [{"file": "shards/labels-0000000-0000159.npz", "first_label": 0,
                 "num_labels": 160, "nnz": 1234, "sha256": "..."}, ...],
     "extra_files": {"preprocessing.npz": "<sha256>", "label_counts.npz": "<sha256>"}}

A shard holds the CSR arrays of its labels (``indptr`` int64, ``indices`` int32,
``data`` float32), ``intercept`` (float32), ``shape`` (int64 ``[num_labels, n_features]``)
and ``first_label`` (int64 scalar).

Safety rules
------------
* Nothing is ever unpickled or evaluated: every ``.npz`` is opened with
  ``allow_pickle=False`` and an object array is reported as an error.  File names in the
  manifest must match the shard naming pattern, so a manifest cannot point outside the
  directory.
* Every file is checked against the sha256 in the manifest before it is parsed (the
  bytes that are hashed are the bytes that are parsed), then its arrays are checked:
  keys, dtypes, shapes, CSR structure (monotone ``indptr``, sorted unique column indices
  within ``[0, n_features)``) and finiteness.
* Writes are atomic.  Single files are written to a temporary name in the same
  directory, fsync'ed and ``os.replace``'d.  Whole models (:func:`save_model`,
  :func:`merge_models`, :meth:`ModelWriter.create`) are built in a temporary sibling
  directory and renamed into place; replacing an existing model renames the old one
  aside first and deletes it after the new one is in place (a crash in that instant
  leaves the old model as ``.NAME.old-*`` next to the target, never a mixed directory).
* The ``shards`` list of the manifest decides which labels are finished.
  :meth:`ModelWriter.add_shard` writes the shard file first and the manifest last, so a
  crash in between leaves an unlisted file, which readers ignore and
  :meth:`ModelWriter.open` deletes.

Gaps
----
A model whose shards do not cover ``[0, label_space)`` (an interrupted training run, or
one piece of a distributed run) has *gaps*.  :func:`load_model` refuses it unless
``allow_gaps=True``; then the returned model spans from the first to the last covered
label, labels inside holes get an empty weight row and intercept 0, and the model gets
an attribute ``missing_ranges`` (list of ``(start, stop)`` global label ranges not
covered in ``[0, label_space)``).  Prediction (:mod:`headstart.prediction`) never
returns a label listed there, and :func:`save_model` does not write them as shards.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import threading
import uuid
import zipfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import scipy.sparse as sp

from ..errors import ModelFormatError, ParameterError
from ..params import TrainParams
from .model import OvAModel, Preprocessing

FORMAT_NAME = "headstart-model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SHARD_DIR = "shards"
PREPROCESSING_FILE = "preprocessing.npz"
LABEL_COUNTS_FILE = "label_counts.npz"
EXTRA_FILES = (PREPROCESSING_FILE, LABEL_COUNTS_FILE)
#: parameters that may differ between pieces of one model (they do not change the weights)
IGNORED_PARAMS = ("threads", "timeout")

_SHARD_RE = re.compile(r"^shards/labels-(\d{7,})-(\d{7,})\.npz$")
_SHARD_NAME_RE = re.compile(r"^labels-(\d{7,})-(\d{7,})\.npz$")
# temporaries: ours (".NAME.tmp-<32 hex>") and headstart.io.atomic's (".NAME.<hex>.tmp")
_TEMP_RE = re.compile(r"^\..+\.(tmp-[0-9a-f]{32}|[0-9a-f]{12}\.tmp)$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_SHARD_KEYS = {"indptr", "indices", "data", "intercept", "shape", "first_label"}
_MANIFEST_KEYS = {"format", "version", "n_features", "label_space", "n_train", "params",
                  "preprocessing", "shards", "extra_files"}
_SHARD_ENTRY_KEYS = {"file", "first_label", "num_labels", "nnz", "sha256"}
#: largest n_features / label_space (feature and label ids are int32, as in headstart.io)
MAX_DIM = 2**31 - 1

Range = tuple[int, int]


# --------------------------------------------------------------------------- helpers
def shard_file_name(first_label: int, num_labels: int) -> str:
    """Relative path of the shard holding labels ``[first_label, first_label+num_labels)``."""
    return f"{SHARD_DIR}/labels-{first_label:07d}-{first_label + num_labels - 1:07d}.npz"


def _fmt_range(r: Range) -> str:
    return f"labels [{r[0]}, {r[1]})"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _temp_sibling(path: Path) -> Path:
    return path.parent / f".{path.name}.tmp-{uuid.uuid4().hex}"


@contextlib.contextmanager
def _private_atomic_write(path: str | os.PathLike, mode: str = "wb") -> Iterator[Any]:
    """Fallback for ``headstart.io.atomic.atomic_write`` (same contract).

    Temporary name in the same directory, fsync, ``os.replace``; the temporary file is
    deleted if the body raises, and the target is never half written.
    """
    path = Path(path)
    tmp = _temp_sibling(path)
    fh = open(tmp, mode)
    try:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
        os.replace(tmp, path)
    except BaseException:
        fh.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


try:  # the project's shared helper, when present
    from ..io.atomic import atomic_write as _atomic_write
except ImportError:  # pragma: no cover - only before headstart.io.atomic exists
    _atomic_write = _private_atomic_write


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> str:
    """Write an uncompressed npz atomically and return the sha256 of the written bytes."""
    path = Path(path)
    with _atomic_write(path, "wb") as fh:
        np.savez(fh, **arrays)
    # hashed after the rename (re-read from the page cache): np.savez seeks back while
    # writing, so the bytes cannot be hashed on the way out; only this writer touches it
    return _sha256_file(path)


def _write_json(path: Path, obj: Any) -> None:
    text = json.dumps(obj, indent=1) + "\n"
    with _atomic_write(path, "wb") as fh:
        fh.write(text.encode("utf-8"))


def _read_verified(path: Path, sha256: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: file listed in the manifest is missing") from None
    except OSError as e:
        raise ModelFormatError(f"{path}: cannot read: {e.strerror}") from None
    got = hashlib.sha256(raw).hexdigest()
    if got != sha256:
        raise ModelFormatError(
            f"{path}: checksum mismatch: sha256 is {got}, the manifest says {sha256} "
            "(the file was modified, truncated or replaced after it was written)")
    return raw


def _claimed_nbytes(npz: Any, key: str) -> int:
    """Bytes the .npy header of member ``key`` claims (the header only: nothing is allocated)."""
    name = key + ".npy" if key + ".npy" in npz.zip.namelist() else key
    with npz.zip.open(name) as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(fh)
    n = dtype.itemsize
    for s in shape:
        n *= int(s)
    return n


def _load_npz(path: Path, raw: bytes, required: set[str], optional: set[str] = frozenset()
              ) -> dict[str, np.ndarray]:
    """Parse npz bytes without pickles; return the arrays; exact key set is enforced.

    A member whose header claims more bytes than the whole file holds is refused before
    numpy allocates the claim; whatever zipfile or numpy raise on forged bytes (bad
    versions, "encrypted" or unknown compression flags, broken headers) is a
    ModelFormatError."""
    try:
        npz = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - zipfile/numpy raise many types on forged bytes
        raise ModelFormatError(f"{path}: not a readable .npz archive (truncated or corrupt): {e}") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ModelFormatError(f"{path}: expected an .npz archive, found a single .npy array")
    with npz:
        keys = set(npz.files)
        missing = required - keys
        if missing:
            raise ModelFormatError(f"{path}: missing array(s) {', '.join(sorted(missing))}")
        extra = keys - required - set(optional)
        if extra:
            raise ModelFormatError(f"{path}: unexpected array(s) {', '.join(sorted(extra))}")
        out = {}
        for key in sorted(keys):
            try:
                claimed = _claimed_nbytes(npz, key)
                if claimed > len(raw):
                    raise ModelFormatError(f"{path}: array {key!r} claims {claimed} bytes, more than the whole "
                                           f"{len(raw)}-byte file holds")
                out[key] = npz[key]
            except ModelFormatError:
                raise
            except ValueError as e:
                if "allow_pickle" in str(e) or "Object arrays" in str(e):
                    raise ModelFormatError(
                        f"{path}: array {key!r} is an object (pickled) array; refused, "
                        "model files hold numeric arrays only") from None
                raise ModelFormatError(f"{path}: array {key!r} cannot be read: {e}") from None
            except Exception as e:  # noqa: BLE001 - see the docstring
                raise ModelFormatError(f"{path}: array {key!r} is truncated or corrupt: {e}") from None
            if not isinstance(out[key], np.ndarray):
                raise ModelFormatError(f"{path}: array {key!r} is not a .npy array")
    return out


def _check_array(path: Path, name: str, arr: np.ndarray, dtype: Any, shape: tuple | None = None,
                 ndim: int | None = None) -> None:
    if arr.dtype != np.dtype(dtype):
        raise ModelFormatError(f"{path}: array {name!r} has dtype {arr.dtype}, expected {np.dtype(dtype)}")
    if ndim is not None and arr.ndim != ndim:
        raise ModelFormatError(f"{path}: array {name!r} has {arr.ndim} dimension(s), expected {ndim}")
    if shape is not None and arr.shape != shape:
        raise ModelFormatError(f"{path}: array {name!r} has shape {arr.shape}, expected {shape}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _merge_ranges(ranges: Sequence[Range]) -> list[Range]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _missing(covered: Sequence[Range], start: int, stop: int) -> list[Range]:
    out = []
    pos = start
    for a, b in _merge_ranges(covered):
        if b <= pos:
            continue
        if a >= stop:
            break
        if a > pos:
            out.append((pos, min(a, stop)))
        pos = max(pos, b)
        if pos >= stop:
            break
    if pos < stop:
        out.append((pos, stop))
    return out


def params_difference(a: TrainParams | dict, b: TrainParams | dict,
                      ignore: Sequence[str] = IGNORED_PARAMS) -> list[tuple[str, Any, Any]]:
    """``[(name, value_in_a, value_in_b), ...]`` for every parameter that differs."""
    da = a.to_dict() if isinstance(a, TrainParams) else dict(a)
    db = b.to_dict() if isinstance(b, TrainParams) else dict(b)
    out = []
    for name in sorted(set(da) | set(db)):
        if name in ignore:
            continue
        va, vb = da.get(name), db.get(name)
        if va != vb:
            out.append((name, va, vb))
    return out


def _ranges_text(ranges: Sequence[Range], limit: int = 20) -> str:
    parts = [f"[{a}, {b})" for a, b in ranges[:limit]]
    if len(ranges) > limit:
        parts.append(f"... ({len(ranges) - limit} more)")
    return ", ".join(parts)


# --------------------------------------------------------------------------- manifest
def _json_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _validate_manifest(path: Path, m: Any) -> dict[str, Any]:
    where = path / MANIFEST
    if not isinstance(m, dict):
        raise ModelFormatError(f"{where}: manifest must be a JSON object, got {type(m).__name__}")
    if m.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"{where}: unknown format {m.get('format')!r}, expected {FORMAT_NAME!r}")
    if m.get("version") != FORMAT_VERSION:
        raise ModelFormatError(f"{where}: unsupported format version {m.get('version')!r}; "
                               f"this headstart reads version {FORMAT_VERSION}")
    missing = _MANIFEST_KEYS - set(m)
    if missing:
        raise ModelFormatError(f"{where}: missing field(s) {', '.join(sorted(missing))}")
    extra = set(m) - _MANIFEST_KEYS
    if extra:
        raise ModelFormatError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
    for key in ("n_features", "label_space", "n_train"):
        if not _is_int(m[key]) or m[key] < 0:
            raise ModelFormatError(f"{where}: field {key!r} must be an integer >= 0, got {m[key]!r}")
    for key in ("n_features", "label_space"):  # a claim must not make a reader allocate 10**12 of anything
        if m[key] > MAX_DIM:
            raise ModelFormatError(f"{where}: field {key!r} is {m[key]}, more than the supported maximum "
                                   f"{MAX_DIM} (ids are int32)")
    if not isinstance(m["params"], dict):
        raise ModelFormatError(f"{where}: field 'params' must be an object")
    try:
        TrainParams.from_dict(m["params"])
    except (ParameterError, TypeError) as e:
        raise ModelFormatError(f"{where}: invalid params: {e}") from None
    pre = m["preprocessing"]
    if (not isinstance(pre, dict) or set(pre) != {"normalize", "tfidf"}
            or not all(isinstance(v, bool) for v in pre.values())):
        raise ModelFormatError(f"{where}: field 'preprocessing' must be "
                               f'{{"normalize": bool, "tfidf": bool}}, got {pre!r}')
    extra_files = m["extra_files"]
    if not isinstance(extra_files, dict) or set(extra_files) != set(EXTRA_FILES):
        raise ModelFormatError(f"{where}: field 'extra_files' must list exactly {', '.join(EXTRA_FILES)}")
    for name, digest in extra_files.items():
        if not isinstance(digest, str) or not _SHA_RE.match(digest):
            raise ModelFormatError(f"{where}: extra_files[{name!r}] is not a sha256 hex digest: {digest!r}")
    shards = m["shards"]
    if not isinstance(shards, list):
        raise ModelFormatError(f"{where}: field 'shards' must be a list")
    label_space, ranges = m["label_space"], []
    for i, s in enumerate(shards):
        if not isinstance(s, dict) or set(s) != _SHARD_ENTRY_KEYS:
            raise ModelFormatError(f"{where}: shards[{i}] must have exactly the fields "
                                   f"{', '.join(sorted(_SHARD_ENTRY_KEYS))}")
        for key in ("first_label", "num_labels", "nnz"):
            if not _is_int(s[key]) or s[key] < 0:
                raise ModelFormatError(f"{where}: shards[{i}].{key} must be an integer >= 0, got {s[key]!r}")
        first, num = s["first_label"], s["num_labels"]
        if num < 1 or first + num > label_space:
            raise ModelFormatError(f"{where}: shards[{i}] covers {_fmt_range((first, first + num))}, "
                                   f"outside the label space [0, {label_space}) or empty")
        if not isinstance(s["file"], str) or s["file"] != shard_file_name(first, num):
            raise ModelFormatError(f"{where}: shards[{i}].file is {s['file']!r}, expected "
                                   f"{shard_file_name(first, num)!r} for {_fmt_range((first, first + num))}")
        if not isinstance(s["sha256"], str) or not _SHA_RE.match(s["sha256"]):
            raise ModelFormatError(f"{where}: shards[{i}].sha256 is not a sha256 hex digest")
        ranges.append((first, first + num, i))
    ranges.sort()
    for (a0, b0, i0), (a1, b1, i1) in zip(ranges, ranges[1:]):
        if a1 < b0:
            raise ModelFormatError(f"{where}: shards[{i0}] ({_fmt_range((a0, b0))}) and shards[{i1}] "
                                   f"({_fmt_range((a1, b1))}) overlap")
    return m


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate ``manifest.json`` of the model directory ``path``."""
    path = Path(path)
    where = path / MANIFEST
    if not path.exists():
        raise ModelFormatError(f"{path}: model directory does not exist")
    if not path.is_dir():
        raise ModelFormatError(f"{path}: not a model directory (it is a file)")
    try:
        with open(where, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ModelFormatError(f"{where}: missing manifest; {path} is not a headstart model "
                               "directory (or its writing never finished)") from None
    except OSError as e:
        raise ModelFormatError(f"{where}: cannot read manifest: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFormatError(f"{where}: manifest is not UTF-8 text (byte {e.start})") from None
    try:
        m = json.loads(text, parse_constant=_json_constant)
    except json.JSONDecodeError as e:
        raise ModelFormatError(f"{where}:{e.lineno}:{e.colno}: manifest is not valid JSON: {e.msg}") from None
    except ValueError as e:
        raise ModelFormatError(f"{where}: manifest is not valid JSON: {e}") from None
    return _validate_manifest(path, m)


def _is_headstart_model(path: Path) -> bool:
    try:
        with open(path / MANIFEST, "rb") as fh:
            m = json.loads(fh.read().decode("utf-8"))
        return isinstance(m, dict) and m.get("format") == FORMAT_NAME
    except (OSError, ValueError):
        return False


# --------------------------------------------------------------------------- shards
def _shard_arrays(first_label: int, weights: sp.csr_matrix, intercept: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "indptr": weights.indptr.astype(np.int64, copy=False),
        "indices": weights.indices.astype(np.int32, copy=False),
        "data": weights.data.astype(np.float32, copy=False),
        "intercept": intercept.astype(np.float32, copy=False),
        "shape": np.asarray(weights.shape, dtype=np.int64),
        "first_label": np.asarray(first_label, dtype=np.int64),
    }


def _canonical_weights(weights: Any, n_features: int, what: str) -> sp.csr_matrix:
    if not sp.issparse(weights):
        weights = np.asarray(weights)
        if weights.ndim != 2:
            raise ModelFormatError(f"{what}: weights must be a 2-d matrix, got {weights.ndim} dimension(s)")
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


def _row_view(w: sp.csr_matrix, a: int, z: int) -> sp.csr_matrix:
    """Rows a..z-1 of a canonical CSR sharing its data and indices (no copy)."""
    lo, hi = int(w.indptr[a]), int(w.indptr[z])
    out = sp.csr_matrix((w.data[lo:hi], w.indices[lo:hi], w.indptr[a:z + 1] - lo), shape=(z - a, w.shape[1]),
                        copy=False)
    out.has_canonical_format = True
    return out


def _canonical_intercept(intercept: Any, num_labels: int, what: str) -> np.ndarray:
    b = np.asarray(intercept, dtype=np.float32).reshape(-1) if intercept is not None else \
        np.zeros(num_labels, dtype=np.float32)
    if b.shape != (num_labels,):
        raise ModelFormatError(f"{what}: intercept has shape {b.shape}, expected ({num_labels},)")
    if not np.all(np.isfinite(b)):
        raise ModelFormatError(f"{what}: intercept contains NaN or infinite values")
    return b


def _validate_shard(path: Path, arrs: dict[str, np.ndarray], entry: dict[str, Any],
                    n_features: int) -> tuple[int, sp.csr_matrix, np.ndarray]:
    first, num, nnz = entry["first_label"], entry["num_labels"], entry["nnz"]
    _check_array(path, "shape", arrs["shape"], np.int64, shape=(2,))
    _check_array(path, "first_label", arrs["first_label"], np.int64, shape=())
    if int(arrs["first_label"]) != first:
        raise ModelFormatError(f"{path}: first_label is {int(arrs['first_label'])}, the manifest says {first}")
    shape = tuple(int(v) for v in arrs["shape"])
    if shape != (num, n_features):
        raise ModelFormatError(f"{path}: shape mismatch: shard is {shape[0]} labels x {shape[1]} features, "
                               f"the manifest says {num} labels x {n_features} features")
    _check_array(path, "indptr", arrs["indptr"], np.int64, shape=(num + 1,))
    _check_array(path, "indices", arrs["indices"], np.int32, ndim=1)
    _check_array(path, "data", arrs["data"], np.float32, ndim=1)
    _check_array(path, "intercept", arrs["intercept"], np.float32, shape=(num,))
    indptr, indices, data = arrs["indptr"], arrs["indices"], arrs["data"]
    if indices.shape != data.shape:
        raise ModelFormatError(f"{path}: shape mismatch: {indices.shape[0]} indices but {data.shape[0]} values")
    if indices.shape[0] != nnz:
        raise ModelFormatError(f"{path}: holds {indices.shape[0]} weights, the manifest says nnz={nnz}")
    if indptr[0] != 0 or indptr[-1] != nnz or np.any(np.diff(indptr) < 0):
        raise ModelFormatError(f"{path}: indptr is not a monotone row pointer from 0 to nnz={nnz}")
    if nnz and (indices.min() < 0 or indices.max() >= n_features):
        raise ModelFormatError(f"{path}: column index out of range [0, {n_features})")
    if not np.all(np.isfinite(data)):
        raise ModelFormatError(f"{path}: weights contain NaN or infinite values")
    if not np.all(np.isfinite(arrs["intercept"])):
        raise ModelFormatError(f"{path}: intercept contains NaN or infinite values")
    w = sp.csr_matrix((data, indices, indptr), shape=(num, n_features), copy=False)
    if not w.has_canonical_format:
        raise ModelFormatError(f"{path}: column indices are not sorted and unique within each label row")
    return first, w, arrs["intercept"]


def _read_shard(path: Path, entry: dict[str, Any], n_features: int) -> tuple[int, sp.csr_matrix, np.ndarray]:
    fpath = path / entry["file"]
    raw = _read_verified(fpath, entry["sha256"])
    arrs = _load_npz(fpath, raw, _SHARD_KEYS)
    return _validate_shard(fpath, arrs, entry, n_features)


def read_extras(path: str | os.PathLike, m: dict[str, Any] | None = None
                ) -> tuple[Preprocessing, np.ndarray | None]:
    """Validated ``(Preprocessing, label_counts or None)`` of the model directory ``path``."""
    path = Path(path)
    m = read_manifest(path) if m is None else m
    n_features, label_space = m["n_features"], m["label_space"]
    fpath = path / PREPROCESSING_FILE
    arrs = _load_npz(fpath, _read_verified(fpath, m["extra_files"][PREPROCESSING_FILE]),
                     {"normalize"}, {"idf"})
    _check_array(fpath, "normalize", arrs["normalize"], np.bool_, shape=())
    normalize = bool(arrs["normalize"])
    if normalize != m["preprocessing"]["normalize"]:
        raise ModelFormatError(f"{fpath}: normalize={normalize} but the manifest says "
                               f"{m['preprocessing']['normalize']}")
    idf = arrs.get("idf")
    if (idf is not None) != m["preprocessing"]["tfidf"]:
        raise ModelFormatError(f"{fpath}: idf vector {'present' if idf is not None else 'absent'} but the "
                               f"manifest says tfidf={m['preprocessing']['tfidf']}")
    if idf is not None:
        _check_array(fpath, "idf", idf, np.float32, shape=(n_features,))
        if not np.all(np.isfinite(idf)):
            raise ModelFormatError(f"{fpath}: idf contains NaN or infinite values")
    fpath = path / LABEL_COUNTS_FILE
    arrs = _load_npz(fpath, _read_verified(fpath, m["extra_files"][LABEL_COUNTS_FILE]), set(), {"label_counts"})
    counts = arrs.get("label_counts")
    if counts is not None:
        _check_array(fpath, "label_counts", counts, np.int64, shape=(label_space,))
        if label_space and counts.min() < 0:
            raise ModelFormatError(f"{fpath}: negative label count")
    return Preprocessing(normalize=normalize, idf=idf), counts


def _extras_arrays(preprocessing: Preprocessing, label_counts: Any, n_features: int,
                   label_space: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    pre = {"normalize": np.asarray(bool(preprocessing.normalize))}
    if preprocessing.idf is not None:
        idf = np.asarray(preprocessing.idf, dtype=np.float32)
        if idf.shape != (n_features,):
            raise ModelFormatError(f"idf has shape {idf.shape}, expected ({n_features},)")
        if not np.all(np.isfinite(idf)):
            raise ModelFormatError("idf contains NaN or infinite values")
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


def _base_manifest(n_features: int, label_space: int, n_train: int, params: TrainParams,
                   preprocessing: Preprocessing) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME, "version": FORMAT_VERSION,
        "n_features": int(n_features), "label_space": int(label_space), "n_train": int(n_train),
        "params": params.to_dict(), "preprocessing": preprocessing.to_manifest(),
        "shards": [], "extra_files": {},
    }


# --------------------------------------------------------------------------- directory swap
def _prepare_target(path: Path, overwrite: bool = True) -> None:
    """Refuse a target that exists and is not replaceable."""
    if not path.exists() and not path.is_symlink():
        if not path.parent.is_dir():
            raise ModelFormatError(f"{path}: parent directory {path.parent} does not exist")
        return
    if not path.is_dir():
        raise ModelFormatError(f"{path}: exists and is not a directory; refusing to replace it")
    if not any(path.iterdir()):
        return
    if not _is_headstart_model(path):
        raise ModelFormatError(f"{path}: exists, is not empty and is not a headstart model; refusing to replace it")
    if not overwrite:
        raise ModelFormatError(f"{path}: a model already exists there (open it to resume, or remove it)")


def _install_dir(tmp: Path, path: Path) -> None:
    """Move the finished directory ``tmp`` to ``path``, replacing an existing model."""
    _fsync_dir(tmp)
    if path.exists() and any(path.iterdir()):
        old = path.parent / f".{path.name}.old-{uuid.uuid4().hex}"
        os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.replace(old, path)
            raise
        _fsync_dir(path.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)  # a missing or empty directory is replaced atomically
        _fsync_dir(path.parent)


@contextlib.contextmanager
def _building(path: Path) -> Iterator[Path]:
    """Yield a fresh temporary sibling directory; remove it if the body raises."""
    tmp = _temp_sibling(path)
    tmp.mkdir()
    (tmp / SHARD_DIR).mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_extras(tmp: Path, manifest: dict[str, Any], preprocessing: Preprocessing, label_counts: Any) -> None:
    pre, counts = _extras_arrays(preprocessing, label_counts, manifest["n_features"], manifest["label_space"])
    manifest["extra_files"] = {PREPROCESSING_FILE: _write_npz(tmp / PREPROCESSING_FILE, pre),
                               LABEL_COUNTS_FILE: _write_npz(tmp / LABEL_COUNTS_FILE, counts)}


def _write_shard_file(directory: Path, first_label: int, w: sp.csr_matrix, b: np.ndarray) -> dict[str, Any]:
    name = shard_file_name(first_label, w.shape[0])
    digest = _write_npz(directory / name, _shard_arrays(first_label, w, b))
    return {"file": name, "first_label": int(first_label), "num_labels": int(w.shape[0]),
            "nnz": int(w.nnz), "sha256": digest}


# --------------------------------------------------------------------------- public API
def save_model(model: OvAModel, path: str | os.PathLike, *, shard_size: int | None = None) -> None:
    """Write ``model`` to the directory ``path`` atomically.

    The labels are split into shards of at most ``shard_size`` labels (default: one
    shard).  An existing headstart model at ``path`` is replaced; any other non-empty
    directory or a file is refused with :class:`ModelFormatError`.
    """
    path = Path(os.path.abspath(path))
    if shard_size is not None and (not _is_int(shard_size) or shard_size < 1):
        raise ModelFormatError(f"shard_size must be an integer >= 1, got {shard_size!r}")
    what = f"model for {path}"
    w = _canonical_weights(model.weights, int(model.n_features), what)
    b = _canonical_intercept(model.intercept, w.shape[0], what)
    first, label_space = int(model.first_label), int(model.label_space)
    if first < 0 or first + w.shape[0] > label_space:
        raise ModelFormatError(f"{what}: {_fmt_range((first, first + w.shape[0]))} outside the label space "
                               f"[0, {label_space})")
    # labels listed in ``missing_ranges`` (a model loaded with allow_gaps) are not written
    covered = _missing(getattr(model, "missing_ranges", None) or [], first, first + w.shape[0])
    _prepare_target(path)
    manifest = _base_manifest(model.n_features, label_space, model.n_train, model.params, model.preprocessing)
    with _building(path) as tmp:
        _write_extras(tmp, manifest, model.preprocessing, model.label_counts)
        for a, z in covered:
            step = shard_size or (z - a)
            for s in range(a, z, step):
                e = min(s + step, z)
                manifest["shards"].append(
                    _write_shard_file(tmp, s, _row_view(w, s - first, e - first), b[s - first:e - first]))
        _write_json(tmp / MANIFEST, manifest)
        _install_dir(tmp, path)


def finished_ranges_of(manifest: dict[str, Any]) -> list[Range]:
    """Merged, sorted ``(start, stop)`` label ranges covered by the manifest's shards."""
    return _merge_ranges([(s["first_label"], s["first_label"] + s["num_labels"]) for s in manifest["shards"]])


def missing_ranges_of(manifest: dict[str, Any], first: int = 0, count: int | None = None) -> list[Range]:
    """Label ranges in ``[first, first+count)`` (default: the label space) not covered."""
    stop = manifest["label_space"] if count is None else first + count
    return _missing(finished_ranges_of(manifest), first, stop)


def iter_shards(path: str | os.PathLike, manifest: dict[str, Any] | None = None
                ) -> Iterator[tuple[int, sp.csr_matrix, np.ndarray]]:
    """Yield validated ``(first_label, weights_csr, intercept)`` shard by shard, in label order.

    Only one shard is in memory at a time (plus whatever the caller keeps).
    """
    path = Path(path)
    m = read_manifest(path) if manifest is None else manifest
    for entry in sorted(m["shards"], key=lambda s: s["first_label"]):
        yield _read_shard(path, entry, m["n_features"])


def load_model(path: str | os.PathLike, *, allow_gaps: bool = False) -> OvAModel:
    """Load and validate the model directory ``path`` into one :class:`OvAModel`.

    A model whose shards do not cover the whole label space raises
    :class:`ModelFormatError` listing the missing ranges, unless ``allow_gaps`` (see the
    module docstring for what the returned model looks like then).
    """
    path = Path(path)
    m = read_manifest(path)
    label_space, n_features = m["label_space"], m["n_features"]
    missing = missing_ranges_of(m)
    if missing and not allow_gaps:
        raise ModelFormatError(f"{path}: model is incomplete, missing {_ranges_text(missing)} of "
                               f"[0, {label_space}) (pass allow_gaps=True to load it anyway)")
    preprocessing, label_counts = read_extras(path, m)
    params = TrainParams.from_dict(m["params"])
    shards = list(iter_shards(path, m))
    lo = shards[0][0] if shards else 0
    blocks, intercepts, pos = [], [], lo
    for f, w, b in shards:
        if f > pos:  # a hole inside the covered span: empty rows, intercept 0
            blocks.append(sp.csr_matrix((f - pos, n_features), dtype=np.float32))
            intercepts.append(np.zeros(f - pos, dtype=np.float32))
        blocks.append(w)
        intercepts.append(b)
        pos = f + w.shape[0]
    if blocks:
        weights = sp.vstack(blocks, format="csr", dtype=np.float32)
        intercept = np.concatenate(intercepts).astype(np.float32, copy=False)
    else:
        weights = sp.csr_matrix((0, n_features), dtype=np.float32)
        intercept = np.zeros(0, dtype=np.float32)
    model = OvAModel(weights=weights, intercept=intercept, n_features=n_features, label_space=label_space,
                     first_label=lo, params=params, preprocessing=preprocessing,
                     label_counts=label_counts, n_train=m["n_train"])
    if missing:
        model.missing_ranges = missing  # type: ignore[attr-defined]
    return model


class ModelWriter:
    """Incremental writer of a sharded model (one process, any number of threads).

    ``ModelWriter.create`` makes a new model directory without shards;
    ``ModelWriter.open`` reopens one to resume.  :meth:`add_shard` is thread safe.
    """

    def __init__(self, path: str | os.PathLike, template: dict[str, Any]):
        self.path = Path(path)
        self._manifest = template
        self._lock = threading.Lock()
        self._pending: set[Range] = set()

    # ---- construction
    @classmethod
    def create(cls, path: str | os.PathLike, n_features: int, label_space: int, params: TrainParams,
               preprocessing: Preprocessing | None = None, label_counts: Any = None, n_train: int = 0,
               *, overwrite: bool = False) -> "ModelWriter":
        """Create an empty model directory atomically (refuses an existing model unless ``overwrite``)."""
        path = Path(os.path.abspath(path))
        for name, v in (("n_features", n_features), ("label_space", label_space), ("n_train", n_train)):
            if not _is_int(v) and not isinstance(v, np.integer) or v < 0:
                raise ModelFormatError(f"{name} must be an integer >= 0, got {v!r}")
        if not isinstance(params, TrainParams):
            raise ModelFormatError(f"params must be a TrainParams, got {type(params).__name__}")
        preprocessing = preprocessing or Preprocessing()
        _prepare_target(path, overwrite=overwrite)
        manifest = _base_manifest(n_features, label_space, n_train, params, preprocessing)
        with _building(path) as tmp:
            _write_extras(tmp, manifest, preprocessing, label_counts)
            _write_json(tmp / MANIFEST, manifest)
            _install_dir(tmp, path)
        return cls(path, manifest)

    @classmethod
    def open(cls, path: str | os.PathLike, params: TrainParams | None = None, *,
             n_features: int | None = None, label_space: int | None = None,
             verify: bool = True, clean: bool = True) -> "ModelWriter":
        """Reopen ``path`` to resume.

        ``params``/``n_features``/``label_space``, when given, must agree with the model
        (``threads`` may differ); the error names the first differing parameter and both
        values.  ``verify`` checks every listed file's checksum; ``clean`` deletes shard
        files not listed in the manifest and stale temporary files (left by a crash).
        """
        path = Path(path)
        m = read_manifest(path)
        if params is not None:
            diff = params_difference(m["params"], params)
            if diff:
                name, old, new = diff[0]
                more = f" (and {', '.join(d[0] for d in diff[1:])})" if len(diff) > 1 else ""
                raise ModelFormatError(f"{path}: cannot resume: parameter {name} is {old!r} in the model but "
                                       f"{new!r} now{more}")
        for name, v in (("n_features", n_features), ("label_space", label_space)):
            if v is not None and int(v) != m[name]:
                raise ModelFormatError(f"{path}: cannot resume: the model has {name}={m[name]} but the data "
                                       f"has {name}={v}")
        if verify:
            read_extras(path, m)
            for entry in m["shards"]:
                _read_verified(path / entry["file"], entry["sha256"])
        writer = cls(path, m)
        if clean:
            writer.clean()
        return writer

    # ---- queries
    @property
    def manifest(self) -> dict[str, Any]:
        with self._lock:
            return json.loads(json.dumps(self._manifest))

    @property
    def n_features(self) -> int:
        return self._manifest["n_features"]

    @property
    def label_space(self) -> int:
        return self._manifest["label_space"]

    @property
    def params(self) -> TrainParams:
        return TrainParams.from_dict(self._manifest["params"])

    def finished_ranges(self) -> list[Range]:
        with self._lock:
            return finished_ranges_of(self._manifest)

    def missing_ranges(self, first: int = 0, count: int | None = None) -> list[Range]:
        """Ranges of ``[first, first+count)`` (default: all labels) that have no shard yet."""
        with self._lock:
            return missing_ranges_of(self._manifest, first, count)

    def is_complete(self) -> bool:
        return not self.missing_ranges()

    # ---- changes
    def clean(self) -> list[Path]:
        """Delete unlisted shard files and stale temporaries; return what was removed."""
        removed = []
        with self._lock:
            listed = {Path(s["file"]).name for s in self._manifest["shards"]}
            pending = {Path(shard_file_name(a, b - a)).name for a, b in self._pending}
            for d in (self.path, self.path / SHARD_DIR):
                if not d.is_dir():
                    continue
                for f in d.iterdir():
                    if d == self.path and not _TEMP_RE.match(f.name):
                        continue
                    if (_SHARD_NAME_RE.match(f.name) and f.name not in listed and f.name not in pending) \
                            or (_TEMP_RE.match(f.name) and not self._pending):
                        if f.is_file():
                            f.unlink()
                            removed.append(f)
        return removed

    def add_shard(self, first_label: int, weights: Any, intercept: Any) -> dict[str, Any]:
        """Write the shard of labels ``[first_label, first_label + rows)`` and list it.

        The shard file is written atomically, then the manifest is rewritten atomically,
        so a listed shard is always complete.  Overlap with a finished or in-progress
        shard raises :class:`ModelFormatError`.  Returns the manifest entry.
        """
        what = f"{self.path}: shard at label {first_label}"
        w = _canonical_weights(weights, self.n_features, what)
        b = _canonical_intercept(intercept, w.shape[0], what)
        first_label = int(first_label)
        rng = (first_label, first_label + w.shape[0])
        if w.shape[0] < 1:
            raise ModelFormatError(f"{what}: a shard needs at least one label")
        if first_label < 0 or rng[1] > self.label_space:
            raise ModelFormatError(f"{what}: {_fmt_range(rng)} outside the label space [0, {self.label_space})")
        with self._lock:
            taken = [(s["first_label"], s["first_label"] + s["num_labels"]) for s in self._manifest["shards"]]
            for r in taken + sorted(self._pending):
                if r[0] < rng[1] and rng[0] < r[1]:
                    state = "finished" if r in taken else "in-progress"
                    raise ModelFormatError(f"{what}: {_fmt_range(rng)} overlaps the {state} shard {_fmt_range(r)}")
            self._pending.add(rng)
        try:
            (self.path / SHARD_DIR).mkdir(exist_ok=True)
            entry = _write_shard_file(self.path, first_label, w, b)
            with self._lock:
                shards = self._manifest["shards"] + [entry]
                shards.sort(key=lambda s: s["first_label"])
                new = dict(self._manifest, shards=shards)
                _write_json(self.path / MANIFEST, new)
                self._manifest = new
        finally:
            with self._lock:
                self._pending.discard(rng)
        return entry

    def __enter__(self) -> "ModelWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def merge_models(out_path: str | os.PathLike, shard_dirs: Sequence[str | os.PathLike], *,
                 allow_gaps: bool = False) -> dict[str, Any]:
    """Merge model directories covering disjoint label ranges into one model at ``out_path``.

    All inputs must agree on ``params`` (except ``threads``), ``n_features``,
    ``label_space``, ``n_train``, preprocessing (flags and idf vector) and label counts;
    their label ranges must not overlap; the union must cover the label space unless
    ``allow_gaps``.  Shard files are copied byte for byte after verification.  The output
    is written atomically (built aside, then renamed).  Returns the new manifest.
    """
    out_path = Path(os.path.abspath(out_path))
    dirs = [Path(d) for d in shard_dirs]
    if not dirs:
        raise ModelFormatError("merge_models: no model directories given")
    manifests = [read_manifest(d) for d in dirs]
    extras = [read_extras(d, m) for d, m in zip(dirs, manifests)]
    ref_dir, ref, (ref_pre, ref_counts) = dirs[0], manifests[0], extras[0]
    for d, m, (pre, counts) in zip(dirs[1:], manifests[1:], extras[1:]):
        for key in ("n_features", "label_space", "n_train", "preprocessing"):
            if m[key] != ref[key]:
                raise ModelFormatError(f"cannot merge: {key} is {ref[key]!r} in {ref_dir} but {m[key]!r} in {d}")
        diff = params_difference(ref["params"], m["params"])
        if diff:
            name, a, b = diff[0]
            raise ModelFormatError(f"cannot merge: parameter {name} is {a!r} in {ref_dir} but {b!r} in {d}")
        if (pre.idf is None) != (ref_pre.idf is None) or (
                pre.idf is not None and not np.array_equal(pre.idf, ref_pre.idf)):
            raise ModelFormatError(f"cannot merge: the tf-idf idf vectors of {ref_dir} and {d} differ")
        if (counts is None) != (ref_counts is None) or (
                counts is not None and not np.array_equal(counts, ref_counts)):
            raise ModelFormatError(f"cannot merge: label_counts of {ref_dir} and {d} differ "
                                   "(were they trained on the same data?)")
    entries = sorted(((s["first_label"], s["first_label"] + s["num_labels"], i, s)
                      for i, m in enumerate(manifests) for s in m["shards"]), key=lambda t: t[:3])
    for (a0, b0, i0, _), (a1, b1, i1, _) in zip(entries, entries[1:]):
        if a1 < b0:
            raise ModelFormatError(f"cannot merge: {_fmt_range((a0, b0))} of {dirs[i0]} overlaps "
                                   f"{_fmt_range((a1, b1))} of {dirs[i1]}")
    missing = _missing([(a, b) for a, b, _, _ in entries], 0, ref["label_space"])
    if missing and not allow_gaps:
        raise ModelFormatError(f"cannot merge: the merged model would miss {_ranges_text(missing)} of "
                               f"[0, {ref['label_space']}) (pass allow_gaps=True to merge anyway)")
    _prepare_target(out_path)
    manifest = dict(ref, shards=[], extra_files={})
    with _building(out_path) as tmp:
        _write_extras(tmp, manifest, ref_pre, ref_counts)
        for _, _, i, s in entries:
            raw = _read_verified(dirs[i] / s["file"], s["sha256"])
            _validate_shard(dirs[i] / s["file"], _load_npz(dirs[i] / s["file"], raw, _SHARD_KEYS), s,
                            ref["n_features"])
            with _atomic_write(tmp / s["file"], "wb") as fh:
                fh.write(raw)
            manifest["shards"].append(dict(s))
        _write_json(tmp / MANIFEST, manifest)
        _install_dir(tmp, out_path)
    return manifest
