"""Threads: how many cores "0 = all cores" means, and waiting for thread-pool work so
that Ctrl-C and failures stop it promptly."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from .errors import ParameterError


def usable_cores() -> int:
    """The cores this process may run on, which ``threads=0`` means everywhere.

    ``os.cpu_count()`` counts the machine's: a batch job given 4 cores of a 64-core node
    (SLURM, ``taskset``: the affinity mask) or a container with a CPU quota (``docker
    --cpus``, Kubernetes limits: cgroups) would start 64 label threads on 4 cores, each
    with its own lane workspace.  So: the affinity mask, capped by a cgroup quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # not Linux
        n = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        n = min(n, quota)
    return max(1, n)


#: (threads, usable cores) pairs already warned about in this process (oversubscribed)
_OVERSUBSCRIBED: set[tuple[int, int]] = set()


def warn_if_oversubscribed(threads: int, log: logging.Logger) -> None:
    """Warn, once per process and (threads, cores), when a training run starts more
    label threads than this process has cores.  A thread count asked for is run as
    asked (``TrainParams.effective_threads``), but each training thread holds its own
    workspace and sweeps the data on its own: beyond the cores that buys contention and
    memory, never speed -- said rather than capped silently.  Once per process: a Dask
    worker trains many ranges, a grid search many fits."""
    if threads <= 1:
        return
    cores = usable_cores()      # (~80 us: affinity mask and cgroup files)
    if threads > cores and (threads, cores) not in _OVERSUBSCRIBED:
        _OVERSUBSCRIBED.add((threads, cores))
        log.warning("%d training threads on %d usable core(s) (affinity mask / CPU quota): each thread "
                    "takes its own workspace and runs no faster; threads=%d (or 0) would do", threads, cores, cores)


def resolve_threads(threads) -> int:
    """A ``threads`` argument of the API: None or 0 mean :func:`usable_cores`; anything but
    an integer >= 0 is refused with a clear error."""
    if threads is None:
        return usable_cores()
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
        raise ParameterError(f"parameter threads must be an integer >= 0 (0 = all cores), got {threads!r}")
    return int(threads) or usable_cores()


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")) -> int | None:
    """CPUs allowed by this process's cgroup CPU quotas, rounded up; None without one.

    The process's cgroup comes from ``own`` (/proc/self/cgroup): "0::/PATH" (v2), or
    the line whose controllers include ``cpu`` (v1).  Every cgroup from it up to the
    root may cap the CPU (systemd slices, ``systemd-run -p CPUQuota=``, a container
    sharing the host's cgroup namespace), so the smallest quota on that way counts:
    v2's ``cpu.max`` ("QUOTA PERIOD", or "max PERIOD" for none), v1's
    ``cpu.cfs_quota_us`` (-1: none) over ``cpu.cfs_period_us`` under ``cpu`` or
    ``cpu,cpuacct``.  A path that is not there (a cgroup namespace of its own shows
    "/") is read at the root."""
    v2, v1 = None, None
    try:
        for line in own.read_text().splitlines():
            hid, ctrl, path = line.split(":", 2)
            if hid == "0" and ctrl == "":
                v2 = path
            elif "cpu" in ctrl.split(","):
                v1 = path
    except (OSError, ValueError):
        pass

    def ancestors(base: Path, path: str | None) -> list[Path]:
        parts = [q for q in (path or "/").split("/") if q]
        dirs = [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]
        return [d for d in dirs if d.is_dir()] or [base]

    def smallest(quotas) -> int | None:
        q = [x for x in quotas if x is not None]
        return min(q) if q else None

    def v2_quota(d: Path) -> int | None:
        try:
            parts = (d / "cpu.max").read_text().split()
            if len(parts) == 2 and parts[0] != "max":
                return max(1, math.ceil(int(parts[0]) / int(parts[1])))
        except (OSError, ValueError, ZeroDivisionError):
            pass
        return None

    def v1_quota(d: Path) -> int | None:
        try:
            quota = int((d / "cpu.cfs_quota_us").read_text())
            period = int((d / "cpu.cfs_period_us").read_text())
            return max(1, math.ceil(quota / period)) if quota > 0 and period > 0 else None
        except (OSError, ValueError):
            return None

    if (root / "cgroup.controllers").is_file() or (root / "cpu.max").is_file():   # v2 (unified)
        return smallest(v2_quota(d) for d in ancestors(root, v2))
    for name in ("cpu", "cpu,cpuacct"):
        if (root / name).is_dir():
            return smallest(v1_quota(d) for d in ancestors(root / name, v1))
    return None


class _Interrupts:
    """Ctrl-C as the command line saw it, remembered.  Python raises KeyboardInterrupt
    wherever the main thread is; inside numba's compiler that is a ctypes callback of
    llvmlite, which swallows it ("Exception ignored on calling ctypes callback"), and the
    run went on to write its model and exit 0 (helper-52, 2 of 12 tries).  The command
    line's SIGINT handler sets this before raising; :func:`check_interrupt` raises it
    again where a run would replace a whole model (a model directory's rename), has just
    compiled, or returns.  Never set in library use (the handler is the command line's)."""

    seen = False


INTERRUPTS = _Interrupts()


def check_interrupt() -> None:
    """Raise KeyboardInterrupt if the command line saw a Ctrl-C that was swallowed.  Not
    while an exception is being handled (cleanup after the interrupt itself, which the
    handler marked too: e.g. listing the finished shards must still work)."""
    if INTERRUPTS.seen and sys.exc_info()[0] is None:
        raise KeyboardInterrupt


class _Held:
    """Sections of the main thread during which the command line's signal handlers defer
    their action (raising the interrupt, or the precompiling helper's exit) to the
    section's end: numba's cache writes (:mod:`headstart.cli.cache_writes`), and the
    creation of a temporary file or directory and the taking of it into the ``try`` that
    removes it.  A signal handled in between left the temporary behind, or closed its
    descriptor twice and ended the run with "Bad file descriptor", exit 1 (helper-110).
    Handlers run in the main thread only, so other threads' sections count for nothing."""

    depth = 0
    pending: Callable[[], None] | None = None


HELD = _Held()


@contextlib.contextmanager
def signals_held():
    """Run the block with the command line's SIGINT / SIGTERM action deferred to its end
    (:class:`_Held`); nothing happens in library use, where no handler defers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    HELD.depth += 1
    try:
        yield
    finally:
        HELD.depth -= 1
        if HELD.depth == 0 and HELD.pending is not None:
            action, HELD.pending = HELD.pending, None
            action()


def defer_signal(action: Callable[[], None]) -> bool:
    """From a signal handler: True if a :func:`signals_held` section is running and
    ``action`` will run at its end (the handler must then return), False if the handler
    should act now."""
    if HELD.depth:
        HELD.pending = action
        return True
    return False


class Abort:
    """A stop request shared by the threads of one run and by its compiled kernels: the
    one-byte array ``flag`` is what the kernels read (between passes over X, or between
    labels); Python code asks :meth:`is_set`.  One flag, so the two cannot disagree."""

    def __init__(self) -> None:
        self.flag = np.zeros(1, dtype=np.uint8)

    def set(self) -> None:
        self.flag[0] = 1

    def is_set(self) -> bool:
        return bool(self.flag[0])


def wait_all(futures: Iterable[Future], stop: Callable[[], None] | None = None) -> None:
    """Wait for every future, in order; on the first exception (a failed task, or Ctrl-C,
    which only the main thread sees while it waits here) cancel the tasks not yet
    started and call ``stop()`` (to tell running ones to give up) before raising it.
    Without this a pool's shutdown runs every queued task first.  ``futures`` may be a
    generator still submitting: what it submitted before an interrupt is cancelled too."""
    done: list[Future] = []
    try:
        for f in futures:
            done.append(f)
        for f in done:
            f.result()
    except BaseException:
        for f in done:
            f.cancel()
        if stop is not None:
            stop()
        raise


def join_pool(pool: ThreadPoolExecutor) -> None:
    """``pool.shutdown(wait=True)`` that a second Ctrl-C does not cut short: its threads
    may still be inside compiled kernels using arrays the caller frees or restores once
    this returns (the trainer puts X's feature order back), so the join must finish.
    It is short, since the caller has told the workers to stop."""
    while True:
        try:
            pool.shutdown(wait=True)
            return
        except KeyboardInterrupt:
            continue
