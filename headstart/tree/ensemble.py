"""An ensemble of label trees (LibMultiLabel's ``train_ensemble_tree``).

T trees are built with the k-means seeds ``seed, seed + 1, ..., seed + T - 1`` and
trained alike; a label's score is the mean over the trees of its beam-search score
(:mod:`.search`: the path's probability, ``exp`` of the summed log-scores), 0 in a tree
whose beam does not reach the label -- LibMultiLabel averages its trees' decision
matrices, whose unreached entries are 0, the same numbers.  Different clusterings make
different beam-search mistakes, so the mean recovers labels a single tree's beam loses.

On disk an ensemble is a directory holding ``ensemble.json`` and one ordinary tree model
directory per tree (``tree-0``, ``tree-1``, ...; each as :func:`~.model.load_tree`
reads it, so shards, checksums and the strict reader are those of every model)::

    {"format": "headstart-tree-ensemble", "version": 1, "trees": ["tree-0", ...],
     "num_labels": L}

The whole directory is written atomically.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..errors import ModelFormatError, ParameterError
from .model import TreeModel, load_tree

FILE = "ensemble.json"
FORMAT = "headstart-tree-ensemble"
VERSION = 1

#: entries (instances x candidate labels per tree) of one block of the mean's scores
_BLOCK_ENTRIES = 1 << 22


@dataclass
class TreeEnsemble:
    trees: list[TreeModel]
    manifest: dict | None = None     # when loaded from a directory: the first tree's manifest,
    names: list[str] | None = None    # and the trees' directory names

    @property
    def num_labels(self) -> int:
        return self.trees[0].num_labels

    @property
    def model(self):
        """The first tree's weights: the features and preprocessing every tree shares."""
        return self.trees[0].model

    @property
    def num_outputs(self) -> int:
        return sum(t.num_outputs for t in self.trees)

    @property
    def compile_seconds(self) -> float:
        return sum(t.compile_seconds for t in self.trees)

    def label_counts(self) -> np.ndarray | None:
        return self.trees[0].label_counts()

    def predict_topk(self, X: Any, k: int = 5, *, beam_width: int = 10, score: str = "sigmoid",
                     sigmoid_a: float = 3.0, threads: int = 0, chunk_rows: int = 65536
                     ) -> tuple[np.ndarray, np.ndarray]:
        """(labels, scores), both (rows, k), best first: the k labels of largest mean score
        over the trees (ties to the lower label id; unreached labels score 0); a k above
        the labels pads the rows with label -1 and score -inf, as every model's
        ``predict_topk`` does."""
        from ..metrics import topk_from_scores
        from ..validation import check_k

        L = self.num_labels
        k_asked = check_k(k)
        k = min(k_asked, L)
        # every label a tree's last beam reaches: at most beam_width leaves of its widest leaf
        reach = [min(L, max(k, int(beam_width) * int(np.diff(t.tree.node_ptr)[t.tree.leaf].max(initial=1))))
                 for t in self.trees]
        n = X.shape[0]
        step = max(1, min(int(chunk_rows), _BLOCK_ENTRIES // max(sum(reach), 1)))
        labels = np.empty((n, k), dtype=np.int64)
        scores = np.empty((n, k), dtype=np.float32)
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            parts = [t.predict_topk(X[r0:r1], m, beam_width=beam_width, score=score, sigmoid_a=sigmoid_a,
                                    threads=threads, chunk_rows=chunk_rows) for t, m in zip(self.trees, reach)]
            rows = np.concatenate([np.repeat(np.arange(r1 - r0), lab.shape[1]) for lab, _ in parts])
            cols = np.concatenate([lab.ravel() for lab, _ in parts])
            vals = np.concatenate([s.ravel().astype(np.float64) for _, s in parts])
            # duplicates (a label in several trees' lists) are summed: the mean's numerator
            S = sp.csr_matrix((vals / len(self.trees), (rows, cols)), shape=(r1 - r0, L))
            lab, sc = topk_from_scores(S, k)
            labels[r0:r1] = lab
            scores[r0:r1] = sc
        if k_asked > k:
            labels = np.pad(labels, ((0, 0), (0, k_asked - k)), constant_values=-1)
            scores = np.pad(scores, ((0, 0), (0, k_asked - k)), constant_values=-np.inf)
        return labels, scores

    def save(self, path: str | os.PathLike) -> None:
        """Write the ensemble directory ``path`` atomically, replacing only what headstart
        wrote there itself (:func:`check_replaceable`); anything else: ModelFormatError."""
        from ..io.atomic import atomic_directory

        check_replaceable(Path(os.path.abspath(path)))
        with atomic_directory(path) as tmp:
            names = [f"tree-{i}" for i in range(len(self.trees))]
            for name, t in zip(names, self.trees):
                t.save(tmp / name)
            (tmp / FILE).write_text(json.dumps({"format": FORMAT, "version": VERSION, "trees": names,
                                                "num_labels": self.num_labels}, indent=1) + "\n")


#: the tree directories an ensemble holds beside its index (``tree-0``, ``tree-1``, ...)
TREE_DIR_RE = re.compile(r"^tree-\d+$")


class _EnsembleEntries:
    """The names an ensemble directory is made of, for :func:`~headstart.io.atomic.replace_refusal`
    (its trees' count is not fixed, so a pattern rather than a list)."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name == FILE or bool(TREE_DIR_RE.match(name)))


def check_replaceable(path: Path) -> None:
    """ModelFormatError unless saving an ensemble may replace what is at ``path``: nothing,
    an empty directory, an ensemble headstart wrote or a finished headstart model (what
    ``headstart tree -o`` accepts; the same rules as :func:`~headstart.model.writer.save_model`),
    each holding nothing else.  Replacing deletes the old directory whole: a user's files
    there must never go with it."""
    from ..io.atomic import replace_refusal
    from ..model.manifest import is_headstart_model
    from ..model.writer import prepare_target

    if path.is_dir() and is_headstart_model(path):
        prepare_target(path, overwrite="complete", unknown_range_unfinished=False)
        return
    why = replace_refusal(path, "a headstart tree ensemble", FILE, _EnsembleEntries())
    if why:
        raise ModelFormatError(why)


def is_ensemble(path: str | os.PathLike) -> bool:
    return (Path(path) / FILE).is_file()


def fit_ensemble(X: Any, Y: Any, params=None, *, trees: int = 3, branching: int = 100, max_depth: int = 10,
                 seed: int = 0, progress: Callable[[int], None] | None = None,
                 on_built: Callable[[int], None] | None = None, own_data: bool = False) -> TreeEnsemble:
    """Train ``trees`` label trees of the seeds ``seed .. seed + trees - 1`` (:func:`~.train.fit_tree`
    each).  ``on_built(total)`` is called as each tree is built, with the binary problems of
    the trees built so far (for a progress bar).  ``own_data``: as for :func:`~.train.fit_tree`."""
    from .train import fit_tree

    if isinstance(trees, bool) or not isinstance(trees, (int, np.integer)) or trees < 1:
        raise ParameterError(f"parameter trees must be an integer >= 1, got {trees!r}")
    done: list[TreeModel] = []
    total = 0

    def built(outputs: int) -> None:
        nonlocal total
        total += outputs
        if on_built:
            on_built(total)

    for i in range(trees):
        done.append(fit_tree(X, Y, params, branching=branching, max_depth=max_depth, seed=seed + i,
                             progress=progress, on_built=built, own_data=own_data))
    return TreeEnsemble(done)


def read_index(path: str | os.PathLike) -> tuple[list[str], int]:
    """The tree directory names and the label count of an ensemble's ``ensemble.json``,
    checked (names are plain directory names, distinct, at least one)."""
    where = Path(path) / FILE
    try:
        meta = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFormatError(f"{where}: cannot read the tree ensemble: {e}") from None
    names = meta.get("trees") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION or \
            not isinstance(names, list) or not names or \
            not all(isinstance(x, str) and x and "/" not in x and "\\" not in x and x not in (".", "..")
                    for x in names) or len(set(names)) != len(names):
        raise ModelFormatError(f"{where}: not a tree ensemble of this version ({FORMAT} {VERSION}) with a list "
                               "of tree directories")
    return names, meta.get("num_labels")


def check_members(path: str | os.PathLike, names: list[str], num_labels: Any, described: list[tuple]) -> None:
    """The trees ``names`` of the ensemble ``path`` belong together: ``described[i]`` --
    tree i's (labels, features, preprocessing as in its manifest) -- is the same for all,
    and the index's ``num_labels`` is their labels (what ``info`` checks from the
    manifests, and loading from the trees)."""
    for name, d in zip(names, described):
        if d != described[0]:
            raise _not_one(path, name, names)
    if num_labels != described[0][0]:
        raise ModelFormatError(f"{Path(path) / FILE}: num_labels {num_labels!r} but its trees have "
                               f"{described[0][0]} labels")


def _not_one(path, name: str, names: list[str]) -> ModelFormatError:
    return ModelFormatError(f"{Path(path) / name}: its labels, features or preprocessing differ from "
                            f"{Path(path) / names[0]}'s: not one ensemble")


def load_ensemble(path: str | os.PathLike) -> TreeEnsemble:
    """Read and check an ensemble directory: its trees must describe the same labels and
    features, with the same preprocessing."""
    names, num_labels = read_index(path)
    trees = [load_tree(Path(path) / name) for name in names]
    first = trees[0]
    check_members(path, names, num_labels, [(t.num_labels, t.model.n_features, t.model.preprocessing.to_manifest())
                                            for t in trees])
    for name, t in zip(names, trees):
        a, b = t.model.preprocessing, first.model.preprocessing
        if not (a.idf is None or np.array_equal(a.idf, b.idf)):
            raise _not_one(path, name, names)
    from ..model.manifest import read_manifest

    return TreeEnsemble(trees, read_manifest(Path(path) / names[0]), names)
