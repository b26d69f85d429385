"""``headstart thresholds TRAIN -o FILE [training options]``: per-label decision
thresholds by cross-validation (headstart.tuning), for ``predict/evaluate --thresholds``."""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from ..errors import DataFormatError
from . import common

NAME = "thresholds"
HELP = "choose one decision threshold per label by cross-validation (LibMultiLabel's thresholding)"
DESCRIPTION = """\
Choose, for every label, the threshold t of its decision 'score > t' that maximises F1
on held-out instances of TRAIN: SCut with the fbr fallback, fbr chosen per label by a
nested cross-validation (Fan & Lin 2007; LibMultiLabel's 'thresholding').  Every fold
is a one-vs-all training of all labels with the training options given here, so it
costs about 9 trainings for 3 folds.  Use the same options for 'headstart train' on all
of TRAIN, then 'predict --thresholds FILE' or 'evaluate --thresholds FILE'.  FILE holds
one threshold per label, one per line, written atomically."""

log = logging.getLogger("headstart.cli.thresholds")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..tuning import FBR_VALUES

    p.add_argument("train", metavar="TRAIN", nargs="?", help="training data file")
    p.add_argument("-o", "--output", metavar="FILE", help="thresholds file to write")
    g = p.add_argument_group("cross-validation")
    g.add_argument("--folds", type=common._number(int), default=3, metavar="N",
                   help="folds of the outer and of the inner cross-validation (default: 3)")
    g.add_argument("--fbr", metavar="LIST", default=",".join(f"{v:g}" for v in FBR_VALUES),
                   help="candidate fbr values in [0, 1), comma-separated (default: %(default)s)")
    g.add_argument("--seed", type=common._number(int), default=0,
                   help="seed of the folds' random split (default: 0)")
    common.add_train_params(p)
    common.add_data_options(p)


def _fbr_values(args: argparse.Namespace) -> np.ndarray:
    try:
        v = np.asarray([float(x) for x in args.fbr.split(",")], dtype=np.float64)
    except ValueError:
        args._parser.error(f"argument --fbr: expected comma-separated numbers, got {args.fbr!r}")
    if v.size == 0 or not np.all(np.isfinite(v)) or np.any((v < 0) | (v >= 1)):
        args._parser.error(f"argument --fbr: every value must be in [0, 1), got {args.fbr!r}")
    return v


def run(args: argparse.Namespace) -> int:
    from ..tuning import scutfbr, trainings_needed
    from ..io.labelvec import write_label_values

    params = common.params_unless_printed(args)
    if params is None:
        return 0
    common.require(args, ("TRAIN", args.train), ("-o/--output FILE", args.output))
    if args.folds < 2:
        args._parser.error(f"argument --folds: must be >= 2, got {args.folds}")
    fbr = _fbr_values(args)
    common.check_output_file(args.output, "thresholds file")
    X, Y = common.read_dataset(args.train, args)
    if X.shape[0] == 0:
        raise DataFormatError("the file has no instances: nothing to train on", args.train)
    t0 = time.perf_counter()
    total = trainings_needed(args.folds) * Y.shape[1]
    with common.RowLocator(args.train, args).block(X.shape[0]), \
            common.ProgressBar(total, "cross-validate", "labels", enabled=not args.quiet) as bar:
        r = scutfbr(X, Y, params, folds=args.folds, fbr_values=fbr, seed=args.seed, progress=bar.advance)
    write_label_values(args.output, r.thresholds)
    common.say(args, f"chose thresholds of {Y.shape[1]} labels by {args.folds}-fold nested cross-validation "
                     f"({r.trainings} trainings) in {time.perf_counter() - t0:.2f} s: median {np.median(r.thresholds):.3g}, "
                     f"{int(np.sum(r.thresholds < 0))} below 0 -> {args.output}")
    return 0
