"""The regularised, cost-weighted empirical risk of one binary problem,

    f(w) = sum_j r(w_j) + sum_i c_i * phi(y_i * (x_i . w[:d] + bias * w[d]))

with a margin loss phi (:mod:`.losses`), a point-wise regulariser r (:mod:`.regularizers`;
the bias weight w[d] is regularised only with ``regularize_bias``, LIBLINEAR's ``-B 1``
does, the paper's implementation does not) and per-instance costs c_i = c_+ for the
label's positives and c_- for its negatives (C times the label's weights, see
:mod:`.weighting`).  The bias is a virtual feature: never stored in X, the kernels add
``bias * w[d]`` instead.

Like LIBLINEAR's ``l2r_erm_fun`` this module answers the solver's questions -- value,
gradient, Hessian-vector product, diagonal preconditioner, line search, step -- and owns
the state that makes them cheap, in a :data:`State` per label:

* ``wx``, the scores X w, kept current by :func:`step`, so the value never needs a pass
  over X;
* :func:`gradient` computes the active set ``act`` (for margin losses that vanish beyond
  m = 1: the instances with margin < 1, the paper's implicit negative mining), each
  active instance's coefficients ``gcoef = c_i phi'(m_i) y_i`` and ``hcoef = c_i phi''(m_i)``,
  and the *support* F: the features of the active rows.  The Hessian product and the
  preconditioner reuse them until the next step, so they touch only active rows and
  only F;
* with the L2 regulariser the objective is the bare ||w||^2 / 2 outside F -- gradient w,
  Hessian I -- and the solver carries its vectors there as multiples of w
  (:mod:`headstart.solver.cg`); their size enters through ||w_O||^2 (``fst[WOUT2]``).
  Other regularisers have no such block: their support is every coordinate;
* a line-search trial costs O(n): the solver's direction is *projected* once
  (:func:`project`: X s = sigma * X w + X delta with delta = s - sigma * w, zero outside
  F), the caller computes ``xs = X delta`` in one pass over X (possibly for several
  labels at once), and every trial only combines wx and xs.

The caching contract: ``act``, ``gcoef``, ``hcoef`` are valid from :func:`gradient` (or
:func:`step`) until the direction has been computed; the lane scheduler relies on this
to share them between the labels of a thread.  F, the marks and the scalars stay with
the label.  All functions are numba kernels over plain arrays.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .._compile import njit
from .._heapsort import heapsort_support
from .._prefetch import prefetch_ahead
from .._span import U64, full_row, span
from . import losses, regularizers

# X in CSR (float32 data, int32 indices) plus what defines the objective: the loss and
# regulariser tuples select the compiled code (see ._typed).
# ``colsum`` and ``colsq`` (float64, features + 1, the bias coordinate last) are the sums of
# X's columns and of their squares, computed once per problem; a problem that does not
# keep them (the shortlisted sub-problems) has empty arrays there, and the gradient then
# never takes the class-constant shortcut (see _grad_by_class).
Problem = namedtuple("Problem", ["indptr", "indices", "data", "n_features", "bias", "loss", "reg",
                                 "regularize_bias", "colsum", "colsq"])

# The objective's per-label state.  ``hdiag`` (float64, features + 1) is diag(H) on the
# support, summed in the gradient's pass over the active rows (cached like gcoef/hcoef
# until the direction is computed).  ist (int64): NACT active instances, NF size of the
# support (bias index included), STAMP the current mark value, NCAND the line search's
# candidate instances listed in ``act`` for the step (-1: none, see line_search); a new
# state's are IST_INIT.  fst (float64, FST_SIZE): WOUT2 ||w_O||^2 outside the support,
# COST_POS / COST_NEG the costs c_+ and c_-, NPOS the label's positives, ZEROED 1 when
# the solver replaced the start by w = 0 (solver/newton.py, zero_if_worse), LOSS the loss
# sum sum_i c_i phi(m_i) at the current w (set by value and by an accepted line search).
State = namedtuple("State", ["y", "wx", "xs", "act", "gcoef", "hcoef", "hdiag", "F", "mark", "ist", "fst"])
NACT, NF, STAMP, NCAND = 0, 1, 2, 3
IST_INIT = np.array([0, 0, 0, -1], dtype=np.int64)
IST_INIT.flags.writeable = False
WOUT2, COST_POS, COST_NEG, NPOS, ZEROED, LOSS = 0, 1, 2, 3, 4, 5
FST_SIZE = 6

# dtypes of the index buffers: instance and feature indices fit int32 (X is validated
# to int32 indices), labels are +-1.  Narrow types matter: a lane's O(n) and O(d)
# passes stream these arrays once or twice per Newton iteration.
#
# Indices are *unsigned* in the kernels (INDEX_DTYPE: X's column indices are viewed as
# uint32, the active set and the support are uint32): numba gives an array indexed by
# a signed integer Python's wrap-around for negative values, three more instructions
# (and a register) per gathered or scattered element in the innermost loops, where an
# unsigned index needs none.  The values are the same, so are the sums (bit for bit).
# Measured on debian-deps, one thread, 2026-11-27, medians of 11 alternating calls:
# the Hessian product with every row active 6.11 -> 4.97 ns per nonzero.
INDEX_DTYPE = np.uint32
ACT_DTYPE = INDEX_DTYPE
Y_DTYPE = np.int8
SUPPORT_DTYPE = INDEX_DTYPE     # the support F: feature ids
# The support's marks: a stamp per feature (a feature is in the support drawn under
# stamp t iff its mark is t), so that a new support costs no clearing pass.  Two bytes
# are enough: when the stamps run out (every 65,534 gradients of a lane, i.e. rarely and
# then O(d) once) they are renumbered (_next_stamp).  A lane holds one per feature:
# 4 bytes instead of 2 were 1.4 MB of debian-deps' 2 x 16 lanes (measured), and by
# arithmetic 4.2 MiB of the Amazon-670K shape's 16 shared lanes, 8.3 MiB with 16 lanes
# per thread on 2 threads (issue 12's memory targets).
MARK_DTYPE = np.uint16
MAX_STAMP = 2**16 - 2


def canonical_rows(X):
    """X itself when every row's column indices are sorted and unique (scipy's canonical
    format; checked once, then cached by scipy), else a copy made so (repeated entries
    summed).  The kernels take a row with as many entries as X has columns for one that
    holds every column in order (``_span.full_row``): a row of d entries in another order,
    or with a column twice and another missing, would be summed against the wrong
    weights -- and a repeated entry's x * x would enter diag(H) as two halves' squares."""
    if X.has_canonical_format:
        return X
    X = X.copy()
    X.sum_duplicates()      # sorts each row's indices and merges the repeated ones
    return X


def make_problem(X, bias: float, loss, reg, regularize_bias: bool) -> Problem:
    """Wrap a canonical CSR matrix (float32 data, int32 indices) for the kernels; ``loss``
    and ``reg`` are the tuples of :func:`.losses.make` and :func:`.regularizers.make`.
    One pass over X sums its columns and their squares.  The column indices are viewed
    as unsigned (no copy; see INDEX_DTYPE).  Refused when not canonical (a caller's
    bug: see :func:`canonical_rows`, which the trainers' entry points apply)."""
    if not X.has_canonical_format:
        raise ValueError("make_problem: X must be canonical CSR (each row's column indices sorted and unique): "
                         "the kernels sum a row holding as many entries as X has columns by position")
    indices = X.indices.astype(np.int32, copy=False).view(INDEX_DTYPE)
    data = X.data.astype(np.float32, copy=False)
    colsum = np.zeros(X.shape[1] + 1)
    colsq = np.zeros(X.shape[1] + 1)
    column_moments(indices, data, colsum, colsq)
    colsum[-1] = bias * X.shape[0]
    colsq[-1] = bias * bias * X.shape[0]
    return Problem(X.indptr.astype(np.int64, copy=False), indices, data, np.int64(X.shape[1]), np.float64(bias),
                   loss, reg, bool(regularize_bias), colsum, colsq)


@njit(cache=True, nogil=True)
def column_moments(indices, data, sums, squares):
    """sums[j] += x, squares[j] += x * x (in float64) for every non-zero x of column j, in
    storage order.

    The sums are the same additions in the same order as ``np.bincount(indices, weights=
    data.astype(np.float64))``, so the same bits, without its two nnz-long float64 /
    int64 temporaries (21.8 MB on debian-deps, which malloc then kept resident through
    training)."""
    for k in range(indices.size):
        x = np.float64(data[k])
        sums[indices[k]] += x
        squares[indices[k]] += x * x


def make_state(n: int, n_features: int) -> State:
    nv = n_features + 1
    return State(np.zeros(n, dtype=Y_DTYPE), np.zeros(n), np.zeros(n), np.zeros(n, dtype=ACT_DTYPE),
                 np.zeros(n), np.zeros(n), np.zeros(nv), np.zeros(nv, dtype=SUPPORT_DTYPE),
                 np.zeros(nv, dtype=MARK_DTYPE), IST_INIT.copy(), np.zeros(FST_SIZE))


@njit(cache=True, nogil=True)
def new_ist():
    """A new state's integer scalars (IST_INIT), for compiled code (the shortlist's)."""
    return IST_INIT.copy()


@njit(cache=True, nogil=True)
def support_is_all(O):
    """Whether the support is every coordinate, F[q] == q (a dense active set, the other
    regularisers, and nearly always a small shortlisted sub-problem).  Loops over F then
    index directly: the same operations in the same order (the same bits), but contiguous
    loads that LLVM vectorises, where the gathers through F cost about twice as much per
    coordinate (measured 1.63 against 0.97 ns for CG's update loop on 715 coordinates)."""
    return O.ist[NF] == O.F.size


# --- set-up ---------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def set_label(O, pos, cost_pos, cost_neg):
    """Labels y (+1 on ``pos``, -1 elsewhere) and costs c_+, c_- of a new problem."""
    O.y[:] = -1
    for i in pos:
        O.y[i] = 1
    O.fst[COST_POS] = cost_pos
    O.fst[COST_NEG] = cost_neg
    O.fst[NPOS] = pos.size
    O.fst[ZEROED] = 0.0


@njit(cache=True, nogil=True)
def zero_gradient_norm(psum, colsum, nv, cost_pos, cost_neg, d1_zero):
    """||grad f(0)|| over the first ``nv`` coordinates, from the column sums of the
    label's positives (``psum``) and of all its rows (``colsum``): at w = 0 every margin
    is 0, so grad f(0) = phi'(0) sum_i c_i y_i x_i = phi'(0) (c+ psum - c- (colsum - psum))
    -- no pass over X.  The full trainer and the sub-problems both scale their stopping
    tolerance by it (``newton.relative_tolerance``)."""
    g0 = 0.0
    for q in range(nv):
        v = cost_pos * psum[q] - cost_neg * (colsum[q] - psum[q])
        g0 += v * v
    return abs(d1_zero) * math.sqrt(g0)


@njit(cache=True, nogil=True)
def scores(P, w, out):
    """out = X w (+ bias * w[d]) over all instances: the one O(nnz) pass."""
    _times(P, w, out, False)


@njit(cache=True, nogil=True)
def _times(P, w, out, add):
    """out = X w (+ bias * w[d]), or out += that with ``add``."""
    n = P.indptr.size - 1
    d = P.n_features
    wb = P.bias * w[d]
    i = 0
    while i < n:
        lo, hi = span(P.indptr, i)
        # (a sparse row pays one comparison, as it did before full rows had a loop)
        if hi - lo == U64(d) and i + 4 <= n and full_rows4(P.indptr, i, d):
            # four full rows (dense features) side by side: each row's sum in its own
            # order, as below, but four independent chains of additions instead of one
            # (a single chain waits on each addition's latency)
            a0, a1, a2, a3 = dots4(P.data, lo, lo + U64(d), lo + U64(2 * d), lo + U64(3 * d), U64(d), w, 0.0)
            _put(out, i, a0 + wb, add)
            _put(out, i + 1, a1 + wb, add)
            _put(out, i + 2, a2 + wb, add)
            _put(out, i + 3, a3 + wb, add)
            i += 4
            continue
        acc = 0.0
        for k in range(lo, hi):
            # in float64 whatever w's type: the product of two float32 values is exact
            acc += np.float64(P.data[k]) * w[P.indices[k]]
        _put(out, i, acc + wb, add)
        i += 1


@njit(cache=True, nogil=True, inline="always")
def _put(out, i, value, add):
    if add:
        out[i] += value
    else:
        out[i] = value


@njit(cache=True, nogil=True, inline="always")
def full_rows4(indptr, i, d):
    """Whether rows i .. i + 3 hold every feature (their entries are then consecutive:
    4 d of them from indptr[i])."""
    return indptr[i + 4] - indptr[i] == 4 * d and indptr[i + 1] - indptr[i] == d \
        and indptr[i + 2] - indptr[i + 1] == d and indptr[i + 3] - indptr[i + 2] == d


@njit(cache=True, nogil=True, inline="always")
def dots4(data, l0, l1, l2, l3, d, v, a):
    """a + x_r . v[:d] for four full rows r stored from positions l0 .. l3 of ``data``,
    each summed in column order (float64; float32 x float64 products)."""
    a0 = a
    a1 = a
    a2 = a
    a3 = a
    for t in range(U64(0), d):
        vt = v[t]
        a0 += np.float64(data[l0 + t]) * vt
        a1 += np.float64(data[l1 + t]) * vt
        a2 += np.float64(data[l2 + t]) * vt
        a3 += np.float64(data[l3 + t]) * vt
    return a0, a1, a2, a3


# --- value ----------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _cost(O, yi):
    return O.fst[COST_POS] if yi > 0 else O.fst[COST_NEG]


@njit(cache=True, nogil=True)
def reg_value(P, w):
    """sum_j r(w_j) over the regularised coordinates."""
    d = P.n_features
    acc = 0.0
    if regularizers.is_l2(P.reg):
        acc = 0.5 * _sumsq(w, d)
        if P.regularize_bias:
            acc += 0.5 * w[d] * w[d]
        return acc
    for j in range(d):
        acc += regularizers.value(P.reg, w[j])
    if P.regularize_bias:
        acc += regularizers.value(P.reg, w[d])
    return acc


@njit(cache=True, nogil=True)
def loss_sum(P, O):
    """sum_i c_i phi(y_i * wx_i) from the cached scores."""
    return loss_sum_at(P, O, O.wx)


@njit(cache=True, nogil=True)
def loss_sum_at(P, O, wx):
    """sum_i c_i phi(y_i * wx_i) for the scores ``wx`` of some vector."""
    acc = 0.0
    y = O.y
    if losses.mines(P.loss):
        # only margins < 1 add anything; see _trial_loss_sum
        for i in range(wx.size):
            m = y[i] * wx[i]
            if m < 1.0:
                acc += _cost(O, y[i]) * losses.value(P.loss, m)
    else:
        for i in range(wx.size):
            acc += _cost(O, y[i]) * losses.value(P.loss, y[i] * wx[i])
    return acc


@njit(cache=True, nogil=True)
def value(P, O, w):
    """Objective value from the cached scores wx (no pass over X); keeps the loss part in
    O.fst[LOSS] for the line search."""
    loss = loss_sum(P, O)
    O.fst[LOSS] = loss
    return reg_value(P, w) + loss


@njit(cache=True, nogil=True)
def value_at_zero(P, O):
    """f(0) without a pass: every margin is 0, so sum_i c_i phi(0) = (c_+ |P| + c_- |N|)
    phi(0), plus R(0) (0 for every regulariser here, summed anyway)."""
    npos = O.fst[NPOS]
    acc = (O.fst[COST_POS] * npos + O.fst[COST_NEG] * (O.wx.size - npos)) * losses.value(P.loss, 0.0)
    if not regularizers.is_l2(P.reg):
        acc += regularizers.value(P.reg, 0.0) * (P.n_features + (1 if P.regularize_bias else 0))
    return acc


# --- gradient and step ----------------------------------------------------------------

@njit(cache=True, nogil=True)
def _next_stamp(O):
    """A mark value never used before (marks hold stamps up to MAX_STAMP: renumbered when they run
    out; the current support keeps its marks, as value 1)."""
    if O.ist[STAMP] >= MAX_STAMP:
        cur = O.ist[STAMP]
        for j in range(O.mark.size):
            O.mark[j] = 1 if O.mark[j] == cur else 0
        O.ist[STAMP] = 1
    O.ist[STAMP] += 1
    return O.ist[STAMP]


@njit(cache=True, nogil=True)
def gradient(P, O, w, g):
    """Active set, support and gradient at w (with O.wx = X w current); returns ||g||.

    ``O.F[:nF]`` lists the support, the bias index d last; only g[F] is written (outside
    F, with the L2 regulariser, g = w)."""
    stamp = _next_stamp(O)
    _active_set(P, O, O.wx, 0.0, 0.0, False)
    _support_and_grad(P, O, w, g, stamp, _sumsq(w, P.n_features))
    return _gnorm(O, g)


@njit(cache=True, nogil=True)
def step(P, O, w, s, sigma, alpha, g):
    """Take the step w += alpha * s and compute the new gradient on the new support, in as
    few passes over memory as possible (once per Newton iteration; with the pass over X,
    what a tail label's iteration costs).  Returns ||g||.

    ``s`` is the solver's direction in split form: s on the current support, sigma * w
    elsewhere; O.xs = X delta (see :func:`project`), so X s = sigma * wx + xs.  Scores
    move exactly as in :func:`line_search`'s trials, bit for bit."""
    wsq = step_move(P, O, w, s, sigma, alpha)
    return step_grad(P, O, w, g, wsq)


@njit(cache=True, nogil=True)
def step_grad(P, O, w, g, wsq):
    """The second half of :func:`step`: support and gradient at the moved w (``wsq`` from
    :func:`step_move`); returns ||g||."""
    _support_and_grad(P, O, w, g, O.ist[STAMP], wsq)
    return _gnorm(O, g)


@njit(cache=True, nogil=True)
def step_move(P, O, w, s, sigma, alpha):
    """The first half of :func:`step`: w += alpha * s, the scores and the new active set
    with its coefficients (a new mark stamp is drawn for the support to come); returns
    ||w[:d]||^2.  The gradient is then :func:`step_grad`, or -- for a dense
    active set (:func:`dense_support`) in a group of lanes -- :func:`grad_rows_group`."""
    d = P.n_features
    old = O.ist[STAMP]
    stamp = _next_stamp(O)
    if stamp <= old:  # marks were renumbered: the current support is now marked 1
        old = 1
    mark = O.mark
    # w in one pass, also summing the squares of the new weights (4 chains, see _sumsq)
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    d4 = d - d % 4
    for j in range(0, d4, 4):
        # s_j on the support, sigma * w_j elsewhere (written out as selects: vectorisable)
        v0 = w[j] + alpha * (s[j] if mark[j] == old else sigma * w[j])
        v1 = w[j + 1] + alpha * (s[j + 1] if mark[j + 1] == old else sigma * w[j + 1])
        v2 = w[j + 2] + alpha * (s[j + 2] if mark[j + 2] == old else sigma * w[j + 2])
        v3 = w[j + 3] + alpha * (s[j + 3] if mark[j + 3] == old else sigma * w[j + 3])
        w[j] = v0
        w[j + 1] = v1
        w[j + 2] = v2
        w[j + 3] = v3
        a0 += v0 * v0
        a1 += v1 * v1
        a2 += v2 * v2
        a3 += v3 * v3
    for j in range(d4, d):
        v0 = w[j] + alpha * (s[j] if mark[j] == old else sigma * w[j])
        w[j] = v0
        a0 += v0 * v0
    w[d] += alpha * s[d]
    # scores and the new active set in one pass over the instances
    _active_set(P, O, O.xs, sigma, alpha, True)
    return (a0 + a1) + (a2 + a3)


@njit(cache=True, nogil=True)
def _gnorm(O, g):
    acc = O.fst[WOUT2]  # outside the support g = w
    F = O.F
    full = support_is_all(O)   # then F[q] == q: index directly
    for q in range(O.ist[NF]):
        gj = g[q if full else F[q]]
        acc += gj * gj
    return np.sqrt(acc)


# The O(n) passes of a Newton iteration with implicit negative mining -- the first
# line-search trial (:func:`_first_trial`) and the listing of the active set at the
# start (:func:`_active_set`) -- find the few instances with margin < 1 among all n: a tail
# label has a few dozen of 39,061 on debian-deps.  As one loop with a branch per
# instance they cost ~1.2 ns per instance, a Newton iteration's ~110 us of its ~550.
# Blocked, each block's margins are first only *counted* below 1 (a fixed-length loop
# with no branch: vector code), and only a block that holds one is walked again
# instance by instance.  The same operations on the same values in the same order,
# so the same sums bit for bit.  Measured on debian-deps-sized arrays, one thread,
# 2026-11-27 (medians of 15 alternating runs, 0.1% / 0.3% / 1% of the instances
# active): a trial 46 / 48 / 46 -> 22 / 24 / 31 us (blocks of 32; 64: 23 / 27 / 38);
# the listing with its update of the scores, measured when the step still used it (it
# now reads the line search's candidates), 55 / 60 / 54 -> 33 / 46 / 40 us (blocks of
# 64; blocks of 32 came out slower than the plain loop there).
TRIAL_BLOCK = 32
LIST_BLOCK = 64


@njit(cache=True, nogil=True)
def _active_set(P, O, xd, sigma, alpha, move):
    """Active set with its coefficients; with ``move`` the scores first go to
    wx + alpha * (sigma * wx + xd) (the accepted line-search step), and the active set
    is found among the line search's candidates when it left them (NCAND).

    The loops are written out here: a helper taking O, even inlined by numba, cost
    reference counting of O's arrays at every instance (measured 3x slower end to end)."""
    y = O.y
    wx = O.wx
    act = O.act
    gcoef = O.gcoef
    hcoef = O.hcoef
    cp = O.fst[COST_POS]
    cn = O.fst[COST_NEG]
    n = wx.size
    if move:
        for i in range(n):   # no branch: vector code
            wx[i] = wx[i] + alpha * (sigma * wx[i] + xd[i])
    nact = 0
    if not losses.mines(P.loss):
        for i in range(n):
            act[nact] = i
            gcoef[nact], hcoef[nact] = _coefficients(P, y[i] * wx[i], y[i], cp, cn)
            nact += 1
    elif move and O.ist[NCAND] >= 0:
        # the new margins lie between the old ones and those at alpha = 1 (see
        # line_search): the active rows are among the candidates, in the same order
        for k in range(O.ist[NCAND]):
            i = act[k]
            m = y[i] * wx[i]
            if m < 1.0:
                act[nact] = i    # nact <= k: compacted in place
                gcoef[nact], hcoef[nact] = _coefficients(P, m, y[i], cp, cn)
                nact += 1
    else:
        for i0 in range(0, n, LIST_BLOCK):
            if i0 + LIST_BLOCK <= n:
                cnt = 0
                for i in range(i0, i0 + LIST_BLOCK):
                    cnt += y[i] * wx[i] < 1.0
                if cnt == 0:
                    continue
            for i in range(i0, min(i0 + LIST_BLOCK, n)):
                m = y[i] * wx[i]
                if m < 1.0:
                    act[nact] = i
                    gcoef[nact], hcoef[nact] = _coefficients(P, m, y[i], cp, cn)
                    nact += 1
    O.ist[NACT] = nact
    O.ist[NCAND] = -1


@njit(cache=True, nogil=True, inline="always")
def _coefficients(P, m, yi, cp, cn):
    """An active instance's gradient and Hessian coefficients c_i phi'(m) y_i and
    c_i phi''(m) at margin m."""
    c = cp if yi > 0 else cn
    g1, g2 = losses.derivatives(P.loss, m)
    return c * g1 * yi, c * g2


@njit(cache=True, nogil=True)
def _sumsq(w, d):
    """sum of w[:d]^2 in four interleaved partial sums: a single running sum makes every
    feature wait for the previous addition (~4 cycles each); four chains overlap."""
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    d4 = d - d % 4
    for j in range(0, d4, 4):
        a0 += w[j] * w[j]
        a1 += w[j + 1] * w[j + 1]
        a2 += w[j + 2] * w[j + 2]
        a3 += w[j + 3] * w[j + 3]
    for j in range(d4, d):
        a0 += w[j] * w[j]
    return (a0 + a1) + (a2 + a3)


# An active set of at least 1/DENSE_SHARE of the instances is *dense*: its support is
# taken to be every feature (see _support_and_grad), and the scheduler computes its
# direction in a group (headstart.training.kernel.group_directions).
DENSE_SHARE = 16
# Above 1/SWEEP_SHARE of the features a support is listed by one ordered sweep over the
# marks; below it the features met in the active rows are sorted instead (tail labels
# with a good start: a few hundred features, so no O(features) pass at all).
SWEEP_SHARE = 64
# ||w_O||^2 is computed as ||w||^2 - ||w_F||^2; when that difference is below this share of
# ||w||^2 the subtraction has lost digits (absolute error ~1e-16 ||w||^2, which would floor
# ||grad f|| near 1.5e-8 ||w||), so it is summed directly over the features outside F.
EXACT_WOUT_SHARE = 1e-6


@njit(cache=True, nogil=True)
def _support_and_grad(P, O, w, g, stamp, wsq):
    """Support F (ascending, then the bias index d), g and diag(H) (O.hdiag) on F,
    ||w_O||^2."""
    d = P.n_features
    F = O.F
    mark = O.mark
    act = O.act
    hd = O.hdiag
    nact = O.ist[NACT]
    nF = 0
    gb = 0.0
    hb = 0.0
    if dense_support(P, O):
        # The support is every feature: other regularisers have no quadratic block
        # outside the active rows' features, and a dense active set (L2) touches nearly
        # all of them anyway -- listed without marking (the solver then iterates on every
        # coordinate, the same iteration in exact arithmetic), and the pass over the
        # rows only sums.
        for j in range(d):
            mark[j] = stamp
            F[j] = j
            g[j], hd[j] = reg_parts(P, w[j])
        nF = d
        O.fst[WOUT2] = 0.0
        if nact == O.wx.size and nact > 0 and P.colsum.size > 0 and _class_constant(O):
            # every row active with one score per class: the zero start, a bias-only start
            # (once per label; it writes g and diag(H) whole, the regulariser's parts too)
            gb, hb = _grad_by_class(P, O, w, g)
        else:
            for k in range(nact):
                prefetch_ahead(P.indptr, P.indices, P.data, act, k, nact)
                i = act[k]
                c = O.gcoef[k]
                h = O.hcoef[k]
                lo, hi = span(P.indptr, i)
                if full_row(lo, hi, d):
                    # a full row: the scatter is a contiguous loop the compiler
                    # vectorises (every sum still gets its terms in the same order)
                    for t in range(U64(0), hi - lo):
                        x = P.data[lo + t]
                        g[t] += c * x
                        hd[t] += h * x * x
                else:
                    for p in range(lo, hi):
                        j = P.indices[p]
                        x = P.data[p]
                        g[j] += c * x
                        hd[j] += h * x * x
                gb += c
                hb += h
    else:
        # One pass over the active rows finds the support and sums the loss parts of the
        # gradient and of the Hessian's diagonal (the preconditioner's, LIBLINEAR's
        # get_diag_preconditioner): a feature's g starts at w_j and its diagonal at 1
        # when first met (the regulariser's parts), then the rows add to them in order --
        # the same operations as listing F first and summing after, with two passes
        # less over the active nonzeros (the passes that count when many rows are
        # active: zero starts, head labels, the logistic loss).
        for k in range(nact):
            prefetch_ahead(P.indptr, P.indices, P.data, act, k, nact)
            i = act[k]
            c = O.gcoef[k]
            h = O.hcoef[k]
            for p in range(*span(P.indptr, i)):
                j = P.indices[p]
                x = P.data[p]
                if mark[j] != stamp:
                    mark[j] = stamp
                    F[nF] = j
                    nF += 1
                    g[j] = w[j]
                    hd[j] = 1.0
                g[j] += c * x
                hd[j] += h * x * x
            gb += c
            hb += h
        if nF * SWEEP_SHARE > d:
            # ascending order keeps the CG loops streaming through memory when F is large
            nF = 0
            for j in range(d):
                if mark[j] == stamp:
                    F[nF] = j
                    nF += 1
        else:
            heapsort_support(F, F[:0], 0, nF)
        wF2 = 0.0
        for q in range(nF):
            j = F[q]
            wF2 += w[j] * w[j]
        wout2 = max(wsq - wF2, 0.0)
        if wout2 < EXACT_WOUT_SHARE * wsq:
            wout2 = 0.0
            for j in range(d):
                if mark[j] != stamp:
                    wout2 += w[j] * w[j]
        O.fst[WOUT2] = wout2
    _close_support(P, O, w, g, stamp, nF, gb, hb)


@njit(cache=True, nogil=True)
def _class_constant(O):
    """Whether every positive instance has the same score, and every negative one."""
    y = O.y
    wx = O.wx
    sp = 0.0
    sn = 0.0
    seen_p = False
    seen_n = False
    for i in range(wx.size):
        if y[i] > 0:
            if not seen_p:
                sp = wx[i]
                seen_p = True
            elif wx[i] != sp:
                return False
        else:
            if not seen_n:
                sn = wx[i]
                seen_n = True
            elif wx[i] != sn:
                return False
    return True


@njit(cache=True, nogil=True)
def _grad_by_class(P, O, w, g):
    """g and diag(H) on every feature when all rows are active with one coefficient per
    class (:func:`_class_constant`: from zero, or a start that moves only the bias);
    returns the rows' bias sums (gb, hb).

    The loss part of g is sum_i a_i x_i with a_i = a+ on the positives and a- on the
    negatives, that is a- * colsum + (a+ - a-) * (sum of the positive rows), and
    likewise diag(H) with the column sums of squares: only the smaller class's rows are
    read, instead of every row of X.  Zero starts (and the logistic loss from zero)
    began every label with that pass over all of X: on the Amazon-670K shape a
    quarter of the first iteration.  The sums run in another order than the rows' pass,
    so the gradient agrees with it to rounding, not bit for bit."""
    d = P.n_features
    y = O.y
    hd = O.hdiag
    n = O.wx.size
    npos = 0
    kp = -1
    kn = -1
    for i in range(n):   # all rows active: row i is active entry i
        if y[i] > 0:
            npos += 1
            if kp < 0:
                kp = i
        elif kn < 0:
            kn = i
    s = 1 if npos <= n - npos else -1       # read the smaller class's rows
    ks = kp if s > 0 else kn
    ko = kn if s > 0 else kp
    co = O.gcoef[ko]
    ho = O.hcoef[ko]
    cs = O.gcoef[ks] if ks >= 0 else co     # an empty class: any value, it has no rows
    hs = O.hcoef[ks] if ks >= 0 else ho
    for j in range(d):
        g[j] = 0.0
        hd[j] = 0.0
    ns = 0
    for i in range(n):
        if y[i] == s:
            ns += 1
            lo, hi = span(P.indptr, i)
            if full_row(lo, hi, d):
                for t in range(U64(0), hi - lo):
                    x = np.float64(P.data[lo + t])
                    g[t] += x
                    hd[t] += x * x
            else:
                for p in range(lo, hi):
                    j = P.indices[p]
                    x = np.float64(P.data[p])
                    g[j] += x
                    hd[j] += x * x
    for j in range(d):
        r1, r2 = reg_parts(P, w[j])
        g[j] = r1 + (co * P.colsum[j] + (cs - co) * g[j])
        hd[j] = r2 + (ho * P.colsq[j] + (hs - ho) * hd[j])
    return ns * cs + (n - ns) * co, ns * hs + (n - ns) * ho


@njit(cache=True, nogil=True)
def _close_support(P, O, w, g, stamp, nF, gb, hb):
    """The bias coordinate d last in the support F[:nF] (features), its gradient and
    diagonal from the rows' sums gb, hb."""
    d = P.n_features
    hd = O.hdiag
    O.mark[d] = stamp
    O.F[nF] = d
    O.ist[NF] = nF + 1
    if P.regularize_bias:
        g[d], hd[d] = reg_parts(P, w[d])
    else:
        g[d] = 0.0
        hd[d] = 0.0
    g[d] += gb * P.bias
    hd[d] += hb * P.bias * P.bias


@njit(cache=True, nogil=True)
def reg_parts(P, wj):
    """The regulariser's part of g_j and of diag(H)_j at w_j."""
    if regularizers.is_l2(P.reg):
        return wj, 1.0
    return regularizers.d1(P.reg, wj), regularizers.d2(P.reg, wj)


@njit(cache=True, nogil=True)
def dense_support(P, O):
    """Whether the gradient at the current active set takes every feature as its support
    (other regularisers than L2; with L2 an active set of at least 1/DENSE_SHARE of the
    instances)."""
    return not regularizers.is_l2(P.reg) or O.ist[NACT] * DENSE_SHARE >= O.wx.size


# --- second-order information ---------------------------------------------------------

@njit(cache=True, nogil=True)
def hess_vec(P, O, w, v, out):
    """out[F] = (H v)[F] = q(w) v + sum_{i active} c_i phi''(m_i) (x_i . v) x_i on the
    support (outside it, with L2, H = I: handled by the solver)."""
    hess_reg(P, O, w, v, out)
    vb = P.bias * v[P.n_features]
    ob = 0.0
    act = O.act
    nact = O.ist[NACT]
    d = P.n_features
    ud = U64(d)
    skip = 0
    for k in range(nact):
        if skip > 0:    # the rows of a block of four full ones
            skip -= 1
            continue
        i = act[k]
        lo, hi = span(P.indptr, i)
        # (a plain loop over the rows that tests this row's length first: on sparse data
        # a while loop loading the next four rows' spans at every row was 4-5% slower
        # than before the full rows, this form 7-8% faster -- debian-deps, every row
        # active, one thread, min of 60 calls in 10-14 alternating processes)
        if hi - lo == ud and k + 4 <= nact:
            l0 = lo
            l1, h1 = span(P.indptr, act[k + 1])
            l2, h2 = span(P.indptr, act[k + 2])
            l3, h3 = span(P.indptr, act[k + 3])
            if h1 - l1 == ud and h2 - l2 == ud and h3 - l3 == ud:
                # four full rows (dense features): their products x_r . v as four
                # independent chains, then one contiguous, vectorised pass adding the
                # four rows to each out[t] in row order -- every sum gets the terms of
                # the indexed loops below in their order
                a0, a1, a2, a3 = dots4(P.data, l0, l1, l2, l3, ud, v, vb)
                c0 = O.hcoef[k] * a0
                c1 = O.hcoef[k + 1] * a1
                c2 = O.hcoef[k + 2] * a2
                c3 = O.hcoef[k + 3] * a3
                if c0 != 0.0 and c1 != 0.0 and c2 != 0.0 and c3 != 0.0:
                    for t in range(U64(0), ud):
                        out[t] = (((out[t] + c0 * P.data[l0 + t]) + c1 * P.data[l1 + t]) + c2 * P.data[l2 + t]) \
                            + c3 * P.data[l3 + t]
                else:
                    # a row with c = 0 is skipped, as below: adding its zeros is not
                    # a no-op where out[t] is -0.0 (-0.0 + 0.0 is +0.0; e.g. v[t] = -0.0
                    # from CG's first direction -g, and every hcoef 0 -- the logistic
                    # loss's phi'' underflows beyond margins of ~745)
                    _add_full_row(out, P.data, l0, ud, c0)
                    _add_full_row(out, P.data, l1, ud, c1)
                    _add_full_row(out, P.data, l2, ud, c2)
                    _add_full_row(out, P.data, l3, ud, c3)
                # (adding c = 0 changes no bit of ob: a sum from +0.0 is never -0.0)
                ob += c0
                ob += c1
                ob += c2
                ob += c3
                skip = 3
                continue
        prefetch_ahead(P.indptr, P.indices, P.data, act, k, nact)
        dot = vb
        for p in range(lo, hi):
            dot += P.data[p] * v[P.indices[p]]
        c = O.hcoef[k] * dot
        if c != 0.0:
            for p in range(lo, hi):
                out[P.indices[p]] += c * P.data[p]
            ob += c
    out[P.n_features] += ob * P.bias


@njit(cache=True, nogil=True, inline="always")
def _add_full_row(out, data, lo, d, c):
    """out[:d] += c * the full row stored from ``lo`` (nothing when c == 0)."""
    if c != 0.0:
        for t in range(U64(0), d):
            out[t] += c * data[lo + t]


@njit(cache=True, nogil=True)
def hess_reg(P, O, w, v, out):
    """out[F] = q(w) v on the support: the regulariser's part of H v, where the rows'
    part then adds up."""
    d = P.n_features
    F = O.F
    full = support_is_all(O)   # then F[q] == q: index directly
    nF = O.ist[NF]
    if regularizers.is_l2(P.reg):
        for q in range(nF):
            j = q if full else F[q]
            out[j] = v[j]
        out[d] = v[d] if P.regularize_bias else 0.0
    else:
        for q in range(nF):
            j = q if full else F[q]
            out[j] = regularizers.d2(P.reg, w[j]) * v[j]
        out[d] = regularizers.d2(P.reg, w[d]) * v[d] if P.regularize_bias else 0.0


# --- Hessian products of a group of problems in one pass --------------------------------
#
# When many rows are active (zero starts, head labels, the logistic loss: every row),
# H v costs two passes over the active rows' nonzeros, and is bound by instructions, not
# memory (measured on an Amazon-670K-shaped set: 2.3 ns per nonzero with all rows
# active, 1.6 ns even when v fits in L1).  GROUP problems at once load each nonzero
# once and do their multiply-adds side by side in vector registers, over the union of
# their active rows; each problem's own rows give exactly its own sums (same
# operations, same order), the others' rows add exact zeros.

GROUP = 4   # problems per group product; hess_rows_group is written out for this many


@njit(cache=True, nogil=True)
def group_coefficients(O, coef, mask):
    """After this problem's gradient: coef[i] = its Hessian coefficient c_i phi''(m_i) for
    active rows, 0 elsewhere (``coef`` is a length-n buffer the problem does not need
    while its direction is computed: its xs), and mark its active rows in ``mask``."""
    coef[:] = 0.0
    act = O.act
    for k in range(O.ist[NACT]):
        i = act[k]
        coef[i] = O.hcoef[k]
        mask[i] = 1


@njit(cache=True, nogil=True)
def group_rows(mask, U):
    """The union of the marked rows, ascending, into U (and the marks cleared): returns
    its size."""
    nU = 0
    for i in range(mask.size):
        if mask[i] != 0:
            U[nU] = i
            nU += 1
            mask[i] = 0
    return nU


@njit(cache=True, nogil=True)
def hess_rows_group(P, U, nU, C, m, run, D, HD, T):
    """The rows' part of H_t D[:, t] added to HD[:, t] for the GROUP problems t, over the
    union U[:nU] of their active rows: C[m[t]] holds problem t's coefficients (0 off
    its active set), ``run[t]`` says whether problem t takes part (a problem whose CG
    has stopped does not).  D and HD are (features + 1, GROUP), C order, so the values
    a nonzero needs are adjacent.  Each problem gets the sums of :func:`hess_vec` bit
    for bit (the regulariser's part comes from :func:`hess_reg`).

    Two phases, the row products (D gathered) for every row into the scratch T
    (GROUP x >= nU), then the scattered additions into HD: the same sums in the same
    order as one fused pass, but each phase is one kind of memory traffic, and the
    fused pass cost 1.58x as much (Amazon-670K shape, all 36.7M nonzeros, 4 problems,
    minimum of 15 alternating calls 335 against 212 ms; 2026-11-27).  Done in blocks of
    64-1024 rows instead, the split was no faster than the fused pass."""
    d = P.n_features
    bias = P.bias
    C0 = C[m[0]]
    C1 = C[m[1]]
    C2 = C[m[2]]
    C3 = C[m[3]]
    T0 = T[0]
    T1 = T[1]
    T2 = T[2]
    T3 = T[3]
    vb0 = bias * D[d, 0]
    vb1 = bias * D[d, 1]
    vb2 = bias * D[d, 2]
    vb3 = bias * D[d, 3]
    for u in range(nU):
        prefetch_ahead(P.indptr, P.indices, P.data, U, u, nU)
        i = U[u]
        h0 = C0[i] if run[0] else 0.0
        h1 = C1[i] if run[1] else 0.0
        h2 = C2[i] if run[2] else 0.0
        h3 = C3[i] if run[3] else 0.0
        a0 = vb0
        a1 = vb1
        a2 = vb2
        a3 = vb3
        lo, hi = span(P.indptr, i)
        if full_row(lo, hi, d):     # no index to load (two loops: no select per nonzero)
            for t in range(U64(0), hi - lo):
                x = np.float64(P.data[lo + t])
                row = D[t]
                a0 += x * row[0]
                a1 += x * row[1]
                a2 += x * row[2]
                a3 += x * row[3]
        else:
            for p in range(lo, hi):
                x = np.float64(P.data[p])
                row = D[P.indices[p]]
                a0 += x * row[0]
                a1 += x * row[1]
                a2 += x * row[2]
                a3 += x * row[3]
        # a problem whose row this is not (h = 0) adds exact zeros (its sums are the
        # same as when it skips the row, as hess_vec does)
        T0[u] = h0 * a0 if h0 != 0.0 else 0.0
        T1[u] = h1 * a1 if h1 != 0.0 else 0.0
        T2[u] = h2 * a2 if h2 != 0.0 else 0.0
        T3[u] = h3 * a3 if h3 != 0.0 else 0.0
    ob0 = 0.0
    ob1 = 0.0
    ob2 = 0.0
    ob3 = 0.0
    for u in range(nU):
        c0 = T0[u]
        c1 = T1[u]
        c2 = T2[u]
        c3 = T3[u]
        prefetch_ahead(P.indptr, P.indices, P.data, U, u, nU)
        if c0 != 0.0 or c1 != 0.0 or c2 != 0.0 or c3 != 0.0:
            i = U[u]
            lo, hi = span(P.indptr, i)
            if full_row(lo, hi, d):
                for t in range(U64(0), hi - lo):
                    x = np.float64(P.data[lo + t])
                    row = HD[t]
                    row[0] += c0 * x
                    row[1] += c1 * x
                    row[2] += c2 * x
                    row[3] += c3 * x
            else:
                for p in range(lo, hi):
                    x = np.float64(P.data[p])
                    row = HD[P.indices[p]]
                    row[0] += c0 * x
                    row[1] += c1 * x
                    row[2] += c2 * x
                    row[3] += c3 * x
            ob0 += c0
            ob1 += c1
            ob2 += c2
            ob3 += c3
    HD[d, 0] += ob0 * bias
    HD[d, 1] += ob1 * bias
    HD[d, 2] += ob2 * bias
    HD[d, 3] += ob3 * bias


# --- gradients of a group of problems in one pass ------------------------------------
#
# The gradient's pass over the active rows (two scattered additions per nonzero, g and
# diag(H)) costs as much as a single Hessian product when many rows are active; a group
# of lanes whose new active sets are dense (dense_support) sums theirs in one pass over
# the union of their active rows, as hess_rows_group does for the products: each
# problem's own rows in its own order, the others' rows adding exact zeros.

@njit(cache=True, nogil=True)
def gradient_coefficients(O, gc, hc, mask):
    """After :func:`step_move`: the active rows' gradient and Hessian coefficients as
    length-n vectors (0 off the active set) -- ``hc`` is the problem's xs, free until
    its next pass over X, and what hess_rows_group reads -- and its active rows marked in
    ``mask`` (:func:`group_coefficients`, plus the gradient's)."""
    group_coefficients(O, hc, mask)
    gc[:] = 0.0
    act = O.act
    for k in range(O.ist[NACT]):
        gc[act[k]] = O.gcoef[k]


@njit(cache=True, nogil=True, inline="always")
def _row_coefficients(GC, C0, C1, C2, C3, run, i):
    """Row i's gradient and Hessian coefficients for the four group problems (0 for a
    problem not running): (c0, c1, c2, c3, h0, h1, h2, h3)."""
    return (GC[0, i] if run[0] else 0.0, GC[1, i] if run[1] else 0.0,
            GC[2, i] if run[2] else 0.0, GC[3, i] if run[3] else 0.0,
            C0[i] if run[0] else 0.0, C1[i] if run[1] else 0.0,
            C2[i] if run[2] else 0.0, C3[i] if run[3] else 0.0)


@njit(cache=True, nogil=True)
def grad_rows_group(P, U, nU, GC, C, m, run, G, H, sums):
    """The rows' part of the gradient and of diag(H) of the GROUP problems t with
    ``run[t]``, added to G[:, t] and H[:, t] over the union U[:nU] of their active rows:
    GC[t] and C[m[t]] hold problem t's coefficients (:func:`gradient_coefficients`).  G
    and H are (features + 1, GROUP), C order, and must hold the regulariser's parts
    (:func:`reg_parts`) on entry; sums[t] gets (sum of c_i, sum of h_i) for the bias.
    Each problem gets the sums of :func:`_support_and_grad`'s dense branch bit for bit."""
    d = P.n_features
    C0 = C[m[0]]
    C1 = C[m[1]]
    C2 = C[m[2]]
    C3 = C[m[3]]
    gb0 = 0.0
    gb1 = 0.0
    gb2 = 0.0
    gb3 = 0.0
    hb0 = 0.0
    hb1 = 0.0
    hb2 = 0.0
    hb3 = 0.0
    ud = U64(d)
    u = 0
    while u < nU:
        i = U[u]
        c0, c1, c2, c3, h0, h1, h2, h3 = _row_coefficients(GC, C0, C1, C2, C3, run, i)
        l0, e0 = span(P.indptr, i)
        if e0 - l0 == ud and u + 2 <= nU:       # a sparse row pays this comparison only
            i1 = U[u + 1]
            l1, e1 = span(P.indptr, i1)
            if e1 - l1 == ud:
                # two full rows (dense features) in one contiguous pass: each entry of
                # G and H gets the first row's term, then the second's, as below
                k0, k1, k2, k3, q0, q1, q2, q3 = _row_coefficients(GC, C0, C1, C2, C3, run, i1)
                for t in range(U64(0), ud):
                    x = np.float64(P.data[l0 + t])
                    y = np.float64(P.data[l1 + t])
                    g = G[t]
                    g[0] = (g[0] + c0 * x) + k0 * y
                    g[1] = (g[1] + c1 * x) + k1 * y
                    g[2] = (g[2] + c2 * x) + k2 * y
                    g[3] = (g[3] + c3 * x) + k3 * y
                    h = H[t]
                    h[0] = (h[0] + h0 * x * x) + q0 * y * y
                    h[1] = (h[1] + h1 * x * x) + q1 * y * y
                    h[2] = (h[2] + h2 * x * x) + q2 * y * y
                    h[3] = (h[3] + h3 * x * x) + q3 * y * y
                gb0 += c0
                gb1 += c1
                gb2 += c2
                gb3 += c3
                hb0 += h0
                hb1 += h1
                hb2 += h2
                hb3 += h3
                gb0 += k0
                gb1 += k1
                gb2 += k2
                gb3 += k3
                hb0 += q0
                hb1 += q1
                hb2 += q2
                hb3 += q3
                u += 2
                continue
        prefetch_ahead(P.indptr, P.indices, P.data, U, u, nU)
        u += 1
        for p in range(l0, e0):
            x = np.float64(P.data[p])
            j = P.indices[p]
            g = G[j]
            g[0] += c0 * x
            g[1] += c1 * x
            g[2] += c2 * x
            g[3] += c3 * x
            h = H[j]
            h[0] += h0 * x * x
            h[1] += h1 * x * x
            h[2] += h2 * x * x
            h[3] += h3 * x * x
        gb0 += c0
        gb1 += c1
        gb2 += c2
        gb3 += c3
        hb0 += h0
        hb1 += h1
        hb2 += h2
        hb3 += h3
    sums[0, 0] = gb0
    sums[1, 0] = gb1
    sums[2, 0] = gb2
    sums[3, 0] = gb3
    sums[0, 1] = hb0
    sums[1, 1] = hb1
    sums[2, 1] = hb2
    sums[3, 1] = hb3


@njit(cache=True, nogil=True)
def group_gradient_start(P, w, G, H, t):
    """G[:, t], H[:, t] = the regulariser's parts at w (features only), before
    :func:`grad_rows_group`."""
    for j in range(P.n_features):
        G[j, t], H[j, t] = reg_parts(P, w[j])


@njit(cache=True, nogil=True)
def group_gradient_finish(P, O, w, g, G, H, t, sums):
    """Problem t's gradient out of a group pass: g and diag(H) (O.hdiag) from the columns,
    the support every feature (as :func:`_support_and_grad`'s dense branch leaves it);
    returns ||g||.  Call after :func:`step_move`, whose stamp it uses."""
    d = P.n_features
    stamp = O.ist[STAMP]
    F = O.F
    mark = O.mark
    hd = O.hdiag
    for j in range(d):
        mark[j] = stamp
        F[j] = j
        g[j] = G[j, t]
        hd[j] = H[j, t]
    O.fst[WOUT2] = 0.0
    _close_support(P, O, w, g, stamp, d, sums[t, 0], sums[t, 1])
    return _gnorm(O, g)


@njit(cache=True, nogil=True)
def precond(P, O, w, M):
    """M[F] = diag(H)[F] = q(w) + sum_{i active} c_i phi''(m_i) x_i^2 (LIBLINEAR's
    get_diag_preconditioner), as the gradient's pass summed it; returns diag(H) outside
    the support (1 with L2; other regularisers have no outside)."""
    F = O.F
    full = support_is_all(O)   # then F[q] == q: index directly
    hd = O.hdiag
    for q in range(O.ist[NF]):
        j = q if full else F[q]
        M[j] = hd[j]
    return 1.0


# --- the line ------------------------------------------------------------------------

# A float32 sweep buffer rounds delta = s - sigma * w by up to 2^-24 |delta|; delta is
# dominated by sigma * w (sigma ~ -1), so near the optimum, where the step s is tiny next
# to w, the rounding would be a large share of the step.  While the rounding error stays
# below this share of ||s|| the rounded direction is used as it is (1000x less than the
# inexactness CG's own stopping rule allows, eps_cg 0.1-0.5); above it the remainder's
# X-product is added exactly (:func:`remainder`), so strict tolerances converge as in
# float64 (LIBLINEAR's precision).
ROUNDING_SHARE = 1e-4


@njit(cache=True, nogil=True)
def project(O, w, s, sigma, out):
    """out[F] = delta = s - sigma * w on the support; ``out`` must be zero elsewhere.  Then
    X s = sigma * wx + X delta: the pass over X needs only this sparse vector.

    ``out`` may be float32 -- the sweep buffer is: the pass over X is bound by the bytes
    each nonzero gathers from it, and float32 halves them (and lets two threads' buffers
    stay in L3; 2.5-4x faster sweeps on an Amazon-670K-shaped set).  Then delta is
    rounded, and while the rounding is negligible next to the step (ROUNDING_SHARE) s on
    the support becomes sigma * w + delta as stored, so the line search and the step
    use exactly the direction whose X-product the sweep computes; returns False.
    Otherwise s is left alone and it returns True: the caller adds X (delta - out)
    with :func:`remainder` after the sweep."""
    F = O.F
    full = support_is_all(O)   # then F[q] == q: index directly
    nF = O.ist[NF]
    e2 = 0.0
    s2 = sigma * sigma * O.fst[WOUT2]
    for q in range(nF):
        j = q if full else F[q]
        v = s[j] - sigma * w[j]
        out[j] = v
        e = v - out[j]
        e2 += e * e
        s2 += s[j] * s[j]
    if e2 == 0.0:
        return False
    if e2 > ROUNDING_SHARE * ROUNDING_SHARE * s2:
        return True
    for q in range(nF):
        j = q if full else F[q]
        s[j] = sigma * w[j] + out[j]
    return False


@njit(cache=True, nogil=True)
def remainder(P, O, w, s, sigma, out, lo):
    """O.xs += X (delta - out): the part of X delta that rounding ``out`` dropped (after
    :func:`project` returned True).  ``lo`` is float64 scratch, zero outside F (left so)."""
    F = O.F
    full = support_is_all(O)   # then F[q] == q: index directly
    nF = O.ist[NF]
    for q in range(nF):
        j = q if full else F[q]
        lo[j] = (s[j] - sigma * w[j]) - out[j]    # exact: a float64 minus its float32 rounding
    _times(P, lo, O.xs, True)
    for q in range(nF):
        lo[q if full else F[q]] = 0.0


@njit(cache=True, nogil=True)
def round_start(w):
    """Round a start vector to float32 values in place: the scheduler computes X w0 in
    its float32 sweep buffer, so a start is the vector as stored there (every trainer
    that shares the scheduler's starts rounds the same way, so results agree)."""
    for q in range(w.size):
        w[q] = np.float32(w[q])


@njit(cache=True, nogil=True)
def unproject(O, out):
    """Undo :func:`project` (call before the support changes)."""
    F = O.F
    full = support_is_all(O)   # then F[q] == q: index directly
    for q in range(O.ist[NF]):
        out[q if full else F[q]] = 0.0


@njit(cache=True, nogil=True)
def _trial_loss_sum(P, O, alpha, sigma):
    """sum_i c_i phi(y_i * (wx_i + alpha * (sigma * wx_i + xs_i))): the loss at w + alpha s,
    the O(n) work of a line-search trial, for a loss that does not mine negatives (every
    instance adds; see :func:`_first_trial` for those that do)."""
    acc = 0.0
    y = O.y
    wx = O.wx
    xd = O.xs
    for i in range(wx.size):
        acc += _cost(O, y[i]) * losses.value(P.loss, y[i] * (wx[i] + alpha * (sigma * wx[i] + xd[i])))
    return acc


@njit(cache=True, nogil=True)
def _first_trial(P, O, sigma):
    """The loss at w + s (alpha = 1) with mining, listing the line search's *candidates*
    in ``act``: the instances with margin < 1 at alpha = 0 or at alpha = 1 (O.ist[NCAND]
    of them, ascending).  Only they can have margin < 1 at the later trials and after the
    step (see line_search), so those run over the candidates only.  The instances are
    found block by block (TRIAL_BLOCK, see LIST_BLOCK); skipping the others (instead of
    adding 0.0) also takes them out of the chain of dependent additions."""
    acc = 0.0
    y = O.y
    wx = O.wx
    xd = O.xs
    n = wx.size
    nc = 0
    nb_ = n - n % TRIAL_BLOCK
    for i0 in range(0, nb_, TRIAL_BLOCK):
        cnt = 0
        for i in range(i0, i0 + TRIAL_BLOCK):
            cnt += (y[i] * (wx[i] + 1.0 * (sigma * wx[i] + xd[i])) < 1.0) | (y[i] * wx[i] < 1.0)
        if cnt:
            acc, nc = _trial_candidates(P, O, sigma, i0, i0 + TRIAL_BLOCK, acc, nc)
    acc, nc = _trial_candidates(P, O, sigma, nb_, n, acc, nc)
    O.ist[NCAND] = nc
    return acc


@njit(cache=True, nogil=True, inline="always")
def _trial_candidates(P, O, sigma, lo, hi, acc, nc):
    """_first_trial's walk over the instances lo..hi-1: (acc, number of candidates)."""
    y = O.y
    wx = O.wx
    xd = O.xs
    for i in range(lo, hi):
        m = y[i] * (wx[i] + 1.0 * (sigma * wx[i] + xd[i]))
        if m < 1.0:
            acc += _cost(O, y[i]) * losses.value(P.loss, m)
        if m < 1.0 or y[i] * wx[i] < 1.0:
            O.act[nc] = i
            nc += 1
    return acc, nc


@njit(cache=True, nogil=True)
def _later_trial(P, O, alpha, sigma):
    """The loss at w + alpha s (alpha < 1) with mining, over _first_trial's candidates:
    the same sum in the same order as over all instances."""
    acc = 0.0
    y = O.y
    wx = O.wx
    xd = O.xs
    for k in range(O.ist[NCAND]):
        i = O.act[k]
        m = y[i] * (wx[i] + alpha * (sigma * wx[i] + xd[i]))
        if m < 1.0:
            acc += _cost(O, y[i]) * losses.value(P.loss, m)
    return acc


@njit(cache=True, nogil=True)
def _l2_dots(P, O, w, s, sigma):
    """(s.s, w.s) over the regularised coordinates for s = sigma * w outside the
    support: O(|F|) instead of two passes over all features."""
    d = P.n_features
    wout2 = O.fst[WOUT2]
    sTs = sigma * sigma * wout2
    wTs = sigma * wout2
    F = O.F
    full = support_is_all(O)   # then F[q] == q: index directly
    for q in range(O.ist[NF]):
        j = q if full else F[q]
        if j == d and not P.regularize_bias:
            continue
        sTs += s[j] * s[j]
        wTs += w[j] * s[j]
    return sTs, wTs


@njit(cache=True, nogil=True)
def _reg_along(P, w, s, alpha):
    """sum_j r(w_j + alpha s_j) (regularisers other than L2: every coordinate)."""
    d = P.n_features
    acc = 0.0
    for j in range(d):
        acc += regularizers.value(P.reg, w[j] + alpha * s[j])
    if P.regularize_bias:
        acc += regularizers.value(P.reg, w[d] + alpha * s[d])
    return acc


@njit(cache=True, nogil=True)
def line_search(P, O, w, s, sigma, gTs, f, eta, max_steps):
    """Backtracking Armijo search on w + alpha s, alpha = 1, 1/2, 1/4, ...

    Accepts the first alpha with f(w + alpha s) - f(w) <= eta * alpha * g.s (LIBLINEAR
    l2r_erm_fun::linesearch_and_update) and returns (alpha, f_new), or (0, f) after
    ``max_steps`` failed trials.  O.xs must hold X delta (:func:`project`).  A trial is
    O(n) with L2 (the regulariser along the line is a quadratic in alpha), O(n + d)
    otherwise.  :func:`step` then takes the accepted step.

    With a loss that mines negatives the first trial lists the *candidates* (margin < 1
    at alpha = 0 or 1) in ``act`` -- free between the direction and the step (the caching
    contract) -- and the later trials and the step's new active set look at them only.
    That is exact, bit for bit: alpha is a power of two, so alpha * t is exact, and
    rounding is monotonic, so the computed y * (wx + alpha * t) lies between the
    computed margins at 0 and 1; an instance with both >= 1 stays inactive.  (Half of
    the trials' and listings' O(n) work of an iteration: 19% of debian-deps' Newton
    iterations backtrack, and the step's listing is an O(n) pass of its own.)"""
    alpha = 1.0
    l2 = regularizers.is_l2(P.reg)
    mining = losses.mines(P.loss)
    sTs, wTs = _l2_dots(P, O, w, s, sigma) if l2 else (0.0, 0.0)
    for t in range(max_steps):
        if not mining:
            acc = _trial_loss_sum(P, O, alpha, sigma)
        elif t == 0:
            acc = _first_trial(P, O, sigma)
        else:
            acc = _later_trial(P, O, alpha, sigma)
        if l2:
            # f(w + alpha s) - f(w): the regulariser's change alpha (w.s + alpha s.s / 2)
            # formed as such, the loss's against the loss at w.  Not f_new - f with f_new =
            # loss + (w.w + ...) / 2: w.w is summed afresh here, while the f carried from
            # the last search holds that search's w.w and its rounding, which can exceed a
            # step's whole decrease where w.w >> f (a tiny C from a start far from the
            # optimum: every trial refused, line_search_failed at a point LIBLINEAR passes;
            # LIBLINEAR avoids it by updating one w.w in place, linesearch_and_update).
            diff = (acc - O.fst[LOSS]) + alpha * (wTs + 0.5 * alpha * sTs)
            if diff <= eta * alpha * gTs:
                O.fst[LOSS] = acc
                return alpha, f + diff
        else:
            f_new = acc + _reg_along(P, w, s, alpha)
            if f_new - f <= eta * alpha * gTs:
                O.fst[LOSS] = acc
                return alpha, f_new
        alpha *= 0.5
    return 0.0, f


# --- dense forms: the same quantities on all coordinates (reference and tests) -------

@njit(cache=True, nogil=True)
def _outside(O, out, src):
    """out[j] = src[j] for the features outside the current support (bias excluded)."""
    stamp = O.ist[STAMP]
    for j in range(out.size - 1):
        if O.mark[j] != stamp:
            out[j] = src[j]


@njit(cache=True, nogil=True)
def full_gradient(P, O, w, g):
    """g = grad f(w) on every coordinate (O.wx current; L2: g = w outside the support);
    returns the active set's size."""
    gradient(P, O, w, g)
    _outside(O, g, w)
    return O.ist[NACT]


@njit(cache=True, nogil=True)
def full_hess_vec(P, O, w, v, out):
    """out = H v on every coordinate (after :func:`gradient`)."""
    hess_vec(P, O, w, v, out)
    _outside(O, out, v)


@njit(cache=True, nogil=True)
def full_precond(P, O, w, M):
    """M = diag(H) on every coordinate (after :func:`gradient`)."""
    precond(P, O, w, M)
    _outside(O, M, np.ones(M.size))
