"""Atomic file output: a file appears complete under its final name, or not at all.

``atomic_write`` writes to a temporary file in the destination's own directory (so the
final ``os.replace`` is a rename within one file system, which POSIX and Windows make
atomic), flushes and fsyncs it, and renames it over the destination only when the
``with`` block ends without an exception.  On an exception the temporary file is removed
and the destination is left untouched (an older file of that name survives as it was).

Usage::

    with atomic_write("model/weights.npz", "wb") as f:
        f.write(payload)

``atomic_directory`` does the same for a whole directory: it is built under a temporary
sibling name and renamed into place when the ``with`` block ends without an exception.
Replacing an existing directory takes two renames (the old one aside, the new one in),
so a crash in that instant leaves the old directory as ``.NAME.old-<hex>`` next to the
target, never a directory that mixes old and new files.

Temporary names start with a dot and match :data:`TEMP_NAME_RE`, so a reader listing a
directory can tell (and a writer resuming after a crash can delete) what an interrupted
write left behind.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import secrets
import shutil
import stat
import uuid
from collections.abc import Container, Iterator
from pathlib import Path
from typing import IO, Any

from .._threads import check_interrupt, signals_held
from ..errors import ParameterError

__all__ = ["atomic_write", "atomic_directory", "check_can_create", "fsync_dir", "replace_refusal", "TEMP_NAME_RE"]

log = logging.getLogger("headstart.io")

#: temporaries of this module: files ``.NAME.<12 hex>.tmp``, directories ``.NAME.tmp-<32 hex>``
TEMP_NAME_RE = re.compile(r"^\..+\.(tmp-[0-9a-f]{32}|[0-9a-f]{12}\.tmp)$")


def fsync_dir(directory: str | os.PathLike[str]) -> None:
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


def creation_error(e: OSError, path: str | os.PathLike[str], directory: str | os.PathLike[str],
                   kind: str = "a file") -> OSError:
    """``e``, met creating the temporary ``kind`` for ``path`` in ``directory``, as an
    error of the same type that names ``path`` and says a creation failed: the temporary's
    name means nothing to the user, and a bare "No such file or directory" for a
    directory that exists (/proc takes no new files: ENOENT) read as a mistyped path."""
    reason = e.strerror or str(e)
    if e.errno == errno.ENOENT and os.path.isdir(directory):
        reason += " (the directory exists but takes no new files)"
    return type(e)(e.errno, f"cannot create {kind} in {directory}: {reason}", os.fspath(path))


def check_can_create(path: str | os.PathLike[str]) -> None:
    """Raise what :func:`atomic_write` of ``path`` would meet creating its temporary file
    (as :func:`creation_error`), by creating one and removing it: permission bits
    (``os.access``) do not tell, root passes them everywhere and /proc or /sys refuse new
    files whatever they say.  For a check before long work; ``path`` is where the file
    will be (for a symbolic link, its target: :func:`regular_target`, which the caller
    applies -- a model directory's path is checked here too, and is no regular file)."""
    directory = os.path.dirname(os.path.abspath(path))
    with signals_held():     # a Ctrl-C after the creation is raised once the probe is gone
        try:
            fd, tmp = _create_temp(directory, os.path.basename(path))
        except OSError as e:
            raise creation_error(e, path, directory) from None
        try:
            os.close(fd)
        finally:
            os.unlink(tmp)


def regular_target(path: str | os.PathLike[str]) -> str:
    """The file an atomic write replaces for ``path``: a symbolic link's target (the
    link stays a link, its target gets the new content), the path itself otherwise.
    Refused (ParameterError) when that exists and is not a regular file -- a FIFO, a
    device, a socket or a directory: a write by rename would replace the node itself
    (``-o /dev/full`` as root replaced the device) instead of writing into it."""
    path = os.fspath(path)
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        # through the link itself: /dev/stdout into a pipe resolves to "/proc/N/fd/pipe:[M]",
        # a name that exists nowhere, while the link leads to the pipe
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):   # nothing there (yet): its directory's checks name why
        return target
    except OSError as e:
        raise ParameterError(f"{path}: cannot write there: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, device or socket)"
        raise ParameterError(f"{path}: cannot write there: it is {kind}; headstart writes whole files "
                             f"atomically (a temporary file renamed into place): give a file path")
    return target


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb", *, encoding: str = "utf-8",
                 fsync: bool = True) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; rename it to ``path`` on success.

    ``mode`` is ``"wb"`` (binary) or ``"w"`` (text, ``encoding``, ``\\n`` line endings).
    The temporary name is ``.<name>.<random>.tmp`` in the same directory.  Exceptions from
    the ``with`` block propagate after the temporary file has been removed, unchanged but
    for an OSError without a file name (a full disk: "No space left on device"), which
    gets ``path``'s, so that the message says which file could not be written.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', not {mode!r}")
    path = regular_target(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, f, tmp = -1, None, None
    try:
        # a signal between the creation and the file object owning the descriptor is
        # raised at the end of the held section, where the except below removes the file
        with signals_held():
            try:
                fd, tmp = _create_temp(directory, os.path.basename(path))
            except OSError as e:   # name the file asked for, not the temporary one
                raise creation_error(e, path, directory) from None
            if mode == "wb":
                f = os.fdopen(fd, "wb")
            else:
                f = os.fdopen(fd, "w", encoding=encoding, newline="\n")
        with f:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if f is None and fd >= 0:    # (fdopen failed: the descriptor is still ours)
            with contextlib.suppress(OSError):
                os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(e, OSError) and e.filename is None and e.errno is not None:
            raise type(e)(e.errno, e.strerror, os.fspath(path)) from e
        raise
    if fsync:
        fsync_dir(directory)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a new empty directory next to ``path``; rename it to ``path`` on success.

    An existing ``path`` (a directory) is replaced: it is renamed aside first and deleted
    once the new one is in place; if the second rename fails the old one is put back.
    An empty or missing ``path`` is replaced by a single rename.  If the ``with`` block
    (or the rename) raises, the temporary directory is removed and ``path`` is untouched.
    Deciding *whether* ``path`` may be replaced is the caller's job
    (:func:`replace_refusal`).  A symbolic link is written through, as
    :func:`regular_target` does for files: the link stays, its target gets the new
    directory (helper-109: the rename replaced the link, and its target, which everything
    following the link reads, kept the old model).
    """
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    _warn_leftovers(path)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex}"
    made = False
    try:
        with signals_held():    # (a signal right after the mkdir: raised inside this try)
            try:
                tmp.mkdir()
            except OSError as e:   # name the directory asked for, not the temporary one
                raise creation_error(e, path, tmp.parent, "a directory") from None
            made = True
        yield tmp
        # a Ctrl-C that numba's compiler swallowed replaces nothing (a file's rename is
        # not checked: it may list finished work, as a sharded model's manifest does)
        check_interrupt()
        _install_directory(tmp, path)
    except BaseException:
        if made:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def replace_refusal(path: str | os.PathLike[str], kind: str, marker: str, own: Container[str]) -> str | None:
    """Why :func:`atomic_directory` must not replace the directory ``path`` with a new
    ``kind`` (e.g. "a headstart model"), or None when it may.

    Replacing deletes the old directory whole, so only one headstart wrote itself may go:
    one holding ``marker`` (the file that identifies ``kind``) and no entry but ``marker``,
    the names in ``own`` (what headstart writes there) and this module's temporaries (a
    killed write's leftovers).  A user's directory -- or a model someone put notes into --
    is refused, naming its first foreign entries (an outside probe saw a directory of
    unrelated files deleted by a save).  A missing path or an empty directory may be
    written; a file (or another non-directory) is refused."""
    path = Path(path)
    if not path.is_dir():
        return (f"{path}: exists and is not a directory; refusing to replace it"
                if path.exists() or path.is_symlink() else None)
    try:
        names = sorted(e.name for e in path.iterdir())
    except OSError as e:
        return f"{path}: cannot list the directory ({e.strerror or e}); refusing to replace it"
    if not names:
        return None
    if marker not in names:
        return (f"{path}: exists, is not empty and is not {kind} (no {marker}; it holds {_first(names)}); "
                "refusing to replace it, which would delete those files")
    foreign = [n for n in names if n != marker and n not in own and not TEMP_NAME_RE.match(n)]
    if foreign:
        return (f"{path}: is {kind} but also holds {_first(foreign)}, which headstart did not write; refusing "
                "to replace it, which would delete them: move them elsewhere, or write to another directory")
    return None


def _first(names: list[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _warn_leftovers(path: Path, files: bool = False) -> None:
    """Say so when temporaries of ``path`` are lying next to it: a process killed while
    writing it (kill -9, a power cut) cannot remove its own, and they may hold a model's
    worth of weights.  Not removed here: on a shared file system the writer may be alive
    on another machine.  ``files``: the temporaries of :func:`atomic_write` (commands
    call it once per output file, :func:`warn_file_leftovers`), else of
    :func:`atomic_directory`."""
    suffix = r"[0-9a-f]{12}\.tmp" if files else r"(tmp|old)-[0-9a-f]{32}"
    try:
        left = [p for p in path.parent.glob(f".{glob_escape(path.name)}.*")
                if (p.is_file() if files else p.is_dir()) and re.fullmatch(suffix, p.name[len(path.name) + 2:])]
    except OSError:
        return
    if left:
        try:   # a live writer may remove its files meanwhile; the warning must not fail the write
            members = (f for p in left for f in ([p] if files else p.rglob("*")))
            size = f"{sum(f.stat().st_size for f in members if f.is_file()) / 2**20:.1f} MB"
        except OSError:
            size = "size unknown"
        one = len(left) == 1
        kind = ("file", "files") if files else ("directory", "directories")
        log.warning("%s: %d temporary %s next to it (%s, %s), left by a run killed while writing "
                    "it; remove %s if no other run is writing %s", path, len(left), kind[0] if one else kind[1],
                    ", ".join(sorted(p.name for p in left)[:3]) + (", ..." if len(left) > 3 else ""),
                    size, "it" if one else "them", path.name)


def warn_file_leftovers(path: str | os.PathLike[str]) -> None:
    """:func:`_warn_leftovers` for a file that :func:`atomic_write` will write (helper-57:
    a SIGKILLed ``convert`` left a 61 MB ``.OUT.<hex>.tmp``, and the next one said nothing)."""
    _warn_leftovers(Path(path), files=True)


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _install_directory(tmp: Path, path: Path) -> None:
    fsync_dir(tmp)
    if path.exists() and any(path.iterdir()):
        old = path.parent / f".{path.name}.old-{uuid.uuid4().hex}"
        os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.replace(old, path)
            raise
        fsync_dir(path.parent)
        if old.is_symlink():     # -o named a link to a directory: the link goes, its target stays
            old.unlink()
        else:
            shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)  # a missing or empty directory is replaced atomically
        fsync_dir(path.parent)
