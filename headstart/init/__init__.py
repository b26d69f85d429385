"""Initialisation strategies: where each label's Newton solve starts.

Each strategy is a small class with ``prepare(ctx)`` -- run once before training, in
Python, for whatever is shared by all labels (the mean instance, the OvA-primal
vector, ...) -- which returns an :class:`~.base.InitPlan`; the per-label work (the
``initial_weights`` of the strategy) is a numba kernel in the same module, dispatched
by the plan's code inside the compiled training loop.
"""

from .base import InitPlan, Initializer, TrainingContext, make_initializer

__all__ = ["InitPlan", "Initializer", "TrainingContext", "make_initializer"]
