"""Merging model directories that cover disjoint label ranges (pieces of one training run)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import ModelFormatError
from ..io.atomic import atomic_write
from .extras import read_extras, write_extras
from .manifest import (COSTS_KEY, DATA_DIGEST_KEY, OPTIONAL_MANIFEST_KEYS, RANGE_KEY, model_params_difference,
                       read_manifest, settings_of, write_manifest)
from .ranges import fmt_range, ranges_text, uncovered
from .shards import read_shard_checked
from .writer import new_model_dir


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
    for d, m in zip(dirs, manifests):
        if "tree" in m:
            raise ModelFormatError(f"cannot merge: {d} is a label tree (its outputs are the tree's nodes, "
                                   "not labels); a tree is trained whole, not by label ranges")
    for d, m, (pre, counts) in zip(dirs[1:], manifests[1:], extras[1:]):
        for key in ("n_features", "label_space", "n_train", "preprocessing", *OPTIONAL_MANIFEST_KEYS):
            if settings_of(m, key) != settings_of(ref, key):
                raise ModelFormatError(f"cannot merge: {key} is {ref.get(key)!r} in {ref_dir} but {m.get(key)!r} "
                                       f"in {d}")
        if DATA_DIGEST_KEY in m and DATA_DIGEST_KEY in ref and m[DATA_DIGEST_KEY] != ref[DATA_DIGEST_KEY]:
            raise ModelFormatError(f"cannot merge: {ref_dir} and {d} were trained on other data (same shapes "
                                   "and label counts, other values: the data's sha256 differs)")
        diff = model_params_difference(ref, m["params"], m.get(COSTS_KEY))
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
            raise ModelFormatError(f"cannot merge: {fmt_range((a0, b0))} of {dirs[i0]} overlaps "
                                   f"{fmt_range((a1, b1))} of {dirs[i1]}")
    missing = uncovered([(a, b) for a, b, _, _ in entries], 0, ref["label_space"])
    if missing and not allow_gaps:
        raise ModelFormatError(f"cannot merge: the merged model would miss {ranges_text(missing)} of "
                               f"[0, {ref['label_space']}) (allow_gaps=True, on the command line --allow-gaps, merges anyway)")
    manifest = dict(ref, shards=[], extra_files={})
    manifest.pop(RANGE_KEY, None)     # the parts' ranges: the merged model is the label space's
    with new_model_dir(out_path) as tmp:
        write_extras(tmp, manifest, ref_pre, ref_counts)
        for _, _, i, s in entries:
            raw, _ = read_shard_checked(dirs[i], s, ref["n_features"])
            with atomic_write(tmp / s["file"], "wb") as fh:
                fh.write(raw)
            manifest["shards"].append(dict(s))
        write_manifest(tmp, manifest)
    return manifest
