"""``headstart experiment TRAIN TEST -o REPORT_DIR``: the paper's comparison of
initialisations on one data set (thin layer over :mod:`headstart.experiment`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from . import common

NAME = "experiment"
HELP = "compare initialisations as the paper does: table, figures and report.html"
DESCRIPTION = """\
Train one model per initialisation on the same data with statistics on, evaluate each
on the test data and write a report directory: table.md / table.json (training time,
time relative to zero, P@1/3/5 -- a k beyond the labels cut to them, as evaluate cuts
-k --, label-averaged binary precision and recall, Newton iterations, CG steps), the
paper's figures as PNG, and report.html showing them all.

Initialisations (--inits, comma separated): zero, bias (bias weight --bias-init,
default -1), bias:V (bias weight V), ovap, ovap-strict, aop, aop:T (aop with t = T).

Every finished run is saved in REPORT_DIR.partial/ until the report is written: an
interrupted experiment goes on with the same command (runs of the same parameters, data
and labels are not trained again; their times are those of the earlier session).

examples:
  headstart experiment data/bibtex/train.txt.gz data/bibtex/test.txt.gz -o report
  headstart experiment train.txt.gz test.txt.gz -o report --labels 0:2000 --threads 2
  headstart experiment train.txt.gz test.txt.gz -o report-logistic --loss logistic --t -3 \\
      --inits zero,bias:-2,ovap,aop,aop:-2
  headstart experiment train.txt.gz test.txt.gz -o grid --inits zero,aop --aop-grid 1:-1,-2,-3
  headstart experiment --replot -o report          (redraw from report/stats)"""

log = logging.getLogger("headstart.cli.experiment")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..experiment.spec import DEFAULT_INITS
    p.add_argument("train", metavar="TRAIN", nargs="?", help="training data (XMC or libsvm text, gzip or not)")
    p.add_argument("test", metavar="TEST", nargs="?", help="test data, same format")
    p.add_argument("-o", "--output", metavar="REPORT_DIR", help="report directory to write (created if missing)")
    g = p.add_argument_group("what to compare")
    g.add_argument("--inits", default=DEFAULT_INITS, metavar="LIST",
                   help=f"initialisations to train, in this order (default: {DEFAULT_INITS})")
    g.add_argument("--aop-grid", metavar="S1,S2:T1,T2", default=None,
                   help="also train aop for every (s, t) with t < s, e.g. 1,2:-1,-2,-3 (the supplementary's choice "
                        "of s=1, t=-2); a point equal to an --inits run is trained once")
    g.add_argument("--labels", metavar="A:B", default=None,
                   help="train labels A..B-1 only (default: all); metrics are those of this label range")
    common.add_memory_check(g)
    # every training option of 'headstart train' (loss, regulariser, weighting, ...), from
    # TrainParams, so the runner compares initialisations under any objective
    common.add_train_params(p)
    o = p.add_argument_group("output")
    o.add_argument("--replot", action="store_true",
                   help="do not train: redraw the tables, figures and report.html of REPORT_DIR from its "
                        "table.json and stats/")
    o.add_argument("--no-stats", dest="keep_stats", action="store_false",
                   help="do not keep stats/<run>.npz (the report can then not be redrawn with --replot)")


def checkpoint_dir(output: str) -> Path:
    """``REPORT_DIR.partial``: the finished runs of an experiment still running or interrupted."""
    p = Path(output)
    return p.parent / f"{p.name}.partial"


def _check_output(path: str) -> None:
    from ..errors import ParameterError

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ParameterError(f"{path}: exists and is not a directory")
    if p.is_dir() and any(p.iterdir()) and not (p / "table.json").is_file():
        raise ParameterError(f"{path}: exists, is not empty and is not an experiment report; refusing to write "
                             "into it")
    if not p.exists() and not p.parent.is_dir() and str(p.parent) not in ("", "."):
        raise ParameterError(f"{path}: parent directory {p.parent} does not exist")
    # the report is drawn in a temporary directory beside it and renamed into place at
    # the end: a parent that takes no new entry would fail after every run had trained
    common._check_writable(p.parent if str(p.parent) else Path("."), path, "the report")


def _check_label_range(given: str | None, first: int, stop: int, L: int) -> None:
    if first >= L or stop > L:
        from ..errors import ParameterError

        raise ParameterError(f"--labels {given}: the data has {L} labels (0..{L - 1})")


def _check_comparable(args, base) -> None:
    """Refuse what would make the runs no comparison of initialisations (helper-57)."""
    from ..errors import ParameterError
    from ..params import method_of

    if hasattr(args, "init"):     # (training options are present only when given)
        raise ParameterError("--init: experiment trains each initialisation of --inits (e.g. --inits zero,aop); "
                             "it takes no --init")
    if base.timeout > 0:
        raise ParameterError("--timeout: a run cut off by a time budget trains fewer labels than the others, so "
                             "neither its time nor its metrics compare; bound the work with --labels A:B instead")
    method = method_of(base)
    if method != "newton":
        by = "--l2-solver dual" if method == "dual" else f"--regularizer {base.regularizer}"
        raise ParameterError(f"{by} trains with a coordinate-descent solver that starts every label from w = 0 "
                             "whatever the initialisation: every run would be the zero run; the initialisations "
                             "are those of the Newton-CG method (the default)")


class _Reporter:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.bar = None
        self.zero_seconds = None
        self.n_labels = 0            # of the run under way (start_run)

    def start_run(self, index, total, spec, n_labels):
        self.n_labels = n_labels
        common.say(self.args, f"[{index + 1}/{total}] training {n_labels} labels with {spec.name} ...")
        self.bar = common.ProgressBar(n_labels, spec.name, "labels", enabled=not self.args.quiet)
        self.bar.__enter__()
        return self.bar.advance

    def end_run(self, result):
        from ..experiment.run import capped_ks_note

        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
        t = result.train_seconds
        if result.spec.init == "zero" and self.zero_seconds is None:
            self.zero_seconds = t
        rel = f", speed-up {self.zero_seconds / t:.2f}" if self.zero_seconds and t > 0 else ""
        m = result.metrics
        s = result.stats.summary()
        common.say(self.args, f"      {result.spec.name}: {t:.2f} s{rel}, {s['newton_iterations']} Newton iterations, "
                              f"P@1/3/5 {100 * m['P@1']:.2f}/{100 * m['P@3']:.2f}/{100 * m['P@5']:.2f}, "
                              f"precision {100 * m['precision']:.2f}, recall {100 * m['recall']:.2f}"
                              + (f"; {note}" if (note := capped_ks_note(self.n_labels)) else ""))


def run(args: argparse.Namespace) -> int:
    from ..experiment import (load_dataset, load_experiment, parse_grid, parse_inits, parse_label_range,
                              plan_runs, run_experiment, write_report)
    from ..experiment.figures import require_matplotlib

    base = common.params_unless_printed(args)
    if base is None:
        return 0    # --print-params: the base parameters, as every training command prints them (helper-121)
    err = args._parser.error
    require_matplotlib()   # before hours of training, not after them
    if not args.output:
        err("the following arguments are required: -o/--output REPORT_DIR")
    if args.replot:
        if args.train or args.test:
            err("--replot redraws REPORT_DIR from its saved statistics; it takes no TRAIN/TEST")
        exp = load_experiment(args.output)
        out = write_report(exp, args.output)   # the statistics it loaded go into the new report
        common.say(args, f"redrew {len(out['figures'])} figures, table.md and report.html in {args.output}")
        return 0
    if not args.train or not args.test:
        err("the following arguments are required: TRAIN TEST")
    _check_comparable(args, base)
    inits = parse_inits(args.inits, base)
    grid = parse_grid(args.aop_grid, base) if args.aop_grid else []
    runs, points = plan_runs(inits, grid)
    first, stop = parse_label_range(args.labels) if args.labels else (0, -1)
    _check_output(args.output)
    if args.labels:
        # an XMC file says its label count in its header: a range beyond it is refused
        # before minutes of reading (helper-57), the other formats after reading
        from ..io.xmc import is_xmc_header, read_xmc_header

        if is_xmc_header(args.train):
            _check_label_range(args.labels, first, stop,
                               read_xmc_header(args.train, wide_ids=base.hash_buckets > 0)[2])
    # every run shares the base's hashing: raw feature ids beyond int32 then, as 'train' reads them
    data = load_dataset(args.train, args.test, wide_ids=base.hash_buckets > 0)
    L = data.Y_train.shape[1]
    _check_label_range(args.labels, first, stop, L)
    count = (stop if stop != -1 else L) - first
    for spec in runs:    # one run at a time, each model kept for its evaluation
        common.check_training_memory(args, spec.params, data.X_train, data.Y_train,
                                     f"training {count} labels ({spec.name})", first=first, count=count,
                                     trajectories=True, own_data=False,
                                     fewer_labels="fewer labels (--labels A:B)")
    settings = {"inits": args.inits, "aop_grid": args.aop_grid, "aop_grid_points": points,
                "labels": args.labels, "threads": base.effective_threads(), "base_params": base.to_dict()}
    common.say(args, f"read {data.info['name']}: {data.info['n_train']} training, {data.info['n_test']} test "
                     f"instances, {data.info['n_features']} features, {L} labels in "
                     f"{data.info['read_seconds']:.1f} s; {len(runs)} runs on labels {first}..{first + count - 1}")
    # every finished run is kept beside the report until the report is written, so that an
    # interrupted experiment (Ctrl-C, a batch job's time limit) goes on with the same
    # command instead of training every run again (helper-68)
    partial = checkpoint_dir(args.output)
    if partial.is_dir():
        common.say(args, f"{partial}: runs of an interrupted experiment; those of the same parameters, data and "
                         "labels are not trained again")
    exp = run_experiment(data, runs, first, count, settings=settings, reporter=_Reporter(args), checkpoint=partial)
    out = write_report(exp, args.output, save_statistics=args.keep_stats)
    import shutil

    shutil.rmtree(partial, ignore_errors=True)
    common.say(args, f"wrote {args.output}/report.html, table.md, table.json and {len(out['figures'])} figures")
    return 0
