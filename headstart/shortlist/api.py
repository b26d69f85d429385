"""The functional core of shortlisted (and dense + sparse) training and prediction.

A shortlisted model is an ordinary headstart model directory (manifest, shards,
statistics) whose manifest also holds

* ``"shortlist"``: ``{"sha256": ..., "nnz": ..., "source": ...}`` -- which shortlist
  the labels were trained with (a resumed run must use the same one);
* ``"dense"`` (dense + sparse models only): the two parts' sizes, regularisation scales
  and normalisations (:class:`.features.DenseSparseParams`).

Sharded, resumable and Dask training use :mod:`headstart.distributed` unchanged: only
the per-range training function differs (:func:`train_shortlisted_range`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError, ParameterError
from ..estimator import PreparedData, prepare_data
from ..model.model import OvAModel, Preprocessing
from ..params import TrainParams
from .candidates import FirstStage
from .features import MANIFEST_KEY as DENSE_KEY
from .features import DenseSparseParams, check_dense, combine, prediction_features
from .predict import CandidateScores, predict_candidates
from .starts import FILE, read_dense_start, read_dense_start_bias
from .._columns import UsedColumns
from .training import RunInputs, compact_columns, prepare_inputs, train_shortlisted

SHORTLIST_KEY = "shortlist"
log = logging.getLogger(__name__)


def shortlist_fingerprint(shortlist: sp.csc_matrix) -> str:
    """sha256 of the per-label instance lists (shape, indptr, indices as int64)."""
    h = hashlib.sha256()
    h.update(np.asarray(shortlist.shape, dtype=np.int64).tobytes())
    h.update(shortlist.indptr.astype(np.int64).tobytes())
    h.update(shortlist.indices.astype(np.int64).tobytes())
    return h.hexdigest()


def as_shortlist(shortlist: Any, n: int, L: int, what: str = "shortlist") -> sp.csc_matrix:
    """Validate an instances x labels 0/1 matrix and return it as CSC with sorted indices.

    Its index arrays are checked (the kernels gather X's rows by them without bounds
    checks) and so are its values: 0 or 1 (True / False) only -- a NaN, a -1 or a score
    is a mistake that would otherwise count as "shortlisted" (helper-90)."""
    from ..validation import check_sparse_structure

    if not sp.issparse(shortlist):
        shortlist = sp.csc_matrix(np.asarray(shortlist))
    check_sparse_structure(shortlist, f"the {what}")
    if shortlist.shape != (n, L):
        raise DataFormatError(f"the {what} is {shortlist.shape[0]} instances x {shortlist.shape[1]} labels, "
                              f"the training data {n} x {L}; refused")
    S = sp.csc_matrix(shortlist, copy=True)
    if S.dtype != np.bool_:
        bad = np.flatnonzero((S.data != 0) & (S.data != 1))
        if bad.size:
            i = int(bad[0])
            col = int(np.searchsorted(S.indptr, i, side="right") - 1)
            raise DataFormatError(f"the {what} must be an instances x labels 0/1 matrix: found the value "
                                  f"{float(S.data[i]):g} at instance {int(S.indices[i])}, label {col}")
    S = sp.csc_matrix(S, dtype=np.float32)
    S.sum_duplicates()
    S.eliminate_zeros()
    S.sort_indices()
    S.data[:] = 1.0
    return S


@dataclasses.dataclass
class ShortlistedData:
    """Training data ready for the sub-problems (preprocessed, dense part combined)."""

    data: PreparedData            # X: the training columns (scaled when there is a dense part)
    shortlist: sp.csc_matrix
    fscale: np.ndarray | None     # weight of an original feature = trained weight * fscale (None: 1)
    extensions: dict[str, Any]
    inputs: RunInputs             # starts and per-label costs
    train_X: sp.csr_matrix        # what the kernels see: data.X, or its columns that occur
    columns: UsedColumns | None   # train_X's columns, when not all of data.X's (compact_columns)


def prepare_shortlisted(X: Any, Y: Any, params: TrainParams, shortlist: Any, *, dense: Any = None,
                        dense_params: DenseSparseParams | None = None, first_label: int = 0,
                        num_labels: int | None = None, source: str = "given") -> ShortlistedData:
    """Validate and preprocess (the public boundary of shortlisted training): the data,
    the shortlist, the dense part, the starts (plans prepared, start files read) and the
    per-label costs, so that nothing is written before every input has been checked."""
    if dense is not None:
        if params.tfidf or params.normalize:
            raise ParameterError("with dense features, normalise each part (command line: --normalize-sparse, "
                                 "--normalize-dense; API: DenseSparseParams(normalize_sparse=..., "
                                 "normalize_dense=...)) instead of normalize / tfidf (tf-idf is not offered "
                                 "with a dense part: give tf-idf values)")
    elif dense_params is not None:
        raise ParameterError("dense_params given without dense features")
    data = prepare_data(X, Y, params, first_label, num_labels)
    # instance ids of the shortlist and rows of the dense part are those of the data as
    # given: checked against it, then cut to the rows that remove_no_label_data kept
    S = as_shortlist(shortlist, data.given_rows, data.label_space)
    # the shortlist named as given (before the cut below): the first stage that made it
    # knows it so (helper-59: with remove_no_label_data shortlist-predict warned that the
    # model was trained on another shortlist than the one its first stage had made)
    ext: dict[str, Any] = {SHORTLIST_KEY: {"source": str(source), "nnz": int(S.nnz),
                                           "sha256": shortlist_fingerprint(S)}}
    if data.kept_rows is not None:
        S = sp.csc_matrix(S[data.kept_rows])
        S.sort_indices()
        # and as cut: what models written before that change named (their resume accepts it,
        # distributed.sharded._named_before_the_cut)
        ext[SHORTLIST_KEY].update(cut_nnz=int(S.nnz), cut_sha256=shortlist_fingerprint(S))
        if dense is not None:
            dense = check_dense(dense, data.given_rows)[data.kept_rows]
    fscale = None
    start_kw: dict[str, Any] = {}
    if dense is not None:
        dp = dense_params or DenseSparseParams()
        n_sparse = data.n_features
        Xc, fscale = combine(data.X, dense, dp)
        n_dense = Xc.shape[1] - n_sparse
        if dp.per_part:
            if params.init == "pretrained":
                raise ParameterError("init='pretrained' is replaced by the per-part starts (sparse_init / "
                                     "dense_init), so the pretrained model would not be used: give one or the other")
            start_kw = dict(n_sparse=n_sparse, sparse_init=dp.sparse_init, dense_init=dp.dense_init)
            if dp.dense_init == FILE:
                start_kw["dense_weights"] = read_dense_start(dp.dense_init_file, data.label_space, n_dense)
                if dp.dense_init_bias_file is not None:
                    start_kw["dense_intercept"] = read_dense_start_bias(dp.dense_init_bias_file, data.label_space)
        ext[DENSE_KEY] = dp.manifest(n_sparse, n_dense)
        # data.preprocessing (hashing, a value transform: normalize / tf-idf are refused
        # above) was applied to the sparse part and stays in the model: prediction
        # applies it to the sparse part before the dense one is appended (_features)
        data = dataclasses.replace(data, X=Xc)
    # what the sub-problems' objective does not offer, refused here, before any work (helper-59:
    # over Dask it was refused by each worker, after the data had been sent)
    from ..training.one_problem import objective_parts

    objective_parts(params, dense=fscale is not None and bool(np.any(np.asarray(fscale) != 1.0)))
    columns = compact_columns(data.X, params, dense is not None)
    train_X = data.X if columns is None else columns.compact(data.X)
    inputs = prepare_inputs(train_X, data.Y, params, **start_kw)
    return ShortlistedData(data, S, fscale, ext, inputs, train_X, columns)


def fit_shortlisted(X: Any, Y: Any, params: TrainParams, shortlist: Any, *, dense: Any = None,
                    dense_params: DenseSparseParams | None = None, first_label: int = 0,
                    num_labels: int | None = None, progress: Callable[[int], None] | None = None,
                    source: str = "given"):
    """Train labels ``[first_label, first_label + num_labels)`` on their shortlists.

    Returns (:class:`~headstart.model.model.OvAModel` in the original feature space --
    sparse columns, then dense ones --, TrainingStats)."""
    sd = prepare_shortlisted(X, Y, params, shortlist, dense=dense, dense_params=dense_params,
                             first_label=first_label, num_labels=num_labels, source=source)
    d = sd.data
    W, b, stats = train_shortlisted(sd.train_X, d.Y, sd.shortlist, params, np.arange(d.first_label, d.stop),
                                    fscale=sd.fscale, progress=progress, inputs=sd.inputs, columns=sd.columns)
    W, b, missing = _place_rows(W, b, np.asarray(stats["label"]), d.first_label, d.num_labels)
    model = OvAModel(weights=W, intercept=b, n_features=d.n_features, label_space=d.label_space,
                     first_label=d.first_label, params=params, preprocessing=d.preprocessing,
                     label_counts=d.label_counts, n_train=d.n_train, missing_ranges=missing,
                     extensions=sd.extensions)
    return model, stats


def _place_rows(W: sp.csr_matrix, b: np.ndarray, labels: np.ndarray, first: int, count: int):
    """Rows of the labels trained (all of them unless a timeout stopped the run) placed
    in the label range; the untrained labels as missing ranges (empty rows)."""
    if labels.size == count:
        return W, b, []
    pos = labels - first
    rows = np.zeros(count + 1, dtype=np.int64)
    lens = np.diff(W.indptr)
    full_len = np.zeros(count, dtype=np.int64)
    full_len[pos] = lens
    rows[1:] = np.cumsum(full_len)
    Wf = sp.csr_matrix((W.data, W.indices, rows), shape=(count, W.shape[1]))
    bf = np.zeros(count, dtype=np.float32)
    bf[pos] = b
    have = np.zeros(count, dtype=bool)
    have[pos] = True
    missing, i = [], 0
    while i < count:
        if not have[i]:
            j = i
            while j < count and not have[j]:
                j += 1
            missing.append((first + i, first + j))
            i = j
        else:
            i += 1
    return Wf, bf, missing


# --------------------------------------------------------------------------- sharded / Dask
class ShortlistArrays:
    """What a Dask worker needs: X (training columns), Y (CSC), the shortlist, fscale,
    the run's inputs (starts, costs) and X's columns (:class:`ShortlistedData`); aligned
    when unpickled (see headstart.distributed.dask_backend.aligned)."""

    def __init__(self, X, Y, shortlist, fscale, inputs, columns=None):
        self.X, self.Y, self.shortlist, self.fscale, self.inputs = X, Y, shortlist, fscale, inputs
        self.columns = columns

    def __getstate__(self) -> dict[str, Any]:
        return {"X": self.X, "Y": self.Y, "shortlist": self.shortlist, "fscale": self.fscale,
                "inputs": self.inputs, "columns": self.columns}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from ..distributed.dask_backend import aligned
        from .starts import aligned_starts

        self.X, self.Y = aligned(state["X"]), aligned(state["Y"])
        self.shortlist, self.fscale = aligned(state["shortlist"]), aligned(state["fscale"])
        i = state["inputs"]
        self.inputs = RunInputs(aligned_starts(i.starts), aligned(i.cost_pos), aligned(i.cost_neg))
        self.columns = state["columns"]


def train_shortlisted_range(arrays: ShortlistArrays, params: TrainParams, first: int, stop: int,
                            threads: int | None):
    """Dask task: labels ``[first, stop)``; returns (first, weights, intercept, stats)."""
    from ..distributed.dask_backend import _worker_threads

    t = int(threads) if threads else _worker_threads()
    t0 = time.perf_counter()
    W, b, stats = train_shortlisted(arrays.X, arrays.Y, arrays.shortlist, params.replace(threads=t),
                                    np.arange(first, stop, dtype=np.int64), fscale=arrays.fscale,
                                    inputs=arrays.inputs, columns=arrays.columns)
    stats.meta.update({"task_seconds": time.perf_counter() - t0, "task_threads": t})
    # (a time budget may leave gaps: the client registers the rows by stats["label"])
    return first, W, b, stats


#: default labels per shard of shortlisted training: a shard (its weights and statistics
#: written and synced) costs ~11 ms, a shortlisted label ~0.1-3 ms, where a full one-vs-all
#: label costs up to seconds (its cap stays 256, the work an interruption loses).  200,000
#: labels without positives took 13.7 s in 782 shards of 256 against 1.6 s for full
#: one-vs-all; 2048 labels of the Amazon-670K-shaped set (2.4 ms each) are 5 s of work.
SHARD_CAP = 2048


def default_shard_labels(sd: ShortlistedData, threads: int) -> int:
    """Labels per shard by default: :data:`SHARD_CAP` shortlisted labels' work a shard,
    a label without a row (no positive, nothing shortlisted) counting
    :data:`~headstart.distributed.sharded.ROWLESS_SHARE` of one
    (:func:`~headstart.distributed.sharded.shard_size_by_work`).  By label count alone:
    2M labels, 300 used, 1,000 rows: 997 shards and 12.1 CPU-s against 7.9 in 63 shards
    (2026-12-06, one run each beside a test run; the work per shard of the labels with
    rows is then the same, on average over the range)."""
    from ..distributed.sharded import shard_size_by_work

    data = sd.data
    a, z = int(data.first_label), int(data.stop)
    busy = int(np.count_nonzero((np.diff(data.Y.indptr[a:z + 1]) > 0) | (np.diff(sd.shortlist.indptr[a:z + 1]) > 0)))
    return shard_size_by_work(int(data.num_labels), busy, threads, SHARD_CAP)


def train_shortlisted_dir(X: Any, Y: Any, params: TrainParams, shortlist: Any, model_dir: str | os.PathLike, *,
                          dense: Any = None, dense_params: DenseSparseParams | None = None, first_label: int = 0,
                          num_labels: int | None = None, shard_size: int | None = None, resume: bool = False,
                          scheduler: str | None = None, dask_workers: int | None = None,
                          progress: Callable[[int], None] | None = None, overwrite: bool | str = "complete",
                          source: str = "given", **kw: Any):
    """Shortlisted training into a model directory, shard by shard: this machine's
    threads, or Dask (``client``, ``scheduler`` or ``dask_workers``), resumable -- exactly as
    :func:`headstart.distributed.train_model_dir` for full one-vs-all."""
    from ..distributed.sharded import default_shard_size, train_sharded

    sd = prepare_shortlisted(X, Y, params, shortlist, dense=dense, dense_params=dense_params,
                             first_label=first_label, num_labels=num_labels, source=source)
    client = kw.pop("client", None)
    on_dask = bool(scheduler or dask_workers or client is not None)
    if shard_size is None:
        shard_size = (default_shard_size(sd.data.num_labels, params.effective_threads(), SHARD_CAP) if on_dask
                      else default_shard_labels(sd, params.effective_threads()))
    common = dict(first_label=first_label, num_labels=num_labels, shard_size=shard_size, resume=resume,
                  overwrite=overwrite, progress=progress, data=sd.data, extensions=sd.extensions, **kw)
    if on_dask:
        from ..distributed.dask_backend import train_dask

        payload = ShortlistArrays(sd.train_X, sd.data.Y, sd.shortlist, sd.fscale, sd.inputs, sd.columns)
        return train_dask(X, Y, params, model_dir, client=client, scheduler=scheduler, n_workers=dask_workers,
                          task_fn=train_shortlisted_range, payload=payload, **common)

    def train_fn(Xp, Yp, p, labels, *, chunk_size=None, sink=None, collect=True):
        # Xp is sd.data.X (train_sharded's data); the kernels take its training columns
        return train_shortlisted(sd.train_X, Yp, sd.shortlist, p, labels, fscale=sd.fscale, chunk_size=chunk_size,
                                 sink=sink, collect=collect, inputs=sd.inputs, columns=sd.columns)

    # compile (first run) or load the kernel before the clock of training starts, so that
    # the training time reported is training (info["compile_seconds"]: the rest)
    t0 = time.perf_counter()
    train_fn(sd.data.X, sd.data.Y, params, np.zeros(0, dtype=np.int64), collect=False)
    compiled = time.perf_counter() - t0
    result = train_sharded(X, Y, params, model_dir, train_fn=train_fn, **common)
    result.info["compile_seconds"] = compiled
    return result


# --------------------------------------------------------------------------- prediction
def model_features(model: OvAModel, X: Any, dense: Any = None) -> sp.csr_matrix:
    """X in the model's feature space: its preprocessing, and the dense part appended."""
    return _features(getattr(model, "extensions", None) or {}, model.preprocessing, model.n_features, X, dense)


def _features(ext: dict, preprocessing: Preprocessing, n_features: int, X: Any, dense: Any) -> sp.csr_matrix:
    from ..prediction.preprocess import apply_preprocessing
    from ..validation import check_features

    if DENSE_KEY in ext:
        if dense is None:
            raise ParameterError("this model was trained on dense + sparse features: give the dense features too")
        dp, n_sparse, n_dense = DenseSparseParams.from_manifest(ext[DENSE_KEY])
        # the sparse part's preprocessing (hashing, value transform) as in training
        Xs = sp.csr_matrix(apply_preprocessing(check_features(X), preprocessing))
        return prediction_features(Xs, dense, dp, n_sparse, n_dense)
    if dense is not None:
        raise ParameterError("this model has no dense part, but dense features were given")
    Xs = check_features(X)
    # hashing takes raw features of any width to the model's n_features (s80-h2: a hashed
    # sparse model was refused here, 'X has 1836 features, the model was trained on 256')
    if preprocessing.hashing is None and Xs.shape[1] > n_features:
        raise DataFormatError(f"X has {Xs.shape[1]} features, the model was trained on {n_features}")
    return sp.csr_matrix(apply_preprocessing(Xs, preprocessing))


def predict_model(model: OvAModel, X: Any, first_stage: FirstStage, k: int = 5, *, dense: Any = None,
                  threads: int | None = None, candidates: np.ndarray | None = None):
    """Top-k (labels int32, scores float32) of every row of X among its first-stage
    candidates (computed from the sparse part of X unless ``candidates`` is given: then
    :meth:`FirstStage.prediction_candidates`, at least k per row).  The stage's own K
    candidates (its first K columns) rank before any added to fill k > K slots, so the
    first K labels of a row are the same whatever k."""
    from ..validation import check_features

    X = check_features(X)
    if candidates is None:
        candidates, _ = first_stage.prediction_candidates(X, k)
    Xm = model_features(model, X, dense)
    return predict_candidates(model.weights, model.intercept, Xm, candidates, k, first_label=model.first_label,
                              missing_ranges=getattr(model, "missing_ranges", None) or (), threads=threads,
                              label_space=model.label_space, primary=int(first_stage.params.K))


#: predict_model_dir scores consecutive shards together up to this many weights (8 bytes
#: each: ~400 MB): every block is one pass over all rows' candidates, so 2,600 shards of
#: 256 labels scored one by one cost ~100 s of passes at 670K labels; blocks of 50M
#: weights make that 18 passes
PREDICT_BLOCK_NNZ = 50_000_000


def open_model_dir(model_dir: str | os.PathLike) -> dict:
    """The manifest of a complete model directory (ModelFormatError otherwise), before
    any data is read."""
    from ..model.manifest import read_manifest
    from ..model.reader import require_complete

    m = read_manifest(model_dir)
    # the command that made the model continues it (shortlisted models name their shortlist)
    how = "shortlist-train" if SHORTLIST_KEY in m else "train"
    require_complete(model_dir, m, hint=f"; train the missing labels first ({how} --resume)")
    return m


def check_first_stage(first_stage: FirstStage, manifest: dict, model_dir) -> None:
    """Refuse a first stage made on other training data than the model (``manifest``):
    another label space, or (unless the model hashes its features) another width of the
    sparse features."""
    n_sparse = int(manifest["n_features"])
    if DENSE_KEY in manifest:
        _, n_sparse, _ = DenseSparseParams.from_manifest(manifest[DENSE_KEY])
    if manifest["preprocessing"]["hash"] is not None:
        n_sparse = first_stage.n_features     # the raw width is not recorded: hashing takes any
    first_stage.check_model(int(manifest["label_space"]), n_sparse, f"the model {os.fspath(model_dir)}")
    made = first_stage.info.get("train_shortlist_sha256")
    trained = (manifest.get(SHORTLIST_KEY) or {}).get("sha256")
    if made is not None and trained is not None and made != trained and not first_stage.info.get("warned"):
        first_stage.info["warned"] = True     # once, though a command checks at two places
        # the labels were trained against other negatives than the candidates they will
        # be asked to rank (docs/shortlist.md: P@1 64 against 69 on debian-deps)
        log.warning("%s was trained on another shortlist than this first stage made (K = %d, %s): "
                    "predicting among candidates the labels were not trained against loses accuracy; use the "
                    "first stage of the training shortlist", os.fspath(model_dir), first_stage.params.K,
                    first_stage.params.method)


def predict_model_dir(model_dir: str | os.PathLike, X: Any, first_stage: FirstStage, k: int = 5, *,
                      dense: Any = None, threads: int | None = None, candidates: np.ndarray | None = None,
                      block_nnz: int = PREDICT_BLOCK_NNZ):
    """:func:`predict_model` for a model directory, read a few shards at a time: memory is
    one block of shards (``block_nnz`` weights at most, or one shard if larger) plus the
    (n, K) candidate scores, never the whole model (at 670K labels the weights alone can
    exceed the memory; the results are the same bit for bit).  An incomplete model is
    refused."""
    from ..model.extras import read_extras
    from ..model.manifest import OPTIONAL_MANIFEST_KEYS
    from ..model.shards import iter_shards

    m = open_model_dir(model_dir)
    preprocessing, _ = read_extras(model_dir, m)
    ext = {key: m[key] for key in OPTIONAL_MANIFEST_KEYS if key in m}
    check_first_stage(first_stage, m, model_dir)
    from ..validation import check_features

    X = check_features(X)
    if candidates is None:
        candidates, _ = first_stage.prediction_candidates(X, k)
    scores = CandidateScores(_features(ext, preprocessing, m["n_features"], X, dense), candidates,
                             m["n_features"], threads, m["label_space"])
    block: list = []
    nnz = 0

    def flush() -> None:
        if block:
            W = sp.vstack([w for _, w, _ in block], format="csr") if len(block) > 1 else block[0][1]
            scores.add(W, np.concatenate([b for _, _, b in block]), block[0][0])
            block.clear()

    for first, weights, intercept in iter_shards(model_dir, m):
        # a complete model's shards are contiguous; a block never spans a hole
        if block and (first != block[-1][0] + block[-1][1].shape[0] or nnz + weights.nnz > block_nnz):
            flush()
            nnz = 0
        block.append((first, weights, intercept))
        nnz += weights.nnz
    flush()
    return scores.top_k(k, primary=int(first_stage.params.K))
