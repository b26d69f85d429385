"""One-vs-all training by coordinate descent: with an exact L1 regulariser (``--reg
l1-exact``) every label by newGLMNET (:mod:`headstart.solver.glmnet`) or, with
``l1_solver="cdn"``, by CDN (:mod:`headstart.solver.cdn`) over X by columns; with
``l2_solver="dual"`` (L2, a loss with a dual) by dual coordinate descent
(:mod:`headstart.solver.dual`, LIBLINEAR -s 1 / -s 3; :mod:`headstart.solver.dual_lr`,
-s 7) over X by rows.

Why a path of its own: the Newton-CG core of :mod:`.kernel` needs a twice
differentiable objective (DiSMEC++'s ``l1`` is the Huber function for that reason),
and it batches 16 labels into one pass over X by rows.  Coordinate descent on |w|
works one weight at a time and needs X by columns; it is what LIBLINEAR's -s 5 / -s 6
users get: exactly sparse weights at the exact L1 optimum.  The orchestration is the
core's -- chunks of labels handed to threads, each chunk one compiled call that
releases the GIL, the same statistics, sinks, time budget and abort -- so sharded,
resumable and Dask training work unchanged.

Every label starts from w = 0 (LIBLINEAR's start; a dense start such as aop's would
put every coordinate into play, which is what L1 is meant to avoid; the dual starts
from a = 0, whose w is 0): the run's ``init`` is not read (the command line warns when
one is given).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from .._compile import njit
from .._threads import Abort
from ..objective import losses, regularizers, weighting
from ..objective.columns import ColumnProblem
from ..solver import cdn as cdn_solver
from ..solver import dual as dual_solver
from ..solver import dual_lr
from ..solver import glmnet
from . import one_problem as core
from ..solver.newton import MAX_ITER, now, relative_tolerance, settings
from ..params import TrainParams
from .kernel import STAT_FIELDS, _grow
from .sharing import SameProblems

#: the statistics' columns: the core's, then the solution's nonzero weights before
#: pruning -- exact L1's optimum is itself exactly sparse, all zero where C is too small
#: for the features' scale, and only this column tells that from weights --prune removed
#: (chunks.note_all_pruned: helper-81, features x 1e-6, every label w = 0 with prune 0 too)
FIELDS = STAT_FIELDS + ("nnz_unpruned",)
N_FIELDS = len(FIELDS)

#: LIBLINEAR's dual_solver_max_iter: -s 1 and -s 7 finish by the primal Newton method after it
DUAL_CYCLES_BEFORE_NEWTON = 300
#: the losses whose dual run switches to the primal Newton method then (-s 1 to -s 2, -s 7
#: to -s 0, as LIBLINEAR's train_one); the exact hinge (-s 3) and the huber-hinge do not
#: (no curvature for Newton); resources.estimate_training_memory counts their buffers
DUAL_NEWTON_SWITCH = ("squared-hinge", "logistic")


def column_problem(X: sp.csr_matrix, params) -> ColumnProblem:
    """X by columns (one copy of X, as LIBLINEAR's transpose) with the run's loss and bias."""
    Xc = sp.csc_matrix(X)
    Xc.sort_indices()
    return ColumnProblem(Xc.indptr.astype(np.int64), Xc.indices.astype(np.int32, copy=False).view(np.uint32),
                         Xc.data.astype(np.float32, copy=False), np.int64(X.shape[0]), np.int64(X.shape[1]),
                         float(params.bias), losses.make(params), bool(params.regularize_bias))


@njit(cache=True, nogil=True)
def _chunk_buffers(nl):
    """A chunk's results as they grow: weights (CSR by label), intercepts, statistics."""
    return (np.zeros(nl + 1, dtype=np.int64), np.empty(1024, dtype=np.int32), np.empty(1024, dtype=np.float32),
            np.zeros(nl, dtype=np.float32), np.zeros((nl, N_FIELDS)))


@njit(cache=True, nogil=True)
def _nothing(indptr, indices, data, intercept, stats):
    """The result of an aborted chunk: no label (the trainer discards it)."""
    return indptr[:1].copy(), indices[:0].copy(), data[:0].copy(), intercept[:0], stats[:0], 0


@njit(cache=True, nogil=True)
def _label_setup(y, y_indptr, y_indices, j, n, cost_scale, cost_pos, cost_neg):
    """y (+1 / -1 per instance) of label j; returns (positives, C+, C-)."""
    pos = y_indices[y_indptr[j]: y_indptr[j + 1]]
    for i in range(n):
        y[i] = -1
    for i in pos:
        y[i] = 1
    cp = cost_scale * (cost_pos[j] if cost_pos.size > 0 else 1.0)
    cn = cost_scale * (cost_neg[j] if cost_neg.size > 0 else 1.0)
    return pos.size, cp, cn


@njit(cache=True, nogil=True)
def _keep(w, d, bias, prune, indices, data, nnz, intercept, k):
    """Append label k's weights with |w_j| >= prune (and != 0) to indices / data; returns
    (indices, data, nnz, ||w||, nonzero weights before pruning) -- the buffers may have
    grown."""
    indices = _grow(indices, nnz + d)
    data = _grow(data, nnz + d)
    dist = 0.0
    solved = 0
    for q in range(d):
        v = w[q]
        dist += v * v
        if v != 0.0:
            solved += 1
        if v != 0.0 and abs(v) >= prune:
            indices[nnz] = q
            data[nnz] = v
            nnz += 1
    if bias > 0.0:
        dist += w[d] * w[d]
        intercept[k] = w[d] * bias
    return indices, data, nnz, math.sqrt(dist), solved


# A label without positives (or without negatives) poses the same problem as every other
# such label of equal costs: y is -1 (+1) everywhere.  Its solve takes a fixed seed
# instead of the label id, so that every one of them takes the same steps to the same
# weights; a chunk then solves only the first one and the others take its result
# (training/sharing.py), bit for bit what their own solves would give, whatever the
# chunking (threads, shards).  A label space with many unused labels (a test-only label,
# ids with gaps) otherwise costs a full solve per empty label: on bibtex 7.5 ms each
# with -s 7.
SEED_NO_POSITIVE = 1 << 40
SEED_NO_NEGATIVE = (1 << 40) + 1


@njit(cache=True, nogil=True, inline="always")
def _seed(npos, n, j):
    """The random order's seed of label j (npos of n instances positive)."""
    if npos == 0:
        return SEED_NO_POSITIVE
    if npos == n:
        return SEED_NO_NEGATIVE
    return j


@njit(cache=True, nogil=True, inline="always")
def _record(st, npos, status, iters, steps, f0, f, g0, g, tol, dist, seconds, kept, solved, zeroed=False):
    st[0] = npos
    st[1] = status
    st[2] = iters
    st[3] = steps
    st[4] = f0
    st[5] = f
    st[6] = g0
    st[7] = g
    st[8] = g0
    st[9] = tol
    st[10] = dist
    st[11] = seconds
    st[12] = kept
    st[13] = 1.0 if zeroed else 0.0
    st[14] = solved


@njit(cache=True, nogil=True)
def train_chunk(CP, W, y, y_indptr, y_indices, labels, epsilon, cost_scale, cost_pos, cost_neg, max_iter, prune,
                deadline, abort, rec_f, rec_act, rec_step, rec_cg, rec_time, timing, cdn):
    """Train ``labels`` one after the other with the thread's buffers W (and y, one byte
    per instance).  Returns (indptr, indices, data, intercept, stats, started) as
    :func:`.kernel.train_chunk` does: weights with |w_j| >= prune (LIBLINEAR keeps
    every non-zero: prune = 0), statistics in the columns of :data:`FIELDS`
    (gradient norms are the 1-norms of the minimum-norm subgradient, the rule's own
    measure; "cg_steps" counts coordinate-descent cycles).  ``cdn``: None for newGLMNET
    (numba then prunes CDN's branch before typing: the default solver's runs do not
    compile CDN), True for CDN (both solvers compiled, numba cannot prune on a bool)."""
    n = CP.n
    d = CP.d
    nl = labels.size
    indptr, indices, data, intercept, stats = _chunk_buffers(nl)
    nnz = 0
    started = nl
    for k in range(nl):
        if abort[0] != 0:
            return _nothing(indptr, indices, data, intercept, stats)
        if deadline > 0.0 and now() > deadline:
            started = k
            break
        j = labels[k]
        npos, cp, cn = _label_setup(y, y_indptr, y_indices, j, n, cost_scale, cost_pos, cost_neg)
        tol = relative_tolerance(epsilon, npos, n)
        t0 = now() if timing else 0.0
        seed = _seed(npos, n, j)
        if cdn is not None:   # (None: newGLMNET, and CDN's branch is not compiled)
            status, iters, cycles, f0, f, g0, g = cdn_solver.solve(CP, W, y, cp, cn, tol, max_iter, seed, rec_f,
                                                                   rec_act, rec_step, rec_cg, rec_time, k, timing,
                                                                   abort)
        else:
            status, iters, cycles, f0, f, g0, g = glmnet.solve(CP, W, y, cp, cn, tol, max_iter, seed, rec_f, rec_act,
                                                               rec_step, rec_cg, rec_time, k, timing, abort)
        if abort[0] != 0:
            return _nothing(indptr, indices, data, intercept, stats)
        seconds = (now() - t0) if timing else 0.0
        start = nnz
        indices, data, nnz, dist, solved = _keep(W.w, d, CP.bias, prune, indices, data, nnz, intercept, k)
        indptr[k + 1] = nnz
        _record(stats[k], npos, status, iters, cycles, f0, f, g0, g, tol * g0, dist, seconds, nnz - start, solved)
    return indptr[:started + 1].copy(), indices[:nnz].copy(), data[:nnz].copy(), intercept[:started], \
        stats[:started], started


@njit(cache=True, nogil=True)
def train_chunk_dual(DM, RP, W, xsq, y, y_indptr, y_indices, labels, epsilon, cost_scale, cost_pos, cost_neg, max_iter,
                     prune, deadline, abort, rec_f, rec_act, rec_step, rec_cg, rec_time, timing, switch_after, NP, V,
                     S, colsum, scratch, d1_zero):
    """:func:`train_chunk` by dual coordinate descent (X by rows): the method DM selects,
    :mod:`headstart.solver.dual` (hinge losses) or :mod:`headstart.solver.dual_lr`
    (logistic).  The gradient columns of the statistics hold the rule's own measure, the
    spread max - min of the projected dual gradient (first cycle, last cycle), and its
    tolerance is ``epsilon`` itself; "cg_steps" counts coordinate steps.

    With ``switch_after`` > 0, a label whose dual has not met the rule after that many
    cycles is finished by the core's Newton method (problem NP over the same rows, the
    thread's buffers V, settings S, X's column sums ``colsum``) from the dual's w, on the
    primal rule at a tenth of ``epsilon`` -- LIBLINEAR 2.42+'s -s 1 ("Switching to use -s
    2") and -s 7 ("Switching to use -s 0"); its dual_solver_max_iter is 300.  Its statistics then hold the Newton method's
    final objective, gradient norms and tolerance; iterations and steps are summed."""
    n = RP.n
    d = RP.d
    nl = labels.size
    indptr, indices, data, intercept, stats = _chunk_buffers(nl)
    nnz = 0
    started = nl
    for k in range(nl):
        if abort[0] != 0:
            return _nothing(indptr, indices, data, intercept, stats)
        if deadline > 0.0 and now() > deadline:
            started = k
            break
        j = labels[k]
        npos, cp, cn = _label_setup(y, y_indptr, y_indices, j, n, cost_scale, cost_pos, cost_neg)
        t0 = now() if timing else 0.0
        cycles = min(max_iter, switch_after) if switch_after > 0 else max_iter
        status, iters, steps, f0, f, g0, g = dual_solver.solve_dual(DM, RP, W, xsq, y, cp, cn, epsilon, cycles,
                                                                    _seed(npos, n, j),
                                                                    rec_f, rec_act, rec_step, rec_cg, rec_time, k,
                                                                    timing, abort)
        if abort[0] != 0:
            return _nothing(indptr, indices, data, intercept, stats)
        tol = epsilon
        zeroed = False
        if status == MAX_ITER and cycles < max_iter:
            Wn, On = V
            for q in range(d + 1):
                Wn.w[q] = W.w[q]
            core.scores(NP, Wn.w, On.wx)
            pos = y_indices[y_indptr[j]: y_indptr[j + 1]]
            # LIBLINEAR: "primal_solver_tol obtained from eps for dual may be too loose", x 0.1
            tol, g0 = core.setup(NP, On, pos, cp, cn, 0.1 * epsilon, d1_zero, colsum, scratch, True)
            status, it_n, cg_n, _, f, _, g, _ = core.solve(NP, V, S, tol, scratch)
            zeroed = core.zeroed(V)   # the dual's point scored above f(0): Newton went on from 0
            iters += it_n
            steps += cg_n
            for q in range(d + 1):
                W.w[q] = Wn.w[q]
        seconds = (now() - t0) if timing else 0.0
        start = nnz
        indices, data, nnz, dist, solved = _keep(W.w, d, RP.bias, prune, indices, data, nnz, intercept, k)
        indptr[k + 1] = nnz
        _record(stats[k], npos, status, iters, steps, f0, f, g0, g, tol, dist, seconds, nnz - start, solved,
                zeroed)
    return indptr[:started + 1].copy(), indices[:nnz].copy(), data[:nnz].copy(), intercept[:started], \
        stats[:started], started


def row_problem(X: sp.csr_matrix, params) -> dual_solver.RowProblem:
    """X by rows for the dual (the trainer's arrays where their types already fit)."""
    return dual_solver.RowProblem(X.indptr.astype(np.int64, copy=False),
                                  X.indices.astype(np.int32, copy=False).view(np.uint32),
                                  X.data.astype(np.float32, copy=False), np.int64(X.shape[0]), np.int64(X.shape[1]),
                                  float(params.bias), losses.make(params))


def train(X, Y, params, labels, order, t_start, *, chunk_size, progress, sink, timing, collect, trajectories,
          d_out):
    """:func:`.trainer.train_labels` for an exact L1 regulariser (same arguments and
    results; X in the kernels' feature order, ``order`` maps it back)."""
    from .chunks import (MAX_RECORDED_ITERATIONS, assemble, compile_call, default_chunk_size, label_columns,
                         make_records, note_zero_starts, pruning_meta, report_problems, run_chunks,
                         shared_label_chunks, sorted_unique, warmup_records)

    from ..params import method_of

    labels = sorted_unique(labels)
    n, d = X.shape
    Yc, y_indptr, y_indices = label_columns(Y)
    cost_scale = float(params.C) / float(params.reg_scale)
    if params.weighting == "none":
        cost_pos = cost_neg = np.zeros(0)
    else:
        cost_pos, cost_neg = weighting.label_costs(params, np.diff(Yc.indptr), n)
    del Yc
    prune = float(params.prune)
    deadline = (t_start + params.timeout) if params.timeout > 0 else 0.0
    # per-iteration records only where trajectories are kept (they are dropped otherwise,
    # and CDN's records make a step the curvature bound accepted evaluate the loss too);
    # never for the dual, whose primal objective along the way would cost a pass over X
    # per cycle (bibtex: 14.8 s with it against 2.5 s)
    method = method_of(params)
    keep = trajectories and method != "dual"
    cap = min(params.max_iter, MAX_RECORDED_ITERATIONS) + 1 if keep else 1
    threads = params.effective_threads()
    if chunk_size is None:
        chunk_size = default_chunk_size(labels.size, threads)
    threads = max(1, min(threads, -(-labels.size // chunk_size)))
    same = SameProblems(y_indptr, n, cost_pos, cost_neg)
    chunks = shared_label_chunks(labels, chunk_size, threads, same)
    threads = max(1, min(threads, len(chunks)))

    epsilon, max_iter = float(params.epsilon), np.int64(params.max_iter)
    if method == "dual":
        P = row_problem(X, params)
        xsq = dual_solver.row_norms(P)
        switch_after = np.int64(DUAL_CYCLES_BEFORE_NEWTON if params.loss in DUAL_NEWTON_SWITCH else 0)
        NP = core.make_problem(P.indptr, X.indices.astype(np.int32, copy=False), P.data, np.int64(d), float(params.bias),
                               P.loss, regularizers.make(params), True)
        S = settings(replace(TrainParams(), max_iter=params.max_iter))
        d1_zero = float(losses.get(params.loss).d1_at_zero(params))
        colsum = dual_solver.column_sums(P) if switch_after > 0 else np.zeros(d + 1)

        # the logistic loss has a dual method of its own (LIBLINEAR -s 7), the others the
        # box dual of -s 1 / -s 3
        logistic = losses.get(params.loss).own_dual
        DM = dual_lr.LogisticDual() if logistic else dual_solver.BoxDual()

        def new_work(rows, cols):
            size = (rows, cols) if switch_after > 0 else (1, 1)
            return dual_solver.make_work(rows, cols, pairs=logistic), core.new_buffers(*size), np.zeros(cols + 1)

        def call(chunk, work, y, rec, abort_flag, dl):
            W, V, scratch = work
            rf, ra, rs, rt, rc = rec
            return train_chunk_dual(DM, P, W, xsq, y, y_indptr, y_indices, chunk, epsilon, cost_scale, cost_pos, cost_neg,
                                    max_iter, prune, dl, abort_flag, rf, ra, rs, rc, rt, timing, switch_after, NP, V,
                                    S, colsum, scratch, d1_zero)
    else:
        P = column_problem(X, params)
        use_cdn = method == "cdn"

        def new_work(rows, cols):
            return glmnet.make_work(rows, cols, P.data.size if use_cdn and rows == n else 0)

        def call(chunk, W, y, rec, abort_flag, dl):
            rf, ra, rs, rt, rc = rec
            return train_chunk(P, W, y, y_indptr, y_indices, chunk, epsilon, cost_scale, cost_pos, cost_neg,
                               max_iter, prune, dl, abort_flag, rf, ra, rs, rc, rt, timing,
                               True if use_cdn else None)

    compile_seconds = compile_call("coordinate-descent kernels", lambda: call(
        np.zeros(0, dtype=np.int64), new_work(1, 1), np.zeros(1, dtype=np.int8), warmup_records(chunk_size, cap),
        Abort().flag, 0.0))

    t_train = time.perf_counter()
    results, stats_parts = run_chunks(
        chunks, threads, lambda: ((new_work(n, d), np.empty(n, dtype=np.int8)), make_records(chunk_size, cap)),
        lambda chunk, state, rec, abort_flag: call(chunk, *state, rec, abort_flag, deadline),
        cap=cap, reg_scale=params.reg_scale, trajectories=trajectories, d_out=d_out, order=order, sink=sink,
        collect=collect, progress=progress, deadline=deadline, same=same, fields=FIELDS)
    del P
    weights, intercept, stats = assemble(results, stats_parts, collect, d_out, FIELDS, threads=threads)
    stats.meta.update({"init": "zero", "solver": method, "init_prepare_seconds": 0.0,
                       "wall_seconds": time.perf_counter() - t_start - compile_seconds,
                       "train_seconds": time.perf_counter() - t_train, "compile_seconds": compile_seconds,
                       "threads": threads, "lanes": 1, "groups": False, "shared_solves": same.copied,
                       # every label starts from w = 0 (module text): no start to leave
                       "restarted_from_zero": 0, **pruning_meta(params, n, X.nnz),
                       "zero_starts": note_zero_starts(stats, "dual method's point (the switch to Newton's)")})
    if collect:
        report_problems(stats)
    return weights, intercept, stats
