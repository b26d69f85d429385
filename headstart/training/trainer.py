"""One-vs-all training with the Newton-CG lanes: :func:`train_labels`, the entry point of
every caller (the estimator, the command line, sharded and Dask training).

It prepares the kernels' view of X, the initialiser's plan and the per-label costs,
compiles the chunk kernel for this run's types before its clock starts, decides lanes
per thread (:mod:`.budget`) and hands chunks of labels to :func:`.chunks.run_chunks`,
which runs :func:`~.kernel.train_chunk` on threads.  Exact L1 and the dual have chunk
kernels of their own (:mod:`.coordinate`), dispatched from here.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import numpy as np
import scipy.sparse as sp

from .._threads import Abort, warn_if_oversubscribed
from .. import postproc
from ..init import TrainingContext, make_initializer
from ..objective import losses, weighting
from ..objective.erm import canonical_rows
from ..errors import ParameterError
from ..params import TrainParams, method_of
from ..init.zero import ZeroPlan
from ..solver.newton import settings
from .budget import plan_lanes, share_lanes, team_groups, use_groups
from .chunks import (MAX_RECORDED_ITERATIONS, ChunkResult, Restart, assemble, compile_call, default_chunk_size,
                     label_columns, make_records, note_zero_starts, pruning_meta, report_problems, run_chunks,
                     shared_label_chunks, sorted_unique, warmup_records)
from .kernel import (HALF_LANES, LANES, N_STATS, TEAM_SYNC_WORDS, make_group, make_lane_workspace, prepare_problem,
                     train_chunk)
from . import pages
from .locality import FeatureOrder
from .sharing import SameProblems
from .team import TEAM_THREADS, make_team_state, member, run_team, team_sizes

log = logging.getLogger(__name__)


def train_labels(X: sp.csr_matrix, Y: sp.csr_matrix, params: TrainParams, labels: np.ndarray,
                 *, chunk_size: int | None = None, progress: Callable[[int], None] | None = None,
                 sink: Callable[[ChunkResult], None] | None = None, timing: bool = True,
                 collect: bool = True, lanes: int | None = None, locality: bool = True, inplace: bool = False,
                 trajectories: bool = True, groups: bool | None = None, internal: FeatureOrder | None = None,
                 shared: bool | int | None = None):
    """Train the given labels of (X, Y); X canonical float32 CSR, Y 0/1 CSR (validated).

    Returns (weights CSR (len(labels) x d), intercept, TrainingStats), rows in the order
    of ``labels`` sorted ascending.  With ``collect=False`` only the sink sees the
    weights: (None, None, TrainingStats) (statistics of the labels trained, ascending).
    With ``locality`` the kernels run on X with features renumbered by frequency (see
    :mod:`.locality`); results are mapped back.  The renumbered X is a copy, unless
    ``inplace``: then the caller's X is renumbered in place for the time of training and
    restored bit for bit afterwards (also on errors) -- one copy of X less, for callers
    that own X and do not read it meanwhile (the command line, preprocessed data).
    Without ``trajectories`` the statistics keep the per-label scalars only (see
    :meth:`TrainingStats.without_trajectories`).  ``lanes`` and ``groups`` (direction
    groups, 16 lanes only) default to what :func:`.budget.choose_lanes` and :func:`.budget.use_groups`
    decide; ``shared``: the threads share 16 lanes per team (:mod:`.team`), True in
    teams of up to :data:`.team.TEAM_THREADS` threads, an int in teams of up to that
    many (default: :func:`.budget.share_lanes` decides, from the lane budget and the
    start).
    None of them changes the weights, bit for bit.  ``internal``: X is already in the
    kernels' order, renumbered by this full-form :class:`FeatureOrder` (a Dask worker's
    copy, renumbered once when it arrived and shared by its tasks); the same weights.

    Memory (issue 4: peak at most 1.5 x (data + model)): the big buffers -- the
    renumbered X, the lane workspaces, the records, every chunk's weights -- live in
    their own mappings (:mod:`.pages`), so what is freed is returned at once; a thread
    drops its workspace as soon as no chunk is left for it; the model is assembled
    chunk by chunk, releasing each chunk as it is copied (see :func:`.chunks.stack_rows`).
    """
    t_start = time.perf_counter()
    if shared is not None and not isinstance(shared, (bool, np.bool_)) and (
            not isinstance(shared, (int, np.integer)) or shared < 1):
        # (helper-120: -1 and 1.5 were taken silently, "yes" failed in int())
        raise ParameterError(f"shared: None, True, False or the most threads per team (an int >= 1), got {shared!r}")
    # the kernels need sorted, unique indices in every row (erm.canonical_rows); the
    # renumbering below no longer sorts a caller's rows where it is the identity
    X = canonical_rows(X)
    kw = dict(chunk_size=chunk_size, progress=progress, sink=sink, timing=timing, collect=collect, lanes=lanes,
              groups=groups, trajectories=trajectories, d_out=X.shape[1], shared=shared)
    if internal is not None:
        if internal.keys is not None:   # the compact form has no position for unseen features
            raise ValueError("train_labels: internal must be a full-form FeatureOrder")
        return _train(internal.narrow(X) if narrows(params) else X, Y, params, labels, internal, t_start, **kw)
    order = FeatureOrder.by_frequency(X, compact=narrows(params)) if locality else None
    if order is not None and order.is_identity(X.shape[1]):
        # features already in frequency order, every one used (dense features: each
        # occurs in every row): renumbering would change nothing but cost two passes
        # over X and a sort of every row (0.4 s at 20000 x 768)
        order = None
    if order is None:
        return _train(X, Y, params, labels, None, t_start, **kw)
    # the kernels see only the features that occur (locality.py), unless the start may
    # weigh the others
    narrow = order.narrow if narrows(params) else (lambda M: M)
    if not inplace:
        return _train(narrow(order.to_internal(X)), Y, params, labels, order, t_start, **kw)
    order.renumber_inplace(X)
    try:
        return _train(narrow(X), Y, params, labels, order, t_start, **kw)
    finally:
        order.restore_inplace(X)


def narrows(params: TrainParams) -> bool:
    """Whether training runs on the features that occur only (:mod:`.locality`): every
    start but a saved model's is 0 on a feature that never occurs."""
    return params.init != "pretrained"


def _train(X, Y, params, labels, order, t_start, *, chunk_size, progress, sink, timing, collect, lanes,
           trajectories, groups, d_out, shared):
    """train_labels on X in the kernels' feature order (``order`` maps it back to the
    ``d_out`` features of the caller's X)."""
    if method_of(params) != "newton":
        # exact L1 (coordinate descent over X's columns) or the dual (over its rows): their
        # own chunk kernels
        from . import coordinate

        return coordinate.train(X, Y, params, labels, order, t_start, chunk_size=chunk_size, progress=progress,
                                sink=sink, timing=timing, collect=collect, trajectories=trajectories, d_out=d_out)
    labels = sorted_unique(labels)
    n, d = X.shape
    x_nnz = X.nnz
    P, colsum = prepare_problem(X, params)
    Yc, y_indptr, y_indices = label_columns(Y)

    init = make_initializer(params)
    ctx = TrainingContext(P, X, Yc, params, colsum, params.effective_threads(), order, labels)
    t0 = time.perf_counter()
    plan = init.prepare(ctx)
    prep_seconds = time.perf_counter() - t0
    cost_scale = ctx.cost_scale
    if params.weighting == "none":
        cost_pos = cost_neg = np.zeros(0)   # every cost 1 (no per-label arrays)
    else:
        cost_pos, cost_neg = weighting.label_costs(params, np.diff(Yc.indptr), n)
    del ctx, Yc
    S = settings(params)
    post = postproc.make(params)
    d1_zero = losses.get(params.loss).d1_at_zero(params)
    deadline = (t_start + params.timeout) if params.timeout > 0 else 0.0
    cap = min(params.max_iter, MAX_RECORDED_ITERATIONS) + 1    # >= 2: max_iter >= 1

    threads = asked = params.effective_threads()
    if chunk_size is None:
        chunk_size = default_chunk_size(labels.size, threads)
    threads = max(1, min(threads, -(-labels.size // chunk_size)))
    budget = None
    planned = lanes is None
    if planned:
        lanes, budget = plan_lanes(n, d, threads)
    mines = losses.get(params.loss).mines
    # the teams have as many threads as asked, however few the chunks (fewer chunks than
    # teams: fewer, bigger teams, team_sizes)
    team_size = min(asked, labels.size)
    if shared is None:
        shared = planned and share_lanes(n, d, team_size, lanes, budget,
                                         use_groups(LANES, init.sparse_start, mines) if groups is None else groups,
                                         nnz=x_nnz, mode=params.share_lanes)
        if shared and lanes < LANES:
            log.info("lanes: %d shared by the %d threads in teams of up to %d (%d / thread would exceed the "
                     "lane budget of %.1f GiB)", LANES, team_size, int(shared),
                     LANES if lanes == HALF_LANES else HALF_LANES, budget / 2**30)
    team_threads = 0
    if shared and team_size > 1:
        # teams of up to TEAM_THREADS threads (or the size the budget allows): one worker
        # per team takes chunks as a lone thread would, the team's threads share its lanes
        # (True, numpy's too: teams of TEAM_THREADS; an int: teams of up to that many)
        per_team = TEAM_THREADS if isinstance(shared, (bool, np.bool_)) else int(shared)
        team_threads, lanes = team_size, LANES
        threads = len(team_sizes(team_size, size=per_team))
        # each thread groups the lanes it takes (docs/design.md, "Direction groups in a team")
        groups = team_groups(n, d, team_size, budget,
                             use_groups(LANES, init.sparse_start, mines) if groups is None else bool(groups),
                             per_team)
        # (chunks of a lone thread's size: the team's passes take 1 / team_threads of a
        # lone thread's, so the last passes of a chunk, where lanes run out of labels,
        # cost it the same share of the time; and one chunk's weights are in flight,
        # not one per thread -- chunks of team_threads x the labels took 1.3x the peak
        # memory of lone threads on the AmazonCat-13K shape at scale 0.1, 200 labels)
    elif planned and lanes < LANES:
        # the user should know: 8 lanes cost ~3%, one lane several times the time
        (log.info if lanes == HALF_LANES else log.warning)(
            "lanes per thread: %d instead of %d (labels per pass over X): the lane buffers of %d "
            "thread(s) would exceed the lane budget of %.1f GiB (half the memory available)%s",
            lanes, LANES, threads, budget / 2**30,
            "" if lanes == HALF_LANES else "; training is several times slower -- fewer threads keep the lanes")
    if groups is None:
        groups = use_groups(lanes, init.sparse_start, mines)
    groups = bool(groups) and lanes == LANES
    # labels without positives (negatives) of equal costs: one solve per chunk -- when
    # the start is each label's own row (a pretrained model's), of equal rows only
    starts = None if init.label_free else init.start_rows(plan)
    same = SameProblems(y_indptr, n, cost_pos, cost_neg, starts) if init.label_free or starts is not None else None
    del starts
    chunks = shared_label_chunks(labels, chunk_size, threads, same)
    threads = max(1, min(threads, len(chunks)))
    sizes = team_sizes(team_threads, len(chunks), per_team) if team_threads else []
    teams = len(sizes)
    threads = teams or threads
    lock = threading.Lock()      # the workers take the teams' sizes (new_state)
    warn_if_oversubscribed(team_threads or threads, log)
    # Compile (first run) or load (later runs) the kernels for these types before the
    # clock of training starts: numba compiles the whole call graph of train_chunk at its
    # first call, which took ~20 s on the first bibtex run and was reported as training.
    compile_seconds = compile_kernels(P, S, plan, post, colsum, y_indptr, y_indices, params, d1_zero, cost_scale,
                                      cost_pos, cost_neg, lanes, groups, chunk_size, cap, timing, team_threads > 0)
    t_train = time.perf_counter()

    def new_state():
        # One workspace per thread, in mappings of its own: the pages the solver never
        # writes (parts of act/gcoef/hcoef, ~20% on debian-deps) never become resident,
        # and the whole workspace goes back to the system when the thread runs dry,
        # not when the last thread does.
        if team_threads:
            with lock:
                size = sizes.pop()
            return make_team_state(n, d, size, P.indptr, groups), make_records(chunk_size, cap)
        WS = (*make_workspace(n, d, lanes), make_group(n, d, lanes) if groups else None)
        return WS, make_records(chunk_size, cap)

    def lone(chunk, WSo, OSo, B, rec, abort_flag, start, team=None):
        rf, ra, rs, rt, rc = rec
        return train_chunk(P, S, WSo, OSo, B, start, post, colsum, y_indptr, y_indices, chunk, params.epsilon,
                           d1_zero, cost_scale, cost_pos, cost_neg, deadline, abort_flag, rf, ra, rs, rc, rt, timing,
                           team)

    def kernel(chunk, WS, rec, abort_flag, start=plan):
        if team_threads:
            return run_team(lambda ch, WSo, OSo, B, r, team: lone(ch, WSo, OSo, B, r, abort_flag, start, team),
                            WS, chunk, rec, abort_flag)
        return lone(chunk, *WS, rec, abort_flag, start)

    restart = None if isinstance(plan, ZeroPlan) else Restart(
        lambda chunk, WS, rec, abort_flag: kernel(chunk, WS, rec, abort_flag, start=ZeroPlan()),
        lambda: compile_kernels(P, S, ZeroPlan(), post, colsum, y_indptr, y_indices, params, d1_zero, cost_scale,
                                cost_pos, cost_neg, lanes, groups, chunk_size, cap, timing, team_threads > 0))

    results, stats_parts = run_chunks(chunks, threads, new_state, kernel, cap=cap, reg_scale=params.reg_scale,
                                      trajectories=trajectories, d_out=d_out, order=order, sink=sink,
                                      collect=collect, progress=progress, deadline=deadline, same=same,
                                      restart=restart)
    restarted = 0
    if restart is not None:
        compile_seconds += restart.compile_seconds
        t_train += restart.compile_seconds
        restarted = restart.count
        restart.report(init.name)
    shared_solves = same.copied if same is not None else 0
    # the renumbered X and the init's plan are not needed for the assembly (nor the
    # restart's closures, which hold them, nor `same`, which may hold the plan's rows)
    del P, X, plan, colsum, y_indices, y_indptr, kernel, restart, same
    weights, intercept, stats = assemble(results, stats_parts, collect, d_out, threads=threads)
    del results, stats_parts
    stats.meta.update({"init": init.name, "solver": "newton", "init_prepare_seconds": prep_seconds,
                       "wall_seconds": time.perf_counter() - t_start - compile_seconds,
                       "train_seconds": time.perf_counter() - t_train, "compile_seconds": compile_seconds,
                       "threads": team_threads or threads, "lanes": lanes, "groups": groups,
                       "shared_lanes": team_threads > 0, "teams": teams,
                       "shared_solves": shared_solves,
                       "restarted_from_zero": restarted, **pruning_meta(params, n, x_nnz),
                       "zero_starts": note_zero_starts(stats, f"init {init.name!r}")})
    if collect:
        # (a sink's owner reports what it saved: sharded training, the spooled writer)
        report_problems(stats)
    return weights, intercept, stats


def compile_kernels(P, S, plan, post, colsum, y_indptr, y_indices, params, d1_zero, cost_scale, cost_pos, cost_neg,
                    lanes: int, groups: bool, chunk_size: int, cap: int, timing: bool, shared: bool = False) -> float:
    """Seconds spent compiling (or loading from numba's cache) the training kernels for
    exactly the argument types of this run: one call of train_chunk with no label, on a
    one-instance workspace of the same array types (``shared``: as a team of one)."""
    WS, OS = make_workspace(1, 1, lanes)     # the same array types as the threads' workspaces
    rf, ra, rs, rt, rc = warmup_records(chunk_size, cap)
    team = None
    if shared:
        team, WS, OS, _ = member(make_team_state(1, 1, 1, np.zeros(2, dtype=np.int64)), 0,
                              np.zeros(TEAM_SYNC_WORDS, np.int64), np.zeros(1, np.int32), np.zeros((1, N_STATS)))
    return compile_call("training kernels", lambda: train_chunk(
        P, S, WS, OS, make_group(1, 1, lanes) if groups else None, plan, post, colsum, y_indptr, y_indices,
        np.zeros(0, dtype=np.int64), params.epsilon, d1_zero, cost_scale, cost_pos, cost_neg, 0.0, Abort().flag,
        rf, ra, rs, rc, rt, timing, team))


def make_workspace(n: int, d: int, lanes: int):
    """The kernel's lane workspace and objective state (:func:`.kernel.make_lane_workspace`:
    their shapes and dtypes), re-homed into mappings of their own (:mod:`.pages`)."""
    ws, os_ = make_lane_workspace(n, d, lanes)
    return type(ws)(*pages.zeros_like_workspace(ws)), type(os_)(*pages.zeros_like_workspace(os_))


