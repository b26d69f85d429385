"""``headstart cv TRAIN [--Cs LIST] [training options]``: cross-validated ranking metrics
for each C (headstart.tuning.cross_validate)."""

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
-o FILE (and --json) also give coverage@k, in JSON."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.usage = "%(prog)s TRAIN [-o FILE] [options]"
    p.add_argument("train", metavar="TRAIN", nargs="?", help="training data file")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the results as JSON (atomically)")
    g = p.add_argument_group("cross-validation")
    g.add_argument("--folds", type=common._number(int), default=3, metavar="N", help="folds (default: 3)")
    g.add_argument("--Cs", metavar="LIST", default=None,
                   help="candidate C values, comma-separated (default: only the training option --C)")
    g.add_argument("-k", type=common._number(int), default=5, help="metrics at k = 1, 3, 5 up to this (default: 5)")
    g.add_argument("--metric", default="P@1", help="the metric that chooses the best C: P@j, nDCG@j, R@j or RP@j "
                                                 "for a j <= k, or Micro-F1, Macro-F1, Another-Macro-F1 "
                                                 "(default: P@1)")
    g.add_argument("--seed", type=common._number(int), default=0,
                   help="seed of the folds' random split, >= 0 (default: 0)")
    g.add_argument("--json", action="store_true", help="print the results as one JSON object")
    common.add_train_params(p)
    common.add_data_options(p)


def run(args: argparse.Namespace) -> int:
    from ..io.atomic import atomic_write
    from ..tuning import cross_validate
    from ..tuning.cv import check_metric

    Cs = None if args.Cs is None else number_list(args, "--Cs", args.Cs, lambda v: v > 0, "> 0")
    check_metric(args.metric, args.k)        # before the data is read
    out = tune(args, "results", args.folds * (1 if Cs is None else Cs.size), args.folds,
               lambda X, Y, params, progress: cross_validate(X, Y, params, folds=args.folds, Cs=Cs, k=args.k,
                                                             metric=args.metric, seed=args.seed, progress=progress),
               output_required=False)
    if out is None:
        return 0
    r, L, seconds = out
    table = {"folds": args.folds, "seed": args.seed, "metric": r.metric, "best_C": r.best,
             "results": [{"C": float(c), **m} for c, m in zip(r.candidates, r.metrics)]}
    if args.output:
        with atomic_write(args.output, "w") as fh:
            fh.write(json.dumps(table, indent=1) + "\n")
    if args.json:
        print(json.dumps(table))
        return 0
    keys = [key for key in r.metrics[0] if not key.startswith("cov")]
    width = {key: max(9, len(key) + 2) for key in keys}
    print("C".ljust(10) + "".join(f"{key:>{width[key]}}" for key in keys))
    for c, m in zip(r.candidates, r.metrics):
        mark = "  <- best" if c == r.best and len(r.candidates) > 1 else ""
        print(f"{c:<10g}" + "".join(f"{100 * m[key]:{width[key]}.2f}" for key in keys) + mark)
    common.say(args, f"{args.folds}-fold cross-validation of {len(r.candidates)} C value(s) on {L} labels, "
                     f"{r.trainings} trainings, in {seconds:.2f} s: best C = {r.best:g} by {r.metric}")
    return 0
