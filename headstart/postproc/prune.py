"""A fixed threshold (DiSMEC's 0.01, the default ``--prune``): weights with |w| below
it become zero.  Pruning after solving is what keeps one-vs-all models of 10^5..10^6
labels in memory (Babbar & Schoelkopf, DiSMEC, 2017)."""

from __future__ import annotations

from typing import NamedTuple

from ..objective._typed import implement
from .base import threshold


class Prune(NamedTuple):
    value: float


implement(threshold, Prune, lambda plan, P, O, W, f: plan.value)
