"""Small shortlisted sub-problems: exact Newton steps in the span of the rows
(``direct_rows``) against the truncated Newton method, by sub-problem size.

    python benchmarks/shortlist_direct.py DATA_DIR [--settings 0,64] [--labels 2000] [--repeat 3]

One thread, one process: the K = 100 neighbours shortlist of the training data (cached
in /tmp), a random sample of labels (seed 0), shortlisted training with each
``direct_rows`` setting, runs alternating.  Per-label seconds (the training statistics)
are summed by sub-problem size, the minimum over the repeats.  The machine's speed may
drift between runs, so each setting's sums are also divided by its sum over the labels
with more rows than every setting solves directly (the same code in all settings):
those normalised ratios are the ones to read.  Also prints the Newton iterations and
the largest ||g|| / tol (every label must pass the same test).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from headstart.estimator import prepare_data  # noqa: E402
from headstart.io import read_xmc  # noqa: E402
from headstart.params import TrainParams  # noqa: E402
from headstart.shortlist import FirstStageParams, build_shortlist  # noqa: E402
from headstart.shortlist.training import train_shortlisted  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="folder with train.txt.gz")
    ap.add_argument("--settings", default="0,64")
    ap.add_argument("--labels", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--edges", default="0,16,32,48,64,100,200,500")
    args = ap.parse_args()
    settings = [int(v) for v in args.settings.split(",")]
    X, Y = read_xmc(Path(args.data) / "train.txt.gz")
    p = TrainParams(threads=1)
    data = prepare_data(X, Y, p)
    cache = Path("/tmp") / f"headstart-shortlist-{Path(args.data).resolve().name}-K100.npz"
    if cache.exists():
        S = sp.load_npz(cache).tocsc()
    else:
        S = build_shortlist(data.X, data.Y, FirstStageParams(K=100), threads=os.cpu_count() or 1).shortlist.tocsc()
        sp.save_npz(cache, S)
    S.sort_indices()
    L = data.Y.shape[1]
    labels = np.sort(np.random.default_rng(0).choice(L, min(args.labels, L), replace=False))
    train_shortlisted(data.X, data.Y, S, p.replace(direct_rows=8), labels[:50])     # compile
    runs: dict[int, list] = {}
    for _ in range(args.repeat):
        for dr in settings:
            _, _, st = train_shortlisted(data.X, data.Y, S, p.replace(direct_rows=dr), labels)
            runs.setdefault(dr, []).append(st)
    rows = runs[settings[0]][0]["rows"]
    edges = [int(v) for v in args.edges.split(",")] + [10**12]
    top = max(settings)
    ref = {dr: min(float(np.sum(st["seconds"][rows > top])) for st in runs[dr]) for dr in settings}
    print(f"{'rows':>12} {'labels':>6} " + " ".join(f"{'s, dr=' + str(dr):>12}" for dr in settings)
          + " " + " ".join(f"{'norm/dr=' + str(settings[0]):>14}" for dr in settings[1:]))
    for a, b in zip(edges[:-1], edges[1:]):
        m = (rows >= a) & (rows < b)
        if not m.any():
            continue
        t = {dr: min(float(np.sum(st["seconds"][m])) for st in runs[dr]) for dr in settings}
        norm = [(t[dr] / ref[dr]) / (t[settings[0]] / ref[settings[0]]) if ref[dr] > 0 else float("nan")
                for dr in settings[1:]]
        label = f"{a}-{b - 1}" if b < 10**12 else f">={a}"
        print(f"{label:>12} {int(m.sum()):6d} " + " ".join(f"{t[dr]:12.4f}" for dr in settings)
              + " " + " ".join(f"{v:14.2f}" for v in norm))
    for dr in settings:
        st = runs[dr][0]
        print(f"direct_rows={dr}: Newton iterations per label {st['iterations'].mean():.3f}, "
              f"max ||g||/tol {np.max(st['gnorm_final'] / np.maximum(st['tolerance'], 1e-300)):.4f}")


if __name__ == "__main__":
    main()
