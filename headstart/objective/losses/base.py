"""What a margin loss is: phi(m) of the margin m = y * w.x, as three scalar functions
(value, derivative, curvature) and two facts the objective and the stopping rule need.

The rest of the objective -- regulariser, X and X^T products, per-instance costs -- is
written once in :mod:`headstart.objective.erm` on top of these (the decomposition of
DiSMEC++'s ``objective/margin_losses.h`` and LIBLINEAR's ``l2r_erm_fun``).

To add a loss, write one module in this package that defines a ``NamedTuple`` of its
parameters and calls :func:`register`; nothing else changes (the package imports every
module in it, and ``TrainParams``, the command line and the experiment runner take
their choices from :data:`REGISTRY`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .._typed import generic, implement_once

value = generic("value", "phi(m)", 2)
d1 = generic("d1", "phi'(m)", 2)
d2 = generic("d2", "the curvature the Newton method uses for phi at m: phi''(m) where it "
                   "exists, otherwise the authors' generalised second derivative", 2)
derivatives = generic("derivatives", "(phi'(m), the curvature at m) in one call: the objective needs "
                                     "both for every active instance, and a loss whose two share work "
                                     "(the logistic loss: one exp) can say so; by default d1 and d2", 2)
value_and_derivatives = generic("value_and_derivatives",
                                "(phi(m), phi'(m), the curvature at m) in one call: coordinate descent's "
                                "line search (objective/columns.py) evaluates the loss at a trial point "
                                "that, accepted, is the next point, whose derivatives it then needs; by "
                                "default value and derivatives", 2)
curvature_bound = generic("curvature_bound",
                          "an upper bound of phi'' over all margins (inf when the loss has none): "
                          "one-variable coordinate descent (solver/cdn.py) accepts a step whose "
                          "decrease this bound already guarantees without evaluating the loss", 1)
dual_box = generic("dual_box", "(u, e): the loss's dual for coordinate descent in the dual (solver/dual.py; "
                             "Hsieh et al. 2008): an instance of cost c has 0 <= alpha <= u c and the "
                             "dual's diagonal gains e / c (u = inf for an unbounded dual); only losses "
                             "that register ``dual`` have it", 1)
hinge_quadratic = generic("hinge_quadratic",
                          "True when phi(m) is exactly (1 - m)^2 below m = 1 and 0 from there on, with d1 "
                          "and d2 its derivative and (generalised) curvature: a move of the margins then "
                          "changes the loss by the quadratic model of the rows below 1 plus one term per "
                          "row that crosses m = 1, which one-variable coordinate descent (solver/cdn.py) "
                          "evaluates instead of phi on every row of the column", 1)
mines = generic("mines", "True when phi, phi' and the curvature all vanish for m >= 1, so "
                         "instances with margin >= 1 can be skipped (implicit negative mining)", 1)


@dataclass(frozen=True)
class LossInfo:
    name: str
    cls: type                      # the NamedTuple class the kernels specialise on
    help: str
    d1_py: Callable[[Any, float], float]   # phi' as plain Python (the kernels inline the same code)
    make: Callable[[Any], Any]     # TrainParams -> an instance of cls
    mines: bool = True             # implicit negative mining (see ``mines`` above)
    has_dual: bool = False         # --l2-solver dual can train it (a box dual, or own_dual)
    own_dual: bool = False         # its dual method is its own (solver/dual_lr.py), not the box dual

    def d1_at_zero(self, params) -> float:
        """phi'(0) for these parameters: grad f(0) = phi'(0) sum_i c_i y_i x_i (stopping rule)."""
        return float(self.d1_py(self.make(params), 0.0))


REGISTRY: dict[str, LossInfo] = {}


def register(name: str, cls: type, *, value, d1, d2, mines: bool, help: str,
             make: Callable[[Any], Any] | None = None, derivatives=None,
             value_and_derivatives=None, curvature_bound=None, dual=None, own_dual: bool = False,
             hinge_quadratic: bool = False) -> LossInfo:
    """Declare a loss: its parameter class, its three scalar functions (plain Python in
    numba's subset, taking ``(L, m)``; they are inlined into the kernels) and its facts.
    ``derivatives`` (optional, same form) returns (d1, d2) at once where that is cheaper;
    it must give exactly d1's and d2's values; ``value_and_derivatives`` likewise
    (value, d1, d2); ``curvature_bound(L)`` (optional) the supremum of the true phi''
    (not of the Newton method's curvature), inf by default; ``dual(L)`` (optional) the
    (u, e) of ``dual_box``: the loss C phi has the convex conjugate (C phi)*(-a) = -a +
    e a^2 / (2 C) on 0 <= a <= u C, which is what dual coordinate descent needs;
    ``own_dual``: instead, the loss has a dual method of its own in solver/ (the logistic
    loss: solver/dual_lr.py), which training/coordinate.py selects; ``hinge_quadratic``:
    phi is max(0, 1 - m)^2 exactly (see the generic function of that name; a wrong True
    makes CDN's line search accept steps on a wrong loss change)."""
    flag = bool(mines)
    quad = bool(hinge_quadratic)
    g1, g2 = globals()["d1"], globals()["d2"]
    if derivatives is None:
        def derivatives(L, m):
            return g1(L, m), g2(L, m)
    gv, gd = globals()["value"], globals()["derivatives"]
    if value_and_derivatives is None:
        def value_and_derivatives(L, m):
            a, b = gd(L, m)
            return gv(L, m), a, b
    if curvature_bound is None:
        def curvature_bound(L):
            return np.inf
    has_dual = dual is not None or own_dual
    if dual is None:
        def dual(L):
            return np.nan, np.nan
    implement_once(cls, {gv: value, g1: d1, g2: d2, gd: derivatives, globals()["dual_box"]: dual,
                         globals()["curvature_bound"]: curvature_bound,
                         globals()["value_and_derivatives"]: value_and_derivatives,
                         globals()["mines"]: lambda L: flag,
                         globals()["hinge_quadratic"]: lambda L: quad})
    info = LossInfo(name, cls, help, d1, make or (lambda params: cls()), flag, has_dual, bool(own_dual))
    REGISTRY[name] = info
    return info
