"""Post-processing after solving, never inside (DiSMEC++ ``training/postproc``): which
weights a label keeps.  Each is a plan class with a per-label threshold function
attached to the generic :func:`.base.threshold`; the training loop calls it for every
finished label and keeps the weights with |w_j| >= the threshold (the bias weight is
always kept)."""

from __future__ import annotations

from .base import make, threshold
from . import prune, sparsify  # noqa: F401  (attach their implementations)

__all__ = ["make", "threshold"]
