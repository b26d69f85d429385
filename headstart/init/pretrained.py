"""``pretrained``: warm start from a saved model's weights for the same labels
(LIBLINEAR's warm start for parameter sweeps; also resumes a sweep over C or epsilon).
Labels the saved model does not cover start from zero."""

from __future__ import annotations

import logging

import numba as nb
import numpy as np

from ..errors import ModelFormatError
from .base import PRETRAINED, Initializer, empty_plan

log = logging.getLogger(__name__)


class Pretrained(Initializer):
    name = "pretrained"

    def __init__(self, path):
        self.path = path

    def prepare(self, ctx):
        from ..model.format import load_model

        model = load_model(self.path, allow_gaps=True)
        if model.n_features != ctx.n_features:
            raise ModelFormatError(f"{self.path}: pretrained model has {model.n_features} features, "
                                   f"the training data has {ctx.n_features}")
        W = model.weights.tocsr()
        if ctx.feature_order is not None:
            W = ctx.feature_order.to_internal(W)
        W.sort_indices()
        bias = ctx.problem.bias
        # stored intercept = bias weight * bias value
        wb = (model.intercept.astype(np.float64) / bias) if bias > 0 else np.zeros(model.num_labels)
        plan = empty_plan(PRETRAINED)
        return plan._replace(pre_indptr=W.indptr.astype(np.int64), pre_indices=W.indices.astype(np.int32),
                             pre_data=W.data.astype(np.float32), pre_intercept=wb.astype(np.float32),
                             pre_first=np.int64(model.first_label), pre_count=np.int64(model.num_labels))


@nb.njit(cache=True, nogil=True)
def initial_weights(P, w, wx, label, pre_indptr, pre_indices, pre_data, pre_intercept, pre_first, pre_count):
    w[:] = 0.0
    r = label - pre_first
    if r < 0 or r >= pre_count:
        wx[:] = 0.0
        return False
    for k in range(pre_indptr[r], pre_indptr[r + 1]):
        w[pre_indices[k]] = pre_data[k]
    w[w.size - 1] = pre_intercept[r]
    return True  # wx = X w0 is computed by the caller
