"""``headstart merge OUT_DIR MODEL_DIR...``: combine separately trained label ranges."""

from __future__ import annotations

import argparse

from . import common

NAME = "merge"
HELP = "merge model directories of disjoint label ranges into one model"
DESCRIPTION = """\
Combine model directories trained separately -- e.g. batch jobs over
--first-label/--num-labels, or runs on other machines -- into one model.  The inputs
must agree on the training parameters (the number of threads may differ), the
feature and label spaces, the training set and its preprocessing; their label ranges
must not overlap, and must cover every label unless --allow-gaps (the gaps are then
reported).  Shards are verified against their checksums and copied byte for byte; the
output appears complete or not at all."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("output", metavar="OUT_DIR", help="model directory to write (replaced if it is a model)")
    p.add_argument("inputs", metavar="MODEL_DIR", nargs="+", help="model directories to merge")
    p.add_argument("--allow-gaps", action="store_true",
                   help="write the merged model even if some labels have no shard (and list them)")


def _ranges(ranges, limit: int = 10) -> str:
    text = ", ".join(f"[{a}, {b})" for a, b in ranges[:limit])
    return text + (f" ... ({len(ranges) - limit} more)" if len(ranges) > limit else "")


def run(args: argparse.Namespace) -> int:
    from ..distributed.merging import merge

    common.check_output_dir(args.output, keep_unfinished=True)
    r = merge(args.output, args.inputs, allow_gaps=args.allow_gaps)
    common.say(args, f"merged {len(r.inputs)} model(s): {r.shards} shard(s), {r.labels} of {r.label_space} "
                     f"labels -> {args.output}")
    if r.missing:
        n = sum(b - a for a, b in r.missing)
        common.say(args, f"gaps: {n} label(s) without a shard: {_ranges(r.missing)}")
    return 0
