"""Every call from shortlisted training into the core, in one place.

The core (objective, solver, initialisers) is being rewritten; its signatures may
change.  Shortlisted training uses it as a black box that solves *one* binary problem
given as a CSR matrix, and everything it needs from the core goes through the few
functions below, so that adapting to a new core means editing this file only:

* :func:`solver_settings`, :func:`loss_code`, :func:`d1_at_zero`: plain values from
  :class:`~headstart.params.TrainParams`;
* :func:`make_buffers` / :func:`workspace_view`: a workspace whose arrays are views of
  per-thread buffers that grow to the largest sub-problem met (one allocation per
  thread and chunk, not per label);
* :func:`solve`: y, stopping tolerance and start vector of one sub-problem (mirroring
  :func:`headstart.training.kernel.setup_label`), then the core's Newton solver
  (:func:`headstart.solver.newton.newton`).

Stopping rule.  LIBLINEAR's ``eps * max(min(#pos, #neg), 1) / n * ||grad f(0)||`` is
applied to the sub-problem with n = its number of rows and #neg its shortlisted
negatives (the choice DiSMEC++'s cascade trainer makes).  That keeps the rule
scale-free: ||grad f(0)|| = C |phi'(0)| ||X_S^T y_S|| grows with the rows of the
problem, and dividing by the same n cancels it; taking the full data set's n with the
sub-problem's gradient would ask for a tolerance n / |S| times smaller (hundreds of
times for a tail label) than the full problem asks of the same label.  With a
shortlist that holds every instance the two rules coincide.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..init import aop as _aop
from ..init import bias as _bias
from ..init import zero as _zero
from ..init.ovap import solver_settings as _solver_settings
from ..objective import erm as _erm
from ..objective import losses as _losses
from ..solver import newton as _nt

#: initialisations a sub-problem can start from (codes used inside the kernels)
INITS = {"aop": 0, "zero": 1, "bias": 2}
STATUS_NAMES = _nt.STATUS_NAMES
CONVERGED = _nt.CONVERGED
# marks are int32 stamps: the buffers are cleared and the stamp restarted well before
# the core would renumber them (its renumbering only sees the current view)
_STAMP_RESET = 2**30


def solver_settings(params):
    return _solver_settings(params)


def loss_code(loss: str) -> int:
    return int(_losses.LOSS_CODES[loss])


def d1_at_zero(loss: str) -> float:
    return float(_losses.d1_at_zero(loss))


def make_buffers(n: int, n_features: int):
    """A core workspace of capacity n rows x n_features features."""
    return _nt.make_workspace(max(int(n), 1), max(int(n_features), 1))


@nb.njit(cache=True, nogil=True)
def buffers_fit(B, m, d):
    return B.wx.size >= m and B.w.size >= d + 1


@nb.njit(cache=True, nogil=True)
def new_buffers(m, d):
    """make_buffers inside compiled code (same shapes and dtypes as the core's)."""
    nv = d + 1
    return _nt.Workspace(np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv),
                         np.zeros(nv), np.zeros(nv), np.zeros(m), np.zeros(m), np.zeros(m, dtype=_nt.ACT_DTYPE),
                         np.zeros(m), np.zeros(m), np.zeros(m, dtype=_nt.Y_DTYPE),
                         np.zeros(nv, dtype=_nt.MARK_DTYPE), np.zeros(nv, dtype=_nt.MARK_DTYPE),
                         np.zeros(1, dtype=np.int64), np.zeros(nv))


@nb.njit(cache=True, nogil=True)
def workspace_view(B, m, d):
    """The workspace of an m x d sub-problem: the first m rows / d + 1 features of B."""
    if B.stamp[0] >= _STAMP_RESET:
        B.mark[:] = 0
        B.stamp[0] = 0
    nv = d + 1
    return _nt.Workspace(B.w[:nv], B.g[:nv], B.s[:nv], B.r[:nv], B.d[:nv], B.z[:nv], B.Hd[:nv], B.M[:nv],
                         B.wx[:m], B.xs[:m], B.act[:m], B.gcoef[:m], B.hcoef[:m], B.y[:m], B.F[:nv], B.mark[:nv],
                         B.stamp, B.delta[:nv])


@nb.njit(cache=True, nogil=True)
def make_problem(indptr, indices, data, d, bias, C, loss, regularize_bias):
    """The core's Problem over a CSR sub-matrix (int64 indptr, int32 indices, float32 data)."""
    return _erm.Problem(indptr, indices, data, np.int64(d), np.float64(bias), np.float64(C), np.int64(loss),
                        regularize_bias)


@nb.njit(cache=True, nogil=True)
def solve(P, W, S, pos, init, init_value, aop_s, aop_t, epsilon, d1_zero, colsum, psum, w0):
    """Train one sub-problem: labels from ``pos`` (local row ids of the positives),
    start, tolerance, Newton.  ``colsum``/``psum`` are scratch of at least d + 1.

    Returns (status, iterations, cg steps, f_init, f_final, ||g_init||, ||g_final||,
    ||grad f(0)||, tolerance); the weights are in W.w (bias weight last).
    """
    m = W.wx.size
    nv = W.w.size
    npos = pos.size
    for i in range(m):
        W.y[i] = -1
    for i in pos:
        W.y[i] = 1
    # column sums of the sub-problem and of its positives (bias coordinate last)
    for j in range(nv):
        colsum[j] = 0.0
        psum[j] = 0.0
    for i in range(m):
        for p in range(P.indptr[i], P.indptr[i + 1]):
            colsum[P.indices[p]] += np.float64(P.data[p])
    colsum[nv - 1] = P.bias * m
    for i in pos:
        for p in range(P.indptr[i], P.indptr[i + 1]):
            psum[P.indices[p]] += P.data[p]
    psum[nv - 1] = P.bias * npos
    # grad f(0) = C phi'(0) X^T y with X^T y = 2 psum - colsum (as the core's setup_label)
    g0 = 0.0
    for j in range(nv):
        v = 2.0 * psum[j] - colsum[j]
        g0 += v * v
    gnorm0 = abs(P.C * d1_zero) * math.sqrt(g0)
    tol = epsilon * max(min(npos, m - npos), 1) / max(m, 1) * gnorm0
    need = False
    if init == 0:
        # aop over the sub-problem: its mean instance, its positives
        for j in range(nv):
            colsum[j] /= max(m, 1)
        need = _aop.initial_weights(P, W.w[:nv], W.wx, psum[:nv], npos, colsum[:nv], aop_s, aop_t)
    elif init == 1:
        need = _zero.initial_weights(W.w, W.wx)
    else:
        need = _bias.initial_weights(W.w, W.wx, init_value, P.bias)
    if need:
        _erm.scores(P, W.w, W.wx)
    for j in range(nv):
        w0[j] = W.w[j]
    empty = np.zeros(0)
    st, it, cg, f0, f1, g_init, g_final = _nt.newton(P, W, S, tol, empty, empty, empty,
                                                     np.zeros(0, dtype=np.int64), empty, False)
    dist = 0.0
    for j in range(nv):
        dist += (W.w[j] - w0[j]) ** 2
    return st, it, cg, f0, f1, g_init, g_final, gnorm0, tol, math.sqrt(dist)


# --- the core's bookkeeping types, re-exported (one place to adapt) ---------------------
def _bookkeeping():
    from ..training import stats as _stats
    from ..training import trainer as _trainer

    return _stats, _trainer


now = _nt.now  # numba-callable clock (holds the GIL for about a microsecond)


def stat_fields() -> tuple[str, ...]:
    """The per-label statistics columns of the core trainer, in its order."""
    from ..training.kernel import STAT_FIELDS

    return tuple(STAT_FIELDS)


def training_stats(labels, table, fields, meta=None):
    """A :class:`headstart.training.stats.TrainingStats` without per-iteration
    trajectories: columns from ``table`` (k x len(fields))."""
    _stats, _ = _bookkeeping()
    k = len(labels)
    cols = {"label": np.asarray(labels, dtype=np.int64).copy()}
    for i, f in enumerate(fields):
        cols[f] = table[:, i]
    empty = {f: np.zeros(0) for f in _stats.ITER_FIELDS}
    return _stats.TrainingStats(_stats.TrainingStats._typed(cols), np.zeros(k + 1, dtype=np.int64), empty,
                                dict(meta or {}))


def concat_stats(parts):
    _stats, _ = _bookkeeping()
    return _stats.TrainingStats.concat(parts)


def chunk_result(labels, weights, intercept, stats):
    """What the sharded writer's sink takes (:class:`headstart.training.trainer.ChunkResult`)."""
    _, _trainer = _bookkeeping()
    return _trainer.ChunkResult(labels, weights, intercept, stats)


def report_problems(stats) -> None:
    _, _trainer = _bookkeeping()
    _trainer.report_problems(stats)


def release_free_memory() -> None:
    from ..training import pages

    pages.release_free_memory()
