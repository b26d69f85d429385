"""CDN: exact L1-regularised training by one-variable Newton steps (coordinate descent
Newton; Chang, Hsieh and Lin, JMLR 2008, for L1 by Yuan, Chang, Hsieh and Lin, "A
comparison of optimization methods and software for large-scale L1-regularized linear
classification", JMLR 2010, section 4.1.2 -- the method of LIBLINEAR's -s 5), for any
margin loss of :mod:`headstart.objective.losses`.

Each cycle visits the weights in play in random order.  For weight j it forms the
one-variable quadratic model of the loss from column j's rows at the *current* scores
(gradient G and curvature H, the curvature floored at 1e-12), takes the model's minimiser
with the L1 term (a soft threshold) as the direction z, and backtracks on the true
objective: accept z when

    lam_j (|w_j + z| - |w_j|) + loss(w + z e_j) - loss(w) <= sigma (G z + lam_j (|w_j + z| - |w_j|)),

halving z at most 20 times.  The loss change is bounded by G z + (sup phi'' / 2) sum_i c_i
x_ij^2 z^2, so where that bound already passes the test the step is taken without
evaluating the loss on the column (the "approximate condition" of the paper; the loss's
``curvature_bound``).  The scores move with every accepted step.

Why a second coordinate-descent method beside newGLMNET (:mod:`.glmnet`, the default):
with the squared hinge, newGLMNET's quadratic model of the loss term uses the generalised
curvature, and at LIBLINEAR's default eps = 0.01 it meets the stopping rule at a higher
objective than -s 5 does with the same rule (bibtex: 3.5% higher at the median; at C = 100
about 50%).  CDN re-reads the active rows at every weight and goes where -s 5 goes: the
same objective per label at the same eps.  At tight tolerances newGLMNET is the faster of
the two by far (CDN, like -s 5, may run into its cycle cap there).

LIBLINEAR's choices are kept where they define the result: the stopping rule (the 1-norm
of the minimum-norm subgradient over the weights in play, summed along a cycle, at most
``tol`` times its value in the first cycle; when met with weights shrunk out, every
weight is brought back for another cycle), the shrinking of a zero weight whose gradient
lies inside (-lam + M/n, lam - M/n), M the previous cycle's largest violation, sigma =
0.01, 20 halvings, 1e-12 as the smallest step and curvature, ``max_iter`` (1000 by
default) cycles.  What is ours: the loss is a compiled strategy; the order comes from a
per-label generator, as in newGLMNET; a step whose line search fails is undone (the
scores are moved back along the column) rather than kept; for the squared hinge a trial
step's loss change is the model's quadratic plus a term per row crossing m = 1
(:func:`_trial_column`), not phi summed before and after over the column as in -s 5 --
the same change up to rounding, several times cheaper per row, and why this is faster
than -s 5 (docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np

from .._compile import njit
from .._span import span
from ..objective import columns, losses
from .glmnet import MAX_HALVINGS, SIGMA, _violation, new_rng, record_end, record_iteration, shuffle
from .newton import CONVERGED, MAX_ITER, RUNNING, now

MIN_CURVATURE = 1e-12
MIN_STEP = 1e-12


# The scores are kept as margins m_i = y_i x_i.w, and X's values as y_i x_ij (``W.signed``,
# made once per label: an O(nnz) pass against the hundreds of cycles a label takes), so a
# column pass reads neither y nor a per-row cost unless the two classes' costs differ
# (LIBLINEAR's -s 5 likewise multiplies its column copy of X by y).  10 bibtex labels:
# 2.73 s with scores and y per nonzero, 2.35 s so; debian-deps 1.03 and 0.70 s (one thread,
# the same cycles and objective values).

@njit(cache=True, nogil=True, inline="always")
def _column_model(indptr, indices, sv, j, L, y, cp, cn, mg):
    """(G, H) of weight j at the margins mg: sum_i c_i phi'(m_i) y_i x_ij and
    sum_i c_i phi''(m_i) x_ij^2 over column j's rows."""
    g = 0.0
    h = 0.0
    skip = losses.mines(L)
    a, b = span(indptr, j)
    if cp == cn:
        for p in range(a, b):
            m = mg[indices[p]]
            if skip and m >= 1.0:
                continue              # phi' = phi'' = 0 there: most rows, late in a label
            g1, g2 = losses.derivatives(L, m)
            v = np.float64(sv[p])
            g += g1 * v
            h += g2 * v * v
        return cp * g, cp * h
    for p in range(a, b):
        i = indices[p]
        m = mg[i]
        if skip and m >= 1.0:
            continue
        c = cp if y[i] > 0 else cn
        g1, g2 = losses.derivatives(L, m)
        v = np.float64(sv[p])
        g += c * g1 * v
        h += c * g2 * v * v
    return g, h


@njit(cache=True, nogil=True, inline="always")
def _shift_column(indptr, indices, sv, j, dz, L, y, cp, cn, mg, with_old):
    """Move weight j by dz (mg += dz * y x_j); returns the loss over column j's rows
    before (only ``with_old``, else 0) and after the move."""
    old = 0.0
    new = 0.0
    skip = losses.mines(L)
    uniform = cp == cn
    a, b = span(indptr, j)
    for p in range(a, b):
        i = indices[p]
        c = cp if uniform or y[i] > 0 else cn
        m = mg[i]
        if with_old and not (skip and m >= 1.0):
            old += c * losses.value(L, m)
        m += dz * sv[p]
        mg[i] = m
        if not (skip and m >= 1.0):
            new += c * losses.value(L, m)
    return old, new


@njit(cache=True, nogil=True, inline="always")
def _move_column(indptr, indices, sv, j, dz, mg):
    a, b = span(indptr, j)
    for p in range(a, b):
        mg[indices[p]] += dz * sv[p]


# The line search's trial of the squared hinge (a loss with ``losses.hinge_quadratic``) at
# z, the weight having been moved by ``moved`` (0 at the first trial): on a row whose
# margin stays below 1 the loss is the quadratic (1 - m)^2, whose change along the column
# is exactly the model's G z + H z^2 / 2 (H the curvature before its floor); a row that
# stays at or above 1 adds nothing; a row that crosses m = 1 adds its loss c (1 - m')^2
# (it was 0 before) or takes off the quadratic's value there (the model counted it).  So
# the trial needs the margins moved, one comparison per row, and arithmetic on the few
# rows that cross -- not phi before and after on every row, as the generic evaluation
# does (on bibtex, 87% of the weights visited are evaluated so; measured on one bibtex
# label's final margins, one thread: 1.1 ns per row against 5.7 for the generic pass,
# 1.9 for the model's pass).  The same change as sum_i c (phi(m_i') - phi(m_i)) up to rounding,
# so the same steps are accepted.  The bias weight's trials likewise (_trial_bias).

@njit(cache=True, nogil=True, inline="always")
def _crossing(m2, c):
    t = 1.0 - m2
    return c * t * t if m2 < 1.0 else -(c * t * t)


@njit(cache=True, nogil=True, inline="always")
def _trial_column(indptr, indices, sv, j, z, moved, y, cp, cn, mg):
    """Move weight j from ``moved`` to z (mg += (z - moved) y x_j); returns the sum of
    the crossing rows' terms (see above), relative to the margins before any move."""
    corr = 0.0
    dz = z - moved
    a, b = span(indptr, j)
    if moved == 0.0:
        for p in range(a, b):
            i = indices[p]
            m = mg[i]
            m2 = m + dz * sv[p]
            mg[i] = m2
            if (m < 1.0) != (m2 < 1.0):      # rare: a branch the processor predicts
                corr += _crossing(m2, cp if y[i] > 0 else cn)
        return corr
    for p in range(a, b):                      # a later trial: rarely run
        i = indices[p]
        v = sv[p]
        m = mg[i]
        m0 = m - moved * v                     # before the first trial, up to rounding
        m2 = m + dz * v
        mg[i] = m2
        if (m0 < 1.0) != (m2 < 1.0):
            corr += _crossing(m2, cp if y[i] > 0 else cn)
    return corr


@njit(cache=True, nogil=True)
def _bias_model(bias, L, y, cp, cn, mg):
    g = 0.0
    h = 0.0
    skip = losses.mines(L)
    for i in range(mg.size):
        m = mg[i]
        if skip and m >= 1.0:
            continue
        yi = y[i]
        c = cp if yi > 0 else cn
        g1, g2 = losses.derivatives(L, m)
        g += c * g1 * yi
        h += c * g2
    return g * bias, h * bias * bias


@njit(cache=True, nogil=True)
def _shift_bias(bias, dz, L, y, cp, cn, mg, with_old):
    old = 0.0
    new = 0.0
    step = dz * bias
    skip = losses.mines(L)
    for i in range(mg.size):
        yi = y[i]
        c = cp if yi > 0 else cn
        m = mg[i]
        if with_old and not (skip and m >= 1.0):
            old += c * losses.value(L, m)
        m += step * yi
        mg[i] = m
        if not (skip and m >= 1.0):
            new += c * losses.value(L, m)
    return old, new


@njit(cache=True, nogil=True)
def _trial_bias(bias, z, moved, y, cp, cn, mg):
    """:func:`_trial_column` for the bias weight, whose column is ``bias`` on every row
    (the margins move by the step times bias y_i, as in :func:`_shift_bias`)."""
    corr = 0.0
    dz = (z - moved) * bias
    if moved == 0.0:
        for i in range(mg.size):
            yi = y[i]
            m = mg[i]
            m2 = m + dz * yi
            mg[i] = m2
            if (m < 1.0) != (m2 < 1.0):
                corr += _crossing(m2, cp if yi > 0 else cn)
        return corr
    back = moved * bias
    for i in range(mg.size):
        yi = y[i]
        m = mg[i]
        m0 = m - back * yi
        m2 = m + dz * yi
        mg[i] = m2
        if (m0 < 1.0) != (m2 < 1.0):
            corr += _crossing(m2, cp if yi > 0 else cn)
    return corr


@njit(cache=True, nogil=True)
def _move_bias(bias, dz, y, mg):
    step = dz * bias
    for i in range(mg.size):
        mg[i] += step * y[i]


# weight j of d features, or the bias weight (j == d): the column or the virtual bias column

@njit(cache=True, nogil=True, inline="always")
def _move(indptr, indices, sv, bias, y, d, j, dz, mg):
    if j < d:
        _move_column(indptr, indices, sv, j, dz, mg)
    else:
        _move_bias(bias, dz, y, mg)


@njit(cache=True, nogil=True, inline="always")
def _shift(indptr, indices, sv, bias, y, d, j, dz, L, cp, cn, mg, with_old):
    if j < d:
        return _shift_column(indptr, indices, sv, j, dz, L, y, cp, cn, mg, with_old)
    return _shift_bias(bias, dz, L, y, cp, cn, mg, with_old)


@njit(cache=True, nogil=True)
def _objective(CP, y, cp, cn, w, mg, lam_bias):
    """f(w) from the margins and the weights."""
    d = CP.d
    L = CP.loss
    reg = 0.0
    for j in range(columns.n_coords(CP)):
        reg += (1.0 if j < d else lam_bias) * abs(w[j])
    acc = 0.0
    for i in range(mg.size):
        acc += (cp if y[i] > 0 else cn) * losses.value(L, mg[i])
    return reg + acc


@njit(cache=True, nogil=True)
def solve(CP, W, y, cp, cn, tol, max_iter, seed, rec_f, rec_act, rec_step, rec_cg, rec_time, k, timing, abort):
    """Minimise f from w = 0, as :func:`.glmnet.solve` (same buffers W -- hdiag holds the
    columns' curvature bounds here --, records, abort and results; the iterations are
    CDN cycles, and the count after them is of loss evaluations on a column)."""
    n = CP.n
    d = CP.d
    bias = CP.bias
    L = CP.loss
    indptr = CP.indptr
    indices = CP.indices
    data = CP.data
    nv = columns.n_coords(CP)
    lam_bias = columns.l1_weight(CP, d)
    w = W.w
    bound = W.hdiag
    index = W.index
    mg = W.wx                        # margins y_i x_i.w
    sv = W.signed
    for j in range(nv):
        w[j] = 0.0
        index[j] = j
    for i in range(n):
        mg[i] = 0.0
    if sv.size < indices.size:
        raise ValueError("CDN needs W.signed with one value per nonzero of X (glmnet.make_work's nnz_signed)")
    for p in range(indices.size):
        sv[p] = data[p] * y[indices[p]]
    # sup phi'' / 2 * sum_i c_i x_ij^2: the loss change along column j is at most
    # G z + bound_j z^2 (a loss with no known bound: no shortcut)
    half_sup = 0.5 * losses.curvature_bound(L)
    quick = np.isfinite(half_sup)
    quadratic = losses.hinge_quadratic(L)    # trials by _trial_column on the columns
    if quick:
        for j in range(d):
            acc = 0.0
            a, b = span(indptr, j)
            for p in range(a, b):
                v = np.float64(data[p])
                acc += (cp if y[indices[p]] > 0 else cn) * v * v
            bound[j] = half_sup * acc
        if nv > d:
            acc = 0.0
            for i in range(n):
                acc += cp if y[i] > 0 else cn
            bound[d] = half_sup * acc * bias * bias
    rng = new_rng(seed)
    f0 = _objective(CP, y, cp, cn, w, mg, lam_bias)
    # the objective along the way, for the per-cycle records only: updated by each step's
    # change (exact where the loss on the column was evaluated; a step the curvature bound
    # accepted then evaluates it too) rather than recomputed over all n instances per
    # cycle -- 10 bibtex labels took 3.81 s with that, 2.35 s without records
    f_now = f0
    active = nv
    gmax_old = np.inf
    gnorm_init = 0.0
    gnorm = 0.0
    evaluations = 0
    status = MAX_ITER
    it = 0
    cap = rec_f.shape[1]
    t0 = now() if timing else 0.0
    while it < max_iter:
        if abort[0] != 0:
            status = RUNNING
            break
        track = it < cap
        if track:
            rec_f[k, it] = f_now
            rec_act[k, it] = active / max(nv, 1)
        shuffle(index, active, rng)
        gmax = 0.0
        gnorm = 0.0
        cycle_evaluations = evaluations
        s = 0
        while s < active:
            j = index[s]
            lam = 1.0 if j < d else lam_bias
            if j < d:
                g, h = _column_model(indptr, indices, sv, j, L, y, cp, cn, mg)
            else:
                g, h = _bias_model(bias, L, y, cp, cn, mg)
            h_model = h                  # the loss's curvature, for the quadratic's change
            h = max(h, MIN_CURVATURE)
            gp = g + lam
            gn = g - lam
            wj = w[j]
            v = _violation(g, lam, wj)
            if v < 0.0:
                if gp > gmax_old / n and gn < -gmax_old / n:
                    # well inside the subgradient interval: out until the rule is met
                    active -= 1
                    index[s] = index[active]
                    index[active] = j
                    continue
                v = 0.0
            gmax = max(gmax, v)
            gnorm += v
            s += 1
            # the one-variable model's minimiser with lam |w_j + z| (a soft threshold)
            if gp < h * wj:
                z = -gp / h
            elif gn > h * wj:
                z = -gn / h
            else:
                z = -wj
            if abs(z) < MIN_STEP:
                if z == -wj and wj != 0.0:
                    # the step to zero of a weight that is zero but for rounding (seen:
                    # -2.2e-16 on a medical label): too small to take as a step, yet its
                    # violation |G -+ lam| counts in the rule for ever -- LIBLINEAR -s 5
                    # stalls there until its cycle cap; set it to zero instead
                    _move(indptr, indices, sv, bias, y, d, j, z, mg)
                    if track:
                        f_now -= lam * abs(wj)
                    w[j] = 0.0
                continue
            delta = g * z + lam * (abs(wj + z) - abs(wj))
            moved = 0.0           # how far the scores have been moved along column j
            loss_old = 0.0
            change = 0.0          # the loss change of the trial
            accepted = False
            for q in range(MAX_HALVINGS):
                cond = lam * (abs(wj + z) - abs(wj)) - SIGMA * delta
                approx = quick and bound[j] * z * z + g * z + cond <= 0.0
                if approx and not track:
                    _move(indptr, indices, sv, bias, y, d, j, z - moved, mg)
                    moved = z
                    accepted = True
                    break
                # the loss change: for the recorded objective only where the bound has
                # accepted the step, for the test otherwise
                if quadratic:
                    if j < d:
                        corr = _trial_column(indptr, indices, sv, j, z, moved, y, cp, cn, mg)
                    else:
                        corr = _trial_bias(bias, z, moved, y, cp, cn, mg)
                    change = g * z + 0.5 * h_model * z * z + corr
                else:
                    old, new = _shift(indptr, indices, sv, bias, y, d, j, z - moved, L, cp, cn, mg, q == 0)
                    if q == 0:
                        loss_old = old
                    change = new - loss_old
                moved = z
                if approx:
                    accepted = True
                    break
                evaluations += 1
                if cond + change <= 0.0:
                    accepted = True
                    break
                z *= 0.5
                delta *= 0.5
            if accepted:
                if track:
                    f_now += lam * (abs(wj + z) - abs(wj)) + change
                w[j] = wj + z
            elif moved != 0.0:
                _move(indptr, indices, sv, bias, y, d, j, -moved, mg)
        if it == 0:
            gnorm_init = gnorm
        if it < cap:
            t0 = record_iteration(rec_step, rec_cg, rec_time, k, it, 1.0, evaluations - cycle_evaluations, timing, t0)
        it += 1
        if gnorm <= tol * gnorm_init:
            if active == nv:
                status = CONVERGED
                break
            active = nv                  # check once more with every weight in play
            gmax_old = np.inf
            continue
        gmax_old = gmax
    f = _objective(CP, y, cp, cn, w, mg, lam_bias)
    record_end(rec_f, rec_act, rec_step, rec_cg, rec_time, k, it, f, active / max(nv, 1), timing, t0)
    return status, it, evaluations, f0, f, gnorm_init, gnorm
