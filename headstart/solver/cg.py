"""Preconditioned conjugate gradient for the Newton system H s = -g.

Follows LIBLINEAR's NEWTON::pcg (newton.cpp, v2.40+): the CG loop stops when the
quadratic model Q(s) = g.s + 0.5 s.H.s stops decreasing fast enough,

    cg_iter * (Q_new - Q_old) >= cgtol * Q_new,   cgtol = min(eps_cg, sqrt(||g||_{M^-1})),

(Nash & Sofer's rule, as in Galli & Lin 2021), not on the residual norm.

Working on the support.  Outside the support F of the active rows the objective is
the bare regulariser (g = w, H = I, M = (1 - a) + a): there every CG vector stays a
multiple of w_O, so that block is carried as one scalar per vector (sigma for s,
rho for r, zeta for z, delta for the direction), its inner products as
scalar * scalar * ||w_O||^2.  This is the same iteration as CG on all coordinates in
exact arithmetic, but each step costs O(|F| + nnz of the active rows) instead of
O(features) -- for tail labels with a good start, |F| is a few percent of the features.

Phases.  An iteration is split around its Hessian product -- :func:`pcg_begin`, then
per iteration the product H d and :func:`pcg_step` -- so that a scheduler can compute
the products of several problems in one pass over their active rows
(:func:`headstart.objective.erm.hess_rows_group`); :func:`pcg` strings the phases
together for one problem.  The scalars carried from phase to phase live in a small
float64 array (indices below).  The preconditioned residual z = r / M has no vector of
its own: a step keeps it in Hd between its two uses (Hd is free by then).
"""

from __future__ import annotations

import math

import numpy as np

from .._compile import njit
from ..objective import erm

# the CG scalars between phases (a float64 array of CG_SCALARS)
ZTR, SIGMA, RHO, DELTA, CGTOL, QVAL, ITER, MOUT = range(8)
CG_SCALARS = 8


@njit(cache=True, nogil=True)
def pcg_begin(O, g, M, s, r, dv, eps_cg, m_out, cs):
    """s = 0, r = -g, d = M^-1 r on the support (the scalars outside it into ``cs``)."""
    F = O.F
    full = erm.support_is_all(O)   # then F[q] == q: index directly
    nF = O.ist[erm.NF]
    wout2 = O.fst[erm.WOUT2]
    zTr = 0.0
    for q in range(nF):
        j = q if full else F[q]
        s[j] = 0.0
        r[j] = -g[j]
        z = r[j] / M[j]
        dv[j] = z
        zTr += z * r[j]
    rho = -1.0           # r_O = -g_O = -w_O
    zeta = rho / m_out
    zTr += zeta * rho * wout2
    cs[ZTR] = zTr
    cs[SIGMA] = 0.0
    cs[RHO] = rho
    cs[DELTA] = zeta
    cs[CGTOL] = min(eps_cg, math.sqrt(math.sqrt(zTr)))
    cs[QVAL] = 0.0
    cs[ITER] = 0.0
    cs[MOUT] = m_out


@njit(cache=True, nogil=True)
def pcg_step(O, g, M, s, r, dv, Hd, cs):
    """One CG iteration, given Hd = H d on the support: updates s, r, d; returns True when
    CG stops (Q's decrease rule, numerical trouble, or max(features, 5) iterations)."""
    F = O.F
    full = erm.support_is_all(O)   # then F[q] == q: index directly
    nF = O.ist[erm.NF]
    wout2 = O.fst[erm.WOUT2]
    cg_iter = cs[ITER] + 1.0
    cs[ITER] = cg_iter
    zTr = cs[ZTR]
    delta = cs[DELTA]
    dHd = delta * delta * wout2   # (H d)_O = d_O
    for q in range(nF):
        j = q if full else F[q]
        dHd += dv[j] * Hd[j]
    if dHd <= 1.0e-16:  # avoid 0/0 in alpha (LIBLINEAR)
        return True
    alpha = zTr / dHd
    sr = 0.0
    sg = 0.0
    # The next residual's preconditioned form z = r / M and z.r are computed in the same
    # pass as s and r, although a stop below makes them unneeded: the pass is bound by
    # its chains of additions (an order-preserving sum cannot be vectorised), so three
    # chains and the division cost what two did, and a second pass over the support is
    # saved (medical, 1449 features: this function 27% of a zero start's time).  z goes
    # into Hd, which this step no longer needs (the next product overwrites it; after a
    # stop nobody reads it): one division per coordinate instead of two, the same bits.
    znewTrnew = 0.0
    for q in range(nF):
        j = q if full else F[q]
        s[j] += alpha * dv[j]
        rj = r[j] - alpha * Hd[j]
        r[j] = rj
        sr += s[j] * rj
        sg += s[j] * g[j]
        z = rj / M[j]
        Hd[j] = z
        znewTrnew += z * rj
    # With no weight outside the support (w_O = 0: a zero start, or a support of every
    # coordinate) s_O = sigma w_O is 0 whatever sigma, and sigma would only enter through
    # the split s = sigma w + (s - sigma w) on the support -- where its meaningless
    # values (1e5 on a problem with features offset by 100) made X s a difference of
    # huge terms and the 4th Newton step a poor one, until the line search failed far
    # above the optimum LIBLINEAR reaches.  So sigma stays 0 then, and delta = s.
    sigma = cs[SIGMA] + alpha * delta if wout2 > 0.0 else 0.0
    rho = cs[RHO] - alpha * delta
    cs[SIGMA] = sigma
    cs[RHO] = rho
    sr += sigma * rho * wout2
    sg += sigma * wout2
    # Q(s) = g.s + 0.5 s.H.s = -0.5 (s.r - s.g) since r = -g - H s
    newQ = -0.5 * (sr - sg)
    Qdiff = newQ - cs[QVAL]
    if newQ <= 0.0 and Qdiff <= 0.0:
        if cg_iter * Qdiff >= cs[CGTOL] * newQ:
            return True
    else:
        return True  # quadratic model positive or increasing: numerical trouble, stop
    cs[QVAL] = newQ
    zeta = rho / cs[MOUT]
    znewTrnew += zeta * rho * wout2
    beta = znewTrnew / zTr
    for q in range(nF):
        j = q if full else F[q]
        dv[j] = Hd[j] + beta * dv[j]
    cs[DELTA] = zeta + beta * delta
    cs[ZTR] = znewTrnew
    return cg_iter >= max(M.size, 5)


@njit(cache=True, nogil=True)
def pcg(P, O, w, g, M, s, r, dv, Hd, eps_cg, m_out):
    """Approximately solve H s = -g, H the objective's Hessian at w (after its gradient).

    Writes s[F] (and uses r, dv, Hd on F as scratch), F the objective's support;
    returns (cg_iter, sigma) with s_O = sigma * w_O outside the support, where the
    objective is ||w||^2 / 2 (g = w, H = I, preconditioner ``m_out``).
    """
    cs = np.empty(CG_SCALARS)
    pcg_begin(O, g, M, s, r, dv, eps_cg, m_out, cs)
    while True:
        erm.hess_vec(P, O, w, dv, Hd)
        if pcg_step(O, g, M, s, r, dv, Hd, cs):
            break
    return np.int64(cs[ITER]), cs[SIGMA]
