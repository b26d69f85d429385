"""``headstart shortlist-predict MODEL_DIR DATA --first-stage DIR -o PREDICTIONS``:
candidates from the first stage, scored by the model, top-k out."""

from __future__ import annotations

import argparse
import logging

import numpy as np

from ..errors import DataFormatError, ParameterError
from ..validation import same_feature_space
from . import common, predict

log = logging.getLogger(__name__)

NAME = "shortlist-predict"
HELP = "predict top-k among the first stage's candidates (O(K) labels per instance)"
DESCRIPTION = """\
For every instance of DATA: its K candidate labels from the first stage saved by
'headstart shortlist --save-first-stage DIR', scored by the model's weights, the best k
written as 'label:score' tokens (the format of 'headstart predict'); an instance with
fewer than max(K, k) candidates (a first stage made with --no-fill, or -k above its K)
gets the most frequent training labels as further candidates.  A dense + sparse
model needs --dense X.npy (the dense features of DATA).  --evaluate prints P@k and the
recall of the candidates."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL_DIR")
    p.add_argument("data", metavar="DATA")
    p.add_argument("--first-stage", metavar="DIR", required=True, help="first stage saved by 'headstart shortlist'")
    p.add_argument("-o", "--output", metavar="PREDICTIONS", help="predictions file to write")
    p.add_argument("-k", type=common._number(int), default=5, help="labels per instance (default: 5)")
    p.add_argument("--dense", metavar="X.npy",
                   help="dense features of DATA (.npy or DiSMEC++'s dense text; dense + sparse models)")
    p.add_argument("--threads", type=common._number(int), default=0, help="threads (default: 0 = all cores)")
    p.add_argument("--evaluate", action="store_true", help="print P@1..k and the candidates' recall")
    p.add_argument("--label-names", metavar="FILE",
                   help="write each label as its name, line id + 1 of FILE (as 'headstart predict --label-names')")
    predict.add_header_option(p)
    common.add_data_options(p)


def run(args: argparse.Namespace) -> int:
    from ..io import read_dense_features, write_predictions
    from ..metrics import precision_at_k
    from ..shortlist import FirstStage, predict_model_dir, recall
    from ..shortlist.api import check_first_stage, open_model_dir

    if not args.output and not args.evaluate:
        args._parser.error("give -o/--output PREDICTIONS, --evaluate, or both")
    if not args.output and args.header != "headstart":
        raise ParameterError("--header is the predictions file's; give -o/--output PREDICTIONS")
    args.labels_unused = not args.evaluate   # predictions alone need no labels
    # a libsvm test file's label ids beyond the model's are positives no model ranks: misses,
    # as 'headstart evaluate' counts them (helper-59: refused here, counted there)
    args.labels_beyond_model = bool(args.evaluate)
    if args.output:
        common.check_output_file(args.output, "predictions file", args)
    m = open_model_dir(args.model)   # refuse an incomplete model before any work
    label_space = m["label_space"]
    fs = FirstStage.load(args.first_stage, threads=args.threads or None)
    check_first_stage(fs, m, args.model)   # before the data is read (predict_model_dir checks it too)
    args.k = predict.k_for_model(args.k, label_space, args.model)   # as 'headstart predict' cuts it
    names = predict.label_names(args, label_space) if args.output else None
    X, Y = common.read_dataset(args.data, args, n_features=fs.n_features, n_labels=label_space)
    if args.evaluate and Y.shape[1] != label_space and not common.labels_may_widen(args, Y.shape[1], label_space):
        # (an xmc header declares its label count; checked before the long scoring pass)
        raise DataFormatError(f"the data has {Y.shape[1]} labels but the model's label space has {label_space}; "
                              "--evaluate needs the same label ids", args.data, 1)
    if X.shape[0] == 0:     # (an empty predictions file, written silently, is no answer)
        raise common.no_instances(args.data, args, "evaluate" if args.evaluate else "predict")
    X = same_feature_space(X, fs.n_features, args.data)
    dense = read_dense_features(args.dense) if args.dense else None
    if dense is not None and dense.shape[0] != X.shape[0]:
        raise DataFormatError(f"{dense.shape[0]} rows of dense features for the {X.shape[0]} instances of "
                              f"{args.data}", args.dense)
    n_dense = int(m["dense"]["n_dense"]) if "dense" in m else 0
    if dense is not None and dense.shape[1] != n_dense:    # named with the file (helper-59)
        raise DataFormatError(f"{dense.shape[1]} columns of dense features, the model was trained on {n_dense}"
                              + ("" if n_dense else " (a sparse-only model: no --dense)"), args.dense)
    if dense is None and n_dense:
        raise ParameterError(f"{args.model} is a dense + sparse model: give the dense features of {args.data} "
                             "with --dense X.npy")
    # at least k candidates per instance, empty slots filled with frequent labels
    cand, _ = fs.prediction_candidates(X, args.k)
    # the model is read shard by shard: at 670K labels its weights need not fit in memory
    labels, scores = predict_model_dir(args.model, X, fs, args.k, dense=dense, threads=args.threads or None,
                                       candidates=cand)
    if args.output:
        write_predictions(args.output, labels, scores, label_space, names=names, header=args.header)
        if args.header != "headstart" and labels.shape[1] > 1 and np.any(np.diff(scores, axis=1) > 0):
            # the stage's own candidates listed first (-k above its K): evaluate reads
            # another header as another tool's, whose lines it ranks by score
            log.warning("%s: some lines list the first stage's candidates before added labels that score "
                        "higher (-k %d above its K = %d); 'evaluate --predictions' ranks a file with the %r "
                        "header by score: keep the default header to evaluate the ranking written",
                        args.output, args.k, fs.params.K, args.header)
    if args.evaluate:
        pk = " ".join(f"P@{k} {100 * precision_at_k(Y, labels, k):.2f}" for k in range(1, args.k + 1))
        # the result asked for: printed under -q too, as 'headstart evaluate' prints its table
        from .shortlist import _percent

        # the candidates a row really has: at most the labels there are (helper-89: "5 per
        # instance" said on a 3-label model)
        per = min(cand.shape[1], label_space)
        print(f"{pk}; candidates' recall {_percent(recall(cand, Y))} ({per} per instance)")
    return 0
