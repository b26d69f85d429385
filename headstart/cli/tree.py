"""``headstart tree TRAIN -o MODEL_DIR [--branching K] [--max-depth D] [training options]``:
a label tree (LibMultiLabel's ``train_tree``), predicted by ``headstart predict`` with
beam search (headstart.tree)."""

from __future__ import annotations

import argparse
import logging
import time

from . import common
from .train import _compiled

NAME = "tree"
HELP = "train a label tree: labels clustered by k-means, one one-vs-all problem per node (LibMultiLabel's tree)"
DESCRIPTION = """\
Cluster the labels of TRAIN recursively into a tree by k-means on their representations
(the normalised sum of each label's positive instances), at most --branching children per
node and --max-depth levels, and train one one-vs-all problem per node with the training
options given here: an internal node learns which of its children holds a relevant label,
a leaf learns its labels.  Only the root sees every instance; any other node is trained on
the instances with one of its labels, so where labels form clusters a tree costs a
fraction of full one-vs-all (debian-deps: a third, with P@k as good); where they do not,
it is faster but less accurate (docs/tree.md).  LibMultiLabel's 'tree' model, after
Bonsai.  'headstart predict MODEL_DIR DATA' then finds the top-k labels by beam search
(--beam-width nodes per level); 'headstart evaluate' scores the predictions file.
MODEL_DIR is written atomically."""

log = logging.getLogger("headstart.cli.tree")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.usage = "%(prog)s TRAIN -o MODEL_DIR [options]"
    p.add_argument("train", metavar="TRAIN", nargs="?", help="training data file")
    p.add_argument("-o", "--output", metavar="MODEL_DIR", help="model directory to write (required)")
    g = p.add_argument_group("tree")
    g.add_argument("--branching", type=common._number(int), default=100, metavar="K",
                   help="most children per node, >= 2 (default: 100, LibMultiLabel's K)")
    g.add_argument("--max-depth", type=common._number(int), default=10, metavar="D",
                   help="most levels below the root, >= 1 (default: 10, LibMultiLabel's dmax)")
    g.add_argument("--seed", type=common._number(int), default=0,
                   help="seed of the k-means seeding, >= 0 (default: 0)")
    g.add_argument("--trees", type=common._number(int), default=1, metavar="T",
                   help="an ensemble of T trees of the seeds --seed .. --seed + T - 1, their beam-search scores "
                        "averaged (LibMultiLabel's train_ensemble_tree, whose default is 3) (default: 1)")
    g.add_argument("--stats", metavar="FILE.csv",
                   help="write the training statistics of every binary problem (a node's output), one row each, "
                        "in the CSV columns of 'headstart train --stats' with 'label' the output's id, plus its "
                        "'rows' (the node's instances), 'node', 'label_id' (the label a leaf's output is, -1 for "
                        "a child node) and, with --trees, 'tree'; written atomically")
    common.add_memory_check(g)
    common.add_train_params(p)
    for action in p._actions:      # the shared training option, refused for a tree (run)
        if "--timeout" in action.option_strings:
            action.help = "not for a tree: every node must be trained (a time budget is refused)"
    common.add_data_options(p)


def tree_stats(trees: list):
    """The statistics of the trees' outputs (TreeModel.stats) in one table, tree after
    tree, with a ``tree`` column when there are several (their output ids repeat)."""
    import numpy as np

    from ..training.stats import ITER_FIELDS, TrainingStats

    if len(trees) == 1:
        return trees[0].stats
    parts = [t.stats for t in trees]
    cols = {k: np.concatenate([p.columns[k] for p in parts]) for k in parts[0].columns}
    cols["tree"] = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    return TrainingStats(cols, np.zeros(cols["label"].size + 1, dtype=np.int64),
                         {f: np.zeros(0) for f in ITER_FIELDS}, {})


def run(args: argparse.Namespace) -> int:
    from ..tree import fit_ensemble, fit_tree

    params = common.params_unless_printed(args)
    if params is None:
        return 0
    err = args._parser.error
    common.require(args, ("TRAIN", args.train), ("-o/--output MODEL_DIR", args.output))
    for option, value, least in (("--branching", args.branching, 2), ("--max-depth", args.max_depth, 1),
                                 ("--seed", args.seed, 0), ("--trees", args.trees, 1)):
        if value < least:
            err(f"argument {option}: must be >= {least}, got {value}")
    if params.timeout > 0:
        err("argument --timeout: a tree needs every node trained (no time budget)")
    if args.stats is not None and not args.stats.endswith(".csv"):
        err(f"argument --stats: {args.stats!r} must end in .csv (a tree keeps no per-iteration trajectories)")
    common.check_output_dir(args.output, keep_unfinished=True, ensemble=args.trees > 1)
    if args.stats:
        common.check_output_file(args.stats, "statistics file", args, model_dir=args.output)
    X, Y = common.read_training_data(args.train, args, params)
    # a binary problem per label and per child node, every output's weights kept until
    # the model is saved: at most 2L - 2 outputs (every inner node has two children or
    # more), the bound counted, since k-means splits unevenly (helper-121: debian-deps
    # built 6,032 nodes, not the L / (K - 1) = 234 of a full K-ary tree)
    L = Y.shape[1]
    outputs = args.trees * max(2 * L - 2, 1)
    common.check_training_memory(args, params, X, Y, f"training a tree of {L} labels ({outputs} binary problems)",
                                 count=outputs, fewer_labels="fewer --trees" if args.trees > 1 else "")
    t0 = time.perf_counter()
    with common.RowLocator(args.train, args).block(X.shape[0]), \
            common.ProgressBar(Y.shape[1], "train tree", "problems", enabled=not args.quiet) as bar:
        if args.trees == 1:
            model = fit_tree(X, Y, params, branching=args.branching, max_depth=args.max_depth, seed=args.seed,
                             progress=bar.advance, on_built=bar.set_total, own_data=True)
        else:
            model = fit_ensemble(X, Y, params, trees=args.trees, branching=args.branching,
                                 max_depth=args.max_depth, seed=args.seed, progress=bar.advance,
                                 on_built=bar.set_total, own_data=True)
    model.save(args.output)
    trees = [model] if args.trees == 1 else model.trees
    if args.stats:
        tree_stats(trees).write(args.stats)
    shape = "; ".join(f"{t.tree.num_nodes} nodes ({int(t.tree.leaf.sum())} leaves, depth "
                      f"{int(t.tree.depth.max()) if t.tree.num_nodes else 0})" for t in trees)
    common.say(args, f"trained {'a tree' if args.trees == 1 else f'{args.trees} trees'} of {shape}, "
                     f"{model.num_outputs} binary problems for {model.num_labels} labels in "
                     f"{time.perf_counter() - t0 - model.compile_seconds:.2f} s (trees built in "
                     f"{sum(t.build_seconds for t in trees):.2f} s){_compiled(None, model.compile_seconds)}, "
                     f"{sum(t.model.nnz for t in trees)} weights -> {args.output}")
    return 0
