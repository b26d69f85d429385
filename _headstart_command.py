"""The ``headstart`` command's entry point (pyproject.toml, ``[project.scripts]``).

It sits beside the package, not in it: the script pip writes imports the entry point's
module before it calls anything, and importing any module of ``headstart`` first runs
the package's ``__init__`` with numba, numpy and scipy (~0.6 s), before
:func:`headstart.cli.main.main` handles Ctrl-C -- an interrupt then printed a Python
traceback.  Here the package is imported inside :func:`main`, so a Ctrl-C at any moment
of the start-up ends the command as its other interrupts do: one line, exit code 130.
``python -m headstart`` is guarded in the package itself (``headstart/__init__.py``).
"""

import sys


def main() -> int:
    try:
        from headstart import _done_with_interrupts
        from headstart.cli.main import main as command
    except KeyboardInterrupt:
        return _interrupted()
    try:
        code = command()
    except KeyboardInterrupt:     # before command() installed its handler or after it removed it
        return _interrupted()
    finally:
        _done_with_interrupts()   # the command has ended: a Ctrl-C now must not change its exit code
    if code in (130, 143):        # stopped by Ctrl-C / SIGTERM: no teardown (headstart._leave_stopped)
        from headstart import _leave_stopped

        _leave_stopped(code)
    return code


def _interrupted() -> int:
    # headstart.cli.main's words and exit code for a run stopped by Ctrl-C
    print("headstart: error: interrupted", file=sys.stderr, flush=True)
    return 130
