"""Where shortlisted training's time goes, by sub-problem size, against full one-vs-all
on the same labels.

    python benchmarks/shortlist_by_size.py debian-deps [--K 100] [--no-fill] [--per-bucket 300] [--repeat 2]
        [--train-K N --random-negatives R --neighbours k]

One thread for the training (the first stage uses two), one process: the labels are
bucketed by the rows of their sub-problem (positives + shortlisted instances), at most
``--per-bucket`` random labels of each bucket (seed 0) are trained both ways, full
one-vs-all (``train_labels``) and shortlisted (``train_shortlisted``), alternating,
and the smallest process CPU time of each over the repeats is scaled to the bucket's
label count.  What it answers: which labels a shortlist saves time on, and which it
does not (issue 14's 20x target on debian-deps; docs/shortlist.md, "Not done").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from shortlist import prepared, timed_cpu  # noqa: E402

from headstart.shortlist import FirstStageParams, build_shortlist, train_shortlisted  # noqa: E402
from headstart.training.trainer import train_labels  # noqa: E402

EDGES = (0, 50, 200, 500, 1000, 2000, 5000, 1 << 62)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--K", type=int, default=100)
    ap.add_argument("--no-fill", action="store_true")
    ap.add_argument("--train-K", type=int, default=0)
    ap.add_argument("--random-negatives", type=int, default=0)
    ap.add_argument("--neighbours", type=int, default=30)
    ap.add_argument("--per-bucket", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args(argv)

    X, Y, _, _, p, data = prepared(a.dataset, 1)
    r = build_shortlist(X, Y, FirstStageParams(K=a.K, fill=not a.no_fill, train_K=a.train_K,
                                                 random_negatives=a.random_negatives, neighbours=a.neighbours), threads=2)
    # rows of a label's sub-problem: its positives and its shortlisted instances (a
    # positive the first stage also lists counts once in training, twice here: close
    # enough for bucketing)
    rows = np.diff(data.Y.tocsc().indptr) + np.diff(r.shortlist.tocsc().indptr)
    train_labels(data.X, data.Y, p, np.arange(16))                  # compile both, outside the clock
    train_shortlisted(data.X, data.Y, r.shortlist, p, np.arange(16))
    rng = np.random.default_rng(0)
    total_full = total_sl = 0.0
    print("| sub-problem rows | labels | full ms/label | shortlisted ms/label | all such labels: full s | shortlisted s |")
    print("|---|---:|---:|---:|---:|---:|")
    for lo, hi in zip(EDGES[:-1], EDGES[1:]):
        members = np.flatnonzero((rows >= lo) & (rows < hi))
        if members.size == 0:
            continue
        labs = members if members.size <= a.per_bucket else np.sort(rng.choice(members, a.per_bucket, replace=False))
        full = short = np.inf
        for _ in range(a.repeat):
            full = min(full, timed_cpu(train_labels, data.X, data.Y, p, labs)[2])
            short = min(short, timed_cpu(train_shortlisted, data.X, data.Y, r.shortlist, p, labs)[2])
        scale = members.size / labs.size
        total_full += full * scale
        total_sl += short * scale
        top = f"{hi}" if hi < EDGES[-1] else "..."
        print(f"| {lo}-{top} | {members.size} | {full / labs.size * 1e3:.2f} | {short / labs.size * 1e3:.2f} | "
              f"{full * scale:.2f} | {short * scale:.2f} |", flush=True)
    print(f"\nall labels (scaled from the samples): full {total_full:.1f} CPU s, shortlisted {total_sl:.1f} CPU s, "
          f"{total_full / total_sl:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
