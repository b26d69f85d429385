"""Shortlisted training: each label on its positives plus a shortlist of hard negatives,
on sparse or dense + sparse features (docs/shortlist.md).

* :func:`build_shortlist` -- the first stage (:class:`FirstStage`): every training
  instance's K candidate labels, inverted into per-label instance lists, with recall;
* :func:`read_shortlist` / :func:`write_shortlist` -- DiSMEC++'s shortlist file;
* :func:`fit_shortlisted` / :func:`train_shortlisted_dir` -- training (in memory, or
  sharded, resumable and on Dask like full one-vs-all);
* :func:`predict_model` -- candidates from the first stage, scored by the model, top-k
  (:func:`predict_model_dir`: the same from a model directory, one shard in memory at a time).

Optional dependency: ``pynndescent`` (the ``ann`` extra) for approximate search.
"""

from .api import (fit_shortlisted, model_features, predict_model, predict_model_dir, prepare_shortlisted,
                  train_shortlisted_dir)
from .candidates import (BACKENDS, FirstStage, FirstStageParams, ShortlistResult, build_shortlist,
                         candidates_to_shortlist, recall)
from .features import DenseSparseParams, svd_embedding
from .fileformat import read_shortlist, write_shortlist
from .predict import predict_candidates
from .training import train_shortlisted

__all__ = ["fit_shortlisted", "train_shortlisted_dir", "prepare_shortlisted", "predict_model", "predict_model_dir", "model_features",
           "FirstStage", "FirstStageParams", "ShortlistResult", "build_shortlist", "candidates_to_shortlist",
           "recall", "BACKENDS", "DenseSparseParams", "svd_embedding", "read_shortlist", "write_shortlist",
           "predict_candidates", "train_shortlisted"]
