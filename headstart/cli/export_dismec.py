"""``headstart export-dismec MODEL_DIR -o META``: a headstart model in DiSMEC++'s files."""

from __future__ import annotations

import argparse

from . import common

NAME = "export-dismec"
HELP = "write a headstart model as a DiSMEC++ model (metadata file + weight files)"
DESCRIPTION = """\
Write the model in the files DiSMEC++ (the paper's C++ trainer) loads: the metadata file
META and weight files META.weights-FIRST-LAST next to it, one per 4096 labels.  The
intercepts become the weights of a last feature (DiSMEC++'s --augment-for-bias); the
options under which DiSMEC++'s predict scores like headstart are printed.  Weights are
written exactly (float32).  Models that apply tf-idf or feature hashing to their input,
shortlisted and dense + sparse models have no DiSMEC++ counterpart and are refused."""

_FORMATS = {"sparse-txt": "SparseTXT", "dense-txt": "DenseTXT", "dense-npy": "DenseNPY"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL_DIR", help="headstart model directory (every label, or some with --allow-gaps)")
    p.add_argument("-o", "--output", metavar="META", required=True,
                   help="DiSMEC++ model (metadata) file to write, e.g. eurlex.model")
    p.add_argument("--format", choices=sorted(_FORMATS), default="sparse-txt",
                   help="layout of the weight files (DiSMEC++'s --save-sparse-txt / --save-dense-txt / "
                        "--save-dense-npy; default sparse-txt)")
    p.add_argument("--allow-gaps", action="store_true",
                   help="export a model of some labels only (a label range, or one a time budget or Ctrl-C cut "
                        "short) as DiSMEC++ writes a partial model: weight files for the labels it has")


def run(args: argparse.Namespace) -> int:
    from ..model import load_model
    from ..model.dismec import dismec_options, write_dismec_model

    common.check_output_file(args.output, "DiSMEC++ model file", args)
    from ..model.manifest import read_manifest
    from ..model.reader import require_complete

    if not args.allow_gaps:
        require_complete(args.model, read_manifest(args.model),
                         hint=": merge the label ranges into one model first ('headstart merge'), or export it "
                              "as a partial DiSMEC++ model with --allow-gaps")
    model = load_model(args.model, allow_gaps=args.allow_gaps)
    files = write_dismec_model(model, args.output, fmt=_FORMATS[args.format], allow_gaps=args.allow_gaps)
    opts = " ".join(dismec_options(model))
    kept = model.label_space - sum(b - a for a, b in model.missing_ranges)   # they cover [0, L)
    common.say(args, f"wrote {kept} labels in {len(files) - 1} weight file(s) + {args.output}; "
                     f"DiSMEC++ predicts like headstart with: {opts or '(no options)'}")
    return 0
