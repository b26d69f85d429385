"""``headstart costs TRAIN -o FILE [--micro] [training options]``: the positives' cost of
every label by cross-validation (headstart.tuning), for ``train --weighting file
--weights-pos-file FILE``."""

from __future__ import annotations

import argparse

import numpy as np

from . import common
from .thresholds import add_tuning_arguments, number_list, tune

NAME = "costs"
HELP = "choose the positives' cost of every label by cross-validation (LibMultiLabel's cost_sensitive)"
DESCRIPTION = """\
Choose, for every label, the cost of its positives (LIBLINEAR's -w1) whose one-vs-all
decisions 'score > 0' have the best F1 in a cross-validation on TRAIN; with --micro, one
cost for all labels, the one with the best Micro-F1 (LibMultiLabel's 'cost_sensitive'
and 'cost_sensitive_micro').  Every cost and fold is a one-vs-all training of all labels
with the training options given here.  Then train the model with the same options and
'--weighting file --weights-pos-file FILE'.  FILE holds one cost per label, one per
line (a .npy vector if FILE ends in .npy), written atomically."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..tuning import COSTS

    g = add_tuning_arguments(p, "costs", "--costs", COSTS, "candidate costs of the positives, > 0")
    g.add_argument("--micro", action="store_true",
                   help="one cost for all labels, chosen for Micro-F1 (default: one per label, for Macro-F1)")


def run(args: argparse.Namespace) -> int:
    from ..io.labelvec import write_label_values
    from ..tuning import cost_sensitive, cost_trainings

    costs = number_list(args, "--costs", args.costs, lambda v: v > 0, "finite and > 0")
    out = tune(args, "costs", cost_trainings(args.folds, costs), args.folds,
               lambda X, Y, params, progress: cost_sensitive(X, Y, params, folds=args.folds, costs=costs,
                                                             micro=args.micro, seed=args.seed, progress=progress))
    if out is None:
        return 0
    r, L, seconds, _ = out
    write_label_values(args.output, r.costs)
    values, counts = np.unique(r.costs, return_counts=True)
    common.say(args, f"chose the positives' costs of {L} labels by {args.folds}-fold cross-validation "
                     f"({r.trainings} trainings) in {seconds:.2f} s: "
                     + ", ".join(f"{v:g} x {c}" for v, c in zip(values, counts)) + f" -> {args.output}; train with "
                     f"--weighting file --weights-pos-file {args.output}")
    return 0
