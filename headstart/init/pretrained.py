"""``pretrained``: warm start from a saved model's weights for the same labels
(LIBLINEAR's warm start for parameter sweeps; also resumes a sweep over C or epsilon).
Labels the saved model does not cover start from zero."""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np

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
        from ..model.format import load_model

        model = load_model(self.path, allow_gaps=True)
        if "tree" in (model.extensions or {}):   # its rows are nodes: even a matching count starts wrong labels
            raise ModelFormatError(f"{self.path}: a label-tree model (its rows are the tree nodes' outputs, not "
                                   "labels) cannot start one-vs-all training")
        if model.n_features != ctx.n_features:
            raise ModelFormatError(f"{self.path}: pretrained model has {model.n_features} features, "
                                   f"the training data has {ctx.n_features}")
        L = int(ctx.Y.shape[1])
        if model.label_space != L:
            raise ModelFormatError(f"{self.path}: pretrained model has a label space of {model.label_space}, "
                                   f"the training data {L}: its rows would start other labels")
        first, stop = int(model.first_label), int(model.first_label) + int(model.num_labels)
        gaps = list(getattr(model, "missing_ranges", None) or [])
        covered = stop - first - sum(max(0, min(b, stop) - max(a, first)) for a, b in gaps)
        if covered < L:
            log.warning("%s: the pretrained model covers %d of the %d labels; the others start from zero",
                        self.path, covered, L)
        W = model.weights.tocsr()
        if ctx.feature_order is not None:
            W = ctx.feature_order.to_internal(W)
        W.sort_indices()
        bias = ctx.problem.bias
        # stored intercept = bias weight * bias value
        wb = (model.intercept.astype(np.float64) / bias) if bias > 0 else np.zeros(model.num_labels)
        return PretrainedPlan(W.indptr.astype(np.int64), W.indices.astype(np.int32), W.data.astype(np.float32),
                              wb.astype(np.float32), int(model.first_label), int(model.num_labels))


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
