"""``headstart cv TRAIN [--Cs LIST|auto] [training options]``: cross-validated ranking
metrics for each C (headstart.tuning.cross_validate); ``--Cs auto`` and ``--liblinear
"-C ..."`` are LIBLINEAR's search for C."""

from __future__ import annotations

import argparse
import json

from . import common
from .thresholds import number_list, tune

NAME = "cv"
HELP = "cross-validated P@k / nDCG@k of one-vs-all training, for each of several C (LIBLINEAR's -v and -C)"
DESCRIPTION = """\
Split TRAIN into --folds parts; for each C of --Cs, train on all parts but one and rank
the labels of the held-out part, so that every instance is ranked once by a model that
did not see it; print P@k, nDCG@k, R@k and RP@k over all instances for each C, with
the Micro-, Macro- and Another-Macro-F1 of the decisions score > 0 (LibMultiLabel's), and
the best C by --metric.  The folds are the same for every C.  Every fold is a one-vs-all
training of all labels with the training options given here (--liblinear included).
-o FILE (and --json) also give coverage@k, in JSON.

--Cs auto (or --liblinear="-C ..."): LIBLINEAR's search for C (train -C).  C starts at
the largest power of 2 not above 1/(l max||x||^2) (logistic loss, LIBLINEAR -s 0) or
1/(2 l max||x||^2) (squared hinge, -s 2) -- l instances, x with its bias feature -- or at
--C when given (-c inside --liblinear), doubles up to 1024, each fold starting from its
own weights at the C before (saved in a temporary directory), and stops early when no
fold's weights move any more (5 C's in a row); -v shows each C as it is done.
Differences from LIBLINEAR: the best C is the one of the best --metric over all labels
(P@1 by default, Accuracy on a +1/-1 file; Accuracy, LIBLINEAR's, for a binary or a one-class-per-row file, whose
accuracy cv shows, and prints as LIBLINEAR's 'Cross Validation Accuracy' line with -v N alone); --patience N
(not LIBLINEAR's) also stops once N C's in a row scored below the best, after the score
first rose, since the weights of many labels seldom all stop moving.  Only the
objectives LIBLINEAR searches: L2, the primal Newton solver, logistic or squared-hinge
loss.  Inside --liblinear, -C makes -s 2 the default and 5 the default folds, -v N gives
the folds (an explicit --folds wins)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.usage = "%(prog)s TRAIN [-o FILE] [options]"
    p.add_argument("train", metavar="TRAIN", nargs="?", help="training data file")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the results as JSON (atomically)")
    g = p.add_argument_group("cross-validation")
    g.add_argument("--folds", type=common._number(int), default=None, metavar="N",
                   help="folds (default: 3; 5 with --liblinear \"-C\", LIBLINEAR's, or its -v N)")
    g.add_argument("--Cs", metavar="LIST", default=None,
                   help="candidate C values, comma-separated, or auto: LIBLINEAR's search for C (train -C; "
                        "see above) (default: only the training option --C)")
    g.add_argument("--patience", type=common._number(int), default=None, metavar="N",
                   help="--Cs auto: also stop once N C's in a row scored below the best (not LIBLINEAR's; "
                        "default: only its rule)")
    g.add_argument("-k", type=common._number(int), default=5, help="metrics at k = 1, 3, 5 up to this (default: 5)")
    g.add_argument("--metric", default=None, help="the metric that chooses the best C: P@j, nDCG@j, R@j or RP@j "
                                                "for a j <= k, or Micro-F1, Macro-F1, Another-Macro-F1, or "
                                                "Accuracy (LIBLINEAR's: for data of one label, a +1/-1 file, "
                                                "or of one class per row; then always shown) (default: P@1; "
                                                "Accuracy on data of one label, whose P@1 is the same at every C)")
    g.add_argument("--seed", type=common._number(int), default=0,
                   help="seed of the folds' random split, >= 0 (default: 0)")
    g.add_argument("--json", action="store_true", help="print the results as one JSON object")
    common.add_memory_check(g, "cross-validate")
    common.add_train_params(p)
    common.add_data_options(p)
    p.set_defaults(liblinear_search=True)      # -C and -v inside --liblinear are this command's


def run(args: argparse.Namespace) -> int:
    from ..io.atomic import atomic_write
    from ..liblinear import search, translate
    from ..tuning import auto_grid, cross_validate, start_C
    from ..tuning.cv import ACCURACY, STOPS, check_metric

    wish = {"auto": False, "folds": None, "first_C": None}
    if getattr(args, "liblinear", None) is not None:
        translate(args.liblinear, search=True)           # its errors before ours
        wish = search(args.liblinear)
    auto = args.Cs == "auto" or (args.Cs is None and wish["auto"])
    if args.folds is None:
        args.folds = wish["folds"] or 3
    if auto:
        Cs = "auto"
        # LIBLINEAR's -c with -C: where the search starts (an explicit --C too)
        first = getattr(args, "C", None) or wish["first_C"]
        if args.patience is not None and args.patience < 1:
            args._parser.error(f"argument --patience: must be >= 1, got {args.patience}")

        def trainings(X, params):             # the whole grid: an early stop ends the bar sooner
            return args.folds * auto_grid(first or start_C(X, params)).size
    else:
        Cs = None if args.Cs is None else number_list(args, "--Cs", args.Cs, lambda v: v > 0, "> 0 (or auto)")
        first = None
        if args.patience is not None:
            args._parser.error("argument --patience: only with --Cs auto (a given list is tried whole)")
        trainings = args.folds * (1 if Cs is None else Cs.size)
    check_metric(args.metric or "P@1", args.k)        # before the data is read
    out = tune(args, "results", trainings, args.folds,
               lambda X, Y, params, progress: cross_validate(X, Y, params, folds=args.folds, Cs=Cs, k=args.k,
                                                             metric=args.metric, seed=args.seed, progress=progress,
                                                             first_C=first, patience=args.patience),
               output_required=False)
    if out is None:
        return 0
    r, L, seconds, _ = out
    table = {"folds": args.folds, "seed": args.seed, "metric": r.metric, "best_C": r.best,
             "results": [{"C": float(c), **m} for c, m in zip(r.candidates, r.metrics)]}
    if auto:
        table.update(search="auto", stop=r.stop)
    if args.output:
        with atomic_write(args.output, "w") as fh:
            fh.write(json.dumps(table, indent=1) + "\n")
    if args.json:
        print(json.dumps(table))
        return 0
    keys = [key for key in r.metrics[0] if not key.startswith("cov")]
    width = {key: max(9, len(key) + 2) for key in keys}
    # the widest %g of a C is 12 characters (-1.23457e-06): the automatic grid's first C's
    print("C".ljust(12) + "".join(f"{key:>{width[key]}}" for key in keys))
    for c, m in zip(r.candidates, r.metrics):
        mark = "  <- best" if c == r.best and len(r.candidates) > 1 else ""
        print(f"{c:<12g}" + "".join(f"{100 * m[key]:{width[key]}.2f}" for key in keys) + mark)
    if auto:
        common.say(args, f"search for C from {r.candidates[0]:g} ({'given' if first else 'LIBLINEAR rule'}) "
                         f"stopped at C = {r.candidates[-1]:g}: "
                         + STOPS[r.stop].format(patience=args.patience))
    common.say(args, f"{args.folds}-fold cross-validation of {len(r.candidates)} C value(s) on {L} labels, "
                     f"{r.trainings} trainings, in {seconds:.2f} s: best C = {r.best:g} by {r.metric}")
    if wish["folds"] is not None and not auto and ACCURACY in r.metrics[0]:
        # LIBLINEAR's train -v prints this line for its classifiers (binary or multi-class data)
        print("Cross Validation Accuracy = %g%%" % (100.0 * r.metrics[0][ACCURACY]))
    return 0
