"""Compiled per-label cuts of a block of validation scores (SCut, Yang 2001; the "fbr"
fallback of Fan & Lin 2007, as LibMultiLabel's ``train_thresholding`` applies it).

A block is the dense float32 scores ``S[j, i]`` of B labels (rows) on the n validation
instances of one fold (columns, so that a label's scores are contiguous), with the
positives of label j in ``y_indices[y_indptr[j]:y_indptr[j + 1]]``.  Decisions are
``score > t`` throughout, as in :func:`headstart.prediction.topk.predict_above`.
"""

from __future__ import annotations

import numpy as np
from .._compile import njit


@njit(nogil=True, cache=True)
def _f1(tp, predicted, positives):  # pragma: no cover - compiled
    # 2 TP / (2 TP + FP + FN) = 2 TP / (predicted + positives); no decision and no
    # positive counts as 0 (LibMultiLabel's and headstart.metrics' convention)
    d = predicted + positives
    return 2.0 * tp / d if d > 0 else 0.0


@njit(nogil=True, cache=True)
def _no_decision(top):  # pragma: no cover - compiled
    """The threshold of a fold's 'predict nothing' cut: just above the fold's largest
    score, but never below 0.  A fold model often never saw the label's positives (a
    label with one or two of them), and then scores every instance alike, at its bias,
    below the final model's scores: a threshold just above that constant is far below
    what the final model gives and would make it predict the label everywhere (measured
    on debian-deps: 3,195 labels per test instance).  LibMultiLabel does not meet this:
    LIBLINEAR's model of a one-class problem is w = 0, so that fold's largest score is 0.
    Nothing below 0 is needed to predict nothing, as 0 is the classifiers' own boundary."""
    if top < 0:
        return 0.0
    return np.float64(np.nextafter(np.float32(top), np.float32(np.inf)))


@njit(nogil=True, cache=True)
def _every_decision(low):  # pragma: no cover - compiled
    """The threshold of a fold's 'predict every instance' cut: just below the fold's
    lowest score, but never above 0.  It is the cut of a fold without negatives, whose
    scores are those of a fold model that has seen the label on (nearly) every row and
    gives it about its bias, which the final model's scores may fall below: a threshold
    taken from them would reject rows where the fold had nothing to reject.  0 is the
    classifiers' own boundary, so such a fold never makes the default decision stricter."""
    if low > 0:
        return 0.0
    return np.float64(np.nextafter(np.float32(low), np.float32(-np.inf)))


@njit(nogil=True, cache=True)
def _positive_cuts(s, lo, hi, is_pos, P):  # pragma: no cover - compiled
    """The candidate cuts of one label on instances [lo, hi) with P positives (marked in
    ``is_pos``): ``q`` the positives' scores, highest first, and ``above[r]`` the number
    of negatives first predicted at cut r (the r + 1 best-scored positives and every
    negative scoring at least q[r]).  Only cuts just below a positive can be best (moving
    a cut down past a negative adds a false positive and nothing else), and counting the
    negatives needs one pass over them with a binary search among the P scores each,
    O(n log P) instead of sorting all n scores."""
    q = np.empty(P, dtype=np.float32)
    above = np.zeros(P, dtype=np.int64)
    if P == 0:
        return q, above
    m = 0
    for i in range(lo, hi):
        if is_pos[i]:
            q[m] = s[i]
            m += 1
    q = -np.sort(-q)                              # descending
    for i in range(lo, hi):
        if is_pos[i] or s[i] < q[P - 1]:
            continue                              # below every positive: never predicted
        l, h = 0, P - 1                           # first r with q[r] <= s[i]
        while l < h:
            mid = (l + h) // 2
            if q[mid] <= s[i]:
                h = mid
            else:
                l = mid + 1
        above[l] += 1
    return q, above


@njit(nogil=True, cache=True)
def _threshold_below(s, lo, hi, cut):  # pragma: no cover - compiled
    """The threshold that keeps the instances of [lo, hi) scoring at least ``cut``: the
    midpoint between ``cut`` and the next lower score, or just below ``cut``."""
    below = -np.inf
    for i in range(lo, hi):
        if s[i] < cut and s[i] > below:
            below = s[i]
    if below == -np.inf:
        return np.float64(np.nextafter(np.float32(cut), np.float32(-np.inf)))
    return 0.5 * (np.float64(cut) + np.float64(below))


@njit(nogil=True, cache=True)
def best_cuts(S, y_indptr, y_indices, t_out, f_out, top_out):  # pragma: no cover - compiled
    """For every label j of the block: the threshold ``t_out[j]`` with the best F1 on
    these instances (``f_out[j]``), or 0 when no cut beats the default decision
    score > 0; ``top_out[j]`` is the fbr fallback's threshold, which decides nothing:
    the label's largest score, or 0 when that is negative (see :func:`_no_decision`).

    The candidate cuts are those of :func:`_positive_cuts`.  Of equally good cuts the
    highest is kept (LibMultiLabel's scan does the same); the threshold is the midpoint
    between the cut's lowest score and the next lower score of the fold."""
    B, n = S.shape
    is_pos = np.zeros(n, dtype=np.bool_)
    for j in range(B):
        a, z = y_indptr[j], y_indptr[j + 1]
        P = z - a
        s = S[j]
        top = -np.inf
        predicted0 = 0
        for i in range(n):
            if s[i] > top:
                top = s[i]
            if s[i] > 0:
                predicted0 += 1
        tp0 = 0
        for k in range(a, z):
            is_pos[y_indices[k]] = True
            if s[y_indices[k]] > 0:
                tp0 += 1
        f0 = _f1(tp0, predicted0, P)
        top_out[j] = _no_decision(top)
        t_out[j] = 0.0
        f_out[j] = f0
        if P > 0:
            q, above = _positive_cuts(s, 0, n, is_pos, P)
            best, best_r, neg = -1.0, -1, 0
            for r in range(P):
                neg += above[r]
                if r + 1 < P and q[r + 1] == q[r]:
                    continue                      # a tie: the cut goes below all of them
                f = _f1(r + 1, r + 1 + neg, P)
                if f > best:
                    best, best_r = f, r
            if best > f0:
                t_out[j] = _threshold_below(s, 0, n, q[best_r])
                f_out[j] = best
        for k in range(a, z):
            is_pos[y_indices[k]] = False


@njit(nogil=True, cache=True)
def f1_at(S, y_indptr, y_indices, T, out):  # pragma: no cover - compiled
    """``out[j, m]``: F1 of label j's decisions score > ``T[j, m]`` on these instances."""
    B, n = S.shape
    M = T.shape[1]
    for j in range(B):
        a, z = y_indptr[j], y_indptr[j + 1]
        s = S[j]
        for m in range(M):
            t = T[j, m]
            predicted = 0
            for i in range(n):
                if s[i] > t:
                    predicted += 1
            tp = 0
            for k in range(a, z):
                if s[y_indices[k]] > t:
                    tp += 1
            out[j, m] = _f1(tp, predicted, z - a)


@njit(nogil=True, cache=True)
def _micro_plus_macro(tp, fp, fn, stats):  # pragma: no cover - compiled
    # the label's F1 over the labels seen so far (the others' F1 are constants) plus the
    # Micro-F1 of its counts added to those of the labels before it; 0/0 counts as 0
    d = 2.0 * tp + fp + fn
    macro = 2.0 * tp / d / stats[3] if d > 0 else 0.0
    TP = tp + stats[0]
    D = 2.0 * TP + fp + fn + stats[1] + stats[2]
    micro = 2.0 * TP / D if D > 0 else 0.0
    return micro + macro


@njit(nogil=True, cache=True)
def micromacro_cuts(S, offsets, y_indptr, y_indices, stats, t_out):  # pragma: no cover - compiled
    """The micromacro-freq thresholds (Li, Lin et al., CIKM 2023; LibMultiLabel >= 0.4's
    ``train_thresholding``) of the B labels of a block, in the order given (most frequent
    first).  ``S[j]`` holds label j's out-of-fold scores: fold f's held-out instances are
    columns ``offsets[f]:offsets[f + 1]``; ``y_*`` are its positives in those columns.

    In each fold the cut maximises the Micro-F1 of the label's counts added to ``stats``
    (tp, fp, fn of the labels before it, summed over their folds) plus the label's F1
    divided by the number of labels so far (``stats[3]``, counting this one); of equal
    cuts the highest.  As for SCut only the cuts just below a positive (or above every
    score: no decision) can be best; a fold without negatives predicts every row, at a
    threshold never above 0 (:func:`_every_decision`).  The label's threshold is the mean of its folds';
    then its best counts, summed over the folds, join ``stats``."""
    B, n = S.shape
    folds = offsets.shape[0] - 1
    is_pos = np.zeros(n, dtype=np.bool_)
    for j in range(B):
        a, z = y_indptr[j], y_indptr[j + 1]
        for k in range(a, z):
            is_pos[y_indices[k]] = True
        stats[3] += 1.0
        s = S[j]
        acc = 0.0
        sum_tp = sum_fp = sum_fn = 0.0
        for f in range(folds):
            lo, hi = offsets[f], offsets[f + 1]
            P = 0
            top, low = -np.inf, np.inf
            for i in range(lo, hi):
                if is_pos[i]:
                    P += 1
                if s[i] > top:
                    top = s[i]
                if s[i] < low:
                    low = s[i]
            # no decision in this fold (the threshold of _no_decision)
            best = _micro_plus_macro(0.0, 0.0, float(P), stats)
            best_r, best_tp, best_fp = -1, 0, 0
            q, above = _positive_cuts(s, lo, hi, is_pos, P)
            neg = 0
            for r in range(P):
                neg += above[r]
                if r + 1 < P and q[r + 1] == q[r]:
                    continue                      # a tie: the cut goes below all of them
                o = _micro_plus_macro(float(r + 1), float(neg), float(P - r - 1), stats)
                if o > best:
                    best, best_r, best_tp, best_fp = o, r, r + 1, neg
            if best_r < 0:
                t = _no_decision(top)
            elif P == hi - lo:
                t = _every_decision(low)          # best_r == P - 1: every row predicted
            else:
                t = _threshold_below(s, lo, hi, q[best_r])
            acc += t
            sum_tp += best_tp
            sum_fp += best_fp
            sum_fn += P - best_tp
        t_out[j] = acc / folds
        stats[0] += sum_tp
        stats[1] += sum_fp
        stats[2] += sum_fn
        for k in range(a, z):
            is_pos[y_indices[k]] = False
