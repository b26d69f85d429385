"""What training alone does not choose, chosen by cross-validation on the training data:
per-label decision thresholds (:func:`scutfbr`, LibMultiLabel's ``thresholding``)."""

from __future__ import annotations

from .thresholds import FBR_VALUES, Thresholds, scutfbr, trainings_needed

__all__ = ["FBR_VALUES", "Thresholds", "scutfbr", "trainings_needed"]
