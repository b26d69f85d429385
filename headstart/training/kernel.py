"""The compiled per-label loop: labels in, pruned weights and statistics out.

``train_chunk`` runs entirely in numba without the GIL: for each label of its chunk it
builds y, the positives' sum, the stopping tolerance and the start vector, runs the
Newton solver, and appends the pruned weights (post-processing, after solving) to
growable CSR buffers.  Python only hands out chunks to threads and collects results.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..init import aop, bias as bias_init, pretrained, zero
from ..init.base import AOP, BIAS, PRETRAINED, SHARED, ZERO
from ..solver.newton import newton, now

# Per-label scalar statistics, in this column order.
STAT_FIELDS = ("n_pos", "status", "iterations", "cg_steps", "f_init", "f_final", "gnorm_init",
               "gnorm_final", "gnorm_zero", "tolerance", "distance", "seconds", "nnz")


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
def train_chunk(P, S, W, plan, colsum, y_indptr, y_indices, labels, epsilon, d1_zero, prune,
                rec_f, rec_act, rec_step, rec_cg, rec_time, timing):
    """Train ``labels`` one after the other with the worker's workspace ``W``.

    Returns (indptr, indices, data, intercept, stats) of the pruned weights of the chunk;
    per-iteration records go into rec_*[k, :] for the k-th label of the chunk.
    """
    n = W.wx.size
    nv = W.w.size
    d = nv - 1
    nl = labels.size
    psum = np.zeros(nv)
    w0 = np.zeros(nv)
    out_indptr = np.zeros(nl + 1, dtype=np.int64)
    out_indices = np.empty(1024, dtype=np.int32)
    out_data = np.empty(1024, dtype=np.float32)
    intercept = np.zeros(nl, dtype=np.float32)
    stats = np.zeros((nl, 13))
    nnz = 0
    for k in range(nl):
        t_label = now() if timing else 0.0
        j = labels[k]
        pos = y_indices[y_indptr[j]: y_indptr[j + 1]]
        npos = pos.size
        for i in range(n):
            W.y[i] = -1.0
        for i in pos:
            W.y[i] = 1.0
        positives_sum(P, pos, psum)
        # grad f(0) = C phi'(0) X^T y, and X^T y = 2 * psum - colsum for y in {-1, +1}
        g0 = 0.0
        for q in range(nv):
            v = 2.0 * psum[q] - colsum[q]
            g0 += v * v
        gnorm0 = abs(P.C * d1_zero) * math.sqrt(g0)
        # LIBLINEAR linear.cpp: primal_solver_tol = eps * max(min(pos, neg), 1) / l
        tol = epsilon * max(min(npos, n - npos), 1) / max(n, 1) * gnorm0

        if plan.code == ZERO:
            zero.initial_weights(W.w, W.wx)
        elif plan.code == BIAS:
            bias_init.initial_weights(W.w, W.wx, plan.value, P.bias)
        elif plan.code == SHARED:
            W.w[:] = plan.shared_w
            W.wx[:] = plan.shared_wx
        elif plan.code == AOP:
            aop.initial_weights(P, W.w, W.wx, psum, npos, plan.xmean, plan.s, plan.t)
        elif plan.code == PRETRAINED:
            pretrained.initial_weights(P, W.w, W.wx, j, plan.pre_indptr, plan.pre_indices, plan.pre_data,
                                       plan.pre_intercept, plan.pre_first, plan.pre_count)
        w0[:] = W.w

        status, iters, cg_total, f_init, f_final, g_init, g_final = newton(
            P, W, S, tol, rec_f[k], rec_act[k], rec_step[k], rec_cg[k], rec_time[k], timing)

        dist = 0.0
        for q in range(nv):
            diff = W.w[q] - w0[q]
            dist += diff * diff

        # post-processing: prune small feature weights; the bias weight is kept as is
        out_indices = _grow(out_indices, nnz + d)
        out_data = _grow(out_data, nnz + d)
        start = nnz
        for q in range(d):
            v = W.w[q]
            if v != 0.0 and abs(v) >= prune:
                out_indices[nnz] = q
                out_data[nnz] = v
                nnz += 1
        out_indptr[k + 1] = nnz
        intercept[k] = W.w[d] * P.bias

        st = stats[k]
        st[0] = npos
        st[1] = status
        st[2] = iters
        st[3] = cg_total
        st[4] = f_init
        st[5] = f_final
        st[6] = g_init
        st[7] = g_final
        st[8] = gnorm0
        st[9] = tol
        st[10] = math.sqrt(dist)
        st[11] = (now() - t_label) if timing else 0.0
        st[12] = nnz - start
    return out_indptr, out_indices[:nnz].copy(), out_data[:nnz].copy(), intercept, stats
