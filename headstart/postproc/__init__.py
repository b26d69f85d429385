"""Post-processing after solving, never inside (DiSMEC++ ``training/postproc``): which
weights a label keeps.  Each is a plan class with a per-label threshold function
attached to the generic :func:`.base.threshold`; the training loop calls it for every
finished label and keeps the weights with |w_j| >= the threshold (the bias weight is
always kept)."""

from __future__ import annotations

from .base import threshold
from .prune import Prune
from .sparsify import Sparsify


def make(params):
    """The post-processing plan of these training parameters."""
    if params.sparsify > 0:
        return Sparsify(float(params.sparsify) / 100.0)
    return Prune(float(params.prune))


__all__ = ["make", "threshold"]
