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

Each label's arithmetic is exactly what it would be alone (same operations in the
same order; lanes never mix), so results do not depend on lane assignment, chunking
or threads.  Everything runs in numba without the GIL: Python only hands out chunks.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..init import aop, bias as bias_init, pretrained, zero
from ..init.base import AOP, BIAS, PRETRAINED, SHARED, ZERO
from ..objective import erm
from ..solver import newton as nt
from ..solver.newton import Workspace

LANES = 16  # labels per sweep over X; lanes_scores is written out for exactly this many

# Per-label scalar statistics, in this column order.
STAT_FIELDS = ("n_pos", "status", "iterations", "cg_steps", "f_init", "f_final", "gnorm_init",
               "gnorm_final", "gnorm_zero", "tolerance", "distance", "seconds", "nnz")

IDLE, NEED_START, NEED_STEP = 0, 1, 2


def make_lane_workspace(n: int, n_features: int, lanes: int = LANES) -> Workspace:
    """A Workspace whose arrays carry a leading lane axis.

    Only what a label carries from one sweep to the next is per lane: w, s (the
    direction, used by the line search after the sweep), the support F with its marks,
    the scores wx and xs, the labels y.  The gradient, the active set with its
    coefficients and the CG vectors live from the gradient of one iteration to the
    direction computed right after it, for one lane at a time, so all lanes of a thread
    share one copy (leading axis 1): per lane ~1.2 MB instead of ~3 MB on debian-deps,
    and the shared buffers stay in cache from lane to lane.  ``delta`` lives in the
    scheduler's sweep buffer, so lanes get a 1-element one."""
    nv = n_features + 1
    own = lambda dtype=np.float64: np.zeros((lanes, nv), dtype=dtype)  # noqa: E731
    shared = lambda: np.zeros((1, nv))  # noqa: E731
    return Workspace(own(), shared(), own(), shared(), shared(), shared(), shared(), shared(),
                     np.zeros((lanes, n)), np.zeros((lanes, n)),
                     np.zeros((1, n), dtype=nt.ACT_DTYPE), np.zeros((1, n)), np.zeros((1, n)),
                     np.zeros((lanes, n), dtype=nt.Y_DTYPE), own(nt.MARK_DTYPE), own(nt.MARK_DTYPE),
                     np.zeros((lanes, 1), dtype=np.int64), np.zeros((lanes, 1)))


@nb.njit(cache=True, nogil=True)
def lane(WS, b):
    """Lane b's view of the workspace (shared parts at index 0, see make_lane_workspace)."""
    return Workspace(WS.w[b], WS.g[0], WS.s[b], WS.r[0], WS.d[0], WS.z[0], WS.Hd[0], WS.M[0],
                     WS.wx[b], WS.xs[b], WS.act[0], WS.gcoef[0], WS.hcoef[0], WS.y[b], WS.F[b], WS.mark[b],
                     WS.stamp[b], WS.delta[b])


@nb.njit(cache=True, nogil=True)
def lanes_scores(P, V, out):
    """out[b] = X V[:, b] (+ bias * V[d, b]) for the 16 lanes in one pass over X.

    V is (n_features + 1, 16), C order, so the 16 values a nonzero needs are adjacent.
    Per lane the sum runs over the row's nonzeros in the same order as
    :func:`headstart.objective.erm.scores`, so it gives bit-identical results (written out
    lane by lane: LLVM's SLP vectoriser turns the 16 accumulators into vector code).
    """
    n = P.indptr.size - 1
    d = P.n_features
    bias = P.bias
    for i in range(n):
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
        for k in range(P.indptr[i], P.indptr[i + 1]):
            x = P.data[k]
            row = V[P.indices[k]]
            a0 += x * row[0]
            a1 += x * row[1]
            a2 += x * row[2]
            a3 += x * row[3]
            a4 += x * row[4]
            a5 += x * row[5]
            a6 += x * row[6]
            a7 += x * row[7]
            a8 += x * row[8]
            a9 += x * row[9]
            a10 += x * row[10]
            a11 += x * row[11]
            a12 += x * row[12]
            a13 += x * row[13]
            a14 += x * row[14]
            a15 += x * row[15]
        out[0, i] = a0 + bias * V[d, 0]
        out[1, i] = a1 + bias * V[d, 1]
        out[2, i] = a2 + bias * V[d, 2]
        out[3, i] = a3 + bias * V[d, 3]
        out[4, i] = a4 + bias * V[d, 4]
        out[5, i] = a5 + bias * V[d, 5]
        out[6, i] = a6 + bias * V[d, 6]
        out[7, i] = a7 + bias * V[d, 7]
        out[8, i] = a8 + bias * V[d, 8]
        out[9, i] = a9 + bias * V[d, 9]
        out[10, i] = a10 + bias * V[d, 10]
        out[11, i] = a11 + bias * V[d, 11]
        out[12, i] = a12 + bias * V[d, 12]
        out[13, i] = a13 + bias * V[d, 13]
        out[14, i] = a14 + bias * V[d, 14]
        out[15, i] = a15 + bias * V[d, 15]


@nb.njit(cache=True, nogil=True)
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


@nb.njit(cache=True, nogil=True)
def _grow(a, need):
    if need <= a.size:
        return a
    b = np.empty(max(need, 2 * a.size), dtype=a.dtype)
    b[: a.size] = a
    return b


@nb.njit(cache=True, nogil=True)
def positives_sum(P, pos, psum):
    """psum = sum of the positive rows, bias coordinate included."""
    psum[:] = 0.0
    for i in pos:
        for p in range(P.indptr[i], P.indptr[i + 1]):
            psum[P.indices[p]] += P.data[p]
    psum[psum.size - 1] = P.bias * pos.size


@nb.njit(cache=True, nogil=True)
def setup_label(P, W, plan, colsum, psum, pos, j, epsilon, d1_zero):
    """y, stopping tolerance and start vector of label j; returns (tol, gnorm0, needs X w0)."""
    n = W.wx.size
    nv = W.w.size
    npos = pos.size
    for i in range(n):
        W.y[i] = -1
    for i in pos:
        W.y[i] = 1
    positives_sum(P, pos, psum)
    # grad f(0) = C phi'(0) X^T y, and X^T y = 2 * psum - colsum for y in {-1, +1}
    g0 = 0.0
    for q in range(nv):
        v = 2.0 * psum[q] - colsum[q]
        g0 += v * v
    gnorm0 = abs(P.C * d1_zero) * math.sqrt(g0)
    # LIBLINEAR linear.cpp: primal_solver_tol = eps * max(min(pos, neg), 1) / l
    tol = epsilon * max(min(npos, n - npos), 1) / max(n, 1) * gnorm0
    need = False
    if plan.code == ZERO:
        need = zero.initial_weights(W.w, W.wx)
    elif plan.code == BIAS:
        need = bias_init.initial_weights(W.w, W.wx, plan.value, P.bias)
    elif plan.code == SHARED:
        W.w[:] = plan.shared_w
        W.wx[:] = plan.shared_wx
    elif plan.code == AOP:
        need = aop.initial_weights(P, W.w, W.wx, psum, npos, plan.xmean, plan.s, plan.t)
    elif plan.code == PRETRAINED:
        need = pretrained.initial_weights(P, W.w, W.wx, j, plan.pre_indptr, plan.pre_indices, plan.pre_data,
                                          plan.pre_intercept, plan.pre_first, plan.pre_count)
    return tol, gnorm0, need


@nb.njit(cache=True, nogil=True)
def train_chunk(P, S, WS, plan, colsum, y_indptr, y_indices, labels, epsilon, d1_zero, prune,
                rec_f, rec_act, rec_step, rec_cg, rec_time, timing):
    """Train ``labels`` with the lane workspace ``WS`` (arrays with a leading lane axis).

    Returns (indptr, indices, data, intercept, stats) of the pruned weights, rows in the
    order of ``labels``; per-iteration records go into rec_*[k, :] for the k-th label.
    Iteration durations include the label's share of the batched pass over X.
    """
    L = WS.w.shape[0]
    nv = WS.w.shape[1]
    nl = labels.size
    psum = np.zeros(nv)
    w0 = np.zeros((L, nv))
    V = np.zeros((nv, L))
    XV = WS.xs  # the sweep writes each lane's X-product straight into its xs
    touched = np.zeros(1)
    # per-lane state
    phase = np.zeros(L, dtype=np.int64)
    slot = np.full(L, -1, dtype=np.int64)      # which label (index into labels) a lane holds
    it = np.zeros(L, dtype=np.int64)
    cgi = np.zeros(L, dtype=np.int64)
    cgt = np.zeros(L, dtype=np.int64)
    fv = np.zeros(L)
    gn = np.zeros(L)
    nact = np.zeros(L, dtype=np.int64)
    nF = np.zeros(L, dtype=np.int64)
    wout2 = np.zeros(L)
    gTs = np.zeros(L)
    sig = np.zeros(L)
    tol = np.zeros(L)
    t_iter = np.zeros(L)     # seconds spent on the current iteration so far
    t_label = np.zeros(L)    # seconds spent on the label so far
    # outputs
    starts = np.zeros(nl, dtype=np.int64)
    counts = np.zeros(nl, dtype=np.int64)
    buf_indices = np.empty(1024, dtype=np.int32)
    buf_data = np.empty(1024, dtype=np.float32)
    intercept = np.zeros(nl, dtype=np.float32)
    stats = np.zeros((nl, 13))
    nnz = 0
    next_k = 0
    while True:
        # --- refill idle lanes and run every phase that needs no pass over X --------
        for b in range(L):
            W = lane(WS, b)
            while phase[b] != NEED_STEP:
                t0 = nt.now() if timing else 0.0
                if phase[b] == IDLE:
                    if next_k >= nl:
                        break
                    k = next_k
                    next_k += 1
                    slot[b] = k
                    j = labels[k]
                    pos = y_indices[y_indptr[j]: y_indptr[j + 1]]
                    tol[b], g0, need = setup_label(P, W, plan, colsum, psum, pos, j, epsilon, d1_zero)
                    w0[b] = W.w
                    stats[k, 0] = pos.size
                    stats[k, 8] = g0
                    stats[k, 9] = tol[b]
                    it[b] = 0
                    cgt[b] = 0
                    t_label[b] = 0.0
                    t_iter[b] = 0.0
                    if need:
                        V[:, b] = W.w
                        phase[b] = NEED_START
                        if timing:
                            t_iter[b] += nt.now() - t0
                        break
                else:  # NEED_START, its X w0 has just been computed
                    W.wx[:] = XV[b]
                    V[:, b] = 0.0
                k = slot[b]
                status, fv[b], nact[b], nF[b], wout2[b], gn[b] = nt.start(P, W, tol[b], rec_f[k], rec_act[k])
                stats[k, 4] = fv[b]
                stats[k, 6] = gn[b]
                if status == nt.RUNNING:
                    it[b] = 1
                    cgi[b], gTs[b], sig[b] = nt.direction(P, S, W, nact[b], nF[b], wout2[b])
                    cgt[b] += cgi[b]
                    nt.write_delta(W, nF[b], sig[b], V[:, b])
                dt = (nt.now() - t0) if timing else 0.0
                if status == nt.RUNNING:
                    # the start's time is iteration 0's, the direction's belongs to iteration 1
                    t_iter[b] += dt
                    if rec_time.shape[1] > 0:
                        rec_time[k, 0] = t_iter[b]
                    t_label[b] += t_iter[b]
                    t_iter[b] = 0.0
                    phase[b] = NEED_STEP
                else:
                    t_iter[b] += dt
                    if rec_time.shape[1] > 0:
                        rec_time[k, 0] = t_iter[b]
                    t_label[b] += t_iter[b]
                    nnz, buf_indices, buf_data = _finish(P, W, w0[b], k, status, 0, 0, fv[b], gn[b], t_label[b],
                                                         prune, stats, intercept, starts, counts, nnz,
                                                         buf_indices, buf_data)
                    phase[b] = IDLE
        busy = 0
        for b in range(L):
            if phase[b] != IDLE:
                busy += 1
        if busy == 0:
            break
        # --- the shared pass over X: scores of start vectors and search directions --
        t0 = nt.now() if timing else 0.0
        if L == LANES:
            _touch(V, touched)
            lanes_scores(P, V, XV)
        else:
            for b in range(L):
                if phase[b] != IDLE:
                    erm.scores(P, np.ascontiguousarray(V[:, b]), XV[b])
        if timing:
            share = (nt.now() - t0) / busy
            for b in range(L):
                if phase[b] != IDLE:
                    t_iter[b] += share
        # --- line searches and new directions ------------------------------------
        for b in range(L):
            if phase[b] != NEED_STEP:
                continue
            W = lane(WS, b)
            k = slot[b]
            t0 = nt.now() if timing else 0.0
            nt.clear_delta(W, nF[b], V[:, b])  # V[:, b] is zero outside the support it was written on
            status, fv[b], nact[b], nF[b], wout2[b], gn[b] = nt.advance(
                P, S, W, it[b], fv[b], nact[b], nF[b], wout2[b], gn[b], tol[b], cgi[b], gTs[b], sig[b],
                rec_f[k], rec_act[k], rec_step[k], rec_cg[k])
            if status == nt.RUNNING:
                t_iter[b] += (nt.now() - t0) if timing else 0.0
                if it[b] < rec_time.shape[1]:
                    rec_time[k, it[b]] = t_iter[b]
                t_label[b] += t_iter[b]
                t_iter[b] = 0.0
                t0 = nt.now() if timing else 0.0
                it[b] += 1
                cgi[b], gTs[b], sig[b] = nt.direction(P, S, W, nact[b], nF[b], wout2[b])
                cgt[b] += cgi[b]
                nt.write_delta(W, nF[b], sig[b], V[:, b])
                t_iter[b] += (nt.now() - t0) if timing else 0.0
            else:
                t_iter[b] += (nt.now() - t0) if timing else 0.0
                if it[b] < rec_time.shape[1]:
                    rec_time[k, it[b]] = t_iter[b]
                t_label[b] += t_iter[b]
                nnz, buf_indices, buf_data = _finish(P, W, w0[b], k, status, it[b], cgt[b], fv[b], gn[b],
                                                     t_label[b], prune, stats, intercept, starts, counts, nnz,
                                                     buf_indices, buf_data)
                phase[b] = IDLE
    # gather the rows into label order
    out_indptr = np.zeros(nl + 1, dtype=np.int64)
    for k in range(nl):
        out_indptr[k + 1] = out_indptr[k] + counts[k]
    out_indices = np.empty(out_indptr[nl], dtype=np.int32)
    out_data = np.empty(out_indptr[nl], dtype=np.float32)
    for k in range(nl):
        a = out_indptr[k]
        out_indices[a: a + counts[k]] = buf_indices[starts[k]: starts[k] + counts[k]]
        out_data[a: a + counts[k]] = buf_data[starts[k]: starts[k] + counts[k]]
    return out_indptr, out_indices, out_data, intercept, stats


@nb.njit(cache=True, nogil=True)
def _finish(P, W, w0, k, status, iters, cg_total, f, gnorm, seconds, prune, stats, intercept, starts, counts,
            nnz, buf_indices, buf_data):
    """Record the label's statistics and append its pruned weights (post-processing,
    after solving: weights with |w| < prune become 0; the bias weight is kept)."""
    nv = W.w.size
    d = nv - 1
    dist = 0.0
    for q in range(nv):
        diff = W.w[q] - w0[q]
        dist += diff * diff
    buf_indices = _grow(buf_indices, nnz + d)
    buf_data = _grow(buf_data, nnz + d)
    start = nnz
    for q in range(d):
        v = W.w[q]
        if v != 0.0 and abs(v) >= prune:
            buf_indices[nnz] = q
            buf_data[nnz] = v
            nnz += 1
    starts[k] = start
    counts[k] = nnz - start
    intercept[k] = W.w[d] * P.bias
    st = stats[k]
    st[1] = status
    st[2] = iters
    st[3] = cg_total
    st[5] = f
    st[7] = gnorm
    st[10] = math.sqrt(dist)
    st[11] = seconds
    st[12] = nnz - start
    return nnz, buf_indices, buf_data
