"""Merging separately trained model directories into one model.

:func:`headstart.model.merge.merge_models` does the checking (parameters, feature
space, label space, training set size, preprocessing, label counts, overlaps, gaps) and
the atomic copy of the shards.  This module adds the per-shard training statistics
(``stats/``, see :mod:`.sharded`) and a summary of what was merged.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..io.atomic import atomic_write
from ..model.manifest import read_manifest
from ..model.merge import merge_models
from ..model.ranges import missing_ranges_of
from ..training.stats import STATS_DIR, stats_file_name

Range = tuple[int, int]


@dataclass
class MergeResult:
    path: Path
    inputs: list[Path]
    shards: int
    labels: int            # labels covered by the merged model
    label_space: int
    missing: list[Range]   # gaps (only with allow_gaps)
    stats_files: int       # statistics files carried over


def merge(out_dir: str | os.PathLike, model_dirs: Sequence[str | os.PathLike], *,
          allow_gaps: bool = False) -> MergeResult:
    """Merge ``model_dirs`` into a new model at ``out_dir`` (see :func:`merge_models`).

    The statistics files of the merged shards are copied along when present (after the
    model is in place; a model without them is still complete).
    """
    dirs = [Path(d) for d in model_dirs]
    out = Path(os.path.abspath(out_dir))
    real = Path(os.path.realpath(out_dir))      # through links: an alias of an input is that input
    for d in dirs:
        given = Path(os.path.realpath(d))
        if given == real or given in real.parents:
            from ..errors import ModelFormatError

            where = "is also an input" if given == real else f"lies inside the input {d}"
            raise ModelFormatError(f"cannot merge: the output {out} {where}; write to a new directory")
    manifest = merge_models(out, dirs, allow_gaps=allow_gaps)
    copied = 0
    for d in dirs:
        for s in read_manifest(d)["shards"]:
            name = stats_file_name(s["first_label"], s["num_labels"])
            src = d / name
            if src.is_file():
                (out / STATS_DIR).mkdir(exist_ok=True)
                # atomically, as every file of a model: a cut copy is no statistics file
                with open(src, "rb") as fin, atomic_write(out / name, "wb") as fout:
                    shutil.copyfileobj(fin, fout)
                copied += 1
    labels = sum(s["num_labels"] for s in manifest["shards"])
    return MergeResult(out, dirs, len(manifest["shards"]), labels, manifest["label_space"],
                       missing_ranges_of(manifest), copied)


__all__ = ["merge", "MergeResult"]
