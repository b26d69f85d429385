"""One writer per model directory: an advisory lock beside it.

Sharded training writes a model directory for hours, shard by shard, and rewrites its
manifest from the list it holds in memory.  A second run writing the same directory at
the same time (a job array pointed at one ``-o``, a job started twice) would overwrite
the first one's manifest entries and delete its shards that are not listed yet, while
both report success.  So a writer holds an exclusive ``flock`` on ``.NAME.lock`` next to
the directory (not inside it: a run that replaces the directory must hold the lock
before and after the replacement) and a second writer is refused at once, naming the
process that holds it.  The lock goes with the process (a killed run leaves no stale
lock: the kernel releases it); the file itself is removed by the holder when it is done.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
from pathlib import Path
from typing import Iterator

from ..errors import ResourceError

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS: no lock, as before
    fcntl = None


_held: set[Path] = set()   # the locks this process holds


def lock_path(path: str | os.PathLike[str]) -> Path:
    # resolved, the directory's own name too: two spellings of one directory -- another
    # parent path, a symbolic link to the directory -- share one lock
    p = Path(os.path.realpath(path))
    return p.parent / f".{p.name}.lock"


@contextlib.contextmanager
def model_dir_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the writer's lock of the model directory ``path`` for the block; raise
    :class:`ResourceError` at once if another process holds it.  Without a writable
    parent directory there is nothing to lock (nor could the model be written there):
    the writer's own error says why."""
    lock = lock_path(path)
    if fcntl is None or lock in _held:   # held by this process already (a nested call)
        yield
        return
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise ResourceError(f"{Path(os.path.abspath(path))}: another run is writing this model directory "
                                f"(process {holder}, lock {lock}); wait for it to finish, or write to another "
                                "directory") from None
        # the holder before us may have removed the file between our open and our lock:
        # then we locked an orphan, and must lock the file that is there now
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    _held.add(lock)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} on {socket.gethostname()}\n".encode())
        yield
    finally:
        _held.discard(lock)
        with contextlib.suppress(OSError):
            os.unlink(lock)     # while still locked: a waiting opener then retries on a new file
        os.close(fd)


def writes_model_dir(fn):
    """Decorator: ``fn(X, Y, params, model_dir, ...)`` runs holding ``model_dir``'s lock."""
    @functools.wraps(fn)
    def locked(X, Y, params, model_dir, *args, **kwargs):
        with model_dir_lock(model_dir):
            return fn(X, Y, params, model_dir, *args, **kwargs)

    return locked
