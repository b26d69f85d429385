"""Hooks of tests/conftest.py: a test that took its xdist worker down is not run again.

``make test`` runs ``--dist loadfile`` with pytest-timeout's "thread" method: a test that
hangs past the timeout has the stacks dumped and its worker process ended (``os._exit``),
and xdist starts another worker.  But xdist's file scheduler hands the crashed file's
unfinished tests -- the crashed one included -- to the next worker, so a test that hangs
every time hung again there, up to ``--max-worker-restart`` times (4 per worker: 9 runs
of a 15-minute timeout on 2 cores, past CI's 90 minutes; measured, helper-76).  So each
test leaves a mark in a directory the workers of one run share while it runs; a test
that finds its mark was running when its worker died, and is skipped, saying so (its
crash is reported as a failure by xdist).  The file's other tests run on the new worker,
in a fresh process -- free of whatever the hung test's process had left behind.
Outside xdist nothing is marked.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import pytest

_CRASHED = pytest.StashKey[bool]()


def _marks(config: pytest.Config) -> Path | None:
    """The run's mark directory (shared by its xdist workers), or None outside xdist."""
    uid = getattr(config, "workerinput", {}).get("testrunuid")
    if not uid:
        return None
    return Path(tempfile.gettempdir()) / f"headstart-pytest-running-{uid}"


def _mark(item: pytest.Item) -> Path | None:
    marks = _marks(item.config)
    return None if marks is None else marks / hashlib.sha256(item.nodeid.encode()).hexdigest()[:32]


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (an ended worker that xdist has not reaped yet is a
    zombie: it still answers kill(pid, 0))."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:     # (another user's process: it exists)
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:     # no /proc (not Linux), or gone just now
        return not Path("/proc/self").exists()     # (no /proc: not Linux; kill said it exists)
    return stat[stat.rindex(")") + 2:][:1] not in ("Z", "X")


def _claim(mark: Path, item_id: str) -> str:
    """"mine" (marked now), "crashed" (marked by a worker process that is gone) or "other"
    (marked by a live one: the same test on another worker, as ``--dist each`` runs it)."""
    try:
        pid = int(mark.read_text().split("\n")[1])
    except FileNotFoundError:
        pid = None
    except (OSError, ValueError, IndexError):      # half written: its writer is alive
        return "other"
    if pid is not None:
        return "other" if _alive(pid) else "crashed"
    for _ in range(2):  # (another worker's sessionfinish may remove the empty directory in between)
        mark.parent.mkdir(exist_ok=True)
        try:
            mark.write_text(f"{item_id}\n{os.getpid()}\n")
            return "mine"
        except FileNotFoundError:
            continue
    return "other"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    mark = _mark(item)
    claim = _claim(mark, item.nodeid) if mark is not None else "other"
    if claim == "crashed":
        item.stash[_CRASHED] = True
    try:
        yield
    finally:
        if claim != "other":
            mark.unlink(missing_ok=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.stash.get(_CRASHED, False):
        pytest.skip("this test took its worker process down earlier in this run (a timeout or a crash: see its "
                    "failure report); not run again")


def pytest_sessionfinish(session):
    marks = _marks(session.config)
    if marks is not None:
        try:
            marks.rmdir()      # only when empty: a crashed test's mark is still needed by the next worker
        except OSError:
            pass
