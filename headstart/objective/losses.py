"""Margin losses phi(m), m = y * w.x, as three scalar functions: value, first and second
derivative (the DiSMEC++ decomposition).  Everything else of the objective -- the L2
regulariser, the X and X^T products -- is written once in :mod:`.erm` on top of these.

Losses are selected by an integer code rather than a function object so that the whole
per-label solve compiles into one cacheable numba function (numba cannot cache code that
receives functions as run-time values).
"""

from __future__ import annotations

import math

import numba as nb

SQUARED_HINGE = 0
LOGISTIC = 1

LOSS_CODES = {"squared-hinge": SQUARED_HINGE, "logistic": LOGISTIC}


@nb.njit(cache=True, nogil=True, inline="always")
def value(loss: int, m: float) -> float:
    if loss == SQUARED_HINGE:
        # max(0, 1 - m)^2
        t = 1.0 - m
        return t * t if t > 0.0 else 0.0
    # log(1 + exp(-m)), written so that neither branch overflows
    if m >= 0.0:
        return math.log1p(math.exp(-m))
    return -m + math.log1p(math.exp(m))


@nb.njit(cache=True, nogil=True, inline="always")
def d1(loss: int, m: float) -> float:
    if loss == SQUARED_HINGE:
        t = 1.0 - m
        return -2.0 * t if t > 0.0 else 0.0
    # -1 / (1 + exp(m)) = sigmoid(m) - 1
    if m >= 0.0:
        e = math.exp(-m)
        return -e / (1.0 + e)
    return -1.0 / (1.0 + math.exp(m))


@nb.njit(cache=True, nogil=True, inline="always")
def d2(loss: int, m: float) -> float:
    if loss == SQUARED_HINGE:
        # generalised second derivative: 2 on m < 1, 0 beyond (Mangasarian 2002; used by
        # LIBLINEAR's l2r_l2_svc_fun and by the paper, section 2)
        return 2.0 if m < 1.0 else 0.0
    e = math.exp(-abs(m))
    return e / ((1.0 + e) * (1.0 + e))


@nb.njit(cache=True, nogil=True, inline="always")
def has_hinge(loss: int) -> bool:
    """True when phi, phi' and phi'' vanish for m >= 1, so inactive instances can be
    skipped in gradient and Hessian products (implicit negative mining)."""
    return loss == SQUARED_HINGE


def d1_at_zero(loss: int | str) -> float:
    """phi'(0): grad f(0) = C * phi'(0) * X^T y, used by the stopping rule.

    Accepts the loss code or its name."""
    code = LOSS_CODES[loss] if isinstance(loss, str) else int(loss)
    if code == SQUARED_HINGE:
        return -2.0
    if code == LOGISTIC:
        return -0.5
    raise ValueError(f"unknown loss {loss!r}")
