"""Atomic file output: a file appears complete under its final name, or not at all.

``atomic_write`` writes to a temporary file in the destination's own directory (so the
final ``os.replace`` is a rename within one file system, which POSIX and Windows make
atomic), flushes and fsyncs it, and renames it over the destination only when the
``with`` block ends without an exception.  On an exception the temporary file is removed
and the destination is left untouched (an older file of that name survives as it was).

Usage::

    with atomic_write("model/weights.npz", "wb") as f:
        f.write(payload)
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["atomic_write"]


def _fsync_dir(directory: str) -> None:
    """Persist the rename itself (best effort; not possible on every platform)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _create_temp(directory: str, name: str) -> tuple[int, str]:
    """Create ``.<name>.<random>.tmp`` exclusively, with the permissions open() would give."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file in {directory}")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb", *, encoding: str = "utf-8",
                 fsync: bool = True) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; rename it to ``path`` on success.

    ``mode`` is ``"wb"`` (binary) or ``"w"`` (text, ``encoding``, ``\\n`` line endings).
    The temporary name is ``.<name>.<random>.tmp`` in the same directory.  Exceptions from
    the ``with`` block propagate unchanged after the temporary file has been removed.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', not {mode!r}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = _create_temp(directory, os.path.basename(path))
    try:
        if mode == "wb":
            f = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding=encoding, newline="\n")
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    try:
        with f:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        _fsync_dir(directory)
