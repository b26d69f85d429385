"""Signals held while numba writes a compiled kernel into its on-disk cache.

numba writes a cache entry to a temporary file and renames it into place, and it
removes that temporary file only when the write fails with an ``Exception``: a
``KeyboardInterrupt`` (Ctrl-C) or an ``os._exit`` (the precompiling helper's SIGTERM)
in the middle leaves ``*.nbc.tmp.*`` behind in the user's cache (helper-88 saw it in
2 of 3 interrupted first runs).  Both the command line (:mod:`.main`) and the helper
process (:mod:`.precompile`) therefore let a signal handler *defer* its action while
the main thread writes, and run that action as soon as the write ends.  This module is
the one place that knows numba's ``Cache.save_overload``; its callers only say what to
do (raise the interrupt, leave the process).

Signal handlers run in the main thread only, so only the main thread's writes are
counted: a write in a training thread neither delays nor triggers anything here.
"""

from __future__ import annotations

from typing import Callable

from .._threads import HELD, defer_signal, signals_held


class CacheWriteGuard:
    """Makes the main thread's cache writes sections during which a signal handler's
    action is deferred -- the same held sections as the creation of headstart's own
    temporary files (:func:`headstart._threads.signals_held`): at most one deferred
    action, run (once) when the outermost section ends.  ``install`` wraps numba's writer
    and returns the original, which ``uninstall`` puts back (the command line may run
    inside another program, which must get numba back as it was)."""

    def __init__(self) -> None:
        self._original = None

    @property
    def depth(self) -> int:
        return HELD.depth

    @property
    def pending(self) -> Callable[[], None] | None:
        return HELD.pending

    def reset(self) -> None:
        HELD.depth, HELD.pending = 0, None

    def defer(self, action: Callable[[], None]) -> bool:
        """From a signal handler: True if a write (or another held section) is in
        progress and ``action`` will run when it ends (the handler must then return at
        once), False if the handler should act now."""
        return defer_signal(action)

    def install(self):
        from numba.core import caching

        save = caching.Cache.save_overload

        def save_whole(cache, sig, data):
            with signals_held():      # (in the main thread only)
                return save(cache, sig, data)

        caching.Cache.save_overload = save_whole
        self._original = save
        return save

    def uninstall(self) -> None:
        if self._original is not None:
            from numba.core import caching

            caching.Cache.save_overload = self._original
            self._original = None
