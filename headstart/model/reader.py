"""Loading a whole model directory into one :class:`OvAModel`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import ModelFormatError
from ..params import TrainParams
from .extras import read_extras
from .manifest import OPTIONAL_MANIFEST_KEYS, read_manifest
from .model import OvAModel
from .ranges import missing_ranges_of, ranges_text
from .shards import iter_shards


def require_complete(path: str | os.PathLike, m: dict, hint: str = " (allow_gaps=True, on the command line --allow-gaps, loads it anyway)") -> None:
    """ModelFormatError unless the shards of manifest ``m`` cover the whole label space."""
    missing = missing_ranges_of(m)
    if missing:
        raise ModelFormatError(f"{path}: model is incomplete, missing {ranges_text(missing)} of "
                               f"[0, {m['label_space']}){hint}")


def load_model(path: str | os.PathLike, *, allow_gaps: bool = False) -> OvAModel:
    """Load and validate the model directory ``path`` into one :class:`OvAModel`.

    A model whose shards do not cover the whole label space raises
    :class:`ModelFormatError` listing the missing ranges, unless ``allow_gaps``: then the
    returned model spans from the first to the last covered label, labels inside holes
    get an empty weight row and intercept 0, and ``missing_ranges`` lists the global
    label ranges of ``[0, label_space)`` without weights (prediction never returns them).
    """
    path = Path(path)
    m = read_manifest(path)
    label_space, n_features = m["label_space"], m["n_features"]
    missing = missing_ranges_of(m)
    if not allow_gaps:
        require_complete(path, m)
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
    if len(blocks) == 1:
        # one shard (what 'headstart train' writes without --shard-size): its validated
        # arrays are the model's, not copied while the shard is still held
        weights, intercept = blocks[0], intercepts[0]
    elif blocks:
        weights = sp.vstack(blocks, format="csr", dtype=np.float32)
        intercept = np.concatenate(intercepts).astype(np.float32, copy=False)
    else:
        weights = sp.csr_matrix((0, n_features), dtype=np.float32)
        intercept = np.zeros(0, dtype=np.float32)
    model = OvAModel(weights=weights, intercept=intercept, n_features=n_features, label_space=label_space,
                     first_label=lo, params=params, preprocessing=preprocessing,
                     label_counts=label_counts, n_train=m["n_train"],
                     extensions={k: m[k] for k in OPTIONAL_MANIFEST_KEYS if k in m})
    if missing:
        model.missing_ranges = missing  # type: ignore[attr-defined]
    return model
