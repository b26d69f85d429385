"""One small in-place heapsort kernel, shared by the readers (a row's feature indices with
their values, a row's labels) and the objective (a label's support list).

Why not numba's ``np.sort``: its quicksort is seven generated functions that every
cold first run compiled again (about 0.5 s; docs/design.md, "the first run"), while
the lists sorted here are short (a row's nonzeros; a tail label's support) or nearly
sorted, where a heapsort's O(k log k) costs nothing measurable.
"""

from __future__ import annotations

import types

from ._compile import njit


# One small function, compiled once per (key, value) dtype pair: the sift-down loop is
# written out once inside it (a separate sift function was compiled again for every
# literal argument it was called with), and callers pass no literal flag.  Keys are
# unique unless the row is invalid.
def _heapsort(keys, vals, lo, hi):
    """Sort ``keys[lo:hi]`` in place; ``vals[lo:hi]`` moves along unless ``vals`` is empty
    (callers sort keys alone by passing an empty slice of the value array)."""
    with_vals = vals.shape[0] > 0
    n = hi - lo
    start = n // 2      # first build the heap (start counts down), then pop (end counts down)
    end = n
    while end > 1:
        if start > 0:
            start -= 1
        else:
            end -= 1
            a = lo + end
            keys[lo], keys[a] = keys[a], keys[lo]
            if with_vals:
                vals[lo], vals[a] = vals[a], vals[lo]
        root = start
        while True:
            child = 2 * root + 1
            if child >= end:
                break
            if child + 1 < end and keys[lo + child + 1] > keys[lo + child]:
                child += 1
            if keys[lo + root] >= keys[lo + child]:
                break
            a = lo + root
            b = lo + child
            keys[a], keys[b] = keys[b], keys[a]
            if with_vals:
                vals[a], vals[b] = vals[b], vals[a]
            root = child


def _kernel(name):
    """A cached kernel of its own named ``name`` (so its own numba cache index file): the
    readers' and the objective's sorts are compiled by different processes on a cold
    first run (cli/precompile.py: the helper compiles the readers while the command
    compiles the solver), and two processes must never write one function's index."""
    f = types.FunctionType(_heapsort.__code__, globals(), name)
    f.__qualname__ = name
    f.__doc__ = _heapsort.__doc__
    return njit(nogil=True, cache=True)(f)


heapsort = _kernel("heapsort")                  # the readers'
heapsort_support = _kernel("heapsort_support")  # the objective's (a label's support list)
