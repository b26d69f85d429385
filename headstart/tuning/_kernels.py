"""Compiled per-label cuts of a block of validation scores (SCut, Yang 2001; the "fbr"
fallback of Fan & Lin 2007, as LibMultiLabel's ``train_thresholding`` applies it).

A block is the dense float32 scores ``S[j, i]`` of B labels (rows) on the n validation
instances of one fold (columns, so that a label's scores are contiguous), with the
positives of label j in ``y_indices[y_indptr[j]:y_indptr[j + 1]]``.  Decisions are
``score > t`` throughout, as in :func:`headstart.prediction.topk.predict_above`.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def _f1(tp, predicted, positives):  # pragma: no cover - compiled
    # 2 TP / (2 TP + FP + FN) = 2 TP / (predicted + positives); no decision and no
    # positive counts as 0 (LibMultiLabel's and headstart.metrics' convention)
    d = predicted + positives
    return 2.0 * tp / d if d > 0 else 0.0


@njit(nogil=True, cache=True)
def best_cuts(S, y_indptr, y_indices, t_out, f_out, top_out):  # pragma: no cover - compiled
    """For every label j of the block: the threshold ``t_out[j]`` with the best F1 on
    these instances (``f_out[j]``), or 0 when no cut beats the default decision
    score > 0; ``top_out[j]`` is the label's largest score (the fbr fallback's threshold,
    which decides nothing).

    Only cuts just below a positive can be best (moving the cut down past a negative adds
    a false positive and nothing else), so with P positives sorted by score the candidate
    cuts are P, and cut r (the r + 1 best-scored positives and every negative scoring at
    least as high) needs the number of negatives above each positive score: one pass over
    the negatives, a binary search among the P scores each, O(n log P) per label instead
    of sorting all n scores.  Of equally good cuts the highest is kept (LibMultiLabel's
    scan does the same); the threshold is the midpoint between the cut's lowest score and
    the next lower score of the fold."""
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
        top_out[j] = top
        t_out[j] = 0.0
        f_out[j] = f0
        if P > 0:
            q = np.empty(P, dtype=np.float32)
            for k in range(a, z):
                q[k - a] = s[y_indices[k]]
            q = -np.sort(-q)                      # descending
            above = np.zeros(P, dtype=np.int64)   # negatives first counted at cut r
            for i in range(n):
                if is_pos[i]:
                    continue
                v = s[i]
                if v < q[P - 1]:
                    continue                      # below every positive: never predicted
                lo, hi = 0, P - 1                 # first r with q[r] <= v
                while lo < hi:
                    mid = (lo + hi) // 2
                    if q[mid] <= v:
                        hi = mid
                    else:
                        lo = mid + 1
                above[lo] += 1
            best, best_r, neg = -1.0, -1, 0
            for r in range(P):
                neg += above[r]
                if r + 1 < P and q[r + 1] == q[r]:
                    continue                      # a tie: the cut goes below all of them
                f = _f1(r + 1, r + 1 + neg, P)
                if f > best:
                    best, best_r = f, r
            if best > f0:
                cut = q[best_r]
                below = -np.inf                   # the next lower score of the fold
                for i in range(n):
                    if s[i] < cut and s[i] > below:
                        below = s[i]
                if below == -np.inf:
                    t_out[j] = np.nextafter(np.float32(cut), np.float32(-np.inf))
                else:
                    t_out[j] = 0.5 * (np.float64(cut) + np.float64(below))
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
