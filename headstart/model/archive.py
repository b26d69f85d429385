"""Checksummed ``.npz`` archives: written atomically, read back only if the bytes match.

Every model file is an uncompressed ``.npz`` whose sha256 is recorded (in the
manifest) when it is written.  (``compress=True`` deflates an archive -- zlib level 1 --
for the training statistics beside a model, which numpy reads directly.  Model files stay
stored: the reader below, in this and every earlier version, refuses a member that
claims more bytes than its file holds, as a deflated one may.)  Reading goes the other way round: the bytes are read
once, hashed, and only the bytes that were hashed are parsed, so a file changed between
the check and the parse cannot slip through.  Nothing is ever unpickled: archives are
opened with ``allow_pickle=False`` and an object array is reported as an error, and a
member whose header claims more bytes than the whole file holds is refused before
numpy allocates the claim.  Every problem is a :class:`ModelFormatError` naming the file.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..errors import ModelFormatError
from ..io.atomic import atomic_write


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_npz(path: Path, arrays: dict[str, np.ndarray], compress: bool = False) -> str:
    """Write an npz atomically (``compress``: deflated) and return the sha256 of the written bytes."""
    return write_npz_stream(path, [(k, a.dtype, a.shape, (a,)) for k, a in arrays.items()], compress)


def write_npz_stream(path: Path, members: Iterable[tuple[str, Any, tuple, Iterable[Any]]],
                     compress: bool = False) -> str:
    """Write an uncompressed npz atomically from members given piece by piece; return
    the sha256 of the written bytes.

    A member is ``(name, dtype, shape, pieces)``: the pieces (arrays or bytes) are its
    values in C order and must add up to exactly ``shape``'s size, so a member can be
    copied from a file in blocks without ever being in memory whole (the spooled model
    writer, :mod:`.spool`).  The layout is numpy's own: a ``name.npy`` file per member
    in a stored (uncompressed; with ``compress`` deflated) zip with zip64 entries, as
    ``np.savez`` (``np.savez_compressed``) writes it."""
    path = Path(path)
    how = dict(compression=zipfile.ZIP_DEFLATED, compresslevel=1) if compress else dict(compression=zipfile.ZIP_STORED)
    with atomic_write(path, "wb") as fh, zipfile.ZipFile(fh, mode="w", allowZip64=True, **how) as zf:
        for name, dtype, shape, pieces in members:
            dtype = np.dtype(dtype)
            shape = tuple(int(s) for s in shape)
            expected = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
            with zf.open(name + ".npy", "w", force_zip64=True) as out:
                np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                           "fortran_order": False, "shape": shape})
                written = 0
                for piece in pieces:
                    if isinstance(piece, np.ndarray):
                        piece = np.ascontiguousarray(piece, dtype=dtype).reshape(-1).view(np.uint8)
                    out.write(piece)
                    written += len(piece)
                if written != expected:
                    raise ValueError(f"{path}: member {name!r} got {written} bytes, its shape {shape} "
                                     f"of {dtype} needs {expected}")
    # hashed after the rename (re-read from the page cache): zipfile seeks back to
    # complete each member's header, so the bytes cannot be hashed on the way out
    return sha256_file(path)


def read_verified(path: Path, sha256: str) -> bytes:
    """The bytes of ``path``, after checking they hash to ``sha256``."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: file listed in the manifest is missing") from None
    except OSError as e:
        raise ModelFormatError(f"{path}: cannot read: {e.strerror}") from None
    got = hashlib.sha256(raw).hexdigest()
    if got != sha256:
        raise ModelFormatError(
            f"{path}: checksum mismatch: sha256 is {got}, the manifest says {sha256} "
            "(the file was modified, truncated or replaced after it was written)")
    return raw


def _claimed_nbytes(npz: Any, key: str) -> int:
    """Bytes the .npy header of member ``key`` claims (the header only: nothing is allocated)."""
    name = key + ".npy" if key + ".npy" in npz.zip.namelist() else key
    with npz.zip.open(name) as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(fh)
    n = dtype.itemsize
    for s in shape:
        n *= int(s)
    return n


def load_npz(path: Path, raw: bytes, required: set[str], optional: set[str] = frozenset()
             ) -> dict[str, np.ndarray]:
    """Parse npz bytes without pickles; return the arrays; exact key set is enforced.

    A member whose header claims more bytes than the whole file holds is refused before
    numpy allocates the claim; whatever zipfile or numpy raise on forged bytes (bad
    versions, "encrypted" or unknown compression flags, broken headers) is a
    ModelFormatError."""
    try:
        npz = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - zipfile/numpy raise many types on forged bytes
        raise ModelFormatError(f"{path}: not a readable .npz archive (truncated or corrupt): {e}") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ModelFormatError(f"{path}: expected an .npz archive, found a single .npy array")
    with npz:
        keys = set(npz.files)
        missing = required - keys
        if missing:
            raise ModelFormatError(f"{path}: missing array(s) {', '.join(sorted(missing))}")
        extra = keys - required - set(optional)
        if extra:
            raise ModelFormatError(f"{path}: unexpected array(s) {', '.join(sorted(extra))}")
        out = {}
        for key in sorted(keys):
            try:
                claimed = _claimed_nbytes(npz, key)
                if claimed > len(raw):
                    raise ModelFormatError(f"{path}: array {key!r} claims {claimed} bytes, more than the whole "
                                           f"{len(raw)}-byte file holds")
                out[key] = npz[key]
            except ModelFormatError:
                raise
            except ValueError as e:
                if "allow_pickle" in str(e) or "Object arrays" in str(e):
                    raise ModelFormatError(
                        f"{path}: array {key!r} is an object (pickled) array; refused, "
                        "model files hold numeric arrays only") from None
                raise ModelFormatError(f"{path}: array {key!r} cannot be read: {e}") from None
            except Exception as e:  # noqa: BLE001 - see the docstring
                raise ModelFormatError(f"{path}: array {key!r} is truncated or corrupt: {e}") from None
            if not isinstance(out[key], np.ndarray):
                raise ModelFormatError(f"{path}: array {key!r} is not a .npy array")
    return out


def read_npz(path: Path, sha256: str, required: set[str], optional: set[str] = frozenset()
             ) -> dict[str, np.ndarray]:
    """:func:`read_verified` then :func:`load_npz`."""
    return load_npz(path, read_verified(path, sha256), required, optional)


def check_array(path: Path, name: str, arr: np.ndarray, dtype: Any, shape: tuple | None = None,
                ndim: int | None = None) -> None:
    """Refuse an array of another dtype, number of dimensions or shape than expected."""
    if arr.dtype != np.dtype(dtype):
        raise ModelFormatError(f"{path}: array {name!r} has dtype {arr.dtype}, expected {np.dtype(dtype)}")
    if ndim is not None and arr.ndim != ndim:
        raise ModelFormatError(f"{path}: array {name!r} has {arr.ndim} dimension(s), expected {ndim}")
    if shape is not None and arr.shape != shape:
        raise ModelFormatError(f"{path}: array {name!r} has shape {arr.shape}, expected {shape}")
