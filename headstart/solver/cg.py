"""Preconditioned conjugate gradient for the Newton system H s = -g.

Follows LIBLINEAR's NEWTON::pcg (newton.cpp, v2.40+): the CG loop stops when the
quadratic model Q(s) = g.s + 0.5 s.H.s stops decreasing fast enough,

    cg_iter * (Q_new - Q_old) >= cgtol * Q_new,   cgtol = min(eps_cg, sqrt(||g||_{M^-1})),

(Nash & Sofer's rule, as in Galli & Lin 2021), not on the residual norm.  The only
objective question asked is a Hessian-vector product on the active set fixed by the
last gradient evaluation.
"""

from __future__ import annotations

import math

import numba as nb

from ..objective import erm


@nb.njit(cache=True, nogil=True)
def _dot(a, b):
    acc = 0.0
    for j in range(a.size):
        acc += a[j] * b[j]
    return acc


@nb.njit(cache=True, nogil=True)
def pcg(P, act, nact, hcoef, g, M, s, r, d, z, Hd, eps_cg):
    """Approximately solve H s = -g; returns the number of CG steps (s, r are outputs)."""
    nv = g.size
    for j in range(nv):
        s[j] = 0.0
        r[j] = -g[j]
        z[j] = r[j] / M[j]
        d[j] = z[j]
    zTr = _dot(z, r)
    cgtol = min(eps_cg, math.sqrt(math.sqrt(zTr)))
    Q = 0.0
    cg_iter = 0
    max_cg_iter = max(nv, 5)
    while cg_iter < max_cg_iter:
        cg_iter += 1
        erm.hess_vec(P, act, nact, hcoef, d, Hd)
        dHd = _dot(d, Hd)
        if dHd <= 1.0e-16:  # avoid 0/0 in alpha (LIBLINEAR)
            break
        alpha = zTr / dHd
        sr = 0.0
        sg = 0.0
        for j in range(nv):
            s[j] += alpha * d[j]
            r[j] -= alpha * Hd[j]
            sr += s[j] * r[j]
            sg += s[j] * g[j]
        # Q(s) = g.s + 0.5 s.H.s = -0.5 (s.r - s.g) since r = -g - H s
        newQ = -0.5 * (sr - sg)
        Qdiff = newQ - Q
        if newQ <= 0.0 and Qdiff <= 0.0:
            if cg_iter * Qdiff >= cgtol * newQ:
                break
        else:
            break  # quadratic model positive or increasing: numerical trouble, stop
        Q = newQ
        znewTrnew = 0.0
        for j in range(nv):
            z[j] = r[j] / M[j]
            znewTrnew += z[j] * r[j]
        beta = znewTrnew / zTr
        for j in range(nv):
            d[j] = z[j] + beta * d[j]
        zTr = znewTrnew
    return cg_iter
