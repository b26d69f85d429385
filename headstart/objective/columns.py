"""The objective seen by columns, for coordinate descent on an exact L1 regulariser:

    f(w) = sum_j lam_j |w_j| + sum_i c_i * phi(y_i * (x_i . w[:d] + bias * w[d]))

with lam_j = 1 on every feature and on the bias weight only with ``regularize_bias``
(LIBLINEAR's -s 5 / -s 6 objective, Yuan, Ho and Lin, "An improved GLMNET for
L1-regularized logistic regression", JMLR 2012; its loss term is any margin loss of
:mod:`.losses`, through the same generic value / derivatives the row kernels of
:mod:`.erm` use).

Coordinate descent touches one weight at a time, so it needs X by columns (CSC): the
gradient and the Hessian diagonal of coordinate j are sums over column j, and a change
of w_j moves the scores of column j's rows only.  The bias is a virtual column (the
value ``bias`` on every row), coordinate d, present when bias > 0.  Everything here is
a numba kernel over plain arrays; the solver that uses them is
:mod:`headstart.solver.glmnet`.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .._compile import njit
from .._span import span
from . import losses

# X in CSC (int64 column pointers, int32 row indices, float32 values), its shape, the
# bias value and the loss tuple that selects the compiled code (see ._typed).
# The per-column functions take X's three arrays, not the tuple, and are inlined into
# the solver's loops (numba's inline="always"), which holds the arrays in locals: on
# columns of a few nonzeros (rcv1-subset1: 7 on average) a call through LLVM, or the
# tuple's fields read inside the loop, cost more than the sums themselves -- measured
# 7.8-13.3 against 5.0 ns per nonzero for a curvature-dot-and-update pass.
# Row indices are viewed as uint32 (see erm.INDEX_DTYPE: no wrap-around test per gather).
ColumnProblem = namedtuple("ColumnProblem", ["indptr", "indices", "data", "n", "d", "bias", "loss",
                                             "regularize_bias"])


@njit(cache=True, nogil=True, inline="always")
def n_coords(CP):
    """Weights solved for: the features, and the bias weight when there is a bias."""
    return CP.d + 1 if CP.bias > 0.0 else CP.d


@njit(cache=True, nogil=True, inline="always")
def l1_weight(CP, j):
    """lam_j: 1, or 0 on an unregularised bias weight."""
    if j == CP.d and not CP.regularize_bias:
        return 0.0
    return 1.0


@njit(cache=True, nogil=True)
def loss_and_terms_at(CP, y, cp, cn, wx, xd, gc, hc):
    """The loss term sum_i c_i phi(m_i) at the trial scores wx + xd (m_i = y_i (wx_i +
    xd_i)), and there the coefficients every column sum weighs X with: gc_i = c_i
    phi'(m_i) y_i and hc_i = c_i phi''(m_i) (the generalised curvature for the squared
    hinge), into gc / hc (the solver's spare pair).  An accepted trial is the next point,
    so its coefficients need no second evaluation of the loss (for the logistic loss one
    exp per instance and trial instead of two per iteration); with xd = 0 it is the loss
    at wx."""
    acc = 0.0
    for i in range(CP.n):
        yi = y[i]
        c = cp if yi > 0 else cn
        v, g1, g2 = losses.value_and_derivatives(CP.loss, yi * (wx[i] + xd[i]))
        acc += c * v
        gc[i] = c * g1 * yi
        hc[i] = c * g2
    return acc


@njit(cache=True, nogil=True, inline="always")
def grad_and_curvature(indptr, indices, data, j, gc, hc):
    """(dL/dw_j, d2L/dw_j^2) = (sum_i gc_i x_ij, sum_i hc_i x_ij^2) over feature column j."""
    g = 0.0
    h = 0.0
    a, b = span(indptr, j)
    for p in range(a, b):
        i = indices[p]
        v = np.float64(data[p])
        g += v * gc[i]
        h += v * v * hc[i]
    return g, h


@njit(cache=True, nogil=True, inline="always")
def curvature_dot(indptr, indices, data, j, hc, xd):
    """sum_i x_ij hc_i xd_i: coordinate j of H d, H = X^T diag(hc) X, given xd = X d."""
    acc = 0.0
    a, b = span(indptr, j)
    for p in range(a, b):
        i = indices[p]
        acc += data[p] * hc[i] * xd[i]
    return acc


@njit(cache=True, nogil=True, inline="always")
def add_column(indptr, indices, data, j, z, xd):
    """xd += z * column j (the scores' change when w_j moves by z)."""
    a, b = span(indptr, j)
    for p in range(a, b):
        xd[indices[p]] += data[p] * z


@njit(cache=True, nogil=True)
def gradient_pass(indptr, indices, data, gc, hc, nu, grad, hdiag):
    """grad_j and hdiag_j (+ nu) of every feature column, in column order.  A function
    of its own, called once per pass with plain arrays: written out inside the solver's
    loop the same pass ran ~3x slower (3.4 against 0.9 ms on rcv1-subset1)."""
    for j in range(indptr.size - 1):
        g, h = grad_and_curvature(indptr, indices, data, j, gc, hc)
        grad[j] = g
        hdiag[j] = h + nu


# The bias column: the value ``bias`` on every row.

@njit(cache=True, nogil=True)
def bias_grad_and_curvature(bias, gc, hc):
    g = 0.0
    h = 0.0
    for i in range(gc.size):
        g += gc[i]
        h += hc[i]
    return g * bias, h * bias * bias


@njit(cache=True, nogil=True)
def bias_curvature_dot(bias, hc, xd):
    acc = 0.0
    for i in range(hc.size):
        acc += hc[i] * xd[i]
    return acc * bias


@njit(cache=True, nogil=True)
def bias_add(bias, z, xd):
    zb = z * bias
    for i in range(xd.size):
        xd[i] += zb


@njit(cache=True, nogil=True, inline="always")
def coordinate_add(indptr, indices, data, bias, d, j, z, xd):
    """xd += z * the column of coordinate j: feature j (j < d) or the bias column."""
    if j < d:
        add_column(indptr, indices, data, j, z, xd)
    else:
        bias_add(bias, z, xd)
