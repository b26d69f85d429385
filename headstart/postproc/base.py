"""The post-processing interface."""

from __future__ import annotations

from ..objective._typed import generic

threshold = generic("threshold", """(plan, P, O, W, f) -> float.

The pruning threshold for the label whose solution is W.w (with O.wx = X W.w current and
f its objective value).  May use W's CG vectors and O.xs as scratch.""", arity=5, returns=True)

