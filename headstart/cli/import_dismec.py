"""``headstart import-dismec META -o MODEL_DIR``: a DiSMEC++ model as a headstart model."""

from __future__ import annotations

import argparse
import logging

from ..errors import ParameterError
from . import common

log = logging.getLogger("headstart.cli.import_dismec")

NAME = "import-dismec"
HELP = "make a model trained by DiSMEC++ (the paper's C++ trainer) a headstart model"
DESCRIPTION = """\
Read the model DiSMEC++ saved (its metadata file META and the weight files it lists, in
any of its layouts: sparse text, dense text, dense npy) and write it as a headstart model
directory, to predict and evaluate with headstart, merge, or start training from
(--init pretrained).  DiSMEC++ keeps no record of how it preprocessed the data: give the
options its training ran with, so that headstart's predictor does the same to any input
(in DiSMEC++'s order: --transform, then --normalize-instances, then the bias feature).
With --augment-for-bias the model's last weight is taken as the bias weight."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..params import TRANSFORMS

    p.add_argument("meta", metavar="META", help="DiSMEC++'s model (metadata) file, e.g. eurlex.model")
    p.add_argument("-o", "--output", metavar="MODEL_DIR", required=True, help="headstart model directory to write")
    p.add_argument("--augment-for-bias", metavar="VALUE", nargs="?", type=float, const=1.0, default=None,
                   help="DiSMEC++ trained with --augment-for-bias [VALUE] (default value 1): the last weight is "
                        "the bias weight")
    p.add_argument("--normalize-instances", action="store_true",
                   help="DiSMEC++ trained with --normalize-instances (instances scaled to unit L2 norm)")
    # default None, not "identity": an export's options are taken only when none is given
    # (an explicit --transform identity was taken for none, and the export's used instead)
    p.add_argument("--transform", choices=TRANSFORMS, default=None,
                   help="DiSMEC++'s --transform of the feature values (default identity)")
    p.add_argument("--weight-culling", metavar="T", type=float, default=0.0,
                   help="drop weights with |w| <= T (default 0: keep every nonzero weight)")
    p.add_argument("--allow-gaps", action="store_true",
                   help="import a partial model (weight files for some labels only: a label range, or a run "
                        "its --timeout ended) with the labels it has; the others are missing ranges "
                        "('predict --allow-gaps' predicts with the labels there are; an imported model has no "
                        "training record, so it is not resumed or merged with trained parts)")


def _options_of_export(args: argparse.Namespace) -> None:
    """A model headstart exported records its predict options: taken when none are given,
    and options that differ from them refused (they would score other features)."""
    from ..model.dismec import exported_options

    got = exported_options(args.meta)
    nothing_given = (args.augment_for_bias, bool(args.normalize_instances), args.transform) == (None, False, None)
    explicit = args.transform is not None
    if args.transform is None:
        args.transform = "identity"
    if got is None:
        return
    given = (args.augment_for_bias, bool(args.normalize_instances), args.transform)
    stored = (got["augment-for-bias"], bool(got["normalize-instances"]), got["transform"])
    if nothing_given:
        args.augment_for_bias, args.normalize_instances, args.transform = stored
        log.info("%s: headstart's export: taking its options %s", args.meta, _words(stored) or "(none)")
    elif given != stored:
        raise ParameterError(f"{args.meta} was exported by headstart for predicting with {_words(stored) or 'no options'}"
                             f", not {_words(given, explicit) or 'no options'}: import it without options (they are "
                             "taken from the file) or with those")


def _words(opts, transform_given: bool = False) -> str:
    bias, normalize, transform = opts
    out = []
    if transform != "identity" or transform_given:
        out.append(f"--transform {transform}")
    if normalize:
        out.append("--normalize-instances")
    if bias is not None:
        out.append("--augment-for-bias" if bias == 1.0 else f"--augment-for-bias {bias:g}")
    return " ".join(out)


def run(args: argparse.Namespace) -> int:
    from ..model import save_model
    from ..model.dismec import read_dismec_model

    common.check_output_dir(args.output, keep_unfinished=True)
    _options_of_export(args)
    model = read_dismec_model(args.meta, bias_feature=args.augment_for_bias, normalize=args.normalize_instances,
                              transform=args.transform, culling=args.weight_culling, allow_gaps=args.allow_gaps)
    missing = sum(b - a for a, b in model.missing_ranges)
    if missing and missing == model.label_space:
        log.warning("%s lists no weight file: the model imported has no label with weights", args.meta)
    save_model(model, args.output)
    common.say(args, f"imported {model.num_labels - missing} labels x {model.n_features} features "
                     f"({model.nnz} weights{', intercepts' if args.augment_for_bias is not None else ''}) "
                     f"-> {args.output}"
               + (f"; {missing} label(s) without weights in {len(model.missing_ranges)} missing range(s), "
                  f"first [{model.missing_ranges[0][0]}, {model.missing_ranges[0][1]})" if missing else ""))
    return 0
