"""Every call from shortlisted training into the core, in one place.

The core (objective, solver, initialisers) is being rewritten; its signatures may
change.  Shortlisted training uses it as a black box that solves *one* binary problem
given as a CSR matrix, and everything it needs from the core goes through the few
functions below, so that adapting to a new core means editing this file only:

* :func:`solver_settings`, :func:`objective_parts`: the solver settings, the loss and
  regulariser tuples, the cost scale, phi'(0) and the post-processing plan from
  :class:`~headstart.params.TrainParams` (refusing what shortlisted training does not
  offer: per-label weighting, a timeout);
* :func:`new_buffers` / :func:`workspace_view`: the solver workspace and objective
  state as views of per-thread buffers that grow to the largest sub-problem met (one
  allocation per thread and chunk, not per label);
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

from ..errors import ParameterError
from ..init import aop as _aop
from ..objective import erm as _erm
from ..objective import losses as _losses
from ..objective import regularizers as _regularizers
from ..postproc.base import threshold as _threshold
from ..training.trainer import run_in_threads  # noqa: F401  (the trainer's thread pool, re-exported)
from ..solver import newton as _nt

#: initialisations a sub-problem can start from (codes used inside the kernels)
INITS = {"aop": 0, "zero": 1, "bias": 2}
STATUS_NAMES = _nt.STATUS_NAMES
CONVERGED = _nt.CONVERGED
# marks are int32 stamps: the buffers are cleared and the stamp restarted well before
# the core would renumber them (its renumbering only sees the current view)
_STAMP_RESET = 2**30


def solver_settings(params):
    return _nt.settings(params)


def objective_parts(params, dense: bool = False):
    """(loss tuple, regulariser tuple, cost scale C / reg_scale, phi'(0), post-processing
    plan) of the kernels, after refusing what shortlisted training does not offer."""
    from .. import postproc

    if params.weighting != "none":
        raise ParameterError(f"parameter weighting must be 'none' for shortlisted training (the per-label costs "
                             f"are defined on the full data), got {params.weighting!r}")
    if params.timeout > 0:
        raise ParameterError("parameter timeout is not offered for shortlisted training (use sharded training "
                             "and resume instead)")
    if dense and params.regularizer != "l2":
        raise ParameterError(f"dense + sparse features need regularizer 'l2' (the separate scales are "
                             f"column rescalings, exact for L2 only), got {params.regularizer!r}")
    if dense and params.sparsify > 0:
        raise ParameterError("dense + sparse features need sparsify = 0 (its threshold would be computed on "
                             "the rescaled columns); use prune")
    loss = _losses.make(params)
    reg = _regularizers.make(params)
    d1 = float(_losses.get(params.loss).d1_at_zero(params))
    return loss, reg, float(params.C) / float(params.reg_scale), d1, postproc.make(params)


@nb.njit(cache=True, nogil=True)
def buffers_fit(B, m, d):
    W, O = B
    return O.wx.size >= m and W.w.size >= d + 1


@nb.njit(cache=True, nogil=True)
def new_buffers(m, d):
    """The core's solver workspace and objective state of capacity m rows x d features
    (same shapes and dtypes as newton.make_workspace / erm.make_state)."""
    nv = d + 1
    W = _nt.Workspace(np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv),
                      np.zeros(nv), np.zeros(nv), np.zeros(nv, dtype=np.float32))
    O = _erm.State(np.zeros(m, dtype=_erm.Y_DTYPE), np.zeros(m), np.zeros(m), np.zeros(m, dtype=_erm.ACT_DTYPE),
                   np.zeros(m), np.zeros(m), np.zeros(nv), np.zeros(nv, dtype=_erm.MARK_DTYPE),
                   np.zeros(nv, dtype=_erm.MARK_DTYPE), np.zeros(3, dtype=np.int64), np.zeros(3))
    return W, O


@nb.njit(cache=True, nogil=True)
def workspace_view(B, m, d):
    """(workspace, state) of an m x d sub-problem: the first m rows / d + 1 features of B."""
    W, O = B
    if O.ist[_erm.STAMP] >= _STAMP_RESET:
        O.mark[:] = 0
        O.ist[_erm.STAMP] = 0
    nv = d + 1
    Wv = _nt.Workspace(W.w[:nv], W.g[:nv], W.s[:nv], W.r[:nv], W.d[:nv], W.z[:nv], W.Hd[:nv], W.M[:nv],
                       W.delta[:nv])
    Ov = _erm.State(O.y[:m], O.wx[:m], O.xs[:m], O.act[:m], O.gcoef[:m], O.hcoef[:m], O.hdiag[:nv], O.F[:nv], O.mark[:nv],
                    O.ist, O.fst)
    return Wv, Ov


@nb.njit(cache=True, nogil=True)
def make_problem(indptr, indices, data, d, bias, loss, reg, regularize_bias):
    """The core's Problem over a CSR sub-matrix (int64 indptr, int32 indices, float32 data)."""
    return _erm.Problem(indptr, indices, data, np.int64(d), np.float64(bias), loss, reg, regularize_bias)


@nb.njit(cache=True, nogil=True)
def threshold(post, P, V, f):
    """The post-processing's pruning threshold for the solution in V = (W, O)."""
    return _threshold(post, P, V[1], V[0], f)


@nb.njit(cache=True, nogil=True)
def solve(P, V, S, pos, init, init_value, aop_s, aop_t, epsilon, d1_zero, cost_scale, colsum, psum, w0):
    """Train one sub-problem: labels from ``pos`` (local row ids of the positives),
    start, tolerance, Newton (as the core's setup_label + newton).  ``colsum``/``psum``/
    ``w0`` are scratch of at least d + 1.

    Returns (status, iterations, cg steps, f_init, f_final, ||g_init||, ||g_final||,
    ||grad f(0)||, tolerance, ||w - w0||); the weights are in V[0].w (bias weight last).
    """
    W, O = V
    m = O.wx.size
    nv = W.w.size
    npos = pos.size
    _erm.set_label(O, pos, cost_scale, cost_scale)
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
    # grad f(0) = phi'(0) sum_i c_i y_i x_i = phi'(0) c (2 psum - colsum)
    g0 = 0.0
    for j in range(nv):
        v = cost_scale * (2.0 * psum[j] - colsum[j])
        g0 += v * v
    gnorm0 = abs(d1_zero) * math.sqrt(g0)
    tol = epsilon * max(min(npos, m - npos), 1) / max(m, 1) * gnorm0
    need = False
    if init == 0:
        if npos == 0:
            _aop.no_positive_start(P, O, W.w, aop_t)
        else:
            # aop over the sub-problem: its mean instance, its positives
            for j in range(nv):
                colsum[j] /= max(m, 1)
            _aop.mean_separating(P, W.w, m, psum[:nv], npos, colsum[:nv], aop_s, aop_t)
            need = True
    elif init == 1:
        W.w[:] = 0.0
        O.wx[:] = 0.0
    else:
        W.w[:] = 0.0
        W.w[nv - 1] = init_value
        O.wx[:] = init_value * P.bias
    if need:
        _erm.round_start(W.w)   # as the full trainer does (its sweep buffer is float32)
        _erm.scores(P, W.w, O.wx)
    for j in range(nv):
        w0[j] = W.w[j]
    empty = np.zeros(0)
    st, it, cg, f0, f1, g_init, g_final = _nt.newton(P, O, W, S, tol, empty, empty, empty,
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
