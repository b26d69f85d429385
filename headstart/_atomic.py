"""Atomic integers and a spin barrier for threads that run compiled code together.

Numba offers no atomics on the CPU.  The shared lanes of :mod:`headstart.training.team`
need three things between threads that never hold the GIL: a label counter (each label
handed out once), a sum of the threads' busy lanes, and a barrier around their common
pass over X, once per Newton iteration of the lanes.  A Python ``threading.Barrier``
would cost the GIL twice per pass; these cost ~0.4 us per barrier with two threads
(measured here, 100,000 barriers).

The operations are LLVM's own: ``atomicrmw add`` (sequentially consistent) and an
acquiring ``load atomic``, emitted through numba's documented intrinsic API, so they
compile into cached kernels like any other code.  A waiting thread spins on the
barrier's generation and, after a short spin, gives its core away (``sched_yield``):
with more threads than cores (or other jobs on the machine) the thread it waits for
needs that core.  Every wait also watches an abort byte, so a failed or interrupted
team never leaves a thread spinning.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._compile import njit

# the C library's sched_yield, resolved by name when the kernel is linked (no address
# is baked into numba's cache)
_sched_yield = types.ExternalFunction("sched_yield", types.intc())

# spins before a waiting thread yields its core: a barrier between two running threads
# completes within a few hundred cycles
SPINS = 200


def _pointer(context, builder, aryty, ary, idx):
    return cgutils.get_item_pointer(context, builder, aryty, context.make_array(aryty)(context, builder, ary),
                                    [idx], wraparound=False)


@intrinsic
def fetch_add(typingctx, arr, idx, value):
    """arr[idx] += value atomically (int64 array); returns the value before."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None
    sig = types.int64(arr, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        a, i, v = args
        ptr = _pointer(context, builder, signature.args[0], a, i)
        return builder.atomic_rmw("add", ptr, v, "seq_cst")
    return sig, codegen


@intrinsic
def load(typingctx, arr, idx):
    """arr[idx] read with acquire ordering (int64 or uint8 array): a read in a loop that
    the compiler may neither hoist nor merge with earlier reads."""
    if not (isinstance(arr, types.Array) and arr.dtype in (types.int64, types.uint8)):
        return None
    sig = arr.dtype(arr, types.intp)
    size = 8 if arr.dtype == types.int64 else 1

    def codegen(context, builder, signature, args):
        a, i = args
        ptr = _pointer(context, builder, signature.args[0], a, i)
        return builder.load_atomic(ptr, "acquire", size)
    return sig, codegen


@intrinsic
def store(typingctx, arr, idx, value):
    """arr[idx] = value with release ordering (int64 array)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None
    sig = types.void(arr, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        a, i, v = args
        ptr = _pointer(context, builder, signature.args[0], a, i)
        builder.store_atomic(v, ptr, "release", 8)
        return context.get_dummy_value()
    return sig, codegen


# barrier words: sync[COUNT] threads arrived, sync[GENERATION] barriers completed
COUNT, GENERATION = 0, 1


@njit(cache=True, nogil=True)
def barrier(sync, threads, abort):
    """Wait until ``threads`` threads have called this with the same ``sync`` (int64
    array; its COUNT and GENERATION words start at 0).  Returns False, without waiting
    further, once abort[0] (uint8) is set -- the team is then abandoned."""
    gen = load(sync, GENERATION)
    if fetch_add(sync, COUNT, 1) == threads - 1:
        store(sync, COUNT, 0)          # before the release: no thread counts again before it
        fetch_add(sync, GENERATION, 1)
        return load(abort, 0) == 0
    spins = 0
    while load(sync, GENERATION) == gen:
        if load(abort, 0) != 0:
            return False
        spins += 1
        if spins > SPINS:
            _sched_yield()
    return load(abort, 0) == 0
