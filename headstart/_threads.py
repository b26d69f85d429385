"""Waiting for thread-pool work so that Ctrl-C and failures stop it promptly."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Callable, Iterable


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
