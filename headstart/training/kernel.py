"""The compiled per-label loop: labels in, pruned weights and statistics out.

Where the time goes.  With the squared hinge and a good start, the Hessian products
touch a tiny active set (median ~0.2% of the instances on debian-deps with aop), so
the one product per Newton iteration that must touch *all* of X -- the scores X s of
the line search, plus X w0 for a start vector -- dominates, and it is bound by memory
bandwidth, not arithmetic.  So the scheduler here runs ``LANES`` labels side by side
and computes their X-products in one sweep over X (:func:`lanes_scores`): each
nonzero is loaded once and used for all lanes.  A lane whose label finishes takes the
next label at once, so lanes stay busy until the chunk runs dry.

The rest of an iteration streams the lane's own O(n) and O(d) buffers, so it is
written to touch them as rarely as possible: the search direction is never written
out over all features -- the sweep buffer V holds only delta = s - sigma * w on the
support (zero elsewhere, X s = sigma * X w + X delta) -- and the step, the new scores
and the new active set are one fused pass (:func:`headstart.objective.erm.update_and_grad_on_support`).
Measured on debian-deps (labels 0:1000, one thread): the sweep takes ~45% of the
time, line search + step + gradient ~25%, CG ~25%.

Where many rows are active (zero starts, head labels, the logistic loss) the Hessian
products dominate instead; lanes in that state compute their directions four at a
time in lock step, the products in one pass over their active rows
(:func:`group_directions`; docs/design.md, "Memory and speed at the field's scale").

Each label's arithmetic is exactly what it would be alone (same operations in the
same order; lanes never mix), so results do not depend on lane assignment, chunking
or threads.  Everything runs in numba without the GIL: Python only hands out chunks.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import _atomic as atomic
from .. import postproc
from .._compile import njit
from .._prefetch import prefetch
from .._span import U64, full_row, span
from ..init.base import initial_weights
from ..objective import erm, losses, regularizers
from ..objective.erm import State
from ..solver import cg
from ..solver import newton as nt
from ..solver.newton import Workspace

LANES = 16  # labels per sweep over X; lanes_scores is written out for exactly this many

# Per-label scalar statistics, in this column order.
# zero_start: 1 where the initialiser's start scored above f(0) and the solver started
# from w = 0 instead (solver/newton.zero_if_worse); f_init is then f(0).
STAT_FIELDS = ("n_pos", "status", "iterations", "cg_steps", "f_init", "f_final", "gnorm_init",
               "gnorm_final", "gnorm_zero", "tolerance", "distance", "seconds", "nnz", "zero_start")
N_STATS = len(STAT_FIELDS)

IDLE, NEED_START, NEED_STEP = 0, 1, 2


def prepare_problem(X, params):
    """The kernels' view of X (canonical float32 CSR) for ``params``' loss, regulariser
    and bias, and its column sums (bias coordinate included; float64 sums: a float32 sum
    overflows for values near float32's maximum)."""
    P = erm.make_problem(X, params.bias, losses.make(params), regularizers.make(params), params.regularize_bias)
    return P, P.colsum


# The fields of make_lane_workspace with one row for all lanes: a lane's scratch from
# its gradient to its direction (a team gives each thread its own, :mod:`.team`).
SCRATCH_W = ("g", "r", "d", "Hd", "M")
SCRATCH_O = ("act", "gcoef", "hcoef", "hdiag")


def make_lane_workspace(n: int, n_features: int, lanes: int = LANES) -> tuple[Workspace, State]:
    """The solver's workspace and the objective's state with a leading lane axis.

    Only what a label carries from one sweep to the next is per lane: the solver's w and
    s (the direction, used by the line search after the sweep), the objective's labels
    y, scores wx and xs, support F with its marks and scalars.  The gradient, the CG
    vectors and the objective's active set with its coefficients live from the gradient
    of one iteration to the direction computed right after it (the objective's caching
    contract, :mod:`headstart.objective.erm`), for one lane at a time, so all lanes of a
    thread share one copy (leading axis 1): per lane ~1.2 MB instead of ~3 MB on
    debian-deps, and the shared buffers stay in cache from lane to lane.  ``delta``
    lives in the scheduler's sweep buffer, so lanes get a 1-element one."""
    nv = n_features + 1
    own = lambda dtype=np.float64: np.zeros((lanes, nv), dtype=dtype)  # noqa: E731
    shared = lambda: np.zeros((1, nv))  # noqa: E731
    W = Workspace(own(), shared(), own(), shared(), shared(), shared(), shared(),
                  np.zeros((lanes, 1), dtype=nt.DELTA_DTYPE))
    O = State(np.zeros((lanes, n), dtype=erm.Y_DTYPE), np.zeros((lanes, n)), np.zeros((lanes, n)),
              np.zeros((1, n), dtype=erm.ACT_DTYPE), np.zeros((1, n)), np.zeros((1, n)), shared(),
              own(erm.SUPPORT_DTYPE), own(erm.MARK_DTYPE), np.tile(erm.IST_INIT, (lanes, 1)),
              np.zeros((lanes, erm.FST_SIZE)))
    return W, O


@njit(cache=True, nogil=True)
def lane(WS, OS, b):
    """Lane b's view of the workspace and state (shared parts at index 0)."""
    W = Workspace(WS.w[b], WS.g[0], WS.s[b], WS.r[0], WS.d[0], WS.Hd[0], WS.M[0], WS.delta[b])
    O = State(OS.y[b], OS.wx[b], OS.xs[b], OS.act[0], OS.gcoef[0], OS.hcoef[0], OS.hdiag[0], OS.F[b], OS.mark[b], OS.ist[b],
              OS.fst[b])
    return W, O


# A lane whose last gradient had at least 1/DENSE_SHARE of the instances active computes
# its Newton direction in a group of erm.GROUP lanes, whose Hessian products share one
# pass over the union of their active rows (erm.hess_rows_group).  Below that a lane's
# rows are mostly its own, the union is nearly the sum of the members' rows and every
# member pays for the others': with the threshold at 1/16 (erm.DENSE_SHARE, where the
# support becomes every feature) the AmazonCat-13K shape with aop (head labels, mid-
# density active sets) took 71.3 s for labels 0:300 against 63.7 s without groups
# (e8a7fe6); at 1/4: 65.2 s against 65.6 s, and the groups' own cases gained too
# (Amazon-670K shape from zero, labels 0:32: 51.1 s against 53.4 s; debian-deps from
# zero, 0:1000: 19.1 s against 20.4 s; 2 threads, 2026-11-26, one run each).
DENSE_SHARE = 4


# A thread's direction-group buffers: per slot (GROUP rows) the gradient GG, the
# preconditioner GM (also the Hessian diagonal), the residual GR, the direction GD and
# its product GH; the interleaved D and HD (features + 1, GROUP) the rows' pass reads and
# writes (a gradients' pass: g and diag(H)); the row union U and its marks; the slots'
# lanes, CG scalars and run flags; per slot the gradient coefficients GC of every row
# (the Hessian's are in the lane's xs row; GC is also the scratch of the Hessian
# products' pass, erm.hess_rows_group: no gradient waits while directions are computed).
Group = namedtuple("Group", ["GG", "GM", "GR", "GD", "GH", "D", "HD", "U", "mask", "members", "cs", "run",
                             "GC"])


def make_group(n: int, n_features: int, lanes: int) -> Group:
    """The group buffers of a thread (allocated here, not in the kernel: numba's array
    constructors would be compiled in every first run); 1-element ones without 16 lanes.
    Pages are touched only when lanes turn dense.  A run that forms no groups
    (budget.use_groups) passes None instead, and train_chunk is compiled without them."""
    G = erm.GROUP
    nv = n_features + 1 if lanes == LANES else 1
    m = n if lanes == LANES else 1
    return Group(*(np.zeros((G, nv)) for _ in range(5)), np.zeros((nv, G)), np.zeros((nv, G)),
                 np.zeros(m, dtype=erm.ACT_DTYPE), np.zeros(m, dtype=np.int8), np.zeros(G, dtype=np.int64),
                 np.zeros((G, cg.CG_SCALARS)), np.zeros(G, dtype=np.bool_), np.zeros((G, m)))


@njit(cache=True, nogil=True)
def group_lane(WS, OS, b, GG, GM, GR, t):
    """Lane b's view with the gradient, preconditioner (also the objective's Hessian
    diagonal) and CG residual in group slot t: a group's lanes keep them from their
    gradients until their common direction computation."""
    W = Workspace(WS.w[b], GG[t], WS.s[b], GR[t], WS.d[0], WS.Hd[0], GM[t], WS.delta[b])
    O = State(OS.y[b], OS.wx[b], OS.xs[b], OS.act[0], OS.gcoef[0], OS.hcoef[0], GM[t], OS.F[b], OS.mark[b],
              OS.ist[b], OS.fst[b])
    return W, O


@njit(cache=True, nogil=True)
def group_directions(P, S, WS, OS, B, nm, nU, cgi, gTs, sig):
    """Newton directions of the nm lanes ``members[:nm]`` (group slots 0..nm-1), by PCG
    in lock step: each CG iteration computes the Hessian products of the lanes still
    iterating in one pass (erm.hess_rows_group), the rest is each lane's own PCG
    (solver.cg's phases), so every lane gets the direction it would get alone, bit for
    bit.  Their coefficients are in their xs rows and their active rows among U[:nU]
    (erm.group_coefficients / erm.gradient_coefficients, then erm.group_rows).

    A lane's CG vectors are its own contiguous rows (GD, GH: the same kernels and types
    as a lone direction, hence no second specialisation of them -- see cli/precompile.py,
    "One function, one process"); only the pass over the rows reads and writes the
    interleaved D, HD, with a copy on the support on the way in and out."""
    GG, GM, GR, GD, GH, D, HD, U, mask, members, cs, run, GC = B
    for t in range(erm.GROUP):
        run[t] = False
    for t in range(nm):
        W, O = group_lane(WS, OS, members[t], GG, GM, GR, t)
        m_out = nt.preconditioner(P, S, O, W.w, W.M)
        cg.pcg_begin(O, W.g, W.M, W.s, W.r, GD[t], S.eps_cg, m_out, cs[t])
        run[t] = True
    busy = nm
    while busy > 0:
        for t in range(nm):
            if run[t]:
                W, O = group_lane(WS, OS, members[t], GG, GM, GR, t)
                erm.hess_reg(P, O, W.w, GD[t], GH[t])
                _to_column(O, GD[t], D, t)
                _to_column(O, GH[t], HD, t)
        erm.hess_rows_group(P, U, nU, OS.xs, members, run, D, HD, GC)
        for t in range(nm):
            if run[t]:
                W, O = group_lane(WS, OS, members[t], GG, GM, GR, t)
                _from_column(O, HD, t, GH[t])
                if cg.pcg_step(O, W.g, W.M, W.s, W.r, GD[t], GH[t], cs[t]):
                    run[t] = False
                    busy -= 1
    for t in range(nm):
        b = members[t]
        W, O = group_lane(WS, OS, b, GG, GM, GR, t)
        cgi[b] = np.int64(cs[t, cg.ITER])
        sig[b] = cs[t, cg.SIGMA]
        gTs[b] = nt.slope(O, W.g, W.s, sig[b])


@njit(cache=True, nogil=True)
def _to_column(O, v, A, t):
    """A[F, t] = v[F] on the lane's support F (the bias index included)."""
    F = O.F
    full = erm.support_is_all(O)   # then F[q] == q: index directly
    for q in range(O.ist[erm.NF]):
        j = q if full else F[q]
        A[j, t] = v[j]


@njit(cache=True, nogil=True)
def _from_column(O, A, t, v):
    F = O.F
    full = erm.support_is_all(O)   # then F[q] == q: index directly
    for q in range(O.ist[erm.NF]):
        j = q if full else F[q]
        v[j] = A[j, t]


# The sweep's gathers of V's rows (64 bytes: one cache line per nonzero) miss the core's
# caches once X streams through far more than the last-level cache and evicts V (the
# Amazon-670K and AmazonCat-13K shapes: 294 and 672 MB of X, V 8.7 and 13 MB); asking
# for the row of the nonzero V_AHEAD places on overlaps those misses.  Measured in one
# process, 2026-11-27, 16 lanes, one thread, ns per nonzero, medians of 6 alternating
# runs: AmazonCat-13K shape 5.05 -> 4.07 (prefetch 24 ahead) / 4.57 (12 ahead) / 5.14
# (40 ahead), 5.62 -> 4.85 (16) / 4.89 (24) / 5.91 (32); Amazon-670K shape 3.93 -> 3.31
# (24) / 3.41 (12).  Where X fits the cache (debian-deps, 1.4M nonzeros; rcv1-subset1,
# delicious) V stays cached and the prefetches only cost (2.39 -> 2.51, 1.97 -> 2.22,
# 2.41 -> 2.77 ns): hence the size threshold, 64 MiB of X's nonzeros -- twice the
# 32 MiB last-level cache a core of this machine sees.  A prefetch changes no value: the
# sums are the same bit for bit either way.
V_AHEAD = 20
SWEEP_PREFETCH_NNZ = 8 * 2**20


@njit(cache=True, nogil=True)
def _bias_terms(P, V, vb):
    """vb[b] = bias * V[d, b]: the bias coordinate's part of each lane's scores.  Its own
    function, compiled without ``contract`` (see lanes_scores): the product is rounded
    before it is added, as in erm.scores."""
    d = P.n_features
    for b in range(LANES):
        vb[b] = P.bias * V[d, b]


# ``contract`` lets LLVM fuse each multiply-add of the sweep into one FMA instruction.
# That changes no bit: both factors are float32 values, so their product is exact in
# float64, and FMA's single rounding of x * v + a is then the rounding of the addition
# alone (the bias term, float64 x float32 and not exact, is summed in _bias_terms,
# without the flag).  With the flat, unsigned indexing of V below (no wrap-around test
# for negative indices, no run-time row stride) one sweep over debian-deps went from
# 6.57 to 4.20 ns per nonzero (one thread, medians of 11 alternating calls, 2026-11-27,
# Intel Xeon VM; the same outputs bit for bit).
@njit(cache=True, nogil=True)
def lanes_scores(P, V, out, ahead):
    """out[b] = X V[:, b] (+ bias * V[d, b]) for the 16 lanes in one pass over X
    (:func:`lanes_scores_rows` over all rows)."""
    lanes_scores_rows(P, V, out, ahead, np.int64(0), P.indptr.size - 1)   # (int64, as a team passes its rows: one specialisation)


@njit(cache=True, nogil=True, fastmath={"contract"})
def lanes_scores_rows(P, V, out, ahead, r0, r1):
    """out[b, i] = x_i . V[:, b] (+ bias * V[d, b]) for the 16 lanes and the rows i in
    [r0, r1), in one pass over them (threads sharing lanes split the rows, see
    :mod:`.team`).

    V is (n_features + 1, 16), C order, so the 16 values a nonzero needs are adjacent,
    and float32 (nt.DELTA_DTYPE): the fused multiply-adds give the unfused sums' bits only
    because X's float32 values times V's are exact in float64.
    Per lane the sum runs over the row's nonzeros in the same order as
    :func:`headstart.objective.erm.scores`, so it gives bit-identical results (written out
    lane by lane: LLVM's SLP vectoriser turns the 16 accumulators into vector code).
    """
    vb = np.empty(LANES)
    _bias_terms(P, V, vb)
    Vf = V.reshape(V.size)
    nnz = P.indices.size
    # with ``ahead``, prefetch V's rows (V_AHEAD); unsigned like the positions k
    pf_end = np.uint64(max(nnz - V_AHEAD, 0) if ahead else 0)
    for i in range(r0, r1):
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        a4 = 0.0
        a5 = 0.0
        a6 = 0.0
        a7 = 0.0
        a8 = 0.0
        a9 = 0.0
        a10 = 0.0
        a11 = 0.0
        a12 = 0.0
        a13 = 0.0
        a14 = 0.0
        a15 = 0.0
        # (full rows -- dense features -- gain nothing from a loop of their own here: the
        # 16 lanes already hide the index loads; measured, stop 62)
        for k in range(*span(P.indptr, i)):
            if k < pf_end:
                prefetch(Vf, np.uint64(P.indices[k + np.uint64(V_AHEAD)]) * np.uint64(LANES))
            x = np.float64(P.data[k])   # float32 x float32 in float64: exact products
            base = np.uint64(P.indices[k]) * np.uint64(LANES)   # unsigned: see erm.INDEX_DTYPE
            a0 += x * Vf[base + np.uint64(0)]
            a1 += x * Vf[base + np.uint64(1)]
            a2 += x * Vf[base + np.uint64(2)]
            a3 += x * Vf[base + np.uint64(3)]
            a4 += x * Vf[base + np.uint64(4)]
            a5 += x * Vf[base + np.uint64(5)]
            a6 += x * Vf[base + np.uint64(6)]
            a7 += x * Vf[base + np.uint64(7)]
            a8 += x * Vf[base + np.uint64(8)]
            a9 += x * Vf[base + np.uint64(9)]
            a10 += x * Vf[base + np.uint64(10)]
            a11 += x * Vf[base + np.uint64(11)]
            a12 += x * Vf[base + np.uint64(12)]
            a13 += x * Vf[base + np.uint64(13)]
            a14 += x * Vf[base + np.uint64(14)]
            a15 += x * Vf[base + np.uint64(15)]
        out[0, i] = a0 + vb[0]
        out[1, i] = a1 + vb[1]
        out[2, i] = a2 + vb[2]
        out[3, i] = a3 + vb[3]
        out[4, i] = a4 + vb[4]
        out[5, i] = a5 + vb[5]
        out[6, i] = a6 + vb[6]
        out[7, i] = a7 + vb[7]
        out[8, i] = a8 + vb[8]
        out[9, i] = a9 + vb[9]
        out[10, i] = a10 + vb[10]
        out[11, i] = a11 + vb[11]
        out[12, i] = a12 + vb[12]
        out[13, i] = a13 + vb[13]
        out[14, i] = a14 + vb[14]
        out[15, i] = a15 + vb[15]


# With 8 lanes per thread (budget.choose_lanes: where 16 lanes' buffers would exceed the
# memory budget, e.g. WikiLSHTC-325K-sized problems on many threads of a mid-size
# machine) one sweep serves 8 labels: twice the passes over X of 16 lanes, but each
# nonzero costs about half the instructions (one float32 -> float64 conversion of a
# 32-byte row and one FMA instead of two each), so per label it is far from the 8x of
# falling back to one lane.  The same sums in the same order as lanes_scores and
# erm.scores, bit for bit.
HALF_LANES = LANES // 2


@njit(cache=True, nogil=True)
def _bias_terms8(P, V, vb):
    """_bias_terms for 8 lanes (without ``contract``, see there)."""
    d = P.n_features
    for b in range(HALF_LANES):
        vb[b] = P.bias * V[d, b]


@njit(cache=True, nogil=True, fastmath={"contract"})
def lanes_scores8(P, V, out, ahead):
    """:func:`lanes_scores` for 8 lanes: V is (n_features + 1, 8), float32, C order."""
    n = P.indptr.size - 1
    vb = np.empty(HALF_LANES)
    _bias_terms8(P, V, vb)
    Vf = V.reshape(V.size)
    nnz = P.indices.size
    pf_end = np.uint64(max(nnz - V_AHEAD, 0) if ahead else 0)
    for i in range(n):
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        a4 = 0.0
        a5 = 0.0
        a6 = 0.0
        a7 = 0.0
        for k in range(*span(P.indptr, i)):
            if k < pf_end:
                prefetch(Vf, np.uint64(P.indices[k + np.uint64(V_AHEAD)]) * np.uint64(HALF_LANES))
            x = np.float64(P.data[k])
            base = np.uint64(P.indices[k]) * np.uint64(HALF_LANES)
            a0 += x * Vf[base + np.uint64(0)]
            a1 += x * Vf[base + np.uint64(1)]
            a2 += x * Vf[base + np.uint64(2)]
            a3 += x * Vf[base + np.uint64(3)]
            a4 += x * Vf[base + np.uint64(4)]
            a5 += x * Vf[base + np.uint64(5)]
            a6 += x * Vf[base + np.uint64(6)]
            a7 += x * Vf[base + np.uint64(7)]
        out[0, i] = a0 + vb[0]
        out[1, i] = a1 + vb[1]
        out[2, i] = a2 + vb[2]
        out[3, i] = a3 + vb[3]
        out[4, i] = a4 + vb[4]
        out[5, i] = a5 + vb[5]
        out[6, i] = a6 + vb[6]
        out[7, i] = a7 + vb[7]


@njit(cache=True, nogil=True)
def _touch(V, out):
    """Read V once, in order, right before the sweep gathers its rows at random.

    Between two sweeps every lane streams its own buffers (a few MB each), which
    evicts V; gathering its rows back one random miss at a time made the sweep ~25%
    slower (debian-deps), while one sequential read costs a few percent of a sweep."""
    acc = 0.0
    flat = V.ravel()
    for q in range(0, flat.size, 8):   # one double per 64-byte line
        acc += flat[q]
    out[0] = acc


# Threads that share lanes (:mod:`.team`).  The team's lanes are one set: their
# per-lane buffers (the workspace's own rows, the scheduler's :class:`Lanes`), the
# sweep buffer V (blocks, n_features + 1, LANES) and the X-products XV (blocks * LANES,
# n, the workspace's xs) are common to its threads, and any thread runs any lane's
# work between two passes (a lane is taken from a counter, so a thread whose lanes are
# light takes more of them); each thread has its own scratch (the workspace's shared
# rows, the gradient and CG vectors of the lane at hand) and sweeps the rows [r0, r1)
# of X for every lane.  ``sync`` (int64): the barrier's two words (_atomic.COUNT,
# GENERATION), the label counter, a stop word (out of time), two busy-lane sums and two
# lane counters (alternating passes); ``owner[k]``: the thread that finished label k
# (its weights are in that thread's output); ``stats``: the chunk's statistics, one
# table for the team.
Team = namedtuple("Team", ["V", "XV", "r0", "r1", "sync", "owner", "threads", "me", "lanes", "stats"])
TEAM_NEXT, TEAM_STOP, TEAM_BUSY, TEAM_LANE = 2, 3, 4, 6
TEAM_SYNC_WORDS = 8


@njit(cache=True, nogil=True)
def team_take(team, nl, deadline, abort):
    """The next label (index into the chunk) for this thread, or -1: none left, the team
    aborted, or out of time (then no thread of the team takes one any more).  The labels
    taken are always 0 .. started-1, every one of them trained."""
    if atomic.load(abort, 0) != 0 or atomic.load(team.sync, TEAM_STOP) != 0:
        return -1
    if deadline > 0.0 and nt.now() > deadline:
        atomic.store(team.sync, TEAM_STOP, 1)
        return -1
    k = atomic.fetch_add(team.sync, TEAM_NEXT, 1)
    if k >= nl:
        return -1
    return k


@njit(cache=True, nogil=True)
def team_lane(team, rnd, L):
    """The next lane whose work of this pass no thread has taken yet, or -1: the lanes
    are handed out in the pass's order (the costliest first, :func:`team_order`, where
    the team forms no direction groups; else lane order)."""
    q = atomic.fetch_add(team.sync, TEAM_LANE + (rnd & 1), 1)
    return team.lanes.order[q] if q < L else -1


@njit(cache=True, nogil=True)
def team_order(cost, order):
    """order = the lanes by the seconds of their work in the last pass, longest first
    (ties by lane).  Longest-processing-time-first: the lane that would end a pass late
    starts it, while the short ones fill the other threads' time.  Replayed on measured
    iteration times (benchmarks/team_balance.py --order prev), the threads of a team of
    two were busy 0.96-0.99 of the lane phase instead of 0.93-0.96 in lane order, a
    team of four 0.82-0.92 instead of 0.74-0.87.  The order changes only which thread
    does a lane's work, never the work.  Not used where the team forms direction groups
    (:func:`team_sweep`'s ``longest_first``): there lane order was faster, the logistic
    loss on the Amazon-670K shape 1.13x / 1.22x the time of lone threads against
    1.29x / 1.28x (docs/design.md, "Lane order where the threads form direction groups")."""
    L = order.size
    for b in range(L):
        order[b] = b
    for i in range(1, L):            # insertion sort: L = 16 per block
        b = order[i]
        c = cost[b]
        j = i - 1
        while j >= 0 and cost[order[j]] < c:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = b


@njit(cache=True, nogil=True)
def team_sweep(P, team, busy, rnd, abort, touched, longest_first):
    """This thread's part of the team's pass over X (``busy``: the lanes it left busy).
    Every lane's V column is written when the first barrier opens; the second keeps any
    thread from reading X-products before every thread has written its rows.  Returns
    the team's busy lanes, 0 when none is (the chunk is done), -1 when the team
    aborted.  ``longest_first``: the next pass hands out the lanes longest first
    (:func:`team_order`), else in lane order."""
    word = TEAM_BUSY + (rnd & 1)    # the sum of the pass after next starts from 0 again
    atomic.fetch_add(team.sync, word, busy)
    if not atomic.barrier(team.sync, team.threads, abort):
        return -1
    total = atomic.load(team.sync, word)
    if total == 0:
        return 0
    if team.me == 0 and longest_first:
        # every lane's work of the pass is done (the barrier), none of the next has
        # started (the second one): the next pass's order
        team_order(team.lanes.cost, team.lanes.order)
    ahead = P.indices.size > SWEEP_PREFETCH_NNZ
    for q in range(team.V.shape[0]):
        _touch(team.V[q], touched)
        lanes_scores_rows(P, team.V[q], team.XV[q * LANES:(q + 1) * LANES], ahead, team.r0, team.r1)
    if not atomic.barrier(team.sync, team.threads, abort):
        return -1
    if team.me == 0:
        # every thread has read this sum and taken its last lane of this pass (before the
        # first barrier); the next pass counts in the other words, and the one after
        # waits for this thread at its first barrier
        atomic.store(team.sync, word, 0)
        atomic.store(team.sync, TEAM_LANE + (rnd & 1), 0)
    return total


@njit(cache=True, nogil=True)
def _copy(dst, src, n):
    """dst[:n] = src[:n] as a plain loop: numba's array assignment carries shape checks
    whose error formatting took a few seconds of every first compile."""
    for i in range(n):
        dst[i] = src[i]


@njit(cache=True, nogil=True)
def _copy_range(dst, at, src, start, n):
    for i in range(n):
        dst[at + i] = src[start + i]


@njit(cache=True, nogil=True)
def _grow(a, need):
    if need <= a.size:
        return a
    b = np.empty(max(need, 2 * a.size), dtype=a.dtype)
    _copy(b, a, a.size)
    return b


@njit(cache=True, nogil=True)
def positives_sum(P, pos, psum):
    """psum = sum of the positive rows, bias coordinate included."""
    psum[:] = 0.0
    d = P.n_features
    for i in pos:
        lo, hi = span(P.indptr, i)
        if full_row(lo, hi, d):
            for t in range(U64(0), hi - lo):
                psum[t] += P.data[lo + t]
        else:
            for p in range(lo, hi):
                psum[P.indices[p]] += P.data[p]
    psum[psum.size - 1] = P.bias * pos.size


@njit(cache=True, nogil=True)
def setup_label(P, O, W, plan, colsum, psum, pos, j, epsilon, d1_zero, cost_scale, cost_pos, cost_neg):
    """Labels, costs, stopping tolerance and start vector of label j; returns
    (tol, ||grad f(0)||, True when X w0 is still to be computed)."""
    n = O.wx.size
    nv = W.w.size
    npos = pos.size
    cp = cost_scale * (cost_pos[j] if cost_pos.size > 0 else 1.0)
    cn = cost_scale * (cost_neg[j] if cost_neg.size > 0 else 1.0)
    erm.set_label(O, pos, cp, cn)
    positives_sum(P, pos, psum)
    gnorm0 = erm.zero_gradient_norm(psum, colsum, nv, cp, cn, d1_zero)
    tol = nt.relative_tolerance(epsilon, npos, n) * gnorm0
    need = initial_weights(plan, P, O, W.w, psum, pos, j)
    if need:
        erm.round_start(W.w)   # X w0 comes from the float32 sweep buffer
    return tol, gnorm0, need


# The scheduler's state of each lane: its phase, the label it holds (index into the
# chunk), Newton iterations and CG steps (this one's, all), f, ||g||, g.s and sigma of
# the direction, whether the direction needs erm.remainder after the sweep, the stopping
# tolerance, seconds of the iteration and of the label so far, and (``pend``) a lane
# waiting for its group's gradients: f before, f, step, active share.  A team's lanes
# also keep the seconds of their work in the last pass (``cost``, read with the clock
# whether or not the run records times) and the order in which the next pass hands
# them out (``order``, :func:`team_order`).
Lanes = namedtuple("Lanes", ["phase", "slot", "it", "cgi", "cgt", "exact", "fv", "gn", "gTs", "sig", "tol",
                             "t_iter", "t_label", "pend", "cost", "order"])


@njit(cache=True, nogil=True)
def make_lanes(L):
    """:class:`Lanes` for L idle lanes."""
    return Lanes(np.zeros(L, dtype=np.int64), np.full(L, -1, dtype=np.int64), np.zeros(L, dtype=np.int64),
                 np.zeros(L, dtype=np.int64), np.zeros(L, dtype=np.int64), np.zeros(L, dtype=np.bool_),
                 np.zeros(L), np.zeros(L), np.zeros(L), np.zeros(L), np.zeros(L), np.zeros(L), np.zeros(L),
                 np.zeros((L, 4)), np.zeros(L), np.arange(L))


@njit(cache=True, nogil=True)
def _column(V, b):
    """Lane b's column of the sweep buffer V (blocks, n_features + 1, LANES)."""
    return V[b // LANES, :, b % LANES]


@njit(cache=True, nogil=True)
def train_chunk(P, S, WS, OS, B, plan, post, colsum, y_indptr, y_indices, labels, epsilon, d1_zero, cost_scale,
                cost_pos, cost_neg, deadline, abort, rec_f, rec_act, rec_step, rec_cg, rec_time, timing, team):
    """Train ``labels`` with the lane workspace (WS, OS) (arrays with a leading lane axis).

    Returns (indptr, indices, data, intercept, stats, started) of the weights kept by the
    post-processing ``post``, rows in the order of ``labels``; per-iteration records go
    into rec_*[k, :] for the k-th label.  With ``deadline`` > 0 (a perf_counter time) no
    label starts after it: only labels[:started] are trained (labels are handed out in
    order).  ``abort`` (one byte, shared with the thread that called): once another
    thread sets it, no label starts and the call returns before its next pass over X
    with nothing trained (started = 0), so that Ctrl-C stops a run within about one
    Newton iteration of the lanes, not a chunk (minutes from a zero start at scale).
    Iteration durations include the label's share of the batched pass over X.

    ``team`` (a :class:`Team`, or None): this thread is one of ``team.threads`` that
    call train_chunk together with the same ``labels``, the same lanes (WS, OS's own
    rows and ``team.lanes``) and records, each with its own scratch (WS, OS's shared
    rows).  Labels are then handed out from the team's counter, lanes' work from a
    counter per pass, the pass over X is shared (each thread sweeps its rows for all the
    lanes, between two barriers) and the call returns when no lane is busy; a thread's
    output rows are those of the labels it finished (``team.owner``), the statistics
    are the team's.  None: the thread works alone (numba prunes the team's code from
    that specialisation).

    (One loop body serves both: the lane work is written out here, not in functions
    of its own, because numba compiled such functions -- a tuple of the chunk's ~30
    arrays passed to each -- in 1.3x the time of the whole kernel: 33.6 s against
    25.4 s, stop 71.  Small helpers of a few arguments cost nothing measurable: with
    the iteration's booking and a finished lane's release in :func:`_book` and
    :func:`_release` instead of written out 4 and 3 times, the first compile of a
    bibtex run took 22.8 and 23.2 s against 23.0 and 22.1 s, stop 73.)
    """
    L = WS.w.shape[0]
    nv = WS.w.shape[1]
    nl = labels.size
    psum = np.zeros(nv)
    # the start vector of a finished label, recomputed for its distance statistic (see
    # start_vector): keeping every lane's start for the whole solve cost 8 bytes per
    # feature and lane, 2 x 17 MB on the Amazon-670K shape with 2 threads
    w0 = np.zeros(nv)
    # the sweep buffer: lane b's column is _column(V, b) (float32: see erm.project);
    # per-lane state (:class:`Lanes`) and statistics: a team's are common to its threads
    if team is None:
        V = np.zeros((1, nv, L), dtype=nt.DELTA_DTYPE)
        Ls = make_lanes(L)
        stats = np.zeros((nl, N_STATS))
    else:
        V = team.V
        Ls = team.lanes
        stats = team.stats
    phase, slot, it, cgi, cgt, exact, fv, gn, gTs, sig, tol, t_iter, t_label, pend, lane_cost, _ = Ls
    XV = OS.xs  # the sweep writes each lane's X-product straight into its xs
    touched = np.zeros(1)
    lo = np.zeros(nv)          # scratch of erm.remainder (zero outside the support in use)
    # lanes computing their directions in a group (see DENSE_SHARE).  B is None when the
    # trainer forms no groups (aop with the squared hinge, or fewer than 16 lanes:
    # budget.use_groups): every use of B below sits under "B is
    # not None", which numba prunes before typing, so that specialisation compiles no
    # group code (~2 s of a first run; see use_groups in training/budget.py)
    n = OS.wx.shape[1]
    G = erm.GROUP
    nm = np.int64(0)
    # the group slots whose lanes wait for their gradients (C), nwait of them; the other
    # members joined with a gradient of their own (A) -- in a team, where a thread does a
    # lane's C and A at once, both kinds share a group
    gwait = np.zeros(G, dtype=np.bool_)
    nwait = 0
    gsums = np.zeros((G, 2))    # the group members' bias sums (erm.grad_rows_group)
    # outputs
    starts = np.zeros(nl, dtype=np.int64)
    counts = np.zeros(nl, dtype=np.int64)
    buf_indices = np.empty(1024, dtype=np.int32)
    buf_data = np.empty(1024, dtype=np.float32)
    intercept = np.zeros(nl, dtype=np.float32)
    nnz = np.int64(0)   # not the literal 0: _finish would be compiled a second time for it
    next_k = 0
    started = -1   # labels handed out before the deadline; -1 while there is time
    # the lanes this thread worked on in this pass (in a team a lane whose label a group
    # finished comes again, for its A)
    mine = np.empty(2 * L, dtype=np.int64)
    counted = np.zeros(L, dtype=np.int64)   # the pass + 1 in which a lane was last counted busy
    filled = np.zeros(L, dtype=np.int64)    # the pass + 1 in which a lane's A last ran
    rnd = 0          # passes over X so far
    share = 0.0      # a busy lane's share of the last pass
    while True:
        # --- each lane's work between two passes over X -------------------------------
        # A lone thread takes its lanes in order: the line searches and new directions of
        # all of them (C), then their new labels, starts and first directions (A).  A
        # team's thread takes lanes from the pass's counter and does a lane's C and A at
        # once (any thread may take any lane: a thread whose lanes are light takes more).
        # C: a lane whose last gradient was dense takes a group slot: if its new active
        # set is dense too, its gradient is summed with the group's in one pass over
        # their rows (erm.grad_rows_group) once GROUP lanes wait or the lanes run out, and
        # the survivors compute their directions together (group_directions).  A lane
        # whose new label's start gradient is dense joins a group for its direction (A).
        # A team's thread groups the lanes it takes, so its groups may hold both kinds
        # (the gradients' pass then runs for the waiting ones only); a label the
        # gradients' pass finishes gets its lane's A (the next label) in the same pass.
        nmine = 0
        apend = 0
        q = 0
        taken = -1        # a team's thread: the lane it took last, since t_taken
        t_taken = 0.0
        while True:
            if team is None:
                bt = q if q < L else -1
                q += 1
            else:
                if B is None:
                    # the last lane's work ends where the next is taken (its cost,
                    # team_order; only where the team forms no direction groups, which
                    # hand their lanes out in lane order: team_sweep's longest_first)
                    now = nt.now()
                    if taken >= 0:
                        lane_cost[taken] = now - t_taken
                    taken = bt = team_lane(team, rnd, L)
                    t_taken = now
                else:
                    bt = team_lane(team, rnd, L)
            # the first of the lanes whose A follows now (a lone thread: none, later); a
            # team's A may wait for a group that finishes lanes (they come again)
            a0 = nmine if team is None else apend
            if B is not None and nm > 0 and (nm == G or bt < 0):
                t0 = nt.now() if timing else 0.0
                ng = nm
                for t in range(G):
                    B.run[t] = t < ng and gwait[t]
                nU = erm.group_rows(B.mask, B.U)
                if nwait > 0:
                    for t in range(ng):
                        if gwait[t]:
                            erm.group_gradient_start(P, WS.w[B.members[t]], B.D, B.HD, t)
                    erm.grad_rows_group(P, B.U, nU, B.GC, OS.xs, B.members, B.run, B.D, B.HD, gsums)
                gshare = ((nt.now() - t0) / max(nwait, 1)) if timing else 0.0
                nm = np.int64(0)   # the survivors that compute their directions in the group
                nwait = 0
                for t in range(ng):
                    b2 = B.members[t]
                    if not gwait[t]:
                        # (a team's lane that joined with its gradient done, see below)
                        if nm != t:
                            _copy(B.GG[nm], B.GG[t], nv)
                            _copy(B.GM[nm], B.GM[t], nv)
                        B.members[nm] = b2
                        nm += 1
                        continue
                    gwait[t] = False
                    W, O = group_lane(WS, OS, b2, B.GG, B.GM, B.GR, t)
                    k = slot[b2]
                    t0 = nt.now() if timing else 0.0
                    g2 = erm.group_gradient_finish(P, O, W.w, W.g, B.D, B.HD, t, gsums)
                    status, fv[b2], gn[b2] = nt.conclude(S, it[b2], pend[b2, 0], pend[b2, 1], g2, tol[b2],
                                                         pend[b2, 2], pend[b2, 3], cgi[b2], rec_f[k], rec_act[k],
                                                         rec_step[k], rec_cg[k])
                    t_iter[b2] += gshare + ((nt.now() - t0) if timing else 0.0)
                    _book(rec_time, k, it[b2], t_iter, t_label, b2)
                    if status == nt.RUNNING:
                        # it waited only with an active set dense enough for the
                        # direction groups too, so it joins this one
                        t_iter[b2] = 0.0
                        it[b2] += 1
                        if nm != t:   # slot t -> nm: the group's slots stay packed
                            _copy(B.GG[nm], B.GG[t], nv)
                            _copy(B.GM[nm], B.GM[t], nv)
                        B.members[nm] = b2
                        nm += 1
                    else:
                        nnz, buf_indices, buf_data = _finish(P, O, W, post, plan, psum, y_indptr, y_indices,
                                                             labels[k], w0, k, status, it[b2], cgt[b2], fv[b2],
                                                             gn[b2], t_label[b2], stats, intercept, starts, counts,
                                                             nnz, buf_indices, buf_data)
                        _release(phase, b2, team, k)
                        if team is not None:
                            # its A (a new label) now, not a pass later: no other thread
                            # takes this lane again in this pass
                            mine[nmine] = b2
                            nmine += 1
                if nm > 0:
                    # the coefficients are in the survivors' xs rows, their rows within U
                    _run_group(P, S, WS, OS, B, nm, nU, cgi, gTs, sig, cgt, exact, V, t_iter, timing)
                    nm = np.int64(0)
            if bt >= 0:
                b1 = bt
                mine[nmine] = b1
                nmine += 1
                if timing and phase[b1] != IDLE:
                    t_iter[b1] += share
                if phase[b1] == NEED_STEP:
                    ts = nm if nm < G and OS.ist[b1, erm.NACT] * DENSE_SHARE >= n else -1
                    if B is not None and ts >= 0:
                        W, O = group_lane(WS, OS, b1, B.GG, B.GM, B.GR, ts)
                    else:
                        W, O = lane(WS, OS, b1)
                    k = slot[b1]
                    Vb = _column(V, b1)
                    t0 = nt.now() if timing else 0.0
                    if exact[b1]:
                        erm.remainder(P, O, W.w, W.s, sig[b1], Vb, lo)
                    erm.unproject(O, Vb)  # Vb is zero outside the support it was written on
                    if B is not None and ts >= 0:
                        # nt.advance in its parts, so that a dense gradient can wait for the group's
                        act_frac = nt.active_fraction(O)
                        fold = fv[b1]
                        alpha, fnew = erm.line_search(P, O, W.w, W.s, sig[b1], gTs[b1], fold, S.ls_eta,
                                                      S.ls_max_steps)
                        g2 = gn[b1]
                        if alpha != 0.0:
                            wsq = erm.step_move(P, O, W.w, W.s, sig[b1], alpha)
                            if erm.dense_support(P, O) and O.ist[erm.NACT] * DENSE_SHARE >= n:
                                # (a lane less dense than the direction groups' share would
                                # make the group's pass run over rows that are mostly the
                                # others', see DENSE_SHARE)
                                erm.gradient_coefficients(O, B.GC[ts], OS.xs[b1], B.mask)
                                pend[b1, 0] = fold
                                pend[b1, 1] = fnew
                                pend[b1, 2] = alpha
                                pend[b1, 3] = act_frac
                                B.members[nm] = b1
                                gwait[nm] = True
                                nwait += 1
                                nm += 1
                                t_iter[b1] += (nt.now() - t0) if timing else 0.0
                                continue   # (a lone thread's lane: its A comes after all C)
                            g2 = erm.step_grad(P, O, W.w, W.g, wsq)
                        status, fv[b1], gn[b1] = nt.conclude(S, it[b1], fold, fnew, g2, tol[b1], alpha, act_frac,
                                                             cgi[b1], rec_f[k], rec_act[k], rec_step[k], rec_cg[k])
                    else:
                        status, fv[b1], gn[b1] = nt.advance(P, S, O, W, it[b1], fv[b1], gn[b1], tol[b1], cgi[b1],
                                                            gTs[b1], sig[b1], rec_f[k], rec_act[k], rec_step[k],
                                                            rec_cg[k])
                    t_iter[b1] += (nt.now() - t0) if timing else 0.0
                    _book(rec_time, k, it[b1], t_iter, t_label, b1)
                    if status == nt.RUNNING:
                        # (an active set that is not dense enough for the gradients' group
                        # is not for the directions' either: every direction here is the
                        # lane's own)
                        t_iter[b1] = 0.0
                        t0 = nt.now() if timing else 0.0
                        it[b1] += 1
                        cgi[b1], gTs[b1], sig[b1] = nt.direction(P, S, O, W)
                        cgt[b1] += cgi[b1]
                        exact[b1] = erm.project(O, W.w, W.s, sig[b1], Vb)
                        t_iter[b1] += (nt.now() - t0) if timing else 0.0
                    else:
                        nnz, buf_indices, buf_data = _finish(P, O, W, post, plan, psum, y_indptr, y_indices,
                                                             labels[k], w0, k, status, it[b1], cgt[b1], fv[b1],
                                                             gn[b1], t_label[b1], stats, intercept, starts, counts,
                                                             nnz, buf_indices, buf_data)
                        _release(phase, b1, team, k)
            elif team is None:
                a0 = 0
            # A: refill idle lanes and run every phase that needs no pass over X
            a1 = nmine if (team is not None or bt < 0) else a0
            if team is not None:
                apend = a1
            for qa in range(a0, a1):
                b = mine[qa]
                if phase[b] == NEED_STEP or filled[b] == rnd + 1:
                    continue
                filled[b] = rnd + 1   # (a lane that comes again in a team's pass: once)
                ts = nm if nm < G else -1   # the group slot lane b may join
                if B is not None and ts >= 0:
                    W, O = group_lane(WS, OS, b, B.GG, B.GM, B.GR, ts)
                else:
                    W, O = lane(WS, OS, b)
                while phase[b] != NEED_STEP:
                    t0 = nt.now() if timing else 0.0
                    if phase[b] == IDLE:
                        if team is not None:
                            k = team_take(team, nl, deadline, abort)
                            if k < 0:
                                break
                        else:
                            if abort[0] != 0:
                                next_k = nl       # stopping: no new label (and none of the chunk is kept)
                            if next_k < nl and deadline > 0.0 and nt.now() > deadline:
                                started = next_k
                                next_k = nl       # out of time: hand out nothing more
                            if next_k >= nl:
                                break
                            k = next_k
                            next_k += 1
                        slot[b] = k
                        j = labels[k]
                        pos = y_indices[y_indptr[j]: y_indptr[j + 1]]
                        tol[b], g0, need = setup_label(P, O, W, plan, colsum, psum, pos, j, epsilon, d1_zero,
                                                       cost_scale, cost_pos, cost_neg)
                        stats[k, 0] = pos.size
                        stats[k, 8] = g0
                        stats[k, 9] = tol[b]
                        it[b] = 0
                        cgt[b] = 0
                        t_label[b] = 0.0
                        t_iter[b] = 0.0
                        if need:
                            _copy(_column(V, b), W.w, nv)
                            phase[b] = NEED_START
                            if timing:
                                t_iter[b] += nt.now() - t0
                            break
                    else:  # NEED_START, its X w0 has just been computed
                        _copy(O.wx, XV[b], O.wx.size)
                        _column(V, b)[:] = 0.0
                    k = slot[b]
                    status, fv[b], gn[b] = nt.start(P, O, W, tol[b], rec_f[k], rec_act[k])
                    t_started = nt.now() if timing else 0.0
                    stats[k, 4] = fv[b]
                    stats[k, 6] = gn[b]
                    joined = False
                    if status == nt.RUNNING:
                        it[b] = 1
                        if B is not None and ts >= 0 and O.ist[erm.NACT] * DENSE_SHARE >= n:
                            erm.group_coefficients(O, OS.xs[b], B.mask)
                            B.members[nm] = b
                            nm += 1
                            joined = True
                        else:
                            cgi[b], gTs[b], sig[b] = nt.direction(P, S, O, W)
                            cgt[b] += cgi[b]
                            exact[b] = erm.project(O, W.w, W.s, sig[b], _column(V, b))
                    dt = (nt.now() - t0) if timing else 0.0
                    if status == nt.RUNNING:
                        # the start's time is iteration 0's, the first direction's belongs
                        # to iteration 1, as in a direction group (_run_group books it
                        # after this reset): helper-57 found it in iteration 0 here, so the
                        # figure of iteration durations compared aop's iteration 0 with
                        # zero's iteration 1
                        t_iter[b] += t_started - t0
                        _book(rec_time, k, 0, t_iter, t_label, b)
                        t_iter[b] = dt - (t_started - t0)
                        phase[b] = NEED_STEP
                    else:
                        t_iter[b] += dt
                        _book(rec_time, k, 0, t_iter, t_label, b)
                        nnz, buf_indices, buf_data = _finish(P, O, W, post, plan, psum, y_indptr, y_indices,
                                                             labels[k], w0, k, status, it[b], cgt[b], fv[b], gn[b],
                                                             t_label[b], stats, intercept, starts, counts, nnz,
                                                             buf_indices, buf_data)
                        _release(phase, b, team, k)
                    if B is not None and joined and nm == G and nwait == 0:
                        # (in a team, a group that still waits for gradients is run at the
                        # top of the loop, the gradients first)
                        _run_group(P, S, WS, OS, B, nm, erm.group_rows(B.mask, B.U), cgi, gTs, sig,
                                   cgt, exact, V, t_iter, timing)
                        nm = np.int64(0)
            if bt < 0:
                break
        if B is not None and nm > 0:
            _run_group(P, S, WS, OS, B, nm, erm.group_rows(B.mask, B.U), cgi, gTs, sig,
                       cgt, exact, V, t_iter, timing)
            nm = np.int64(0)
        busy = 0
        for qa in range(nmine):
            b = mine[qa]
            if phase[b] != IDLE and counted[b] != rnd + 1:
                counted[b] = rnd + 1
                busy += 1
        # --- the pass over X: scores of start vectors and search directions ------------
        t0 = nt.now() if timing else 0.0
        if team is not None:
            # this thread's rows for all the team's lanes, between two barriers
            # longest lanes first only where the threads form no direction groups: with
            # them a thread's lanes wait for its group, and a lane's cost says little of
            # what it holds up (lane order was faster there, see team_order)
            total = team_sweep(P, team, busy, rnd, abort, touched, B is None)
            if total <= 0:
                break         # no lane is busy, or the team gave up
        else:
            total = busy
            if busy == 0:
                break
            if abort[0] != 0:
                break         # the lanes' labels are unfinished: started = 0 below
            if L == LANES:
                _touch(V[0], touched)
                lanes_scores(P, V[0], XV, P.indices.size > SWEEP_PREFETCH_NNZ)
            elif L == HALF_LANES:
                _touch(V[0], touched)
                lanes_scores8(P, V[0], XV, P.indices.size > SWEEP_PREFETCH_NNZ)
            else:
                for b in range(L):
                    if phase[b] != IDLE:
                        erm.scores(P, np.ascontiguousarray(_column(V, b)), XV[b])
        share = ((nt.now() - t0) / total) if timing else 0.0
        rnd += 1
    if team is not None:
        started = min(atomic.load(team.sync, TEAM_NEXT), nl)   # final: no thread takes a label now
    if abort[0] != 0:
        started = 0   # set while the chunk ran: none of it is kept (labels unfinished or never handed out)
    if started < 0:
        started = nl
    # gather the rows into label order
    out_indptr = np.zeros(started + 1, dtype=np.int64)
    for k in range(started):
        out_indptr[k + 1] = out_indptr[k] + counts[k]
    out_indices = np.empty(out_indptr[started], dtype=np.int32)
    out_data = np.empty(out_indptr[started], dtype=np.float32)
    for k in range(started):
        a = out_indptr[k]
        _copy_range(out_indices, a, buf_indices, starts[k], counts[k])
        _copy_range(out_data, a, buf_data, starts[k], counts[k])
    return out_indptr, out_indices, out_data, intercept[:started], stats[:started], started


@njit(cache=True, nogil=True)
def _run_group(P, S, WS, OS, B, nm, nU, cgi, gTs, sig, cgt, exact, V, t_iter, timing):
    """The group's directions (:func:`group_directions`), then each member's projected
    direction for the sweep; the group's time is shared out among its members."""
    t0 = nt.now() if timing else 0.0
    group_directions(P, S, WS, OS, B, nm, nU, cgi, gTs, sig)
    for t in range(nm):
        b = B.members[t]
        W, O = group_lane(WS, OS, b, B.GG, B.GM, B.GR, t)
        cgt[b] += cgi[b]
        exact[b] = erm.project(O, W.w, W.s, sig[b], _column(V, b))
    if timing:
        share = (nt.now() - t0) / nm
        for t in range(nm):
            t_iter[B.members[t]] += share


@njit(cache=True, nogil=True)
def start_vector(P, O, plan, psum, pos, j, out):
    """Label j's start vector again, into ``out``: the computation of :func:`setup_label`
    (positives' sum, the initialiser, the float32 rounding of a start whose X w0 the
    sweep computed), so ``out`` is bit for bit the start the solver used.  Starts that
    set their scores themselves overwrite O.wx: call it when the label is done."""
    positives_sum(P, pos, psum)
    if initial_weights(plan, P, O, out, psum, pos, j):
        erm.round_start(out)


@njit(cache=True, nogil=True)
def _book(rec_time, k, i, t_iter, t_label, b):
    """Lane b's iteration i is over: its seconds into label k's record (if recorded) and
    the label's total."""
    if i < rec_time.shape[1]:
        rec_time[k, i] = t_iter[b]
    t_label[b] += t_iter[b]


@njit(cache=True, nogil=True)
def _release(phase, b, team, k):
    """Lane b's label k is finished (:func:`_finish`): the lane is free, and in a team the
    label's row is this thread's (``team.owner``)."""
    phase[b] = IDLE
    if team is not None:
        team.owner[k] = team.me


@njit(cache=True, nogil=True)
def _finish(P, O, W, post, plan, psum, y_indptr, y_indices, j, w0, k, status, iters, cg_total, f, gnorm, seconds,
            stats, intercept, starts, counts, nnz, buf_indices, buf_data):
    """Record the label's statistics and append the weights the post-processing keeps
    (|w| >= its threshold; the bias weight is always kept).  ``w0`` is scratch for the
    start vector, recomputed (after the post-processing, which may still read the
    label's state) for the distance ||w - w0||."""
    nv = W.w.size
    d = nv - 1
    tau = postproc.threshold(post, P, O, W, f)
    buf_indices = _grow(buf_indices, nnz + d)
    buf_data = _grow(buf_data, nnz + d)
    start = nnz
    for q in range(d):
        v = W.w[q]
        if v != 0.0 and abs(v) >= tau:
            buf_indices[nnz] = q
            buf_data[nnz] = v
            nnz += 1
    starts[k] = start
    counts[k] = nnz - start
    intercept[k] = W.w[d] * P.bias
    start_vector(P, O, plan, psum, y_indices[y_indptr[j]: y_indptr[j + 1]], j, w0)
    zeroed = O.fst[erm.ZEROED] != 0.0    # the solver started from w = 0 instead (nt.zero_if_worse)
    if zeroed:
        w0[:] = 0.0
    dist = 0.0
    for q in range(nv):
        diff = W.w[q] - w0[q]
        dist += diff * diff
    st = stats[k]
    st[1] = status
    st[2] = iters
    st[3] = cg_total
    st[5] = f
    st[7] = gnorm
    st[10] = math.sqrt(dist)
    st[11] = seconds
    st[12] = nnz - start
    st[13] = 1.0 if zeroed else 0.0
    return nnz, buf_indices, buf_data
