"""``headstart info MODEL_DIR|DATA``: what a model or a data file holds."""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

import numpy as np

from . import common

log = logging.getLogger(__name__)

NAME = "info"
HELP = "describe a model directory or a data file"
DESCRIPTION = """\
For a data file: format, instances, features, labels, nonzeros and a label frequency
summary (how many tail labels).  For a model directory: label space and covered labels,
features, weights, size on disk, preprocessing and training parameters.  For a text
vectorizer directory ('headstart convert --fit-vectorizer'): features, labels and its
tf-idf settings.  For a .npy file without --labels: its shape and dtype (from its header)
and what it can be used as."""

#: a label with at most this many positives counts as a tail label
TAIL = 5


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="MODEL_DIR|DATA", help="model directory or data file")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--verify", action="store_true",
                   help="a model directory: check every file against the checksum in its manifest (reads all "
                        "weights); without it, that every listed file is there and whole (its archive index "
                        "readable)")
    common.add_data_options(p)


def label_frequency(counts: np.ndarray, labels: int | None = None) -> dict:
    """Summary of per-label positive counts: one per label, or (with ``labels``, the size
    of the label space) those of the labels that occur only -- a header may declare 2e9
    labels, and a count per label would take 16 GB."""
    counts = np.asarray(counts, dtype=np.int64)
    if labels is None:
        labels = int(counts.size)
    counts = np.sort(counts[counts > 0])
    L, zeros = int(labels), int(labels) - int(counts.size)
    if L == 0:
        return {"labels": 0}

    def at(p: int) -> float:        # the p-th smallest of all L counts
        return 0.0 if p < zeros else float(counts[p - zeros])

    return {
        "labels": L,
        "labels_without_positives": zeros,
        "tail_labels": zeros + int(np.sum(counts <= TAIL)),
        "tail_max_positives": TAIL,
        "median_positives": (at((L - 1) // 2) + at(L // 2)) / 2,
        "mean_positives": float(counts.sum()) / L,
        "max_positives": int(counts[-1]) if counts.size else 0,
    }


def data_info(path: str, args: argparse.Namespace) -> dict:
    from .. import io as hio

    fmt = args.data_format
    if fmt == "auto":
        fmt = "slice" if args.labels_file else hio.detect_format(path)
    X, Y = common.read_dataset(path, args)
    n, d = X.shape
    nnz = int(X.nnz) if hasattr(X, "nnz") else int(np.count_nonzero(X))
    per_row = np.diff(Y.indptr) if n else np.zeros(0)
    return {
        "kind": "data", "path": path, "format": fmt,
        "instances": int(n), "features": int(d), "labels": int(Y.shape[1]),
        "feature_nonzeros": nnz,
        "mean_features_per_instance": nnz / n if n else 0.0,
        "label_nonzeros": int(Y.nnz),
        "mean_labels_per_instance": float(Y.nnz / n) if n else 0.0,
        "instances_without_labels": int(np.sum(per_row == 0)),
        "label_frequency": label_frequency(np.unique(Y.indices, return_counts=True)[1], Y.shape[1]),
        "file_bytes": os.path.getsize(path),
    }


def vectorizer_info(path: str) -> dict:
    """A text vectorizer directory (headstart.io.text): what it turns text into."""
    from ..io.text import TextVectorizer

    v = TextVectorizer.load(path)
    return {
        "kind": "vectorizer", "path": path,
        "made_by": "'headstart convert TRAIN.txt OUT --fit-vectorizer DIR' (LibMultiLabel raw text to tf-idf "
                   "features); apply it with 'headstart convert TEST.txt OUT --vectorizer DIR'",
        "features": len(v.vocabulary), "labels": len(v.label_names),
        "first_terms": ", ".join(v.vocabulary[:8]) + (", ..." if len(v.vocabulary) > 8 else ""),
        "first_labels": ", ".join(v.label_names[:8]) + (", ..." if len(v.label_names) > 8 else ""),
        "idf": {"shape": list(v.idf.shape), "min": float(v.idf.min()) if v.idf.size else 0.0,
                "max": float(v.idf.max()) if v.idf.size else 0.0},
        "settings": v.settings,
        "disk_bytes": sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()),
    }


def npy_info(path: str) -> dict:
    """A .npy file described from its header alone (nothing is loaded, nothing unpickled):
    shape, dtype, whether the file holds all the values the header claims, and what
    headstart can use it as."""
    from numpy.lib import format as npf

    from ..errors import DataFormatError

    try:
        with open(path, "rb") as f:
            version = npf.read_magic(f)
            shape, fortran, dtype = (npf.read_array_header_1_0(f) if version == (1, 0)
                                     else npf.read_array_header_2_0(f))
            offset = f.tell()
    except (OSError, ValueError) as e:
        raise DataFormatError(f"not a readable .npy file: {e}", path) from None
    size = os.path.getsize(path)
    claimed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    real = dtype.kind in "biuf" and not dtype.hasobject and not dtype.fields
    if len(shape) == 2 and real:
        use = (f"dense features (slice format) of {shape[0]} instances x {shape[1]} features: with their label "
               "file, 'headstart info X.npy --labels Y.txt' describes them as data (and train / predict read them "
               "so)")
    elif len(shape) == 1 and real:
        use = (f"a vector of {shape[0]} values, not dense features (they are 2-d): e.g. thresholds, one per "
               "label ('headstart thresholds -o FILE.npy', for 'predict --thresholds')")
    else:
        use = "not dense features: headstart reads 2-d arrays of real or integer values"
    out = {"kind": "npy", "path": path, "shape": list(shape), "dtype": str(dtype),
           "order": "Fortran (column-major)" if fortran else "C (row-major)", "use": use,
           "file_bytes": size}
    from ..io.labelvec import read_label_header, sidecar

    header = read_label_header(path) if real else None
    if header is not None:   # thresholds written by headstart: what they were made for
        out["made_for"] = f"{header.get('made_by', 'headstart')} (its header: {sidecar(path)})"
    if dtype.hasobject:
        out["warning"] = "an object array (pickled Python objects): headstart never loads it (allow_pickle=False)"
    elif offset + claimed > size:
        out["damaged"] = f"truncated: the header claims {claimed} bytes of values, the file holds {size - offset}"
    return out


def damaged_files(path: str, manifest: dict, verify: bool = False) -> list[str]:
    """The shard files of a model directory that its manifest lists but that are missing,
    truncated (an .npz whose archive index cannot be read: cheap, the end of the file) or,
    with ``verify``, whose sha256 differs from the manifest's (reads every shard).  The
    extra files are not among them: :func:`read_extras` has verified them already."""
    import zipfile

    from ..errors import ModelFormatError
    from ..model.archive import read_verified

    bad = []
    for name, sha in ((s["file"], s["sha256"]) for s in manifest["shards"]):
        f = Path(path) / name
        if not f.is_file():
            bad.append(f"{name}: missing")
            continue
        try:
            if verify:
                read_verified(f, sha)
            else:
                with zipfile.ZipFile(f) as z:
                    z.namelist()
        except ModelFormatError as e:
            bad.append(f"{name}: {str(e).split(': ', 1)[-1]}")
        except (OSError, zipfile.BadZipFile) as e:
            bad.append(f"{name}: not a whole .npz archive ({e})")
    return bad


def model_info(path: str, verify: bool = False) -> dict:
    from ..model.extras import read_extras
    from ..model.manifest import RANGE_KEY, read_manifest
    from ..model.ranges import finished_ranges_of, missing_ranges_of, unfinished_ranges_of
    from ..tree.ensemble import is_ensemble

    if is_ensemble(path):
        return ensemble_info(path)
    m = read_manifest(path)
    _, counts = read_extras(path, m)
    size = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    out = {
        "kind": "model", "path": path,
        "label_space": m["label_space"], "features": m["n_features"], "trained_on_instances": m["n_train"],
        "labels_trained": sum(s["num_labels"] for s in m["shards"]),
        "covered_ranges": [list(r) for r in finished_ranges_of(m)],
        "missing_ranges": [list(r) for r in missing_ranges_of(m)],
        # the labels the run that wrote the model was asked for, and what of them a time
        # budget or a kill left (--resume finishes those); absent in merged and older models
        **({"asked_range": [list(m[RANGE_KEY])], "unfinished_ranges": [list(r) for r in unfinished_ranges_of(m)]}
           if m.get(RANGE_KEY) is not None else {}),
        "shards": len(m["shards"]),
        "nonzero_weights": sum(s["nnz"] for s in m["shards"]),
        "disk_bytes": size,
        "preprocessing": m["preprocessing"],
        "params": m["params"],
    }
    if isinstance(m.get("input"), dict) and "n_features" in m["input"]:
        # a hashed model saved by OvAClassifier: the width of the X it was fitted on, before
        # hashing ("features" is the hashed width; estimator.input_width_from_json)
        out["input_features"] = m["input"]["n_features"]
    if "classes" in m:
        # fitted on one class per row (OvAClassifier with a 1-D y): label j is class j, or
        # with two classes the one label is the second
        values = m["classes"].get("values", [])
        shown = ", ".join(map(str, values[:10])) + (", ..." if len(values) > 10 else "")
        out["classes"] = f"{len(values)} ({shown}): " + (
            "the one label is the second class" if len(values) == 2 else "label j is class j")
    if "tree" in m:
        # a label tree (headstart.tree): its rows are the nodes' outputs, not labels; the
        # tree is in the manifest (the weights are not read)
        from ..model.manifest import MANIFEST
        from ..tree.model import label_counts_of, tree_from_manifest

        tr, num_labels = tree_from_manifest(str(Path(path) / MANIFEST), m["tree"], m["label_space"])
        out["label_tree"] = {"labels": num_labels, "outputs (rows of the weights)": tr.num_outputs,
                             "nodes": tr.num_nodes, "leaves": int(tr.leaf.sum()), "depth": int(tr.depth.max()),
                             "branching": m["tree"]["branching"], "max_depth": m["tree"]["max_depth"],
                             "seed": m["tree"]["seed"]}
        counts = label_counts_of(tr, counts, num_labels)
        # the label space is the tree's labels; the manifest's counts and ranges are of
        # its outputs (nodes and leaves), kept in the tree's part
        out["label_tree"]["outputs trained"] = out.pop("labels_trained")
        if out["missing_ranges"]:
            out["label_tree"]["outputs missing"] = out["missing_ranges"]
        out["label_space"] = num_labels
        for key in ("covered_ranges", "missing_ranges", "asked_range", "unfinished_ranges"):
            out.pop(key, None)
    if counts is not None:
        out["training_label_frequency"] = label_frequency(counts)
    if m["n_train"] == 0:
        # no training run made it (import-dismec, or an OvAModel built in memory and saved):
        # its "params" are the defaults plus what its preprocessing says, not how it was trained
        out["training"] = ("not recorded (imported, e.g. from DiSMEC++, whose files hold no training options): the "
                           "training parameters below are headstart's defaults apart from the preprocessing")
    bad = damaged_files(path, m, verify)
    if bad:
        out["damaged_files"] = bad
    return out


def ensemble_info(path: str) -> dict:
    """An ensemble of label trees: the first tree's description, each tree's shape -- from
    the trees' manifests, as for one tree (the weights are not read)."""
    from ..tree.ensemble import check_members, read_index

    names, num_labels = read_index(path)
    trees = [model_info(str(Path(path) / name)) for name in names]
    # the checks loading makes, from the manifests (helper-62: predict refused what info described)
    check_members(path, names, num_labels, [(t["label_tree"]["labels"], t["features"], t["preprocessing"])
                                            for t in trees])
    first = trees[0]
    out = {**first, "path": path, "disk_bytes": sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()),
           "nonzero_weights": sum(t["nonzero_weights"] for t in trees)}
    out["label_tree"] = {"trees": len(trees), "labels": first["label_tree"]["labels"],
                         "outputs (rows of the weights)": sum(t["label_tree"]["outputs (rows of the weights)"]
                                                              for t in trees),
                         "nodes": "/".join(str(t["label_tree"]["nodes"]) for t in trees),
                         **{key: first["label_tree"][key] for key in ("branching", "max_depth")},
                         "seeds": "/".join(str(t["label_tree"]["seed"]) for t in trees)}
    out["label_tree"].pop("outputs trained", None)
    out["label_tree"].pop("outputs missing", None)
    out.pop("shards", None)
    return out


def _text(info: dict) -> str:
    lines = []
    skip = {"kind", "path", "params"}
    title = {"model": "model directory", "vectorizer": "text vectorizer directory",
             "npy": "numpy .npy array"}.get(info["kind"]) or f"{info['format']} data file"
    lines.append(f"{info['path']}: {title}")
    for key, value in info.items():
        if key in skip:
            continue
        if key.endswith("bytes"):
            value = f"{common.human_bytes(value)} ({value} bytes)"
        if isinstance(value, dict):
            lines.append(f"  {key.replace('_', ' ')}:")
            for k2, v2 in value.items():
                if k2 == "tail_max_positives":
                    continue
                if k2 == "tail_labels":
                    k2 = f"tail labels (<= {value.get('tail_max_positives', TAIL)} positives)"
                v2 = f"{v2:.2f}" if isinstance(v2, float) else " x ".join(map(str, v2)) if k2 == "shape" else v2
                lines.append(f"    {k2.replace('_', ' ')}: {v2}")
            continue
        if isinstance(value, float):
            value = f"{value:.2f}"
        if key == "damaged_files":
            lines.append("  damaged files:")
            lines += [f"    {v}" for v in value]
            continue
        if key == "shape":
            value = " x ".join(map(str, value)) or "() (a scalar)"
        elif isinstance(value, list):
            value = ", ".join(f"[{a}, {b})" for a, b in value) or "none"
        lines.append(f"  {key.replace('_', ' ')}: {value}")
    if "params" in info:
        lines.append("  training parameters:")
        for k2, v2 in sorted(info["params"].items()):
            lines.append(f"    {k2}: {v2}")
    return "\n".join(lines)


#: what info says of headstart files that are neither data nor a model (common.sniff_kind)
_OTHER_KINDS = {
    "first-stage": ("a first stage saved by 'headstart shortlist --save-first-stage' (for 'headstart "
                    "shortlist-predict --first-stage'), not a model directory"),
    "dismec-model": "a DiSMEC++ model (metadata) file: make it a headstart model with 'headstart import-dismec'",
    "predictions": ("a predictions file written by 'headstart predict' (evaluate it with 'headstart evaluate "
                    "--predictions')"),
    "decisions": ("a file whose header is two numbers: a decisions file ('headstart predict --threshold'), a "
                  "shortlist ('headstart shortlist', instances x labels) or DiSMEC++'s predictions, not a data "
                  "file (an XMC header has three)"),
    "thresholds": "a list of one number per line, e.g. thresholds ('headstart thresholds'), not a data file",
    "npz": "a numpy .npz archive, not a data file (info describes data files and model directories)",
    "json": "a JSON file, not a data file (info describes data files and model directories)",
}


def _bare_npy(args: argparse.Namespace) -> bool:
    """A .npy file (by its magic bytes) without the label file that would make it data."""
    from ..io._common import NPY_MAGIC

    if getattr(args, "labels_file", None) or args.data_format not in ("auto", "slice"):
        return False
    try:
        with open(args.path, "rb") as f:
            return f.read(len(NPY_MAGIC)) == NPY_MAGIC
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    p = Path(args.path)
    # (tab-separated label names are not told apart from an XMC file with tabs between
    # its tokens, which is legal: such a file is read, and fails there if it is not data)
    kind = common.sniff_kind(args.path) if args.data_format == "auto" else None
    if kind == "decisions" and getattr(args, "labels_file", None):
        kind = None   # 'rows cols' with a label file: DiSMEC++'s dense text matrix (slice), as train reads it
    if kind == "model-part":
        from ..errors import DataFormatError

        model_dir = common.model_dir_of(args.path)
        raise DataFormatError(f"this file is part of the model directory {model_dir}: "
                              f"describe the model with 'headstart info {model_dir}'", args.path)
    other = _OTHER_KINDS.get(kind)
    if other is not None:
        from ..errors import DataFormatError

        raise DataFormatError(f"this is {other}", args.path)
    from ..io.text import VECTORIZER_FILES

    index = VECTORIZER_FILES[0]
    vectorizer = p.parent if p.is_file() and (p.parent / index).is_file() else None
    if vectorizer is not None and p.name in VECTORIZER_FILES:
        from ..errors import DataFormatError

        raise DataFormatError(f"this file is part of the text vectorizer directory {vectorizer}: describe it with "
                              f"'headstart info {vectorizer}'", args.path)
    if p.is_dir() and (p / index).is_file():
        info = vectorizer_info(args.path)
    elif p.is_dir():
        info = model_info(args.path, args.verify)
    elif _bare_npy(args):
        info = npy_info(args.path)
    else:
        info = data_info(args.path, args)
    print(json.dumps(info, indent=1) if args.json else _text(info))
    if info.get("damaged"):
        log.error("%s: the array is damaged (%s): no reader takes it", args.path, info["damaged"])
        return 2
    if info.get("damaged_files"):
        log.error("%s: the model is damaged: %d file(s) listed in its manifest are missing or not as written "
                  "(predict and --resume refuse it; retrain the labels of those shards into a new directory, "
                  "or restore the files)", args.path, len(info["damaged_files"]))
        return 2
    return 0
