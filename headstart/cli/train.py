"""``headstart train TRAIN -o MODEL_DIR [options]``: train one-vs-all classifiers."""

from __future__ import annotations

import argparse
import logging
import os
import time

from ..params import method_of
from . import common

NAME = "train"
HELP = "train one-vs-all linear classifiers (all labels or a label range)"
DESCRIPTION = """\
Train one binary linear classifier per label with LIBLINEAR's Newton method, started
from the chosen initialisation (default: aop, the average of positives).  The model
directory is written atomically: it appears complete or not at all (with --shard-size,
--scheduler or --dask-workers it is written shard by shard instead, resumable with
--resume, and a model already in the directory is not replaced)."""

log = logging.getLogger("headstart.cli.train")

STATS_SUFFIXES = (".csv", ".jsonl", ".json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("train", metavar="TRAIN", nargs="?", help="training data file")
    p.add_argument("-o", "--output", metavar="MODEL_DIR", help="model directory to write")
    g = p.add_argument_group("labels and output")
    g.add_argument("--first-label", type=common._number(int), default=0, metavar="A",
                   help="train labels A, A+1, ... only (default: 0)")
    g.add_argument("--num-labels", type=common._number(int), default=None, metavar="N",
                   help="number of labels to train from --first-label (default: all the rest)")
    g.add_argument("--stats", metavar="FILE", help="write per-label training statistics to FILE, in the form its "
                   "name ends with: .csv one row per label; .json a list of JSON objects, one per label with its "
                   "per-iteration trajectory; .jsonl those objects one per line")
    g.add_argument("--shard-size", type=common._number(int), default=None, metavar="N",
                   help="at most N labels per shard file of the model, each written as soon as it is "
                        "trained (shards lie within the grid of N labels; with several threads a cell may be "
                        "written in pieces as its chunks finish) (default: one shard, written at the end; "
                        "with --resume, --scheduler or --dask-workers a size chosen from the labels and "
                        "threads, docs/distributed.md)")
    d = p.add_argument_group("resumable and distributed training (docs/distributed.md)")
    d.add_argument("--resume", action="store_true",
                   help="continue the model in MODEL_DIR: train only the labels without a finished shard "
                        "(starts a new model if there is none); shards are written as they finish")
    d.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="train on the Dask cluster of this scheduler (tcp://host:8786 or a scheduler "
                        "file .json); needs the dask extra")
    d.add_argument("--dask-workers", type=common._number(int), default=None, metavar="N",
                   help="train on a local Dask cluster of N worker processes")
    common.add_memory_check(g)
    common.add_train_params(p)
    common.add_data_options(p)


def check_args(args: argparse.Namespace, parser_error) -> None:
    common.require(args, ("TRAIN", args.train), ("-o/--output MODEL_DIR", args.output))
    if args.first_label < 0:
        parser_error(f"argument --first-label: must be >= 0, got {args.first_label}")
    if args.num_labels is not None and args.num_labels < 1:
        parser_error(f"argument --num-labels: must be >= 1, got {args.num_labels}")
    if args.shard_size is not None and args.shard_size < 1:
        parser_error(f"argument --shard-size: must be >= 1, got {args.shard_size}")
    if args.dask_workers is not None and args.dask_workers < 1:
        parser_error(f"argument --dask-workers: must be >= 1, got {args.dask_workers}")
    if args.scheduler and args.dask_workers:
        parser_error("arguments --scheduler and --dask-workers: give one of them")
    if args.stats is not None and not args.stats.endswith(STATS_SUFFIXES):
        parser_error(f"argument --stats: {args.stats!r} must end in .csv, .jsonl or .json")


def run(args: argparse.Namespace) -> int:
    params = common.params_unless_printed(args)
    if params is None:
        return 0
    check_args(args, args._parser.error)
    # everything that can be checked before the (long) training is checked now
    sharded = next((o for o, v in (("--shard-size", args.shard_size), ("--scheduler", args.scheduler),
                                    ("--dask-workers", args.dask_workers)) if v), "")
    # a finished model is replaced by an unsharded run once the new one is complete
    common.check_output_dir(args.output, sharded="" if args.resume else sharded,
                            resume=args.resume)
    if args.stats:
        common.check_output_file(args.stats, "statistics file", args, model_dir=args.output)
    if params.pretrained:
        from ..model.manifest import read_manifest

        read_manifest(params.pretrained)

    helper = None
    ahead = 0.0
    if not (args.scheduler or args.dask_workers) and os.path.isfile(args.train) and method_of(params) == "newton":
        # first run only: a second process compiles part of the training kernels while
        # this one reads the data (see .precompile; Dask workers compile their own; a
        # missing data file is reported at once; exact L1 has kernels of its own, which
        # the helper does not know)
        from . import precompile

        helper = precompile.start(params)
    try:
        if helper is not None:
            # inside the try: an interrupt while compiling stops the helper too (helper-52:
            # it went on compiling, orphaned, after the command had exited)
            ahead = precompile.compile_in_command(params, helper)
        return _train(args, params, ahead)
    finally:
        if helper is not None:
            helper.stop()


def _train(args: argparse.Namespace, params, compiled_ahead: float = 0.0) -> int:
    """Read, train, save; ``compiled_ahead``: seconds this process spent compiling
    kernels before reading (reported with the trainer's own compile time)."""
    from ..estimator import resolve_label_range

    t0 = time.perf_counter()
    X, Y = common.read_training_data(args.train, args, params)
    t_read = time.perf_counter() - t0
    first, count = resolve_label_range(Y.shape[1], args.first_label, args.num_labels)
    log.info("read %s: %d points, %d features, %d labels, %d nonzeros in %.2f s",
             args.train, X.shape[0], X.shape[1], Y.shape[1], X.nnz if hasattr(X, "nnz") else X.size, t_read)
    log.info("training labels [%d, %d) with %s", first, first + count, params)
    if getattr(args, "liblinear", None) is not None:
        from ..liblinear import multiclass_weight_warning

        warning = multiclass_weight_warning(args.liblinear, Y)
        if warning:       # LIBLINEAR's -w1 on multi-class data means another problem
            log.warning("%s: %s", args.train, warning)
    _check_memory(args, params, X, Y, first, count)

    # an instance the preprocessing refuses is named by its place in the file
    with common.RowLocator(args.train, args).block(X.shape[0]):
        return _train_read(args, params, X, Y, first, count, compiled_ahead)


def _train_read(args: argparse.Namespace, params, X, Y, first: int, count: int, compiled_ahead: float) -> int:
    from ..estimator import fit_to_directory

    if args.resume or args.shard_size or args.scheduler or args.dask_workers:
        return _run_sharded(args, params, X, Y, first, count)
    with common.ProgressBar(count, "train", "labels", enabled=not args.quiet) as bar:
        # the data was read for this run: training renumbers it in place (no copy of X);
        # finished weights go to disk as they come (never all in memory)
        stats, nnz = fit_to_directory(X, Y, params, args.output, first_label=first, num_labels=count,
                                      progress=bar.advance, own_data=True,
                                      trajectories=_keeps_trajectories(args))
    if args.stats:
        stats.write(args.stats)

    s = stats.summary()
    not_conv = sum(s["not_converged"].values())
    done = common.labels_word(count) if s["labels"] == count else f"{s['labels']} of the {count} labels"
    common.say(args, (
        f"trained {done} [{first}, {first + count}) of {Y.shape[1]} with {_start(params)} in "
        f"{s.get('wall_seconds', 0.0):.2f} s{_compiled(stats, compiled_ahead)}: "
        f"{_work(params, s)}, {nnz} nonzero weights"
        + (f", {not_conv} not converged" if not_conv else "") + f" -> {args.output}"))
    return _say_timeout(args, params, count - int(s["labels"]), _compile_seconds(stats, compiled_ahead))


#: per method (params.method_of): its name in the summary, and what its statistics'
#: "iterations" and "cg_steps" count
_METHOD_WORDS = {"newton": (None, "Newton iterations", "CG steps"),
                 "newglmnet": ("newGLMNET, exact L1", "newGLMNET iterations", "coordinate-descent cycles"),
                 "cdn": ("CDN, exact L1", "CDN cycles", "line-search evaluations"),
                 "dual": ("dual coordinate descent", "dual cycles", "coordinate steps")}


def _start(params) -> str:
    """The start the run used: --init, or zero for exact L1 and the dual (training/coordinate.py)."""
    name = _METHOD_WORDS[method_of(params)][0]
    return params.init if name is None else f"zero ({name})"


def _work(params, s) -> str:
    _, outer, inner = _METHOD_WORDS[method_of(params)]
    return f"{s['newton_iterations']} {outer}, {s['cg_steps']} {inner}"


def _keeps_trajectories(args: argparse.Namespace) -> bool:
    """Only a JSON statistics file holds the per-iteration trajectories; without one the
    run keeps the per-label scalars only (the summary needs no more)."""
    return bool(args.stats) and not args.stats.endswith(".csv")


def _compile_seconds(stats, ahead: float = 0.0) -> float:
    """Seconds this run compiled numba's kernels (the trainer's compile and what was
    compiled ahead of reading; not the readers')."""
    return ahead + (float(stats.meta.get("compile_seconds", 0.0)) if stats is not None else 0.0)


def _compiled(stats, ahead: float = 0.0) -> str:
    """' (+ N s compiling kernels, first run only)' when this run compiled kernels."""
    c = _compile_seconds(stats, ahead)
    return f" (+ {c:.1f} s compiling kernels, first run only)" if c > 1.0 else ""


def _say_timeout(args, params, missing: int, compiled: float = 0.0) -> int:
    """The budget is wall-clock time from the start of training, compiling included (a
    cluster job's limit is); on a first run the kernels' compiling may take most of it,
    which is said with the way around it (helper-52).  Returns the exit code: 0, or
    ``EXIT_INCOMPLETE`` when labels were left (helper-102: that exited 0)."""
    if params.timeout > 0 and missing > 0:
        first_run = (f" -- this run spent {compiled:.1f} s of it compiling kernels (first run only; "
                     "'headstart compile' does it ahead)" if compiled > 1.0 else "")
        common.say(args, f"time budget of {params.timeout:g} s reached{first_run}: {missing} label(s) not started; "
                         f"continue with: headstart train ... -o {args.output} --resume")
        return common.EXIT_INCOMPLETE
    return 0


def _run_sharded(args: argparse.Namespace, params, X, Y, first: int, count: int) -> int:
    """Shards written as they finish (this machine's threads, or Dask); see docs/distributed.md."""
    from ..distributed import train_model_dir

    with common.shards_kept_on_interrupt("train", args.output), \
            common.ProgressBar(count, "train", "labels", enabled=not args.quiet) as bar:
        r = train_model_dir(X, Y, params, args.output, first_label=first, num_labels=count,
                            shard_size=args.shard_size, resume=args.resume, scheduler=args.scheduler,
                            dask_workers=args.dask_workers, progress=bar.advance, own_data=True)
    if args.stats:
        r.stats.write(args.stats)
        if r.stats_without:
            log.warning("no statistics for label range(s) %s (shards written without them)",
                        ", ".join(f"[{a}, {b})" for a, b in r.stats_without[:5]))
    if common.said_nothing_left(args, r, first, count):
        return 0
    s = r.run_summary()
    not_conv = sum(s["not_converged"].values())
    common.say(args, (
        f"trained {common.trained_range_words(r.trained_labels, first, count)} of {Y.shape[1]} with {_start(params)} "
        f"({r.backend}) in {r.wall_seconds:.2f} s"
        + (f", {r.already_finished} were finished before" if r.already_finished else "")
        + f": {_work(params, s)}, {r.nnz} nonzero weights"
        + (" in the range" if r.already_finished else "")
        + (f", {not_conv} not converged" if not_conv else "") + f" -> {args.output}"))
    return _say_timeout(args, params, int(sum(b - a for a, b in r.missing)))


def _check_memory(args: argparse.Namespace, params, X, Y, first: int, count: int) -> None:
    """Refuse (ResourceError, exit 2) when training would not fit in memory; see headstart.resources."""
    sharded = bool(args.resume or args.shard_size or args.scheduler or args.dask_workers)
    # the weights are never collected: written shard by shard, or spooled (model.spool)
    # (the advice names no --shard-size: every run writes its weights as they finish)
    common.check_training_memory(args, params, X, Y, f"training {count} labels", first=first, count=count,
                                 collect=False, chunk_size=args.shard_size,
                                 trajectories=sharded or _keeps_trajectories(args),
                                 fewer_labels="a label range (--first-label/--num-labels)")
