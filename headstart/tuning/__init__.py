"""What training alone does not choose, chosen by cross-validation on the training data,
as LibMultiLabel's linear techniques do: per-label decision thresholds
(:func:`micromacro`, its ``thresholding`` from version 0.4, and :func:`scutfbr`, the one
up to 0.3.3) and per-label positives' costs
(:func:`cost_sensitive`, its ``cost_sensitive`` and ``cost_sensitive_micro``); and the
cross-validated ranking metrics of several C (:func:`cross_validate`, LIBLINEAR's -v and
-C for extreme classification)."""

from __future__ import annotations

from .costs import COSTS, Costs, cost_sensitive, cost_trainings
from .cv import CrossValidation, auto_grid, cross_validate, start_C
from .thresholds import FBR_VALUES, Thresholds, micromacro, scutfbr, trainings_needed

__all__ = ["COSTS", "Costs", "cost_sensitive", "cost_trainings", "CrossValidation", "auto_grid", "cross_validate", "start_C", "FBR_VALUES", "Thresholds", "micromacro",
           "scutfbr", "trainings_needed"]
