"""Prediction: top-k labels (or those above a score threshold) with bounded memory, streaming over
shards, preprocessing."""

from .preprocess import apply_preprocessing, fit_idf, fit_preprocessing
from .topk import decision_function, merge_topk, predict_above, predict_topk, predict_topk_streaming

__all__ = ["predict_topk", "predict_topk_streaming", "merge_topk", "decision_function", "predict_above",
           "apply_preprocessing", "fit_preprocessing", "fit_idf"]
