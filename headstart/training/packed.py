"""Finished chunks of weights kept compactly until the model is assembled.

At the end of training every chunk's weights are in memory together with everything
training still needs (the lane workspaces, the renumbered X), so their size is part of
the peak.  A CSR row stores a 4-byte column index per weight, but the indices of a row
are strictly increasing: their gaps are small (on debian-deps 97% of them are below
128), so stored as variable-length integers (LEB128: 7 bits a byte, the high bit set
on every byte but the last) they take about 1.1 bytes instead of 4.  On debian-deps
(12.4 M weights) that is ~36 MB less at the peak.

The float32 values keep their low three bytes; the top byte (sign and the high
exponent bits) takes few values after pruning (|w| >= 0.01: about ten on debian-deps,
with ~2 bits of entropy), so when a chunk has at most 16 of them each is stored as a
4-bit code into a table: 3.5 instead of 4 bytes per weight, ~6 MB less on debian-deps.

Both are exact: decoding gives back the same bits, written straight into the model's
arrays, so assembling costs no temporary copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._compile import njit
from . import pages


@njit(cache=True, nogil=True)
def _encoded_size(indptr, indices):
    """Bytes of the LEB128 gaps of every row; -1 if a row is not strictly increasing."""
    total = 0
    for r in range(indptr.size - 1):
        prev = -1
        for p in range(indptr[r], indptr[r + 1]):
            g = np.int64(indices[p]) - prev
            if g < 1:
                return -1
            prev = indices[p]
            while g >= 128:
                total += 1
                g >>= 7
            total += 1
    return total


@njit(cache=True, nogil=True)
def _encode(indptr, indices, out):
    pos = 0
    for r in range(indptr.size - 1):
        prev = -1
        for p in range(indptr[r], indptr[r + 1]):
            g = np.int64(indices[p]) - prev
            prev = indices[p]
            while g >= 128:
                out[pos] = np.uint8((g & 127) | 128)
                pos += 1
                g >>= 7
            out[pos] = np.uint8(g)
            pos += 1


@njit(cache=True, nogil=True)
def _decode(indptr, codes, out):
    """out[p] = column index of weight p (the rows' gaps summed)."""
    pos = 0
    for r in range(indptr.size - 1):
        prev = np.int64(-1)
        for p in range(indptr[r], indptr[r + 1]):
            g = np.int64(0)
            shift = 0
            while True:
                b = np.int64(codes[pos])
                pos += 1
                g |= (b & 127) << shift
                if b < 128:
                    break
                shift += 7
            prev += g
            out[p] = prev


@njit(cache=True, nogil=True)
def _top_bytes(bits, table_index):
    """table_index[t] = code of top byte t (-1 if absent); returns the number of codes."""
    table_index[:] = -1
    m = 0
    for p in range(bits.size):
        t = np.int64(bits[p] >> 24)
        if table_index[t] < 0:
            table_index[t] = m
            m += 1
    return m


@njit(cache=True, nogil=True)
def _pack_values(bits, table_index, low, top):
    for p in range(bits.size):
        b = np.int64(bits[p])
        low[3 * p] = np.uint8(b & 255)
        low[3 * p + 1] = np.uint8((b >> 8) & 255)
        low[3 * p + 2] = np.uint8((b >> 16) & 255)
        c = table_index[b >> 24]
        if p & 1:
            top[p >> 1] = np.uint8(top[p >> 1] | (c << 4))
        else:
            top[p >> 1] = np.uint8(c)


@njit(cache=True, nogil=True)
def _unpack_values(low, top, table, out):
    for p in range(out.size):
        c = (np.int64(top[p >> 1]) >> (4 * (p & 1))) & 15
        out[p] = np.uint32(np.int64(low[3 * p]) | (np.int64(low[3 * p + 1]) << 8)
                           | (np.int64(low[3 * p + 2]) << 16) | (np.int64(table[c]) << 24))


@dataclass
class PackedRows:
    """A CSR matrix whose column indices are stored as LEB128 gaps (see module doc)."""

    shape: tuple[int, int]
    nnz: int
    indptr: np.ndarray              # as the CSR's
    codes: np.ndarray               # uint8: LEB128 gaps of the column indices
    data: np.ndarray | None         # float32 values, when they are not packed
    low: np.ndarray | None = None   # uint8 (3 * nnz): the values' low three bytes
    top: np.ndarray | None = None   # uint8 (ceil(nnz / 2)): 4-bit codes of the top bytes
    table: np.ndarray | None = None  # uint8 (<= 16): top byte of each code

    @classmethod
    def pack(cls, W: sp.csr_matrix) -> "PackedRows | sp.csr_matrix":
        """Pack ``W`` (float32, rows with sorted, distinct indices); ``W`` itself if it cannot."""
        if W.data.dtype != np.float32:
            return W
        size = _encoded_size(W.indptr, W.indices)
        if size < 0:
            return W
        codes = pages.empty(size, np.uint8)
        _encode(W.indptr, W.indices, codes)
        shape = (int(W.shape[0]), int(W.shape[1]))
        bits = W.data.view(np.uint32)
        table_index = np.empty(256, dtype=np.int64)
        m = _top_bytes(bits, table_index)
        if m > 16:
            return cls(shape, int(W.nnz), W.indptr, codes, W.data)
        low = pages.empty(3 * bits.size, np.uint8)
        top = pages.zeros((bits.size + 1) // 2, np.uint8)
        _pack_values(bits, table_index, low, top)
        table = np.zeros(16, dtype=np.uint8)
        present = np.flatnonzero(table_index >= 0)
        table[table_index[present]] = present
        return cls(shape, int(W.nnz), W.indptr, codes, None, low, top, table)

    def indices_into(self, out: np.ndarray) -> None:
        """Write the column indices (``nnz`` of them) into ``out`` (int32)."""
        _decode(self.indptr, self.codes, out)

    def data_into(self, out: np.ndarray) -> None:
        """Write the values (``nnz`` of them) into ``out`` (float32, contiguous)."""
        if self.data is not None:
            out[...] = self.data
        else:
            _unpack_values(self.low, self.top, self.table, out.view(np.uint32))

    def to_csr(self) -> sp.csr_matrix:
        indices = np.empty(self.nnz, dtype=np.int32)
        data = np.empty(self.nnz, dtype=np.float32)
        self.indices_into(indices)
        self.data_into(data)
        return sp.csr_matrix((data, indices, self.indptr), shape=self.shape)
