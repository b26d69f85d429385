"""The Dask backend: label-range tasks for training, instance-block tasks for prediction.

Training (:func:`train_dask`)
    The client validates and preprocesses the data once, then **scatters** ``X`` and
    ``Y`` (binary CSR/CSC arrays) to every worker with ``broadcast=True``: each worker
    holds one copy, parsed once, and needs no shared file system.  (Reading a shared
    path on every worker would parse the text file once per worker, and preprocessing
    such as tf-idf would have to be recomputed there too; shipping the arrays is cheaper
    -- see docs/distributed.md for the numbers.)

    The missing labels are cut into shards (:func:`~.sharded.plan_shards`); one task
    trains one shard with the worker's own threads and *returns* its weights, intercepts
    and statistics.  Only the client writes the model directory: it registers each
    result the moment it arrives (statistics file, shard file, manifest), so the
    manifest has exactly one writer and no shared file system is needed for training
    either.  A worker lost mid-task costs only the tasks it was running: the scheduler
    reruns them elsewhere (and a restarted worker fetches the scattered data from a
    peer).  Should the scattered data itself be lost (every worker died), the client
    starts another round: it scatters again and submits the shards still missing.

Prediction (:func:`predict_dask`, :func:`iter_predict_dask`)
    Blocks of instances go to the workers; a model that fits in ``model_memory`` is
    loaded by the client and scattered once, a larger one is streamed shard by shard by
    every worker from ``model_dir`` (which must then be visible to the workers).

Dask is imported lazily, inside these functions; importing this module does not need it
either.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .._threads import usable_cores
from ..errors import DataFormatError, HeadstartError, MissingExtraError, ModelFormatError, ParameterError
from ..model.lock import writes_model_dir
from ..model.writer import TRAINING_MANIFEST_LAG
from ..params import TrainParams
from ..training.kernel import LANES
from ..validation import check_k
from .sharded import (PreparedData, ShardCallback, ShardedResult, ShardRecorder, count_finished, shared_labels,
                      finish_result, open_model_dir, plan_shards, prepare_data, undone_if_nothing_trained)

log = logging.getLogger(__name__)

#: default labels per task: about this many tasks per Dask thread, within the bounds below;
#: at least 64 (the trainer's per-call preparation costs ~10 labels' work,
#: docs/distributed.md) and at least one full trainer chunk (4 labels per lane)
TASKS_PER_WORKER = 4
MIN_TASK_LABELS, MAX_TASK_LABELS = max(64, 4 * LANES), 1024
#: a label without positives costs the trainer about 1/SHARED_PER_LABEL of a label it
#: solves (debian-deps: ~8 us against ~6 ms; counted high, since the client writes its
#: statistics row all the same) -- :func:`plan_tasks`
SHARED_PER_LABEL = 256
#: at most this many labels per default task, however cheap (the statistics of a task's
#: labels travel back in one message: ~230 bytes a label)
MAX_TASK_SPAN = 32768
#: labels per trainer chunk inside a task: at least one per lane
MIN_CHUNK, MAX_CHUNK = LANES, 256


class DaskUnavailableError(MissingExtraError):
    """The Dask extra is not installed."""


class DistributedTrainingError(HeadstartError, RuntimeError):
    """Training over Dask did not finish (finished shards are kept: resume to continue)."""


def _distributed():
    try:
        import distributed
    except ImportError:
        raise DaskUnavailableError("the Dask backend needs the dask extra: pip install 'headstart[dask]' "
                                   "(dask and distributed)") from None
    return distributed


# --------------------------------------------------------------------------- cluster
#: Dask settings of the LocalCluster that ``n_workers`` starts.  Dask's servers wake up on
#: wall-clock timers whatever the work: the worker's statistical profiler every 10 ms,
#: every server's event-loop tick monitor every 20 ms, the memory monitors every 100 ms,
#: the system monitors every 500 ms.  Their CPU is paid per second of wall time, so on a
#: shared machine, where a task's wall time is several times its CPU time, it was a large
#: part of the run: helper-73 measured an idle 2-worker cluster at 0.19 cores, 0.025 with
#: these (docs/distributed.md).  None of them changes what a task computes.  The memory
#: monitor still enforces a memory limit, once a second instead of ten times.
LOCAL_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
}


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, n_workers: int | None = None, *, client: Any = None,
                processes: bool = True, threads_per_worker: int = 1, **cluster_kw: Any) -> Iterator[Any]:
    """A ``distributed.Client``: ``client`` itself, a connection to ``scheduler`` (an
    address such as ``tcp://host:8786`` or a scheduler file path ending in ``.json``), or
    a new ``LocalCluster`` of ``n_workers`` worker processes on loopback (closed on exit).

    Local workers get ``threads_per_worker=1`` Dask thread each: a training task runs its
    own threads, so one task at a time per worker is what keeps the cores busy without
    oversubscribing them.  The Client made here (to ``scheduler`` or to the local cluster)
    is not made Dask's default client (``client.as_current()`` or ``set_as_default`` of
    your own Client, where other Dask work should use it): headstart passes its client
    explicitly everywhere, and a user's default client stays theirs.
    """
    if client is not None:
        yield client
        return
    distributed = _distributed()
    if scheduler:
        c = _connect(distributed, scheduler_address(scheduler))
        try:
            yield c
        finally:
            c.close()
        return
    if not n_workers or n_workers < 1:
        raise ParameterError(f"parameter n_workers must be an integer >= 1 (or give a scheduler), got {n_workers!r}")
    # the scheduler's HTTP server (health, and the dashboard where bokeh is installed) on a
    # free loopback port: with dashboard_address=None distributed still tries 8787 and
    # warns "Port 8787 is already in use" when another cluster holds it (helper-46)
    kw = dict(n_workers=int(n_workers), threads_per_worker=threads_per_worker, processes=processes,
              host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    kw.update(cluster_kw)
    import dask

    # read when the servers are made (the nannies hand their copy to the worker processes)
    with dask.config.set(LOCAL_CLUSTER_CONFIG):
        cluster = distributed.LocalCluster(**kw)
    try:
        try:
            c = distributed.Client(cluster, set_as_default=False)
        except BaseException as e:
            _close_half_made(distributed, e)       # (as in _connect: no Client left to the GC)
            raise
        try:
            yield c
        finally:
            c.close()
    finally:
        cluster.close()


#: seconds Dask may take to reach a scheduler (it retries while one is starting)
CONNECT_WAIT = 60.0
#: seconds a refused connection (nothing listens at the address) is retried: time for a
#: scheduler started together with the client to bind its port (``dask scheduler`` took
#: ~4 s to listen on a loaded 2-core machine, helper-73); Dask retried it for all of CONNECT_WAIT
REFUSED_WAIT = 10.0
#: seconds Dask has to connect before headstart looks at the address itself: a scheduler
#: that is up answers in milliseconds, and the probe is a connection the scheduler logs
#: ("closed before handshake completed")
PROBE_AFTER = 1.0


def _probe(address: str) -> str | None:
    """What a plain TCP connection to ``address`` finds: ``"refused"``, ``"unresolved"``,
    or None (something listens, the address is not TCP, or the outcome is not clear:
    unreachable networks, filtered ports -- those are left to Dask's own wait)."""
    import socket

    scheme, sep, loc = address.partition("://")
    if not sep or scheme not in ("tcp", "tls", "ws", "wss"):
        return None
    loc = loc.split("/", 1)[0]
    host, colon, port = loc.rpartition(":")
    if not colon or not port.isdigit():
        return None
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        # (a name server that did not answer in time may answer later: Dask's wait)
        return None if e.errno == getattr(socket, "EAI_AGAIN", None) else "unresolved"
    except (OSError, UnicodeError):
        return None
    refused = False
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(2.0)
                sock.connect(sockaddr)
            return None
        except ConnectionRefusedError:
            refused = True
        except OSError:
            return None
    return "refused" if refused else None


def _connect(distributed: Any, address: str, wait: float = CONNECT_WAIT) -> Any:
    """``distributed.Client(address)`` with an end, and a clear error where something other
    than a Dask scheduler listens (helper-56).  Dask's handshake has no deadline of its own:
    a service that waits for a request of its own (the dashboard's HTTP port given instead
    of the scheduler's) held the connection ~14 minutes whatever ``timeout`` or
    ``distributed.comm.timeouts.connect`` said; a service that answers first had its
    greeting read as a frame length ("unable to allocate 2.82 EiB").  So the client is
    made in a daemon thread, waited for ``wait`` plus a margin, and left behind on failure
    (the process then exits with the error; the thread holds nothing of ours)."""
    box: dict[str, Any] = {}
    lock = threading.Lock()

    def connect() -> None:
        try:
            # not the process's default client while it connects: Dask makes a Client the
            # default before its handshake, so one abandoned below would stay the
            # default (and set Dask's scheduler config) for the rest of the process
            client = distributed.Client(address=address, timeout=f"{wait:g}s", set_as_default=False)
        except BaseException as e:   # noqa: BLE001 - handed to the caller's thread below
            _close_half_made(distributed, e)
            with lock:
                box["error"] = e
            return
        with lock:
            if box.get("abandoned"):   # the caller gave up: no late client left open (helper-60)
                client.close()
            else:
                box["client"] = client

    thread = threading.Thread(target=connect, name="headstart-dask-connect", daemon=True)
    t0 = time.monotonic()
    thread.start()
    limit = wait + min(wait, 15.0)
    hint = "the scheduler listens on 8786 unless told otherwise; the dashboard's port (8787) is not it"
    # Dask retries a refused or unresolvable address for all of its timeout (helper-73: 60 s
    # before "Timed out trying to connect"); nothing listening is seen at once by a plain
    # TCP connect.  A scheduler that is starting gets REFUSED_WAIT seconds to listen.
    thread.join(min(PROBE_AFTER, limit))
    problem, refused_since = None, None
    while thread.is_alive() and time.monotonic() - t0 < limit:
        found = _probe(address)
        if found == "unresolved":
            problem = f"{address}: host not found (the name does not resolve)"
            break
        if found != "refused":
            break               # something listens (or it cannot be told): Dask's wait
        now = time.monotonic()
        refused_since = refused_since if refused_since is not None else now
        if now - refused_since >= min(REFUSED_WAIT, wait):
            problem = (f"{address}: connection refused: no Dask scheduler listens there (retried for "
                       f"{now - refused_since:.0f} s; start it first, e.g. dask scheduler --port 8786, or check "
                       f"the host and port)")
            break
        if refused_since == now:
            log.warning("%s: connection refused (nothing listens there yet): waiting up to %g s for a "
                        "scheduler to start", address, min(REFUSED_WAIT, wait))
        thread.join(0.25)
    if problem is None:
        thread.join(max(0.0, limit - (time.monotonic() - t0)))
    with lock:
        done = "client" in box or "error" in box
        box["abandoned"] = not done
    if not done and problem is not None:
        raise DistributedTrainingError(problem)
    if not done:
        raise DistributedTrainingError(f"{address}: no Dask scheduler answered within {limit:g} s: "
                                       f"something accepts connections there but does not speak Dask's protocol "
                                       f"({hint})")
    error = box.get("error")
    if isinstance(error, MemoryError):
        raise DistributedTrainingError(f"{address}: not a Dask scheduler: the service there answered in another "
                                       f"protocol ({hint})") from None
    if error is not None:
        raise error
    return box["client"]


def _close_half_made(distributed: Any, error: BaseException) -> None:
    """Close the Client that a failed ``distributed.Client(...)`` call left behind (found in
    the traceback's frames: nothing else refers to it).

    Dask closes it itself only after an OSError; after another error (a service that greets
    first: MemoryError) it stayed "connecting", in reference cycles, until the cyclic
    garbage collector found it -- at any later allocation, in any thread.  Its ``__del__``
    then closes it and stops its LoopRunner, under a lock that is LoopRunner's class-wide,
    non-reentrant one: when the collection ran inside another Client's or LocalCluster's
    ``LoopRunner.start()``, which holds that lock, the thread waited on itself for ever
    (helper-76: seen making the next LocalCluster in tests/test_dask.py).  Closed here, in
    the thread that made it, its ``__del__`` has nothing left to do."""
    tb = error.__traceback__
    while tb is not None:
        client = tb.tb_frame.f_locals.get("self")
        if isinstance(client, distributed.Client):
            if client.status not in ("closed", "newly-created"):
                with contextlib.suppress(Exception):     # (best effort: the error is the caller's news)
                    client.close(timeout=5)
            return
        tb = tb.tb_next


#: the address schemes of Dask's communication backends
DASK_SCHEMES = ("tcp", "tls", "inproc", "ucx", "ws", "wss")


def scheduler_address(scheduler: str) -> str:
    """The address of ``scheduler``: itself, or read from a scheduler file (a path ending in
    ``.json``, as ``dask scheduler --scheduler-file`` writes).  Read here, not by Dask,
    which waits without end for a missing file and fails with internal errors on a bad
    one (helper-46)."""
    if not str(scheduler).endswith(".json"):
        scheme, sep, _ = str(scheduler).partition("://")
        if sep and scheme not in DASK_SCHEMES:   # (helper-56: Dask's ValueError read as a bug of headstart)
            raise ParameterError(f"{scheduler}: not a Dask scheduler address: unknown scheme {scheme!r} (known: "
                                 f"{', '.join(DASK_SCHEMES)}; e.g. tcp://host:8786, or a scheduler file .json)")
        return str(scheduler)
    try:
        with open(scheduler, encoding="utf-8") as fh:
            info = json.load(fh)
    except FileNotFoundError:
        raise ParameterError(f"{scheduler}: scheduler file not found (start the scheduler with "
                             "--scheduler-file first, or give its address tcp://host:port)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataFormatError(f"{scheduler}: not a Dask scheduler file: {e}") from None
    address = info.get("address") if isinstance(info, dict) else None
    if not isinstance(address, str) or not address:
        raise DataFormatError(f"{scheduler}: not a Dask scheduler file: no \"address\" of the scheduler in it")
    return address


#: what the error of a wait without workers adds for a training run
TRAINING_KEPT = "finished shards are kept (resume to continue)"


def _cluster_size(client: Any, wait: float = 60.0, kept: str = TRAINING_KEPT) -> tuple[int, int]:
    """(workers, Dask threads over all workers), waiting up to ``wait`` seconds for a
    first worker if needed."""
    workers = client.scheduler_info().get("workers", {})
    if not workers:
        log.warning("no Dask worker has joined the scheduler yet: waiting up to %g s for one", wait)
        _wait_for_a_worker(client, wait, kept)
        workers = client.scheduler_info().get("workers", {})
    return len(workers), int(sum(w.get("nthreads", 1) for w in workers.values()))


def _wait_for_a_worker(client: Any, wait: float, kept: str = TRAINING_KEPT) -> None:
    """Dask's wait for one worker, whose timeout error read "60.0: 1" (helper-56)."""
    try:
        client.wait_for_workers(1, timeout=wait)
    except Exception as e:   # noqa: BLE001 - only Dask's timeout error is translated
        if not type(e).__name__.endswith("TimeoutError"):
            raise
        raise DistributedTrainingError(f"no Dask worker joined the scheduler within {wait:g} s: start workers "
                                       f"(dask worker <scheduler address>) or wait longer (worker_wait); "
                                       f"{kept}") from None


#: seconds between looks at the cluster while a prediction block's result is awaited
RESULT_POLL = 2.0


def _result_while_workers(client: Any, fut: Any, wait: float, kept: str) -> Any:
    """``fut.result()``, but an error once no worker has been connected for ``wait``
    seconds.  A task whose inputs all travel with it (a streamed model's blocks) is only
    queued again when its worker dies, so a cluster that lost every worker for good --
    workers killed by the batch system, say -- left ``result()`` waiting for ever
    (helper-76); training waits in the same way between its rounds (worker_wait)."""
    while True:
        try:
            return fut.result(timeout=RESULT_POLL)
        except TimeoutError:   # (distributed's TimeoutError is the built-in one since 3.11)
            if not client.scheduler_info().get("workers"):
                log.warning("no Dask worker left: waiting up to %g s for one to join the scheduler", wait)
                _wait_for_a_worker(client, wait, kept)


def default_task_size(num_labels: int, slots: int) -> int:
    """About TASKS_PER_WORKER tasks per Dask thread (``slots``), within the bounds."""
    return int(min(MAX_TASK_LABELS, max(MIN_TASK_LABELS, -(-num_labels // (TASKS_PER_WORKER * max(slots, 1))))))


def plan_tasks(missing: Iterable[tuple[int, int]], shared: np.ndarray, origin: int, slots: int) -> list[tuple[int, int]]:
    """Default label-range tasks of the labels ``[origin, origin + len(shared))`` still
    ``missing``, cut by their *work* rather than their number.

    A label the trainer solves (``~shared``) counts 1, a shared one 1/SHARED_PER_LABEL.
    The cells hold about the work of ``range / (TASKS_PER_WORKER * slots)`` labels, within
    MIN_TASK_LABELS..MAX_TASK_LABELS labels solved, and at most MAX_TASK_SPAN labels in all:
    for a label space of solved labels that is :func:`default_task_size`'s grid; in a
    label space mostly of labels without positives, fewer, wider tasks (helper-73: 2M
    labels, ~1% with positives, made 1,954 tasks of 1,024 labels whose fixed cost --
    ~60 ms of set-up on the worker, a shard and a statistics file on the client --
    outweighed the training).  The cells are a function of the whole range's label
    counts and the cluster's size only, not of what is missing, so a resumed run retrains
    exactly the cells that were in progress (as the fixed grid of :func:`plan_shards`).
    """
    shared = np.asarray(shared, dtype=bool)
    count = int(shared.size)
    w = np.where(shared, 1, SHARED_PER_LABEL).astype(np.int64)      # work in 1/SHARED_PER_LABEL of a label
    cum = np.cumsum(w)
    total = int(cum[-1]) if count else 0
    # (whole labels' work: for a range of solved labels, default_task_size's grid)
    per = -(-total // (TASKS_PER_WORKER * max(int(slots), 1) * SHARED_PER_LABEL))
    per = min(MAX_TASK_LABELS, max(MIN_TASK_LABELS, per)) * SHARED_PER_LABEL
    # cut after the label where the work done reaches each multiple of `per`
    cuts = np.searchsorted(cum, np.arange(per, total, per), side="left") + 1 if total > per else np.zeros(0, np.int64)
    bounds = np.unique(np.concatenate([[0], cuts, [count]]).astype(np.int64))
    # no cell wider than MAX_TASK_SPAN labels: the rest of a wide cell in cells of that width
    wide = np.flatnonzero(np.diff(bounds) > MAX_TASK_SPAN)
    if wide.size:
        extra = [np.arange(bounds[i] + MAX_TASK_SPAN, bounds[i + 1], MAX_TASK_SPAN) for i in wide]
        bounds = np.unique(np.concatenate([bounds] + extra))
    bounds = bounds + int(origin)
    out = []
    for a, b in missing:
        inner = bounds[(bounds > a) & (bounds < b)]
        edges = [int(a)] + [int(x) for x in inner] + [int(b)]
        out.extend(zip(edges[:-1], edges[1:]))
    return out


# --------------------------------------------------------------------------- worker side
def aligned(M: Any) -> Any:
    """``M`` with every array aligned (copied only where needed).

    Arrays that arrive through Dask's serialisation are views of the received frames and
    may be unaligned (seen for the int32 ``indices`` of a CSR matrix); numba types an
    unaligned array differently, which means a fresh compilation on every worker and
    slower loops.  A copy restores the layout the cached kernels were compiled for.
    """
    import scipy.sparse as sp

    def fix(a: np.ndarray) -> np.ndarray:
        return a if a.flags.aligned and a.flags.c_contiguous else np.require(a, requirements=["A", "C"])

    if sp.issparse(M) and M.format in ("csr", "csc"):
        M.data, M.indices, M.indptr = fix(M.data), fix(M.indices), fix(M.indptr)
        return M
    if isinstance(M, np.ndarray):
        return fix(M)
    return M


class TrainingArrays:
    """The scattered training data: ``X`` (CSR) and ``Y`` (CSC).

    Unpickled once per worker (when the data arrives), aligned and -- being the worker's
    own copy -- renumbered into the kernels' feature order in place right then
    (``order``, :mod:`headstart.training.locality`), so every task on that worker trains
    on the same arrays without a copy of its own.  Each task used to renumber a copy of
    X for itself: one more X per running task (helper-56: four 1-thread tasks of a 77 MB
    X peaked at 1,099 MB against 798 MB for one 4-thread task).  Not where X declares
    far more features than it has nonzeros (the full order's tables would be as long as
    the feature space: each task then takes the compact order as before), nor where the
    object is not unpickled (a threads-only cluster shares the client's X, not ours).
    """

    def __init__(self, X: Any, Y: Any):
        self.X, self.Y, self.order = X, Y, None

    def __getstate__(self) -> dict[str, Any]:
        # a worker's copy travels on renumbered (Dask copies scattered data between
        # workers), with its order
        return {"X": self.X, "Y": self.Y, "order": self.order}

    @staticmethod
    def label_columns(Y: Any) -> Any:
        """Y as the trainer takes it (CSC, sorted, int64 index arrays): made so here, once
        per worker, every task's trainer uses its arrays as they are
        (:func:`~headstart.training.chunks.label_columns`) instead of converting all of Y
        again -- O(label space) per task (helper-67: 2M labels in 1,954 tasks of 1,024
        spent ~40% of the workers' CPU on it)."""
        import scipy.sparse as sp

        from ..training.chunks import label_columns

        if not sp.issparse(Y):
            return aligned(Y)
        Yc, indptr, indices = label_columns(aligned(Y))     # (the worker's own copy: changed in place)
        Yc.indptr, Yc.indices = indptr, indices
        Yc.has_sorted_indices = True     # (label_columns sorted them; the check is then free)
        return Yc

    def __setstate__(self, state: dict[str, Any]) -> None:
        from ..training.locality import FeatureOrder

        self.X, self.Y, self.order = aligned(state["X"]), self.label_columns(state["Y"]), state.get("order")
        X = self.X
        if self.order is not None:
            return
        # the order a task would take itself; where that is the compact form, tasks keep it
        order = FeatureOrder.by_frequency(X, compact=True)
        if order.keys is None:
            for name in ("data", "indices"):        # (views of received frames may be read-only)
                if not getattr(X, name).flags.writeable:
                    setattr(X, name, getattr(X, name).copy())
            order.renumber_inplace(X)
            self.order = order


def _worker_threads() -> int:
    """Training threads for a task on this worker: the cores divided among its Dask threads."""
    try:
        from dask.system import CPU_COUNT as cores
    except ImportError:  # pragma: no cover
        cores = usable_cores()
    try:
        from distributed import get_worker

        slots = int(get_worker().state.nthreads)
    except Exception:  # not on a worker (e.g. a synchronous scheduler)
        slots = 1
    return max(1, int(cores) // max(slots, 1))


def train_range_task(arrays: TrainingArrays, params: TrainParams, first: int, stop: int, threads: int | None):
    """Dask task: train labels ``[first, stop)`` of the scattered data; runs on a worker.

    Returns ``(first, weights CSR, intercept, TrainingStats)``; nothing is written here.
    """
    from ..training.trainer import train_labels

    X, Y = arrays.X, arrays.Y

    t = int(threads) if threads else _worker_threads()
    p = params.replace(threads=t)
    # few, large chunks: the lanes of a chunk share every sweep over X, and a chunk's
    # tail (fewer labels left than lanes) is paid once per chunk; the results do not
    # depend on the chunking
    n = stop - first
    chunk = n if t == 1 else -(-n // (2 * t))
    chunk = int(min(MAX_CHUNK, max(MIN_CHUNK, chunk)))
    t0 = time.perf_counter()
    weights, intercept, stats = train_labels(X, Y, p, np.arange(first, stop, dtype=np.int64), chunk_size=chunk,
                                             collect=True, internal=getattr(arrays, "order", None))
    stats.meta.update({"task_seconds": time.perf_counter() - t0, "task_threads": t})
    return first, weights, intercept, stats


def code_digest() -> str:
    """headstart's source on this machine (the hash that also stamps numba's cache,
    :func:`headstart._compile.package_digest`): the client's and a worker's must agree."""
    from .._compile import _digest_once

    return _digest_once().hex()


#: path-valued training parameters, read by the tasks on the workers
PATH_PARAMS = ("weights_pos_file", "weights_neg_file", "pretrained")


def run_task(task_fn: Callable, digest: str, deadline: float | None, arrays: Any, params: TrainParams, first: int,
             stop: int, threads: int | None):
    """Dask task: ``task_fn(arrays, params, first, stop, threads)`` after two checks the
    task function cannot make itself.

    * The worker runs the client's headstart code (``digest``): other code may train
      other weights, silently (helper-56: a worker on an older commit changed 5,410
      weights of bibtex).  The docs ask for the same version; this enforces it.
    * ``deadline`` (the client's ``time.time()`` at which the run's budget ends, or
      None): the task gets what is left of it *when it starts* -- a task that waited in
      Dask's queue got the whole budget again (helper-56: a 12 s budget trained all 4000
      labels in 65 s).  Workers' clocks are assumed to agree with the client's (NTP).
    """
    mine = code_digest()
    if mine != digest:
        import socket

        raise HeadstartError(f"the Dask worker on {socket.gethostname()} runs other headstart code than the client "
                             f"(source digest {mine[:12]} against {digest[:12]}): install the same version on every "
                             "worker, or its labels could differ")
    if deadline is not None:
        params = params.replace(timeout=max(deadline - time.time(), 1e-3))
    return task_fn(arrays, params, first, stop, threads)


def _task_params(params: TrainParams) -> TrainParams:
    """``params`` with its file paths absolute: a task reads them on a worker, whose
    working directory is its own (helper-56: a relative --weights-pos-file read the
    worker directory's w.txt, a silently different model)."""
    paths = {name: os.path.abspath(getattr(params, name)) for name in PATH_PARAMS if getattr(params, name)}
    return params.replace(**paths) if paths else params


# --------------------------------------------------------------------------- training
def _is_infrastructure_error(e: BaseException) -> bool:
    """Lost workers or lost data (retry another round) rather than an error of the task."""
    import asyncio
    import concurrent.futures

    distributed = _distributed()
    kinds: list[type] = [asyncio.CancelledError, concurrent.futures.CancelledError, asyncio.TimeoutError,
                         distributed.KilledWorker, OSError]
    for name in ("FutureCancelledError", "CommClosedError"):
        for mod in (distributed, getattr(distributed, "client", None), getattr(distributed, "comm", None)):
            k = getattr(mod, name, None) if mod is not None else None
            if isinstance(k, type):
                kinds.append(k)
    return isinstance(e, tuple(kinds)) and not isinstance(e, HeadstartError)


@writes_model_dir
def train_dask(X: Any, Y: Any, params: TrainParams, model_dir: str | os.PathLike, *,
               client: Any = None, scheduler: str | None = None, n_workers: int | None = None,
               first_label: int = 0, num_labels: int | None = None, shard_size: int | None = None,
               resume: bool = False, overwrite: bool | str = False, task_threads: int | None = None,
               progress: Callable[[int], None] | None = None, on_shard: ShardCallback | None = None,
               keep_stats: bool = True, retries: int = 1, max_rounds: int = 3,
               data: PreparedData | None = None, processes: bool = True,
               worker_wait: float = 600.0, extensions: dict[str, Any] | None = None,
               task_fn: Callable | None = None, payload: Any = None) -> ShardedResult:
    """Train labels ``[first_label, first_label + num_labels)`` into ``model_dir`` over Dask.

    The cluster is ``client``, or the scheduler at ``scheduler``, or a LocalCluster of
    ``n_workers`` processes started (and stopped) here.  ``shard_size`` labels per task
    (default: cut by work, :func:`plan_tasks`: about 4 tasks per Dask thread of 64..1024
    labels with positives, labels without counting little).  Each task trains with
    ``task_threads`` threads (default: ``params.threads`` if set, else the worker's cores divided by its Dask
    threads; for a LocalCluster started here, this machine's cores divided by
    ``n_workers``).  ``resume``/``overwrite``/``progress``/``on_shard`` as in
    :func:`~.sharded.train_sharded`; the model is the same as a local run's.
    ``retries``: reruns of a task that raised; ``max_rounds``: rounds of resubmission
    after lost workers or lost data (each waits up to ``worker_wait`` seconds for a
    worker).  Raises :class:`DistributedTrainingError` when
    labels are still missing at the end (finished shards stay: resume to continue).
    Another training mode (headstart.shortlist) passes ``extensions`` (its manifest
    fields), ``payload`` (what is scattered to the workers, default
    ``TrainingArrays(X, Y)``) and ``task_fn`` (same signature as :func:`train_range_task`).
    """
    t_start = time.perf_counter()
    from ..init.pretrained import WeightSource

    if isinstance(params.pretrained, WeightSource):
        # Shipping them is possible but costly: every task would carry its label range's
        # rows through the scheduler (the whole model held there at once); from a
        # directory each task reads only the shards of its labels, on its worker.
        raise ParameterError("parameter pretrained: weights in memory cannot start Dask training (each task "
                             "would need its rows shipped to its worker through the scheduler): save them "
                             "(OvAClassifier.save / headstart.model.writer.save_model) and pass the directory")
    if data is None:
        data = prepare_data(X, Y, params, first_label, num_labels)
    if scheduler:
        scheduler = scheduler_address(scheduler)      # a bad scheduler file refused before the model exists
    with undone_if_nothing_trained(model_dir):
        return _train_dask(data, params, model_dir, client, scheduler, n_workers, shard_size, resume, overwrite,
                           task_threads, progress, on_shard, keep_stats, retries, max_rounds, processes,
                           worker_wait, extensions, task_fn, payload, t_start)


def _train_dask(data, params, model_dir, client, scheduler, n_workers, shard_size, resume, overwrite, task_threads,
                progress, on_shard, keep_stats, retries, max_rounds, processes, worker_wait, extensions, task_fn,
                payload, t_start) -> ShardedResult:
    distributed = _distributed()
    writer = open_model_dir(model_dir, params, data, resume=resume, overwrite=overwrite, extensions=extensions)
    task_fn = task_fn or train_range_task
    first, count = data.first_label, data.num_labels
    before = count_finished(writer, first, count)
    if progress is not None and before:
        progress(before)  # the labels of the range finished by earlier runs
    recorder = ShardRecorder(writer, keep_stats=keep_stats, progress=progress, on_shard=on_shard)
    info: dict[str, Any] = {"rounds": 0, "task_errors": 0}
    if not writer.missing_ranges(first, count):
        return finish_result(writer, data, recorder, before, t_start, "dask", info)
    if task_threads is None and params.threads > 0:
        task_threads = params.threads
    if task_threads is None and client is None and not scheduler and n_workers:
        task_threads = max(1, usable_cores() // int(n_workers))
    # --timeout is the run's budget, as for local training (helper-46: each task got all
    # of it, and tasks the budget cut were resubmitted as lost): each round's tasks get
    # what is left, no round starts after it, and the labels not reached stay missing
    deadline = t_start + params.timeout if params.timeout > 0 else None
    # the same deadline on the workers' clocks (run_task)
    wall_deadline = time.time() + (deadline - time.perf_counter()) if deadline is not None else None
    task_params = _task_params(params)
    digest = code_digest()
    # the manifest is rewritten at most every TRAINING_MANIFEST_LAG write-durations (its
    # cost grows with the shards listed: model/writer.py); leaving the block writes it
    writer.manifest_lag = TRAINING_MANIFEST_LAG
    with writer, dask_client(scheduler, n_workers, client=client, processes=processes) as c:
        workers, slots = _cluster_size(c, worker_wait)
        size = shard_size
        if size is None and task_fn is not train_range_task:
            size = default_task_size(count, slots)      # (another mode's tasks: their own costs)
        if size is None:
            # cells of about equal work (labels without positives are nearly free)
            shared = shared_labels(data.label_counts, data.n_train, params, first, count)
        elif size < min(MIN_TASK_LABELS, count):
            # a task trains its labels 16 at a time per thread (the lanes of one sweep over
            # X): a few labels per task sweep X for each of them and pay the task's set-up
            # (renumbering its copy of X) as often (helper-56: silent, and slow)
            log.warning("tasks of %d label(s) keep few of a task's %d lanes per thread busy and repeat the "
                        "task's set-up every %d label(s): training is slower than with --shard-size >= %d "
                        "(the default here: %d)", size, LANES, size, MIN_TASK_LABELS,
                        default_task_size(count, slots))
        info.update({"workers": workers, "dask_threads": slots, "task_threads": task_threads or "auto"})
        run = uuid.uuid4().hex[:8]
        last_error: BaseException | None = None
        for rnd in range(max_rounds):
            missing = writer.missing_ranges(first, count)
            if not missing or (deadline is not None and time.perf_counter() >= deadline):
                break
            info["rounds"] = rnd + 1
            plan = plan_shards(missing, size, origin=first) if size else plan_tasks(missing, shared, first, slots)
            widest = max(b - a for a, b in plan)
            info.setdefault("shard_size", size or widest)
            info.setdefault("tasks", len(plan))
            log.info("dask round %d: %d label(s) in %d task(s) of <= %d labels on %d worker(s)",
                     rnd + 1, sum(b - a for a, b in plan), len(plan), widest, workers)
            t0 = time.perf_counter()
            if rnd:  # after losing every worker: give the cluster time to bring some back
                if not c.scheduler_info().get("workers"):
                    log.warning("no Dask worker left: waiting up to %g s for one to join the scheduler",
                                worker_wait)
                _wait_for_a_worker(c, worker_wait)
            arrays = c.scatter(payload if payload is not None else TrainingArrays(data.X, data.Y), broadcast=True,
                               hash=False)
            info.setdefault("scatter_seconds", time.perf_counter() - t0)
            futures = [c.submit(run_task, task_fn, digest, wall_deadline, arrays, task_params, a, b, task_threads,
                                key=f"headstart-train-{a}-{b}-{run}-{rnd}", pure=False, retries=retries,
                                priority=-i)
                       for i, (a, b) in enumerate(plan)]
            spans = {f.key: ab for f, ab in zip(futures, plan)}
            fatal: BaseException | None = None
            lost = 0
            # on this client's event loop: as_completed otherwise takes the loop of Dask's
            # *default* client, which is whichever Client was made last in the process -- a
            # user's other client, or one still stuck in a handshake -- and the futures of
            # this one were then awaited on a loop that never saw them (a hang, stop 59)
            for fut in distributed.as_completed(futures, loop=c.loop):
                try:
                    _, w, intercept, st = fut.result()
                except Exception as e:  # noqa: BLE001 - classified below
                    info["task_errors"] += 1
                    last_error = e
                    if _is_infrastructure_error(e):
                        lost += 1
                        log.debug("task %s lost: %s: %s", fut.key, type(e).__name__, e)
                    elif fatal is None:
                        fatal = e
                        log.error("task %s failed: %s: %s", fut.key, type(e).__name__, e)
                    continue
                finally:
                    fut.release()
                # the labels the task trained: a time budget that ends inside a task of
                # several threads leaves gaps (helper-56: rows registered as a, a + 1,
                # ... gave 262 labels other labels' weights)
                labels = np.asarray(st["label"], dtype=np.int64)
                lo, hi = spans[fut.key]
                if labels.size != w.shape[0] or (labels.size and (labels[0] < lo or labels[-1] >= hi)):
                    raise DistributedTrainingError(f"{writer.path}: task {fut.key} returned {w.shape[0]} weight "
                                                   f"rows and statistics of {labels.size} label(s), not of its "
                                                   f"range [{lo}, {hi})")
                recorder.record(labels, w, intercept, st)
            del futures
            arrays.release()
            if lost:
                # a nanny that kills its worker over --memory-limit is seen here only as a lost
                # worker (helper-56): say that it may be memory, and where to look
                log.warning("%d task(s) lost with their worker(s) or data (last: %s: %s); resubmitting "
                            "the missing labels (a worker killed by its nanny for exceeding its memory "
                            "limit looks like this: the worker's log says so)", lost,
                            type(last_error).__name__, last_error)
            if fatal is not None:
                if isinstance(fatal, HeadstartError):
                    raise fatal
                raise DistributedTrainingError(
                    f"{writer.path}: a training task failed: {type(fatal).__name__}: {fatal}; the "
                    "finished shards are kept (resume to continue)") from fatal
    result = finish_result(writer, data, recorder, before, t_start, "dask", info)
    if result.missing and deadline is not None and time.perf_counter() >= deadline:
        return result       # the time budget's end: the caller says so (resume to continue)
    if result.missing:
        a, b = result.missing[0]
        raise DistributedTrainingError(
            f"{writer.path}: {len(result.missing)} label range(s) still missing after {max_rounds} round(s) "
            f"(first [{a}, {b})); last error: {type(last_error).__name__ if last_error else None}: "
            f"{last_error}; the finished shards are kept (resume to continue)"
            + ("; workers that keep dying may be over their memory limit (see their logs; fewer tasks or "
               "threads per worker need less)" if type(last_error).__name__ == "KilledWorker" else ""))
    return result


# --------------------------------------------------------------------------- prediction
def predict_block_task(model: Any, model_dir: str | None, X, k: int, threads: int | None,
                       allow_gaps: bool, threshold: Any = None):
    """Dask task: top-k of a block of instances with a scattered model, or by streaming
    the shards of ``model_dir`` (when ``model`` is None); with a ``threshold`` (a number
    or one per label) instead the decisions score > threshold, with their scores (CSR)."""
    from ..prediction.topk import predict_above, predict_above_streaming, predict_topk, predict_topk_streaming

    t = int(threads) if threads else _worker_threads()
    X = aligned(X)
    if threshold is not None:
        if model is not None:
            return predict_above(model, X, threshold, threads=t, return_scores=True)
        return predict_above_streaming(model_dir, X, threshold, threads=t, allow_gaps=allow_gaps,
                                       return_scores=True)
    if model is not None:
        return predict_topk(model, X, k, threads=t)
    return predict_topk_streaming(model_dir, X, k, threads=t, allow_gaps=allow_gaps)


def _model_weight_bytes(manifest: dict[str, Any]) -> int:
    nnz = sum(int(s["nnz"]) for s in manifest["shards"])
    labels = sum(int(s["num_labels"]) for s in manifest["shards"])
    return 8 * nnz + 12 * labels


def iter_predict_dask(model_dir: str | os.PathLike, blocks: Iterable[Any], k: int, *, client: Any = None,
                      scheduler: str | None = None, n_workers: int | None = None,
                      threads: int | None = None, model_memory: int = 1 << 30, allow_gaps: bool = False,
                      window: int | None = None, processes: bool = True, threshold: Any = None,
                      worker_wait: float = 600.0) -> Iterator[Any]:
    """``(labels, scores)`` of every block of instances (matrices), in order, computed on
    Dask workers; at most ``window`` blocks are in flight (default: 2 per worker).  With
    a ``threshold`` (a number, or one per label of the label space) instead the CSR
    matrix of the decisions score > threshold of every block, their scores as values
    (:func:`headstart.prediction.topk.predict_above`).

    A model whose weights fit in ``model_memory`` bytes is loaded here and scattered to
    the workers once; a larger one is streamed shard by shard on every worker from
    ``model_dir``, which must then be readable at the same path by the workers.

    Where no worker is connected (none yet, or every one lost) prediction waits up to
    ``worker_wait`` seconds for one, then raises :class:`DistributedTrainingError`.
    """
    import hashlib
    from pathlib import Path

    from ..model.manifest import MANIFEST, read_manifest
    from ..model.ranges import missing_ranges_of
    from ..model.reader import load_model

    distributed = _distributed()
    check_k(k)
    model_dir = os.path.abspath(model_dir)
    m = read_manifest(model_dir)
    missing = missing_ranges_of(m)
    if missing and not allow_gaps:
        a, b = missing[0]
        raise ModelFormatError(f"{model_dir}: model is incomplete, missing {len(missing)} label range(s) "
                               f"starting with [{a}, {b}) (pass allow_gaps=True to predict with it anyway)")
    token = hashlib.sha256((Path(model_dir) / MANIFEST).read_bytes()).hexdigest()[:16]
    if threads is None and client is None and not scheduler and n_workers:
        threads = max(1, usable_cores() // int(n_workers))
    with dask_client(scheduler, n_workers, client=client, processes=processes) as c:
        kept = "the predictions of the blocks before were handed out"
        window = window or 2 * _cluster_size(c, worker_wait, kept)[1]
        model_f = None
        if threshold is not None and not np.isscalar(threshold):
            threshold = c.scatter(np.asarray(threshold, dtype=np.float64), broadcast=True, hash=False)
        if _model_weight_bytes(m) <= model_memory:
            model_f = c.scatter(load_model(model_dir, allow_gaps=allow_gaps), broadcast=True, hash=False)
        pending: list[Any] = []
        try:
            for i, X in enumerate(blocks):
                pending.append(c.submit(predict_block_task, model_f, model_dir, X, int(k), threads,
                                        allow_gaps, threshold, pure=False, retries=1,
                                        key=f"headstart-predict-{token}-{i}-{uuid.uuid4().hex[:6]}"))
                while len(pending) >= window:
                    yield _result_while_workers(c, pending.pop(0), worker_wait, kept)
            while pending:
                yield _result_while_workers(c, pending.pop(0), worker_wait, kept)
        finally:
            for f in pending:
                f.cancel()
            if model_f is not None:
                model_f.release()


def predict_dask(model_dir: str | os.PathLike, X: Any, k: int = 5, *, chunk_rows: int = 16384,
                 **kw: Any) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of every row of ``X`` with blocks of ``chunk_rows`` rows spread over Dask
    workers; the same result as :func:`headstart.prediction.topk.predict_topk_streaming`.
    Keyword arguments are those of :func:`iter_predict_dask`."""
    if not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise ParameterError(f"parameter chunk_rows must be an integer >= 1, got {chunk_rows!r}")
    n = X.shape[0]
    blocks = (X[r:r + chunk_rows] for r in range(0, n, chunk_rows))
    parts = list(iter_predict_dask(model_dir, blocks, k, **kw))
    if not parts:
        return np.empty((0, k), dtype=np.int32), np.empty((0, k), dtype=np.float32)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


__all__ = ["train_dask", "predict_dask", "iter_predict_dask", "dask_client", "DaskUnavailableError",
           "DistributedTrainingError", "default_task_size"]
