"""Dual coordinate descent for L2-regularised margin losses (Hsieh, Chang, Lin, Keerthi
and Sundararajan, "A dual coordinate descent method for large-scale linear SVM", ICML
2008, Algorithm 1 with the shrinking of section 3.2 -- the method of LIBLINEAR's default
solver -s 1, squared hinge, and of -s 3, hinge).

For f(w) = ||w||^2 / 2 + sum_i c_i phi(y_i w.x_i) the dual is

    min_a  a^T (Q + D) a / 2 - sum_i a_i,   0 <= a_i <= U_i,   Q_ij = y_i y_j x_i.x_j,

with w = sum_i a_i y_i x_i, U_i and D_ii from the loss's ``dual_box`` (u, e): U_i = u c_i,
D_ii = e / c_i (squared hinge: u = inf, e = 1/2; Huber hinge of width eps: u = 1, e = eps,
the exact hinge at eps = 0).  Each step minimises the dual exactly in one a_i: with
G = y_i w.x_i - 1 + D_ii a_i, a_i <- clip(a_i - G / (Q_ii + D_ii), 0, U_i), and w moves
along x_i -- two passes over x_i's nonzeros.  An a_i at a bound whose gradient points out
of the box by more than the previous cycle's largest violation is shrunk (left out until
the rule is met); the rule: max - min of the projected gradient over a cycle at most
``eps`` (absolute, as LIBLINEAR's; its default there is 0.1), then once more over all
instances.  Instances with a_i = 0 and margin > 1 are the dual's negative mining: they
are shrunk after a cycle or two and cost nothing after that.

Why beside the primal Newton method: the dual needs no initialiser and no line search,
and on data with few active instances per label it is what LIBLINEAR users run by
default; its rule is on the dual, so its solutions differ from the primal solver's within
their tolerances.  What is ours: the per-label generator of the order (solver/glmnet.py),
float32 X with float64 weights, ||x_i||^2 computed once for all labels, the abort flag.
Only a regularised bias fits this dual (an unregularised one adds the constraint
sum_i a_i y_i = 0, which single-coordinate steps cannot keep).
"""

from __future__ import annotations

from collections import namedtuple
from typing import NamedTuple

from .._compile import njit
from .._span import span
import numpy as np

from ..objective import losses
from ..objective._typed import generic, implement
from .glmnet import new_rng, record_end, record_iteration, shuffle
from .newton import CONVERGED, MAX_ITER, RUNNING, now

#: steps smaller than this in |projected gradient| are skipped (LIBLINEAR's 1e-12)
MIN_VIOLATION = 1e-12

# X by rows (the trainer's CSR arrays, not copied), the bias value, the loss
RowProblem = namedtuple("RowProblem", ["indptr", "indices", "data", "n", "d", "bias", "loss"])

# per thread: w (features + bias), and per instance a, Q_ii + D_ii and the order
Work = namedtuple("Work", ["w", "alpha", "qd", "index"])


def make_work(n: int, n_features: int, pairs: bool = False) -> Work:
    """The thread's buffers; ``pairs``: the logistic dual's (:mod:`.dual_lr`), which keeps
    (a_i, c_i - a_i) per instance and needs no Q_ii + D_ii (the same 3 values per instance)."""
    if pairs:
        return Work(np.zeros(n_features + 1), np.zeros(2 * n), np.zeros(0), np.zeros(n, dtype=np.int64))
    return Work(np.zeros(n_features + 1), np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64))


# Which dual method a trainer runs is a compile-time strategy, as losses are
# (objective/_typed.py): the trainer calls solve_dual(DM, ...) and numba compiles the
# method of DM's class -- BoxDual (this module: the losses that register a box dual) or
# a method of its own (solver/dual_lr.py: the logistic loss's).
solve_dual = generic("solve_dual", "solve(...) of the dual method selected by the first argument's class")


class BoxDual(NamedTuple):
    """Selects :func:`solve` (losses that register ``dual_box``) in :func:`solve_dual`."""


def register_method(cls, solve_fn) -> None:
    """Make ``solve_dual(cls(), ...)`` call ``solve_fn(...)`` (the arguments after the
    marker, those of :func:`solve`): how a dual method plugs into the trainer."""
    def impl(DM, RP, W, xsq, y, cp, cn, eps, max_iter, seed, rec_f, rec_act, rec_step, rec_cg, rec_time, k, timing,
             abort):
        return solve_fn(RP, W, xsq, y, cp, cn, eps, max_iter, seed, rec_f, rec_act, rec_step, rec_cg, rec_time, k,
                        timing, abort)

    implement(solve_dual, cls, impl)


@njit(cache=True, nogil=True)
def row_norms(RP):
    """||x_i||^2 with the bias feature: the label-independent part of Q_ii."""
    out = np.empty(RP.n)
    b2 = RP.bias * RP.bias
    for i in range(RP.n):
        acc = b2
        for p in range(RP.indptr[i], RP.indptr[i + 1]):
            v = np.float64(RP.data[p])
            acc += v * v
        out[i] = acc
    return out


@njit(cache=True, nogil=True)
def column_sums(RP):
    """Sum of each column of X, and the bias column's (n x bias) last."""
    out = np.zeros(RP.d + 1)
    for p in range(RP.indices.size):
        out[RP.indices[p]] += np.float64(RP.data[p])
    out[RP.d] = RP.bias * RP.n
    return out


@njit(cache=True, nogil=True, inline="always")
def row_score(RP, w, i):
    acc = 0.0
    lo, hi = span(RP.indptr, i)
    for p in range(lo, hi):
        acc += w[RP.indices[p]] * np.float64(RP.data[p])
    return acc + w[RP.d] * RP.bias


@njit(cache=True, nogil=True, inline="always")
def row_axpy(RP, w, i, step):
    """w += step x_i (the bias feature included): a coordinate step's move of w."""
    lo, hi = span(RP.indptr, i)
    for p in range(lo, hi):
        w[RP.indices[p]] += step * np.float64(RP.data[p])
    w[RP.d] += step * RP.bias


@njit(cache=True, nogil=True, inline="always")
def record_cycle(RP, y, cp, cn, w, f0, rec_f, rec_act, k, it, share):
    """Cycle ``it``'s opening records of label k, where there is room: the primal
    objective (f0 at the start) and the share of instances the cycle visits."""
    if it < rec_f.shape[1]:
        rec_f[k, it] = primal(RP, y, cp, cn, w) if it > 0 else f0
        rec_act[k, it] = share


@njit(cache=True, nogil=True)
def primal(RP, y, cp, cn, w):
    """f(w) = ||w||^2 / 2 (bias weight included) + sum_i c_i phi(y_i w.x_i)."""
    reg = 0.0
    for j in range(RP.d + 1):
        reg += w[j] * w[j]
    acc = 0.0
    for i in range(RP.n):
        acc += (cp if y[i] > 0 else cn) * losses.value(RP.loss, y[i] * row_score(RP, w, i))
    return 0.5 * reg + acc


@njit(cache=True, nogil=True)
def solve(RP, W, xsq, y, cp, cn, eps, max_iter, seed, rec_f, rec_act, rec_step, rec_cg, rec_time, k, timing,
          abort):
    """Minimise f from a = 0 (w = 0).  Returns (status, cycles, coordinate steps, f(0),
    f(w), the first cycle's projected-gradient spread, the last one's).  Records per
    cycle (while k's row of ``rec_f`` has room): the primal objective -- an O(nnz) pass
    each, so the trainer gives room for the first record only -- and the share of
    instances not shrunk."""
    n = RP.n
    d = RP.d
    u, e = losses.dual_box(RP.loss)
    w = W.w
    alpha = W.alpha
    qd = W.qd
    index = W.index
    # the box and the diagonal per class (cost 0: an empty box -- not inf * 0, which is
    # NaN and made the class a hard-margin constraint; helper-39)
    up = u * cp if cp > 0.0 else 0.0
    un = u * cn if cn > 0.0 else 0.0
    dp = e / cp if cp > 0.0 else 0.0
    dn = e / cn if cn > 0.0 else 0.0
    for j in range(d + 1):
        w[j] = 0.0
    for i in range(n):
        alpha[i] = 0.0
        index[i] = i
        qd[i] = xsq[i] + (dp if y[i] > 0 else dn)
    rng = new_rng(seed)
    # f(0) = phi(0) times the costs: no pass over X
    npos = 0
    for i in range(n):
        if y[i] > 0:
            npos += 1
    f0 = losses.value(RP.loss, 0.0) * (npos * cp + (n - npos) * cn)
    pg_max_old = np.inf
    pg_min_old = -np.inf
    spread0 = 0.0
    spread = 0.0
    active = n
    steps = 0
    status = MAX_ITER
    it = 0
    cap = rec_f.shape[1]
    t0 = now() if timing else 0.0
    while it < max_iter:
        if abort[0] != 0:
            status = RUNNING
            break
        record_cycle(RP, y, cp, cn, w, f0, rec_f, rec_act, k, it, active / max(n, 1))
        shuffle(index, active, rng)
        pg_max = -np.inf
        pg_min = np.inf
        cycle_steps = steps
        s = 0
        while s < active:
            i = index[s]
            if y[i] > 0:
                yi, upper, dii = 1.0, up, dp
            else:
                yi, upper, dii = -1.0, un, dn
            if upper <= 0.0:
                s += 1                       # cost 0: no loss on it, a_i stays 0
                continue
            a = alpha[i]
            g = yi * row_score(RP, w, i) - 1.0 + a * dii
            pg = 0.0
            if a == 0.0:
                if g > pg_max_old:
                    # at the lower bound and pushed outwards by more than any violation of
                    # the last cycle: out until the rule is met
                    active -= 1
                    index[s] = index[active]
                    index[active] = i
                    continue
                if g < 0.0:
                    pg = g
            elif a == upper:
                if g < pg_min_old:
                    active -= 1
                    index[s] = index[active]
                    index[active] = i
                    continue
                if g > 0.0:
                    pg = g
            else:
                pg = g
            pg_max = max(pg_max, pg)
            pg_min = min(pg_min, pg)
            s += 1
            if abs(pg) > MIN_VIOLATION:
                if qd[i] > 0.0:
                    a_new = min(max(a - g / qd[i], 0.0), upper)
                else:
                    # an instance without features under the exact hinge (diagonal 0, no
                    # bias): a_i moves w not at all, g is its constant slope, so the
                    # minimum along it is a bound (LIBLINEAR's +-inf step, clipped)
                    a_new = upper if g < 0.0 else 0.0
                alpha[i] = a_new
                row_axpy(RP, w, i, (a_new - a) * yi)
                steps += 1
        spread = pg_max - pg_min if active > 0 else 0.0
        if it == 0:
            spread0 = spread
        if it < cap:
            t0 = record_iteration(rec_step, rec_cg, rec_time, k, it, 1.0, steps - cycle_steps, timing, t0)
        it += 1
        if spread <= eps:
            if active == n:
                status = CONVERGED
                break
            active = n                       # once more over every instance
            pg_max_old = np.inf
            pg_min_old = -np.inf
            continue
        pg_max_old = pg_max if pg_max > 0.0 else np.inf
        pg_min_old = pg_min if pg_min < 0.0 else -np.inf
    f = primal(RP, y, cp, cn, w)
    record_end(rec_f, rec_act, rec_step, rec_cg, rec_time, k, it, f, active / max(n, 1), timing, t0)
    return status, it, steps, f0, f, spread0, spread


register_method(BoxDual, solve)
