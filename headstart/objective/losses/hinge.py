"""Hinge, as DiSMEC++ trains it: ``--loss hinge`` is the Huber-smoothed hinge of
:mod:`.huber_hinge` with epsilon 0.1 (the authors' margin_losses / make_loss).

Why not the exact max(0, 1 - m)?  Its derivative jumps at m = 1 and its second
derivative is 0 wherever it exists, so a Newton method has no curvature to work with.
With the authors' majorising curvature 1/(1 - m) on the exact hinge, the line search
stalls as soon as instances reach the kink (the Armijo test uses g.s, which the
one-sided derivative there exceeds): measured on 4 bibtex labels, every label stopped
with "line search failed", the first of them 7.8% above LIBLINEAR's -s 3 optimum (the
test stopped there; the others' gaps were not recorded).  The smoothed hinge is
C^1, Newton converges on it, and its minimiser is within C * n_active * eps / 2 of the
exact hinge's objective; measured against LIBLINEAR -s 3 (docs/objective.md, "Losses"):
5.5-6.3% above at eps = 0.1 (this loss), 0.5-0.6% at 0.01, 0.05-0.14% at 0.001 --
``--loss huber-hinge --huber-epsilon 0.001`` is the close approximation of the L1-loss
SVM, at the price of more Newton iterations.
"""

from .base import register
from .huber_hinge import HuberHinge, _d1, _d2, _dual, _value

#: DiSMEC++'s smoothing of its "hinge"
EPSILON = 0.1

register("hinge", HuberHinge, value=_value, d1=_d1, d2=_d2, mines=True,
         curvature_bound=lambda L: 1.0 / L.epsilon,
         dual=_dual,
         make=lambda p: HuberHinge(EPSILON),
         help="DiSMEC++'s hinge: the Huber-smoothed hinge with epsilon 0.1 (the exact hinge is non-smooth; "
              "see docs/objective.md, 'Losses')")
