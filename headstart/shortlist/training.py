"""Shortlisted one-vs-all training: each label on its positives plus its shortlist.

Label l's problem is the rows S_l = positives(l) U shortlist(l) of X, and only the
columns those rows use.  :func:`train_chunk` builds that sub-matrix (rows gathered,
columns renumbered to 0..d_l-1 in ascending global order, so a sub-problem costs
O(nnz of its rows), never O(n) or O(d)), hands it to the core's one-problem Newton
solver through :mod:`headstart.training.one_problem`, and maps the weights back to global feature ids.
A whole chunk of labels is one compiled call without the GIL; the threads that take
chunks from a shared counter are the full trainer's (:func:`headstart.training.chunks.run_chunks`),
so Python only orchestrates.

Each label is computed by the same deterministic code whatever chunk or thread runs
it, so the model does not depend on threads, chunking or shards.

A label without a single row (no positive, an empty shortlist: a label that only the
test data has) would have an objective without loss, solved by any bias.  It is given
one negative row with no feature but the bias, so that it scores below the labels with
evidence: with aop it starts, and stays, at the bias-only vector that scores the
negatives t (-2), as a label without positives does in ``headstart train``.

Feature scales.  ``fscale[j]`` multiplies weight j when it is mapped back: the
dense + sparse mode trains on columns scaled by 1/sqrt(lambda) of their part
(:mod:`.features`) and saves the weights of the original features.  Pruning
(``|w| < prune`` -> 0) is applied to the original-space weights.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from .._columns import UsedColumns
from .._compile import njit
from .._bits import lowest_bit
from .._prefetch import prefetch_ahead
from .._threads import Abort, warn_if_oversubscribed
from ..params import TrainParams
from ..training import one_problem as core
from ..training.stats import SHARED
from .starts import Starts, prepare_starts, start_vector

log = logging.getLogger(__name__)

#: per-label statistics: the core trainer's columns, then the sub-problem's size and the
#: label whose solve a row-less label took (-1: its own; see train_chunk), the column the
#: core trainer's sharing fills (training/stats.py)
EXTRA_FIELDS = ("rows", "features", SHARED)


def stat_fields() -> tuple[str, ...]:
    return core.stat_fields() + EXTRA_FIELDS


N_FIELDS = len(stat_fields())   # the core's columns, then EXTRA_FIELDS


@njit(cache=True, nogil=True)
def _grow(a, need):
    if need <= a.size:
        return a
    b = np.empty(max(need, 2 * a.size), dtype=a.dtype)
    b[: a.size] = a
    return b


@njit(cache=True, nogil=True)
def merge_rows(pos, sl, rows, posl):
    """rows = sorted union of the sorted id lists ``pos`` and ``sl``; posl[k] = position of
    pos[k] in rows.  Returns the number of rows."""
    m = 0
    a = 0
    b = 0
    k = 0
    while a < pos.size or b < sl.size:
        if b >= sl.size or (a < pos.size and pos[a] <= sl[b]):
            v = pos[a]
            posl[k] = m
            k += 1
            a += 1
            if b < sl.size and sl[b] == v:
                b += 1
        else:
            v = sl[b]
            b += 1
        rows[m] = v
        m += 1
    return m


# The columns a sub-problem uses are marked in a bitmap of X's columns (d / 64 words,
# L1-resident for tens of thousands of features) and listed in ascending order by one
# pass over its words when those are at most ENUMERATE_SHARE per used column, else by
# sorting the list the marking pass collects (a few used columns among very many).
# Against marking an int32 map of d entries with a branch on "seen before?" (a third of
# the nonzeros of a small sub-problem are a column's first) and sweeping that map:
# debian-deps' labels under 200 rows, K = 100, one thread, 2026-12-02: 21.7 -> 10.8 us
# a label (12.1 -> 6.0 ns per nonzero), the same sub-problems bit for bit.
ENUMERATE_SHARE = 8


@njit(cache=True, nogil=True)
def extract(X_indptr, X_indices, X_data, rows, m, colmap, bits, feats, sub_indptr, sub_indices, sub_data, colsum):
    """CSR of X[rows[:m]] restricted to the columns it uses, renumbered in ascending order.

    One gather of the rows (global column ids are written first and renumbered in place:
    the rows sit at random places in X, the copy is sequential), marking each column in
    ``bits`` (uint64, ceil(d / 64) words: zero on entry and left so) without a branch.
    ``colmap`` (int32, size d) receives the local number of every used column (its other
    entries are never read); ``feats`` the global id of every local column, and must
    hold min(nnz, d) + 1 entries (the marking pass writes one past the columns found).
    Output buffers must hold m + 1 / nnz entries.  The renumbering pass also sums the
    columns into ``colsum`` (float64, in the order of the rows, as
    :func:`headstart.training.one_problem.setup` would: the same bits, one pass over the
    rows fewer).  Returns the number of local columns."""
    one = np.uint64(1)
    nf = 0
    sub_indptr[0] = 0
    t = 0
    for r in range(m):
        prefetch_ahead(X_indptr, X_indices, X_data, rows, r, m)   # rows sit at random places in X
        i = rows[r]
        for p in range(X_indptr[i], X_indptr[i + 1]):
            j = X_indices[p]
            w = j >> 6
            b = one << np.uint64(j & 63)
            old = bits[w]
            feats[nf] = j               # kept (nf moves on) only if j was not marked yet
            nf += 1 if (old & b) == 0 else 0
            bits[w] = old | b
            sub_indices[t] = j
            sub_data[t] = X_data[p]
            t += 1
        sub_indptr[r + 1] = t
    if bits.size <= ENUMERATE_SHARE * nf:
        nf = 0
        for w in range(bits.size):
            word = bits[w]
            if word != 0:
                bits[w] = 0
                base = w << 6
                while word != 0:
                    j = base + lowest_bit(word)
                    colmap[j] = nf
                    feats[nf] = j
                    colsum[nf] = 0.0
                    nf += 1
                    word &= word - one
    else:
        feats[:nf].sort()
        for q in range(nf):
            j = feats[q]
            bits[j >> 6] = 0
            colmap[j] = q
            colsum[q] = 0.0
    for p in range(t):
        c = colmap[sub_indices[p]]
        sub_indices[p] = c
        colsum[c] += np.float64(sub_data[p])
    return nf


@njit(cache=True, nogil=True)
def train_chunk(X_indptr, X_indices, X_data, d, gfeat, y_indptr, y_indices, s_indptr, s_indices, labels, fscale,
                bias, loss, reg, regularize_bias, S, T, epsilon, d1_zero, cost_scale, cost_pos, cost_neg, deadline,
                abort, post, solve, direct_rows):
    """Train ``labels`` on their sub-problems.

    Returns (indptr, indices, data, intercept, stats, done) of the weights kept by the
    post-processing ``post`` (its threshold applied to the original-space weights), over
    the global features, rows in the order of ``labels``; stats columns as
    :func:`stat_fields` (objective values of f / reg_scale, as the core's kernels).
    ``d``: X's columns; ``gfeat``: the global feature id of each, for the weights
    returned (empty: X's own ids; the starts see X's ids).
    ``T``: the starts (:class:`.starts.Starts`); ``cost_pos`` / ``cost_neg``: per-label
    costs before C (empty: all 1).  With ``deadline`` > 0 (a perf_counter time) no label
    starts after it: only labels[:done] are trained; the same once another thread sets
    ``abort[0]`` (Ctrl-C: see training.chunks.run_in_threads).  With ``solve`` False the start
    vectors are returned instead (original space, not pruned).
    """
    nl = labels.size
    colmap = np.empty(d, dtype=np.int32)          # (extract reads only what it wrote)
    bits = np.zeros((d + 63) // 64, dtype=np.uint64)
    feats = np.empty(64, dtype=np.int32)
    scales = np.empty(64)
    rows = np.empty(64, dtype=np.int64)
    posl = np.empty(64, dtype=np.int64)
    sub_indptr = np.empty(65, dtype=np.int64)
    sub_indices = np.empty(1024, dtype=np.int32)
    sub_data = np.empty(1024, dtype=np.float32)
    colsum = np.empty(64)
    psum = np.empty(64)
    w0 = np.empty(64)
    B = core.new_buffers(64, 64)
    stamps = core.solve_stamps(S)     # support marks a solve may draw (the buffers' marks are reused)
    G = core.new_span(0, 0, 0)
    n_data = X_indptr.size - 1
    out_indptr = np.zeros(nl + 1, dtype=np.int64)
    out_indices = np.empty(1024, dtype=np.int32)
    out_data = np.empty(1024, dtype=np.float32)
    intercept = np.zeros(nl, dtype=np.float32)
    stats = np.zeros((nl, N_FIELDS))
    nnz = 0
    done = nl
    # Labels without a row (no positive, nothing shortlisted) all pose one problem, the
    # bias-only row of the module text; the solve depends on nothing else but the costs
    # and the start.  So the chunk solves it once per (C+, C-, start) in a row and gives
    # the others that result: ~15 us a label otherwise, most of the time of a run whose
    # label space is mostly unused (1M labels, 25 used: 20.6 s against 8.2 s for the
    # core trainer, which shares such labels too, training/sharing.py).
    e_have = False
    e_key = np.zeros(4)            # C+, C-, the start's bias weight, the solved bias weight
    e_int = np.zeros(4, dtype=np.int64)
    e_flt = np.zeros(6)
    e_label = -1
    w_start = 0.0
    for k in range(nl):
        lab = labels[k]
        # a label that will most likely copy the row-less solve below is not timed: the
        # clock (an object-mode call) would be most of its cost
        timed = not (e_have and y_indptr[lab + 1] == y_indptr[lab] and s_indptr[lab + 1] == s_indptr[lab]) \
            or deadline > 0.0
        t0 = core.now() if timed else 0.0
        if abort[0] != 0 or (deadline > 0.0 and t0 > deadline):
            done = k
            break
        pos = y_indices[y_indptr[lab]: y_indptr[lab + 1]]
        sl = s_indices[s_indptr[lab]: s_indptr[lab + 1]]
        cap = pos.size + sl.size
        rows = _grow(rows, cap)
        posl = _grow(posl, pos.size)
        m = merge_rows(pos, sl, rows, posl)
        empty = m == 0
        tot = 0
        for r in range(m):
            tot += X_indptr[rows[r] + 1] - X_indptr[rows[r]]
        sub_indptr = _grow(sub_indptr, m + 2)
        sub_indices = _grow(sub_indices, tot)
        sub_data = _grow(sub_data, tot)
        feats = _grow(feats, min(tot, d) + 1)
        scales = _grow(scales, min(tot, d))
        colsum = _grow(colsum, min(tot, d) + 1)
        if empty:
            # no positive, nothing shortlisted: one negative row with no feature but the
            # bias (see the module text)
            m = 1
            rows[0] = 0
            sub_indptr[0] = 0
            sub_indptr[1] = 0
            nf = 0
        else:
            nf = extract(X_indptr, X_indices, X_data, rows, m, colmap, bits, feats, sub_indptr, sub_indices,
                         sub_data, colsum)
        for q in range(nf):
            scales[q] = fscale[feats[q]]
        colsum = _grow(colsum, nf + 1)
        psum = _grow(psum, nf + 1)
        w0 = _grow(w0, nf + 1)
        if not core.buffers_fit(B, m, nf):
            B = core.new_buffers(max(m, 2 * B[1].wx.size), max(nf, 2 * (B[0].w.size - 1)))
        P = core.make_problem(sub_indptr[: m + 1], sub_indices[:tot], sub_data[:tot], nf, bias, loss, reg,
                              regularize_bias)
        W, O = core.workspace_view(B, m, nf, stamps)
        cp = cost_scale * (cost_pos[lab] if cost_pos.size > 0 else 1.0)
        cn = cost_scale * (cost_neg[lab] if cost_neg.size > 0 else 1.0)
        tol, gzero = core.setup(P, O, posl[: pos.size], cp, cn, epsilon, d1_zero, colsum, psum, not empty)
        start_vector(T, P, O, W.w, colsum, psum, posl[: pos.size], lab, feats[:nf], rows[:m], scales)
        if empty:
            core.scores(P, W.w, O.wx)    # the row is no row of X: its score is the bias alone
            w_start = W.w[0]
        st, it, cg, f0, f1, g_init, g_final, dist = 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0
        zeroed = False
        tau = 0.0
        copied = False
        if solve and empty and e_have and cp == e_key[0] and cn == e_key[1] and W.w[0] == e_key[2] \
                and math.copysign(1.0, W.w[0]) == math.copysign(1.0, e_key[2]):   # -0.0 is not 0.0 here
            # the same one-row problem from the same start as an earlier empty label of
            # this chunk: its solve, bit for bit (see the module text)
            W.w[0] = e_key[3]
            st, it, cg, zeroed = e_int[0], e_int[1], e_int[2], e_int[3] != 0
            f0, f1, g_init, g_final, dist, tau = e_flt[0], e_flt[1], e_flt[2], e_flt[3], e_flt[4], e_flt[5]
            copied = True
        elif solve:
            if not timed:
                timed = True
                t0 = core.now()
            if not empty and core.direct_applies(reg, m, n_data, direct_rows):
                if not core.span_fits(G, m, tot, nf):
                    # each dimension grows only when it must, the rows at most to
                    # direct_rows: K and the factor take rows^2 each
                    cap_m = G.z0.size if m <= G.z0.size else min(max(m, 2 * G.z0.size), direct_rows)
                    cap_t = G.crow.size if tot <= G.crow.size else max(tot, 2 * G.crow.size)
                    cap_d = G.colptr.size - 1 if nf < G.colptr.size else max(nf, 2 * (G.colptr.size - 1))
                    G = core.new_span(cap_m, cap_t, cap_d)
                st, it, cg, f0, f1, g_init, g_final, dist = core.solve_direct(P, (W, O), G, S, tol, w0)
            else:
                st, it, cg, f0, f1, g_init, g_final, dist = core.solve(P, (W, O), S, tol, w0)
            zeroed = core.zeroed((W, O))
            tau = core.threshold(post, P, (W, O), f1)
            if empty:
                e_have = True
                e_label = lab
                e_key[0], e_key[1], e_key[2], e_key[3] = cp, cn, w_start, W.w[0]
                e_int[0], e_int[1], e_int[2], e_int[3] = st, it, cg, 1 if zeroed else 0
                e_flt[0], e_flt[1], e_flt[2], e_flt[3], e_flt[4], e_flt[5] = f0, f1, g_init, g_final, dist, tau
        w = W.w
        # weights back to the global features (feats ascending), pruned in that space
        out_indices = _grow(out_indices, nnz + nf)
        out_data = _grow(out_data, nnz + nf)
        start = nnz
        for q in range(nf):
            v = w[q] * scales[q]
            if v != 0.0 and abs(v) >= tau:
                out_indices[nnz] = feats[q] if gfeat.size == 0 else gfeat[feats[q]]
                out_data[nnz] = v
                nnz += 1
        out_indptr[k + 1] = nnz
        intercept[k] = w[nf] * bias
        row = stats[k]
        row[0] = pos.size
        row[1] = st
        row[2] = it
        row[3] = cg
        row[4] = f0
        row[5] = f1
        row[6] = g_init
        row[7] = g_final
        row[8] = gzero
        row[9] = tol
        row[10] = dist
        row[11] = core.now() - t0 if timed else 0.0
        row[12] = nnz - start
        row[13] = 1.0 if zeroed else 0.0
        row[14] = 0 if empty else m
        row[15] = nf
        row[16] = e_label if copied else -1
    return out_indptr[: done + 1].copy(), out_indices[:nnz].copy(), out_data[:nnz].copy(), intercept[:done].copy(), \
        stats[:done].copy(), done


# --------------------------------------------------------------------------- orchestration
# The chunks run on the core's orchestration (training.chunks.run_chunks, through
# training.one_problem): threads, the time budget, Ctrl-C, restarts from zero, sinks,
# memory trimming and the model's assembly are the full trainer's; what is this module's
# own is the chunk kernel above and the chunk sizes below.

#: the smallest chunk towards the end of a run (guided scheduling, chunks.label_chunks):
#: this kernel has no lanes to fill, one label per solve
SMALLEST_CHUNK = 16


def default_chunk_size(n_labels: int, threads: int) -> int:
    """Labels per compiled call: at least 4 chunks per thread to balance them (a
    label's cost follows its shortlist, which varies by orders of magnitude), at most
    2048."""
    return int(min(2048, max(SMALLEST_CHUNK, n_labels // max(4 * threads, 1))))


@dataclass
class RunInputs:
    """What every range of a run shares, prepared once at the boundary: the starts
    (plans of the registry's initialisers) and the per-label costs."""

    starts: Starts
    cost_pos: np.ndarray      # per label of the label space, before C (empty: all 1)
    cost_neg: np.ndarray
    prepare_seconds: float = 0.0   # preparing the starts (the statistics' init_prepare_seconds)


def prepare_inputs(X: sp.csr_matrix, Y: sp.csc_matrix, params: TrainParams, *, starts: Starts | None = None,
                   **start_kw) -> RunInputs:
    """Starts (``params.init`` or per-part, see :func:`.starts.prepare_starts`) and costs
    (``params.weighting``, from the whole data's label counts, as the core trainer)."""
    t0 = time.perf_counter()
    if starts is None:
        starts = prepare_starts(X, Y, params, threads=params.effective_threads(), **start_kw)
    seconds = time.perf_counter() - t0
    cp, cn = core.label_costs(params, np.diff(Y.indptr), X.shape[0])
    return RunInputs(starts, np.ascontiguousarray(cp, dtype=np.float64), np.ascontiguousarray(cn, dtype=np.float64),
                     seconds)


def check_start(params: TrainParams, X: sp.csr_matrix, Y: sp.csc_matrix) -> None:
    """Refuse ``params.init`` now if shortlisted training cannot start from it (its plan
    holds arrays without a sub-problem restriction): prepared on a few rows, cheaply,
    before a caller spends time on other work (the tree trains its root first)."""
    prepare_starts(X, Y, params, threads=1)


def compact_columns(X: sp.csr_matrix, params: TrainParams, dense: bool) -> UsedColumns | None:
    """The columns that occur in X when training should see only them, else None.

    A header may declare far more features than occur (2^26 hashed ids); the kernel's
    column map, the feature scales and the starts' column sums would then be
    O(features).  Where the absent columns outnumber the nonzeros, the run trains on
    the columns that occur (a copy of X's indices) and the kernel maps the weights back
    (the core trainer narrows its own way: :mod:`headstart.training.locality`).  Not
    with a dense part or a pretrained start, whose columns are given by position."""
    if dense or params.init == "pretrained":
        return None
    return UsedColumns.if_sparse(X)


def train_shortlisted(X: sp.csr_matrix, Y: sp.csc_matrix, shortlist: sp.csc_matrix, params: TrainParams,
                      labels: np.ndarray, *, fscale: np.ndarray | None = None, chunk_size: int | None = None,
                      progress: Callable[[int], None] | None = None, sink: Callable | None = None,
                      collect: bool = True, inputs: RunInputs | None = None, solve: bool = True,
                      columns: UsedColumns | None = None):
    """Train ``labels`` (ascending ids) of (X, Y), each on its positives plus its column
    of ``shortlist`` (instances x labels, CSC with sorted indices).

    X: canonical float32 CSR (already preprocessed, dense part scaled); Y: CSC 0/1 with
    sorted indices.  Returns (weights CSR (len(labels) x d), intercept, stats) like
    :func:`headstart.training.trainer.train_labels`; ``sink`` gets every finished chunk
    (a ChunkResult; with ``collect=False`` the weights and intercept returned are None),
    ``progress(n)`` the count of labels done.  ``inputs``: the starts
    and costs (:func:`prepare_inputs`; prepared here from ``params`` when not given).
    With ``params.timeout`` no label starts after that many seconds: the labels trained
    are those the statistics list (the weights have their rows only).  ``solve=False``
    returns the start vectors instead (original feature space, not pruned).
    ``columns``: X holds only these columns of the data set (:func:`compact_columns`);
    the weights are returned over all of them.
    """
    t_start = time.perf_counter()
    # a sub-problem keeps the order of X's rows, and one row (or rows of one support)
    # holds every feature of it: summed by position (erm.canonical_rows)
    X = core.canonical_rows(X)
    deadline = (t_start + params.timeout) if params.timeout > 0 else 0.0
    dense = fscale is not None and bool(np.any(np.asarray(fscale) != 1.0))
    loss, reg, cost_scale, d1_zero, post = core.objective_parts(params, dense=dense)
    if inputs is None:
        inputs = prepare_inputs(X, Y, params)
    labels = core.sorted_unique(labels)
    n, dk = X.shape
    if columns is None:
        d, gfeat = dk, np.zeros(0, dtype=np.int32)
    else:
        d, gfeat = columns.width, columns.used.astype(np.int32)
    if fscale is None:
        fscale = np.ones(dk)
    fscale = np.ascontiguousarray(fscale, dtype=np.float64)
    dk = np.int64(dk)
    S = core.solver_settings(params)
    Xi = (X.indptr.astype(np.int64, copy=False), X.indices.astype(np.int32, copy=False),
          X.data.astype(np.float32, copy=False))
    yi = (Y.indptr.astype(np.int64, copy=False), Y.indices.astype(np.int64, copy=False))
    si = (shortlist.indptr.astype(np.int64, copy=False), shortlist.indices.astype(np.int64, copy=False))
    before = (np.float64(params.bias), loss, reg, bool(params.regularize_bias), S)      # train_chunk's arguments
    between = (np.float64(params.epsilon), np.float64(d1_zero), np.float64(cost_scale), inputs.cost_pos,
               inputs.cost_neg, np.float64(deadline))
    after = (post, bool(solve), np.int64(params.direct_rows))
    fields = stat_fields()
    threads = params.effective_threads()
    if chunk_size is None:
        chunk_size = default_chunk_size(labels.size, threads)
    chunks = core.label_chunks(labels, chunk_size, threads, smallest=SMALLEST_CHUNK)
    threads = max(1, min(threads, len(chunks)))
    warn_if_oversubscribed(threads, log)

    def kernel(chunk, state, rec, abort_flag, starts=inputs.starts):
        # no per-thread state (the kernel's buffers grow inside a call, to the largest
        # sub-problem of the chunk) and no record arrays (no trajectories)
        return train_chunk(*Xi, dk, gfeat, *yi, *si, chunk, fscale, *before, starts, *between, abort_flag, *after)

    def compile_kernel(starts) -> float:
        return core.compile_call("shortlisted training kernel",
                                 lambda: kernel(labels[:0], None, None, Abort().flag, starts))

    # labels that never left their start (a failed first line search: e.g. init mean
    # with the logistic loss) are solved again from zero (training.chunks.Restart)
    restart = None
    if solve and not (inputs.starts.name == "zero" and not inputs.starts.per_part):
        zero = Starts(core.ZeroPlan(), core.ZeroPlan(), core.ZeroPlan(), inputs.starts.n_sparse, False, "zero")
        restart = core.Restart(lambda chunk, state, rec, abort_flag: kernel(chunk, state, rec, abort_flag, zero),
                               lambda: compile_kernel(zero))

    compile_seconds = compile_kernel(inputs.starts)
    t_train = time.perf_counter()
    results, parts = core.run_chunks(chunks, threads, lambda: (None, None), kernel, cap=1,
                                     reg_scale=params.reg_scale, trajectories=False, d_out=d, order=None, sink=sink,
                                     collect=collect, progress=progress, deadline=deadline, restart=restart,
                                     fields=fields, name="headstart-sl")
    if restart is not None:
        compile_seconds += restart.compile_seconds
        t_train += restart.compile_seconds
        restart.report(inputs.starts.name)
    # the model's rows copied chunk by chunk, each chunk released once copied
    weights, intercept, stats = core.assemble(results, parts, collect, d, fields, threads=threads)
    del results, parts
    stats.meta.update({"init": inputs.starts.name, "solver": "newton", "compile_seconds": compile_seconds,
                       "init_prepare_seconds": inputs.prepare_seconds,
                       "restarted_from_zero": restart.count if restart is not None else 0,
                       "zero_starts": core.note_zero_starts(stats, f"init {inputs.starts.name!r}"),
                       "wall_seconds": time.perf_counter() - t_start - compile_seconds,
                       "train_seconds": time.perf_counter() - t_train,
                       "threads": threads, "mode": "shortlist", "shortlist_nnz": int(shortlist.nnz),
                       # the run's instances; note_all_pruned compares each label with its
                       # own sub-problem's (the "rows" column), see there
                       **core.pruning_meta(params, n),
                       "shared_solves": int(np.count_nonzero(stats[SHARED] >= 0))})
    if solve and collect:
        # (a sink's owner reports what it saved: sharded training)
        core.report_problems(stats)
    return weights, intercept, stats
