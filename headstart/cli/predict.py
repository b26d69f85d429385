"""``headstart predict MODEL_DIR DATA -o PREDICTIONS [-k 5]``: top-k labels per instance."""

from __future__ import annotations

import argparse
import logging
from typing import Any, Callable, Iterator

import numpy as np

from .. import resources
from .._threads import usable_cores
from ..errors import DataFormatError, ModelFormatError, ParameterError
from ..metrics import capped_k
from . import common

NAME = "predict"
HELP = "write the top-k labels with scores of every instance"
DESCRIPTION = """\
Write the k best labels of every instance of DATA as 'label:score' tokens, one line per
instance, after a header line 'num_points k num_labels'.  XMC text data is streamed in
blocks of rows; a model larger than --model-memory is streamed shard by shard.  The
output file appears complete or not at all.  With --threshold T, write instead every
label scoring above T ('label:score' tokens, best first, any number per line) after a
header 'num_points num_labels': a label file of the decisions, as LibMultiLabel's
positive predictions; with --thresholds FILE, the same with one threshold per label
(from 'headstart thresholds')."""

log = logging.getLogger("headstart.cli.predict")

DEFAULT_CHUNK_ROWS = 16384
DEFAULT_MODEL_MEMORY_MB = 1024


def add_prediction_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("prediction")
    g.add_argument("-k", type=common._number(int), default=None, help="number of labels per instance (default: 5)")
    g.add_argument("--threads", type=common._number(int), default=0,
                   help="prediction threads (default: 0 = all cores)")
    g.add_argument("--chunk-rows", type=common._number(int), default=DEFAULT_CHUNK_ROWS, metavar="N",
                   help=f"instances read and scored at a time (default: {DEFAULT_CHUNK_ROWS}); fewer with a large -k, "
                        "so that the top k of a block take at most "
                        f"{resources.TOPK_BLOCK_BYTES >> 20} MiB")
    g.add_argument("--model-memory", type=common._number(int), default=DEFAULT_MODEL_MEMORY_MB, metavar="MB",
                   help="load the model whole when its weights fit in MB megabytes, otherwise stream "
                        f"its shards for every block of instances (default: {DEFAULT_MODEL_MEMORY_MB})")
    g.add_argument("--max-memory", type=common._number(int), default=None, metavar="MB",
                   help="bound the memory of prediction: fewer instances are scored at a time (at most "
                        "--chunk-rows) and the model is streamed shard by shard unless reading it (about twice "
                        "its weights) fits in half of MB; a shard that alone does not fit is refused (train with "
                        "--shard-size).  The interpreter, its libraries and the compiled kernels (about 200 MB) "
                        "come on top (default: no bound beyond --chunk-rows and --model-memory)")
    g.add_argument("--allow-gaps", action="store_true",
                   help="predict with an incomplete model (labels without a shard are never predicted)")
    g.add_argument("--score-all-labels", action="store_true",
                   help="score a shortlisted model ('headstart shortlist-train') over every label, not only its "
                        "first stage's candidates (refused otherwise: labels trained on few negatives score "
                        "high everywhere)")
    g.add_argument("--beam-width", type=common._number(int), default=10, metavar="B",
                   help="label-tree models ('headstart tree'): nodes kept per level of the beam search "
                        "(default: 10, LibMultiLabel's)")
    g.add_argument("--beam-score", choices=("sigmoid", "squared-hinge"), default="sigmoid",
                   help="label-tree models: a node output s adds log sigmoid(A s) to its path (LibMultiLabel "
                        ">= 0.10) or -max(0, 1 - s)^2 (LibMultiLabel <= 0.9) (default: sigmoid)")
    g.add_argument("--sigmoid-a", type=common._number(float), default=3.0, metavar="A",
                   help="label-tree models: A of --beam-score sigmoid, > 0 (default: 3, LibMultiLabel's prob_A; "
                        "1: a logistic-loss model's own probabilities)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL_DIR", help="model directory written by 'headstart train'")
    p.add_argument("data", metavar="DATA", help="data file to predict")
    p.add_argument("-o", "--output", metavar="PREDICTIONS", required=True,
                   help="predictions file to write (gzip-compressed if it ends in .gz)")
    add_prediction_options(p)
    p.add_argument("--threshold", type=common._number(float), metavar="T", default=None,
                   help="write every label with score > T (0: the classifiers' sign) instead of the top k; "
                        "write a negative T as --threshold=-0.5")
    add_thresholds_option(p, "write every label with score > its threshold in FILE")
    p.add_argument("--probability", action="store_true",
                   help="write P(label | x) = 1 / (1 + exp(-score)) instead of the score (LIBLINEAR's -b 1 of "
                        "each label's own binary problem): logistic-loss models only; the ranking, and --threshold "
                        "T on the score, unchanged.  Per label, not normalised over the labels: LIBLINEAR's -b 1 "
                        "on multi-class data divides by the row's sum over all classes (the API's predict_proba "
                        "of a model fitted on one class per row does, and --liblinear=\"-b 1\")")
    p.add_argument("--label-names", metavar="FILE",
                   help="write each label as its name, line id + 1 of FILE (the XMC repository's label map, or "
                        "'convert --fit-vectorizer's directory): tokens 'name:score' separated by blanks (LibMultiLabel's "
                        "layout with --header none), by tabs if a name holds a blank")
    p.add_argument("--liblinear", nargs="?", const="", default=None, metavar="OPTIONS",
                   help="write LIBLINEAR predict's output file instead (OPTIONS: its own, -b 0 / -b 1 / -q; "
                        "-b 1 is --probability): one predicted class per line, with -b 1 a first line "
                        "'labels c1 c2 ...' and per line the class and its probabilities, normalised to sum to 1 "
                        "over the classes as LIBLINEAR does; prints 'Accuracy = x%% (a/b)'.  The classes are the "
                        "label ids with training positives, ascending (LIBLINEAR: in the order the training file "
                        "first shows them), a model of a +1/-1 file's one label the classes 1 and -1 (score > 0: "
                        "1); give it as --liblinear=\"-b 1\"")
    add_header_option(p)
    add_dask_options(p)
    common.add_data_options(p)


def add_header_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--header", choices=("headstart", "dismec", "none"), default="headstart",   # io.predictions.HEADERS
                   help="first line of a top-k file: 'headstart' = 'rows k labels' (default), 'dismec' = 'rows k' "
                        "as DiSMEC++'s predict writes it (pyxclib's read_sparse_file reads two numbers), 'none' = "
                        "the lines only, as LibMultiLabel writes them; evaluate --predictions reads all three")


def probability(args: argparse.Namespace, scorer: "ModelScorer") -> Callable:
    """What --probability makes of the scores written: the logistic model's own
    probability sigmoid(score) (the loss it was trained with is a log-likelihood, so this
    is its estimate; LIBLINEAR's -b 1), or the scores as they are without the option."""
    if not getattr(args, "probability", False):
        return lambda scores: scores
    if scorer.tree is not None:
        raise ParameterError(f"{scorer.model_dir}: a label tree's scores are already probabilities, those of its "
                             "beam search's paths (--beam-score sigmoid): drop --probability")
    loss = scorer.manifest.get("params", {}).get("loss")
    if loss != "logistic":
        raise ParameterError(f"{scorer.model_dir}: --probability needs a model trained with --loss logistic (its "
                             f"scores are log-odds); this one was trained with {loss or 'an unknown loss'}, whose "
                             "scores are no probabilities (as LIBLINEAR's -b 1, for logistic regression only)")
    from scipy.special import expit

    if getattr(args, "threshold", None) is not None and 0.0 < args.threshold < 1.0:
        log.warning("--threshold %g applies to the score (the log-odds), not to the probability: it keeps the labels "
                    "of probability > %.4g", args.threshold, expit(args.threshold))
    return expit


def label_names(args: argparse.Namespace, label_space: int):
    """The --label-names table for the writers (None without the option)."""
    if getattr(args, "label_names", None) is None:
        return None
    from ..io import read_label_names

    return read_label_names(args.label_names, label_space)


def add_dask_options(p: argparse.ArgumentParser) -> None:
    d = p.add_argument_group("prediction on Dask (docs/distributed.md)")
    d.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="score blocks of --chunk-rows instances on the Dask cluster of this scheduler "
                        "(tcp://host:8786 or a scheduler file .json); a model larger than --model-memory "
                        "must be readable by the workers at the same path")
    d.add_argument("--dask-workers", type=common._number(int), default=None, metavar="N",
                   help="score blocks of instances on a local Dask cluster of N worker processes")


def on_dask(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "scheduler", None) or getattr(args, "dask_workers", None))


def add_thresholds_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--thresholds", metavar="FILE", default=None,
                   help=f"{what} (one number per label, as 'headstart thresholds' writes them, or a .npy "
                        "vector); not with --threshold")


#: the training options that change the scale or meaning of a model's scores: thresholds
#: chosen by cross-validation with other values do not fit its scores
SCORE_OPTIONS = ("loss", "huber_epsilon", "C", "regularizer", "reg_scale", "reg_epsilon", "reg_l2_share", "weighting",
                 "propensity_a", "propensity_b", "weight_pos", "weight_neg", "bias", "regularize_bias",
                 "normalize", "tfidf", "feature_transform", "hash_buckets", "hash_functions", "hash_seed")


def score_options_differ(chosen_for: dict, model: dict) -> list[str]:
    """``--option A (model: B)`` for every score option whose value differs between the
    parameters thresholds were chosen with and the model's (options either lacks are not
    compared)."""
    return [f"--{k.replace('_', '-')} {chosen_for[k]!r} (model: {model[k]!r})" for k in SCORE_OPTIONS
            if k in chosen_for and k in model and chosen_for[k] != model[k]]


def decision_threshold(args: argparse.Namespace, label_space: int, model_params: dict | None = None):
    """The decision rule of --threshold T or --thresholds FILE: (a number or one number
    per label, its description for messages).  A thresholds file that says which training
    options it was chosen with (``headstart thresholds`` writes them in its first line) is
    compared with ``model_params``, and a difference that changes the scores is warned of."""
    if args.thresholds is None:
        return args.threshold, f"score > {args.threshold:g}"
    from ..io.labelvec import read_label_header, read_label_values

    values = read_label_values(args.thresholds, label_space, "thresholds", "threshold", owner="the model")
    header = read_label_header(args.thresholds)
    chosen_for = header.get("params") if header else None
    if isinstance(chosen_for, dict) and isinstance(model_params, dict):
        differ = score_options_differ(chosen_for, model_params)
        if differ:
            log.warning("%s: the thresholds were chosen for models trained with %s: this model's scores are on "
                        "another scale, so they may not fit it: choose them again with the model's training "
                        "options", args.thresholds, ", ".join(differ))
    return values, f"score > the label's threshold in {args.thresholds}"


def check_threshold_args(args: argparse.Namespace) -> None:
    import math

    err = args._parser.error
    if args.threshold is not None and args.thresholds is not None:
        err("arguments --threshold and --thresholds: give one of them")
    if args.threshold is not None and not math.isfinite(args.threshold):
        err(f"argument --threshold: must be a finite number, got {args.threshold}")


def check_prediction_args(args: argparse.Namespace) -> None:
    err = args._parser.error
    args.k_given = args.k is not None       # (predict --threshold writes no top k)
    if args.k is None:
        args.k = 5
    if args.k < 1:
        err(f"argument -k: must be >= 1, got {args.k}")
    if args.threads < 0:
        err(f"argument --threads: must be >= 0 (0 = all cores), got {args.threads}")
    if args.chunk_rows < 1:
        err(f"argument --chunk-rows: must be >= 1, got {args.chunk_rows}")
    if args.model_memory < 0:
        err(f"argument --model-memory: must be >= 0, got {args.model_memory}")
    if getattr(args, "max_memory", None) is not None and args.max_memory < 1:
        err(f"argument --max-memory: must be >= 1 (MB), got {args.max_memory}")
    # checked for every model, not only for trees (where it is used): a flat model
    # ignored an invalid value silently
    if getattr(args, "beam_width", 10) < 1:
        err(f"argument --beam-width: must be >= 1, got {args.beam_width}")


class ModelScorer:
    """Top-k over a model directory: the whole model in memory when it is small enough,
    else :func:`predict_topk_streaming` (one shard at a time) per block of instances."""

    def __init__(self, model_dir: str, args: argparse.Namespace):
        from ..model.manifest import read_manifest
        from ..model.ranges import missing_ranges_of

        from ..tree.ensemble import is_ensemble

        self.model_dir = model_dir
        self.tree = None
        self._narrow_warned = False
        if is_ensemble(model_dir):
            self._init_tree(model_dir, args)
            self.manifest = self.tree.manifest    # the trees' data and options: the first one's say
            return
        self.manifest = m = read_manifest(model_dir)
        if "tree" in m:
            self._init_tree(model_dir, args)
            return
        tree_only = (("--beam-width", "beam_width", 10), ("--beam-score", "beam_score", "sigmoid"),
                     ("--sigmoid-a", "sigmoid_a", 3.0))
        beam = [o for o, name, default in tree_only if getattr(args, name, default) != default]
        if beam:   # helper-50: ignored without a word
            log.warning("%s: for label-tree models; %s is a flat one-vs-all model: ignored", "/".join(beam), model_dir)
        if "dense" in m:   # before any block is read: its features are only the sparse part
            raise ModelFormatError(f"{model_dir}: a dense + sparse model needs the dense features of the data as "
                                   "well: predict with 'headstart shortlist-predict MODEL DATA --first-stage DIR "
                                   "--dense X.npy'")
        if "shortlist" in m and not getattr(args, "score_all_labels", False):
            # helper-59: each label learnt to tell its positives from its shortlisted
            # negatives only (one with none learns w = 0, bias +1: score +1 everywhere), so
            # scored over all labels debian-deps gave P@1 24.2 against 69.5 from its candidates
            raise ModelFormatError(f"{model_dir}: a shortlisted model ranks its first stage's candidates only: "
                                   "predict with 'headstart shortlist-predict MODEL DATA --first-stage DIR' "
                                   "(--score-all-labels scores every label anyway)")
        self.n_features = int(m["n_features"])
        # libsvm data (no header) is read at the model's width, except for a hashed model:
        # its raw features may be any ids, hashing maps them to the model's features
        self.data_features = None if m["preprocessing"]["hash"] else self.n_features
        args.wide_ids = self.data_features is None   # and any raw ids, up to 2^63 - 2
        self.label_space = int(m["label_space"])
        self.missing = missing_ranges_of(m)
        self.allow_gaps = bool(getattr(args, "allow_gaps", False))
        if self.missing and not self.allow_gaps:
            a, z = self.missing[0]
            covered = self.label_space - sum(b - c for c, b in self.missing)
            raise ModelFormatError(
                f"{model_dir}: model covers {covered} of {self.label_space} labels (missing "
                f"{len(self.missing)} range(s), first [{a}, {z})); train the rest, or pass --allow-gaps")
        self.num_trained = sum(s["num_labels"] for s in m["shards"])
        self.threads = args.threads
        nnz = sum(int(s["nnz"]) for s in m["shards"])
        weight_bytes = 8 * nnz + 12 * self.num_trained
        self.model = None
        self._preprocessing = None
        model_memory = args.model_memory * 2 ** 20
        max_mb = getattr(args, "max_memory", None)
        self.max_memory = None if max_mb is None else max_mb * 2 ** 20
        whole = weight_bytes <= model_memory
        if whole and self.max_memory is not None:
            # the model's peak while it is read and turned into its scoring form (about twice
            # the weights) within half the bound; the other half is for the blocks
            whole = self._memory_estimate(1, 1, streamed=False).details["model_peak"] <= self.max_memory // 2
        if whole:
            from ..model.reader import load_model

            from ..prediction.topk import prepare

            # the feature-major weights and the intercept order are built once, not per block
            self.model = prepare(load_model(model_dir, allow_gaps=self.allow_gaps))
            log.info("%s: %d labels, %d weights loaded (%s)", model_dir, self.num_trained, nnz,
                     common.human_bytes(weight_bytes))
        else:
            log.info("%s: %s of weights > --model-memory%s: streaming %d shard(s) per block", model_dir,
                     common.human_bytes(weight_bytes),
                     "" if weight_bytes > model_memory else " (or reading them > half of --max-memory)",
                     len(m["shards"]))

    def _init_tree(self, model_dir: str, args: argparse.Namespace) -> None:
        """A label-tree model or an ensemble of trees (headstart.tree): loaded whole, top-k
        by beam search."""
        from ..tree import is_ensemble, load_ensemble, load_tree

        if not 0 < getattr(args, "sigmoid_a", 3.0) < float("inf"):
            args._parser.error(f"argument --sigmoid-a: must be a number > 0, got {args.sigmoid_a}")
        self.tree = load_ensemble(model_dir) if is_ensemble(model_dir) else load_tree(model_dir)
        self.model = None
        self.beam = dict(beam_width=getattr(args, "beam_width", 10), score=getattr(args, "beam_score", "sigmoid"),
                         sigmoid_a=getattr(args, "sigmoid_a", 3.0))
        self.threads = args.threads
        self.max_memory = None
        self.n_features = self.tree.model.n_features
        self.data_features = None if self.tree.model.preprocessing.hashing else self.n_features
        args.wide_ids = self.data_features is None
        self.label_space = self.num_trained = self.tree.num_labels
        self.missing = []
        trees = getattr(self.tree, "trees", [self.tree])
        log.info("%s: %d label tree(s) of %s nodes, %d outputs, %d weights", model_dir, len(trees),
                 "/".join(str(t.tree.num_nodes) for t in trees), self.tree.num_outputs,
                 sum(t.model.nnz for t in trees))

    def label_counts(self) -> tuple[np.ndarray | None, int]:
        """(training positives per label, training instances) stored with the model."""
        if self.tree is not None:
            return self.tree.label_counts(), int(self.manifest["n_train"])
        from ..model.extras import read_extras

        _, counts = read_extras(self.model_dir, self.manifest)
        return counts, int(self.manifest["n_train"])

    def topk(self, X, k: int) -> tuple[np.ndarray, np.ndarray]:
        from ..prediction.topk import predict_topk, predict_topk_streaming

        if self.tree is not None:
            return self.tree.predict_topk(X, k, threads=self.threads, **self.beam)

        kw = {} if self.max_memory is None else {"max_memory": self.max_memory}
        if self.model is not None:
            return predict_topk(self.model, X, k, threads=self.threads, **kw)
        return predict_topk_streaming(self.model_dir, X, k, threads=self.threads, allow_gaps=self.allow_gaps,
                                      **kw)

    def check_block(self, X, Y, args: argparse.Namespace) -> None:
        """Refuse a block of DATA whose label space or (unhashed) width is not the model's,
        naming the file."""
        what = None
        # (evaluate: a libsvm file's label ids beyond the model's; an xmc header declares its
        # label space, which must be the model's)
        beyond = getattr(args, "labels_beyond_model", False) and common.labels_may_widen(args, Y.shape[1],
                                                                                          self.label_space)
        if Y.shape[1] != self.label_space and not getattr(args, "labels_unused", False) and not beyond:
            what = (f"the data has {Y.shape[1]} labels but the model's label space has {self.label_space}; they "
                    "must be the same label ids")
        elif self.data_features is not None and X.shape[1] > self.n_features:
            what = (f"the data has {X.shape[1]} features but the model was trained on {self.n_features}; they must "
                    "be the same feature ids")
        elif self.data_features is not None and X.shape[1] < self.n_features:
            if not hasattr(X, "tocsr"):
                # a dense array's width is its feature space: fewer columns are other features
                what = (f"the dense features have {X.shape[1]} columns but the model was trained on "
                        f"{self.n_features}; they must be the same columns")
            elif not self._narrow_warned:
                self._narrow_warned = True
                log.warning("%s: the data declares %d features, the model was trained on %d: the features beyond "
                            "are read as absent (right only if the ids are the same)", args.data, X.shape[1],
                            self.n_features)
        if what is not None:   # the header's line, where the file has one
            raise DataFormatError(what, args.data, 1 if count_rows(args.data, args) is not None else None)

    def above(self, X, threshold, return_scores: bool = False):
        """The decisions score > ``threshold`` (a number or one per label) of the
        instances X (CSR over the label space; with ``return_scores`` the scores as
        values), shard by shard when the model is streamed."""
        from ..prediction.topk import predict_above, predict_above_streaming

        self.refuse_tree("decision thresholds (--threshold/--thresholds)")

        kw = dict(threads=self.threads, return_scores=return_scores)
        if self.max_memory is not None:
            kw["max_memory"] = self.max_memory
        if self.model is not None:
            return predict_above(self.model, X, threshold, n_columns=self.label_space, **kw)
        return predict_above_streaming(self.model_dir, X, threshold, allow_gaps=self.allow_gaps,
                                       manifest=self.manifest, preprocessing=self.preprocessing(), **kw)

    def refuse_tree(self, what: str) -> None:
        if self.tree is not None:
            raise ParameterError(f"{self.model_dir}: a label-tree model scores only the labels its beam search "
                                 f"reaches: {what} is for one-vs-all models; predict the top k")

    def preprocessing(self):
        """The model's preprocessing (read once, for scoring shard by shard)."""
        if self._preprocessing is None:
            from ..model import read_extras
            from ..model.model import scoring_preprocessing

            self._preprocessing = scoring_preprocessing(read_extras(self.model_dir, self.manifest)[0], self.manifest)
        return self._preprocessing

    def topk_rows(self, args: argparse.Namespace, k: int) -> int:
        """--chunk-rows, fewer when the top ``k`` of a block would take more than
        resources.TOPK_BLOCK_BYTES: the labels, scores and the writer's copies of a block
        grow with rows x k (-k 200000 over 500 instances took 2.2 GB as one block); the
        predictions are the same whatever the blocks (every row is scored on its own)."""
        rows = resources.topk_block_rows(k, args.chunk_rows, streamed=self.model is None and self.tree is None)
        if rows < args.chunk_rows:
            log.info("-k %d: %d instances per block (their top k within %s)", k, rows,
                     resources.format_bytes(resources.TOPK_BLOCK_BYTES))
        return rows

    def chunk_rows(self, args: argparse.Namespace, k: int) -> int:
        """Instances per block: :meth:`topk_rows`, fewer when --max-memory says so
        (headstart.resources)."""
        limit = self.topk_rows(args, k)
        if self.max_memory is None:
            return limit
        m = self.manifest
        # in memory a stored value takes 8 bytes where the text spends at least 4 ("1:1 ")
        row_bytes = 2 * resources.text_bytes_per_row(args.data)
        if m["preprocessing"]["hash"]:  # the hashed copy of a block: up to R values per raw value
            row_bytes *= 1 + m["preprocessing"]["hash"]["functions"]
        rows = resources.prediction_chunk_rows(self.max_memory, **self._estimate_args(k), row_bytes=row_bytes,
                                               streamed=self.model is None, limit=limit)
        est = self._memory_estimate(rows, k, streamed=self.model is None, row_bytes=row_bytes)
        log.info("--max-memory %s: %d instances per block (estimated peak %s: %s)",
                 resources.format_bytes(self.max_memory), rows, resources.format_bytes(est.total), est.describe())
        return rows

    def _estimate_args(self, k: int) -> dict:
        """The model's numbers for :mod:`headstart.resources`' prediction estimates."""
        m = self.manifest
        big = max(m["shards"], key=lambda s: s["nnz"], default={"num_labels": 0, "nnz": 0})
        return dict(n_features=self.n_features, n_labels=self.label_space,
                    weight_nnz=sum(int(s["nnz"]) for s in m["shards"]), k=k,
                    threads=self.threads or usable_cores(), shard_labels=big["num_labels"], shard_nnz=big["nnz"],
                    tfidf=bool(m["preprocessing"]["tfidf"]))

    def _memory_estimate(self, rows: int, k: int, **kw):
        return resources.estimate_prediction_memory(rows, **self._estimate_args(k), **kw)


def count_rows(path: str, args: argparse.Namespace) -> int | None:
    """Number of instances when it is cheap to know (XMC header), for the progress bar."""
    from .. import io as hio

    fmt = args.data_format
    if fmt == "auto" and not args.labels_file:
        fmt = hio.detect_format(path)
    if fmt == "xmc":
        return hio.read_xmc_header(path, common.wide_ids(args))[0]
    return None


def scored_blocks(scorer: ModelScorer, args: argparse.Namespace, k: int, score: Callable, progress: bool = True
                  ) -> Iterator[tuple[Any, Any, Any]]:
    """(score(X), X, Y) per block of DATA (blocks sized for k labels per instance), each
    checked against the model, an instance refused by the preprocessing named by its
    place in the file; with a progress bar over instances."""
    total = count_rows(args.data, args) if progress else None
    where = common.RowLocator(args.data, args)
    rows = 0
    with common.ProgressBar(total or 0, args.command, "instances",
                            enabled=not args.quiet and total is not None) as bar:
        for X, Y in common.iter_batches(args.data, args, scorer.chunk_rows(args, k), n_features=scorer.data_features,
                                        n_labels=scorer.label_space):
            scorer.check_block(X, Y, args)
            with where.block(X.shape[0]):
                result = score(X)
                check_finite(result, X)
            yield result, X, Y
            bar.advance(X.shape[0])
            rows += X.shape[0]
    if not rows:   # raised into the caller's writer: no output appears
        raise common.no_instances(args.data, args, args.command)


def check_finite(result: Any, X: Any | None) -> None:
    """Refuse an instance whose scores are not finite (raised with its row in the block,
    named by its place in the file by the caller's RowLocator) before anything of it is
    written: feature values near float32's limit (3.4e38, which the readers accept) times
    the weights overflow to infinity, or to NaN where infinities cancel.  A predictions
    file holds finite scores (read_predictions), and neither a ranking of infinities nor
    metrics over it would mean anything.  ``result``: top-k's (labels, scores), whose
    padding (label -1, score -inf) is no score, or decisions as a sparse matrix."""
    from ..prediction.topk import nonfinite_row

    row = nonfinite_row(result)
    if row is None:
        return
    values = np.zeros(0)
    if X is not None:     # (Dask: the block stays on the worker)
        x = X[row]
        values = x.data if hasattr(x, "data") and not isinstance(x, np.ndarray) else np.ravel(x)
    big = f" (up to {float(np.max(np.abs(values))):.4g} in absolute value)" if values.size else ""
    raise DataFormatError(f"the scores of this instance are not finite: its feature values{big} overflow with "
                          f"the model's weights; scale the data down", row=row)


def iter_predictions(scorer: ModelScorer, args: argparse.Namespace, k: int
                     ) -> Iterator[tuple[np.ndarray, np.ndarray, object]]:
    """(labels, scores, Y) per block of DATA, with a progress bar over instances."""
    for (labels, scores), _, Y in scored_blocks(scorer, args, k, lambda X: scorer.topk(X, k)):
        yield labels, scores, Y


def dask_predictions(scorer: ModelScorer, args: argparse.Namespace, k: int, threshold: Any = None
                     ) -> Iterator[tuple[Any, ...]]:
    """Like :func:`iter_predictions` (or, with a ``threshold``, (decisions, rows, Y) per
    block), with the blocks scored on Dask workers (in order); the blocks' labels Y stay
    here, queued until their block's result arrives."""
    from collections import deque

    from ..distributed.dask_backend import iter_predict_dask

    scorer.refuse_tree("prediction on Dask (--scheduler/--dask-workers)")
    if args.dask_workers is not None and args.dask_workers < 1:
        args._parser.error(f"argument --dask-workers: must be >= 1, got {args.dask_workers}")
    sent: deque = deque()

    def blocks():
        rows = 0
        for X, Y in common.iter_batches(args.data, args, scorer.topk_rows(args, k),
                                        n_features=scorer.data_features, n_labels=scorer.label_space):
            scorer.check_block(X, Y, args)
            sent.append((X.shape[0], Y))
            rows += X.shape[0]
            yield X
        if not rows:
            raise common.no_instances(args.data, args, args.command)

    where = common.RowLocator(args.data, args)
    for out in iter_predict_dask(args.model, blocks(), k, scheduler=args.scheduler,
                                 n_workers=args.dask_workers, threads=args.threads or None,
                                 model_memory=args.model_memory * 2 ** 20,
                                 allow_gaps=args.allow_gaps, threshold=threshold):
        rows, Y = sent.popleft()
        with where.block(rows):
            check_finite(out, None)
        yield (out, rows, Y) if threshold is not None else (*out, Y)


def run(args: argparse.Namespace) -> int:
    check_prediction_args(args)
    from ..io import PredictionWriter

    # prediction reads no labels: a .npy needs no --labels, a file's label count may differ
    args.labels_unused = True

    check_threshold_args(args)
    common.check_output_file(args.output, "predictions file", args)
    if args.liblinear is not None:
        return run_liblinear(args)
    if args.header != "headstart" and (args.threshold is not None or args.thresholds is not None):
        raise ParameterError("--header is for top-k files; --threshold/--thresholds write a label file, whose "
                             "header 'rows labels' every reader takes (pyxclib's too)")
    if args.threshold is not None or args.thresholds is not None:
        if args.k_given:
            log.warning("-k is not used with --threshold/--thresholds: every label above the threshold is "
                        "written; ignored")
        return run_threshold(args)
    scorer = ModelScorer(args.model, args)
    k = k_for_model(args.k, scorer.num_trained, args.model)
    written = probability(args, scorer)
    n = 0
    # the row count known at the start: the header is final, not padded for a rewrite (helper-49)
    with PredictionWriter(args.output, k, scorer.label_space, n_rows=common.announced_rows(args.data, args),
                          names=label_names(args, scorer.label_space), header=args.header) as writer:
        for labels, scores, _ in (dask_predictions if on_dask(args) else iter_predictions)(scorer, args, k):
            writer.write(labels, written(scores))
            n += labels.shape[0]
    common.say(args, f"wrote top-{k} predictions of {n} instances -> {args.output}")
    return 0


def k_for_model(k: int, labels: int, model_dir: str) -> int:
    """``-k`` cut to the model's ``labels`` trained labels, with a warning; a model
    without any is refused."""
    if capped_k(k, labels) < k:
        log.warning("the model has only %d label(s): k = %d labels per instance", labels, labels)
        k = capped_k(k, labels)
    if k == 0:
        raise ModelFormatError(f"{model_dir}: the model has no trained labels")
    return k


def run_threshold(args: argparse.Namespace) -> int:
    """``predict --threshold T`` / ``--thresholds FILE``: every label with score > its
    threshold, per block of instances."""
    from ..io import DecisionWriter

    scorer = ModelScorer(args.model, args)
    scorer.refuse_tree("--threshold/--thresholds")
    if scorer.num_trained == 0:
        raise ModelFormatError(f"{args.model}: the model has no trained labels")
    threshold, rule = decision_threshold(args, scorer.label_space, scorer.manifest.get("params"))
    names = label_names(args, scorer.label_space)
    written = probability(args, scorer)
    if on_dask(args):
        decided = dask_predictions(scorer, args, 1, threshold)
    else:
        decided = ((D, X.shape[0], Y) for D, X, Y in
                   scored_blocks(scorer, args, 1, lambda X: scorer.above(X, threshold, return_scores=True)))
    n = nnz = 0
    with DecisionWriter(args.output, scorer.label_space, n_rows=common.announced_rows(args.data, args),
                        names=names) as writer:
        for D, rows, _ in decided:
            D.data = written(D.data)
            writer.write(D)
            n += rows
            nnz += D.nnz
    common.say(args, f"wrote the decisions {rule} of {n} instances ({nnz} labels, "
                     f"{nnz / max(n, 1):.2f} per instance) -> {args.output}")
    return 0


def liblinear_options(args: argparse.Namespace) -> bool:
    """Whether ``--liblinear OPTIONS`` (LIBLINEAR predict's options: ``-b 0|1``, ``-q``)
    asks for probabilities; refuses other options, and the options of the top-k and
    decision files that this output has no place for."""
    import shlex

    err = args._parser.error
    try:
        tokens = shlex.split(args.liblinear)
    except ValueError as e:
        err(f"argument --liblinear: cannot split {args.liblinear!r} into options: {e}")
    b = None
    k = 0
    while k < len(tokens):
        if tokens[k] == "-q":
            args.quiet = True
            k += 1
        elif tokens[k] == "-b":
            if k + 1 >= len(tokens) or tokens[k + 1] not in ("0", "1"):
                err(f"argument --liblinear: -b needs 0 or 1 (LIBLINEAR predict's probability_estimates), "
                    f"in {args.liblinear!r}")
            b = tokens[k + 1] == "1"
            k += 2
        else:
            err(f"argument --liblinear: {tokens[k]!r} is not an option of LIBLINEAR's predict here (-b 0|1, -q), "
                f"in {args.liblinear!r}")
    if b is False and args.probability:
        err("arguments --liblinear=\"-b 0\" and --probability: give one of them")
    for given, what in ((args.threshold is not None or args.thresholds is not None, "--threshold/--thresholds"),
                        (args.label_names is not None, "--label-names"), (args.header != "headstart", "--header"),
                        (on_dask(args), "--scheduler/--dask-workers")):
        if given:
            err(f"argument --liblinear: LIBLINEAR's output file has no place for {what}")
    if args.k_given:
        log.warning("-k is not used with --liblinear: one class per instance is written; ignored")
    return bool(b) or args.probability


def liblinear_classes(scorer: ModelScorer) -> tuple[np.ndarray, bool]:
    """(the classes LIBLINEAR's model of the training file would have, whether the model
    is the one label of a +1/-1 file): the label ids with training positives, ascending,
    or for a model of one label the classes 1 and -1."""
    if scorer.label_space == 1:
        return np.array([1, -1]), True
    counts, _ = scorer.label_counts()
    classes = np.arange(scorer.label_space) if counts is None else np.flatnonzero(np.asarray(counts) > 0)
    if scorer.missing:     # (--allow-gaps) labels without a shard are never predicted
        trained = np.ones(scorer.label_space, dtype=bool)
        for a, z in scorer.missing:
            trained[a:z] = False
        classes = classes[trained[classes]]
    if classes.size == 0:
        raise ModelFormatError(f"{scorer.model_dir}: no label of the model had a training positive: there is no "
                               "class to predict")
    return classes, False


def run_liblinear(args: argparse.Namespace) -> int:
    """``predict --liblinear [OPTIONS]``: LIBLINEAR predict's output file (one class per
    line; with ``-b 1`` a 'labels ...' line first and the class's probabilities, summing
    to 1) and its 'Accuracy = x% (a/b)' line on stdout."""
    from scipy.special import expit

    from ..io.atomic import atomic_write

    probabilities = liblinear_options(args)
    args.probability = probabilities
    # the true classes are read for the accuracy; test-only classes are kept, as misses
    args.labels_unused = False
    args.labels_beyond_model = True
    scorer = ModelScorer(args.model, args)
    scorer.refuse_tree("--liblinear (one class per instance from every label's score)")
    if scorer.num_trained == 0:
        raise ModelFormatError(f"{args.model}: the model has no trained labels")
    probability(args, scorer)           # refuses --probability (-b 1) for other losses, as LIBLINEAR does
    classes, binary = liblinear_classes(scorer)
    k = scorer.num_trained
    correct = total = multi = 0
    with atomic_write(args.output, "w") as out:
        if probabilities:
            out.write("labels " + " ".join(str(int(c)) for c in classes) + "\n")
        for (labels, scores), _, Y in scored_blocks(scorer, args, k, lambda X: scorer.topk(X, k)):
            n = labels.shape[0]
            if binary:
                s = np.where(labels[:, 0] == 0, scores[:, 0], -np.inf).astype(np.float64)
                first = s > 0                               # LIBLINEAR: dec_values[0] > 0 -> label[0] = +1
                predicted = np.where(first, 1, -1)
                p = expit(s)[:, None] * np.array([1.0, -1.0]) + np.array([0.0, 1.0])   # (p, 1 - p)
                truth_hit = first == (np.diff(Y.indptr) > 0)
            else:
                S = np.full((n, scorer.label_space), -np.inf)
                rows = np.repeat(np.arange(n), labels.shape[1]).reshape(n, -1)
                kept = labels >= 0
                S[rows[kept], labels[kept]] = scores[kept]
                S = S[:, classes]
                # LIBLINEAR's one-vs-rest prediction: the class of the largest decision value
                predicted = classes[np.argmax(S, axis=1)]
                p = expit(S)
                if classes.size > 1:   # LIBLINEAR -b 1: the classes' sigmoids divided by their sum
                    p /= p.sum(axis=1, keepdims=True)
                Yc = Y.tocsr()
                truth_hit = np.asarray(Yc[np.arange(n), predicted]).ravel() != 0
                multi += int(np.count_nonzero(np.diff(Yc.indptr) > 1))
            if probabilities:
                for c, row in zip(predicted.tolist(), p.tolist()):
                    out.write(f"{c} " + " ".join("%g" % v for v in row) + "\n")
            else:
                out.write("".join(f"{c}\n" for c in predicted.tolist()))
            correct += int(truth_hit.sum())
            total += n
    if multi:
        # LIBLINEAR reads one class per line; cv refuses its Accuracy on such data
        log.warning("%s: %d of %d instances have more than one label, which LIBLINEAR's files cannot hold: the "
                    "accuracy counts an instance right when its predicted class is one of its labels (P@1)",
                    args.data, multi, total)
    common.say(args, "Accuracy = %g%% (%d/%d)" % (100.0 * correct / max(total, 1), correct, total))
    return 0
