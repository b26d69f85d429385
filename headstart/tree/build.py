"""The label tree: labels clustered recursively by k-means on their representations.

As in Bonsai (Khandagale, Xiao & Babbar 2020) and LibMultiLabel's ``train_tree``: a
label is represented by the sum of its positive instances' feature vectors,
L2-normalised (rows of Y^T X); a node with more than K labels (and above the depth
limit) splits them into K clusters by k-means, each cluster a child; every other node
is a leaf whose outputs are its labels.

The tree is returned flat, in breadth-first order (node 0 is the root, a child's id is
larger than its parent's), as the arrays the beam search reads (:class:`Tree`):

* ``node_ptr`` (nodes + 1): node i's outputs are ``node_ptr[i]:node_ptr[i + 1]``;
* ``target`` (outputs): an internal node's output is its child's node id, a leaf's
  output is a label id;
* ``leaf`` (nodes): whether the node's outputs are labels.

One output is one binary classifier of the tree model (a row of its weights).

k-means here is Lloyd's algorithm with greedy k-means++ seeding and Euclidean distances
(as LibMultiLabel's: scikit-learn's KMeans up to 0.7, sparsekmeans since), the products
of R with the centroids (O(nnz(R) K) per iteration) in a compiled kernel over blocks of
rows on the training threads; it stops when no label changes cluster (or after
``max_iter`` iterations: on debian-deps' 22,908 labels the root's k-means takes 67,
the last 57 moving fewer than 1% of the labels each; 7.0 s on one thread, 4.8 s on two,
9.2 s with scipy's sparse x dense product).  Cosine (spherical) k-means gives balanced
trees but lost 10 points of P@1 on a tail-heavy synthetic set (docs/tree.md), so the
Euclidean one stays.  Empty clusters are dropped; a node whose
labels all fall in one cluster (e.g. identical representations) stays a leaf.

Labels without a representation (no training positive, or positives without features)
cannot be told apart by any clustering.  Left to k-means they all go to the centroid of
least norm together with a few other labels, level after level: with 994,000 such labels
among 1,000,000 the tree grew a chain to the depth limit and took 90 s to build (one-vs-
all trained all labels in 26 s).  When they are more than K, they are split off at the
root into a subtree of their own (the root's K-th child, beside K - 1 k-means clusters),
split by label id into parts of K^h labels (leaves of K labels, depth log_K of their
number; see build_tree): its nodes have
no positive instance, so the root learns to rank it last, and a beam that enters it
scores at most K outputs per node.  K or fewer of them stay with the others (the tree is
then built as LibMultiLabel's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._columns import UsedColumns
from .._compile import njit
from .._threads import resolve_threads
from ..errors import ParameterError


@dataclass(frozen=True)
class Tree:
    node_ptr: np.ndarray     # int64 (nodes + 1,)
    target: np.ndarray       # int64 (outputs,)
    leaf: np.ndarray         # bool (nodes,)
    depth: np.ndarray        # int32 (nodes,)

    @property
    def num_nodes(self) -> int:
        return int(self.leaf.size)

    @property
    def num_outputs(self) -> int:
        return int(self.target.size)

    def outputs(self, node: int) -> np.ndarray:
        return self.target[self.node_ptr[node]:self.node_ptr[node + 1]]

    def output_is_label(self) -> np.ndarray:
        """Per output: whether it is a label (a leaf's output) rather than a child node."""
        return np.repeat(self.leaf, np.diff(self.node_ptr))


def check_tree_params(branching: int, max_depth: int, seed: int = 0) -> None:
    for name, v, lo in (("branching", branching, 2), ("max_depth", max_depth, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ParameterError(f"parameter {name} must be an integer >= {lo}, got {v!r}")


def occurring_columns(M: sp.spmatrix) -> sp.csr_matrix:
    """CSR of M without its all-zero columns (the others renumbered in order): what
    clustering needs, at the width of the features that occur (a header may declare 2e9)."""
    return UsedColumns.of(M).compact(M)


def label_representations(X: sp.csr_matrix, Y: sp.spmatrix) -> sp.csr_matrix:
    """Rows of Y^T X, L2-normalised (a label without positives, or whose positives have
    no features, is a zero row)."""
    R = sp.csr_matrix(sp.csc_matrix(Y, dtype=np.float64).T @ sp.csr_matrix(X, dtype=np.float64))
    R.sum_duplicates()
    norms = np.sqrt(np.asarray(R.multiply(R).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    R.data /= np.repeat(norms, np.diff(R.indptr))
    return R


@njit(cache=True, nogil=True, inline="always")
def _row_dots(r, indptr, indices, data, CT, acc):
    """acc[c] += r . CT[:, c] for every column c (CT feature-major, d x k: a nonzero of
    r updates k contiguous sums)."""
    k = CT.shape[1]
    for p in range(indptr[r], indptr[r + 1]):
        v = data[p]
        row = CT[indices[p]]
        for c in range(k):
            acc[c] += v * row[c]


@njit(cache=True, nogil=True)
def _nearest_block(r0, r1, indptr, indices, data, CT, half_c2, out):
    """out[r] = argmax_c r.c - ||c||^2 / 2, the nearest centroid (ties to the lower id),
    for rows r0..r1-1 of R."""
    k = CT.shape[1]
    acc = np.empty(k)
    for r in range(r0, r1):
        for c in range(k):
            acc[c] = -half_c2[c]
        _row_dots(r, indptr, indices, data, CT, acc)
        best = 0
        for c in range(1, k):
            if acc[c] > acc[best]:
                best = c
        out[r] = best


@njit(cache=True, nogil=True)
def _dots_block(r0, r1, indptr, indices, data, CT, out):
    """out[:, r] = R[r] . CT for rows r0..r1-1 (the seeding's candidates, k x m)."""
    acc = np.empty(CT.shape[1])
    for r in range(r0, r1):
        acc[:] = 0.0
        _row_dots(r, indptr, indices, data, CT, acc)
        out[:, r] = acc


def kmeans(R: sp.csr_matrix, k: int, rng: np.random.Generator, max_iter: int = 300, threads: int = 1
           ) -> np.ndarray:
    """Cluster ids (0..k-1, some possibly unused) of the rows of R by Lloyd's k-means,
    seeded by greedy k-means++ (Arthur & Vassilvitskii 2007; like scikit-learn, each
    seed is the best of 2 + log k candidates drawn by D^2 sampling: plain D^2 sampling
    now and then puts two seeds in one tight group, and Lloyd's iterations never undo it).
    The assignment step, O(nnz(R) k) per iteration and most of the time, is a compiled
    kernel over blocks of rows on ``threads`` threads."""
    from ..shortlist.candidates import _blocks

    m = R.shape[0]
    sq = np.asarray(R.multiply(R).sum(axis=1)).ravel()
    C = np.empty((k, R.shape[1]))
    indptr = R.indptr.astype(np.int64, copy=False)
    indices = R.indices.astype(np.int32, copy=False)
    data = R.data.astype(np.float64, copy=False)
    threads = resolve_threads(threads)

    def dist2(rows: np.ndarray) -> np.ndarray:   # (len(rows), m) squared distances to rows of R
        D = R[rows].toarray()
        dots = np.empty((rows.size, m))
        DT = np.ascontiguousarray(D.T)
        _blocks(m, threads, lambda a, b: _dots_block(a, b, indptr, indices, data, DT, dots), block=4096)
        return np.maximum(sq[None, :] - 2 * dots + (D * D).sum(axis=1)[:, None], 0.0)

    first = int(rng.integers(m))
    C[0] = R[first].toarray().ravel()
    d2 = dist2(np.array([first]))[0]
    trials = 2 + int(np.log(k))
    for c in range(1, k):
        total = d2.sum()
        if total > 0:
            cand = rng.choice(m, size=trials, p=d2 / total)
        else:
            cand = rng.integers(m, size=1)
        pot = np.minimum(d2[None, :], dist2(cand))
        best = int(np.argmin(pot.sum(axis=1)))
        C[c] = R[int(cand[best])].toarray().ravel()
        d2 = pot[best]
    assign = np.full(m, -1, dtype=np.int64)
    new = np.empty(m, dtype=np.int64)
    for _ in range(max_iter):
        # argmin ||r - c||^2 = argmax r.c - ||c||^2 / 2
        CT = np.ascontiguousarray(C.T)
        half_c2 = 0.5 * np.einsum("ij,ij->i", C, C)
        _blocks(m, threads, lambda a, b: _nearest_block(a, b, indptr, indices, data, CT, half_c2, new), block=2048)
        if np.array_equal(new, assign):
            break
        assign[:] = new
        counts = np.bincount(assign, minlength=k)
        member = sp.csr_matrix((np.ones(m), (assign, np.arange(m))), shape=(k, m))
        sums = (member @ R).toarray()
        used = counts > 0
        C[used] = sums[used] / counts[used, None]
    return assign


def build_tree(R: sp.csr_matrix, branching: int = 100, max_depth: int = 10, seed: int = 0, threads: int = 1
               ) -> Tree:
    """The label tree over the rows of ``R`` (:func:`label_representations`); ``threads``
    for k-means' assignment step (the tree does not depend on it)."""
    check_tree_params(branching, max_depth)
    # k-means on the features that occur: the same distances, and centroids (K dense rows)
    # as long as those, not as the feature space a header declares
    R = occurring_columns(R)
    L = R.shape[0]
    rng = np.random.default_rng(seed)
    # labels without a representation: apart from the others when more than K (above)
    blank = np.flatnonzero(np.diff(R.indptr) == 0)
    if blank.size <= branching:
        blank = blank[:0]
    # breadth first: (labels, depth, whether they are the blank ones) per node; children
    # listed as node ids
    nodes: list[tuple[np.ndarray, int, bool]] = [(np.arange(L, dtype=np.int64), 0, blank.size == L)]
    outputs: list[np.ndarray] = []
    leaf: list[bool] = []
    i = 0
    while i < len(nodes):
        labels, depth, apart = nodes[i]
        groups: list[tuple[np.ndarray, bool]] = []
        if depth < max_depth and labels.size > branching:
            if apart:
                # in consecutive parts of K^h labels, the least h with K^(h+1) >= their
                # number: leaves of K labels, depth log_K of the number.  (Splitting into K
                # equal parts at every level instead left leaves of 2 labels where the
                # number is just above a power of K: 2M such labels, K = 100, gave 1M
                # leaves and 30x the time.)
                c = branching
                while c * branching < labels.size:
                    c *= branching
                groups = [(labels[a:a + c], True) for a in range(0, labels.size, c)]
            else:
                rest = np.setdiff1d(labels, blank, assume_unique=True) if i == 0 and blank.size else labels
                k = branching - (rest.size < labels.size)    # the blank subtree is the K-th child
                if rest.size > k >= 2:
                    groups = [(g, False) for g in _kmeans_groups(R, rest, k, rng, threads)]
                elif rest.size:
                    groups = [(rest, False)]
                if rest.size < labels.size:
                    groups.append((blank, True))
        if len(groups) < 2:
            outputs.append(labels)
            leaf.append(True)
        else:
            outputs.append(np.arange(len(nodes), len(nodes) + len(groups), dtype=np.int64))
            leaf.append(False)
            nodes.extend((g, depth + 1, a) for g, a in groups)
        i += 1
    sizes = np.fromiter((o.size for o in outputs), dtype=np.int64, count=len(outputs))
    node_ptr = np.zeros(len(outputs) + 1, dtype=np.int64)
    np.cumsum(sizes, out=node_ptr[1:])
    target = np.concatenate(outputs) if outputs else np.zeros(0, dtype=np.int64)
    return Tree(node_ptr, target.astype(np.int64), np.asarray(leaf, dtype=bool),
                np.asarray([d for _, d, _ in nodes], dtype=np.int32))


def _kmeans_groups(R: sp.csr_matrix, labels: np.ndarray, branching: int, rng: np.random.Generator,
                   threads: int) -> list[np.ndarray]:
    """The non-empty k-means clusters of ``labels``, each ascending, by cluster id."""
    assign = kmeans(R[labels], branching, rng, threads=threads)
    order = np.argsort(assign, kind="stable")
    cuts = np.flatnonzero(np.diff(assign[order])) + 1
    return [labels[g] for g in np.split(order, cuts)]
