"""A scikit-learn style estimator over the functional core.

``__init__`` only stores parameters; ``fit`` validates the inputs once (the boundary),
learns the preprocessing, trains and sets the learned attributes ending in ``_``.
"""

from __future__ import annotations

import logging
import sys
import weakref
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from .errors import ConvergenceWarning, DataFormatError, NotFittedError, ParameterError
from .model.model import FeatureHashing, OvAModel, Preprocessing
from .model.ranges import contiguous_runs, uncovered
from .model.shards import canonical_intercept, canonical_weights
from .params import UNUSED_IS_AN_ERROR, TrainParams, implied_choices, unused_message, unused_parameters
from .training.stats import TrainingStats
from .training.chunks import ChunkResult
from .training.trainer import train_labels
from .validation import check_features, check_k, check_labels, real_matrix, shares_arrays

log = logging.getLogger(__name__)

_PARAM_NAMES = tuple(f.name for f in fields(TrainParams))


def resolve_label_range(label_space: int, first_label: int = 0, num_labels: int | None = None) -> tuple[int, int]:
    """Validate a contiguous label range [first, first + count) of a label space."""
    # at least one label: an explicit count of 0 gave an empty model directory that called
    # itself complete (helper-56; the command line already refused --num-labels 0)
    top = max(label_space - 1, 0)
    if not isinstance(first_label, (int, np.integer)) or first_label < 0 or first_label > top:
        raise ParameterError(f"parameter first_label (--first-label) must be an integer in [0, {top}] "
                             f"(labels 0..{label_space - 1}), got {first_label!r}")
    if num_labels is None:
        num_labels = label_space - first_label
    elif not isinstance(num_labels, (int, np.integer)) or num_labels < 1 or first_label + num_labels > label_space:
        raise ParameterError(f"parameter num_labels (--num-labels) must be an integer in [1, "
                             f"{label_space - first_label}] (labels {first_label}..{label_space - 1}), "
                             f"got {num_labels!r}")
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
    owned: bool = False           # X was made here (preprocessing): training may renumber it in place
    kept_rows: np.ndarray | None = None   # remove_no_label_data dropped rows: the given rows kept (int64, ascending)
    given_rows: int | None = None         # ... and how many rows were given

    @property
    def n_train(self) -> int:
        return int(self.X.shape[0])

    def digest(self) -> str:
        """sha256 of the preprocessed training data (X's and Y's arrays in fixed dtypes),
        stored in a model directory so that resuming or merging refuses a model trained
        on other data of the same shapes and label counts (a regenerated tf-idf)."""
        import hashlib

        from ._digest import update

        h = hashlib.sha256()
        X, Y = self.X, self.Y
        update(h, ((X.indptr, np.int64), (X.indices, np.int32), (X.data, np.float32),
                   (Y.indptr, np.int64), (Y.indices, np.int64)))
        h.update(np.asarray([X.shape[0], X.shape[1], Y.shape[1]], dtype=np.int64).data)
        return h.hexdigest()

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
                 num_labels: int | None = None, part: bool = False) -> PreparedData:
    """Validation and preprocessing of the training data (the public boundary).

    ``part``: X is part of data prepared before (a label tree's node), whose whole was
    reported on then: no warning about the data as a whole (no feature values).

    Y is returned in CSC with sorted indices: the trainer needs the columns, and doing
    the conversion once here makes it free for every later shard (and task).
    """
    from .prediction.preprocess import fit_preprocessing

    if not isinstance(params, TrainParams):
        raise ParameterError(f"params must be a TrainParams, got {type(params).__name__}")
    given = X
    hashing = FeatureHashing.from_params(params)
    X = check_features(X, raw_ids=hashing is not None)
    for axis, what in ((0, "sample(s)"), (1, "feature(s)")):
        if X.shape[axis] == 0:   # nothing to learn from (scikit-learn's wording)
            raise DataFormatError(f"X has 0 {what} (shape={X.shape}) while a minimum of 1 is required.")
    Yr = check_labels(Y, X.shape[0])
    if Yr.shape[1] == 0:   # a model of no labels could never predict anything (as the command line says)
        raise DataFormatError(f"Y has 0 label(s) (shape={Yr.shape}) while a minimum of 1 is required.")
    first, count = resolve_label_range(Yr.shape[1], first_label, num_labels)
    n_given, kept = X.shape[0], None
    if params.remove_no_label_data:
        X, Yr, kept = drop_rows_without_labels(X, Yr)
    pre = Preprocessing()
    if hashing is not None and params.hash_functions > 1 and params.prune > 0:
        # every value is repeated once per hash function, and the L2 optimum splits a
        # feature's weight over its copies: each about 1/R of the unhashed weight, which
        # an absolute threshold meant for that removes (helper-54: bibtex, 2048 buckets,
        # P@1 35.3 with --prune 0.01, 53.6 with --prune 0)
        log.warning("feature hashing with %d hash functions makes every weight about 1/%d as large: pruning "
                    "below %g then removes much more than without hashing; consider prune=%g (--prune) or "
                    "sparsify", params.hash_functions, params.hash_functions, params.prune,
                    params.prune / params.hash_functions)
    if params.tfidf or params.normalize or params.feature_transform != "identity" or hashing is not None:
        try:
            pre, X = fit_preprocessing(X, normalize=params.normalize, tfidf=params.tfidf,
                                       transform=params.feature_transform, hashing=hashing)
        except DataFormatError as e:
            if kept is None or e.row is None or e.path is not None:
                raise
            # the instance as given, not its place among the rows that have labels
            # (helper-64: the command line then named the wrong line of the file)
            raise DataFormatError(e.message, token=e.token, row=int(kept[e.row])) from None
        X = check_features(X)
    if not X.nnz and not part:
        # every label learns its bias alone; the trainers' warnings about labels without
        # weights then blame --prune or the features' scale (helper-80), which cannot help
        log.warning("X has no feature values%s: there is nothing to learn but the bias, so every label scores every "
                    "instance alike; a warning about labels without weights that follows is about this, not about "
                    "pruning or the features' scale",
                    (" after preprocessing (tf-idf weighs a feature present in every row 0; hashed values of opposite signs "
                     "may cancel)") if given_nnz(given) else
                    " (every row is empty)")
    label_counts = np.asarray(Yr.sum(axis=0)).ravel().astype(np.int64)
    Yc = sp.csc_matrix(Yr)
    Yc.sort_indices()
    # owned: no array of the caller's (check_features makes a new matrix object around
    # the caller's arrays when they need no conversion)
    return PreparedData(X, Yc, pre, label_counts, first, count, owned=not shares_arrays(X, given), kept_rows=kept,
                        given_rows=n_given)


def given_nnz(X: Any) -> int:
    """Stored nonzero values of X as given (sparse or dense)."""
    return int(X.count_nonzero()) if sp.issparse(X) else int(np.count_nonzero(np.asarray(X)))


def drop_rows_without_labels(X: sp.csr_matrix, Y: sp.csr_matrix) -> tuple[sp.csr_matrix, sp.csr_matrix,
                                                                           np.ndarray | None]:
    """The rows of (X, Y) with at least one label, and their ids in the given rows (None
    when every row has one: nothing to map).

    A row counts as labelled by any label of the label space, not only of the labels being
    trained, so that every shard, task and label range of one run drops the same rows.
    Kept by default, a row without labels is a negative of every label (LIBLINEAR and
    DiSMEC++ train on it); LibMultiLabel offers to drop such rows (remove_no_label_data)."""
    kept = np.flatnonzero(np.diff(Y.indptr) > 0).astype(np.int64)
    if kept.size == 0:
        raise DataFormatError(f"remove_no_label_data leaves no training row: none of the {X.shape[0]} rows has a "
                              "label")
    if kept.size < X.shape[0]:
        log.info("remove_no_label_data: dropped %d of %d training rows that have no label",
                 X.shape[0] - kept.size, X.shape[0])
        return check_features(X[kept], raw_ids=X.shape[1] > np.iinfo(np.int32).max), sp.csr_matrix(Y[kept]), kept
    return X, Y, None


def fit_model(X, Y, params: TrainParams, *, first_label: int = 0, num_labels: int | None = None,
              progress: Callable[[int], None] | None = None, sink: Callable[[ChunkResult], None] | None = None,
              collect: bool = True, own_data: bool = False, part: bool = False, trajectories: bool = True
              ) -> tuple[OvAModel | None, TrainingStats | None]:
    """Functional core of :meth:`OvAClassifier.fit`: validate, preprocess, train a label range.

    ``own_data``: the caller hands X over (it is not read until this returns), so training
    may renumber it in place instead of copying it (restored afterwards).  ``part``: as
    :func:`prepare_data`'s.  Without ``trajectories`` the statistics keep the per-label
    scalars only (:meth:`TrainingStats.without_trajectories`; the same model)."""
    data = prepare_data(X, Y, params, first_label, num_labels, part=part)
    out = train_labels(data.X, data.Y, params, np.arange(data.first_label, data.stop), progress=progress,
                       sink=sink, collect=collect, inplace=data.owned or own_data, trajectories=trajectories)
    weights, intercept, stats = out
    if weights is None:
        return None, stats
    weights, intercept, missing = place_rows(weights, intercept, stats["label"], data.first_label)
    model = OvAModel(weights=weights, intercept=intercept, n_features=data.n_features,
                     label_space=data.label_space, first_label=data.first_label, params=params.recorded(),
                     preprocessing=data.preprocessing, label_counts=data.label_counts, n_train=data.n_train,
                     missing_ranges=missing)
    return model, stats


def place_rows(weights: sp.csr_matrix, intercept: np.ndarray, trained: np.ndarray, first: int
               ) -> tuple[sp.csr_matrix, np.ndarray, list[tuple[int, int]]]:
    """The rows of the ``trained`` labels (ascending) put at their places in a model that
    starts at label ``first``: with a time budget (``timeout``) and several threads the
    trained labels need not be a prefix of the range (each thread's chunk stops where the
    budget ran out), so the rows span [first, last trained + 1), labels in between that
    were not trained get empty rows and are returned as missing ranges (a model with
    gaps, as :func:`headstart.model.reader.load_model` gives with ``allow_gaps``)."""
    trained = np.asarray(trained, dtype=np.int64)
    if trained.size == 0 or (trained[0] == first and trained[-1] - first + 1 == trained.size):
        return weights, intercept, []
    span = int(trained[-1] - first + 1)
    rows = np.zeros(span + 1, dtype=np.int64)
    rows[trained - first + 1] = np.diff(weights.indptr)
    np.cumsum(rows, out=rows)
    W = sp.csr_matrix((weights.data, weights.indices, rows), shape=(span, weights.shape[1]))
    b = np.zeros(span, dtype=np.asarray(intercept).dtype)
    b[trained - first] = intercept
    runs = [(int(trained[i]), int(trained[j - 1]) + 1) for i, j in contiguous_runs(trained)]
    return W, b, uncovered(runs, first, first + span)


def fit_to_directory(X, Y, params: TrainParams, path, *, first_label: int = 0, num_labels: int | None = None,
                     progress: Callable[[int], None] | None = None, own_data: bool = False,
                     trajectories: bool = True) -> tuple[TrainingStats, int]:
    """:func:`fit_model`, the model written to the directory ``path`` (one shard, atomically)
    while it is trained: finished chunks go to a spool file instead of memory (see
    :mod:`headstart.model.spool`).  Returns the statistics (without the per-iteration
    trajectories unless ``trajectories``) and the number of weights."""
    from .model.spool import spooled_model
    from .training.chunks import report_problems

    data = prepare_data(X, Y, params, first_label, num_labels)
    digest = data.digest()      # before training renumbers X in place
    with spooled_model(path) as spool:
        _, _, stats = train_labels(data.X, data.Y, params, np.arange(data.first_label, data.stop),
                                   progress=progress, sink=spool.add, collect=False,
                                   inplace=data.owned or own_data, trajectories=trajectories)
        shards = spool.finish(data.n_features, data.label_space, data.n_train, params, data.preprocessing,
                              data.label_counts, data_sha256=digest, label_range=(data.first_label, data.stop))
        if len(stats) < data.stop - data.first_label:
            # a time budget left gaps, which --resume trains (headstart.distributed): the
            # shards' statistics go where it reads them, so that its statistics cover
            # every label of the model, not only those it trained
            from .training.stats import write_stats_file

            labels = stats["label"]
            for e in shards:
                a = e["first_label"]
                write_stats_file(spool.directory, stats.take(np.flatnonzero((labels >= a) &
                                                                            (labels < a + e["num_labels"]))))
    report_problems(stats)
    return stats, spool.nnz


_D = TrainParams()   # the defaults (repr shows only what differs)


class OvAClassifier:
    """One-vs-all linear classifier for extreme multi-label data (DiSMEC-style training).

    A scikit-learn estimator (without depending on scikit-learn): the parameters are
    those of :class:`headstart.TrainParams`, as keyword arguments with its defaults
    (listed below); ``__init__`` only stores them, ``fit`` validates them (raising
    :class:`~headstart.errors.ParameterError`, a ``ValueError``).  ``get_params`` /
    ``set_params``, ``sklearn.base.clone`` and grid searches work on them.

    ``fit(X, y)`` takes X (n x d, scipy sparse or dense) and y (n x L 0/1 indicator
    matrix of the labels, sparse or dense) and sets ``coef_`` (CSR, labels x features, no bias
    column), ``intercept_`` (bias weight times bias value), ``classes_`` (``arange(L)``;
    after a label-range fit the other labels' rows are empty with intercept -inf),
    ``n_features_in_`` (d; with feature hashing still the width of X, not of ``coef_``,
    and kept in a saved model's manifest as ``"input"``), ``stats_``
    (:class:`TrainingStats`) and ``model_`` (:class:`OvAModel`).

    A 1-D ``y`` of one class per instance (numbers or strings; at least two classes)
    trains one classifier per class, or one for the second class of two, as LIBLINEAR's
    one-vs-rest and scikit-learn's LinearSVC do: ``classes_`` holds the sorted classes,
    ``predict`` returns classes, ``score`` is the accuracy, ``predict_proba`` (logistic)
    sums to 1 per row; ``predict_topk`` still gives column indices into ``classes_``.
    Saved models keep the classes (a JSON list in the manifest).

    Warm start (scikit-learn's ``warm_start``, LIBLINEAR's search over C): ``pretrained``
    takes, besides a model directory, weights in memory -- a fitted ``OvAClassifier``
    (its ``model_`` when ``fit`` starts; the estimator itself too:
    ``clf.set_params(C=2, pretrained=clf).fit(X, y)`` continues from its current
    weights), an :class:`OvAModel` or ``(coef, intercept)`` -- and starts each label from
    its row there (``init="pretrained"`` is implied), with the checks of a directory
    (more features or labels in the data than in the model: a warning, the new ones start
    from 0; fewer: refused).  The start is bit for bit the one from the same model saved
    and given by its directory.  There is no separate ``warm_start`` flag: the parameters
    are exactly :class:`TrainParams`' (the command line's and the model file's too), and
    ``pretrained`` already is the warm start, with one set of checks.  In a scikit-learn
    grid search pass ``pretrained=clf.model_``: ``clone`` makes unfitted copies of
    estimator parameters (refused at ``fit``) and cannot clone an estimator that names
    itself.  Dask training refuses weights in memory (save them, give the directory).

    Prediction: ``predict`` returns the sparse indicator matrix of the labels whose
    binary classifier says yes (score > 0, see :meth:`predict`); ``predict_topk`` the
    ``k`` best labels; ``decision_function`` the dense scores; ``predict_proba`` exists
    for ``loss="logistic"``; ``score`` is P@k of the ranking (k = 1 by default).
    """

    # __init__ is generated from TrainParams' fields (below the class), like the
    # __init__ of a dataclass: one keyword-only argument per field, with its default.

    # --------------------------------------------------------------- scikit-learn protocol
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The parameters (the TrainParams fields), as given; ``deep`` is accepted for
        scikit-learn (there are no nested estimators)."""
        return {name: getattr(self, name) for name in _PARAM_NAMES}

    def set_params(self, **params: Any) -> "OvAClassifier":
        for k, v in params.items():
            if k not in _PARAM_NAMES:
                raise ParameterError(f"invalid parameter {k!r} for OvAClassifier; valid parameters: "
                                     f"{', '.join(_PARAM_NAMES)}")
            setattr(self, k, v)
        return self

    def __sklearn_tags__(self):
        # Called by scikit-learn only, so importing it here keeps it an optional extra.
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        return Tags(estimator_type="classifier",
                    target_tags=TargetTags(required=True, multi_output=True, single_output=True),
                    classifier_tags=ClassifierTags(multi_class=True, multi_label=True),
                    input_tags=InputTags(sparse=True, two_d_array=True))

    def __repr__(self) -> str:
        changed = {k: v for k, v in self.get_params().items() if not _same(v, getattr(_D, k))}
        return f"OvAClassifier({', '.join(f'{k}={_param_repr(v)}' for k, v in changed.items())})"

    @property
    def params(self) -> TrainParams:
        """The parameters as a validated :class:`TrainParams`, with the choices that other
        parameters imply where the choice is at its default, as on the command line
        (``params.implied_choices``): ``pretrained`` -> ``init="pretrained"``, cost files ->
        ``weighting="file"``, ``weight_pos`` / ``weight_neg`` -> ``weighting="constant"``."""
        return TrainParams(**implied_choices(self.get_params(), self._given()))

    def _given(self) -> set[str]:
        """The parameters set to other values than their defaults."""
        return {k for k, v in self.get_params().items() if not _same(v, getattr(_D, k))}

    def _checked_params(self) -> TrainParams:
        """:attr:`params`, refusing a cost file or a pretrained model that nothing reads and
        warning (UserWarning) about other parameters the choices leave unread -- the
        command line's checks (helper-47: they were ignored silently here)."""
        import warnings

        p = self.params
        for choice, by in (("init", "pretrained"), ("weighting", "a cost parameter")):
            # an explicit default cannot be told from an unset one (scikit-learn's clone
            # passes every parameter): say when an implication overrides it (helper-50)
            if getattr(p, choice) != getattr(self, choice):
                warnings.warn(f"{choice}={getattr(p, choice)!r} is used, implied by {by} given while {choice} is "
                              f"at its default {getattr(self, choice)!r} (as on the command line); pass "
                              f"{choice}={getattr(p, choice)!r} to say so", UserWarning, stacklevel=3)
        for name, by, choices, decided in unused_parameters(p, sorted(self._given())):
            what = unused_message(p, name, by, choices, decided)
            if name in UNUSED_IS_AN_ERROR:
                raise ParameterError(what)
            warnings.warn(f"{what}: ignored", UserWarning, stacklevel=3)
        return p

    # --------------------------------------------------------------- training
    def fit(self, X, y, *, first_label: int = 0, num_labels: int | None = None,
            progress: Callable[[int], None] | None = None) -> "OvAClassifier":
        """Train labels ``[first_label, first_label + num_labels)`` (default: all) of (X, y).

        X: sparse or dense (n x d); y: the labels, a sparse or dense 0/1 matrix (n x L)
        (named ``y`` as in scikit-learn), or a 1-D array of one class per instance
        (numbers or strings; see the class docstring).  Returns ``self``.
        """
        if progress is not None and not callable(progress):
            raise ParameterError(f"progress must be a callable taking a count of labels, got {progress!r}")
        classes, y = class_targets(y)
        if classes is not None and (first_label != 0 or num_labels is not None):
            raise ParameterError("first_label / num_labels select labels of a label matrix; a 1-D y of classes "
                                 "trains every class")
        model, stats = fit_model(X, y, self._checked_params(), first_label=first_label, num_labels=num_labels,
                                 progress=progress)
        if classes is not None:
            model.extensions = {**(model.extensions or {}), "classes": classes_to_json(classes)}
        asked = (num_labels if num_labels is not None else model.label_space - model.first_label)
        if len(stats) < asked:
            # a time budget ran out (the command line says so too): labels not started
            # score -inf and are never predicted -- said here, not only found on reload
            import warnings

            warnings.warn(f"time budget of {self.params.timeout:g} s reached: {asked - len(stats)} of {asked} "
                          f"label(s) not trained (model_.missing_ranges, and labels from "
                          f"{model.first_label + model.num_labels} on); fit again with a larger timeout, or "
                          "train into a model directory and resume", UserWarning, stacklevel=2)
        stopped = np.flatnonzero(np.asarray(stats["status"]) != 0)
        if stopped.size:
            # as scikit-learn's estimators do (LinearSVC's max_iter): a warning that grid
            # searches and test suites can catch or filter, not only the log line
            import warnings

            from .solver.newton import STATUS_NAMES

            codes = np.asarray(stats["status"])[stopped].astype(np.int64)
            what = ", ".join(f"{int((codes == c).sum())} {STATUS_NAMES[c]}" for c in np.unique(codes))
            labels = ", ".join(str(int(x)) for x in np.asarray(stats["label"])[stopped][:10])
            warnings.warn(f"{stopped.size} of {len(stats)} label(s) stopped before the stopping rule ({what}; "
                          f"labels {labels}{' ...' if stopped.size > 10 else ''}): see stats_['status'] -- "
                          "max_iter: raise max_iter; line_search_failed: often features of a large scale or "
                          "offset, centre or scale them", _convergence_warning(), stacklevel=2)
        shape = getattr(X, "shape", None)
        if shape is None and model.preprocessing.hashing is not None:
            # a list of rows has no shape: its width is its first row's (fit made an array of it)
            shape = (len(X), len(X[0]))
        if (model.preprocessing.hashing is not None and shape is not None and len(shape) == 2
                and int(shape[1]) != model.n_features):
            # n_features_in_ in scikit-learn's meaning: the width of the X fitted on, not the
            # hashed width of the weights (helper-50); in the model, so that save writes it
            # and a loaded model keeps it (a hashed model takes X of any width)
            model.extensions = {**(model.extensions or {}), "input": {"n_features": int(shape[1])}}
        self._set_model(model)
        self.stats_ = stats
        self.n_iter_ = np.asarray(stats["iterations"])   # Newton iterations per trained label
        return self

    def _set_model(self, model: OvAModel) -> None:
        self.model_ = model
        ext = model.extensions or {}
        self.n_features_in_ = input_width_from_json(ext["input"], model) if "input" in ext else model.n_features
        classes = ext.get("classes")
        self.classes_ = np.arange(model.label_space) if classes is None else classes_from_json(classes)

    # coef_ and intercept_ are views of model_, which is what predicts: as attributes of
    # their own, a new array assigned to them (as scikit-learn's linear models allow) was
    # silently ignored by prediction and save (helper-109)
    @property
    def coef_(self) -> sp.csr_matrix:
        """Weights (CSR, labels of the label space x features, float32): ``model_.weights``,
        with empty rows for labels a label-range fit did not train.  Assign a new matrix to
        change the weights (also after values were changed in place: prediction keeps a
        feature-major copy, made at its first call)."""
        return full_label_space(self._check_fitted())[0]

    @coef_.setter
    def coef_(self, W) -> None:
        model = self._whole_space_model("coef_")
        W = canonical_weights(W, model.n_features, "coef_")
        if W.shape[0] != model.label_space:
            raise ParameterError(f"coef_ must have {model.label_space} rows (one per label), got {W.shape[0]}")
        model.weights = W
        _SCORING_FORMS.pop(id(model), None)

    @property
    def intercept_(self) -> np.ndarray:
        """Bias weight times bias value per label of the label space (float32): -inf for
        labels a label-range fit did not train, the score they get.  Assignable as coef_."""
        return full_label_space(self._check_fitted())[1]

    @intercept_.setter
    def intercept_(self, b) -> None:
        model = self._whole_space_model("intercept_")
        model.intercept = canonical_intercept(b, model.label_space, "intercept_")
        _SCORING_FORMS.pop(id(model), None)

    def _whole_space_model(self, what: str) -> OvAModel:
        """The fitted model, which ``what`` may replace when it covers the whole label
        space (a label-range model's rows are not the label space's)."""
        model = self._check_fitted()
        if model.first_label != 0 or model.num_labels != model.label_space or getattr(model, "missing_ranges", None):
            raise ParameterError(f"{what} can be assigned for a model of every label only; this one has labels "
                                 f"[{model.first_label}, {model.first_label + model.num_labels}) of "
                                 f"{model.label_space}: assign model_.weights / model_.intercept (its own rows)")
        return model

    @property
    def _multiclass(self) -> bool:
        """Fitted on a 1-D y of classes (the model's "classes" field)."""
        return "classes" in (self._check_fitted().extensions or {})

    def _check_fitted(self) -> OvAModel:
        if not hasattr(self, "model_"):
            raise _not_fitted("this OvAClassifier is not fitted yet: call fit(X, y) or headstart.load(dir)")
        return self.model_

    def _scoring(self, model: OvAModel) -> Any:
        """The model's scoring form (feature-major weights, intercept order), made once per
        fitted model and reused by every prediction call: made per call it cost O(weights
        + labels log labels), 77 ms for one row of a 500K-label model against 0.6 ms
        (helper-58).  Held beside the model, not in the estimator: scikit-learn's checks
        want prediction to leave the estimator's ``__dict__`` alone, and pickles of it
        should not carry a derived copy of the weights.  It costs about the weights'
        memory again, for as long as the model lives.  Made again when the model's
        weights, their values array or its intercept is replaced (``model_.weights =
        ...``); values changed in place inside those arrays are not seen (helper-60):
        assign new arrays."""
        from .prediction.topk import prepare

        key = id(model)
        arrays = (id(model.weights), id(getattr(model.weights, "data", None)), id(model.intercept))
        hit = _SCORING_FORMS.get(key)
        if hit is not None and hit[0]() is model and hit[2] == arrays:
            return hit[1]
        form = prepare(model)
        # the entry goes with the model (the callback runs before its id can be reused)
        _SCORING_FORMS[key] = (weakref.ref(model, lambda _, key=key: _SCORING_FORMS.pop(key, None)), form, arrays)
        return form

    def _check_X(self, X, fewer: bool = False) -> OvAModel:
        """The scikit-learn methods take exactly the features of fit; ``fewer``
        (``predict_topk``) also fewer for sparse X, e.g. from a svmlight file whose last
        features do not occur (a dense array's columns are its features) -- more are
        another feature space, said in the estimator's terms rather
        than the file reader's ("load the data with n_features=...")."""
        model = self._check_fitted()
        shape = getattr(X, "shape", None)
        if shape is None and isinstance(X, (list, tuple)):
            try:
                shape = np.shape(X)
            except ValueError:      # ragged rows: named by the prediction's own check
                shape = None
        hashed = model.preprocessing is not None and model.preprocessing.hashing is not None
        # fewer columns only for sparse rows: a dense array's width is its feature space
        fewer = fewer and sp.issparse(X)
        if not hashed and shape is not None and len(shape) == 2 and (
                shape[1] > model.n_features if fewer else shape[1] != model.n_features):
            raise DataFormatError(f"X has {shape[1]} features, but OvAClassifier is expecting "
                                  f"{model.n_features} features as input" + (" (or fewer)" if fewer else ""))
        return model

    def _threads(self, kw: dict) -> dict:
        """The prediction functions' keywords: the estimator's threads unless given; others
        than theirs refused in the estimator's terms (not as a TypeError of an inner
        function's name)."""
        unknown = sorted(set(kw) - _PREDICT_KEYWORDS)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}; prediction takes "
                            f"{', '.join(sorted(_PREDICT_KEYWORDS))}")
        kw.setdefault("threads", self.threads)
        return kw

    # --------------------------------------------------------------- prediction
    def predict(self, X, threshold=0.0, **kw) -> sp.csr_matrix | np.ndarray:
        """Sparse indicator matrix (CSR, int32, n x L): a 1 where a label's score is >
        ``threshold`` (0, or one number per label, e.g. from
        :func:`headstart.tuning.scutfbr`).

        Why a threshold and not the top k: each label's classifier is trained on +1/-1
        targets, so score 0 is its own decision boundary, and ``predict`` returns what
        the one-vs-all classifiers decide -- a row may get no label or many, as with
        scikit-learn's OneVsRestClassifier or LinearSVC, and multi-label metrics
        (F1, Hamming loss) apply to it.  The ranking that XMC evaluates (P@k) is
        :meth:`predict_topk`, which :meth:`score` uses.  Equals
        ``decision_function(X) > 0`` without holding the dense scores.

        Fitted on a 1-D y of classes: a 1-D array of classes -- the class of the largest
        score (LIBLINEAR's one-vs-rest prediction), or with two classes the second where
        the one classifier's score is > ``threshold``, the first elsewhere.
        """
        from .prediction.topk import predict_above

        model = self._check_X(X)
        if self._multiclass:
            if np.ndim(threshold) != 0 or isinstance(threshold, (str, bool)):
                got = f"an array of shape {np.shape(threshold)}" if np.ndim(threshold) else repr(threshold)
                raise ParameterError(f"parameter threshold must be one number for a model of classes, got {got}")
            if self.classes_.size == 2:    # one classifier, for the second class
                return self.classes_[(self.decision_function(X, **kw) > threshold).astype(np.intp)]
            if threshold != 0:
                raise ParameterError(f"parameter threshold applies to one-vs-all labels or two classes; with "
                                     f"{self.classes_.size} classes predict returns the class of the largest "
                                     f"score (got threshold={threshold!r})")
            labels, _ = self.predict_topk(X, 1, **kw)
            return self.classes_[labels[:, 0]]
        return predict_above(self._scoring(model), X, threshold, n_columns=model.label_space, **self._threads(kw))

    def predict_topk(self, X, k: int = 5, **kw) -> tuple[np.ndarray, np.ndarray]:
        """(labels, scores) of shape (n, k): the k best labels per row, best first (label -1,
        score -inf where a row has fewer than k labels to rank).

        Fitted on two classes (one classifier, score s for the second class): both classes
        ranked, the second with score s and the first with -s, as :meth:`predict` decides
        (the first class on top at s = 0)."""
        from .prediction.topk import nonfinite_row, predict_topk

        model = self._check_X(X, fewer=True)
        if self._multiclass and self.classes_.size == 2:
            # helper-58: the one classifier's row was returned as column 0, i.e. classes_[0]
            # on top for every row, and the first class was never ranked
            from .prediction.topk import decision_function

            k = check_k(k)
            # (the library function: it takes fewer features, as predict_topk does; helper-60)
            s = decision_function(self._scoring(model), X, **self._threads(kw))[:, 0]
            second = s > 0
            labels = np.full((s.shape[0], k), -1, dtype=np.int32)
            scores = np.full((s.shape[0], k), -np.inf, dtype=np.float32)
            labels[:, 0] = second
            scores[:, 0] = np.where(second, s, -s)
            if k > 1:
                labels[:, 1] = ~second
                scores[:, 1] = np.where(second, -s, s)
            return labels, scores
        result = predict_topk(self._scoring(model), X, k, **self._threads(kw))
        row = nonfinite_row(result)
        if row is not None:
            raise DataFormatError("the scores of this instance are not finite: its feature values overflow with the "
                                  "model's weights; scale the data down", row=row)
        return result

    def decision_function(self, X, **kw) -> np.ndarray:
        """Dense scores (n x L, float32), column j for label j (``classes_``); labels
        outside a label-range fit score -inf.  For small label counts only.  Fitted on
        two classes: 1-D, the score of the second class (scikit-learn's shape)."""
        from .prediction.topk import decision_function

        model = self._check_X(X)
        S = decision_function(self._scoring(model), X, **self._threads(kw))
        if self._multiclass and self.classes_.size == 2:
            return S[:, 0]          # scikit-learn's binary shape: the score of the second class
        if S.shape[1] == model.label_space:
            return S
        full = np.full((S.shape[0], model.label_space), -np.inf, dtype=np.float32)
        full[:, model.first_label:model.first_label + model.num_labels] = S
        return full

    @property
    def predict_proba(self):
        """P(label j | x) = sigmoid(score), dense (n x L) float64, for ``loss="logistic"``
        only: the squared hinge gives no probabilities (the attribute is then absent,
        so ``hasattr(clf, "predict_proba")`` is False, as for scikit-learn's LinearSVC)."""
        loss = self.model_.params.loss if hasattr(self, "model_") else self.loss
        if loss != "logistic":
            raise AttributeError(f"predict_proba is available for loss='logistic' only (this model: {loss!r})")
        return self._predict_proba

    def _predict_proba(self, X, **kw) -> np.ndarray:
        from scipy.special import expit

        p = expit(self.decision_function(X, **kw).astype(np.float64))
        if not self._multiclass:
            return p
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        # one class per instance: the one-vs-rest probabilities normalised to sum to 1
        # per row, as LIBLINEAR's -b 1 does for its one-vs-rest logistic models
        return p / p.sum(axis=1, keepdims=True)

    def score(self, X, y, sample_weight=None, *, k: int = 1) -> float:
        """P@k of the ranking (:meth:`predict_topk`) against the 0/1 label matrix y (n x L):
        the mean over rows of the share of the k best labels that are relevant (weighted
        by ``sample_weight`` if given).  k = 1 by default, XMC's headline metric; use
        :func:`precision_at_k_scorer` for another k in a grid search.  Fitted on a 1-D y
        of classes: the accuracy of :meth:`predict` (scikit-learn's classifier score)."""
        from .metrics import precision_at_k

        X = real_matrix(X)          # lists, as fit and predict take them (X.shape below)
        model = self._check_X(X)
        if self._multiclass:
            # scikit-learn's classifier score: the (weighted) share of correct classes
            truth = np.asarray(y)
            if truth.shape != (X.shape[0],):
                raise DataFormatError(f"y must be 1-D with one class per row of X ({X.shape[0]}), got shape "
                                      f"{truth.shape}: this OvAClassifier was fitted on classes")
            return float(np.average(self.predict(X) == truth, weights=sample_weight))
        y = check_labels(y, X.shape[0], name="y")
        if y.shape[1] != model.label_space:
            # checked before predicting: the metric's own check would name its internal
            # arrays, and extra label columns would be scored silently
            raise DataFormatError(f"y has {y.shape[1]} label columns, but OvAClassifier is expecting "
                                  f"{model.label_space} (one per label of the model)")
        labels, _ = self.predict_topk(X, k=k)
        return precision_at_k(y, labels, k, sample_weight=sample_weight)

    def save(self, path, **kw) -> None:
        from .model.writer import save_model

        save_model(self._check_fitted(), path, **kw)


def class_targets(y) -> tuple[np.ndarray | None, Any]:
    """(classes, Y): for a 1-D y of one class per instance, its sorted classes and the
    0/1 label matrix of one-vs-rest training (CSR; one column per class, or with two
    classes one column, the second class); otherwise (None, y) unchanged -- a label
    matrix, checked by training."""
    if y is None or sp.issparse(y):
        return None, y
    try:
        v = np.asarray(y)
    except ValueError:       # ragged lists: check_labels says what a label matrix is
        return None, y
    if v.ndim != 1 or v.size == 0:
        # (empty: said by the check of X, 0 samples, not as "0 classes")
        return None, y
    if v.dtype == object:
        kinds = {type(x) for x in v.tolist()}
        if kinds & {set, frozenset, list, tuple}:
            # label sets per instance (ragged lists land in check_labels with the same advice)
            raise DataFormatError("y holds collections (label sets or lists per instance?): one-vs-all training "
                                  "takes a 2-D (instances x labels) 0/1 indicator matrix -- convert label sets with "
                                  "sklearn.preprocessing.MultiLabelBinarizer -- or a 1-D y of one class per instance")
        if kinds <= {str}:
            v = v.astype(str)
        elif kinds <= {int, bool} or kinds <= {int, float}:
            v = v.astype(np.int64 if kinds <= {int, bool} else np.float64)
        else:
            raise DataFormatError(f"y holds classes of mixed types ({', '.join(sorted(t.__name__ for t in kinds))}): "
                                  "give one type (all numbers or all strings)")
    if v.dtype.kind == "c":
        raise DataFormatError(f"Complex data not supported: y has dtype {v.dtype}")
    if v.dtype.kind not in "biufUS":
        raise DataFormatError(f"y of dtype {v.dtype} cannot be classes: give numbers or strings")
    if v.dtype.kind == "f" and not (np.isfinite(v).all() and (v == np.round(v)).all()):
        # scikit-learn's words for it (type_of_target): a regression target, not classes
        raise DataFormatError("Unknown label type: continuous (y holds non-integer or non-finite numbers; "
                              "classes are integers or strings)")
    if v.dtype.kind == "S":
        v = v.astype(str)
    classes, inverse = np.unique(v, return_inverse=True)
    if classes.size < 2:
        raise DataFormatError(f"y holds {classes.size} class(es) ({', '.join(map(str, classes.tolist()))}): "
                              "one-vs-rest training needs at least 2 (for a label matrix give y 2-D)")
    n = v.size
    if classes.size == 2:       # one classifier, for the second class (LIBLINEAR, LinearSVC)
        rows = np.flatnonzero(inverse == 1)
        Y = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, np.zeros(rows.size, dtype=np.int64))),
                          shape=(n, 1))
    else:
        Y = sp.csr_matrix((np.ones(n, dtype=np.float32), inverse.astype(np.int64), np.arange(n + 1)),
                          shape=(n, classes.size))
    return classes, Y


def classes_to_json(classes: np.ndarray) -> dict[str, Any]:
    """The manifest's "classes" field: the values and their numpy type."""
    return {"values": classes.tolist(), "dtype": "str" if classes.dtype.kind == "U" else classes.dtype.str}


def classes_from_json(field: dict[str, Any]) -> np.ndarray:
    from .errors import ModelFormatError

    try:
        return np.asarray(field["values"], dtype=str if field["dtype"] == "str" else np.dtype(field["dtype"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ModelFormatError(f"the manifest's classes field is not a list of classes with their dtype ({e})") \
            from None


def input_width_from_json(field: Any, model: OvAModel) -> int:
    """``n_features_in_`` from the manifest's "input" field of a hashed model: the width of
    the X it was fitted on.  Checked here, its only reader: a forged width would otherwise
    pass into every scikit-learn tool that compares widths."""
    from .errors import ModelFormatError
    from .model.manifest import MAX_DIM, is_int

    n = field.get("n_features") if isinstance(field, dict) else None
    if not (isinstance(field, dict) and set(field) == {"n_features"} and is_int(n) and 1 <= n <= MAX_DIM):
        raise ModelFormatError('the manifest\'s input field must be {"n_features": N} with N an integer in '
                               f"[1, {MAX_DIM}] (the width of the X the model was fitted on), got {field!r}")
    if model.preprocessing.hashing is None:
        raise ModelFormatError(f"the manifest's input field says the model was fitted on {n} features, but the "
                               f"model does not hash its features: its input is its n_features, {model.n_features}")
    return n


def full_label_space(model: OvAModel) -> tuple[sp.csr_matrix, np.ndarray]:
    """(coef_, intercept_) with one row per label of the label space, as scikit-learn
    pairs row i with ``classes_[i]``: a label-range model's rows are placed at their
    labels, the other labels -- and the model's missing ranges, inside its rows too --
    get an empty row and intercept -inf, the score ``decision_function`` gives them, so
    ``X @ coef_.T + intercept_`` equals it.  Free
    for a whole-space model (the model's own arrays); a CSR with empty rows costs only
    its row pointers."""
    W, b = model.weights, model.intercept
    a, L = model.first_label, model.label_space
    gaps = getattr(model, "missing_ranges", None) or []
    if a == 0 and W.shape[0] == L and not gaps:
        return W, b
    if a == 0 and W.shape[0] == L:
        coef = W
    else:
        indptr = np.zeros(L + 1, dtype=W.indptr.dtype)
        indptr[a + 1:a + 1 + W.shape[0]] = W.indptr[1:]
        indptr[a + 1 + W.shape[0]:] = W.indptr[-1]
        coef = sp.csr_matrix((W.data, W.indices, indptr), shape=(L, W.shape[1]))
    intercept = np.full(L, -np.inf, dtype=b.dtype)
    intercept[a:a + W.shape[0]] = b
    for lo, hi in gaps:             # holes inside the rows too (load(allow_gaps), partial imports)
        intercept[lo:hi] = -np.inf
    return coef, intercept


def _not_fitted(message: str) -> NotFittedError:
    """headstart's NotFittedError, also scikit-learn's when scikit-learn is loaded (so
    ``except sklearn.exceptions.NotFittedError`` works)."""
    return _sklearn_twin(NotFittedError)(message)


def _convergence_warning() -> type:
    """headstart's ConvergenceWarning, also scikit-learn's when scikit-learn is loaded
    (its warning filters catch it)."""
    return _sklearn_twin(ConvergenceWarning)


def _sklearn_twin(ours: type) -> type:
    """``ours``, or -- when scikit-learn is already loaded -- a subclass of it and of
    scikit-learn's class of the same name in ``sklearn.exceptions``, made once per
    loaded module; scikit-learn is never imported here."""
    sk = sys.modules.get("sklearn.exceptions")
    if sk is None:
        return ours
    key = (sk, ours.__name__)
    cls = _SKLEARN_TWINS.get(key)
    if cls is None:
        cls = _SKLEARN_TWINS[key] = type(ours.__name__, (ours, getattr(sk, ours.__name__)),
                                         {"__module__": ours.__module__, "__reduce__": _reduce_twin})
    return cls


def _reduce_twin(self: BaseException) -> tuple:
    """Pickle a twin's instance as "the twin of this headstart class, remade where it is
    read": the twin itself is not reachable by its name (helper-58: an unfitted predict in
    a multiprocessing pool came back as a PicklingError instead of NotFittedError)."""
    ours = next(c for c in type(self).__mro__[1:] if c.__module__ == "headstart.errors")
    return _remake_twin, (ours.__name__, self.args), (self.__dict__ or None)


def _remake_twin(name: str, args: tuple) -> BaseException:
    from . import errors

    return _sklearn_twin(getattr(errors, name))(*args)


#: keywords the prediction methods pass on to headstart.prediction.topk
_PREDICT_KEYWORDS = frozenset({"threads", "chunk_rows", "max_memory", "preprocess"})
_SKLEARN_TWINS: dict[tuple[Any, str], type] = {}
#: id(model) -> (weak reference to the model, its scoring form, the ids of the arrays it
#: was made of), see OvAClassifier._scoring
_SCORING_FORMS: dict[int, tuple[Any, Any, tuple]] = {}


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)


def _param_repr(v: Any) -> str:
    """A parameter as ``repr`` shows it; weights in memory (``pretrained``) by their type
    and shape only -- not their arrays, and not a fitted estimator's repr, which may be
    this estimator's own (``pretrained=clf``: a recursion)."""
    if v is None or isinstance(v, (str, bool, int, float)):
        return repr(v)
    shape = getattr(getattr(v, "coef_", getattr(v, "weights", None)), "shape", None)
    return f"<{type(v).__name__}{'' if shape is None else ' of %d labels x %d features' % tuple(shape)}>"


class _PrecisionAtK:
    def __init__(self, k: int):
        self.k = k

    def __call__(self, estimator: OvAClassifier, X, y, sample_weight=None) -> float:
        return estimator.score(X, y, sample_weight=sample_weight, k=self.k)

    def __repr__(self) -> str:
        return f"precision_at_k_scorer(k={self.k})"


def precision_at_k_scorer(k: int = 5) -> _PrecisionAtK:
    """A scikit-learn scorer (``scorer(estimator, X, y)``) for P@k, e.g.
    ``GridSearchCV(OvAClassifier(), {"C": [0.5, 1, 2]}, scoring=precision_at_k_scorer(5))``."""
    return _PrecisionAtK(check_k(k))


def _generated_init():
    """``OvAClassifier.__init__(self, *, loss=..., C=..., ...)``: one keyword-only
    argument per TrainParams field with that field's default, generated (as dataclasses
    generate ``__init__``) so that the estimator's parameters are always exactly
    TrainParams', and a real signature -- ``inspect.signature``, which scikit-learn's
    ``get_params`` and ``clone`` read, and ``help()`` show it.  It only stores the values:
    ``fit`` validates them (scikit-learn's rule; ``set_params`` and ``clone`` then see
    exactly what was given)."""
    defaults = {f.name: f.default for f in fields(TrainParams)}
    args = ", ".join(f"{name}=_defaults[{name!r}]" for name in _PARAM_NAMES)
    body = "".join(f"    self.{name} = {name}\n" for name in _PARAM_NAMES)
    namespace: dict[str, Any] = {"_defaults": defaults}
    exec(f"def __init__(self, *, {args}):\n{body}", namespace)
    init = namespace["__init__"]
    init.__annotations__ = {f.name: f.type for f in fields(TrainParams)}
    init.__qualname__ = "OvAClassifier.__init__"
    init.__module__ = __name__
    init.__doc__ = "Store the training parameters (see the class docstring); ``fit`` validates them."
    return init


OvAClassifier.__init__ = _generated_init()


def _parameters_doc() -> str:
    """The Parameters section of the class docstring, from TrainParams' help texts."""
    lines = ["", "    Parameters", "    ----------"]
    for f in fields(TrainParams):
        lines.append(f"    {f.name} : default {f.default!r}")
        lines.append(f"        {f.metadata.get('help', '')}")
    return "\n".join(lines) + "\n"


OvAClassifier.__doc__ = (OvAClassifier.__doc__ or "") + _parameters_doc()


def load(path, **kw) -> OvAClassifier:
    """Load a saved model directory into a fitted :class:`OvAClassifier`."""
    from .errors import ModelFormatError
    from .model.reader import load_model
    from .prediction.topk import _TREE_MODEL

    model = load_model(path, **kw)
    ext = model.extensions or {}
    if "tree" in ext:
        raise ModelFormatError(f"{path}: {_TREE_MODEL}")
    if "dense" in ext:
        # its columns are the sparse part (with its own preprocessing and normalisation)
        # then the dense part (normalised apart): an estimator fed both side by side would
        # score them unprepared -- P@1 0.88 against the shortlist's 1.00 with normalize_dense
        raise ModelFormatError(f"{path}: a dense + sparse model ('headstart shortlist-train --dense'): predict with "
                               "headstart.shortlist.predict_model(headstart.model.format.load_model(path), X, "
                               "first_stage, dense=D), or score every label of model_features(model, X, D)")
    if "shortlist" in ext:
        import warnings

        # as 'headstart predict' refuses it without --score-all-labels (cli/predict.py)
        warnings.warn(f"{path}: a shortlisted model ranks its first stage's candidates only (labels trained on few "
                      "negatives score high everywhere); this estimator scores every label -- "
                      "headstart.shortlist.predict_model scores the candidates", UserWarning, stacklevel=2)
    clf = OvAClassifier(**model.params.to_dict())
    try:
        clf._set_model(model)
    except ModelFormatError as e:       # (its classes or input field) named with the directory
        raise ModelFormatError(f"{path}: {e}") from None
    return clf
