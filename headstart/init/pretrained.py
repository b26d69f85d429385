"""``pretrained``: warm start from a saved model's weights for the same labels
(LIBLINEAR's warm start for parameter sweeps; also resumes a sweep over C or epsilon).
Labels the saved model does not cover start from zero."""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..errors import ModelFormatError
from .base import Initializer, plan_kernel, plan_restriction, register

log = logging.getLogger(__name__)


class PretrainedPlan(NamedTuple):
    indptr: np.ndarray       # CSR rows of the saved labels (internal feature numbering)
    indices: np.ndarray
    data: np.ndarray
    intercept: np.ndarray    # bias weights
    first: int               # label range held
    count: int


class Pretrained(Initializer):
    name = "pretrained"

    def __init__(self, path):
        self.path = path

    def prepare(self, ctx):
        from ..model.manifest import read_manifest

        m = read_manifest(self.path)
        if "tree" in m:   # its rows are nodes: even a matching count starts wrong labels
            raise ModelFormatError(f"{self.path}: a label-tree model (its rows are the tree nodes' outputs, not "
                                   "labels) cannot start one-vs-all training")
        d_model, L_model = int(m["n_features"]), int(m["label_space"])
        d, L = ctx.n_features, int(ctx.Y.shape[1])
        # Growth is what adding rows does (new feature ids beyond the old ones of a libsvm
        # file, new labels appended): the old ids keep their meaning, so the old rows are
        # still the best start there and the new features / labels start from 0.  Fewer
        # features or labels than the model can only be other data (helper-68).
        if d_model > d:
            raise ModelFormatError(f"{self.path}: pretrained model has {d_model} features, the training data only "
                                   f"{d}: it was trained on other data")
        if L_model > L:
            raise ModelFormatError(f"{self.path}: pretrained model has a label space of {L_model}, the training "
                                   f"data only {L}: its rows would start other labels")
        if d_model < d or L_model < L:
            log.warning("%s: the pretrained model has %d features and %d labels, the training data %d and %d: "
                        "features and labels beyond the model's start from 0 (ids must mean the same in both)",
                        self.path, d_model, L_model, d, L)
        _warn_other_preparation(self.path, m.get("params") or {}, ctx.params)
        # only the rows of the labels trained here (helper-68: the whole model was loaded,
        # ~3.4x its size at the peak, to start a range of it)
        labels = getattr(ctx, "labels", None)
        lo, hi = (int(labels[0]), int(labels[-1]) + 1) if labels is not None and len(labels) else (0, L)
        first, W, intercept, covered = _rows(self.path, m, lo, min(hi, L_model), d_model)
        want = L
        if labels is not None:
            # of the labels trained (not the rows read, which span the gaps between them:
            # labels 1 and 19 of a model of 2..15 read 14 rows and start 2 from zero)
            # (labels ascending: two binary searches a shard, not a pass over the labels --
            # thousands of shards times millions of labels otherwise)
            labels = np.asarray(labels)
            want = int(labels.size)
            covered = sum(int(np.searchsorted(labels, int(s["first_label"]) + int(s["num_labels"]))
                              - np.searchsorted(labels, int(s["first_label"])))
                          for s in m["shards"])
        if covered < want:
            log.warning("%s: the pretrained model covers %d of the %d labels trained; the others start from zero",
                        self.path, covered, want)
        if d_model < d:
            W = sp.csr_matrix((W.data, W.indices, W.indptr), shape=(W.shape[0], d))
        if ctx.feature_order is not None:
            W = ctx.feature_order.to_internal(W)
        W.sort_indices()
        bias = ctx.problem.bias
        # stored intercept = bias weight * bias value
        wb = (intercept.astype(np.float64) / bias) if bias > 0 else np.zeros(W.shape[0])
        return PretrainedPlan(W.indptr.astype(np.int64), W.indices.astype(np.int32, copy=False),
                              W.data.astype(np.float32, copy=False), wb.astype(np.float32), first, W.shape[0])


#: the parameters that say how the model's features were made from the data
_PREPARATION = ("normalize", "tfidf", "feature_transform", "hash_buckets", "hash_functions", "hash_seed")


def _warn_other_preparation(path, saved: dict, params) -> None:
    """A model trained on differently prepared features (normalised rows against raw ones,
    another hashing) starts far from the optimum: training still converges to the same
    solution, only slower -- so a warning, not an error."""
    hashing = (saved.get("hash_buckets") or 0) > 0 or params.hash_buckets > 0
    other = [f"{k}={saved[k]!r} (now {getattr(params, k)!r})" for k in _PREPARATION
             if k in saved and saved[k] != getattr(params, k) and (hashing or not k.startswith("hash_"))]
    if other:
        log.warning("%s: the pretrained model's features were prepared otherwise: %s; its weights are a poor "
                    "start (training reaches the same solution, more slowly)", path, ", ".join(other))


def _rows(path, m: dict, lo: int, hi: int, d: int):
    """(first, CSR rows, intercepts, rows covered) of the saved labels [lo, hi): only the
    shards that overlap the range are read, one at a time; labels in a gap of the model
    get an empty row and intercept 0."""
    from pathlib import Path

    from ..model.shards import read_shard

    blocks, bias, covered = [], [], 0
    pos = lo
    for entry in sorted(m["shards"], key=lambda s: s["first_label"]):
        a, n = int(entry["first_label"]), int(entry["num_labels"])
        if a + n <= lo or a >= hi:
            continue
        _, w, b = read_shard(Path(path), entry, d)
        s, e = max(a, lo), min(a + n, hi)
        if s > pos:
            blocks.append(sp.csr_matrix((s - pos, d), dtype=np.float32))
            bias.append(np.zeros(s - pos, dtype=np.float32))
        blocks.append(w[s - a:e - a])
        bias.append(np.asarray(b[s - a:e - a], dtype=np.float32))
        covered += e - s
        pos = e
        del w
    if not blocks:
        return lo, sp.csr_matrix((0, d), dtype=np.float32), np.zeros(0, dtype=np.float32), 0
    W = blocks[0].tocsr() if len(blocks) == 1 else sp.vstack(blocks, format="csr", dtype=np.float32)
    return lo, W, np.concatenate(bias), covered


def _start(plan, P, O, w, psum, pos, label):
    w[:] = 0.0
    r = label - plan.first
    if r < 0 or r >= plan.count:
        O.wx[:] = 0.0
        return False
    for k in range(plan.indptr[r], plan.indptr[r + 1]):
        w[plan.indices[k]] = plan.data[k]
    w[w.size - 1] = plan.intercept[r]
    return True  # wx = X w0 is computed by the caller


def _local(plan, R):
    # The label's saved row (original feature space, ascending ids) merged with the local
    # columns and brought to the training scale; weights of features that no row of the
    # sub-problem has are dropped (there they only add regularisation: the solution has
    # them at 0).  A one-row plan whose first label is the label, so that _start finds
    # it; a label the saved model lacks gets an empty one (zero start).
    nf = R.feats.size
    indices = np.empty(nf, dtype=np.int32)
    data = np.empty(nf)
    intercept = np.zeros(1)
    r = R.label - plan.first
    k = 0
    count = 0
    if 0 <= r < plan.count:
        count = 1
        intercept[0] = plan.intercept[r]
        q = 0
        for p in range(plan.indptr[r], plan.indptr[r + 1]):
            j = plan.indices[p]
            while q < nf and R.feats[q] < j:
                q += 1
            if q == nf:
                break
            if R.feats[q] == j:
                indices[k] = q
                data[k] = plan.data[p] / R.scale[q]
                k += 1
    indptr = np.zeros(2, dtype=np.int64)
    indptr[1] = k
    return PretrainedPlan(indptr, indices[:k], data[:k], intercept, R.label, count)


plan_kernel(PretrainedPlan, _start)
plan_restriction(PretrainedPlan, _local)
register("pretrained", lambda p: Pretrained(p.pretrained),
         "the weights of a saved model (--pretrained) for the same labels; others start from zero")
