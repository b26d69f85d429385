"""headstart: fast one-vs-all training for extreme multi-label classification.

DiSMEC-style one-vs-all linear models trained with LIBLINEAR's Newton method, started
from the average-of-positives initialisation of Schultheis & Babbar, "Speeding-up
One-vs-All Training for Extreme Classification via Smart Initialization".
"""

import sys as _sys


def _started_by_dash_m() -> bool:
    """Whether this import is ``python -m headstart`` (or ``-m headstart.MODULE``)
    locating the module it runs: Python keeps ``sys.argv[0]`` at ``"-m"`` until then,
    and ``sys.orig_argv`` ends with the module's name (``-m NAME`` or ``-mNAME``) and
    the arguments that ``sys.argv`` holds after it."""
    orig = getattr(_sys, "orig_argv", [])
    if _sys.argv[:1] != ["-m"] or len(orig) < len(_sys.argv):
        return False
    name = orig[len(orig) - len(_sys.argv)]
    name = name[2:] if name.startswith("-m") else name
    return name == "headstart" or name.startswith("headstart.")


def _interrupted_start() -> SystemExit:
    """The end of a command that Ctrl-C stopped before :func:`headstart.cli.main.main`
    handles it: said as that says it (one line, exit code 130), not as a traceback."""
    print("headstart: error: interrupted", file=_sys.stderr, flush=True)
    return SystemExit(130)


def _done_with_interrupts() -> None:
    """Ignore Ctrl-C for the rest of the process: the command-line entry points call it
    once the command has ended (its work committed and said, or its error said).  A
    Ctrl-C in the interpreter's teardown that follows -- freeing a large model's arrays,
    the threads' and atexit's clean-up -- otherwise ended the process by the signal
    (exit -2, nothing said: helper-120, 6 of ~40 runs on a 2M-label model) or printed a
    traceback from an atexit callback, and a job script checking the exit code threw a
    good model away."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _leave_stopped(code: int) -> None:
    """End the process of a command that Ctrl-C or SIGTERM stopped (exit code 130 / 143)
    without the interpreter's teardown.  Its clean-up has run in the command (workers
    stopped, temporary files and model directories removed, finished shards kept) and the
    stop is said; but a Ctrl-C inside numba's compiler may leave LLVM's state half-built
    (an exception swallowed in one of llvmlite's ctypes callbacks, or raised between a
    call into LLVM and llvmlite's note of what it did), and once, on a loaded CI machine,
    the process crashed (SIGSEGV, exit -11) after it had printed "interrupted" -- in the
    teardown or in freeing the interrupted compile's objects (not reproduced since; see
    cli.main._stopped, which keeps the latter alive).  atexit's callbacks still run
    (logging's flush, a temporary numba cache's removal, multiprocessing's children);
    then the process ends with the stop's exit code."""
    import atexit
    import os

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (_sys.stdout, _sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        os._exit(code)


try:
    from . import _compile  # noqa: F401  (numba settings, before any kernel compiles)
    from .errors import DataFormatError, HeadstartError, ModelFormatError, ParameterError
    from .estimator import OvAClassifier, load, precision_at_k_scorer
    from .params import TrainParams
except KeyboardInterrupt:
    # `python -m headstart` imports the package (numba, numpy, scipy: ~0.6 s) before its
    # __main__ can catch anything: a Ctrl-C now printed a traceback.  Any other importer
    # gets the interrupt.
    if _started_by_dash_m():
        raise _interrupted_start() from None
    raise

# The package's one version: pyproject.toml reads it (tool.setuptools.dynamic) as a
# literal, without importing headstart, so it stays a plain string.
__version__ = "0.1.0"


def __getattr__(name):
    # readers are imported lazily so that `import headstart` stays light
    if name in ("read_xmc", "read_libsvm", "read_slice", "read_data", "write_xmc"):
        from . import io

        return getattr(io, name)
    raise AttributeError(name)


__all__ = ["OvAClassifier", "TrainParams", "load", "precision_at_k_scorer", "read_xmc", "read_libsvm", "read_slice", "read_data",
           "write_xmc", "DataFormatError", "HeadstartError", "ModelFormatError", "ParameterError"]
