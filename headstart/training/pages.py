"""Arrays whose memory goes back to the operating system the moment they are freed.

Training allocates a few big buffers per thread (lane workspaces, per-iteration
records) and keeps a chunk of weights per chunk of labels until the model is
assembled.  With ordinary ``np.empty``/``np.zeros`` these come from glibc's malloc,
and whether freed memory is returned depends on malloc's state: after the first
large ``free`` glibc raises its mmap threshold (up to 32 MiB), so later buffers of a
few MiB come from the heap of the allocating thread's arena, and freeing them keeps
the pages resident.  Measured on debian-deps (all 22908 labels, 2 threads): the
chunks' weights (94.5 MB) stayed resident while ``stack_rows`` filled the 94.5 MB
model, so the peak held the model twice; workspaces freed by the worker threads could
not be reused by the main thread's arena either.

Anonymous private mappings (the ``mmap`` module) make that deterministic: pages are
zero and untouched until written (a lane workspace only becomes resident where the
solver writes), and unmapped -- returned -- when the array is garbage collected.
Small requests (< :data:`MIN_BYTES`) use numpy's allocator: a mapping per few
kilobytes would only add system calls.
"""

from __future__ import annotations

import math
import mmap

import numpy as np

#: below this many bytes an array comes from numpy's allocator
MIN_BYTES = 1 << 18

_FLAGS = getattr(mmap, "MAP_PRIVATE", None), getattr(mmap, "MAP_ANONYMOUS", None)


def zeros(shape, dtype=np.float64) -> np.ndarray:
    """A zero-filled, C-contiguous array backed by its own anonymous mapping."""
    dtype = np.dtype(dtype)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
    count = math.prod(shape)     # (Python ints: exact; np.prod took 3 us of a small array's 6)
    nbytes = count * dtype.itemsize
    if nbytes < MIN_BYTES or None in _FLAGS:
        return np.zeros(shape, dtype=dtype)
    try:
        buf = mmap.mmap(-1, nbytes, flags=_FLAGS[0] | _FLAGS[1])
    except (OSError, ValueError):
        # e.g. the per-process limit of mappings (vm.max_map_count, 65530 by default)
        # reached by a run with tens of thousands of big chunks: malloc still works
        return np.zeros(shape, dtype=dtype)
    # the array keeps the mapping alive (``.base``); it is unmapped when the array goes
    return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape)


def empty(shape, dtype=np.float64) -> np.ndarray:
    """Like :func:`zeros` (a fresh mapping is zero anyway; untouched pages cost nothing)."""
    return zeros(shape, dtype)


def copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a`` in its own mapping."""
    out = empty(a.shape, a.dtype)
    out[...] = a
    return out


def zeros_like_workspace(arrays):
    """Re-home zero-initialised buffers (e.g. a lane workspace) into mappings: same
    shapes and dtypes; contents copied only where an array is not all zero, so the
    untouched pages of the originals stay untouched in the copies."""
    out = []
    for a in arrays:
        # (keeping the small originals instead of copies raised debian-deps' peak RSS by
        # 4-5 MB -- the heap's layout changed; stop 64 -- so every array is copied)
        b = zeros(a.shape, a.dtype)
        if a.size and np.any(a):
            b[...] = a
        out.append(b)
    return out


_TRIM = None


def release_free_memory() -> bool:
    """Hand the free pages malloc keeps inside its arenas back to the system
    (glibc's ``malloc_trim(0)``, which also walks the arenas of other threads).
    False where it is not available (other C libraries): nothing happens."""
    global _TRIM
    if _TRIM is None:
        _TRIM = False
        try:
            import ctypes
            import ctypes.util

            name = ctypes.util.find_library("c")
            if name:
                f = getattr(ctypes.CDLL(name), "malloc_trim", None)
                if f is not None:
                    f.argtypes = [ctypes.c_size_t]
                    f.restype = ctypes.c_int
                    _TRIM = f
        except (OSError, AttributeError):  # pragma: no cover - no C library to ask
            _TRIM = False
    if _TRIM is False:
        return False
    _TRIM(0)
    return True
