"""Training with 16, 8 and 1 lanes per thread, or 16 lanes shared per team of threads, in
one process, alternately, on the same data.

The trainer keeps 16 lanes per thread (one sweep over X serves 16 labels) while all
threads' lane buffers fit the lane budget (half the memory the process may use), else 8
(``kernel.lanes_scores8``), else one; "team" is 16 lanes shared per team of up to four
threads (:mod:`headstart.training.team`: 16 / 4 lanes each, the pass over X split by rows;
from zero or with the logistic loss each thread groups the lanes it takes, as lone
threads with 16 lanes do), "team-nogroups" the same without direction groups.
This measures what each step down costs in time and saves in memory: per mode the median
wall time over the rounds (the order rotating so that no mode always runs first), its
ratio to the first, whether the weights equal the first's bit for bit, and the lane
buffers of one thread by ``training.budget.thread_workspace_bytes`` (a team's: its
buffers over its threads, ``team_workspace_bytes``) -- for this data set and for the
published shapes.

    python benchmarks/lanes.py debian-deps --labels 0:2000 --threads 2 --rounds 3
    python benchmarks/lanes.py /work/data/amazon-670k --labels 0:160 --lanes 16,8,team --json out.json
    python benchmarks/lanes.py /work/data/amazon-670k --labels 0:128 --init zero --lanes 16,team-nogroups,team
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.before_after import dataset_files  # noqa: E402
from headstart.io.xmc import read_xmc  # noqa: E402
from headstart.params import TrainParams  # noqa: E402
from headstart.init import make_initializer  # noqa: E402
from headstart.objective import losses  # noqa: E402
from headstart.training.budget import team_workspace_bytes, thread_workspace_bytes, use_groups  # noqa: E402
from headstart.training.trainer import train_labels  # noqa: E402

# (name, rows, features) of the published sets the docs quote
SHAPES = [("Amazon-670K", 490449, 135909), ("AmazonCat-13K", 1186239, 203882),
          ("WikiLSHTC-325K", 1778351, 1617899)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--labels", default="0:1000")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lanes", default="16,8,1,team",
                    help="modes, comma-separated: lanes per thread, team or team-nogroups")
    ap.add_argument("--init", default="aop")
    ap.add_argument("--loss", default="squared-hinge")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    counts = [v if v.startswith("team") else int(v) for v in a.lanes.split(",")]
    lo, hi = map(int, a.labels.split(":"))
    train, _ = dataset_files(a.dataset)
    X, Y = read_xmc(train)
    labels = np.arange(lo, min(hi, Y.shape[1]))
    p = TrainParams(threads=a.threads, init=a.init, loss=a.loss)
    init = make_initializer(p)
    warm = labels[:32]
    def run(L, labels):
        if L == "team":
            return train_labels(X, Y, p, labels, shared=True, trajectories=False)
        if L == "team-nogroups":
            return train_labels(X, Y, p, labels, shared=True, groups=False, trajectories=False)
        return train_labels(X, Y, p, labels, lanes=L, shared=False, trajectories=False)

    def per_thread(n, d, L):
        if L in ("team", "team-nogroups"):
            grouped = L == "team" and use_groups(16, init.sparse_start, losses.get(a.loss).mines)
            return team_workspace_bytes(n, d, a.threads, grouped) / a.threads
        return thread_workspace_bytes(n, d, L)

    for L in counts:          # compile or load the kernels, untimed
        run(L, warm)
    times = {L: [] for L in counts}
    weights = {}
    for r in range(a.rounds):
        order = counts[r % len(counts):] + counts[:r % len(counts)]
        for L in order:
            t0 = time.perf_counter()
            W, b, _ = run(L, labels)
            times[L].append(time.perf_counter() - t0)
            weights.setdefault(L, (W, b))
            print(f"round {r + 1}: {L:>4} lanes {times[L][-1]:8.2f} s", flush=True)
    ref = counts[0]
    W0, b0 = weights[ref]
    n, d = X.shape
    rows = []
    for L in counts:
        W, b = weights[L]
        med = statistics.median(times[L])
        rows.append({"lanes": L, "median_s": med, "times": times[L],
                     "slowdown": med / statistics.median(times[ref]),
                     "same_bits": bool((W != W0).nnz == 0 and np.array_equal(b, b0)),
                     "thread_buffers_bytes": per_thread(n, d, L)})
    print(f"\n{a.dataset}, labels {lo}:{labels[-1] + 1}, {a.threads} threads, init {a.init}, loss {a.loss}, "
          f"medians of {a.rounds} rounds")
    print("lanes   median s   vs first   same bits   lane buffers per thread")
    for row in rows:
        print(f"{row['lanes']:>5} {row['median_s']:10.2f} {row['slowdown']:9.2f}x {str(row['same_bits']):>11}"
              f" {row['thread_buffers_bytes'] / 2**20:12.1f} MiB")
    shapes = []
    print(f"\nlane buffers of one thread for the published shapes ({a.threads} threads):")
    for name, rn, fd in SHAPES:
        per = {L: per_thread(rn, fd, L) for L in (16, 8, 1, "team", "team-nogroups")}
        shapes.append({"shape": name, "rows": rn, "features": fd, **{f"lanes_{L}": v for L, v in per.items()}})
        print(f"  {name}: " + ", ".join(f"{L} lanes {v / 2**20:.0f} MiB" for L, v in per.items()))
    if a.json:
        Path(a.json).write_text(json.dumps({"dataset": a.dataset, "labels": [lo, int(labels[-1]) + 1],
                                            "threads": a.threads, "init": a.init, "loss": a.loss,
                                            "rounds": a.rounds,
                                            "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows,
                                            "shapes": shapes}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
