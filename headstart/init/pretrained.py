"""``pretrained``: warm start from the weights of a trained model for the same labels
(LIBLINEAR's warm start for parameter sweeps; also resumes a sweep over C or epsilon).
Labels the model does not cover start from zero.

The weights come from a :class:`WeightSource`: a saved model directory
(:class:`ModelDirectory`, ``pretrained=PATH``), or weights in memory
(:class:`InMemoryWeights`: a fitted estimator, an :class:`~headstart.model.model.OvAModel`
or ``(coef, intercept)``; what ``OvAClassifier(pretrained=...)`` and ``cross_validate``'s
search over C use, without writing a model to disk and reading it back).  One strategy
reads both: the checks (features, label space, how the features were prepared), the rows
of the labels trained and the coverage are the same code, so a start from memory equals
the start from the same model saved, bit for bit -- the in-memory weights are rounded to
float32 and put in canonical form by the functions that write a shard
(:func:`headstart.model.shards.canonical_weights`)."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from ..errors import ModelFormatError, ParameterError
from .base import Initializer, plan_kernel, plan_restriction, register

log = logging.getLogger(__name__)

#: what a model's manifest records for ``pretrained`` when the start was in memory:
#: the weights themselves were not saved (TrainParams.to_dict)
IN_MEMORY = "<in-memory weights>"


class PretrainedPlan(NamedTuple):
    indptr: np.ndarray       # CSR rows of the saved labels (internal feature numbering)
    indices: np.ndarray
    data: np.ndarray
    intercept: np.ndarray    # bias weights
    first: int               # label range held
    count: int


class WeightSource:
    """Where a pretrained start's weights come from: a model's shape, the parameters it
    was trained with, and its rows as blocks of labels, read one block at a time."""

    what: str = "?"          # names the source in messages
    n_features: int = 0
    label_space: int = 0
    params: dict = {}        # the parameters it was trained with (features' preparation)
    tree: bool = False       # a label tree's node outputs, not labels

    def blocks(self) -> list[tuple[int, int, Any]]:   # pragma: no cover - interface
        """(first_label, num_labels, key) of every block of rows held, any order."""
        raise NotImplementedError

    def read(self, key) -> tuple[sp.csr_matrix, np.ndarray]:   # pragma: no cover - interface
        """The block's rows: float32 canonical CSR (num_labels x n_features) and float32
        stored intercepts (bias weight times bias value)."""
        raise NotImplementedError


class ModelDirectory(WeightSource):
    """A saved model directory: its manifest now, a shard when its rows are read."""

    def __init__(self, path):
        from ..model.manifest import read_manifest

        if path == IN_MEMORY:
            # the parameters of a model that was started from memory, reused
            raise ParameterError(f"parameter pretrained is {IN_MEMORY!r}: the model these parameters come from "
                                 "was started from weights in memory, which were not saved; give a model "
                                 "directory or the weights (OvAClassifier(pretrained=...))")
        self.path = self.what = path
        m = read_manifest(path)
        self.manifest = m
        self.tree = "tree" in m
        self.n_features, self.label_space = int(m["n_features"]), int(m["label_space"])
        self.params = m.get("params") or {}

    def blocks(self):
        return [(int(s["first_label"]), int(s["num_labels"]), s) for s in self.manifest["shards"]]

    def read(self, entry):
        from pathlib import Path

        from ..model.shards import read_shard

        _, w, b = read_shard(Path(self.path), entry, self.n_features)
        return w, np.asarray(b, dtype=np.float32)


class InMemoryWeights(WeightSource):
    """Weights in memory: rows ``weights`` (labels ``first_label`` on, as an
    :class:`~headstart.model.model.OvAModel` holds them) and ``intercept``.

    They are put in the form a model directory stores (float32 CSR, sorted indices, no
    duplicates -- no copy when they are in it already, as a trained model's are), so that
    a start from them is the start from the same model saved.  Labels in
    ``missing_ranges``, and labels whose intercept is -inf with an empty row (what
    ``OvAClassifier.coef_`` / ``intercept_`` give the labels a label-range fit did not
    train), are not held: they start from zero, as a saved model's gaps do.  The arrays
    are shared, not copied: they must not change while a training reads them.
    ``copy.deepcopy`` returns the object itself (``TrainParams.to_dict`` and
    scikit-learn's ``clone`` deep-copy parameters)."""

    def __init__(self, weights, intercept, *, n_features: int | None = None, label_space: int | None = None,
                 first_label: int = 0, params: dict | None = None, missing_ranges=(), tree: bool = False,
                 what: str = "the pretrained weights (in memory)"):
        from ..model.ranges import uncovered
        from ..model.shards import canonical_intercept, canonical_weights

        self.what = what
        try:
            if not sp.issparse(weights):
                weights = np.asarray(weights)
                if weights.ndim != 2:
                    raise ModelFormatError(f"{what}: weights must be a 2-d matrix (labels x features), got "
                                           f"{weights.ndim} dimension(s)")
            d = int(weights.shape[1]) if n_features is None else int(n_features)
            W = canonical_weights(weights, d, what)
            b = np.asarray(intercept if intercept is not None else np.zeros(W.shape[0]), dtype=np.float64)
            if b.shape != (W.shape[0],):
                raise ModelFormatError(f"{what}: intercept has shape {b.shape}, expected ({W.shape[0]},) (one per "
                                       "row of the weights)")
            # -inf with an empty row: a label not trained (OvAClassifier.coef_ of a label-range fit)
            untrained = np.isneginf(b) & (np.diff(W.indptr) == 0)
            b = canonical_intercept(np.where(untrained, 0.0, b), W.shape[0], what)
        except ModelFormatError as e:
            raise ParameterError(f"parameter pretrained: {e}") from None
        first = int(first_label)
        L = first + W.shape[0] if label_space is None else int(label_space)
        if first < 0 or first + W.shape[0] > L:
            raise ParameterError(f"parameter pretrained: {what} hold labels {first}..{first + W.shape[0] - 1}, "
                                 f"outside the label space [0, {L})")
        gaps = [(first + int(i), first + int(i) + 1) for i in np.flatnonzero(untrained)]
        self.W, self.b, self.first = W, b, first
        self.n_features, self.label_space = d, L
        self.params = dict(params or {})
        self.tree = bool(tree)
        self.runs = uncovered(list(missing_ranges) + gaps, first, first + W.shape[0])

    @classmethod
    def of_model(cls, model, what: str = "the pretrained model (in memory)") -> "InMemoryWeights":
        """The weights of an :class:`~headstart.model.model.OvAModel` (what the model
        directory saved from it would hold)."""
        p = getattr(model, "params", None)
        return cls(model.weights, model.intercept, n_features=int(model.n_features),
                   label_space=int(model.label_space), first_label=int(model.first_label),
                   params=p.to_dict() if hasattr(p, "to_dict") else dict(p or {}),
                   missing_ranges=getattr(model, "missing_ranges", None) or (),
                   tree="tree" in (getattr(model, "extensions", None) or {}), what=what)

    def blocks(self):
        return [(a, z - a, (a, z)) for a, z in self.runs]

    def read(self, key):
        from ..model.shards import row_view

        a, z = key
        return row_view(self.W, a - self.first, z - self.first), self.b[a - self.first:z - self.first]

    def __deepcopy__(self, memo):
        return self

    def __repr__(self) -> str:
        return (f"InMemoryWeights(labels {self.first}..{self.first + self.W.shape[0] - 1} of {self.label_space}, "
                f"{self.n_features} features, {self.W.nnz} weights)")


def weight_source(value) -> str | WeightSource | None:
    """The ``pretrained`` parameter as training reads it: a path (str) or None as
    given; weights in memory as :class:`InMemoryWeights` -- a fitted
    :class:`~headstart.OvAClassifier` (its ``model_`` now), an
    :class:`~headstart.model.model.OvAModel`, or ``(coef, intercept)`` (rows from label
    0).  Anything else is refused, by name."""
    if value is None or isinstance(value, (str, WeightSource)):
        return value
    if hasattr(value, "get_params") and hasattr(value, "fit"):      # an estimator
        model = getattr(value, "model_", None)
        if model is None:
            raise ParameterError(f"parameter pretrained is an unfitted {type(value).__name__}: fit it "
                                 "first (scikit-learn's clone() makes unfitted copies of estimator parameters: "
                                 "in a grid search pass its model_ instead)")
        return InMemoryWeights.of_model(model, f"the pretrained {type(value).__name__}'s model_ (in memory)")
    if all(hasattr(value, a) for a in ("weights", "intercept", "n_features", "label_space")):
        return InMemoryWeights.of_model(value)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return InMemoryWeights(value[0], value[1], what="the pretrained (coef, intercept)")
    raise ParameterError("parameter pretrained must be a model directory (a path), a fitted OvAClassifier, an "
                         "OvAModel or a pair (coef, intercept) (or None), got a " + type(value).__name__)


class Pretrained(Initializer):
    name = "pretrained"

    def __init__(self, source):
        self.source = source      # a path or a WeightSource (params.pretrained)

    def start_rows(self, plan):
        # _start writes the row and intercept as they are, the zero start outside them:
        # labels without positives of equal rows share a solve (a model's unused labels
        # are equal rows -- they shared theirs --: 2M labels, 300 used, 18.6-43.2 s with
        # a solve each, 1.8-2.3 s shared, 1.0 s compacted; docs/design.md)
        return plan.first, plan.indptr[:plan.count + 1], plan.indices, plan.data, plan.intercept

    def _model(self):
        # the source as given (a WeightSource) or the model directory at its path
        return self.source if isinstance(self.source, WeightSource) else ModelDirectory(self.source)

    def planned_rows(self, first, stop):
        # the model's rows as stored: equal rows stay equal (prepare renumbers the
        # features, a bijection) and so do equal intercepts (divided by the same bias);
        # a model that cannot start the labels is refused by prepare, in the trainer
        from ..errors import HeadstartError

        try:
            src = self._model()
            if src.tree:
                return None
            lo, W, intercept, _ = _rows(src, int(first), min(int(stop), src.label_space), src.n_features)
        except (OSError, ValueError, HeadstartError):
            return None
        return lo, W.indptr, W.indices, W.data, intercept

    def prepare(self, ctx):
        src = self._model()
        what = src.what
        if src.tree:   # its rows are nodes: even a matching count starts wrong labels
            raise ModelFormatError(f"{what}: a label-tree model (its rows are the tree nodes' outputs, not "
                                   "labels) cannot start one-vs-all training")
        d_model, L_model = src.n_features, src.label_space
        d, L = ctx.n_features, int(ctx.Y.shape[1])
        # Growth is what adding rows does (new feature ids beyond the old ones of a libsvm
        # file, new labels appended): the old ids keep their meaning, so the old rows are
        # still the best start there and the new features / labels start from 0.  Fewer
        # features or labels than the model can only be other data (helper-68).
        if d_model > d:
            raise ModelFormatError(f"{what}: pretrained model has {d_model} features, the training data only "
                                   f"{d}: it was trained on other data")
        if L_model > L:
            raise ModelFormatError(f"{what}: pretrained model has a label space of {L_model}, the training "
                                   f"data only {L}: its rows would start other labels")
        if d_model < d or L_model < L:
            log.warning("%s: the pretrained model has %d features and %d labels, the training data %d and %d: "
                        "features and labels beyond the model's start from 0 (ids must mean the same in both)",
                        what, d_model, L_model, d, L)
        _warn_other_preparation(what, src.params, ctx.params)
        # only the rows of the labels trained here (helper-68: the whole model was loaded,
        # ~3.4x its size at the peak, to start a range of it)
        labels = getattr(ctx, "labels", None)
        lo, hi = (int(labels[0]), int(labels[-1]) + 1) if labels is not None and len(labels) else (0, L)
        first, W, intercept, covered = _rows(src, lo, min(hi, L_model), d_model)
        want = L
        if labels is not None:
            # of the labels trained (not the rows read, which span the gaps between them:
            # labels 1 and 19 of a model of 2..15 read 14 rows and start 2 from zero)
            # (labels ascending: two binary searches a block, not a pass over the labels --
            # thousands of shards times millions of labels otherwise)
            labels = np.asarray(labels)
            want = int(labels.size)
            covered = sum(int(np.searchsorted(labels, a + n) - np.searchsorted(labels, a))
                          for a, n, _ in src.blocks())
        if covered < want:
            log.warning("%s: the pretrained model covers %d of the %d labels trained; the others start from zero",
                        what, covered, want)
        if d_model < d:
            W = sp.csr_matrix((W.data, W.indices, W.indptr), shape=(W.shape[0], d))
        if ctx.feature_order is not None:
            W = ctx.feature_order.to_internal(W)
        W.sort_indices()
        bias = ctx.problem.bias
        # stored intercept = bias weight * bias value
        wb = (intercept.astype(np.float64) / bias) if bias > 0 else np.zeros(W.shape[0])
        return PretrainedPlan(W.indptr.astype(np.int64), W.indices.astype(np.int32, copy=False),
                              W.data.astype(np.float32, copy=False), wb.astype(np.float32), first, W.shape[0])


#: the parameters that say how the model's features were made from the data
_PREPARATION = ("normalize", "tfidf", "feature_transform", "hash_buckets", "hash_functions", "hash_seed")


def _warn_other_preparation(what, saved: dict, params) -> None:
    """A model trained on differently prepared features (normalised rows against raw ones,
    another hashing) starts far from the optimum: training still converges to the same
    solution, only slower -- so a warning, not an error."""
    hashing = (saved.get("hash_buckets") or 0) > 0 or params.hash_buckets > 0
    other = [f"{k}={saved[k]!r} (now {getattr(params, k)!r})" for k in _PREPARATION
             if k in saved and saved[k] != getattr(params, k) and (hashing or not k.startswith("hash_"))]
    if other:
        log.warning("%s: the pretrained model's features were prepared otherwise: %s; its weights are a poor "
                    "start (training reaches the same solution, more slowly)", what, ", ".join(other))


def _rows(src: WeightSource, lo: int, hi: int, d: int):
    """(first, CSR rows, intercepts, rows covered) of the source's labels [lo, hi): only
    the blocks that overlap the range are read, one at a time; labels in a gap of the
    model get an empty row and intercept 0."""
    blocks, bias, covered = [], [], 0
    pos = lo
    for a, n, key in sorted(src.blocks(), key=lambda e: e[0]):
        if a + n <= lo or a >= hi:
            continue
        w, b = src.read(key)
        s, e = max(a, lo), min(a + n, hi)
        if s > pos:
            blocks.append(sp.csr_matrix((s - pos, d), dtype=np.float32))
            bias.append(np.zeros(s - pos, dtype=np.float32))
        blocks.append(w[s - a:e - a])
        bias.append(np.asarray(b[s - a:e - a], dtype=np.float32))
        covered += e - s
        pos = e
        del w
    if not blocks:
        return lo, sp.csr_matrix((0, d), dtype=np.float32), np.zeros(0, dtype=np.float32), 0
    W = blocks[0].tocsr() if len(blocks) == 1 else sp.vstack(blocks, format="csr", dtype=np.float32)
    return lo, W, np.concatenate(bias), covered


def _start(plan, P, O, w, psum, pos, label):
    w[:] = 0.0
    r = label - plan.first
    if r < 0 or r >= plan.count:
        O.wx[:] = 0.0
        return False
    for k in range(plan.indptr[r], plan.indptr[r + 1]):
        w[plan.indices[k]] = plan.data[k]
    w[w.size - 1] = plan.intercept[r]
    return True  # wx = X w0 is computed by the caller


def _local(plan, R):
    # The label's saved row (original feature space, ascending ids) merged with the local
    # columns and brought to the training scale; weights of features that no row of the
    # sub-problem has are dropped (there they only add regularisation: the solution has
    # them at 0).  A one-row plan whose first label is the label, so that _start finds
    # it; a label the saved model lacks gets an empty one (zero start).
    nf = R.feats.size
    indices = np.empty(nf, dtype=np.int32)
    data = np.empty(nf)
    intercept = np.zeros(1)
    r = R.label - plan.first
    k = 0
    count = 0
    if 0 <= r < plan.count:
        count = 1
        intercept[0] = plan.intercept[r]
        q = 0
        for p in range(plan.indptr[r], plan.indptr[r + 1]):
            j = plan.indices[p]
            while q < nf and R.feats[q] < j:
                q += 1
            if q == nf:
                break
            if R.feats[q] == j:
                indices[k] = q
                data[k] = plan.data[p] / R.scale[q]
                k += 1
    indptr = np.zeros(2, dtype=np.int64)
    indptr[1] = k
    return PretrainedPlan(indptr, indices[:k], data[:k], intercept, R.label, count)


plan_kernel(PretrainedPlan, _start)
plan_restriction(PretrainedPlan, _local)
register("pretrained", lambda p: Pretrained(p.pretrained),
         "the weights of a trained model (--pretrained: its directory; in Python also the model or weights in "
         "memory) for the same labels; others start from zero")
