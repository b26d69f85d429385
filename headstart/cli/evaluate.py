"""``headstart evaluate MODEL_DIR TEST`` / ``headstart evaluate --predictions FILE TEST``."""

from __future__ import annotations

import argparse
import json
import logging
import math

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError
from . import common, predict
from .report import format_metrics_table

NAME = "evaluate"
HELP = "P@k, nDCG@k, PSP@k, PSnDCG@k, recall@k, RP@k and coverage@k (and F1 scores) on test data"
DESCRIPTION = """\
Evaluate a model on TEST (or a predictions file written by 'headstart predict' with
--predictions FILE): precision, nDCG, propensity-scored precision and nDCG, recall,
R-precision and coverage at k = 1, 3 and 5 up to -k (default 5), and at -k itself; with --threshold, the F1
scores of the thresholded decisions; with --dismec-metrics, also those DiSMEC++ prints.  Propensities use the training label counts
stored in the model (or those of --train FILE) with the constants --propensity-a/-b
(default: those the model was trained with, else 0.55 and 1.5)."""

log = logging.getLogger("headstart.cli.evaluate")

STANDARD_KS = (1, 3, 5)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.usage = "%(prog)s [options] MODEL_DIR TEST | --predictions FILE TEST"
    p.add_argument("paths", metavar="MODEL_DIR TEST", nargs="+",
                   help="model directory and test data; only TEST with --predictions")
    p.add_argument("--predictions", metavar="FILE",
                   help="evaluate this predictions file instead of predicting with a model (each line's "
                        "labels ranked as listed in headstart's own files, whose header 'num_points k "
                        "num_labels' says they list them best first; by their scores in others)")
    p.add_argument("--json", action="store_true", help='print one JSON object {"P@1": ..., ...}')
    p.add_argument("--save-metrics", metavar="FILE",
                   help="also write every metric computed to FILE as one JSON object (DiSMEC++'s option; "
                        "values that are not finite are null)")
    p.add_argument("--dismec-metrics", action="store_true",
                   help="also the metrics DiSMEC++'s predict prints, with its names: InstanceP@k, Abd@k, "
                        "InstanceDCG@k, InstancenDCG@k and the "
                        "top-k decisions' confusion-matrix metrics, Macro/Micro P, R, F1, ACC, BA, SPC, BM, MK, "
                        "FM, NPV, MCC, LR+, LR-, DOR and Cov@k (headstart.metrics.dismec_metrics)")
    p.add_argument("--threshold", type=common._number(float), metavar="T", default=None,
                   help="also score the decisions 'score > T' of every label (0: the classifiers' sign): "
                        "Micro-F1, Macro-F1 and Another-Macro-F1 as LibMultiLabel computes them (the macro "
                        "means over every label of the label space, 0/0 counting 0), and Test-Label-Macro-F1, "
                        "Macro-F1 over the labels with a positive in TEST only (with a model only: a "
                        "predictions file holds the top k, not every decision); write a negative T as "
                        "--threshold=-0.5")
    predict.add_thresholds_option(p, "also score the decisions 'score > the label's threshold in FILE' (with a "
                                     "model only)")
    g = p.add_argument_group("propensities")
    g.add_argument("--train", metavar="FILE",
                   help="training data whose label counts give the propensities (default: the counts "
                        "stored in the model; without either, no PS metrics)")
    g.add_argument("--train-labels", metavar="FILE",
                   help="the label file of --train when it is dense .npy features (slice format; --labels "
                        "is DATA's)")
    g.add_argument("--propensity-a", type=common._number(float), default=None, metavar="A",
                   help="propensity constant A (default: the model's --propensity-a, else 0.55; the XMC "
                        "repository uses 0.5 for Wikipedia and 0.6 for Amazon data sets)")
    g.add_argument("--propensity-b", type=common._number(float), default=None, metavar="B",
                   help="propensity constant B (default: the model's --propensity-b, else 1.5; 0.4 "
                        "Wikipedia, 2.6 Amazon)")
    predict.add_prediction_options(p)
    predict.add_dask_options(p)
    common.add_data_options(p)


def metric_ks(k: int) -> list[int]:
    """The standard ks up to ``k``, plus ``k`` itself."""
    return sorted({x for x in STANDARD_KS if x <= k} | {k})


def _finite_or_none(metrics: dict) -> dict:
    """JSON has no NaN or infinity: null instead (as DiSMEC++'s JSON library writes them)."""
    return {key: (None if isinstance(v, float) and not math.isfinite(v) else v) for key, v in metrics.items()}


def print_metrics(metrics: dict, as_json: bool, extra: dict | None = None) -> None:
    if as_json:
        out = dict(_finite_or_none(metrics))
        if extra:
            out.update(_finite_or_none(extra))
        print(json.dumps(out))
    else:
        print(format_metrics_table(metrics))


#: what a --predictions file that does not parse looks like instead (common.sniff_kind)
_WHAT_ELSE = {
    "decisions": ("a header of two numbers is DiSMEC++'s 'rows k' (k predictions on every line) or a decisions "
                  "file of 'headstart predict --threshold' (header 'n L'): F1 scores of decisions come from "
                  "'headstart evaluate MODEL_DIR TEST --threshold T'"),
    "named": ("this file holds label names ('headstart predict --label-names'): evaluate reads label ids, from "
              "a predictions file written without --label-names"),
    "data": ("this looks like a data file (its lines start with labels): the predictions file goes after "
             "--predictions and the test data last"),
}


def run(args: argparse.Namespace) -> int:
    err = args._parser.error
    if args.train_labels and not args.train:
        err("--train-labels is the label file of --train: give --train too")
    predict.check_prediction_args(args)
    predict.check_threshold_args(args)
    thresholded = args.threshold is not None or args.thresholds is not None
    if args.predictions:
        if len(args.paths) != 1:
            err("with --predictions give only TEST (the predictions file replaces MODEL_DIR)")
        if thresholded:
            option = "--threshold" if args.thresholds is None else "--thresholds"
            err(f"{option} needs the model (a predictions file holds only the top k of each instance)")
        if predict.on_dask(args):
            err("--scheduler/--dask-workers score a model; a predictions file is evaluated here")
        args.model, args.data = None, args.paths[0]
    else:
        if len(args.paths) != 2:
            err("expected MODEL_DIR TEST (or --predictions FILE TEST)")
        args.model, args.data = args.paths
    if args.save_metrics:
        common.check_output_file(args.save_metrics, "--save-metrics", args)

    from ..metrics import evaluate, propensities

    counts, n_train = None, None
    asked_propensity = args.propensity_a is not None or args.propensity_b is not None
    # a libsvm test file may name labels the model never saw: kept, as misses (common._label_width)
    args.labels_beyond_model = True
    if args.predictions:
        from ..io import read_predictions

        try:
            labels, scores = read_predictions(args.predictions)
        except DataFormatError as e:
            hint = _WHAT_ELSE.get(common.sniff_kind(args.predictions))
            if hint is None:
                raise
            raise DataFormatError(f"{e}; {hint}") from None
        label_space = _prediction_label_space(args.predictions)
        # headstart's own files (their header names num_labels) list each line's labels
        # in the order they were ranked: by score, except where shortlist-predict -k above
        # the first stage's K puts the added frequent labels after the stage's own
        # (docs/shortlist.md), which the command's --evaluate counts as listed.  Another
        # tool's file need not list its labels best first (a sparse score matrix lists
        # them by id): ranked by score (ties: the file's order)
        order = np.argsort(-scores, axis=1, kind="stable")
        if not np.array_equal(order, np.broadcast_to(np.arange(labels.shape[1]), order.shape)):
            if label_space is not None:
                log.info("%s: labels not in score order on some lines: ranked as listed (a headstart "
                         "predictions file)", args.predictions)
            else:
                log.info("%s: labels not listed best first on some lines: ranked by their scores",
                         args.predictions)
                labels = np.take_along_axis(labels, order, axis=1)
        # the features are not used: any raw ids (those of a hashed model's data too)
        args.wide_ids = True
        _, Y = common.read_dataset(args.data, args, n_labels=label_space)
        if label_space is None:     # DiSMEC++'s header 'n k': the test data's label space
            label_space = Y.shape[1]
            if labels.size and common.labels_may_widen(args, int(labels.max()) + 1, label_space):
                # a libsvm file's width is its largest label id: a predicted label that is
                # absent from the test set is no error there
                label_space = int(labels.max()) + 1
                Y = sp.csr_matrix((Y.data, Y.indices, Y.indptr), shape=(Y.shape[0], label_space))
            if labels.size and labels.max() >= label_space:
                row = int(np.argmax((labels >= label_space).any(axis=1)))
                bad = int(labels[row][labels[row] >= label_space][0])
                raise DataFormatError(f"label id {bad} out of range [0, {label_space}) of the test data's labels",
                                      args.predictions, row + 2)
        if Y.shape[1] != label_space and not common.labels_may_widen(args, Y.shape[1], label_space):
            raise DataFormatError(f"the test data has {Y.shape[1]} labels but the predictions file says "
                                  f"num_labels = {label_space}", args.data)
        if labels.shape[0] != Y.shape[0]:
            raise DataFormatError(f"the predictions file has {labels.shape[0]} rows but the test data has "
                                  f"{Y.shape[0]} instances", args.predictions)
        k = min(args.k, labels.shape[1]) if labels.shape[1] else args.k
        if k < args.k:
            log.warning("%s holds %d label(s) per instance: metrics up to k = %d", args.predictions,
                        labels.shape[1], k)
        labels = labels[:, :k]
    else:
        scorer = predict.ModelScorer(args.model, args)
        if thresholded:
            scorer.refuse_tree("--threshold/--thresholds")
        label_space = scorer.label_space
        # a thresholds file is read (and refused) before the long pass over the data
        decision = (predict.decision_threshold(args, label_space, scorer.manifest.get("params")) if thresholded
                    else None)
        # -k cut to the labels the model ranks, with a warning, as predict does (and as a
        # predictions file holding fewer cuts it, above)
        k = predict.k_for_model(args.k, scorer.num_trained, args.model)
        parts_l, parts_y = [], []
        predictions = predict.dask_predictions if predict.on_dask(args) else predict.iter_predictions
        for lab, _, Yc in predictions(scorer, args, k):
            parts_l.append(lab)
            parts_y.append(sp.csr_matrix(Yc))
        if not parts_l:
            raise common.no_instances(args.data, args, "evaluate")
        labels = np.vstack(parts_l)
        Y = sp.vstack(parts_y, format="csr")
        model_counts, model_n = scorer.label_counts()
        if model_counts is not None and model_n > 0:
            counts, n_train = model_counts, model_n
        # the propensity model the labels were weighted with in training, unless given
        trained = scorer.manifest["params"]
        for name in ("propensity_a", "propensity_b"):
            if getattr(args, name) is None and name in trained:
                setattr(args, name, float(trained[name]))
    if args.train:
        args.labels_beyond_model = False    # the training file defines the model's labels
        _, Ytr = common.read_dataset(args.train, args, n_labels=label_space, labels_file=args.train_labels,
                                      labels_option="--train-labels")
        if Ytr.shape[1] != label_space:
            raise DataFormatError(f"the training data has {Ytr.shape[1]} labels, the test data {label_space}",
                                  args.train)
        counts = np.asarray(Ytr.sum(axis=0)).ravel()
        n_train = Ytr.shape[0]
        if args.model is not None and scorer.manifest["params"].get("remove_no_label_data") is True:
            # N of the propensities is the rows the model was trained on, as in its
            # manifest and its propensity weighting: the file's rows with a label
            n_train = int(np.count_nonzero(np.diff(Ytr.indptr)))
    props = None
    if counts is None and asked_propensity:
        # helper-49: the options were ignored without a word
        log.warning("--propensity-a/-b given, but there are no training label counts to compute propensities "
                    "from: no propensity-scored metrics (give --train FILE%s)",
                    "" if args.model is None else ", or a model trained by headstart")
    if counts is not None and counts.size < Y.shape[1]:
        # the test file's labels beyond the model's: no training positive
        counts = np.concatenate([counts, np.zeros(Y.shape[1] - counts.size, dtype=counts.dtype)])
    if counts is not None:
        if n_train < 3:
            log.warning("only %d training instance(s): no propensity-scored metrics", n_train)
        else:
            given = {k: v for k, v in (("A", args.propensity_a), ("B", args.propensity_b)) if v is not None}
            props = propensities(counts, n_train, **given)
    if Y.shape[0] == 0:
        raise common.no_instances(args.data, args, "evaluate")
    if Y.shape[1] == 0:
        raise DataFormatError("the test data has no labels: there is nothing to evaluate", args.data)
    if Y.nnz == 0:      # (helper-102: a table of zeros came without a word)
        log.warning("no instance of %s has a label: every metric below is 0 (unlabelled data is for "
                    "'headstart predict')", args.data)
    metrics = evaluate(Y, labels, ks=metric_ks(k), propensities=props)
    extra, rule = (_threshold_scores(scorer, args, *decision) if thresholded else (None, ""))
    if args.dismec_metrics:
        from ..metrics import dismec_metrics

        extra = {**(extra or {}), **{key: v for key, v in dismec_metrics(Y, labels, metric_ks(k)).items()
                                      if key not in metrics}}
    print_metrics(metrics, args.json, extra)
    if extra and not args.json:
        f1 = {key: v for key, v in extra.items() if key.endswith("-F1")}
        if f1:
            print("  ".join(f"{key} {100 * v:.2f}" for key, v in f1.items()) + f"  (decisions: {rule})")
        if args.dismec_metrics:
            print("DiSMEC++'s metrics:")
            print("\n".join(f"{key:15} = {v:.4g}" for key, v in sorted(extra.items()) if key not in f1))
    if args.save_metrics:
        from ..io.atomic import atomic_write

        with atomic_write(args.save_metrics, "w") as fh:
            json.dump({**_finite_or_none(metrics), **_finite_or_none(extra or {})}, fh, indent=1)
            fh.write("\n")
    return 0


def _threshold_scores(scorer, args: argparse.Namespace, threshold, rule: str) -> tuple[dict, str]:
    """Micro-, Macro- and Another-Macro-F1 (and Macro-F1 over the test data's labels) of
    every label's decision score > ``threshold`` (a number or one per label), block by
    block of the test data (and shard by shard of a model held on disk); and the rule's
    description."""
    from ..metrics import (TEST_LABEL_MACRO_F1, decision_counts, f1_from_counts, label_counts,
                           macro_f1_over_test_labels)

    L = scorer.label_space
    tp = np.zeros(L, dtype=np.int64)
    pp = np.zeros(L, dtype=np.int64)
    rel = np.zeros(L, dtype=np.int64)

    def widen(a, width):    # test labels beyond the model's (common._label_width): never decided
        return np.concatenate([a, np.zeros(width - a.size, dtype=a.dtype)]) if a.size < width else a

    if predict.on_dask(args):
        # the workers send each decision's score; only the decisions themselves count
        decided = ((sp.csr_matrix((np.ones(D.nnz, dtype=np.int8), D.indices, D.indptr), shape=D.shape), r, Y)
                   for D, r, Y in predict.dask_predictions(scorer, args, 1, threshold))
    else:
        decided = predict.scored_blocks(scorer, args, 1, lambda X: scorer.above(X, threshold), progress=False)
    for D, _, Y in decided:
        if Y.shape[1] > D.shape[1]:
            D = sp.csr_matrix((D.data, D.indices, D.indptr), shape=(D.shape[0], Y.shape[1]))
            tp, pp, rel = (widen(a, Y.shape[1]) for a in (tp, pp, rel))
        a, b_, _ = decision_counts(Y, D, 0.5)   # D holds 1 for every decision above the threshold
        tp += a
        pp += b_
        rel += label_counts(Y)
    return {**f1_from_counts(tp, pp, rel), TEST_LABEL_MACRO_F1: macro_f1_over_test_labels(tp, pp, rel)}, rule


def _prediction_label_space(path: str) -> int | None:
    """The label count of a predictions file's header; None for DiSMEC++'s 'n k' header."""
    from ..io._common import first_line
    from ..io.predictions import prediction_label_space

    return prediction_label_space(first_line(path))
