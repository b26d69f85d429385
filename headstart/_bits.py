"""Bit tricks for compiled code: the position of a 64-bit word's lowest set bit.

A set of column ids kept as a bitmap (one bit per column, 64 per word) is listed in
ascending order by taking each nonzero word's lowest set bit and clearing it
(``word &= word - 1``); the bit's position is one instruction (``tzcnt``) through
LLVM's ``llvm.cttz`` intrinsic.  Declared here rather than taken from numba's
``numba.cpython.unsafe`` namespace, which numba does not document as public.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def lowest_bit(typingctx, word):
    """The index (0-63) of the lowest set bit of the uint64 ``word``, which must not be
    0 (the intrinsic is told so: its result for 0 is undefined)."""
    if word != types.uint64:
        return None
    sig = types.int64(word)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [i64, ir.IntType(1)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.cttz.i64")
        return builder.call(fn, [args[0], ir.Constant(ir.IntType(1), 1)])

    return sig, codegen
