"""Unsigned positions for the compiled loops over CSR / CSC rows and columns.

numba indexes an array with a signed integer as Python does: a negative index counts
from the end, so every access pays a test and a select for that wrap-around (three
instructions per access, measured as 3-40% of the loops that do little else per
nonzero: the training kernels, dual coordinate descent, top-k scoring, the exact
first-stage search).  An unsigned index cannot be negative and needs neither.  So every
loop over a row or column of a compressed matrix takes its range from :func:`span`.

Rules for the values these give: they may take part in indexing only.  numba types
the sum or product of a uint64 and a signed integer as float64, so arithmetic mixing
them is silently slow or wrong; where a loop needs both, cast explicitly.
"""

from __future__ import annotations

import numpy as np

from ._compile import njit

#: position in an indices / data array (any length)
U64 = np.uint64
#: an id below 2**32 (a feature, row or label id read from an int32 indices array)
U32 = np.uint32


@njit(cache=True, nogil=True, inline="always")
def span(indptr, k):  # pragma: no cover - compiled
    """Entry k's positions in a compressed matrix as an unsigned range (lo, hi).

    ``inline="always"`` inlines it in numba's own IR, before LLVM: as a call it would
    cost, for a caller passing a field of a structure such as ``P.indptr``, a reference
    count increment and decrement per call -- once per row in the training kernels."""
    return U64(indptr[k]), U64(indptr[k + 1])


@njit(cache=True, nogil=True, inline="always")
def full_row(lo, hi, d):  # pragma: no cover - compiled
    """Whether a row at positions [lo, hi) of a *canonical* CSR matrix with ``d`` columns
    (indices sorted and unique) holds every column -- then column t is entry lo + t, and
    the kernels loop over the row contiguously instead of through its indices (dense
    features: no index loads, and a scatter the compiler vectorises).  The terms of
    every sum are the same, in the same order, so the results are bit for bit those of
    the indexed loops."""
    return hi - lo == U64(d)
