"""Numba code-generation settings for headstart's kernels.

Numba turns off LLVM's SLP vectoriser by default (numba PR #8852, after miscompilations
in older LLVM versions).  The hottest kernel here, the lane sweep over X
(:func:`headstart.training.kernel.lanes_scores`), is exactly SLP's pattern: one
independent accumulator per lane fed by adjacent loads, which SLP packs into vector
multiply/adds.  Measured on debian-deps (Zen 5), 8 lanes: one sweep 3.1 ms -> 2.1 ms, training
labels 0:1000 on one thread ~18% less CPU time.  SLP packs isomorphic operations
without reordering any sum, so every result stays bit-identical to the scalar code
(the test suite compares the lane sweep with the one-label path and the solver with
dense references and LIBLINEAR).

The switch is numba's documented ``NUMBA_SLP_VECTORIZE``: set here unless the user set
it, before any kernel is compiled (numba reads it whenever it optimises a new
library).  ``NUMBA_SLP_VECTORIZE=0`` in the environment turns it off again.
"""

from __future__ import annotations

import os


def configure() -> None:
    if "NUMBA_SLP_VECTORIZE" in os.environ:
        return
    os.environ["NUMBA_SLP_VECTORIZE"] = "1"   # also inherited by worker processes (Dask)
    from numba.core import config

    config.reload_config()


configure()
