"""Training a label tree: one one-vs-all problem per node, on the node's instances.

Each node's problems are headstart's usual binary problems (same loss, regulariser,
initialisation, stopping rule and pruning as ``headstart train``): an internal node
has one per child ("is one of this child's labels relevant?"), a leaf one per label.
As in LibMultiLabel's ``train_tree``, the root is trained on every instance and any
other node only on the instances with at least one of its labels -- so a label deep in
the tree costs O(its node's instances), not O(n), which is where the speed-up over
full one-vs-all comes from.  The root runs as one ordinary one-vs-all training, all
other nodes together as one shortlisted training (see :func:`fit_tree`); LIBLINEAR's
coordinate-descent methods (-s 1 / 3 / 5 / 6 / 7), which have no shortlisted form,
train every node by itself, the threads taking nodes (:func:`_train_each_node`).

Memory: besides the data and the model, the per-output instance lists of the
shortlisted training, sum over nodes of (outputs x instances) entries (docs/tree.md).

Preprocessing (tf-idf, normalisation, transforms, hashing) is fitted once on all of the
training data; the nodes' trainings then run without it, and the model applies it
before the beam search.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError
from ..model.model import OvAModel
from ..shortlist.training import check_start, compact_columns, train_shortlisted
from ..training import pages
from ..training.chunks import pruning_meta, report_problems
from ..training.stats import TrainingStats
from ..params import TrainParams, method_of
from .build import Tree, build_tree, check_tree_params, label_representations, occurring_columns
from .model import TreeModel, tree_extension


def node_labels(tree: Tree) -> list[np.ndarray]:
    """The sorted label ids under every node (children before parents)."""
    under: list[np.ndarray | None] = [None] * tree.num_nodes
    for v in range(tree.num_nodes - 1, -1, -1):
        out = tree.outputs(v)
        under[v] = np.sort(out) if tree.leaf[v] else (
            np.sort(np.concatenate([under[c] for c in out])) if out.size else np.zeros(0, dtype=np.int64))
    return under  # type: ignore[return-value]


def node_problem(Yr: sp.csr_matrix, Yc: sp.csc_matrix, tree: Tree, v: int, under: list[np.ndarray],
                 col_of: np.ndarray | None = None) -> tuple[np.ndarray, sp.csr_matrix]:
    """(rows, targets) of node v: the instances it is trained on and their 0/1 targets,
    one column per output of the node (``under``: :func:`node_labels`).  ``col_of``: a
    scratch array of -1 per label, returned as it came (so that a node costs the
    nonzeros of its rows and its labels, not O(labels): a tree of 10,000 nodes over a
    million labels spent 5 s in scipy's column slicing, which allocates that per call)."""
    n = Yr.shape[0]
    if col_of is None:
        col_of = np.full(Yr.shape[1], -1, dtype=np.int64)
    out = tree.outputs(v)
    if v == 0:
        rows = np.arange(n)
    else:
        rows = np.unique(_positive_rows(Yc, under[v]))
        if rows.size == 0:
            # a node of labels without positives (their own subtree at a huge, mostly
            # unused label space: thousands of such nodes), made without scipy's slicing
            # and conversions, ~0.25 ms a node
            return rows, sp.csr_matrix((0, out.size), dtype=np.float32)
    # the output of every label under v: the label itself in a leaf, else its child; a
    # target is 1 when any of the output's labels is relevant
    mine = [out] if tree.leaf[v] else [under[c] for c in out]
    try:
        if tree.leaf[v]:
            col_of[out] = np.arange(out.size)
        else:
            for j, c in enumerate(out):
                col_of[under[c]] = j
        sub = Yr[rows]
        r = np.repeat(np.arange(rows.size), np.diff(sub.indptr))
        c = col_of[sub.indices]
    finally:
        for labels in mine:
            col_of[labels] = -1
    keep = c >= 0
    T = sp.csr_matrix((np.ones(int(keep.sum()), dtype=np.float32), (r[keep], c[keep])), shape=(rows.size, out.size))
    T.sum_duplicates()
    T.data[:] = 1.0
    return rows, T


def _positive_rows(Yc: sp.csc_matrix, labels: np.ndarray) -> np.ndarray:
    """The row ids of the positives of ``labels`` (CSC columns), repeats kept: one
    gather over the columns' spans, as scipy's column selection gives them."""
    a, z = Yc.indptr[labels], Yc.indptr[labels + 1]
    lengths = z - a
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=Yc.indices.dtype)
    starts = np.repeat(a - (np.cumsum(lengths) - lengths), lengths)
    return Yc.indices[starts + np.arange(total)]


#: a node with more (outputs x instances) than this is trained on its own, as one-vs-all
#: on its rows (lanes share the passes over them), not in the shortlisted batch, whose
#: instance lists would hold that many entries: on a tail-heavy synthetic set (Amazon-670K
#: shape at scale 0.05) k-means left leaves of thousands of labels over most rows, and the
#: batch's lists took 11 GB.
BIG_NODE_PAIRS = 2**22


def _batch_problems(problems: list[tuple[np.ndarray, sp.csr_matrix]], n: int
                    ) -> tuple[sp.csc_matrix, sp.csc_matrix]:
    """The nodes' problems (rows, targets) as one shortlisted training over all n
    instances: positives Y (n x outputs, CSC) and, as each output's list S, its node's
    instances."""
    cols_y, cols_s = [], []
    for rows, T in problems:
        if rows.size == 0:      # (no positive: no conversion)
            cols_y.append((np.zeros(T.shape[1], dtype=np.int64), rows))
            cols_s.append((0, T.shape[1], rows))
            continue
        Tc = sp.csc_matrix(T)
        Tc.sort_indices()
        cols_y.append((np.diff(Tc.indptr), rows[Tc.indices]))
        cols_s.append((rows.size, Tc.shape[1], rows))
    ylen = np.concatenate([c[0] for c in cols_y]).astype(np.int64)
    yptr = np.concatenate([[0], np.cumsum(ylen)])
    Yo = sp.csc_matrix((np.ones(int(yptr[-1]), dtype=np.float32), np.concatenate([c[1] for c in cols_y]), yptr),
                       shape=(n, ylen.size))
    slen = np.concatenate([np.full(k, m, dtype=np.int64) for m, k, _ in cols_s])
    sptr = np.concatenate([[0], np.cumsum(slen)])
    S = sp.csc_matrix((np.ones(int(sptr[-1]), dtype=np.float32), np.concatenate([np.tile(r, k) for _, k, r in cols_s]),
                       sptr), shape=(n, ylen.size))
    return Yo, S


def _stack_rows(pieces: list[tuple | None], d: int) -> sp.csr_matrix:
    """The nodes' weights as one CSR, piece after piece: each piece is (W, lo, hi), rows
    lo:hi of W (None: hi - lo empty rows).  Copied straight into the result, and the list
    is consumed: a piece's entry is cleared once copied, so a matrix that no other piece
    and no caller holds (the shortlisted batch's chunks, in mappings of their own) goes
    back to the system while the model fills.  Slicing the batch's rows per node and
    stacking the slices held the model's weights three times at the end of training
    (debian-deps: ~370 MB each), one stacked batch and the copy twice."""
    rows = sum(p[2] - p[1] for p in pieces)
    nnz = sum(int(p[0].indptr[p[2]] - p[0].indptr[p[1]]) for p in pieces if p[0] is not None)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int32)
    data = np.empty(nnz, dtype=np.float32)
    r = at = 0
    released = 0
    for i, (W, lo, hi) in enumerate(pieces):
        pieces[i] = None
        if W is not None:
            a, b = int(W.indptr[lo]), int(W.indptr[hi])
            indices[at:at + b - a] = W.indices[a:b]
            data[at:at + b - a] = W.data[a:b]
            indptr[r + 1:r + 1 + hi - lo] = W.indptr[lo + 1:hi + 1].astype(np.int64) - a + at   # (int32 per node)
            at += b - a
            released += 8 * (b - a)
        else:
            indptr[r + 1:r + 1 + hi - lo] = at
        r += hi - lo
        del W
        if released > 32 << 20:
            pages.release_free_memory()     # small chunks came from malloc (chunks.stack_rows)
            released = 0
    pages.release_free_memory()
    return sp.csr_matrix((data, indices, indptr), shape=(rows, d))


def _chunk_pieces(chunks: list, outputs: list[int]) -> list[list[tuple]]:
    """The rows of consecutive groups of ``outputs[i]`` outputs (the small nodes, in
    order) as pieces (W, lo, hi) of the shortlisted batch's chunks (ChunkResults sorted
    by label; a node's outputs may straddle two chunks)."""
    groups: list[list[tuple]] = []
    c = lo = 0
    for m in outputs:
        mine = []
        while m > 0:
            W = chunks[c].weights
            take = min(m, W.shape[0] - lo)
            mine.append((W, lo, lo + take))
            m -= take
            lo += take
            if lo == W.shape[0]:
                c, lo = c + 1, 0
        groups.append(mine)
    return groups


def _block(pieces: list[tuple], intercept: np.ndarray, T: sp.csr_matrix) -> tuple:
    """A node trained on its own: (its ``pieces`` of :func:`_stack_rows`, intercept, the
    outputs' positive counts)."""
    return pieces, np.asarray(intercept, dtype=np.float32), np.diff(sp.csc_matrix(T).indptr).astype(np.int64)


def _train_each_node(Xp: sp.csr_matrix, Yr: sp.csr_matrix, Yc: sp.csc_matrix, tree: Tree, under: list[np.ndarray],
                     col_of: np.ndarray, params: TrainParams, blocks: list[Any],
                     progress: Callable[[int], None] | None) -> tuple[float, TrainingStats]:
    """Nodes 1.. for the coordinate-descent methods: each a ``fit_model`` on its rows,
    the run's threads taking nodes one at a time (a node has a few outputs, too few to
    spread over threads, and ~2 ms of each call is Python: debian-deps' 6,031 nodes
    below the root took 29.3 s one after the other, 11.7 s of it outside the solves).
    Fills ``blocks[v]``; returns the seconds spent compiling kernels and the nodes'
    statistics, labelled by tree output, with each node's instances as their ``rows``:
    reported once for all nodes (:func:`_report_nodes`), not node by node -- a warning
    per node would be thousands of lines when the run's features are off scale."""
    from ..estimator import fit_model
    from ..training.chunks import run_in_threads

    one = dataclasses.replace(params, threads=1)
    nodes = iter(range(1, tree.num_nodes))
    lock = threading.Lock()        # the node problems share one scratch map (col_of)
    stop = threading.Event()
    compiling = [0.0]
    parts: list[TrainingStats] = []

    def worker() -> None:
        while not stop.is_set():
            with lock:
                v = next(nodes, None)
                if v is None:
                    return
                rows, T = node_problem(Yr, Yc, tree, v, under, col_of)
            m = T.shape[1]
            if rows.size == 0:
                # a node of labels without positives (their own subtree): no instance, so
                # the objective is the regulariser alone, whose minimiser is w = 0 (bias too)
                blocks[v] = ([(None, 0, m)], np.zeros(m, dtype=np.float32), np.zeros(m, dtype=np.int64))
                if progress is not None:
                    progress(m)
                continue
            # the node's chunks through a sink: without collecting, the trainer leaves the
            # report to the sink's owner (this function's caller, for all nodes at once)
            chunks: list = []
            _, st = fit_model(Xp[rows], T, one, progress=progress, own_data=True, sink=chunks.append,
                              collect=False, part=True)
            chunks.sort(key=lambda r: int(r.labels[0]) if r.labels.size else -1)
            blocks[v] = _block([(r.weights, 0, r.weights.shape[0]) for r in chunks],
                               np.concatenate([r.intercept for r in chunks]), T)
            st = st.without_trajectories()
            st.columns["label"] += tree.node_ptr[v]
            st.columns["rows"] = np.full(len(st), rows.size, dtype=np.float64)
            seconds = float(st.meta.get("compile_seconds", 0.0))
            with lock:
                parts.append(st)
                if seconds > 0.5:      # a compile; loading the compiled kernels (~1 ms a call) is training time
                    compiling[0] += seconds

    run_in_threads(worker, params.effective_threads(), name="headstart-tree", stop=stop.set)
    return compiling[0], TrainingStats.concat(parts, consume=True)


def _report_nodes(st: TrainingStats, params: TrainParams, n: int) -> None:
    """report_problems for a tree's node problems (``st`` labelled by tree output, with
    each node's instances as a ``rows`` column): they are no shortlisted labels
    (helper-60: warned of "shortlisted rows"), and the pruning test compares each output
    with its node's instances."""
    st.meta.update({**pruning_meta(params, n), "mode": "tree"})
    report_problems(st)


def _check_tree_training(params: TrainParams) -> None:
    """What a tree's problems cannot take: they are its nodes' outputs, not labels, and
    every one of them must be trained."""
    if params.init == "pretrained":
        raise ParameterError("init 'pretrained' starts labels from a saved model's rows; a tree's problems are "
                             "its nodes' outputs, which no saved model has")
    if params.weighting == "file":
        raise ParameterError("weighting 'file' gives costs per label; a tree's problems are its nodes' outputs "
                             "(use a weighting computed from the counts, or none)")
    if params.timeout > 0:
        raise ParameterError(f"a tree needs every node trained: parameter timeout must be 0, got {params.timeout!r}")


def fit_tree(X: Any, Y: Any, params: TrainParams | None = None, *, branching: int = 100, max_depth: int = 10,
             seed: int = 0, progress: Callable[[int], None] | None = None,
             on_built: Callable[[int], None] | None = None, own_data: bool = False) -> TreeModel:
    """Build the label tree of (X, Y) and train every node (see the module docstring).
    ``progress(n)`` is called as binary problems finish; ``on_built(total)`` once the tree
    is built, with the number of binary problems (the tree's outputs).  ``own_data``: X is
    the caller's to change while training (the command line's, read from a file): the
    root's training renumbers it in place and restores it, instead of copying it."""
    from ..estimator import fit_model, prepare_data

    params = params or TrainParams()
    check_tree_params(branching, max_depth, seed)
    _check_tree_training(params)
    t0 = time.perf_counter()
    data = prepare_data(X, Y, params)
    Xp = sp.csr_matrix(data.X, dtype=np.float32)   # dense features too: the nodes slice rows
    Yc = sp.csc_matrix(data.Y)
    Yr = Yc.tocsr()
    tree = build_tree(label_representations(occurring_columns(Xp), Yc), branching, max_depth, seed,
                      threads=params.effective_threads())
    build_seconds = time.perf_counter() - t0
    under = node_labels(tree)
    if on_built:
        on_built(tree.num_outputs)
    node_params = dataclasses.replace(params, normalize=False, tfidf=False, feature_transform="identity",
                                      hash_buckets=0, remove_no_label_data=False)
    # The root (every instance) and any node with many instances and outputs are ordinary
    # one-vs-all trainings on their rows: their problems share each pass over the rows (the
    # lanes of headstart.training).  Every other node is a problem on a few instances --
    # what shortlisted training solves (each label on its positives plus a list of
    # instances, headstart.shortlist): one call trains all of them, the node's instances
    # as every output's list.  A tree of 22,908 labels with K = 100 has ~5,000 nodes of a
    # few labels each; one training call per node spent more time starting threads and
    # workspaces than solving.
    n = Xp.shape[0]
    blocks: list[Any] = [None] * tree.num_nodes
    small: list[int] = []
    problems = []
    node_stats: list[TrainingStats] = []    # every trained output's, labelled by output
    col_of = np.full(Yr.shape[1], -1, dtype=np.int64)
    compile_seconds = 0.0
    # the small nodes' training works at the width of the features that occur where a
    # header declares far more (compact_columns), and its start must be one shortlisted
    # training can restrict: refused here, before the root's training, not after it
    #
    # The coordinate-descent methods (LIBLINEAR -s 1 / 3 / 7 in the dual, -s 5 / 6 exact
    # L1; LibMultiLabel's train_tree without options is -s 1) have no shortlisted form:
    # there every node is such a training on its rows, one call each, as LibMultiLabel
    # trains its nodes (what one call costs beyond its solves: docs/tree.md).
    coordinate = method_of(node_params) != "newton"
    if not coordinate:
        columns = compact_columns(Xp, node_params, dense=False)
        Xs = Xp if columns is None else columns.compact(Xp)
        check_start(node_params, Xs[:1], Yc[:1])
    for v in range(1 if coordinate else tree.num_nodes):
        rows, T = node_problem(Yr, Yc, tree, v, under, col_of)
        if v == 0 or rows.size * T.shape[1] > BIG_NODE_PAIRS:
            model, st = fit_model(Xp if v == 0 else Xp[rows], T, node_params, progress=progress,
                                  own_data=v > 0 or own_data or data.owned, part=True)
            compile_seconds += float(st.meta.get("compile_seconds", 0.0))
            blocks[v] = _block([(model.weights, 0, T.shape[1])], model.intercept, T)
            st = st.without_trajectories()
            st.columns["label"] = st.columns["label"] + tree.node_ptr[v]    # (the node's outputs 0..T-1)
            st.columns["rows"] = np.full(len(st), rows.size, dtype=np.float64)
            node_stats.append(st)
        else:
            small.append(v)
            problems.append((rows, T))
    if coordinate:
        seconds, st = _train_each_node(Xp, Yr, Yc, tree, under, col_of, node_params, blocks, progress)
        compile_seconds += seconds
        _report_nodes(st, node_params, n)
        node_stats.append(st)
    if small:
        Yo, S = _batch_problems(problems, n)
        del problems
        # the batch's chunks as they come (their weights in mappings of their own), not
        # stacked into one matrix: the nodes' rows are copied from them into the model
        # once, each chunk released as it is copied (_stack_rows)
        chunks: list = []
        _, _, st = train_shortlisted(Xs, Yo, S, node_params, np.arange(Yo.shape[1]), progress=progress,
                                     columns=columns, sink=chunks.append, collect=False)
        compile_seconds += float(st.meta.get("compile_seconds", 0.0))
        # (a sink's owner reports: train_shortlisted does not, with collect=False); named by
        # tree output, not by place in the batch
        st.columns["label"] = np.concatenate([np.arange(tree.node_ptr[v], tree.node_ptr[v + 1])
                                              for v in small])[st.columns["label"]]
        _report_nodes(st, node_params, n)
        node_stats.append(st.without_trajectories())
        counts = np.diff(Yo.indptr).astype(np.int64)
        del Yo, S
        chunks.sort(key=lambda r: int(r.labels[0]) if r.labels.size else -1)
        br = np.concatenate([r.intercept for r in chunks]).astype(np.float32)
        sizes = [int(tree.node_ptr[v + 1] - tree.node_ptr[v]) for v in small]
        at = 0
        for v, m, pieces in zip(small, sizes, _chunk_pieces(chunks, sizes)):
            blocks[v] = (pieces, br[at:at + m], counts[at:at + m])
            at += m
        del chunks    # (the chunks' weights are held by the blocks' pieces until copied)
    intercept = np.concatenate([b[1] for b in blocks]).astype(np.float32)
    label_counts = np.concatenate([b[2] for b in blocks])
    pieces = [p for b in blocks for p in b[0]]
    del blocks
    W = _stack_rows(pieces, Xp.shape[1])
    ova = OvAModel(weights=W, intercept=intercept, n_features=data.n_features, label_space=tree.num_outputs,
                   params=params, preprocessing=data.preprocessing, label_counts=label_counts,
                   n_train=data.n_train)
    ova.extensions["tree"] = tree_extension(tree, data.label_space, branching, max_depth, seed)
    return TreeModel(ova, tree, data.label_space, build_seconds=build_seconds, compile_seconds=compile_seconds,
                     train_seconds=time.perf_counter() - t0 - build_seconds - compile_seconds,
                     stats=_output_stats(node_stats, tree))


def _output_stats(parts: list[TrainingStats], tree: Tree) -> TrainingStats:
    """The training statistics of a tree's outputs (the binary problems), as a one-vs-all
    run's of its labels (:class:`TrainingStats`, the columns ``headstart train --stats``
    writes), ``label`` being the output's id, plus its ``node``, the ``rows`` of that
    node's problem (its instances) and ``label_id``: the label a leaf's output is, -1 for
    an output that is a child node.  Outputs of nodes without an instance (labels with
    no positive, in a subtree of their own) are skipped by the coordinate-descent methods
    (w = 0 without a solve): they have no row there."""
    st = TrainingStats.concat(parts)
    out = st.columns["label"]
    node = np.repeat(np.arange(tree.num_nodes), np.diff(tree.node_ptr))[out]
    st.columns["node"] = node
    st.columns["label_id"] = np.where(tree.leaf[node], tree.target[out], -1)
    return st
