"""``manifest.json``: the schema, its validation and its (atomic) writing.

The manifest is the single source of truth of a model directory: which files belong to
it, with which checksums, and which labels are finished (its ``shards`` list).  See
:mod:`headstart.model.format` for the whole layout.  :func:`read_manifest` checks every
field before anything else is read, so a forged manifest cannot make a reader allocate
absurd sizes or open files outside the directory (shard file names must follow the
naming pattern of :func:`shard_file_name`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Sequence

from ..errors import ModelFormatError, ParameterError
from ..io.atomic import atomic_write
from ..params import TRANSFORMS, TrainParams
from .model import Preprocessing
from .ranges import fmt_range

log = logging.getLogger(__name__)

FORMAT_NAME = "headstart-model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SHARD_DIR = "shards"
PREPROCESSING_FILE = "preprocessing.npz"
LABEL_COUNTS_FILE = "label_counts.npz"
EXTRA_FILES = (PREPROCESSING_FILE, LABEL_COUNTS_FILE)
#: the training statistics of each shard (headstart.training.stats), beside the shards
STATS_DIR = "stats"
#: parameters that may differ between pieces of one model (they do not change the weights)
IGNORED_PARAMS = ("threads", "timeout", "share_lanes")
#: largest n_features / label_space (feature and label ids are int32, as in headstart.io)
MAX_DIM = 2**31 - 1

#: a shard file's name inside ``shards/``
SHARD_NAME_RE = re.compile(r"^labels-(\d{7,})-(\d{7,})\.npz$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_MANIFEST_KEYS = {"format", "version", "n_features", "label_space", "n_train", "params",
                  "preprocessing", "shards", "extra_files"}
_SHARD_ENTRY_KEYS = {"file", "first_label", "num_labels", "nnz", "sha256"}
#: optional manifest fields of model variants, each a JSON object validated by its owner
#: (``dense``: dense + sparse features, ``shortlist``: shortlisted training, see
#: headstart.shortlist; ``tree``: a label tree whose outputs are the rows, see
#: headstart.tree); absent for plain one-vs-all models
# "classes": the class values of a model fitted on one class per instance
# (OvAClassifier.fit with a 1-D y), label j being classes[j] (or, with two classes, the
# one label being the second class)
# "input": {"n_features": N}, the width of the X an OvAClassifier with feature hashing was
# fitted on (its n_features_in_) where it differs from the hashed width n_features; a
# model without it takes its input's width to be n_features
OPTIONAL_MANIFEST_KEYS = ("dense", "shortlist", "tree", "classes", "input")


def settings_of(m: dict[str, Any], key: str) -> Any:
    """The optional field ``key`` of manifest ``m`` as resuming and merging compare it:
    the shortlist by its contents (nnz, sha256), not by the path it was read from
    (``source``: the same file typed another way, or copied, is the same shortlist)."""
    v = m.get(key)
    if key == "shortlist" and isinstance(v, dict):
        v = {k: x for k, x in v.items() if k != "source"}
    return v
#: optional: sha256 of the preprocessed training data (:meth:`headstart.estimator.PreparedData.digest`),
#: so that resuming or merging refuses a model trained on other data of the same shapes;
#: absent in models written before it existed (then not checked)
DATA_DIGEST_KEY = "data_sha256"
#: optional: [first, stop), the labels the run that made the model was asked to train (a
#: label range is a finished model of its range; labels of it not trained -- a time
#: budget ran out -- make it unfinished: ranges.unfinished_ranges_of)
RANGE_KEY = "label_range"
#: optional, with weighting 'file': {"pos": sha256 or null, "neg": ...} of the cost vectors
#: read from the files (resuming and merging compare these, not the paths, which differ
#: between jobs started in other directories and stay the same when a file is rewritten)
COSTS_KEY = "costs_sha256"
COST_FILE_PARAMS = ("weights_pos_file", "weights_neg_file")
_PREPROCESSING_KEYS = {"normalize", "tfidf", "transform", "hash"}


def shard_file_name(first_label: int, num_labels: int) -> str:
    """Relative path of the shard holding labels ``[first_label, first_label+num_labels)``."""
    return f"{SHARD_DIR}/labels-{first_label:07d}-{first_label + num_labels - 1:07d}.npz"


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _complete_params(p: TrainParams | dict) -> dict[str, Any]:
    """Every parameter with its value: one missing from a dict (a model written before the
    parameter existed) takes its default (a new parameter's default keeps the old behaviour)."""
    if isinstance(p, TrainParams):
        return p.to_dict()
    try:
        return TrainParams.from_dict(dict(p)).to_dict()
    except (ParameterError, TypeError):
        return dict(p)


def params_difference(a: TrainParams | dict, b: TrainParams | dict,
                      ignore: Sequence[str] = IGNORED_PARAMS) -> list[tuple[str, Any, Any]]:
    """``[(name, value_in_a, value_in_b), ...]`` for every parameter that differs."""
    da, db = _complete_params(a), _complete_params(b)
    out = []
    for name in sorted(set(da) | set(db)):
        if name in ignore:
            continue
        va, vb = da.get(name), db.get(name)
        if va != vb:
            out.append((name, va, vb))
    return out


def costs_digest(params: TrainParams | dict, label_space: int) -> dict[str, str | None] | None:
    """The sha256 of the cost vectors of weighting 'file' (:data:`COSTS_KEY`), or None
    without it or when a file cannot be read any more (then the paths are compared)."""
    import hashlib

    import numpy as np

    from ..objective.weighting import read_costs

    p = params if isinstance(params, dict) else params.to_dict()
    if p.get("weighting") != "file":
        return None
    out: dict[str, str | None] = {}
    for side, name in (("pos", "weights_pos_file"), ("neg", "weights_neg_file")):
        out[side] = None
        if p.get(name):
            try:
                v = read_costs(p[name], int(label_space))
            except (OSError, ParameterError, ValueError):
                return None
            out[side] = hashlib.sha256(np.ascontiguousarray(v, dtype=np.float64).data).hexdigest()
    return out


def model_params_difference(manifest: dict[str, Any], params: TrainParams | dict,
                            digest: dict[str, str | None] | None) -> list[tuple[str, Any, Any]]:
    """:func:`params_difference` of a model's parameters and ``params``, whose cost files
    have the digest ``digest`` (:func:`costs_digest`): where both digests are known the
    cost files are compared by content, not by path."""
    known = manifest.get(COSTS_KEY)
    if known is None or digest is None:
        return params_difference(manifest["params"], params)
    diff = params_difference(manifest["params"], params, ignore=(*IGNORED_PARAMS, *COST_FILE_PARAMS))
    if known != digest:
        diff.insert(0, ("weights_*_file (the costs' sha256)", known, digest))
    return diff


def base_manifest(n_features: int, label_space: int, n_train: int, params: TrainParams,
                  preprocessing: Preprocessing, extensions: dict[str, Any] | None = None,
                  data_sha256: str | None = None, label_range: tuple[int, int] | None = None) -> dict[str, Any]:
    """The manifest of a model without shards and with the extra files not yet written;
    ``extensions``: the optional fields of a model variant (OPTIONAL_MANIFEST_KEYS);
    ``data_sha256``: the training data's digest (DATA_DIGEST_KEY); ``label_range``: the
    labels the run is to train (RANGE_KEY)."""
    m = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION,
        "n_features": int(n_features), "label_space": int(label_space), "n_train": int(n_train),
        "params": params.to_dict(), "preprocessing": preprocessing.to_manifest(),
        "shards": [], "extra_files": {},
    }
    for key, value in (extensions or {}).items():
        if key not in OPTIONAL_MANIFEST_KEYS or not isinstance(value, dict):
            raise ModelFormatError(f"unknown model extension {key!r} (known: {', '.join(OPTIONAL_MANIFEST_KEYS)})")
        m[key] = json.loads(json.dumps(value))
    if data_sha256 is not None:
        m[DATA_DIGEST_KEY] = str(data_sha256)
    if label_range is not None:
        m[RANGE_KEY] = [int(label_range[0]), int(label_range[1])]
    costs = costs_digest(params, label_space)
    if costs is not None:
        m[COSTS_KEY] = costs
    return m


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` of ``directory`` atomically."""
    text = json.dumps(manifest, indent=1) + "\n"
    with atomic_write(Path(directory) / MANIFEST, "wb") as fh:
        fh.write(text.encode("utf-8"))


def _json_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _validate_preprocessing(where: Path, pre: Any, n_features: int) -> dict[str, Any]:
    """The ``preprocessing`` field with every key present (a manifest written before value
    transforms and hashing existed has only ``normalize`` and ``tfidf``: it means neither)."""
    if (not isinstance(pre, dict) or not {"normalize", "tfidf"} <= set(pre) <= _PREPROCESSING_KEYS
            or not all(isinstance(pre[k], bool) for k in ("normalize", "tfidf"))):
        raise ModelFormatError(f"{where}: field 'preprocessing' must be "
                               f'{{"normalize": bool, "tfidf": bool, "transform": str, "hash": null or '
                               f'{{"buckets": int, "functions": int, "seed": int}}}}, got {pre!r}')
    pre = {"transform": "identity", "hash": None, **pre}
    if pre["transform"] not in TRANSFORMS:
        raise ModelFormatError(f"{where}: preprocessing.transform is {pre['transform']!r}, expected one of "
                               f"{', '.join(TRANSFORMS)}")
    h = pre["hash"]
    if h is not None:
        if not isinstance(h, dict) or set(h) != {"buckets", "functions", "seed"} or not all(
                is_int(v) for v in h.values()):
            raise ModelFormatError(f"{where}: preprocessing.hash must be null or "
                                   f'{{"buckets": int, "functions": int, "seed": int}}, got {h!r}')
        if h["buckets"] < 1 or h["functions"] < 1 or not 0 <= h["seed"] < 2**32:
            raise ModelFormatError(f"{where}: preprocessing.hash needs buckets >= 1, functions >= 1 and a seed "
                                   f"in [0, 2^32), got {h!r}")
        if h["buckets"] * h["functions"] != n_features:
            raise ModelFormatError(f"{where}: preprocessing.hash has {h['buckets']} buckets x {h['functions']} "
                                   f"functions but the model hashes {n_features} features (they must be equal)")
    return pre


def validate_manifest(path: Path, m: Any) -> dict[str, Any]:
    """Return the manifest ``m`` of the model directory ``path`` if every field is valid."""
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
    extra = set(m) - _MANIFEST_KEYS - set(OPTIONAL_MANIFEST_KEYS) - {DATA_DIGEST_KEY, RANGE_KEY, COSTS_KEY}
    if extra:
        raise ModelFormatError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
    for key in ("n_features", "label_space", "n_train"):
        if not is_int(m[key]) or m[key] < 0:
            raise ModelFormatError(f"{where}: field {key!r} must be an integer >= 0, got {m[key]!r}")
    for key in ("n_features", "label_space"):  # a claim must not make a reader allocate 10**12 of anything
        if m[key] > MAX_DIM:
            raise ModelFormatError(f"{where}: field {key!r} is {m[key]}, more than the supported maximum "
                                   f"{MAX_DIM} (ids are int32)")
    if not isinstance(m["params"], dict):
        raise ModelFormatError(f"{where}: field 'params' must be an object")
    for key in OPTIONAL_MANIFEST_KEYS:
        if key in m and not isinstance(m[key], dict):
            raise ModelFormatError(f"{where}: field {key!r} must be an object")
    if DATA_DIGEST_KEY in m and not (isinstance(m[DATA_DIGEST_KEY], str) and _SHA_RE.match(m[DATA_DIGEST_KEY])):
        raise ModelFormatError(f"{where}: field {DATA_DIGEST_KEY!r} must be a sha256 hex digest, got "
                               f"{m[DATA_DIGEST_KEY]!r}")
    if RANGE_KEY in m:
        r = m[RANGE_KEY]
        if not (isinstance(r, list) and len(r) == 2 and all(is_int(v) for v in r)
                and 0 <= r[0] <= r[1] <= m["label_space"]):
            raise ModelFormatError(f"{where}: field {RANGE_KEY!r} must be [first, stop) with "
                                   f"0 <= first <= stop <= label_space, got {r!r}")
    if COSTS_KEY in m:
        c = m[COSTS_KEY]
        if not (isinstance(c, dict) and set(c) == {"pos", "neg"}
                and all(v is None or (isinstance(v, str) and _SHA_RE.match(v)) for v in c.values())):
            raise ModelFormatError(f"{where}: field {COSTS_KEY!r} must be {{'pos': sha256 or null, 'neg': ...}}, "
                                   f"got {c!r}")
    try:
        TrainParams.from_dict(m["params"])
    except (ParameterError, TypeError) as e:
        raise ModelFormatError(f"{where}: invalid params: {e}") from None
    # the preprocessing's columns: a dense + sparse model (headstart.shortlist) hashes its
    # sparse part only, the first n_sparse of its columns
    dense = m.get("dense")
    width = dense["n_sparse"] if isinstance(dense, dict) and is_int(dense.get("n_sparse")) else m["n_features"]
    m["preprocessing"] = _validate_preprocessing(where, m["preprocessing"], width)
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
            if not is_int(s[key]) or s[key] < 0:
                raise ModelFormatError(f"{where}: shards[{i}].{key} must be an integer >= 0, got {s[key]!r}")
        first, num = s["first_label"], s["num_labels"]
        if num < 1 or first + num > label_space:
            raise ModelFormatError(f"{where}: shards[{i}] covers {fmt_range((first, first + num))}, "
                                   f"outside the label space [0, {label_space}) or empty")
        if not isinstance(s["file"], str) or s["file"] != shard_file_name(first, num):
            raise ModelFormatError(f"{where}: shards[{i}].file is {s['file']!r}, expected "
                                   f"{shard_file_name(first, num)!r} for {fmt_range((first, first + num))}")
        if not isinstance(s["sha256"], str) or not _SHA_RE.match(s["sha256"]):
            raise ModelFormatError(f"{where}: shards[{i}].sha256 is not a sha256 hex digest")
        ranges.append((first, first + num, i))
    ranges.sort()
    for (a0, b0, i0), (a1, b1, i1) in zip(ranges, ranges[1:]):
        if a1 < b0:
            raise ModelFormatError(f"{where}: shards[{i0}] ({fmt_range((a0, b0))}) and shards[{i1}] "
                                   f"({fmt_range((a1, b1))}) overlap")
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
        if (path / "ensemble.json").is_file():       # headstart.tree.ensemble's directory
            raise ModelFormatError(f"{path} is an ensemble of label trees ('headstart tree --trees'): predict, "
                                   "evaluate and info read it; each of its tree-* directories is a model") from None
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
    m = validate_manifest(path, m)
    _warn_stale_dense_preprocessing(path, m)
    return m


_STALE_WARNED: set[str] = set()


def _warn_stale_dense_preprocessing(path: Path, m: dict[str, Any]) -> None:
    """Until 2026-11-30 a dense + sparse model (headstart.shortlist) trained with a value
    transform or hashing of its sparse part did not record it: it scores raw sparse
    features, silently.  Such a model is said so (once per directory), not refused: its
    weights are whole, and a caller may preprocess the data itself."""
    if "dense" not in m:
        return
    p, pre = m["params"], m["preprocessing"]
    lost = []
    if p.get("feature_transform", "identity") != pre["transform"]:
        lost.append(f"--transform {p['feature_transform']}")
    if p.get("hash_buckets", 0) and pre["hash"] is None:
        lost.append(f"--hash-buckets {p['hash_buckets']}")
    key = os.path.abspath(path)
    if lost and key not in _STALE_WARNED:
        _STALE_WARNED.add(key)
        log.warning("%s: this dense + sparse model was trained with %s, which its manifest does not record "
                    "(a model written before 2026-11-30): prediction gives it the sparse features without "
                    "that preprocessing; train it again", path, " and ".join(lost))


def is_headstart_model(path: Path) -> bool:
    """True when ``path`` holds a manifest that says it is a headstart model (not validated)."""
    try:
        with open(path / MANIFEST, "rb") as fh:
            m = json.loads(fh.read().decode("utf-8"))
        return isinstance(m, dict) and m.get("format") == FORMAT_NAME
    except (OSError, ValueError):
        return False
