"""``headstart train TRAIN -o MODEL_DIR [options]``: train one-vs-all classifiers."""

from __future__ import annotations

import argparse
import logging
import time

from . import common

NAME = "train"
HELP = "train one-vs-all linear classifiers (all labels or a label range)"
DESCRIPTION = """\
Train one binary linear classifier per label with LIBLINEAR's Newton method, started
from the chosen initialisation (default: aop, the average of positives).  The model
directory is written atomically: it appears complete or not at all."""

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
    g.add_argument("--stats", metavar="FILE", help="write per-label training statistics: "
                   "CSV if FILE ends in .csv, else JSON lines with per-iteration trajectories")
    g.add_argument("--shard-size", type=common._number(int), default=None, metavar="N",
                   help="labels per shard file of the model (default: one shard)")
    common.add_train_params(p)
    common.add_data_options(p)


def check_args(args: argparse.Namespace, parser_error) -> None:
    if args.train is None:
        parser_error("the following arguments are required: TRAIN")
    if not args.output:
        parser_error("the following arguments are required: -o/--output MODEL_DIR")
    if args.first_label < 0:
        parser_error(f"argument --first-label: must be >= 0, got {args.first_label}")
    if args.num_labels is not None and args.num_labels < 1:
        parser_error(f"argument --num-labels: must be >= 1, got {args.num_labels}")
    if args.shard_size is not None and args.shard_size < 1:
        parser_error(f"argument --shard-size: must be >= 1, got {args.shard_size}")
    if args.stats is not None and not args.stats.endswith(STATS_SUFFIXES):
        parser_error(f"argument --stats: {args.stats!r} must end in .csv, .jsonl or .json")


def run(args: argparse.Namespace) -> int:
    params = common.resolve_params(args)
    if args.print_params:
        print(params.to_json())
        return 0
    check_args(args, args._parser.error)
    # everything that can be checked before the (long) training is checked now
    common.check_output_dir(args.output)
    if args.stats:
        common.check_output_file(args.stats, "statistics file")
    if params.pretrained:
        from ..model.format import read_manifest

        read_manifest(params.pretrained)

    from ..estimator import fit_model, resolve_label_range
    from ..model.format import save_model

    t0 = time.perf_counter()
    X, Y = common.read_dataset(args.train, args)
    t_read = time.perf_counter() - t0
    first, count = resolve_label_range(Y.shape[1], args.first_label, args.num_labels)
    log.info("read %s: %d points, %d features, %d labels, %d nonzeros in %.2f s",
             args.train, X.shape[0], X.shape[1], Y.shape[1], X.nnz if hasattr(X, "nnz") else X.size, t_read)
    log.info("training labels [%d, %d) with %s", first, first + count, params)

    with common.ProgressBar(count, "train", "labels", enabled=not args.quiet) as bar:
        model, stats = fit_model(X, Y, params, first_label=first, num_labels=count, progress=bar.advance)
    save_model(model, args.output, shard_size=args.shard_size)
    if args.stats:
        stats.write(args.stats)

    s = stats.summary()
    not_conv = sum(s["not_converged"].values())
    common.say(args, (
        f"trained {s['labels']} labels [{first}, {first + count}) of {Y.shape[1]} with {params.init} in "
        f"{s.get('wall_seconds', 0.0):.2f} s: {s['newton_iterations']} Newton iterations, "
        f"{s['cg_steps']} CG steps, {model.nnz} nonzero weights"
        + (f", {not_conv} not converged" if not_conv else "") + f" -> {args.output}"))
    return 0
