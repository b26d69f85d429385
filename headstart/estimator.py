"""A scikit-learn style estimator over the functional core.

``__init__`` only stores parameters; ``fit`` validates the inputs once (the boundary),
learns the preprocessing, trains and sets the learned attributes ending in ``_``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from .errors import ParameterError
from .model.model import FeatureHashing, OvAModel, Preprocessing
from .params import TrainParams
from .training.stats import TrainingStats
from .training.trainer import ChunkResult, train_labels
from .validation import check_features, check_labels

log = logging.getLogger(__name__)

_PARAM_NAMES = tuple(f.name for f in fields(TrainParams))


def resolve_label_range(label_space: int, first_label: int = 0, num_labels: int | None = None) -> tuple[int, int]:
    """Validate a contiguous label range [first, first + count) of a label space."""
    if not isinstance(first_label, (int, np.integer)) or first_label < 0 or first_label > label_space:
        raise ParameterError(f"parameter first_label must be an integer in [0, {label_space}], got {first_label!r}")
    if num_labels is None:
        num_labels = label_space - first_label
    if not isinstance(num_labels, (int, np.integer)) or num_labels < 0 or first_label + num_labels > label_space:
        raise ParameterError(f"parameter num_labels must be an integer in [0, {label_space - first_label}] "
                             f"(labels {first_label}..{label_space - 1}), got {num_labels!r}")
    return int(first_label), int(num_labels)


@dataclass
class PreparedData:
    """Training data after validation and preprocessing, with what the manifest needs."""

    X: sp.csr_matrix              # canonical float32 CSR, preprocessed
    Y: sp.csc_matrix              # 0/1, column j = positives of label j (sorted indices)
    preprocessing: Preprocessing
    label_counts: np.ndarray      # int64 (label_space,)
    first_label: int
    num_labels: int

    @property
    def n_train(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def label_space(self) -> int:
        return int(self.Y.shape[1])

    @property
    def stop(self) -> int:
        return self.first_label + self.num_labels


def prepare_data(X: Any, Y: Any, params: TrainParams, first_label: int = 0,
                 num_labels: int | None = None) -> PreparedData:
    """Validation and preprocessing of the training data (the public boundary).

    Y is returned in CSC with sorted indices: the trainer needs the columns, and doing
    the conversion once here makes it free for every later shard (and task).
    """
    from .prediction.preprocess import fit_preprocessing

    if not isinstance(params, TrainParams):
        raise ParameterError(f"params must be a TrainParams, got {type(params).__name__}")
    X = check_features(X)
    Yr = check_labels(Y, X.shape[0])
    first, count = resolve_label_range(Yr.shape[1], first_label, num_labels)
    pre = Preprocessing()
    hashing = FeatureHashing.from_params(params)
    if params.tfidf or params.normalize or params.transform != "identity" or hashing is not None:
        pre, X = fit_preprocessing(X, normalize=params.normalize, tfidf=params.tfidf, transform=params.transform,
                                   hashing=hashing)
        X = check_features(X)
    label_counts = np.asarray(Yr.sum(axis=0)).ravel().astype(np.int64)
    Yc = sp.csc_matrix(Yr)
    Yc.sort_indices()
    return PreparedData(X, Yc, pre, label_counts, first, count)


def fit_model(X, Y, params: TrainParams, *, first_label: int = 0, num_labels: int | None = None,
              progress: Callable[[int], None] | None = None, sink: Callable[[ChunkResult], None] | None = None,
              collect: bool = True) -> tuple[OvAModel | None, TrainingStats | None]:
    """Functional core of :meth:`OvAClassifier.fit`: validate, preprocess, train a label range."""
    data = prepare_data(X, Y, params, first_label, num_labels)
    out = train_labels(data.X, data.Y, params, np.arange(data.first_label, data.stop), progress=progress,
                       sink=sink, collect=collect)
    if out is None:
        return None, None
    weights, intercept, stats = out
    model = OvAModel(weights=weights, intercept=intercept, n_features=data.n_features,
                     label_space=data.label_space, first_label=data.first_label, params=params,
                     preprocessing=data.preprocessing, label_counts=data.label_counts, n_train=data.n_train)
    return model, stats


class OvAClassifier:
    """One-vs-all linear classifier for extreme multi-label data (DiSMEC-style training).

    Parameters are those of :class:`headstart.TrainParams` (same names, same defaults),
    e.g. ``OvAClassifier(init="aop", C=1.0, epsilon=0.01, threads=0, prune=0.01)``.

    Attributes after ``fit``: ``coef_`` (CSR, labels x features, no bias column),
    ``intercept_`` (bias weight times bias value), ``stats_`` (:class:`TrainingStats`),
    ``model_`` (:class:`OvAModel`), ``n_features_in_``.
    """

    def __init__(self, **params: Any):
        unknown = sorted(set(params) - set(_PARAM_NAMES))
        if unknown:
            raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(_PARAM_NAMES)}")
        defaults = TrainParams()
        for name in _PARAM_NAMES:
            setattr(self, name, params.get(name, getattr(defaults, name)))

    # scikit-learn protocol
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _PARAM_NAMES}

    def set_params(self, **params: Any) -> "OvAClassifier":
        for k, v in params.items():
            if k not in _PARAM_NAMES:
                raise ParameterError(f"unknown parameter {k!r}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        d = TrainParams()
        changed = {k: v for k, v in self.get_params().items() if v != getattr(d, k)}
        return f"OvAClassifier({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    @property
    def params(self) -> TrainParams:
        return TrainParams(**self.get_params())

    def fit(self, X, Y, *, first_label: int = 0, num_labels: int | None = None,
            progress: Callable[[int], None] | None = None) -> "OvAClassifier":
        """Train labels ``[first_label, first_label + num_labels)`` (default: all) of (X, Y).

        X: CSR or dense (n x d); Y: CSR/dense 0-1 (n x L).
        """
        model, stats = fit_model(X, Y, self.params, first_label=first_label, num_labels=num_labels,
                                 progress=progress)
        self._set_model(model)
        self.stats_ = stats
        return self

    def _set_model(self, model: OvAModel) -> None:
        self.model_ = model
        self.coef_ = model.weights
        self.intercept_ = model.intercept
        self.n_features_in_ = model.n_features

    def _check_fitted(self) -> OvAModel:
        if not hasattr(self, "model_"):
            raise ParameterError("this OvAClassifier is not fitted yet: call fit(X, Y) or headstart.load(dir)")
        return self.model_

    def predict_topk(self, X, k: int = 5, **kw) -> tuple[np.ndarray, np.ndarray]:
        """(labels, scores) of shape (n, k): the k best labels per row, best first."""
        from .prediction.topk import predict_topk

        return predict_topk(self._check_fitted(), X, k, **kw)

    def decision_function(self, X, **kw) -> np.ndarray:
        """Dense scores (n x labels) -- for small label counts only."""
        from .prediction.topk import decision_function

        return decision_function(self._check_fitted(), X, **kw)

    def save(self, path, **kw) -> None:
        from .model.writer import save_model

        save_model(self._check_fitted(), path, **kw)


def load(path, **kw) -> OvAClassifier:
    """Load a saved model directory into a fitted :class:`OvAClassifier`."""
    from .model.reader import load_model

    model = load_model(path, **kw)
    clf = OvAClassifier(**model.params.to_dict())
    clf._set_model(model)
    return clf
