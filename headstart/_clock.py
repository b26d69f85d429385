"""A clock for compiled code that needs neither the interpreter nor the GIL.

The kernels time every Newton iteration (the per-iteration records behind the paper's
figures, the per-label seconds, the training deadline).  Numba has no clock of its
own, and the first version read ``time.perf_counter()`` in an object-mode block: a
trip to the interpreter that takes the GIL, about 1 us each, several times per
iteration.  On a small problem that was 8% of the training time (medical, 45 labels,
333 rows, ~600 Newton iterations: 23.9 ms with timing against 22.0 ms without, one
thread, 2026-12-02), and with several threads every read waits for the GIL that the
others' reads hold.

On Linux :func:`now` calls ``clock_gettime(CLOCK_MONOTONIC)`` directly -- the clock
``time.perf_counter()`` reads there (``time.get_clock_info('perf_counter')``), so the
deadline the trainer computes in Python compares with it as before, in ~20 ns from the
vDSO.  The function is declared in the compiled module and bound by the JIT linker to
the C library's symbol when the code is loaded, so the kernels stay cacheable (an
address baked in as a constant would not be).  Elsewhere (macOS, Windows: other clock
ids, or no ``clock_gettime``) the object-mode read stays.
"""

from __future__ import annotations

import sys
import time

import numba as nb

from ._compile import njit

# CLOCK_MONOTONIC's id in <time.h>; perf_counter's clock on Linux
_CLOCK_MONOTONIC = 1
NATIVE = sys.platform.startswith("linux") and \
    time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"

if NATIVE:
    from llvmlite import ir
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _monotonic_ns(typingctx):
        """clock_gettime(CLOCK_MONOTONIC) as nanoseconds (int64)."""
        def codegen(context, builder, signature, args):
            i64, i32 = ir.IntType(64), ir.IntType(32)
            timespec = ir.LiteralStructType([i64, i64])    # (tv_sec, tv_nsec), both 64-bit on Linux x86-64/arm64
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32, timespec.as_pointer()]),
                                                "clock_gettime")
            ts = cgutils.alloca_once(builder, timespec)
            builder.call(fn, [ir.Constant(i32, _CLOCK_MONOTONIC), ts])
            sec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
            nsec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
            return builder.add(builder.mul(sec, ir.Constant(i64, 1_000_000_000)), nsec)
        return nb.types.int64(), codegen

    @njit(cache=True, nogil=True)
    def now():
        """Seconds on time.perf_counter()'s clock."""
        ns = _monotonic_ns()
        # whole seconds and the rest apart: float64 keeps ns resolution for ~100 days of uptime
        return float(ns // 1_000_000_000) + float(ns % 1_000_000_000) * 1e-9
else:
    @njit(cache=True, nogil=True)
    def now():
        """Seconds on time.perf_counter()'s clock (a brief trip to the interpreter, ~1 us
        with the GIL held)."""
        with nb.objmode(t="f8"):
            t = time.perf_counter()
        return t
