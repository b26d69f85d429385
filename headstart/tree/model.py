"""A label-tree model: an ordinary model directory whose "labels" are the tree's outputs.

The weights of all nodes are one :class:`~headstart.model.model.OvAModel` (row o = output
o of :class:`~.build.Tree`, so shards, checksums, atomic writing and the strict reader
are those of every headstart model), and the manifest's ``"tree"`` field holds the
tree itself::

    "tree": {"num_labels": L, "branching": K, "max_depth": D, "seed": s,
             "node_ptr": [...], "target": [...], "leaf": [0/1 ...], "depth": [...]}

The tree is small next to the weights (one integer per output), so it lives in the
JSON manifest rather than in a file of its own.  One-vs-all prediction refuses such a
directory (its rows are not labels); :func:`load_tree` and ``headstart predict`` read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from ..model.model import OvAModel
from .._columns import UsedColumns
from .build import Tree

KEY = "tree"
_FIELDS = {"num_labels", "branching", "max_depth", "seed", "node_ptr", "target", "leaf", "depth"}


@dataclass
class TreeModel:
    model: OvAModel          # the weights of every output (label_space = tree.num_outputs)
    tree: Tree
    num_labels: int          # labels of the data set
    build_seconds: float = 0.0
    train_seconds: float = 0.0
    compile_seconds: float = 0.0     # numba's kernels compiled (or loaded) on first use
    stats: Any = field(default=None, repr=False)   # TrainingStats of the outputs, when trained here
    _index: Any = field(default=None, repr=False)
    _columns: Any = field(default=None, repr=False)

    @property
    def num_outputs(self) -> int:
        return self.tree.num_outputs

    def label_counts(self) -> np.ndarray | None:
        """Training positives per label (:func:`label_counts_of`)."""
        return label_counts_of(self.tree, self.model.label_counts, self.num_labels)

    def predict_topk(self, X: Any, k: int = 5, *, beam_width: int = 10, score: str = "sigmoid",
                     sigmoid_a: float = 3.0, threads: int = 0, chunk_rows: int = 65536
                     ) -> tuple[np.ndarray, np.ndarray]:
        """(labels, scores), both (rows, k), best first, by beam search (:mod:`.search`:
        ``score`` "sigmoid" -- log sigmoid(sigmoid_a * s), LibMultiLabel's default -- or
        "squared-hinge"); X raw (the model's preprocessing is applied here).  A k above the
        labels is answered as the one-vs-all model's ``predict_topk`` does: every label
        ranked, the rest of the row padded with label -1 and score -inf."""
        from ..prediction.topk import _check_X, _chunk_csr
        from ..validation import check_k
        from .search import beam_search, check_score, node_index

        check_score(score, sigmoid_a)
        k_asked = check_k(k)
        k = min(k_asked, self.num_labels)
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
            from ..errors import ParameterError

            raise ParameterError(f"parameter chunk_rows must be an integer >= 1, got {chunk_rows!r}")
        m = self.model
        if self._index is None:    # built once per model (a counting sort of the weights)
            # over the columns the weights use where a header declares far more (its
            # tables are O(columns) per block of nodes); x renumbered alike below
            self._columns = UsedColumns.if_sparse(m.weights)
            W = m.weights if self._columns is None else self._columns.compact(m.weights)
            self._index = node_index(W, self.tree.node_ptr, threads)
        X = _check_X(X, m.n_features, m.preprocessing)
        pre = None if m.preprocessing.is_identity else m.preprocessing
        parts = []
        for r0 in range(0, X.shape[0], chunk_rows):
            Xc = _chunk_csr(X, r0, min(r0 + chunk_rows, X.shape[0]), pre)
            if self._columns is not None:
                Xc = self._columns.compact(Xc)
            parts.append(beam_search(self._index, m.intercept, self.tree, self.num_labels, Xc, k, beam_width,
                                     score, sigmoid_a, threads))
        if not parts:
            return np.zeros((0, k_asked), dtype=np.int64), np.zeros((0, k_asked), dtype=np.float32)
        labels, scores = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        if k_asked > k:
            labels = np.pad(labels, ((0, 0), (0, k_asked - k)), constant_values=-1)
            scores = np.pad(scores, ((0, 0), (0, k_asked - k)), constant_values=-np.inf)
        return labels, scores

    def save(self, path: str | os.PathLike) -> None:
        """Write the model directory ``path`` atomically (see :mod:`headstart.model.writer`)."""
        from ..model.writer import save_model

        save_model(self.model, path)


def tree_extension(tree: Tree, num_labels: int, branching: int, max_depth: int, seed: int) -> dict[str, Any]:
    return {"num_labels": int(num_labels), "branching": int(branching), "max_depth": int(max_depth),
            "seed": int(seed), "node_ptr": tree.node_ptr.tolist(), "target": tree.target.tolist(),
            "leaf": tree.leaf.astype(int).tolist(), "depth": tree.depth.tolist()}


def label_counts_of(tree: Tree, output_counts: Any, num_labels: int) -> np.ndarray | None:
    """Training positives per label from the outputs' counts (the model's label_counts):
    a leaf's output is trained on every instance of its label, so its count is the
    label's."""
    if output_counts is None:
        return None
    is_label = tree.output_is_label()
    out = np.zeros(num_labels, dtype=np.int64)
    out[tree.target[is_label]] = np.asarray(output_counts)[is_label]
    return out


def _int_array(where: str, name: str, v: Any) -> np.ndarray:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise ModelFormatError(f"{where}: tree.{name} must be a list of integers")
    return np.asarray(v, dtype=np.int64).reshape(-1)


def tree_from_manifest(where: str, ext: Any, num_outputs: int) -> tuple[Tree, int]:
    """The :class:`Tree` and number of labels of a manifest's ``"tree"`` field, every
    claim checked (a forged manifest must not make the beam search read out of bounds):
    outputs partition [0, num_outputs) node by node, every non-root node is the child of
    exactly one earlier node, and the leaves' outputs are each label exactly once."""
    if not isinstance(ext, dict) or set(ext) != _FIELDS:
        raise ModelFormatError(f"{where}: field 'tree' must have exactly the fields {', '.join(sorted(_FIELDS))}")
    for name in ("num_labels", "branching", "max_depth", "seed"):
        v = ext[name]
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ModelFormatError(f"{where}: tree.{name} must be an integer >= 0, got {v!r}")
    L = ext["num_labels"]
    ptr, target = _int_array(where, "node_ptr", ext["node_ptr"]), _int_array(where, "target", ext["target"])
    leaf, depth = _int_array(where, "leaf", ext["leaf"]), _int_array(where, "depth", ext["depth"])
    nodes = leaf.size
    if nodes < 1 or ptr.size != nodes + 1 or depth.size != nodes or ptr[0] != 0 or np.any(np.diff(ptr) < 0) \
            or ptr[-1] != target.size or target.size != num_outputs or not np.all((leaf == 0) | (leaf == 1)):
        raise ModelFormatError(f"{where}: tree.node_ptr/leaf/depth do not describe {num_outputs} outputs "
                               f"of {nodes} node(s)")
    is_leaf = leaf.astype(bool)
    owner = np.repeat(np.arange(nodes), np.diff(ptr))
    to_child = ~is_leaf[owner]
    child = target[to_child]
    parents = owner[to_child]
    if np.any(child <= parents) or np.any(child >= nodes) or \
            not np.array_equal(np.sort(child), np.arange(1, nodes)):
        raise ModelFormatError(f"{where}: tree: every node but the root must be the child of exactly one "
                               "earlier node")
    labels = target[~to_child]
    if labels.size != L or not np.array_equal(np.sort(labels), np.arange(L)):
        raise ModelFormatError(f"{where}: tree: the leaves must hold each of the {L} labels exactly once")
    return Tree(ptr, target, is_leaf, depth.astype(np.int32)), L


def load_tree(path: str | os.PathLike) -> TreeModel:
    """Load and validate a tree model directory."""
    from ..model.manifest import MANIFEST
    from ..model.reader import load_model

    model = load_model(path)
    if KEY not in model.extensions:
        raise ModelFormatError(f"{path}: not a label-tree model (train one with 'headstart tree')")
    tree, L = tree_from_manifest(str(Path(path) / MANIFEST), model.extensions[KEY], model.label_space)
    return TreeModel(model, tree, L)
