"""Labels into chunks and chunks onto threads: the orchestration every chunk kernel
shares (the Newton-CG lanes of :func:`.kernel.train_chunk`, driven by :mod:`.trainer`;
exact L1's and the dual's kernels of :mod:`.coordinate`; the shortlisted trainer).

Labels are independent, so parallelism sits at the outermost loop only: a pool of
threads takes chunks of labels from a shared counter and runs a compiled chunk kernel,
which releases the GIL.  Every label is computed by the same deterministic code whatever
thread runs it, so the model does not depend on the number of threads.  Finished chunks
become statistics and weights over the caller's features and go to an optional ``sink``
(the sharded model writer saves work as soon as it exists); the kept ones are assembled
into one model at the end.  What a chunk kernel computes is not this module's business:
it only sees ``kernel(chunk, state, records, abort_flag)``.
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

from .._threads import Abort, check_interrupt, join_pool, usable_cores, wait_all
from ..solver.newton import CONVERGED, LINE_SEARCH_FAILED, STATUS_NAMES
from .kernel import LANES, STAT_FIELDS
from . import pages
from .locality import FeatureOrder, renumber_rows
from .packed import PackedRows
from .sharing import SameProblems, solve_chunk
from .stats import _TRIM_LABELS, ITER_FIELDS, TrainingStats

#: the reports of the labels (status, no positives, restarts from zero) keep the logger name
#: they had before this module left trainer.py: users filter and route them by that name
log = logging.getLogger("headstart.training.trainer")
#: progress of numba's first compile: INFO (it is not a problem), on a logger of its own so
#: that the command line can show it without showing every INFO message
compile_log = logging.getLogger("headstart.compile")


# Per-iteration records kept per label (iterations beyond are counted, not recorded).
MAX_RECORDED_ITERATIONS = 1000


# Return malloc's free pages to the system after the set-up and after every chunk
# (glibc's malloc_trim, see pages.release_free_memory).  The kernel's per-chunk buffers
# (start vectors, sweep directions, the growing weight buffers: a few MB per chunk) come
# from the worker threads' malloc arenas, which keep what is freed; measured on
# debian-deps labels 0:5000, 2 threads, RSS at the end of training was 114 MB over the
# start without trimming and 86 MB with it (the same as with malloc's mmap threshold
# pinned at 128 KiB, i.e. nothing left to gain there).  A trim costs well under a
# millisecond per chunk.
TRIM_MALLOC = True


@dataclass
class ChunkResult:
    labels: np.ndarray            # global label ids, ascending
    weights: sp.csr_matrix        # (len(labels), n_features) float32 (PackedRows while the trainer keeps it)
    intercept: np.ndarray         # (len(labels),) float32
    stats: TrainingStats


def default_chunk_size(n_labels: int, threads: int, cores: int | None = None) -> int:
    """Labels per kernel call: big enough to keep the lanes busy -- a chunk's last labels
    run with lanes idle, ~10% of the sweeps at 125 labels a chunk with 16 lanes on
    debian-deps -- and small enough to balance the threads (at least two chunks each)
    and to save sharded work often.

    With fewer labels than two chunks of 4 x LANES per thread, the threads come first:
    two chunks per thread while each still fills the lanes, else one.  A label's solve
    is the same in any chunk (the weights are equal bit for bit), and a thread's sweep
    over X costs the same with idle lanes, so splitting a few labels among the threads
    shortens the run by up to their work per label.  The floor of 4 x LANES left 45
    labels in one chunk on one of two threads; 2026-12-02, 2 threads, medians of 5-9
    alternating runs, the same weights: medical (45 labels) in chunks of 23 instead of
    one, 1.30x (aop), 1.41x (zero), 1.29x (bias); bibtex (159) in chunks of 40 instead
    of 64, 64, 31: 1.13x (aop and zero).  The split is over the threads that have a core
    (``cores``: default :func:`usable_cores`): 17 labels with threads=64 on two cores ran
    in 17 threads, each with its workspace, 4.4x slower than in two."""
    size = int(min(256, max(LANES * 4, n_labels // max(2 * threads, 1))))
    if threads <= 1 or n_labels >= 2 * threads * LANES * 4:
        return size
    workers = max(1, min(threads, usable_cores() if cores is None else int(cores)))
    if workers == 1:
        return size    # one core: nothing to split among (two chunks would start two threads)
    per_thread = 2 * workers if n_labels >= 2 * workers * LANES else workers
    return max(1, min(size, -(-n_labels // per_thread)))


def sorted_unique(labels) -> np.ndarray:
    """The labels as a sorted int64 array without repeats; a range (the usual case) as it
    is: np.unique hashes its input, 1.5 s for 2M labels."""
    labels = np.asarray(labels, dtype=np.int64).ravel()
    if labels.size > 1 and not np.all(labels[1:] > labels[:-1]):
        labels = np.unique(labels)
    return labels


def _int64_view(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it already is what the kernels take (int64, aligned, contiguous,
    writeable: numba types a read-only or unaligned array otherwise, which is a new
    compilation), else such a copy."""
    return np.require(a, dtype=np.int64, requirements=["A", "C", "W"])


def label_columns(Y) -> tuple[sp.csc_matrix, np.ndarray, np.ndarray]:
    """(Y as CSC with sorted indices, its indptr and indices as int64) for the kernels,
    without copying what is already so and without changing the caller's Y.

    Each call used to convert, check and copy all of Y: O(label space) per call.  A Dask
    worker calls the trainer once per task on the same Y (helper-67: 2M labels, tasks of
    1,024: ~0.1 of the task's 0.28 CPU-s, about 1,950 times); its copy of Y is made so
    once (:class:`~headstart.distributed.dask_backend.TrainingArrays`), and the checks of
    a sorted CSC are cached on the matrix."""
    Yc = Y if isinstance(Y, sp.csc_matrix) else sp.csc_matrix(Y)
    if not Yc.has_sorted_indices:
        Yc = Yc.sorted_indices()     # a copy: the caller's matrix stays as it was
    return Yc, _int64_view(Yc.indptr), _int64_view(Yc.indices)


#: a chunk holds at most this many times chunk_size labels when most of them take another
#: label's result (label_chunks' ``free``): bounded so that progress, the time budget and
#: a shard's writes still come often; 2M labels, 5 of them used: `headstart train` took
#: 3.0-4.6 s with it against 15-18 s in chunks of 256 (~1 ms of Python a chunk, 7,800
#: chunks; docs/design.md)
SHARED_CHUNK_FACTOR = 64


def shared_label_chunks(labels: np.ndarray, chunk_size: int, threads: int,
                        same: SameProblems | None) -> list[np.ndarray]:
    """:func:`label_chunks`, counting only the labels a chunk must solve itself: those that
    take another's result (:mod:`.sharing`) ride along, so a label space of millions of
    ids, few of them used, is not millions / chunk_size chunks of bookkeeping."""
    free = None
    if same is not None and chunk_size > 2 * LANES:
        # at most LANES distinct shared problems, so that a chunk solves at most
        # chunk_size of its labels itself (the record arrays' rows)
        free = same.shareable(labels, LANES)
        if free is not None and 2 * np.count_nonzero(free) < labels.size:
            # a few such labels (debian-deps: 1,045 of 22,908) save little bookkeeping;
            # the chunks stay as they were (full ones to solve, the lanes' usual tails)
            free = None
    return label_chunks(labels, chunk_size - LANES if free is not None else chunk_size, threads, free=free)


def label_chunks(labels: np.ndarray, chunk_size: int, threads: int = 1,
                 free: np.ndarray | None = None, smallest: int = LANES * 4) -> list[np.ndarray]:
    """Consecutive chunks of at most ``chunk_size`` labels, shrinking towards the end
    (guided scheduling: about remaining / (2 * threads), never below ``smallest``, by
    default enough labels to fill the lanes) so that the threads finish together: with
    equal chunks, a thread that takes the last big chunk leaves the other idle for up to
    a chunk's time (~8% of the wall time for debian-deps labels 0:1000 in 4 chunks of
    250 on 2 threads).

    ``free``: a mask of labels that cost no solve of their own; they are not counted,
    and a chunk holds at most SHARED_CHUNK_FACTOR * chunk_size labels."""
    if free is not None:
        done = np.zeros(labels.size + 1, dtype=np.int64)     # labels to solve before position i
        np.cumsum(~free, out=done[1:])
        most = SHARED_CHUNK_FACTOR * chunk_size
        out, i = [], 0
        while i < labels.size:
            left = int(done[-1] - done[i])
            size = chunk_size if threads <= 1 else min(chunk_size, max(smallest, -(-left // (2 * threads))))
            # up to (not including) the label that would be one too many to solve
            j = int(np.searchsorted(done, done[i] + size, side="right")) - 1
            j = max(i + 1, min(j, i + most, labels.size))
            out.append(labels[i:j])
            i = j
        return out
    out = []
    i = 0
    while i < labels.size:
        left = labels.size - i
        size = chunk_size if threads <= 1 else min(chunk_size, max(smallest, -(-left // (2 * threads))))
        out.append(labels[i:i + size])
        i += size
    return out


def note_zero_starts(stats: TrainingStats, start: str) -> int:
    """How many labels the solver started from w = 0 because ``start`` scored above f(0)
    there (the ``zero_start`` column; solver/newton.zero_if_worse), logged when any."""
    n = int(np.count_nonzero(stats.columns.get("zero_start", ())))
    if n and 2 * n > len(stats):
        # most labels: the run is in effect a zero start, which its summary would not say
        # (helper-55: a new initialiser worse than f(0) everywhere looked like it worked)
        # an initialiser's start costs each such label a pass over X for nothing (dense
        # embeddings with aop: 1.26x the zero start's time, docs/benchmarks.md)
        hint = ("; --init zero (init='zero') skips the pass over the data each of them spent on it"
                if start.startswith("init ") else "")
        log.warning("%d of %d label(s) started from w = 0: the %s scored above f(0) there, so this run is "
                    "mostly a zero start (their statistics show f_init = f(0)); that start does not suit this "
                    "data and loss%s", n, len(stats), start, hint)
    elif n:
        log.info("%d of %d label(s) started from w = 0: the %s scored above f(0) there (e.g. one feature value "
                 "dwarfing the rest); their statistics show f_init = f(0)", n, len(stats), start)
    return n


class Restart:
    """Labels whose solve never left its start -- the line search failed at the first
    step, so the result *is* the start -- are solved again from w = 0.

    A start can be far worse than zero: ``mean`` with the logistic loss scores every
    instance at about -||xbar||^2, the loss saturates, the Hessian along an unregularised
    bias is nearly 0 and the Newton step along it is so long that 20 halvings never give
    a decrease (scene: all 6 labels stuck at f = 9,050 against f(0) = 839, P@1 16.7).
    The problem is convex and the start only decides the path, so zero (LIBLINEAR's
    start, from which the first Newton step is always well scaled) gives the minimiser
    the run asked for.  Done here, around the kernel (a second kernel call with the zero
    plan, compiled at the first restart only), so that a run that needs none computes
    exactly what it did before."""

    def __init__(self, kernel: Callable, compile_zero: Callable[[], float]):
        self.kernel = kernel       # kernel(labels, ...) from w = 0, returns the kernel's six results
        self.compile_zero = compile_zero   # compiles it, returns the seconds (reported as compiling)
        self.compile_seconds = 0.0
        self.count = 0
        self._lock = threading.Lock()
        self._compiled = False

    def solve(self, labels: np.ndarray, *args) -> tuple:
        """The kernel's results for ``labels`` from zero (compiled at the first call);
        counts the labels it started."""
        with self._lock:
            if not self._compiled:
                self.compile_seconds = self.compile_zero()
                self._compiled = True
        out = self.kernel(labels, *args)
        with self._lock:
            self.count += int(out[5])
        return out

    def report(self, init_name: str) -> None:
        if self.count:
            log.warning("%d label(s) did not leave the start of init %r (the line search failed at the first "
                        "step, e.g. a saturated logistic loss with an unregularised bias): solved again from zero",
                        self.count, init_name)

    def apply(self, chunk, indptr, indices, data, intercept, stats, state, rec, abort_flag,
              stats_of: Callable[[np.ndarray, np.ndarray, tuple | None], TrainingStats]):
        """A chunk's results with its stuck labels solved again (``stats_of(labels, table,
        records)``: the statistics of a kernel's table, as :func:`run_chunks` makes them)."""
        idx = stuck_at_start(stats["status"], stats["iterations"], stats["f_init"], stats["f_final"])
        if idx.size == 0:
            return indptr, indices, data, intercept, stats
        r_indptr, r_indices, r_data, r_intercept, r_table, started = self.solve(chunk[idx], state, rec, abort_flag)
        idx = idx[:started]
        if idx.size == 0:
            return indptr, indices, data, intercept, stats
        redone = stats_of(chunk[idx], r_table, rec)
        keep = np.ones(chunk.size, dtype=np.bool_)
        keep[idx] = False
        stats = TrainingStats.concat([stats.take(np.flatnonzero(keep)), redone])
        indptr, indices, data, intercept = replace_rows((indptr, indices, data, intercept), idx,
                                                        (r_indptr, r_indices, r_data, r_intercept))
        return indptr, indices, data, intercept, stats


def stuck_at_start(status: np.ndarray, iterations: np.ndarray, f_init: np.ndarray, f_final: np.ndarray) -> np.ndarray:
    """Positions of the labels whose solve stopped at its start on a failed line search
    (:class:`Restart`)."""
    return np.flatnonzero((status == LINE_SEARCH_FAILED) & (iterations <= 1) & (f_final == f_init))


def replace_rows(rows: tuple, idx: np.ndarray, new: tuple) -> tuple:
    """A kernel's chunk results (indptr, indices, data, intercept) with the rows at
    positions ``idx`` replaced by the rows of ``new`` (the same four, one row per idx).

    Copied by runs: the rows between two replaced ones in one slice each, so the cost is
    one pass over the entries and a Python step per replaced row (a few labels of a
    chunk), with no position array per entry (scipy's vstack and row indexing made
    three, ~3 MB a chunk on debian-deps)."""
    indptr, indices, data, intercept = rows
    r_indptr, r_indices, r_data, r_intercept = new
    k = indptr.size - 1
    idx = np.asarray(idx, dtype=np.int64)
    order = np.argsort(idx, kind="stable")
    lens = np.diff(indptr).astype(np.int64)
    lens[idx] = np.diff(r_indptr)[:idx.size]
    out_indptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(lens, out=out_indptr[1:])
    out_indices = np.empty(int(out_indptr[-1]), dtype=indices.dtype)
    out_data = np.empty(int(out_indptr[-1]), dtype=data.dtype)

    def copy(dst0, src_indices, src_data, a, b):
        out_indices[dst0:dst0 + b - a] = src_indices[a:b]
        out_data[dst0:dst0 + b - a] = src_data[a:b]

    prev = 0                                   # first old row not yet copied
    for j in order:
        row = int(idx[j])
        copy(out_indptr[prev], indices, data, indptr[prev], indptr[row])       # old rows [prev, row)
        copy(out_indptr[row], r_indices, r_data, r_indptr[j], r_indptr[j + 1])
        prev = row + 1
    copy(out_indptr[prev], indices, data, indptr[prev], indptr[k])
    intercept = np.array(intercept, copy=True)
    intercept[idx] = r_intercept[:idx.size]
    return out_indptr, out_indices, out_data, intercept


def run_chunks(chunks: list[np.ndarray], threads: int, new_state: Callable[[], tuple], kernel: Callable, *,
               cap: int, reg_scale: float, trajectories: bool, d_out: int, order: FeatureOrder | None,
               sink: Callable[[ChunkResult], None] | None, collect: bool, progress: Callable[[int], None] | None,
               deadline: float, same: SameProblems | None = None, restart: Restart | None = None,
               fields: tuple[str, ...] = STAT_FIELDS,
               name: str = "headstart") -> tuple[list[ChunkResult], list[TrainingStats]]:
    """Train ``chunks`` of labels in ``threads`` threads (named ``name``-N): the
    orchestration every chunk kernel shares (the Newton-CG lanes of
    :func:`.kernel.train_chunk`, exact L1's and the dual's :func:`.coordinate.train_chunk`,
    the shortlisted trainer's :func:`headstart.shortlist.training.train_chunk`).

    A thread takes chunks from a shared counter, makes its state once (``new_state()``
    -> (state, record arrays of :func:`make_records`, or None for a kernel that records
    no trajectory)) and calls ``kernel(chunk, state, records, abort_flag)``, which
    returns (indptr, indices, data, intercept, stats table, started) as the kernels do;
    the table's columns are ``fields``.  Each finished chunk becomes statistics and
    weights over the ``d_out`` original features, goes to ``sink``, and (``collect``) is
    kept packed.  Returns (the kept chunks, or [] ; the statistics of
    the chunks not kept).  No chunk starts after ``deadline``; a worker's exception (or
    Ctrl-C) sets the abort flag the kernels read, and is raised once all have stopped.
    With ``same``, labels of a chunk that pose the same problem as an earlier one take
    its result instead of a solve of their own (:mod:`.sharing`).  With ``restart``,
    labels that never left their start (:class:`Restart`) are solved again from zero
    before the chunk is handed on."""
    results: list[ChunkResult] = []
    stats_parts: list[TrainingStats] = []
    lock = threading.Lock()
    trim = TRIM_MALLOC
    if trim:
        pages.release_free_memory()
    next_chunk = iter(range(len(chunks)))
    abort = Abort()   # Ctrl-C or a failed worker; the kernels read abort.flag between passes over X

    def stats_of(labels: np.ndarray, table: np.ndarray, rec) -> TrainingStats:
        return chunk_stats(labels, table, rec, cap, reg_scale, fields)

    def run_chunk(chunk: np.ndarray, state, rec) -> None:
        if deadline and time.perf_counter() > deadline:
            return
        copy_of = same.copies(chunk) if same is not None else None
        indptr, indices, data, intercept, table, started, spread = solve_chunk(kernel, chunk, copy_of, state, rec,
                                                                               abort.flag)
        if started < chunk.size:
            chunk = chunk[:started]      # the time budget ran out inside this chunk
            if started == 0:
                return
        if spread is None:
            stats = stats_of(chunk, table, rec)
        else:
            rows, own = spread
            stats = stats_of(chunk[own], table, rec).spread(rows, chunk, own)
            with lock:
                same.copied += int(np.count_nonzero(~own))
        if restart is not None:
            indptr, indices, data, intercept, stats = restart.apply(chunk, indptr, indices, data, intercept, stats,
                                                                    state, rec, abort.flag, stats_of)
        if not trajectories:
            stats = stats.without_trajectories()
        W = chunk_weights(indptr, indices, data, d_out, order, keep=collect)
        del indptr, indices, data
        if sink is not None:
            sink(ChunkResult(chunk, W, intercept, stats))
        if collect:
            # kept until the model is assembled: column indices packed (see .packed)
            kept = ChunkResult(chunk, PackedRows.pack(W), intercept, stats)
            with lock:
                results.append(kept)
        else:
            with lock:
                stats_parts.append(stats)
        del W
        if trim:
            pages.release_free_memory()
        if progress is not None:
            progress(chunk.size)

    def worker() -> None:
        made = False
        try:
            while not abort.is_set():
                with lock:
                    i = next(next_chunk, None)
                if i is None:
                    break
                if not made:
                    state, rec = new_state()
                    made = True
                run_chunk(chunks[i], state, rec)
        except BaseException:
            abort.set()   # the other threads give up within a pass, not after their chunk
            raise

    run_in_threads(worker, threads, name, stop=abort.set)
    return results, stats_parts


# (_TRIM_LABELS: from how many labels the freed chunk statistics are worth handing back,
# ~136 bytes per label, 13 MiB at the threshold: malloc_trim walks every arena, ~0.2 ms
# even on a small heap, 1% of a small problem's fit -- tuning and cross-validation fit many)


def assemble(results: list[ChunkResult], stats_parts: list[TrainingStats], collect: bool, d: int,
             fields: tuple[str, ...] = STAT_FIELDS,
             threads: int = 1) -> tuple[sp.csr_matrix | None, np.ndarray | None, TrainingStats]:
    """(weights, intercept, statistics) of the chunks :func:`run_chunks` returned, rows by
    label (weights None without ``collect``); ``results`` is emptied as it is copied, by
    ``threads`` threads, and ``stats_parts`` once concatenated.  No chunk trained:
    statistics of no label, with the kernel's columns ``fields``.

    The chunks' statistics were made in the worker threads, whose malloc arenas keep
    them when freed: they are handed back to the system after the concatenation, so
    that what follows (the model's file written) does not come on top of both copies
    (2M labels: 15 MiB above the concatenation's peak, headstart.resources)."""
    if collect:
        results.sort(key=lambda r: int(r.labels[0]) if r.labels.size else -1)
        weights, intercept = stack_rows(results, d, threads)
        stats_parts = [r.stats for r in results]
        results.clear()
    else:
        weights = intercept = None
    if not stats_parts:
        return weights, intercept, TrainingStats.empty(fields)
    stats = TrainingStats.concat(stats_parts, consume=True)    # (empties stats_parts)
    if len(stats) >= _TRIM_LABELS:
        pages.release_free_memory()
    return weights, intercept, stats


def compile_call(what: str, call: Callable[[], object]) -> float:
    """Seconds of ``call()``: a chunk kernel called with no label, before the threads
    start, so that numba compiles it for this run's types (first run) or loads it from
    its cache before the clock of training starts -- and in the main thread: a compile
    in a worker could not be interrupted (Ctrl-C waited for it to end), and its ~20 s
    were reported as training.  Loading takes well under a second; past that, numba is
    compiling: ``what`` (the kernels' name) is logged then, instead of looking stuck.  A
    Ctrl-C while compiling is raised when the call returns (see _threads.INTERRUPTS)."""
    t0 = time.perf_counter()
    note = threading.Timer(1.0, lambda: compile_log.info(
        "compiling headstart's %s for this run's types (first run only; numba caches them) ...", what))
    note.daemon = True
    note.start()
    try:
        call()
    finally:
        note.cancel()
    check_interrupt()
    seconds = time.perf_counter() - t0
    if seconds > 1.0:
        compile_log.debug("compiled headstart's %s in %.1f s (first run only: numba caches them)", what, seconds)
    return seconds


def run_in_threads(worker: Callable[[], None], threads: int, name: str = "headstart",
                   stop: Callable[[], None] | None = None) -> None:
    """worker() in ``threads`` threads; the first exception of a worker is raised here
    once all have stopped (workers stop on a shared flag).

    The workers run in pool threads even when there is one, and this (the main) thread
    only waits: a compiled kernel holds no interpreter state, so Ctrl-C is seen only
    here, at once.  Then ``stop()`` tells the workers to give up (the kernels check an
    abort flag between passes over X) and this waits for them, instead of for every
    chunk left: a Ctrl-C used to wait for the whole remaining run (64 s of a 2-thread
    debian-deps run; minutes per chunk from a zero start at the Amazon-670K shape)."""
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
    try:
        wait_all([pool.submit(worker) for _ in range(threads)], stop)
    finally:
        join_pool(pool)


def warmup_records(chunk_size: int, cap: int):
    """Record arrays of the same numba type as ``make_records(chunk_size, cap)``, for a
    compiling call with no label (the smallest such arrays)."""
    return make_records(min(chunk_size, 2), min(cap, 2))


def make_records(chunk_size: int, cap: int):
    """The per-iteration record arrays of one thread: (chunk_size, cap) each, objective,
    active fraction, step, seconds (float64) and CG steps (int64).

    Stored iteration-major (Fortran order: entry [k, it] at ``it * chunk_size + k``),
    so the pages written are those of the iterations actually run, for all labels of a
    chunk together, not one page per label and quantity: on debian-deps (256 labels a
    chunk, at most 1001 iterations recorded) label-major records put ~5 MB per thread
    in memory for trajectories of ~7 iterations; iteration-major ones ~0.1 MB.  The
    kernel only ever indexes ``rec[k, it]`` (bounds checked against the width), so the
    layout changes nothing it computes.

    At least two rows: numba types a Fortran-order array with one row or one column as
    C order (numpy flags it as both), so a one-label chunk (a one-label run, or
    ``chunk_size=1``) would compile every training kernel a second time (~12 s each),
    for a spare row of ``cap`` values.  The width is the caller's: the coordinate
    solvers record (and evaluate their objective for) as many iterations as it allows.
    """
    def arr(dtype):
        return pages.zeros((cap, max(chunk_size, 2)), dtype).T
    return arr(np.float64), arr(np.float64), arr(np.float64), arr(np.float64), arr(np.int64)


def chunk_stats(chunk: np.ndarray, table: np.ndarray, rec, cap: int, reg_scale: float = 1.0,
                fields: tuple[str, ...] = STAT_FIELDS) -> TrainingStats:
    """TrainingStats of one chunk from the kernel's table (columns ``fields``) and the
    record arrays: the trajectories go straight into flat arrays (no array per label and
    quantity).  ``rec`` None: the kernel records none (every trajectory empty).

    The kernels minimise f / reg_scale (see objective/regularizers/base.py): objective
    values and gradient norms are reported multiplied back (only the recorded part of
    the trajectories is touched, not every page of the record arrays)."""
    k = chunk.size
    if reg_scale != 1.0:
        table[:, [4, 5, 6, 7, 8, 9]] *= reg_scale
    if rec is None:
        return TrainingStats.from_table(chunk, table, np.zeros(k, dtype=np.int64),
                                        {f: np.zeros(0) for f in ITER_FIELDS}, fields=fields)
    rf, ra, rs, rt, rc = rec
    lengths = np.minimum(table[:, 2].astype(np.int64), cap - 1) + 1
    top = int(lengths.max()) if k else 0
    mask = np.arange(top)[None, :] < lengths[:, None]
    flat = {"objective": rf[:k, :top][mask], "active_fraction": ra[:k, :top][mask], "step": rs[:k, :top][mask],
            "cg_steps": rc[:k, :top][mask].astype(np.float64), "seconds": rt[:k, :top][mask]}
    if reg_scale != 1.0:
        flat["objective"] *= reg_scale
    return TrainingStats.from_table(chunk, table, lengths, flat, fields=fields)


def chunk_weights(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, d: int,
                  order: FeatureOrder | None, keep: bool = True) -> sp.csr_matrix:
    """The kernel's rows of a chunk as CSR over the original features.  ``keep`` (the
    trainer keeps the chunk until the model is assembled): its arrays in mappings of
    their own (:mod:`.pages`), so that freed chunks are returned to the system while the
    model is assembled, instead of staying in the worker thread's malloc arena.  Else
    (the chunk only goes to a sink, then is dropped) the kernel's arrays themselves,
    renumbered in place: no copy of the chunk beside the kernel's."""
    if not keep:
        if order is not None:
            renumber_rows(order.perm, indptr, indices, data, d, indices, data)    # rows sorted
        W = sp.csr_matrix((data, indices, indptr), shape=(indptr.size - 1, d))
        W.has_sorted_indices = order is not None
        return W
    if order is None:
        return sp.csr_matrix((pages.copy(data), pages.copy(indices), indptr), shape=(indptr.size - 1, d))
    idx = pages.empty(indices.size, np.int32)
    values = pages.empty(data.size, data.dtype)
    renumber_rows(order.perm, indptr, indices, data, d, idx, values)    # rows sorted
    W = sp.csr_matrix((values, idx, indptr), shape=(indptr.size - 1, d))
    W.has_sorted_indices = True
    return W


# The model's arrays are fresh memory, and the copy into them is mostly the page faults
# that map it (on this 2-core VM 40 MB of fresh int32 took 0.18-0.21 s to fill from one
# thread, 0.09-0.12 s from two; shortlisted training of debian-deps spent 0.22-0.27 s of
# its ~2 s in this copy): with several threads, each copies whole chunks into its own
# slices, and the pages fault in parallel.
def stack_rows(results: list[ChunkResult], d: int, threads: int = 1) -> tuple[sp.csr_matrix, np.ndarray]:
    """Concatenate the chunks' weights into one CSR, releasing each chunk's arrays as
    soon as they are copied, so the peak is the model plus ``threads`` chunks, not twice
    the model (scipy's vstack keeps all inputs alive until the end).  That only holds
    when a freed chunk is returned to the system: chunks live in mappings of their own
    (:func:`chunk_weights`); with malloc'ed chunks the debian-deps peak was the model
    twice (94.5 MB more RSS during this copy).  Packed chunks (:class:`.PackedRows`)
    decode their indices straight into the model's array."""
    nnz = sum(r.weights.nnz for r in results)
    rows = sum(r.weights.shape[0] for r in results)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int32)
    data = np.empty(nnz, dtype=np.float32)
    intercept = np.empty(rows, dtype=np.float32)
    starts = []           # (first row, first weight) of every chunk
    r0 = p0 = 0
    for r in results:
        starts.append((r0, p0))
        r0 += r.weights.shape[0]
        p0 += r.weights.nnz
    lock = threading.Lock()
    released = [0]

    def copy(i: int) -> None:
        r = results[i]
        r0, p0 = starts[i]
        W = r.weights
        k = W.shape[0]
        indptr[r0 + 1: r0 + k + 1] = W.indptr[1:] + p0
        if isinstance(W, PackedRows):
            W.indices_into(indices[p0: p0 + W.nnz])
            W.data_into(data[p0: p0 + W.nnz])
        else:
            indices[p0: p0 + W.nnz] = W.indices
            data[p0: p0 + W.nnz] = W.data
        intercept[r0: r0 + k] = r.intercept
        r.weights = None  # the chunk's copy is no longer needed
        with lock:
            released[0] += 8 * W.nnz
            trim = released[0] > 32 << 20
            if trim:
                released[0] = 0
        del W
        if trim:
            # small chunk arrays (below pages.MIN_BYTES) came from the workers' malloc
            # arenas, which keep what the main thread frees: hand them back as we go
            pages.release_free_memory()

    threads = max(1, min(int(threads), len(results)))
    if threads == 1:
        for i in range(len(results)):
            copy(i)
    else:
        # chunks in order, each thread taking the next: at most `threads` chunks are
        # being copied at any time
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="headstart-assemble") as pool:
            for f in [pool.submit(copy, i) for i in range(len(results))]:
                f.result()
    pages.release_free_memory()
    return sp.csr_matrix((data, indices, indptr), shape=(rows, d)), intercept


def _first_ids(ids: np.ndarray) -> str:
    """The first ten of ``ids``, comma separated, "..." when there are more."""
    return ", ".join(str(x) for x in ids[:10]) + (" ..." if ids.size > 10 else "")


def pruning_meta(params, rows: int, x_nnz: int | None = None) -> dict:
    """What :func:`note_all_pruned` reads from a run's ``stats.meta``, for every trainer
    to record alike: the instances trained on and the absolute threshold ``--prune``
    applied -- 0 under ``--sparsify``, which replaces it with a threshold per label that
    keeps the objective within that many percent (an all-pruned label there is no
    matter of the features' scale); where known, the feature values X holds (``x_nnz``:
    with none there is no weight to prune, and the data's own warning has said so)."""
    meta = {"rows": int(rows), "prune": 0.0 if params.sparsify > 0 else float(params.prune)}
    if x_nnz is not None:
        meta["x_nnz"] = int(x_nnz)
    return meta


def note_all_pruned(stats: TrainingStats) -> int:
    """Warn when pruning left most labels that have positives and negatives without a
    weight (only the bias): ``--prune`` is an absolute threshold meant for unit-norm
    rows, and on features of a large scale the weights are all below it.  Such a model
    scores every row alike, silently (helper-78: features x 1e30, every weight of 20
    labels pruned, P@3 38.6 against 47.4 with --prune 0).  Needs ``rows`` and ``prune``
    in ``stats.meta`` (:func:`pruning_meta`); returns how many labels.

    A label needs a weight when its own problem has both classes.  Where the problems
    differ by label -- shortlisted training, a tree's nodes: a ``rows`` column, each
    label's sub-problem -- that column decides, not the run's instances: a label whose
    shortlisted rows are all positives learns w = 0 at any threshold (report_problems
    names those apart), and counted here it would blame --prune for them.

    Where the solution's own nonzeros are known (``nnz_unpruned``: exact L1, whose
    optimum is exactly sparse) only labels that had weights before pruning count as
    pruned; labels whose optimum itself has no weight are said apart -- there a lower
    --prune changes nothing."""
    prune = stats.meta.get("prune", 0.0)
    rows = stats["rows"] if "rows" in stats else stats.meta.get("rows")
    if rows is None or "nnz" not in stats or not len(stats) or stats.meta.get("x_nnz") == 0:
        return 0
    n_pos = stats["n_pos"]
    mixed = (n_pos > 0) & (n_pos < rows)    # a label on no row or on every row needs no weight
    n_mixed = int(np.count_nonzero(mixed))
    bare = mixed & (stats["nnz"] == 0)
    if "nnz_unpruned" in stats:
        empty = bare & (stats["nnz_unpruned"] == 0)
        bare &= ~empty
        empty &= stats["status"] == CONVERGED     # (a solver that stopped early is reported by its status)
        n_empty = int(np.count_nonzero(empty))
        if n_empty and 2 * n_empty > n_mixed:
            log.warning("%d of %d label(s) with positives and negatives have no weight but the bias at the "
                        "solver's optimum (%s): they score every row alike.  The regulariser outweighs the loss "
                        "there: normalise the rows (--normalize, normalize=True) if the features are far from unit "
                        "scale, or raise C", n_empty, n_mixed, _first_ids(stats["label"][empty]))
    if not prune:
        return 0
    n_bare = int(np.count_nonzero(bare))
    if n_bare and 2 * n_bare > n_mixed:
        log.warning("%d of %d label(s) with positives and negatives kept no weight but the bias after pruning "
                    "(|w| < %g, --prune / prune=): they score every row alike (%s).  The threshold is absolute, meant for "
                    "unit-norm rows: normalise the rows (--normalize, normalize=True) if the features are far from "
                    "unit scale, or lower --prune / prune= (0 disables it)", n_bare, n_mixed, prune, _first_ids(stats["label"][bare]))
    return n_bare


def report_problems(stats: TrainingStats) -> None:
    """Warn, naming the labels, when the solver stopped early or a label had no positives."""
    status = stats["status"]
    for code in range(1, len(STATUS_NAMES)):
        bad = stats["label"][status == code]
        if bad.size:
            shown = _first_ids(bad)
            log.warning("%d label(s) stopped with status %s: %s", bad.size, STATUS_NAMES[code], shown)
    empty = stats["label"][stats["n_pos"] == 0]
    if empty.size:
        shown = _first_ids(empty)
        log.info("%d label(s) have no positive training instance (trained as all-negative): %s",
                 empty.size, shown)
    if "rows" in stats and stats.meta.get("mode") != "tree":
        # shortlisted training: a label whose rows are all positives learns w = 0 and a bias
        # of +1 (unregularised), so it scores +1 wherever it is a candidate, above most
        # trained labels (helper-59: 120 of debian-deps' 22,908 labels with the default
        # first stage, 220 of delicious' 983 at K = 30, never said)
        alone = stats["label"][(stats["rows"] == stats["n_pos"]) & (stats["n_pos"] > 0)]
        if alone.size:
            shown = _first_ids(alone)
            log.warning("%d label(s) had no negative among their shortlisted rows (trained on positives only: "
                        "they score high wherever they are a candidate): %s; a larger K, or a first stage "
                        "that fills its candidates, gives them negatives", alone.size, shown)
    note_all_pruned(stats)
    copied = int(stats.meta.get("shared_solves", 0))
    if copied:
        log.info("%d label(s) without positives (or negatives) took the result of an equal one of their chunk "
                 "(the same problem: one solve, bit for bit theirs); their statistics repeat that solve's", copied)
