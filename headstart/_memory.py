"""The memory this process may still allocate: the machine's, its cgroup's, its
address-space limit's and, inside a Dask worker with a limit, the worker's share.

Kept apart from :mod:`headstart.resources` (the estimates of a run's need, which
know the training code) so that the training code can ask it too without importing
the estimates: the layers stay one-way.
"""

from __future__ import annotations

import os
import sys

__all__ = ["available_memory", "thread_address_space", "THREAD_ARENA_BYTES"]


def _meminfo_available(path: str = "/proc/meminfo") -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _dask_worker_available() -> int | None:
    """Inside a task of a Dask worker that has a memory limit (``dask worker
    --memory-limit``, LocalCluster's ``memory_limit``): the bytes its nanny lets the
    worker grow by before it kills it (``distributed.worker.memory.terminate`` of the
    limit, 0.95 by default, minus the worker's resident size), shared by the tasks
    running on the worker.  Without it the lanes were sized by the machine's memory and
    a worker limited to part of it was killed and its tasks reported lost, never as
    memory (helper-56).  None outside a worker or without a limit; Dask is not imported
    here, only looked up where it is loaded already."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
    except ValueError:          # not inside a task
        return None
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    if not limit:
        return None
    import dask
    import psutil               # a dependency of distributed

    fraction = dask.config.get("distributed.worker.memory.terminate", 0.95) or 1.0   # False: never killed
    running = max(1, len(getattr(getattr(worker, "state", None), "executing", ()) or ()))
    return max(0, int(limit * float(fraction)) - psutil.Process().memory_info().rss) // running


def _cgroup_available() -> int | None:
    """Limit minus usage of this process's memory cgroup (v2, else v1), when it has a limit."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":           # cgroup v2
            root, limit_f, usage_f = "/sys/fs/cgroup", "memory.max", "memory.current"
        elif "memory" in parts[1].split(","):            # cgroup v1
            root, limit_f, usage_f = "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        # the process's own group, else the root of the mount (inside a container)
        for base in (root + parts[2].rstrip("/"), root):
            try:
                with open(os.path.join(base, limit_f), encoding="ascii") as f:
                    limit = f.read().strip()
                with open(os.path.join(base, usage_f), encoding="ascii") as f:
                    usage = int(f.read().strip())
            except (OSError, ValueError):
                continue
            if not limit.isdigit() or int(limit) >= 1 << 60:   # "max" or v1's "unlimited"
                return None
            return max(0, int(limit) - usage)
    return None


#: address space a worker thread maps beyond the buffers the estimates count, which
#: only an address-space limit (``ulimit -v``) sees: glibc's malloc gives each thread an
#: arena of its own, reserving 64 MiB (HEAP_MAX_SIZE on 64-bit), and the thread's stack
#: (RLIMIT_STACK's soft limit, 8 MiB by default) -- reserved, mostly never resident
#: (helper-52: a tight ``ulimit -v`` passed the check, then threads failed to start)
THREAD_ARENA_BYTES = 64 << 20


def thread_address_space() -> int:
    """Address space one more thread reserves: its malloc arena and its stack."""
    stack = 8 << 20
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
        if soft != resource.RLIM_INFINITY and soft > 0:
            stack = int(soft)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        pass
    return THREAD_ARENA_BYTES + stack


def _rlimit_available(threads: int = 0) -> int | None:
    """Address-space limit (``ulimit -v``) minus what the process has mapped already
    and what ``threads`` more threads will reserve (:func:`thread_address_space`)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):  # pragma: no cover
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            vsize = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        vsize = 0
    return max(0, soft - vsize - threads * thread_address_space())


def available_memory(threads: int = 0) -> int | None:
    """Bytes this process can still allocate, or None when it cannot be told.

    The smallest of: ``MemAvailable`` of ``/proc/meminfo`` (else free physical pages
    from ``os.sysconf``), the cgroup's limit minus its usage, and the address-space
    limit (``ulimit -v``) minus the process's current size and the address space that
    ``threads`` worker threads about to start will reserve; inside a Dask worker with a
    memory limit, also the share of that limit left to this task (``_dask_worker_available``).
    """
    candidates = []
    mem = _meminfo_available()
    if mem is None:
        try:
            mem = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            mem = None
    for v in (mem, _cgroup_available(), _rlimit_available(threads), _dask_worker_available()):
        if v is not None:
            candidates.append(int(v))
    return min(candidates) if candidates else None
