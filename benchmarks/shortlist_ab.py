"""Shortlisted training of several headstart versions in ONE process, alternately.

The shortlisted counterpart of :mod:`inprocess_ab` (whose package copies, hs_0, hs_1,
..., it reuses): the data and the shortlist are read once, each version prepares its
inputs (validation, starts, costs) once, untimed, and then trains the label range with
:func:`headstart.shortlist.training.train_shortlisted`, the versions in turn, round after
round, the order rotating.  The timed span (wall and the process's CPU time) is that call alone (the chunk loop, its
kernel, the model's assembly); compilation and cache loading happen in an untimed
warm-up.  Reports each round's wall times, per version the median and spread of the
ratio to the first version (above 1: faster than the first), and whether its weights,
intercepts and statistics (all columns but seconds) equal the first version's bit for bit.

    python benchmarks/shortlist_ab.py debian-deps 362f11f . --shortlist dd.sl.txt.gz --rounds 4
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from before_after import dataset_files  # noqa: E402
from common import parse_label_range  # noqa: E402
from inprocess_ab import _value, load_versions  # noqa: E402


def prepare(name: str, X, Y, S, options: dict):
    """(params, prepared inputs) of version ``name``."""
    api = importlib.import_module(name + ".shortlist.api")
    params = importlib.import_module(name + ".params").TrainParams(**options)
    return params, api.prepare_shortlisted(X.copy(), Y, params, S)


def train(name: str, prepared, labels: np.ndarray):
    """(wall seconds, CPU seconds of the process, (weights, intercept, stats)) of one run
    of version ``name``."""
    training = importlib.import_module(name + ".shortlist.training")
    params, sd = prepared
    t0, c0 = time.perf_counter(), time.process_time()
    out = training.train_shortlisted(sd.train_X, sd.data.Y, sd.shortlist, params, labels, fscale=sd.fscale,
                                     inputs=sd.inputs, columns=sd.columns)
    return time.perf_counter() - t0, time.process_time() - c0, out


def same(a, b) -> bool:
    (Wa, ba, sa), (Wb, bb, sb) = a, b
    if Wa.shape != Wb.shape or not (np.array_equal(Wa.indptr, Wb.indptr) and np.array_equal(Wa.indices, Wb.indices)
                                    and Wa.data.tobytes() == Wb.data.tobytes() and ba.tobytes() == bb.tobytes()):
        return False
    cols = [c for c in sa.columns if c != "seconds"]
    return set(sa.columns) == set(sb.columns) and all(sa[c].tobytes() == sb[c].tobytes() for c in cols)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="data set name or folder with train.txt.gz (XMC format)")
    ap.add_argument("versions", nargs="+", help="directories holding a headstart package, or commits")
    ap.add_argument("--shortlist", required=True, help="shortlist file ('headstart shortlist' -o)")
    ap.add_argument("--labels", default="all", help="label range A:B, or all")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="another TrainParams field (a number, true/false or a word), e.g. init=zero")
    ap.add_argument("--root", help="where the package copies go, kept (numba's cache of a copy is found again "
                    "by its path: a second run need not compile); default a temporary folder")
    ns = ap.parse_args(argv)
    train_file, _ = dataset_files(ns.data)
    options = dict(threads=ns.threads)
    for item in ns.set:
        key, _, value = item.partition("=")
        options[key] = _value(value)
    with tempfile.TemporaryDirectory(prefix="shortlist-ab-") as tmp:
        root = Path(ns.root or tmp)
        if ns.root:
            for old in root.glob("hs_*"):
                shutil.rmtree(old)
        root.mkdir(parents=True, exist_ok=True)
        names = load_versions(ns.versions, root)
        X, Y = importlib.import_module(names[0] + ".io.xmc").read_xmc(train_file)[:2]
        S = importlib.import_module(names[0] + ".shortlist.fileformat").read_shortlist(ns.shortlist)
        a, b = (0, Y.shape[1]) if ns.labels == "all" else parse_label_range(ns.labels, Y.shape[1])
        labels = np.arange(a, b, dtype=np.int64)
        prepared = {name: prepare(name, X, Y, S, options) for name in names}
        for name in names:                       # compile or load the kernels, untimed
            train(name, prepared[name], labels[:32])
        wall = {name: [] for name in names}
        cpu = {name: [] for name in names}
        equal = {name: True for name in names}
        for r in range(ns.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            if r % 2:
                order = order[::-1]
            outs = {}
            for name in order:
                t, c, outs[name] = train(name, prepared[name], labels)
                wall[name].append(t)
                cpu[name].append(c)
            for name in names[1:]:
                equal[name] &= same(outs[names[0]], outs[name])
            del outs
            print(f"round {r}: " + "  ".join(f"{n} {wall[n][-1]:.3f} s ({cpu[n][-1]:.3f} CPU s)" for n in names),
                  flush=True)
        for k, name in enumerate(names[1:], 1):
            ratio = np.array(wall[names[0]]) / np.array(wall[name])
            cratio = np.array(cpu[names[0]]) / np.array(cpu[name])
            print(f"{name} ({ns.versions[k]}) against hs_0 ({ns.versions[0]}): speed-up median {np.median(ratio):.3f}, "
                  f"min {ratio.min():.3f}, max {ratio.max():.3f} over {ratio.size} rounds (CPU time: median "
                  f"{np.median(cratio):.3f}, min {cratio.min():.3f}, max {cratio.max():.3f}); "
                  f"models and statistics {'identical' if equal[name] else 'DIFFER'}")


if __name__ == "__main__":
    main()
