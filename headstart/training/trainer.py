"""Orchestration of one-vs-all training: threads over chunks of labels.

Labels are independent, so parallelism sits at the outermost loop only: a pool of
threads takes chunks of labels from a shared counter and runs the compiled
:func:`~.kernel.train_chunk`, which releases the GIL.  Every label is computed by the
same deterministic code whatever thread runs it, so the model does not depend on the
number of threads.  Finished chunks are handed to an optional ``sink`` (the sharded
model writer uses it to save work as soon as it exists).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from ..init import TrainingContext, make_initializer
from ..objective import losses
from ..objective.erm import make_problem
from ..params import TrainParams
from ..solver.newton import STATUS_NAMES
from ..init.ovap import solver_settings
from .kernel import LANES, make_lane_workspace, train_chunk
from .locality import FeatureOrder
from .stats import ITER_FIELDS, TrainingStats

log = logging.getLogger(__name__)

# Per-iteration records kept per label (iterations beyond are counted, not recorded).
MAX_RECORDED_ITERATIONS = 1000


@dataclass
class ChunkResult:
    labels: np.ndarray            # global label ids, ascending
    weights: sp.csr_matrix        # (len(labels), n_features) float32
    intercept: np.ndarray         # (len(labels),) float32
    stats: TrainingStats


def prepare_problem(X: sp.csr_matrix, params: TrainParams):
    """The kernels' view of X and the column sums (bias coordinate included)."""
    P = make_problem(X, params.bias, params.C, params.loss, params.regularize_bias)
    colsum = np.zeros(X.shape[1] + 1)
    # accumulated in float64: a float32 sum overflows for values near float32's maximum
    colsum[:-1] = np.bincount(X.indices, weights=X.data.astype(np.float64), minlength=X.shape[1])
    colsum[-1] = params.bias * X.shape[0]
    return P, colsum


def choose_lanes(n: int, d: int, threads: int, budget: float = 2.0 * 2**30) -> int:
    """8 lanes (one sweep over X serves 8 labels) unless their buffers would exceed
    ``budget`` bytes over all threads; then one lane per thread."""
    per_lane = 8 * (8 * (d + 1) + 7 * n)
    return LANES if LANES * per_lane * threads <= budget else 1


def label_chunks(labels: np.ndarray, chunk_size: int) -> list[np.ndarray]:
    return [labels[i:i + chunk_size] for i in range(0, labels.size, chunk_size)]


def train_labels(X: sp.csr_matrix, Y: sp.csr_matrix, params: TrainParams, labels: np.ndarray,
                 *, chunk_size: int | None = None, progress: Callable[[int], None] | None = None,
                 sink: Callable[[ChunkResult], None] | None = None, timing: bool = True,
                 collect: bool = True, lanes: int | None = None, locality: bool = True):
    """Train the given labels of (X, Y); X canonical float32 CSR, Y 0/1 CSR (validated).

    Returns (weights CSR (len(labels) x d), intercept, TrainingStats), rows in the order
    of ``labels`` sorted ascending.  With ``collect=False`` only the sink sees results.
    With ``locality`` the kernels run on a copy of X with features renumbered by
    frequency (see :mod:`.locality`); results are mapped back.
    """
    t_start = time.perf_counter()
    labels = np.unique(np.asarray(labels, dtype=np.int64))
    n, d = X.shape
    order = FeatureOrder.by_frequency(X) if locality else None
    if order is not None:
        X = order.to_internal(X)
    P, colsum = prepare_problem(X, params)
    Yc = sp.csc_matrix(Y)
    Yc.sort_indices()
    y_indptr = Yc.indptr.astype(np.int64)
    y_indices = Yc.indices.astype(np.int64)

    init = make_initializer(params)
    ctx = TrainingContext(P, X, Yc, params, colsum, params.effective_threads(), order)
    t0 = time.perf_counter()
    plan = init.prepare(ctx)
    prep_seconds = time.perf_counter() - t0
    S = solver_settings(params)
    d1_zero = losses.d1_at_zero(params.loss)
    cap = min(params.max_iter, MAX_RECORDED_ITERATIONS) + 1

    threads = params.effective_threads()
    if chunk_size is None:
        # big enough to keep the lanes busy, small enough to balance the threads
        chunk_size = int(min(256, max(LANES * 4, labels.size // max(4 * threads, 1))))
    threads = max(1, min(threads, -(-labels.size // chunk_size)))
    if lanes is None:
        lanes = choose_lanes(n, d, threads)
    chunks = label_chunks(labels, chunk_size)
    local = threading.local()
    results: list[ChunkResult] = []
    lock = threading.Lock()

    def run(chunk: np.ndarray) -> None:
        if not hasattr(local, "W"):
            local.W = make_lane_workspace(n, d, lanes)
            local.rec = [np.zeros((chunk_size, cap)) for _ in range(4)] + [np.zeros((chunk_size, cap), dtype=np.int64)]
        rf, ra, rs, rt, rc = local.rec
        indptr, indices, data, intercept, table = train_chunk(
            P, S, local.W, plan, colsum, y_indptr, y_indices, chunk, params.epsilon, d1_zero, params.prune,
            rf, ra, rs, rc, rt, timing)
        iters = table[:, 2].astype(np.int64)
        recs = {f: [] for f in ITER_FIELDS}
        for k in range(chunk.size):
            m = min(int(iters[k]), cap - 1) + 1
            recs["objective"].append(rf[k, :m].copy())
            recs["active_fraction"].append(ra[k, :m].copy())
            recs["step"].append(rs[k, :m].copy())
            recs["cg_steps"].append(rc[k, :m].astype(np.float64))
            recs["seconds"].append(rt[k, :m].copy())
        W = sp.csr_matrix((data, indices, indptr), shape=(chunk.size, d))
        if order is not None:
            W = order.to_original(W)
        res = ChunkResult(chunk, W, intercept, TrainingStats.from_chunks([(chunk, table, recs)]))
        if sink is not None:
            sink(res)
        with lock:
            if collect:
                results.append(res)
        if progress is not None:
            progress(chunk.size)

    if threads == 1:
        for c in chunks:
            run(c)
    else:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="headstart") as pool:
            # list() re-raises the first exception of any worker
            list(pool.map(run, chunks))

    if not collect:
        return None
    results.sort(key=lambda r: int(r.labels[0]) if r.labels.size else -1)
    weights, intercept = stack_rows(results, d)
    stats = TrainingStats.concat([r.stats for r in results])
    stats.meta.update({"init": init.name, "init_prepare_seconds": prep_seconds,
                       "wall_seconds": time.perf_counter() - t_start, "threads": threads, "lanes": lanes})
    report_problems(stats)
    return weights, intercept, stats


def stack_rows(results: list[ChunkResult], d: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """Concatenate the chunks' weights into one CSR, releasing each chunk's arrays as
    soon as they are copied, so the peak is the model plus one chunk, not twice the
    model (scipy's vstack keeps all inputs alive until the end)."""
    nnz = sum(r.weights.nnz for r in results)
    rows = sum(r.weights.shape[0] for r in results)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int32)
    data = np.empty(nnz, dtype=np.float32)
    intercept = np.empty(rows, dtype=np.float32)
    r0 = 0
    p0 = 0
    for r in results:
        W = r.weights
        k = W.shape[0]
        indptr[r0 + 1: r0 + k + 1] = W.indptr[1:] + p0
        indices[p0: p0 + W.nnz] = W.indices
        data[p0: p0 + W.nnz] = W.data
        intercept[r0: r0 + k] = r.intercept
        r0 += k
        p0 += W.nnz
        r.weights = None  # the chunk's copy is no longer needed
    return sp.csr_matrix((data, indices, indptr), shape=(rows, d)), intercept


def report_problems(stats: TrainingStats) -> None:
    """Warn, naming the labels, when the solver stopped early or a label had no positives."""
    status = stats["status"]
    for code in range(1, len(STATUS_NAMES)):
        bad = stats["label"][status == code]
        if bad.size:
            shown = ", ".join(str(x) for x in bad[:10]) + (" ..." if bad.size > 10 else "")
            log.warning("%d label(s) stopped with status %s: %s", bad.size, STATUS_NAMES[code], shown)
    empty = stats["label"][stats["n_pos"] == 0]
    if empty.size:
        shown = ", ".join(str(x) for x in empty[:10]) + (" ..." if empty.size > 10 else "")
        log.info("%d label(s) have no positive training instance (trained as all-negative): %s",
                 empty.size, shown)
