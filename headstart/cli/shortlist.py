"""``headstart shortlist TRAIN -o SHORTLIST [options]``: every training instance's K
candidate labels (the first stage), written as DiSMEC++'s shortlist file."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ..errors import DataFormatError
from ..validation import same_feature_space
from . import common

NAME = "shortlist"
HELP = "make the shortlist of candidate labels per training instance (first stage, docs/shortlist.md)"
DESCRIPTION = """\
For every training instance, its K candidate labels: the labels of its nearest training
instances (method 'neighbours', default) or the labels whose centroid is nearest
(method 'centroids'), by cosine similarity.  Written in DiSMEC++'s shortlist format
(instances x labels, 'label:1' tokens), which 'headstart shortlist-train --shortlist'
reads.  Reports the recall of the shortlist (the fraction of positives among the
candidates: leave-one-out on the training data, and on --test data when given)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..shortlist.candidates import BACKENDS, METHODS

    p.add_argument("train", metavar="TRAIN", help="training data file")
    p.add_argument("-o", "--output", metavar="SHORTLIST", required=True,
                   help="shortlist file to write (gzip-compressed if it ends in .gz)")
    g = p.add_argument_group("first stage")
    g.add_argument("-K", "--candidates", dest="K", type=common._number(int), default=100, metavar="K",
                   help="candidate labels per instance (default: 100)")
    g.add_argument("--method", choices=METHODS, default="neighbours",
                   help="neighbours: labels of the nearest training instances; centroids: nearest label "
                        "centroids (default: neighbours)")
    g.add_argument("--neighbours", type=common._number(int), default=30, metavar="k",
                   help="nearest training instances per instance, method neighbours (default: 30)")
    g.add_argument("--backend", choices=sorted(BACKENDS), default="exact",
                   help="exact: brute force over an inverted index; pruned: the same over each indexed row's "
                        "--keep largest entries (approximate, for large data sets); pynndescent: approximate "
                        "(pip install 'headstart[ann]') (default: exact)")
    g.add_argument("--keep", type=common._number(int), default=32, metavar="N",
                   help="backend pruned: entries kept per indexed row (default: 32)")
    g.add_argument("--no-fill", dest="fill", action="store_false",
                   help="method neighbours: leave the slots the neighbours' labels do not fill empty instead of "
                        "filling them with the most frequent labels (fewer pairs, cheaper training)")
    g.add_argument("--train-candidates", dest="train_K", type=common._number(int), default=0, metavar="N",
                   help="candidate labels per training instance, i.e. the shortlist's size, when it should be "
                        "larger than the K that prediction ranks among (at least K; default: K). Training on more "
                        "candidates than prediction asks for is the cheaper way to accuracy: docs/shortlist.md")
    g.add_argument("--random-negatives", type=common._number(int), default=0, metavar="R",
                   help="also give every label R training instances drawn at random: easy negatives that anchor "
                        "its scores away from its neighbourhood (default: 0)")
    g.add_argument("--seed", type=common._number(int), default=0, help="seed of --random-negatives (default: 0)")
    g.add_argument("--threads", type=common._number(int), default=0, help="threads (default: 0 = all cores)")
    g.add_argument("--test", metavar="DATA", help="also report the recall of the candidates of this data")
    g.add_argument("--test-labels", metavar="FILE",
                   help="the label file of --test when it is dense .npy features (slice format; --labels "
                        "is TRAIN's)")
    g.add_argument("--save-first-stage", metavar="DIR",
                   help="save the first stage here, for 'headstart shortlist-predict --first-stage DIR'")
    common.add_data_options(p)


#: what a first stage's directory holds (FirstStage.save); an earlier one is replaced
FIRST_STAGE_FILES = {"first_stage.json", "first_stage.npz"}


def check_first_stage_dir(path: str) -> None:
    """Refuse --save-first-stage DIR before the work, as every other output is refused:
    a file there (helper-48), a missing parent (it was created silently), a directory that
    cannot take files (it failed after the shortlist was written), or a directory holding
    anything but an earlier first stage -- a model directory among them, which 'info'
    then no longer recognised (helper-89)."""
    from ..errors import ParameterError

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ParameterError(f"{path}: --save-first-stage names a directory; a file is there")
    if not p.exists():
        if not p.parent.is_dir():
            why = "is not a directory" if p.parent.exists() else "does not exist"
            raise ParameterError(f"{path}: parent directory {p.parent} {why}")
        common._check_writable(p.parent, path, "the first stage")
        return
    other = sorted(q.name for q in p.iterdir() if q.name not in FIRST_STAGE_FILES)
    if other:
        raise ParameterError(f"{path}: exists and holds other files than a first stage ({', '.join(other[:3])}"
                             f"{' ...' if len(other) > 3 else ''}); refusing to write into it: give a new or an "
                             "empty directory")
    common._check_writable(p, path, "the first stage", "first_stage.json")


def _percent(fraction: float) -> str:
    """A recall as a percentage; data without a positive has none to recall (not 'nan%')."""
    return "n/a (no positives)" if fraction != fraction else f"{100 * fraction:.2f}%"


def run(args: argparse.Namespace) -> int:
    from ..errors import ParameterError
    from ..shortlist import FirstStageParams, build_shortlist, recall, write_shortlist

    if args.test_labels and not args.test:
        raise ParameterError("--test-labels is the label file of --test: give --test too")
    common.check_output_file(args.output, "shortlist file", args)
    if args.save_first_stage:
        check_first_stage_dir(args.save_first_stage)
    if 0 < args.train_K < args.K:
        raise ParameterError(f"--train-candidates {args.train_K} is fewer than -K {args.K}: the training shortlist "
                             "must hold at least the candidates prediction ranks among (docs/shortlist.md)")
    try:
        fsp = FirstStageParams(method=args.method, K=args.K, neighbours=args.neighbours, backend=args.backend,
                               fill=args.fill, keep=args.keep, train_K=args.train_K,
                               random_negatives=args.random_negatives, seed=args.seed)
    except ParameterError as e:
        raise ParameterError(_stage_option_wording(str(e), args._parser)) from None
    X, Y = common.read_dataset(args.train, args)
    if X.shape[0] == 0:
        raise common.no_instances(args.train, args, "shortlist")
    if Y.shape[1] == 0:
        raise DataFormatError("the data has no labels: there is nothing to shortlist", args.train)
    Xt = Yt = None
    if args.test:
        Xt, Yt = common.read_dataset(args.test, args, n_features=X.shape[1], n_labels=Y.shape[1],
                                     labels_file=args.test_labels,
                                     labels_option="--test-labels")
        if Yt.shape[1] != Y.shape[1]:
            raise ParameterError(f"{args.test}: {Yt.shape[1]} labels, the training data has {Y.shape[1]}")
        Xt = same_feature_space(Xt, X.shape[1], args.test)
    t0 = time.perf_counter()
    with common.ProgressBar(X.shape[0], "shortlist", "instances", enabled=not args.quiet) as bar:
        r = build_shortlist(X, Y, fsp, threads=args.threads or None, progress=bar.advance)
    write_shortlist(args.output, r.shortlist)
    if args.save_first_stage:
        from ..shortlist.api import shortlist_fingerprint

        r.first_stage.save(args.save_first_stage, train_shortlist_sha256=shortlist_fingerprint(r.shortlist))
    # without filling an instance may have fewer than K candidates (helper-59: "20
    # candidates" said of 8.8 on average, and a recall that shortlist-predict, which fills
    # the empty slots, contradicted)
    # an instance's candidates are at most the labels there are (helper-89: "100 candidates"
    # said on a 3-label file)
    K = min(fsp.training_K, Y.shape[1])
    size = f"{K} candidates" if args.fill else \
        f"at most {K} candidates ({np.count_nonzero(r.train_candidates >= 0) / X.shape[0]:.2f} per instance on " \
        "average, --no-fill)"
    if fsp.random_negatives:
        size += f" and {fsp.random_negatives} random instances per label"
    common.say(args, f"shortlist of {size} for {X.shape[0]} instances ({fsp.method}, {fsp.backend}) in "
                     f"{r.seconds:.2f} s: recall {_percent(r.train_recall)} of the training positives "
                     # (neighbours leave each instance out of its own search; a centroid holds
                     # its label's instances, so its recall is in-sample: helper-54)
                     f"({'leave-one-out' if fsp.method == 'neighbours' else 'in-sample, an optimistic bound'}) "
                     f"-> {args.output}")
    if Xt is not None:
        lab, _ = r.first_stage.candidates(Xt)
        K = min(args.K, Y.shape[1])
        among = f"{K} candidates" if args.fill else (
            f"at most {K} candidates ({np.count_nonzero(lab >= 0) / max(lab.shape[0], 1):.2f} on average; "
            "shortlist-predict fills the empty slots with frequent labels, which raises its recall)")
        common.say(args, f"recall on {args.test}: {_percent(recall(lab, Yt))} of the test positives among "
                         f"{among} ({time.perf_counter() - t0:.2f} s in all)")
    return 0


def _stage_option_wording(message: str, parser) -> str:
    """'parameter random_negatives must ...' -> '--random-negatives must ...': the
    first stage's checks name its fields, the command line user knows the options."""
    for action in parser._actions:
        prefix = f"parameter {action.dest} "
        if action.option_strings and message.startswith(prefix):
            return "/".join(action.option_strings) + " " + message[len(prefix):]
    return message
