"""One binary problem given as a CSR matrix, solved by the core: the interface that
shortlisted training (:mod:`headstart.shortlist`) and the coordinate solvers' Newton
fallback (:mod:`.coordinate`) use.

Both use the core (objective, solver, initialisers) as a black box that solves *one*
binary problem, and everything they need from it goes through the few functions below,
so that a change of the core's signatures means editing this file only:

* :func:`solver_settings`, :func:`objective_parts`, :func:`label_costs`: the solver
  settings, the loss and regulariser tuples, the cost scale, phi'(0), the
  post-processing plan and the per-label costs (``weighting``) from
  :class:`~headstart.params.TrainParams`;
* :func:`new_buffers` / :func:`workspace_view`: the solver workspace and objective
  state as views of per-thread buffers that grow to the largest sub-problem met (one
  allocation per thread and chunk, not per label);
* :func:`setup` (labels, costs and stopping tolerance of one sub-problem, as the
  core's :func:`headstart.training.kernel.setup_label`) and :func:`solve` (the core's
  Newton solver, :func:`headstart.solver.newton.newton`);
* starts: :func:`prepare_plan` runs an initialiser of the registry
  (:mod:`headstart.init`) on the whole data once, :func:`local_plan` restricts its plan
  to a sub-problem (each initialiser declares its restriction in its own module:
  :func:`headstart.init.base.plan_restriction`), and the registry's own per-label code
  (:func:`headstart.init.initial_weights`) computes the start there.

Stopping rule.  LIBLINEAR's ``eps * max(min(#pos, #neg), 1) / n * ||grad f(0)||`` is
applied to the sub-problem with n = its number of rows and #neg its shortlisted
negatives (the choice DiSMEC++'s cascade trainer makes).  That keeps the rule
scale-free: ||grad f(0)|| = C |phi'(0)| ||X_S^T y_S|| grows with the rows of the
problem, and dividing by the same n cancels it; taking the full data set's n with the
sub-problem's gradient would ask for a tolerance n / |S| times smaller (hundreds of
times for a tail label) than the full problem asks of the same label.  With a
shortlist that holds every instance the two rules coincide.

Starts on a sub-problem.  An initialiser's ``prepare`` builds a *plan* from the whole
data (:class:`headstart.init.TrainingContext`); its per-label code then reads the plan
in the numbering of the problem it is given.  A sub-problem has its own rows and its
own columns (renumbered), so a plan holding arrays must be restricted to it first:
``local_plan(plan, R) -> plan``, R a ``SubProblem`` (both declared in
:mod:`headstart.init.base`, next to ``initial_weights``).  Plans holding scalars only
(zero, bias, and any new initialiser of that kind) need no restriction and are used as
they are; a plan with arrays is restricted by the code its own module attaches (aop and
multi-pos: the mean instance of the sub-problem; mean and ovap: their shared vector and
its scores gathered; pretrained: the label's row mapped to the local columns), so a new
initialiser needs no edit here (docs/shortlist.md, "Starts").
"""

from __future__ import annotations

import math

import numpy as np

from .._compile import njit
from ..errors import ParameterError
from ..params import method_of
from ..init import REGISTRY as INIT_REGISTRY
from ..init import TrainingContext as _TrainingContext
from ..init import initial_weights
from ..init.base import SubProblem, local_plan, plan_supported  # noqa: F401  (re-exported)
from ..init.pretrained import PretrainedPlan as _PretrainedPlan
from ..init.zero import ZeroPlan
from ..objective import erm as _erm
from ..objective import losses as _losses
from ..objective import regularizers as _regularizers
from ..postproc.base import threshold as _threshold
# the chunk machinery's, re-exported
from .chunks import (ChunkResult, Restart, assemble, compile_call, label_chunks,  # noqa: F401
                     note_zero_starts, pruning_meta, report_problems, run_chunks, sorted_unique)
from ..solver import direct as _direct
from ..solver import newton as _nt
from ..objective import rowspan as _rowspan

STATUS_NAMES = _nt.STATUS_NAMES
CONVERGED = _nt.CONVERGED


canonical_rows = _erm.canonical_rows    # what the sub-problems' rows need of X (sorted, unique indices)


def solver_settings(params):
    return _nt.settings(params)


def objective_parts(params, dense: bool = False):
    """(loss tuple, regulariser tuple, cost scale C / reg_scale, phi'(0), post-processing
    plan) of the kernels, after refusing what shortlisted training does not offer."""
    from .. import postproc

    if dense and params.regularizer != "l2":
        raise ParameterError(f"dense + sparse features need regularizer 'l2' (the separate scales are "
                             f"column rescalings, exact for L2 only), got {params.regularizer!r}")
    if dense and params.sparsify > 0:
        raise ParameterError("dense + sparse features need sparsify = 0 (its threshold would be computed on "
                             "the rescaled columns); use prune")
    if _regularizers.get(params.regularizer).solver != "newton":
        raise ParameterError(f"regularizer {params.regularizer!r} is solved by coordinate descent over every "
                             f"instance; shortlisted training takes the Newton-CG regularisers "
                             f"(l2, l1 (Huber), l1-relaxed, huber, elastic-*)")
    if method_of(params) == "dual":
        raise ParameterError("l2_solver 'dual' trains over every instance; shortlisted training takes the "
                             "Newton-CG method (l2_solver 'newton')")
    loss = _losses.make(params)
    reg = _regularizers.make(params)
    d1 = float(_losses.get(params.loss).d1_at_zero(params))
    return loss, reg, float(params.C) / float(params.reg_scale), d1, postproc.make(params)


def label_costs(params, label_counts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-label (c_+, c_-) before C, as the core trainer computes them from the *whole*
    data's label counts and size (so a shortlisted label has the costs of the full
    problem); two empty arrays for ``weighting='none'`` (every cost 1)."""
    if params.weighting == "none":
        return np.zeros(0), np.zeros(0)
    from ..objective import weighting as _weighting

    return _weighting.label_costs(params, label_counts, n)


@njit(cache=True, nogil=True)
def buffers_fit(B, m, d):
    W, O = B
    return O.wx.size >= m and W.w.size >= d + 1


@njit(cache=True, nogil=True)
def new_buffers(m, d):
    """The core's solver workspace and objective state of capacity m rows x d features
    (same shapes and dtypes as newton.make_workspace / erm.make_state)."""
    nv = d + 1
    W = _nt.Workspace(np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv),
                      np.zeros(nv), np.zeros(nv, dtype=_nt.DELTA_DTYPE))
    O = _erm.State(np.zeros(m, dtype=_erm.Y_DTYPE), np.zeros(m), np.zeros(m), np.zeros(m, dtype=_erm.ACT_DTYPE),
                   np.zeros(m), np.zeros(m), np.zeros(nv), np.zeros(nv, dtype=_erm.SUPPORT_DTYPE),
                   np.zeros(nv, dtype=_erm.MARK_DTYPE), _erm.new_ist(), np.zeros(_erm.FST_SIZE))
    return W, O


@njit(cache=True, nogil=True)
def workspace_view(B, m, d, stamps):
    """(workspace, state) of an m x d sub-problem: the first m rows / d + 1 features of B,
    for a solve that draws at most ``stamps`` support marks (:func:`solve_stamps`).

    The marks are cleared (and the stamps restarted) whenever fewer stamps are left
    before the core would renumber them: its renumbering sees the view only, and marks
    beyond it, left by a wider sub-problem, could then equal a later stamp.  A solve
    that needs more than all of them starts from cleared marks every time, and then its
    renumbering is safe (every mark beyond the view is 0, never a stamp)."""
    W, O = B
    if O.ist[_erm.STAMP] > _erm.MAX_STAMP - stamps:
        O.mark[:] = 0
        O.ist[_erm.STAMP] = 0
    nv = d + 1
    Wv = _nt.Workspace(W.w[:nv], W.g[:nv], W.s[:nv], W.r[:nv], W.d[:nv], W.Hd[:nv], W.M[:nv],
                       W.delta[:nv])
    Ov = _erm.State(O.y[:m], O.wx[:m], O.xs[:m], O.act[:m], O.gcoef[:m], O.hcoef[:m], O.hdiag[:nv], O.F[:nv], O.mark[:nv],
                    O.ist, O.fst)
    return Wv, Ov


@njit(cache=True, nogil=True)
def solve_stamps(S):
    """A bound on the support marks one solve of :func:`solve` / :func:`solve_direct`
    draws (erm._next_stamp: one per gradient at the start, one per Newton step), with
    room to spare."""
    return 4 * (S.max_iter + 2)


@njit(cache=True, nogil=True)
def make_problem(indptr, indices, data, d, bias, loss, reg, regularize_bias):
    """The core's Problem over a CSR sub-matrix (int64 indptr, int32 indices, float32 data;
    the indices viewed as unsigned, like the core's, erm.INDEX_DTYPE)."""
    # no column sums: a sub-problem's gradient never takes the class-constant shortcut
    return _erm.Problem(indptr, indices.view(_erm.INDEX_DTYPE), data, np.int64(d), np.float64(bias), loss, reg, regularize_bias,
                        np.empty(0), np.empty(0))


@njit(cache=True, nogil=True)
def threshold(post, P, V, f):
    """The post-processing's pruning threshold for the solution in V = (W, O)."""
    return _threshold(post, P, V[1], V[0], f)


@njit(cache=True, nogil=True)
def round_start(w):
    """Round a start vector whose scores are still to be computed as the core trainer
    does (its sweep buffer is float32), so that a shortlist of every instance gives the
    full model."""
    _erm.round_start(w)


@njit(cache=True, nogil=True)
def scores(P, w, out):
    """out = X w (+ bias * w[d]): the core's one pass over the rows."""
    _erm.scores(P, w, out)


@njit(cache=True, nogil=True)
def setup(P, O, pos, cost_pos, cost_neg, epsilon, d1_zero, colsum, psum, have_colsum):
    """Labels (+1 on the local rows ``pos``), costs c_+ / c_- (C included) and stopping
    tolerance of a sub-problem, as the core's setup_label does for a full one.  Leaves
    the column sums of the sub-problem and of its positives (bias coordinate last) in
    ``colsum`` / ``psum`` (scratch of at least d + 1; with ``have_colsum`` colsum[:d]
    already holds the column sums).  Returns (tol, ||grad f(0)||)."""
    m = P.indptr.size - 1
    nv = P.n_features + 1
    npos = pos.size
    _erm.set_label(O, pos, cost_pos, cost_neg)
    for j in range(nv):
        psum[j] = 0.0
    if not have_colsum:
        for j in range(nv):
            colsum[j] = 0.0
        for i in range(m):
            for p in range(P.indptr[i], P.indptr[i + 1]):
                colsum[P.indices[p]] += np.float64(P.data[p])
    colsum[nv - 1] = P.bias * m
    for i in pos:
        for p in range(P.indptr[i], P.indptr[i + 1]):
            psum[P.indices[p]] += P.data[p]
    psum[nv - 1] = P.bias * npos
    gnorm0 = _erm.zero_gradient_norm(psum, colsum, nv, cost_pos, cost_neg, d1_zero)
    return _nt.relative_tolerance(epsilon, npos, m) * gnorm0, gnorm0


@njit(cache=True, nogil=True)
def solve(P, V, S, tol, w0):
    """The core's Newton solver from the start in V[0].w (with V[1].wx = X w current);
    ``w0`` (scratch of at least d + 1) gets a copy of the start.

    Returns (status, iterations, cg steps, f_init, f_final, ||g_init||, ||g_final||,
    ||w - w0||); the weights are in V[0].w (bias weight last)."""
    W, O = V
    nv = W.w.size
    for j in range(nv):
        w0[j] = W.w[j]
    empty = np.zeros(0)
    st, it, cg, f0, f1, g_init, g_final = _nt.newton(P, O, W, S, tol, empty, empty, empty,
                                                     np.zeros(0, dtype=np.int64), empty, False)
    if O.fst[_erm.ZEROED] != 0.0:   # the solver started from w = 0 instead (newton.zero_if_worse)
        w0[:nv] = 0.0
    return st, it, cg, f0, f1, g_init, g_final, _distance(W.w, w0)


@njit(cache=True, nogil=True)
def zeroed(V):
    """Whether the last solve on workspace V started from w = 0 instead of its start
    (newton.zero_if_worse: the start scored above f(0))."""
    return V[1].fst[_erm.ZEROED] != 0.0


@njit(cache=True, nogil=True)
def _distance(w, w0):
    """||w - w0|| over w's coordinates (w0 may be longer)."""
    dist = 0.0
    for j in range(w.size):
        dist += (w[j] - w0[j]) ** 2
    return math.sqrt(dist)


# Sub-problems with few rows: the objective in the span of the rows and Newton's method
# with exact steps (objective/rowspan.py, solver/direct.py).
new_span = _rowspan.new_span
span_fits = _rowspan.span_fits


@njit(cache=True, nogil=True)
def direct_applies(reg, m, n, direct_rows):
    """Whether an m-row sub-problem of an n-row data set is solved by :func:`solve_direct`:
    at most ``direct_rows`` rows, the L2 regulariser (the span argument needs it), and
    fewer rows than the data (a sub-problem that is the whole problem is solved as the
    core trainer solves it, so a shortlist of every instance gives its model exactly)."""
    return direct_rows > 0 and m <= direct_rows and m < n and _regularizers.is_l2(reg)


@njit(cache=True, nogil=True)
def solve_direct(P, V, G, S, tol, w0):
    """:func:`solve` by exact Newton steps in the span of the rows (same returns, 0 CG
    steps unless a failed factorisation handed the label to the truncated method); G a
    span buffer that fits the problem (:func:`span_fits`)."""
    W, O = V
    m = P.indptr.size - 1
    st, it, f0, f1, g_init, g_final = _direct.newton(P, O, G, S, tol, W.w, w0, W.g, m)
    cg = 0
    if st == _nt.NUMERICAL and math.isfinite(f1):
        # the factorisation failed (rounding; M >= I in exact arithmetic): the truncated
        # method goes on from the point reached (W.w, O.wx its scores)
        empty = np.zeros(0)
        st, it2, cg, _, f1, _, g_final = _nt.newton(P, O, W, S, tol, empty, empty, empty,
                                                    np.zeros(0, dtype=np.int64), empty, False)
        it += it2
    return st, it, cg, f0, f1, g_init, g_final, _distance(W.w, w0)


# --- starts: the registry's initialisers on sub-problems ---------------------------------
def pretrained_plan(indptr, indices, data, intercept, first: int, count: int):
    """The registry's ``pretrained`` plan from given rows (ascending feature ids) and bias
    weights: labels [first, first + count)."""
    return _PretrainedPlan(indptr, indices, data, intercept, int(first), int(count))


def prepare_plan(name: str, params, X, Y, threads: int = 1):
    """The plan of the registry's initialiser ``name`` prepared on the whole training
    columns X (canonical float32 CSR) and labels Y (CSC), as the core trainer prepares it
    (without its feature renumbering); refused if :func:`local_plan` cannot restrict it."""
    from .kernel import prepare_problem

    P, colsum = prepare_problem(X, params)
    ctx = _TrainingContext(P, X, Y, params, colsum, max(int(threads), 1), None)
    plan = INIT_REGISTRY[name].make(params).prepare(ctx)
    if not plan_supported(plan):
        raise ParameterError(f"initialiser {name!r} cannot start shortlisted training: its plan "
                             f"{type(plan).__name__} holds arrays and has no sub-problem restriction "
                             f"(headstart.training.one_problem.local_plan)")
    return plan


# --- the core's bookkeeping, re-exported (one place to adapt) --------------------------
# (the chunk orchestration itself: run_chunks, label_chunks, assemble, compile_call,
# Restart, ... imported from .chunks at the top of this file)
now = _nt.now  # numba-callable clock (holds the GIL for about a microsecond)


def stat_fields() -> tuple[str, ...]:
    """The per-label statistics columns of the core trainer, in its order."""
    from ..training.kernel import STAT_FIELDS

    return tuple(STAT_FIELDS)
