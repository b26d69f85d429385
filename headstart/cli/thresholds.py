"""``headstart thresholds TRAIN -o FILE [training options]``: per-label decision
thresholds by cross-validation (headstart.tuning), for ``predict/evaluate --thresholds``.
The helpers below also serve ``headstart costs`` (the other tuner)."""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from ..errors import DataFormatError, ParameterError
from . import common

NAME = "thresholds"
HELP = "choose one decision threshold per label by cross-validation (LibMultiLabel's thresholding)"
DESCRIPTION = """\
Choose, for every label, the threshold t of its decision 'score > t' on held-out
instances of TRAIN.  --method micromacro (the default; LibMultiLabel's 'thresholding'
since version 0.4, Li, Lin et al. CIKM 2023): labels in decreasing frequency, each cut
maximising Micro-F1 so far plus the label's share of Macro-F1; one 3-fold
cross-validation, 3 trainings on 2/3 of TRAIN.  --method scutfbr (LibMultiLabel's up to
0.3.3, Fan & Lin 2007): the label's best-F1 cut with the fbr fallback, fbr chosen per
label by a nested cross-validation, 15 trainings for 3 folds (the work of about 9 on all
of TRAIN); it aims at Macro-F1 alone and may lower Micro-F1.  Every fold is a
one-vs-all training of all labels with the training options given here.  Use the same
options for 'headstart train' on all of TRAIN, then 'predict --thresholds FILE' or
'evaluate --thresholds FILE'.  FILE holds one threshold per label, one per line after a
first line '# headstart {JSON}' of the training options (a .npy vector if FILE ends in .npy,
the options then in FILE.npy.json beside it), written atomically; predict and evaluate
warn when the model's options change its scores."""

log = logging.getLogger("headstart.cli.thresholds")


def add_tuning_arguments(p: argparse.ArgumentParser, what: str, values_option: str, values: tuple,
                         values_help: str) -> argparse._ArgumentGroup:
    """TRAIN, -o FILE, the cross-validation's options and the training options."""
    p.usage = "%(prog)s TRAIN -o FILE [options]"
    p.add_argument("train", metavar="TRAIN", nargs="?", help="training data file")
    p.add_argument("-o", "--output", metavar="FILE", help=f"{what} file to write (required; text, one per "
                                                          "line, or .npy if FILE ends in .npy)")
    g = p.add_argument_group("cross-validation")
    g.add_argument("--folds", type=common._number(int), default=3, metavar="N", help="folds (default: 3)")
    g.add_argument(values_option, metavar="LIST", default=",".join(f"{v:g}" for v in values),
                   help=f"{values_help}, comma-separated (default: %(default)s)")
    g.add_argument("--seed", type=common._number(int), default=0,
                   help="seed of the folds' random split, >= 0 (default: 0)")
    common.add_memory_check(g, "cross-validate")
    common.add_train_params(p)
    common.add_data_options(p)
    return g


def number_list(args: argparse.Namespace, option: str, text: str, ok, rule: str) -> np.ndarray:
    """The comma-separated numbers of ``option``, each satisfying ``ok`` (else a usage error)."""
    try:
        v = np.asarray([float(x) for x in text.split(",")], dtype=np.float64)
    except ValueError:
        args._parser.error(f"argument {option}: expected comma-separated numbers, got {text!r}")
    if v.size == 0 or not np.all(np.isfinite(v)) or not np.all(ok(v)):
        args._parser.error(f"argument {option}: every value must be a finite number {rule}, got {text!r}")
    return v


def tune(args: argparse.Namespace, what: str, trainings: int, min_rows: int, tuner, output_required: bool = True):
    """Check the arguments, read TRAIN, run ``tuner(X, Y, params, progress)`` with a
    progress bar over ``trainings`` trainings of all labels (or ``trainings(X, params)``,
    a number known from the data only); (result, labels, seconds, the training
    parameters), or None when --print-params only printed the parameters.  TRAIN needs at
    least ``min_rows`` instances."""
    params = common.params_unless_printed(args)
    if params is None:
        return None
    err = args._parser.error
    common.require(args, ("TRAIN", args.train), *([("-o/--output FILE", args.output)] if output_required else []))
    if args.folds < 2:
        err(f"argument --folds: must be >= 2, got {args.folds}")
    if args.seed < 0:
        err(f"argument --seed: must be >= 0, got {args.seed}")
    if params.timeout > 0:
        err("argument --timeout: cross-validation needs every label trained in every fold (no time budget)")
    if args.output:
        common.check_output_file(args.output, f"{what} file", args)
    X, Y = common.read_training_data(args.train, args, params)
    if X.shape[0] < min_rows:
        raise DataFormatError(f"{X.shape[0]} instances are too few for --folds {args.folds} (at least {min_rows} "
                              "are needed)", args.train)
    # a fold's training on a copy of its rows (one copy at a time: scutfbr's inner folds
    # copy from the whole data and free theirs first, helper-121); the estimate counts the
    # whole of X, an upper bound of a fold's; the folds' models may all be held at once
    # (micromacro scores them together, cv warm-starts each fold from its last model)
    common.check_training_memory(args, params, X, Y, f"cross-validating {Y.shape[1]} labels",
                                 copies=(args.folds - 1) / args.folds, models=args.folds)
    if callable(trainings):     # known from the data only (cv --Cs auto: an upper bound)
        trainings = trainings(X, params)
    t0 = time.perf_counter()
    with common.RowLocator(args.train, args).block(X.shape[0]), \
            common.ProgressBar(trainings * Y.shape[1], "cross-validate", "labels", enabled=not args.quiet) as bar:
        r = tuner(X, Y, params, bar.advance)
    return r, Y.shape[1], time.perf_counter() - t0, params


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..tuning import FBR_VALUES

    g = add_tuning_arguments(p, "thresholds", "--fbr", FBR_VALUES,
                             "scutfbr: candidate fbr values in [0, 1): a fold's cut whose F1 is not above fbr is "
                             "not trusted, and the label's threshold there becomes its highest score (it predicts "
                             "almost nothing); fbr is chosen per label by the outer cross-validation")
    g.add_argument("--method", choices=("micromacro", "scutfbr"), default="micromacro",
                   help="micromacro: LibMultiLabel >= 0.4 (Micro-F1 + Macro-F1, 3 trainings); scutfbr: "
                        "LibMultiLabel <= 0.3.3 (Macro-F1, nested, 15 trainings) (default: micromacro)")


def run(args: argparse.Namespace) -> int:
    from ..io.labelvec import write_label_values
    from ..tuning import FBR_VALUES, micromacro, scutfbr, trainings_needed

    fbr = number_list(args, "--fbr", args.fbr, lambda v: (v >= 0) & (v < 1), "a number in [0, 1)")
    if args.method != "scutfbr" and args.fbr != ",".join(f"{v:g}" for v in FBR_VALUES):
        # helper-51: ignored without a word under the default method
        raise ParameterError(f"--fbr is for --method scutfbr; --method {args.method} chooses no fbr")
    if args.method == "scutfbr":
        trainings, min_rows, how = trainings_needed(args.folds), args.folds * args.folds, "nested "

        def tuner(X, Y, params, progress):
            return scutfbr(X, Y, params, folds=args.folds, fbr_values=fbr, seed=args.seed,
                           progress=progress).thresholds
    else:
        trainings, min_rows, how = args.folds, args.folds, ""

        def tuner(X, Y, params, progress):
            return micromacro(X, Y, params, folds=args.folds, seed=args.seed, progress=progress)
    out = tune(args, "thresholds", trainings, min_rows, tuner)
    if out is None:
        return 0
    t, L, seconds, params = out
    # what the thresholds were chosen for: scores of a model trained otherwise are on
    # another scale (helper-80: a logistic model's thresholds on a squared-hinge model,
    # Micro-F1 47.8 -> 13.1, silently); predict and evaluate compare (score_options_differ)
    write_label_values(args.output, t, header={"made_by": "headstart thresholds", "method": args.method,
                                               "folds": args.folds, "params": params.to_dict()})
    median = f"median {np.median(t):.3g}, " if L else ""
    common.say(args, f"chose thresholds of {L} labels by {args.folds}-fold {how}cross-validation ({args.method}, "
                     f"{trainings} trainings) in {seconds:.2f} s: {median}"
                     f"{int(np.sum(t < 0))} below 0 -> {args.output}")
    return 0
