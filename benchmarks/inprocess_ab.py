"""Several versions of headstart trained in ONE process, alternately, on the same data.

:mod:`before_after` runs each version as its own ``headstart train`` process; on a
shared machine whose speed drifts by 10-20% within minutes, a 5% difference then needs
many repeats.  Here every version's package is copied under its own name (``hs_0``,
``hs_1``, ...; headstart imports itself only relatively, so a copy is a separate package
with its own numba cache), the data is read once, and the versions train the same label
range one after another, round after round, the order rotating so that no version
always runs first.  Each round gives a time ratio of two runs seconds apart.

Reports per round the wall times, and per version the median and spread of its ratio
to the first version (above 1: faster than the first), and whether the weights equal
the first version's bit for bit.  Compilation and cache loading happen in an untimed
warm-up.

    python benchmarks/inprocess_ab.py debian-deps 7ff9ec5 . --labels 0:6000 --threads 2 --rounds 4
    python benchmarks/inprocess_ab.py bibtex 3d8369e . --labels 0:159 --rounds 8 --init zero \
        --set l2_solver=dual --set regularize_bias=true --set epsilon=0.1

A version is a directory holding a ``headstart`` package (``.`` for this checkout), or a
commit, checked out under build/ as :mod:`before_after` does.  The data set is a name
or folder as for :mod:`before_after`.

A second opinion, not a replacement for :mod:`before_after`: the versions share one
heap (and glibc's arenas, which newer versions trim after every chunk), the timed span
is all of ``fit_model`` (validation and model assembly included), and the interpreter
has both packages loaded.  Checked once against it (2026-11-27, debian-deps labels
0:1000 ``--init zero``, 2 threads, 647a10d against 9c09e40, a noisy machine): in one
process 0.99 / 0.84 / 1.02 in three rounds, as separate ``headstart train`` processes
1.18x (two runs each) -- so a difference seen here should be confirmed there.
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
from before_after import dataset_files, worktree  # noqa: E402
from common import parse_label_range  # noqa: E402


def load_versions(versions: list[str], root: Path) -> list[str]:
    """Copy each version's package (a directory holding one, else a commit) into ``root``
    as hs_0, hs_1, ...; returns the names."""
    names = []
    for k, version in enumerate(versions):
        name = f"hs_{k}"
        src = Path(version) if (Path(version) / "headstart" / "__init__.py").is_file() else worktree(version)
        shutil.copytree(src / "headstart", root / name, ignore=shutil.ignore_patterns("__pycache__"))
        names.append(name)
    sys.path.insert(0, str(root))
    for name in names:
        importlib.import_module(name)
    return names


def train(name: str, X, Y, labels: tuple[int, int], options: dict):
    """(wall seconds, model) of one fit of version ``name``."""
    estimator = importlib.import_module(name + ".estimator")
    params = importlib.import_module(name + ".params").TrainParams(**options)
    t0 = time.perf_counter()
    model, _ = estimator.fit_model(X.copy(), Y, params, first_label=labels[0], num_labels=labels[1] - labels[0])
    return time.perf_counter() - t0, model


def _value(text: str):
    """A --set value: true/false, an int, a float, else the word itself."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="data set name or folder with train.txt.gz (XMC format)")
    ap.add_argument("versions", nargs="+", help="directories holding a headstart package, or commits")
    ap.add_argument("--labels", default="0:2000", help="label range A:B")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--init", default="aop")
    ap.add_argument("--loss", default="squared-hinge")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="another TrainParams field (a number, true/false or a word), e.g. l2_solver=dual")
    ns = ap.parse_args(argv)
    train_file, _ = dataset_files(ns.data)
    options = dict(init=ns.init, loss=ns.loss, threads=ns.threads)
    for item in ns.set:
        key, _, value = item.partition("=")
        options[key] = _value(value)
    with tempfile.TemporaryDirectory(prefix="inprocess-ab-") as tmp:
        names = load_versions(ns.versions, Path(tmp))
        X, Y = importlib.import_module(names[0] + ".io.xmc").read_xmc(train_file)[:2]
        a, b = parse_label_range(ns.labels, Y.shape[1])
        for name in names:                       # compile or load the kernels, untimed
            train(name, X, Y, (a, min(a + 32, b)), options)
        wall = {name: [] for name in names}
        same = {name: True for name in names}
        for r in range(ns.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            if r % 2:
                order = order[::-1]
            models = {}
            for name in order:
                t, models[name] = train(name, X, Y, (a, b), options)
                wall[name].append(t)
            ref = models[names[0]]
            for name in names[1:]:
                m = models[name]
                same[name] &= bool((m.weights != ref.weights).nnz == 0 and np.array_equal(m.intercept, ref.intercept))
            print(f"round {r}: " + "  ".join(f"{n} {wall[n][-1]:.2f} s" for n in names), flush=True)
        for k, name in enumerate(names[1:], 1):
            ratio = np.array(wall[names[0]]) / np.array(wall[name])
            print(f"{name} ({ns.versions[k]}) against hs_0 ({ns.versions[0]}): speed-up median {np.median(ratio):.3f}, "
                  f"min {ratio.min():.3f}, max {ratio.max():.3f} over {ratio.size} rounds; "
                  f"weights {'identical' if same[name] else 'differ'}")


if __name__ == "__main__":
    main()
