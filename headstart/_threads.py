"""Threads: how many cores "0 = all cores" means, and waiting for thread-pool work so
that Ctrl-C and failures stop it promptly."""

from __future__ import annotations

import math
import os
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, Iterable


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


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """CPUs allowed by this process's cgroup CPU quota, rounded up; None without one.
    cgroup v2 ``cpu.max`` ("QUOTA PERIOD" or "max PERIOD"), else v1's
    ``cpu/cpu.cfs_quota_us`` (-1: none) over ``cpu/cpu.cfs_period_us``."""
    try:
        parts = (root / "cpu.max").read_text().split()
        if len(parts) == 2 and parts[0] != "max":
            return max(1, math.ceil(int(parts[0]) / int(parts[1])))
        return None
    except (OSError, ValueError, ZeroDivisionError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return max(1, math.ceil(quota / period)) if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def wait_all(futures: Iterable[Future], stop: Callable[[], None] | None = None) -> None:
    """Wait for every future, in order; on the first exception (a failed task, or Ctrl-C,
    which only the main thread sees while it waits here) cancel the tasks not yet
    started and call ``stop()`` (to tell running ones to give up) before raising it.
    Without this a pool's shutdown runs every queued task first."""
    futures = list(futures)
    try:
        for f in futures:
            f.result()
    except BaseException:
        for f in futures:
            f.cancel()
        if stop is not None:
            stop()
        raise
