"""``headstart convert IN OUT``: between the XMC, libsvm and slice layouts."""

from __future__ import annotations

import argparse

from ..errors import ParameterError
from . import common

NAME = "convert"
HELP = "convert a data file to the XMC format, libsvm or the slice layout"
DESCRIPTION = """\
Read IN in any supported format (see --format) and write OUT as XMC repository text
(default; gzip-compressed if OUT ends in .gz), with --to libsvm as multi-label libsvm text
(1-based features, no header), or with --to slice as dense features OUT (.npy) plus the
label file --out-labels.  Output files are written atomically."""

TARGETS = ("xmc", "libsvm", "slice")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", metavar="IN", help="data file to read")
    p.add_argument("output", metavar="OUT", help="file to write")
    g = p.add_argument_group("output")
    g.add_argument("--to", choices=TARGETS, default="xmc", help="output format (default: xmc)")
    g.add_argument("--out-one-based", action="store_true",
                   help="xmc output: write feature indices starting at 1 (default: 0-based)")
    g.add_argument("--out-labels", metavar="FILE", help="slice output: the label file to write")
    common.add_data_options(p)


def run(args: argparse.Namespace) -> int:
    from .. import io as hio

    if args.to == "slice" and not args.out_labels:
        raise ParameterError("--to slice writes two files: give the label file with --out-labels FILE")
    if args.to != "slice" and args.out_labels:
        raise ParameterError("--out-labels is only for --to slice")
    for out in [args.output] + ([args.out_labels] if args.out_labels else []):
        common.check_output_file(out, "output file", args)
    X, Y = common.read_dataset(args.input, args)
    if args.out_one_based and args.to != "xmc":
        raise ParameterError("--out-one-based is only for --to xmc (libsvm is 1-based)")
    if args.to == "xmc":
        hio.write_xmc(args.output, X, Y, one_based=args.out_one_based)
    elif args.to == "libsvm":
        hio.write_libsvm(args.output, X, Y)
    else:
        hio.write_slice(args.output, args.out_labels, X, Y)
    common.say(args, f"wrote {X.shape[0]} instances, {X.shape[1]} features, {Y.shape[1]} labels "
                     f"-> {args.output}" + (f" + {args.out_labels}" if args.out_labels else ""))
    return 0
