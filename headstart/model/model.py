"""The in-memory model: what training produces and prediction consumes.

A model covers a contiguous range of labels ``[first_label, first_label + num_labels)``
of a label space of ``label_space`` labels.  Weights are a labels x features CSR matrix
(float32) *without* the bias column; the bias enters as ``intercept`` (the bias weight
times the bias feature value), so a score is ``x @ w_j + intercept_j``.  Keeping the
weights sparse after pruning is what lets memory follow the number of surviving
weights rather than labels x features.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..params import TrainParams


@dataclass(frozen=True)
class FeatureHashing:
    """Feature hashing as training applied it: ``functions`` hash functions of ``buckets``
    buckets each, drawn from ``seed`` (see :mod:`headstart.prediction.transforms`)."""

    buckets: int
    functions: int
    seed: int

    @property
    def n_features(self) -> int:
        """Width of the hashed feature space: one block of ``buckets`` per hash function."""
        return self.buckets * self.functions

    def to_manifest(self) -> dict[str, int]:
        return {"buckets": int(self.buckets), "functions": int(self.functions), "seed": int(self.seed)}

    @classmethod
    def from_params(cls, params: TrainParams) -> "FeatureHashing | None":
        if params.hash_buckets == 0:
            return None
        return cls(params.hash_buckets, params.hash_functions, params.hash_seed)


@dataclass
class Preprocessing:
    """Feature transformation learned on the training data and applied to any input.

    In this order (:mod:`headstart.prediction.preprocess`): ``hashing``, the value
    ``transform``, tf-idf (``idf``), L2 ``normalize``.
    """

    normalize: bool = False
    idf: np.ndarray | None = None  # float32 (n_features,), set when tf-idf was requested
    transform: str = "identity"    # one of headstart.params.TRANSFORMS
    hashing: FeatureHashing | None = None

    def to_manifest(self) -> dict[str, Any]:
        return {"normalize": bool(self.normalize), "tfidf": self.idf is not None, "transform": self.transform,
                "hash": None if self.hashing is None else self.hashing.to_manifest()}

    @property
    def is_identity(self) -> bool:
        return (not self.normalize and self.idf is None and self.transform == "identity"
                and self.hashing is None)


def scoring_preprocessing(pre: Preprocessing, extensions: dict[str, Any] | None) -> Preprocessing:
    """What the generic predictors (headstart.prediction) apply to X: the model's
    preprocessing -- but none for a dense + sparse model (manifest / extensions field
    ``"dense"``), whose preprocessing belongs to its first n_sparse columns and which
    they score on X in its model space already, as headstart.shortlist.model_features
    makes it (applied to the whole width it transformed or hashed the dense columns)."""
    return Preprocessing() if "dense" in (extensions or {}) else pre


@dataclass
class OvAModel:
    weights: sp.csr_matrix              # (num_labels, n_features) float32
    intercept: np.ndarray               # (num_labels,) float32
    n_features: int
    label_space: int                    # total number of labels of the data set
    first_label: int = 0
    params: TrainParams = field(default_factory=TrainParams)
    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    label_counts: np.ndarray | None = None   # (label_space,) training positives, for PSP metrics
    n_train: int = 0                          # number of training instances
    # global (start, stop) label ranges without trained weights (a model loaded with
    # allow_gaps=True); their rows are empty and prediction never returns them
    missing_ranges: list[tuple[int, int]] = field(default_factory=list)
    # manifest fields of model variants (headstart.model.format.OPTIONAL_MANIFEST_KEYS):
    # "dense" for dense + sparse features, "shortlist" for shortlisted training
    extensions: dict[str, Any] = field(default_factory=dict)

    @property
    def num_labels(self) -> int:
        return int(self.weights.shape[0])

    @property
    def label_range(self) -> tuple[int, int]:
        return self.first_label, self.first_label + self.num_labels

    @property
    def nnz(self) -> int:
        return int(self.weights.nnz)
