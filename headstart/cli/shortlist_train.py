"""``headstart shortlist-train TRAIN --shortlist FILE -o MODEL_DIR``: each label on its
positives plus its shortlisted instances, on sparse or dense + sparse features."""

from __future__ import annotations

import argparse

from ..errors import ParameterError
from . import common
from .train import STATS_SUFFIXES


NAME = "shortlist-train"
HELP = "train every label on its positives plus its shortlist (sparse or dense + sparse features)"
DESCRIPTION = """\
Shortlisted one-vs-all training (docs/shortlist.md): label l is trained on its positives
plus the instances the shortlist file lists for it (DiSMEC++'s format, as written by
'headstart shortlist'), with the same objective, initialisation and stopping rule as
'headstart train' over that subset.  --dense X.npy adds dense features (one row per
training instance), with their own regularisation scale and normalisation.  Sharded,
resumable and Dask training work as for 'headstart train'."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("train", metavar="TRAIN", nargs="?", help="training data file (sparse features and labels)")
    p.add_argument("-o", "--output", metavar="MODEL_DIR", help="model directory to write")
    p.add_argument("--shortlist", metavar="FILE", help="shortlist file (DiSMEC++ format, instances x labels)")
    g = p.add_argument_group("dense + sparse features")
    g.add_argument("--dense", metavar="X.npy",
                   help="dense features of the training instances (.npy or DiSMEC++'s dense text, n x k)")
    g.add_argument("--sparse-reg", type=common._number(float), default=None, metavar="LAMBDA",
                   help="L2 scale of the sparse weights, with --dense (default: 1)")
    g.add_argument("--dense-reg", type=common._number(float), default=None, metavar="LAMBDA",
                   help="L2 scale of the dense weights, with --dense (default: 1)")
    for part in ("sparse", "dense"):
        g.add_argument(f"--{part}-reg-scale", type=common._number(float), default=None, metavar="S",
                       help=f"DiSMEC++ cascade's --{part}-reg-scale: its regulariser is S * sum w^2 (not 0.5 * "
                            f"lambda * sum w^2 as here), so this is --{part}-reg 2S; its default S = 1 is "
                            f"--{part}-reg 2")
    g.add_argument("--normalize-sparse", action="store_true", help="with --dense: L2-normalise the sparse part")
    g.add_argument("--normalize-dense", action="store_true", help="with --dense: L2-normalise the dense part")
    g.add_argument("--init-sparse", metavar="INIT", default=None,
                   help="with --dense: start the sparse part with this initialiser (e.g. aop, DiSMEC++'s msi); "
                        "a start per part replaces --init, a part without one starts from zero")
    g.add_argument("--init-dense", metavar="INIT", default=None,
                   help="with --dense: start the dense part with this initialiser, or 'file' (--init-dense-weights)")
    g.add_argument("--init-dense-weights", metavar="W.npy", default=None,
                   help="with --dense: start the dense part from these weights (.npy, labels x dense features, "
                        "in the model's feature space; implies --init-dense file)")
    g.add_argument("--init-dense-bias", metavar="B.npy", default=None,
                   help="with --init-dense-weights: start intercepts (.npy, one per label)")
    r = p.add_argument_group("labels, output, resumable and distributed training")
    r.add_argument("--first-label", type=common._number(int), default=0, metavar="A",
                   help="train labels A, A+1, ... only (default: 0)")
    r.add_argument("--num-labels", type=common._number(int), default=None, metavar="N",
                   help="number of labels to train from --first-label (default: all the rest)")
    r.add_argument("--stats", metavar="FILE", help="write per-label statistics to FILE: .csv one row per label, .json a "
                   "list of JSON objects, .jsonl one object per line")
    r.add_argument("--shard-size", type=common._number(int), default=None, metavar="N",
                   help="labels per shard file of the model, each written as soon as it is trained (default: "
                        "labels / (4 x threads), within 64..2048, on Dask too)")
    r.add_argument("--resume", action="store_true", help="continue the model in MODEL_DIR")
    r.add_argument("--scheduler", metavar="ADDRESS", default=None, help="train on this Dask cluster")
    r.add_argument("--dask-workers", type=common._number(int), default=None, metavar="N",
                   help="train on a local Dask cluster of N worker processes")
    common.add_memory_check(r)
    common.add_train_params(p)
    common.add_data_options(p)


def dismec_scales(args: argparse.Namespace) -> None:
    """--sparse-reg-scale / --dense-reg-scale (DiSMEC++ cascade's names and convention)
    as our --sparse-reg / --dense-reg: its dense + sparse objective regularises each part
    by S * sum w^2 (src/objective/dense_and_sparse.cpp, value w^2, gradient 2w), ours by
    0.5 * lambda * ||w||^2, as LIBLINEAR and the core do; lambda = 2S."""
    for part in ("sparse", "dense"):
        scale, reg = getattr(args, f"{part}_reg_scale"), getattr(args, f"{part}_reg")
        if scale is not None:
            if reg is not None:
                raise ParameterError(f"give --{part}-reg LAMBDA or --{part}-reg-scale S (DiSMEC++'s: LAMBDA = "
                                     "2S), not both")
            if not scale > 0.0:
                # DiSMEC++ takes 0 (no regularisation of that part); the core needs some
                raise ParameterError(f"--{part}-reg-scale must be > 0 (an unregularised part is not offered), "
                                     f"got {scale}")
            reg = 2.0 * scale
        setattr(args, f"{part}_given", scale is not None or reg is not None)
        setattr(args, f"{part}_reg", 1.0 if reg is None else reg)


def run(args: argparse.Namespace) -> int:
    from ..estimator import resolve_label_range

    params = common.params_unless_printed(args)
    if params is None:
        return 0
    err = args._parser.error
    common.require(args, ("TRAIN", args.train), ("-o/--output MODEL_DIR", args.output),
                   ("--shortlist FILE", args.shortlist))
    if args.stats is not None and not args.stats.endswith(STATS_SUFFIXES):
        err(f"argument --stats: {args.stats!r} must end in .csv, .jsonl or .json")
    dismec_scales(args)
    if args.dense is None and (args.normalize_dense or args.normalize_sparse or args.dense_given
                               or args.sparse_given or args.init_sparse or args.init_dense
                               or args.init_dense_weights or args.init_dense_bias):
        err("--sparse-reg(-scale)/--dense-reg(-scale)/--normalize-sparse/--normalize-dense/--init-sparse/"
            "--init-dense/"
            "--init-dense-weights/--init-dense-bias need --dense X.npy")
    given = [o for o, name in (("--init", "init"), ("--pretrained", "pretrained")) if hasattr(args, name)]
    if given and (args.init_sparse or args.init_dense or args.init_dense_weights):
        # the parts' starts replace --init (shortlist/starts.py): an --init given beside
        # them was recorded in the model but never used (helper-48)
        raise ParameterError(f"{' and '.join(given)}: the per-part starts (--init-sparse / --init-dense) replace "
                             "--init; give one or the other")
    common.check_output_dir(args.output, sharded="" if args.resume else "shortlist-train",
                            resume=args.resume)
    if args.stats:
        common.check_output_file(args.stats, "statistics file", args, model_dir=args.output)
    from ..io import read_dense_features
    from ..shortlist import DenseSparseParams, read_shortlist, train_shortlisted_dir

    X, Y = common.read_dataset(args.train, args)
    common.check_labelled_rows(args.train, Y, args)
    first, count = resolve_label_range(Y.shape[1], args.first_label, args.num_labels)
    # before the shortlist is read (two int64 per label of its header's label space):
    # what grows with the labels -- their statistics and per-label arrays -- at least; a
    # label's workspace is the size of its shortlisted rows, which the estimate does not
    # model (so the check never refuses by them)
    common.check_training_memory(args, params, X, Y, f"training {count} labels on their shortlists",
                                 first=first, count=count, collect=False,
                                 only=("statistics", "label arrays"), extra={"shortlist": 16 * Y.shape[1]},
                                 fewer_labels="a label range (--first-label/--num-labels)")
    S = read_shortlist(args.shortlist, n_instances=X.shape[0], n_labels=Y.shape[1])
    dense = dp = None
    if args.dense:
        dense = read_dense_features(args.dense)
        if dense.shape[0] != X.shape[0]:
            raise ParameterError(f"{args.dense}: {dense.shape[0]} rows, the training data has {X.shape[0]}")
        dp = DenseSparseParams(args.sparse_reg, args.dense_reg, args.normalize_sparse, args.normalize_dense,
                               args.init_sparse, args.init_dense, args.init_dense_weights, args.init_dense_bias)
    # an instance the preprocessing refuses is named by its place in the file
    with common.RowLocator(args.train, args).block(X.shape[0]), \
            common.shards_kept_on_interrupt("shortlist-train", args.output), \
            common.ProgressBar(count, "train", "labels", enabled=not args.quiet) as bar:
        r = train_shortlisted_dir(X, Y, params, S, args.output, dense=dense, dense_params=dp,
                                  first_label=first, num_labels=count, shard_size=args.shard_size,
                                  resume=args.resume, scheduler=args.scheduler,
                                  dask_workers=args.dask_workers, progress=bar.advance,
                                  source=str(args.shortlist))
    if args.stats:
        r.stats.write(args.stats)
    if common.said_nothing_left(args, r, first, count):
        return 0
    s = r.run_summary()
    compiled = float(r.info.get("compile_seconds", 0.0))
    common.say(args, f"trained {common.trained_range_words(r.trained_labels, first, count)} on their shortlists "
                     f"({S.nnz} shortlisted pairs) in {r.wall_seconds:.2f} s"
                     + (f" (+ {compiled:.1f} s compiling kernels, first run only)" if compiled > 1.0 else "")
                     + (f", {r.already_finished} were finished before" if r.already_finished else "")
                     + f": {s['newton_iterations']} Newton iterations, {r.nnz} nonzero weights"
                     + (" in the range" if r.already_finished else "") + f" -> {args.output}")
    missing = int(sum(b - a for a, b in r.missing))
    if params.timeout > 0 and missing > 0:
        common.say(args, f"time budget of {params.timeout:g} s reached: {missing} label(s) not started; "
                         f"continue with: headstart shortlist-train ... -o {args.output} --resume")
        return common.EXIT_INCOMPLETE
    return 0
