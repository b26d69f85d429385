"""Beam search down the label tree: top-k labels per instance in O(beam x K) weight rows.

Per instance, level by level (LibMultiLabel's ``TreeModel`` does the same in Python):
the beam holds up to ``beam`` nodes with a path score; every internal node of the beam
is replaced by its children, each scored ``path + log p(output)``, leaves stay with
their score, and the best ``beam`` candidates form the next beam; when the beam holds
leaves only, each label of a beam leaf gets ``exp(path + log p(output))``.

``log p`` turns a decision value s into a log-probability-like score (``score``):
``"sigmoid"``, ``log sigmoid(a s) = -log(1 + exp(-a s))`` (LibMultiLabel's since 0.10,
a = 3 its default; a = 1 is a logistic-loss model's own probability), or
``"squared-hinge"``, ``-max(0, 1 - s)^2`` (LibMultiLabel's up to 0.9).  A label that no beam reaches has
score 0 (as in LibMultiLabel); when fewer than k labels are reached, the rest of the row
is filled with the lowest unreached label ids at score 0.

A node's outputs are scored together from a feature-major copy of its weights
(:class:`NodeIndex`: per node, its features in ascending order, each with the node's
outputs that weigh it): x's features are looked up in the node's list, each hit adds
to the children's sums, so a node costs O(nnz(x) log F_node + hits) whatever its number
of children -- rather than one dot product of x with every child's weight row (which
measured 3 ms per instance on debian-deps, 10 levels x beam 10 x up to 100 children).
Sums are float64, ``intercept_o + sum_f x_f w_of``, added in feature order.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from typing import NamedTuple

from .._compile import njit
from .._threads import resolve_threads
from ..errors import ParameterError
from ..shortlist.candidates import _blocks
from ..validation import check_k

#: the beam's scores (``score`` of :func:`beam_search`), LibMultiLabel's default first
SCORES = ("sigmoid", "squared-hinge")
LINK_SIGMOID, LINK_SQUARED_HINGE = 0, 1
#: LibMultiLabel 0.10's ``prob_A``
SIGMOID_A = 3.0


def check_score(score: str, a: float) -> int:
    if score not in SCORES:
        raise ParameterError(f"parameter score must be one of {', '.join(SCORES)}, got {score!r}")
    if isinstance(a, bool) or not isinstance(a, (int, float, np.number)) or not (0 < a < math.inf):
        raise ParameterError(f"parameter sigmoid_a must be a number > 0, got {a!r}")
    return SCORES.index(score)


@njit(cache=True, nogil=True, inline="always")
def _logp(s, link, slope):
    if link == LINK_SIGMOID:
        z = slope * s
        return -math.log1p(math.exp(-z)) if z > -30.0 else z   # log sigmoid(z), = z - log(1 + e^z) ~ z
    m = 1.0 - s
    return -m * m if m > 0.0 else 0.0


class NodeIndex(NamedTuple):
    """The tree's weights feature-major per node (see the module docstring)."""

    feat_ptr: np.ndarray    # int64 (nodes + 1): node v's features are feats[feat_ptr[v]:feat_ptr[v + 1]]
    feats: np.ndarray       # int32, ascending within a node
    ent_ptr: np.ndarray     # int64 (len(feats) + 1): the entries of each (node, feature)
    ent_out: np.ndarray     # int32: the output's index within its node
    ent_w: np.ndarray       # float32: its weight


@njit(cache=True, nogil=True)
def _count_features(v0, v1, node_ptr, w_indptr, w_indices, d, out):
    """out[v] = distinct features of node v's weight rows, for nodes v0..v1-1."""
    mark = np.full(d, -1, dtype=np.int64)
    for v in range(v0, v1):
        c = 0
        for p in range(w_indptr[node_ptr[v]], w_indptr[node_ptr[v + 1]]):
            f = w_indices[p]
            if mark[f] != v:
                mark[f] = v
                c += 1
        out[v] = c


@njit(cache=True, nogil=True)
def _fill_index(v0, v1, node_ptr, w_indptr, w_indices, w_data, d, feat_ptr, feats, ent_ptr, ent_out, ent_w):
    """The index of nodes v0..v1-1 by a counting sort per node: node v's entries are the
    nonzeros of its rows, so they fill exactly the positions its rows have in W (and
    its features [feat_ptr[v], feat_ptr[v + 1])); within a feature, outputs ascend."""
    slot = np.full(d, -1, dtype=np.int64)
    for v in range(v0, v1):
        lo, hi = w_indptr[node_ptr[v]], w_indptr[node_ptr[v + 1]]
        f0 = feat_ptr[v]
        nf = 0
        for p in range(lo, hi):
            f = w_indices[p]
            if slot[f] < 0:
                slot[f] = 0
                feats[f0 + nf] = f
                nf += 1
        fs = feats[f0:f0 + nf]
        fs.sort()
        for i in range(nf):
            slot[fs[i]] = i
            ent_ptr[f0 + i] = 0
        for p in range(lo, hi):
            ent_ptr[f0 + slot[w_indices[p]]] += 1
        pos = lo
        for i in range(nf):     # counts -> starts (global positions)
            c = ent_ptr[f0 + i]
            ent_ptr[f0 + i] = pos
            pos += c
        nxt = ent_ptr[f0:f0 + nf].copy()
        for o in range(node_ptr[v], node_ptr[v + 1]):
            for p in range(w_indptr[o], w_indptr[o + 1]):
                i = slot[w_indices[p]]
                q = nxt[i]
                nxt[i] = q + 1
                ent_out[q] = o - node_ptr[v]
                ent_w[q] = w_data[p]
        for i in range(nf):
            slot[fs[i]] = -1


def node_index(W: sp.csr_matrix, node_ptr: np.ndarray, threads: int = 0) -> NodeIndex:
    """:class:`NodeIndex` of the outputs' weights W (rows in node order): two passes over
    the nonzeros, nodes in blocks on ``threads`` threads (a global sort of the nonzeros
    by (node, feature) took 8-12 s for debian-deps' 85M weights)."""
    W = sp.csr_matrix(W)
    nodes = node_ptr.size - 1
    d = max(int(W.shape[1]), 1)
    wp = W.indptr.astype(np.int64, copy=False)
    wi = W.indices.astype(np.int32, copy=False)
    wd = W.data.astype(np.float32, copy=False)
    threads = resolve_threads(threads)
    counts = np.zeros(nodes, dtype=np.int64)
    _blocks(nodes, threads, lambda a, b: _count_features(a, b, node_ptr, wp, wi, d, counts), block=64)
    feat_ptr = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=feat_ptr[1:])
    nnz = int(wp[-1])
    feats = np.empty(int(feat_ptr[-1]), dtype=np.int32)
    ent_ptr = np.empty(feats.size + 1, dtype=np.int64)
    ent_ptr[-1] = nnz
    ent_out = np.empty(nnz, dtype=np.int32)
    ent_w = np.empty(nnz, dtype=np.float32)
    _blocks(nodes, threads, lambda a, b: _fill_index(a, b, node_ptr, wp, wi, wd, d, feat_ptr, feats, ent_ptr,
                                                     ent_out, ent_w), block=64)
    return NodeIndex(feat_ptr, feats, ent_ptr, ent_out, ent_w)


@njit(cache=True, nogil=True, inline="always")
def _score_node(v, x_indices, x_data, xlo, xhi, feat_ptr, feats, ent_ptr, ent_out, ent_w, intercept, node_ptr, acc):
    """acc[j] = intercept + x . w for the outputs j of node v."""
    o0 = node_ptr[v]
    for j in range(node_ptr[v + 1] - o0):
        acc[j] = intercept[o0 + j]
    lo = feat_ptr[v]
    hi = feat_ptr[v + 1]
    for p in range(xlo, xhi):
        if lo >= hi:
            break
        f = x_indices[p]
        q = lo + np.searchsorted(feats[lo:hi], f)   # x's features ascend: search from the last hit on
        if q < hi and feats[q] == f:
            xv = np.float64(x_data[p])
            # unsigned position and output id: no negative-index test per product
            # (prediction/topk.py, _span)
            for e in range(np.uint64(ent_ptr[q]), np.uint64(ent_ptr[q + 1])):
                acc[np.uint32(ent_out[e])] += xv * np.float64(ent_w[e])
            q += 1
        lo = q


@njit(cache=True, nogil=True, inline="always")
def _offer(bs, bk, bv, size, cap, s, key, val):
    """Keep the best ``cap`` of the offered (s, key, val), ordered by s descending, ties
    by key ascending, in bs/bk/bv[:size]; returns the new size.  A bounded insertion:
    with a beam of 10 among ~1,000 candidates per level, most offers are one comparison
    (a full sort of the candidates per level was most of the search's time)."""
    if size == cap:
        if s < bs[size - 1] or (s == bs[size - 1] and key >= bk[size - 1]):
            return size
        size -= 1
    j = size
    while j > 0 and (bs[j - 1] < s or (bs[j - 1] == s and bk[j - 1] > key)):
        bs[j] = bs[j - 1]
        bk[j] = bk[j - 1]
        bv[j] = bv[j - 1]
        j -= 1
    bs[j] = s
    bk[j] = key
    bv[j] = val
    return size + 1


@njit(cache=True, nogil=True)
def beam_search_block(r0, r1, x_indptr, x_indices, x_data, feat_ptr, feats, ent_ptr, ent_out, ent_w, intercept,
                      node_ptr, target, leaf, n_labels, beam, k, link, slope, out_labels, out_scores):
    """Top-k labels and scores of rows r0..r1-1 (see the module docstring).  Candidates
    of a level are ranked by path score, ties to the earlier one (beam order, then the
    node's output order); labels by log-score, ties to the lower label id."""
    width = 1
    for v in range(leaf.size):
        width = max(width, node_ptr[v + 1] - node_ptr[v])
    acc = np.empty(width)
    cur_node = np.empty(beam, dtype=np.int64)
    cur_score = np.empty(beam)
    nxt_node = np.empty(beam, dtype=np.int64)
    nxt_score = np.empty(beam)
    nxt_seq = np.empty(beam, dtype=np.int64)
    top_s = np.empty(k)
    top_l = np.empty(k, dtype=np.int64)
    top_v = np.empty(k, dtype=np.int64)
    taken = np.zeros(n_labels, dtype=np.bool_)
    for r in range(r0, r1):
        xlo, xhi = x_indptr[r], x_indptr[r + 1]
        size = 1
        cur_node[0] = 0
        cur_score[0] = 0.0
        while True:
            internal = False
            nsize = 0
            seq = 0
            for b in range(size):
                v = cur_node[b]
                if leaf[v]:
                    nsize = _offer(nxt_score, nxt_seq, nxt_node, nsize, beam, cur_score[b], seq, v)
                    seq += 1
                    continue
                internal = True
                _score_node(v, x_indices, x_data, xlo, xhi, feat_ptr, feats, ent_ptr, ent_out, ent_w, intercept,
                            node_ptr, acc)
                o0 = node_ptr[v]
                for j in range(node_ptr[v + 1] - o0):
                    nsize = _offer(nxt_score, nxt_seq, nxt_node, nsize, beam, cur_score[b] + _logp(acc[j], link, slope),
                                   seq, target[o0 + j])
                    seq += 1
            if not internal:
                break
            size = nsize
            for b in range(size):
                cur_node[b] = nxt_node[b]
                cur_score[b] = nxt_score[b]
        m = 0
        for b in range(size):
            v = cur_node[b]
            _score_node(v, x_indices, x_data, xlo, xhi, feat_ptr, feats, ent_ptr, ent_out, ent_w, intercept,
                        node_ptr, acc)
            o0 = node_ptr[v]
            for j in range(node_ptr[v + 1] - o0):
                lab = target[o0 + j]
                m = _offer(top_s, top_l, top_v, m, k, cur_score[b] + _logp(acc[j], link, slope), lab, lab)
        for a in range(m):
            out_labels[r, a] = top_l[a]
            out_scores[r, a] = np.float32(math.exp(top_s[a]))
            taken[top_l[a]] = True
        j = 0
        for a in range(m, k):   # unreached labels score 0: the lowest ids not yet listed
            while taken[j]:
                j += 1
            out_labels[r, a] = j
            out_scores[r, a] = 0.0
            j += 1
        for a in range(k):
            taken[out_labels[r, a]] = False


def beam_search(index: NodeIndex, intercept: np.ndarray, tree, n_labels: int, X: sp.csr_matrix, k: int = 5,
                beam: int = 10, score: str = "sigmoid", sigmoid_a: float = SIGMOID_A, threads: int = 0
                ) -> tuple[np.ndarray, np.ndarray]:
    """(labels int64, scores float32), both (rows, k), best first, of the preprocessed
    CSR instances X (sorted indices) under the tree's outputs (``index``:
    :func:`node_index` of their weights, ``intercept``)."""
    check_k(k)
    link = check_score(score, sigmoid_a)
    if k > n_labels:
        raise ParameterError(f"k = {k} is more than the model's {n_labels} labels")
    if isinstance(beam, bool) or not isinstance(beam, (int, np.integer)) or beam < 1:
        raise ParameterError(f"parameter beam_width must be an integer >= 1, got {beam!r}")
    X = sp.csr_matrix(X)
    if not X.has_sorted_indices:
        X = X.sorted_indices()
    n = X.shape[0]
    labels = np.empty((n, k), dtype=np.int64)
    scores = np.empty((n, k), dtype=np.float32)
    xi = X.indices.astype(np.int32, copy=False)
    xd = X.data.astype(np.float32, copy=False)
    xp = X.indptr.astype(np.int64, copy=False)
    b = np.asarray(intercept, dtype=np.float64)
    leaf = np.ascontiguousarray(tree.leaf, dtype=np.bool_)

    def run(r0: int, r1: int) -> None:
        beam_search_block(r0, r1, xp, xi, xd, *index, b, tree.node_ptr, tree.target, leaf, n_labels, int(beam),
                          k, link, float(sigmoid_a), labels, scores)

    _blocks(n, resolve_threads(threads), run, block=256)
    return labels, scores
