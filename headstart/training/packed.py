"""Finished chunks of weights kept compactly until the model is assembled.

At the end of training every chunk's weights are in memory together with everything
training still needs (the lane workspaces, the renumbered X), so their size is part of
the peak.  A CSR row stores a 4-byte column index per weight, but the indices of a row
are strictly increasing: their gaps are small (on debian-deps 97% of them are below
128), so stored as variable-length integers (LEB128: 7 bits a byte, the high bit set
on every byte but the last) they take about 1.1 bytes instead of 4.  On debian-deps
(12.4 M weights) that is ~36 MB less at the peak.  Decoding writes straight into the
model's index array, so assembling costs no temporary copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
import scipy.sparse as sp

from . import pages


@nb.njit(cache=True, nogil=True)
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


@nb.njit(cache=True, nogil=True)
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


@nb.njit(cache=True, nogil=True)
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


@dataclass
class PackedRows:
    """A CSR matrix whose column indices are stored as LEB128 gaps (see module doc)."""

    shape: tuple[int, int]
    indptr: np.ndarray      # as the CSR's
    codes: np.ndarray       # uint8
    data: np.ndarray        # float32, as the CSR's

    @classmethod
    def pack(cls, W: sp.csr_matrix) -> "PackedRows | sp.csr_matrix":
        """Pack ``W`` (rows with sorted, distinct indices); ``W`` itself if it cannot."""
        size = _encoded_size(W.indptr, W.indices)
        if size < 0:
            return W
        codes = pages.empty(size, np.uint8)
        _encode(W.indptr, W.indices, codes)
        return cls((int(W.shape[0]), int(W.shape[1])), W.indptr, codes, W.data)

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    def indices_into(self, out: np.ndarray) -> None:
        """Write the column indices (``nnz`` of them) into ``out``."""
        _decode(self.indptr, self.codes, out)

    def to_csr(self) -> sp.csr_matrix:
        indices = np.empty(self.nnz, dtype=np.int32)
        self.indices_into(indices)
        return sp.csr_matrix((self.data, indices, self.indptr), shape=self.shape)
