"""Entry point of the ``headstart`` command: parser, logging, error reporting, exit codes.

Exit codes: 0 success, 2 bad usage or bad input (argparse errors and every
:class:`~headstart.errors.HeadstartError`), 1 any other failure, 3 a training run whose
``--timeout`` left labels untrained (resume it; :data:`common.EXIT_INCOMPLETE`), 130 / 143 a run
stopped by SIGINT (Ctrl-C) / SIGTERM.  Errors are printed as
one or two lines; ``-v`` adds the Python traceback.

A subcommand is a module of this package with ``NAME``, ``HELP``, ``DESCRIPTION``,
``add_arguments(parser)`` and ``run(args) -> int``; add its module name to
:data:`COMMANDS` to register it.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
import traceback
import warnings

from .._threads import INTERRUPTS, check_interrupt, defer_signal
from .cache_writes import CacheWriteGuard

#: subcommand modules, in the order ``--help`` lists them
COMMANDS = ["train", "predict", "evaluate", "cv", "thresholds", "costs", "tree", "info", "convert", "merge", "experiment", "shortlist", "shortlist_train",
            "shortlist_predict", "import_dismec", "export_dismec", "compile_ahead"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

log = logging.getLogger("headstart.cli")


#: The help texts cite docs/NAME.md for the details; a wheel installs no docs, so a user
#: of an installed headstart is told where those files are.
DOCS_WHERE = "docs/*.md: files of headstart's source distribution (sdist) and repository, not installed with it."


class _Parser(argparse.ArgumentParser):
    """Usage errors in two lines (the full usage of 'train' would fill a screen)."""

    def format_help(self) -> str:
        text = super().format_help()
        # said under any help that cites a doc file (descriptions, option groups, the
        # command list), checked here so that a new citation gets it too
        return text + f"\n{DOCS_WHERE}\n" if "docs/" in text else text

    def error(self, message: str):  # type: ignore[override]
        for theirs, here in DISMEC_VALUES.items():
            if f"invalid choice: '{theirs}'" in message:
                message += f"\n  {theirs} is DiSMEC++'s name: here {here}"
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n(see '{self.prog} --help')\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def _common_options(top: bool) -> argparse.ArgumentParser:
    """-v/-q, accepted before and after the subcommand."""
    p = argparse.ArgumentParser(add_help=False)
    d = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("-v", "--verbose", action="count", help="log more (-vv: debug); show tracebacks",
                   **({"default": 0} if top else d))
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary lines",
                   **({"default": False} if top else d))
    return p


#: DiSMEC++'s option names (its trainer, src/train.cpp) -> headstart's (README table)
DISMEC_OPTIONS = {
    "--init-mode": "--init (msi is aop here, ova-primal is ovap)", "--weighting-mode": "--weighting",
    "--weighting-pos-file": "--weights-pos-file", "--weighting-neg-file": "--weights-neg-file",
    "--msi-pos": "--s", "--msi-neg": "--t", "--bias-init-value": "--bias-init", "--reg-bias": "--regularize-bias",
    "--weight-culling": "--prune", "--max-steps": "--max-iter", "--alpha-pcg": "--pcg-alpha",
    "--line-search-eta": "--ls-eta", "--line-search-max-steps": "--ls-max-steps",
    "--augment-for-bias": "--bias VALUE", "--normalize-instances": "--normalize",
    "--hash-features": "--hash-buckets B", "--hash-repeat": "--hash-functions", "--continue": "--resume",
    "--batch-size": "--shard-size", "--reorder-features": "(always on)", "--save-sparse-txt": "(always sparse)",
    "--record-stats": "--stats FILE", "--stats-file": "--stats FILE",
    "--save-dense-txt": "'headstart export-dismec MODEL -o META --format dense-txt'",
    "--save-dense-npy": "'headstart export-dismec MODEL -o META --format dense-npy'",
    "--save-precision": "(models are npz shards; export-dismec writes DiSMEC++'s text)",
    "--topk": "-k K (predict; -k L scores every label)",
}


#: LIBLINEAR's train options that are not headstart's (its -C, -v and -q are headstart
#: options of other meanings or the same one)
LIBLINEAR_OPTIONS = ("-s", "-c", "-e", "-B", "-R", "-p", "-n", "-m")


#: DiSMEC++'s values of options headstart names otherwise
DISMEC_VALUES = {"msi": "aop", "ova-primal": "ovap", "from-file": "file"}


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """'unrecognized arguments' for the subcommand's ``parser``, with what each unknown
    option probably meant: DiSMEC++'s name for it, or a close option of this command."""
    import difflib

    known = [o for a in parser._actions for o in a.option_strings]
    hints = []
    liblinear: list[str] = []
    for i, x in enumerate(extras):
        opt = x.split("=", 1)[0]
        if not opt.startswith("-"):
            # (a number after another unknown option is that option's value: '-c 4')
            after_option = i > 0 and extras[i - 1].startswith("-") and "=" not in extras[i - 1]
            if x.isdigit() and "-v" in known and not after_option \
                    and not any("the number after -v" in h for h in hints):
                # helper-51: LIBLINEAR's '-v 5' left '5' over
                hints.append(f"{x}: the number after -v? -v is --verbose here; LIBLINEAR's -v N (cross-validation) "
                             "is 'headstart cv --folds N'")
            continue
        if opt in DISMEC_OPTIONS:
            hints.append(f"{opt} is DiSMEC++'s: here {DISMEC_OPTIONS[opt]}")
        elif "--liblinear" in known and (opt in LIBLINEAR_OPTIONS or re.match(r"^-w[+-]?\d+$", opt)):
            # (before the close matches: -s is not --s, aop's score of the mean positive)
            liblinear.append(opt)
        else:
            close = difflib.get_close_matches(opt, known, n=2, cutoff=0.75)
            if close:
                hints.append(f"{opt}: did you mean {' or '.join(close)}?")
    if liblinear:
        hints.append(f"{', '.join(liblinear)}: LIBLINEAR's; give its options as one string, "
                     "--liblinear=\"-s 2 -c 1 ...\" (README, 'Coming from LIBLINEAR')")
    return f"unrecognized arguments: {' '.join(extras)}" + "".join(f"\n  {h}" for h in hints)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser.  With ``argv``, only the subcommands named in it get
    their options: some options' choices come from the modules behind them (the
    shortlist backends, the tuning and experiment defaults), whose imports made every
    command's process ~2 MB larger (debian-deps' `train` peak is ~250 MB, issue 12);
    ``--help`` still lists every command, and each one named has all its options."""
    from .. import __version__

    parser = _Parser(
        prog="headstart", formatter_class=_Formatter, parents=[_common_options(True)],
        description="One-vs-all linear classifiers for extreme multi-label classification, "
                    "trained with LIBLINEAR's Newton method from the average-of-positives "
                    "initialisation (Schultheis & Babbar).")
    parser.add_argument("--version", action="version", version=f"headstart {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    for name in COMMANDS:
        mod = importlib.import_module(f"{__package__}.{name}")
        sp = sub.add_parser(mod.NAME, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
                            formatter_class=_Formatter, parents=[_common_options(False)])
        if argv is None or mod.NAME in argv:
            mod.add_arguments(sp)
        sp.set_defaults(_run=mod.run, _parser=sp)
    return parser


class _OnceFilter(logging.Filter):
    """Shows each warning text once per command: a command that reads its data twice
    (evaluate --threshold: the top-k pass, then the decisions pass) met the same
    problems of the file twice and said them twice."""

    def __init__(self) -> None:
        super().__init__()
        self._said: set[tuple[int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.levelno, record.getMessage())
        if key in self._said:
            return False
        self._said.add(key)
        return True


def _setup_logging(verbose: int, quiet: bool = False) -> None:
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("headstart: %(levelname)s: %(message)s"))
    handler.addFilter(_OnceFilter())
    root = logging.getLogger("headstart")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    # "compiling headstart's training kernels ... (first run only)" is shown unless -q
    # (and its debug lines with -vv)
    logging.getLogger("headstart.compile").setLevel(logging.WARNING if quiet else min(level, logging.INFO))


def _error(args: argparse.Namespace | None, text: str) -> None:
    cmd = getattr(args, "command", None)
    prog = f"headstart {cmd}" if cmd else "headstart"
    print(f"{prog}: error: {text}", file=sys.stderr, flush=True)


def _describe_os_error(e: OSError) -> str:
    where = f"{e.filename}: " if getattr(e, "filename", None) else ""
    return f"{where}{e.strerror or e}"


def _quiet_compiler_warnings() -> None:
    """Numba's compile-time performance notes mean nothing to a user of the command line."""
    try:
        from numba.core.errors import NumbaWarning
    except ImportError:  # pragma: no cover
        return
    warnings.filterwarnings("ignore", category=NumbaWarning)


def _interrupt_of(e: BaseException) -> BaseException | None:
    """The KeyboardInterrupt (Ctrl-C, or SIGTERM's Terminated) that ``e`` is or was caused
    by, if any."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _by_interrupt(e: BaseException) -> bool:
    """Whether an error ended the run because of a Ctrl-C or SIGTERM: caused by one, or
    met after this command's SIGINT handler saw one that was swallowed on the way."""
    return _interrupt_of(e) is not None or INTERRUPTS.seen


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch scheduler's or ``timeout``'s stop): raised in the main thread like
    Ctrl-C, so that the same clean-up runs (workers stop, temporary files and model
    directories are removed, finished shards are kept) -- by default the process would
    die at once and leave them behind."""


def _raise_terminated() -> None:
    raise Terminated()


def _on_sigterm(signum, frame):
    if defer_signal(_raise_terminated):     # creating a temporary file (_threads.signals_held)
        return
    raise Terminated()


#: the exceptions that stopped runs of this process, kept: their frames may hold the
#: objects of a compile that Ctrl-C interrupted, which LLVM may not have left in a state
#: that freeing them can survive (headstart._leave_stopped)
_STOPS: list[BaseException] = []


def _stopped(args: argparse.Namespace | None, e: BaseException) -> int:
    """Say how the run was stopped (Ctrl-C or SIGTERM, also when it arrived inside a
    kernel or the compiler and came out as another error); the exit code of each."""
    _STOPS.append(e)
    term = isinstance(_interrupt_of(e), Terminated)
    _error(args, "terminated" if term else "interrupted")
    return 143 if term else 130


#: the main thread's numba cache writes: a Ctrl-C that arrives during one is raised when
#: the write ends (numba would leave its temporary file behind, see cli/cache_writes.py)
CACHE_WRITES = CacheWriteGuard()


def _raise_interrupt() -> None:
    raise KeyboardInterrupt


def _on_sigint(signum, frame):
    # remembered before raising: numba's compiler may swallow the exception (_threads)
    INTERRUPTS.seen = True
    if defer_signal(_raise_interrupt):     # a cache write or a temporary file's creation
        return
    raise KeyboardInterrupt


class _QuietSwallowedInterrupts:
    """sys.unraisablehook while the command runs: a Ctrl-C that lands in one of
    llvmlite's ctypes callbacks (numba compiling a first run's kernels) is swallowed
    there, and Python printed "Exception ignored on calling ctypes callback function"
    with a traceback above the command's one-line "interrupted".  The SIGINT handler
    has remembered it (INTERRUPTS), so that KeyboardInterrupt is dropped silently;
    anything else goes to the hook there was."""

    def __init__(self, previous) -> None:
        self.previous = previous

    def __call__(self, unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and INTERRUPTS.seen:
            return
        self.previous(unraisable)


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    previous = previous_int = previous_hook = None
    INTERRUPTS.seen = False
    CACHE_WRITES.reset()
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous_int = signal.signal(signal.SIGINT, _on_sigint)
            previous_hook = sys.unraisablehook
            sys.unraisablehook = _QuietSwallowedInterrupts(previous_hook)
    try:
        if previous_int is not None:
            CACHE_WRITES.install()
        return _main(argv)
    except KeyboardInterrupt as e:   # before the command started: the imports of a slow start
        return _stopped(None, e)
    finally:
        CACHE_WRITES.uninstall()
        if previous_hook is not None:
            sys.unraisablehook = previous_hook
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if previous_int is not None:
            signal.signal(signal.SIGINT, previous_int)


def _memory_advice(args: argparse.Namespace) -> str:
    """What the command that ran out of memory can do about it: its own options only
    (cv, thresholds, costs, tree, ... were told to train a label range with
    --first-label/--num-labels, which they do not have)."""
    command = getattr(args, "command", None)
    if command in ("predict", "evaluate", "shortlist-predict"):
        return "predict with a smaller --chunk-rows or --max-memory"
    if command in ("train", "shortlist-train"):
        return "train a label range with --first-label/--num-labels, or fewer --threads"
    if command == "experiment":
        return "compare a label range with --labels A:B, or fewer --threads"
    return "fewer --threads" if command in ("cv", "thresholds", "costs", "tree", "shortlist") else ""


def _main(argv: list[str] | None) -> int:
    parser = build_parser(sys.argv[1:] if argv is None else list(argv))
    args, extras = parser.parse_known_args(argv)  # exits 2 on bad usage
    if extras:      # reported by the subcommand that did not know them (its usage, its --help)
        getattr(args, "_parser", parser).error(unrecognized(getattr(args, "_parser", parser), extras))
    verbose = getattr(args, "verbose", 0) or 0
    _setup_logging(verbose, bool(getattr(args, "quiet", False)))
    if verbose < 2:
        _quiet_compiler_warnings()
    from ..errors import HeadstartError

    try:
        code = int(args._run(args) or 0)
        check_interrupt()   # a Ctrl-C swallowed on the way: not a success (helper-52)
        sys.stdout.flush()
        return code
    except BrokenPipeError:  # e.g. `headstart evaluate ... | head -2`: not an error worth a message
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except HeadstartError as e:
        if verbose:
            traceback.print_exc()
        _error(args, str(e))
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        return _stopped(args, e)
    except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError) as e:
        if _by_interrupt(e):     # met cleaning up after Ctrl-C / SIGTERM (helper-110)
            return _stopped(args, e)
        if verbose:
            traceback.print_exc()
        _error(args, _describe_os_error(e))
        return EXIT_USAGE
    except MemoryError:
        if verbose:
            traceback.print_exc()
        advice = _memory_advice(args)
        _error(args, "out of memory" + (f" ({advice})" if advice else ""))
        return EXIT_FAILURE
    except OSError as e:
        if _by_interrupt(e):
            return _stopped(args, e)
        if verbose:
            traceback.print_exc()
        _error(args, _describe_os_error(e))
        return EXIT_FAILURE
    except Exception as e:  # a bug: say so briefly, the traceback is one -v away
        if _by_interrupt(e):
            # Ctrl-C inside a numba kernel's object-mode block (the solver's clock) comes
            # out of the kernel as a SystemError caused by the KeyboardInterrupt (with one
            # training thread the kernel runs in this, the signal-receiving, thread); one
            # inside numba's compiler, swallowed by an llvmlite callback, can come out as
            # any error of the compile left half done (stop 87: "this is a bug in
            # headstart" after a Ctrl-C on a first run): the handler saw it all the same
            return _stopped(args, e)
        if verbose:
            traceback.print_exc()
        _error(args, f"internal error: {type(e).__name__}: {e}")
        print("(this is a bug in headstart; run again with -v for the traceback)", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
