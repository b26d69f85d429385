"""First run only: a second process compiles part of the training kernels into numba's
cache while this one reads the data and compiles the rest.

Why.  On an empty numba cache, most of the first ``headstart train`` is compiling
:func:`headstart.training.kernel.train_chunk`'s call graph.  Numba compiles under one
global lock per process, so a second thread would wait; a second *process* compiles in
parallel on the second core.  Numba caches every kernel of the graph on its own (one
index file per function), and a later compilation of a caller looks each callee up in
the cache before compiling it: what the helper has saved, the command only loads.

Who compiles what.  The three phases of the solver (:mod:`headstart.solver.newton`:
``start``, ``direction``, ``advance``) are about half of train_chunk's compile time,
and they and the kernels of the pass over X (``lanes_scores_rows``, ``_touch`` and the
objective's ``project``, ``scores``, ``remainder``, ``unproject``) can be compiled on
their own, for exactly the types train_chunk calls them with (the run's loss and
regulariser, a lane's view of the lane workspace, a label's row of the record arrays,
the float32 sweep buffer).  The command compiles ``start`` first, before reading;
meanwhile the helper compiles the readers' kernels, ``direction``, ``project`` and
the direction groups' ``group_directions`` (which shares its solver kernels, in the
same types, with ``direction``).
When the command is done with ``start`` it tells the helper to go on with ``advance``
and the rest of the sweep's kernels (then the kernels that pack finished weights), and
reads (its reader loaded from the cache) and compiles train_chunk, which finds them
ready: it reaches them after compiling numpy's allocation helpers, the lane set-up and
the initialiser, when the helper has saved them (measured margins: 0.7 to 2.6 s on an
idle machine).  (The helper cannot take ``start`` too: the command
reaches it too soon.)  The timeline is in docs/design.md, "The first run";
``tests/test_precompile.py`` checks that these are the exact specialisations
train_chunk loads, so a change of the kernels' signatures that this module does not
follow fails there instead of silently compiling unused code.

One function, one process.  Numba's cache keeps one index file per function, which a
save reads, extends and rewrites without a lock: two processes saving *different*
specialisations of the same function at the same moment can leave an index entry
that points at the other one's machine code (``IndexDataCacheFile.save``; numba issue
10128 reports a race of this kind between processes).  Saving
the *same* specialisation twice is harmless (the same entry, equivalent code).  So the
helper compiles nothing that the command compiles at the same time for other types:
before the go only what shares no function with ``start`` (the readers' and packing
kernels share none with the training kernels; ``direction`` and ``project`` none with
``start``);
``advance`` shares small objective functions with ``start`` (``_active_set``, in
another specialisation), hence the go: the helper compiles it only after the command
has compiled and saved ``start``, and nothing after a failure.  The rest of
train_chunk (lane set-up, initialiser, weight collection) shares no function with what
the helper compiles (checked by the tests).

Safety.  Nothing here is needed for correctness: the command never waits for the
helper before training (if the helper is late, the command compiles a kernel itself,
as it would without it), the helper only ever adds entries to numba's cache (written
atomically by numba, keyed by the exact types), prints nothing, and stops when the
command is done (it normally is long before; otherwise it is terminated, never in
the middle of writing a cache file).  It starts only when it can help: a command that
trains on this machine (not through Dask: workers compile in their own processes),
numba's cache for train_chunk absent (a cold cache, detected by one ``stat``), the
cache directory writable, two or more CPUs, and ``HEADSTART_PRECOMPILE`` not ``0``.
It runs at the command's priority: it does the command's own work.  (``nice``d, it
was starved by any other busy process and the command compiled everything itself.)
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

from .._threads import usable_cores
from .cache_writes import CacheWriteGuard

log = logging.getLogger("headstart.compile")

ENV_SWITCH = "HEADSTART_PRECOMPILE"
#: kernels compiled by the command before reading, and by the helper before and after
#: the command's go (besides the readers' and the packing kernels)
COMMAND_SHARE = ("start",)
HELPER_BEFORE_GO = ("direction", "project")
HELPER_AFTER_GO = ("advance", "_touch", "lanes_scores_rows", "scores", "remainder", "unproject", "group_directions")
#: what the command tells the helper once its own share is compiled
GO, STOP = "go", "stop"
#: seconds ``Helper.stop`` waits for the helper to end after SIGTERM before killing it
STOP_TIMEOUT = 10.0


def cache_is_cold() -> bool:
    """True when numba's cache holds no train_chunk at all and can be written.

    A cache that holds train_chunk for other types (another loss) counts as warm: the
    helper is for the very first run, and a false 'warm' only costs its speed-up."""
    try:
        from ..training.kernel import train_chunk

        cache = train_chunk._cache
        index = cache._cache_file._index_path
        folder = cache._cache_path
    except Exception:   # noqa: BLE001 - numba internals moved: no helper, nothing breaks
        return False
    if os.path.exists(index):
        return False
    parent = folder
    while not os.path.isdir(parent):
        up = os.path.dirname(parent)
        if up == parent:
            return False
        parent = up
    return os.access(parent, os.W_OK | os.X_OK)


def wanted() -> bool:
    """Whether a helper can help this run (see the module doc)."""
    if os.environ.get(ENV_SWITCH, "1").strip() == "0":
        return False
    return usable_cores() >= 2 and cache_is_cold()


class Helper:
    """The helper process, as seen from the command."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.t0 = time.perf_counter()

    def _say(self, line: str) -> None:
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):   # the helper has gone: the command compiles everything itself
            pass

    def go(self, ok: bool) -> None:
        """The command's own share is compiled (``ok``) or failed: the helper may now
        compile the rest of its share (or must not: see the module doc, 'One function,
        one process')."""
        self._say(GO if ok else STOP)
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def stop(self) -> None:
        """End the helper now if it still runs (it is normally done long before the
        command): SIGTERM, which it honours at once unless it is writing to numba's
        cache, then only after that write (see ``_exit_safely``)."""
        p = self.proc
        if not p.stdin.closed:
            self.go(False)
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log.debug("kernel pre-compiling helper ended with status %s after %.1f s", p.returncode,
                  time.perf_counter() - self.t0)


def start(params) -> Helper | None:
    """Start the helper for ``params`` (a TrainParams) when it can help, else None."""
    if not wanted():
        return None
    try:
        proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as e:
        log.debug("no kernel pre-compiling helper: %s", e)
        return None
    helper = Helper(proc)
    helper._say(json.dumps(params.to_dict()))
    return helper


def _kernel_args(params):
    """The kernels compiled ahead and the exact arguments train_chunk calls them with
    (on a tiny problem): the run's Problem and Settings, a lane's view of the lane
    workspace as :func:`headstart.training.kernel.lane` makes it (rows of the C-ordered
    lane arrays), a label's records (rows of the Fortran-ordered record arrays), the
    sweep buffer (``newton.DELTA_DTYPE``, features x lanes, C order) and a lane's column
    of it, int64 / float64 scalars."""
    import numpy as np
    import scipy.sparse as sp

    from ..objective import erm
    from ..solver import newton
    from ..training import chunks, kernel, trainer

    X = sp.csr_matrix((np.ones(3, dtype=np.float32), np.array([0, 1, 1], dtype=np.int32),
                       np.array([0, 2, 3], dtype=np.int64)), shape=(2, 2))
    P, _ = kernel.prepare_problem(X, params)
    S = newton.settings(params)
    WS, OS = trainer.make_workspace(2, 2, kernel.LANES)
    W = type(WS)(*(a[0] for a in WS))
    O = type(OS)(*(a[0] for a in OS))
    rf, ra, rs, rt, rc = chunks.make_records(2, 2)
    V = np.zeros((W.w.size, kernel.LANES), dtype=newton.DELTA_DTYPE)
    col = V[:, 0]
    f, i = 0.0, 0
    lanes = lambda dtype: np.zeros(kernel.LANES, dtype=dtype)  # noqa: E731
    group = (P, S, WS, OS, kernel.make_group(2, 2, kernel.LANES), np.int64(0), i, lanes(np.int64),
             lanes(np.float64), lanes(np.float64))
    return {"start": (newton.start, (P, O, W, f, rf[0], ra[0])),
            "direction": (newton.direction, (P, S, O, W)),
            "advance": (newton.advance, (P, S, O, W, i, f, f, f, i, f, f, rf[0], ra[0], rs[0], rc[0])),
            "project": (erm.project, (O, W.w, W.s, f, col)),
            "_touch": (kernel._touch, (V, np.zeros(1))),
            "lanes_scores_rows": (kernel.lanes_scores_rows, (P, V, OS.xs, True, i, i)),
            "scores": (erm.scores, (P, np.ascontiguousarray(col), OS.xs[0])),
            "remainder": (erm.remainder, (P, O, W.w, W.s, f, col, np.zeros(W.w.size))),
            "unproject": (erm.unproject, (O, col)),
            "group_directions": (kernel.group_directions, group)}


def compile_kernels(params, names) -> None:
    """Compile (or load) the named kernels for this run's types without running them."""
    import numba

    kernels = _kernel_args(params)
    for name in names:
        kernel, args = kernels[name]
        # train_chunk calls the variant for compiled callers (headstart._compile.njit)
        getattr(kernel, "nested", kernel).compile(tuple(numba.typeof(a) for a in args))


def compile_in_command(params, helper: Helper) -> float:
    """The command's own share, before it reads the data: the solver's start phase;
    then the helper may go on.  Returns the seconds it took.  Best effort: a failure
    here only means train_chunk compiles it later (and the helper stops)."""
    t0 = time.perf_counter()
    log.info("first run: compiling headstart's kernels, part of them in a helper process (numba caches "
             "them) ...")
    ok = True
    try:
        compile_kernels(params, COMMAND_SHARE)
    except Exception as e:  # noqa: BLE001 - never fail a run over a head start
        log.debug("compiling %s ahead failed: %s", COMMAND_SHARE, e)
        ok = False
    helper.go(ok)
    return time.perf_counter() - t0


#: the helper's scratch folders while they exist: a SIGTERM (``_exit_safely``) ends the
#: helper with ``os._exit``, which runs no ``finally`` and no context manager's exit, so
#: the handler removes these itself (a first run stopped while the helper compiled the
#: reader left a ``headstart-precompile-*`` folder in the temporary directory)
_SCRATCH: list[str] = []


def _remove_scratch() -> None:
    import shutil

    while _SCRATCH:
        shutil.rmtree(_SCRATCH.pop(), ignore_errors=True)


def _compile_reader() -> None:
    """The readers' kernels, on a tiny XMC file (libsvm files use the same kernels)."""
    import tempfile

    from ..io import read_xmc

    d = tempfile.mkdtemp(prefix="headstart-precompile-")
    _SCRATCH.append(d)
    try:
        p = os.path.join(d, "tiny.txt")
        with open(p, "w") as fh:
            fh.write("2 3 2\n1,0 2:1 0:0.5\n1 1:2\n")
        read_xmc(p)
    finally:
        _remove_scratch()


def _compile_packing() -> None:
    """The packing kernels, on a chunk's weights built as the trainer builds them."""
    import numpy as np
    import scipy.sparse as sp

    from ..training.locality import renumber_rows
    from ..training.packed import PackedRows
    from ..training.sharing import gather_rows

    W = sp.csr_matrix((np.ones(2, dtype=np.float32), np.array([0, 1], dtype=np.int32),
                       np.array([0, 1, 2], dtype=np.int64)), shape=(2, 2))
    PackedRows.pack(W).to_csr()
    # a chunk's rows over the original features, and those of the labels that share one solve
    # (the kernels' output types: int64 offsets, int32 indices, float32 values)
    indptr = np.array([0, 1, 2], dtype=np.int64)
    indices = np.array([0, 1], dtype=np.int32)
    data = np.ones(2, dtype=np.float32)
    renumber_rows(np.array([1, 0], dtype=np.int32), indptr, indices, data, 2, indices, data)
    gather_rows(indptr, indices, data, np.array([1, 0], dtype=np.int64), indptr, indices.copy(), data.copy())


def compile_in_helper(params, wait_for_go=lambda: True) -> None:
    """The helper's share, each part in time for the command (module doc): before the
    go, what shares no function with the command's ``start`` (the readers' kernels,
    ``direction``, ``project``); after it, ``advance`` and the sweep's kernels; the
    packing kernels last (with or without the go: they share nothing)."""
    _compile_reader()
    compile_kernels(params, HELPER_BEFORE_GO)
    if wait_for_go():
        compile_kernels(params, HELPER_AFTER_GO)
    _compile_packing()      # needed last: once training runs


def _exit_safely() -> None:
    """In the helper: exit at once on SIGTERM, except while numba writes a cache file
    (its temporary file would stay behind): then right after that write
    (:mod:`.cache_writes`).  SIGINT (a Ctrl-C in the terminal reaches the whole process
    group) is left to the command, which then stops the helper the same way."""
    import signal

    guard = CacheWriteGuard()

    def leave():
        _remove_scratch()
        os._exit(1)

    def on_term(signum, frame):
        if not guard.defer(leave):
            leave()

    guard.install()         # this helper process only; it compiles in its main thread
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _main() -> int:
    _exit_safely()
    from ..params import TrainParams

    params = TrainParams.from_dict(json.loads(sys.stdin.readline()))
    compile_in_helper(params, lambda: sys.stdin.readline().strip() == GO)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
