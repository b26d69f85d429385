#!/usr/bin/env python
"""Thresholded prediction (``predict --threshold``) with many labels: an old and a new
checkout side by side.

    python benchmarks/predict_threshold.py --data DIR --trained MODEL_DIR --old-src OLD_CHECKOUT \\
        [--new-src .] [--labels 20000] [--threshold 0] [--full-rows 2000] [--threads 2] [--repeat 2]

Models are made as in :mod:`predict_scale` (the trained labels' weight rows drawn with
replacement up to ``--labels``).  Per version, in separate processes, rounds alternating:

* ``headstart predict MODEL test.txt.gz -o P --threshold T`` (whole command: wall time and
  peak RSS), after a warm-up on 200 rows that fills numba's cache;
* with ``--full-rows N``: ``predict_above`` alone on the first N test rows with a model of
  the whole label space (scoring time only).

The decision files of the two versions must be byte-identical, and the full-space
decisions equal.  Before the sparse path (helper-102) every row filled and scanned a
score for every label: 249 s for 5000 rows at 2M labels against 4.7 s for top-k.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import filecmp
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine_info  # noqa: E402
from predict_scale import make_model, run  # noqa: E402

sys.path.insert(1, str(REPO))

FULL_SPACE = r"""
import json, resource, sys, time
import numpy as np, scipy.sparse as sp
from headstart.io import read_xmc
from headstart.model import load_model
from headstart.prediction.topk import predict_above
trained, test, threads, rows, seed, out, thr, prune = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], float(sys.argv[7]), float(sys.argv[8])
m = load_model(trained, allow_gaps=True)
L = m.label_space
W = sp.csr_matrix(m.weights, dtype=np.float32)
if prune > 0:   # as make_model: the small weights dropped
    W.data[np.abs(W.data) < prune] = 0
    W.eliminate_zeros()
pick = np.random.default_rng(seed).integers(0, m.weights.shape[0], size=L)
W = sp.csc_matrix(W[pick])
b = np.asarray(m.intercept)[pick]
X, _ = read_xmc(test)
X = X[:rows]
predict_above((W[:50], b[:50]), X[:20], thr, n_columns=L, threads=threads)   # compile / load the cache
c = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
D = predict_above((W, b), X, thr, n_columns=L, threads=threads, return_scores=True)
wall = time.perf_counter() - t
c2 = resource.getrusage(resource.RUSAGE_SELF)
np.savez(out, indptr=D.indptr, indices=D.indices, data=D.data)
print(json.dumps({"labels": int(L), "nnz": int(W.nnz), "rows": int(X.shape[0]), "wall_s": wall,
                  "cpu_s": (c2.ru_utime + c2.ru_stime) - (c.ru_utime + c.ru_stime), "decisions": int(D.nnz)}))
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="folder with test.txt.gz")
    p.add_argument("--trained", required=True, help="model trained on the data set (some labels)")
    p.add_argument("--labels", type=int, default=20000, help="labels of the model made for the command (20000)")
    p.add_argument("--threshold", type=float, default=0.0)
    p.add_argument("--prune", type=float, default=0.0,
                   help="drop the weights |w| < T from the models (a sparser model, as DiSMEC's pruning makes)")
    p.add_argument("--old-src", required=True, help="source tree of the old code (a git worktree)")
    p.add_argument("--new-src", default=str(REPO), help="source tree of the new code (default: this one)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1, help="timed runs per version, interleaved; medians reported")
    p.add_argument("--full-rows", type=int, default=0, metavar="N",
                   help="also decide the first N test rows with a model of the whole label space")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    data = Path(args.data).resolve()
    test = data / "test.txt.gz"
    srcs = {"old": Path(args.old_src).resolve(), "new": Path(args.new_src).resolve()}
    from headstart.io import read_xmc, read_xmc_header, write_xmc

    label_space = read_xmc_header(test)[2]
    doc: dict = {"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                 "command": "python benchmarks/predict_threshold.py " + shlex.join(argv or sys.argv[1:]),
                 "data": data.name, "label_space": label_space, "threads": args.threads, "repeat": args.repeat,
                 "threshold": args.threshold, "prune": args.prune, "sources": {k: str(v) for k, v in srcs.items()},
                 "old_commit": subprocess.run(["git", "-C", str(srcs["old"]), "rev-parse", "HEAD"],
                                              capture_output=True, text=True).stdout.strip(),
                 "machine": machine_info()}
    X, Y = read_xmc(test)
    doc["test_rows"] = int(X.shape[0])
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="hs-threshold-") as tmp:
        work = Path(tmp)
        warm = work / "warm.txt"
        write_xmc(warm, X[:200], Y[:200])
        mdir = work / "model"
        doc["model"] = make_model(Path(args.trained).resolve(), args.labels, mdir, args.seed, args.prune)
        print(f"model: {doc['model']}", flush=True)
        base = [py, "-m", "headstart", "predict", str(mdir)]
        opts = ["--allow-gaps", "--threads", str(args.threads), "--quiet", "--threshold", repr(args.threshold)]
        for name, src in srcs.items():
            run(base + [str(warm), "-o", str(work / f"warm-{name}.txt")] + opts, src, args.threads)
        samples: dict = {name: [] for name in srcs}
        outs = {name: work / f"decisions-{name}.txt" for name in srcs}
        for rep in range(args.repeat):
            for name, src in srcs.items():
                r = run(base + [str(test), "-o", str(outs[name])] + opts, src, args.threads)
                samples[name].append({"cli_wall_s": r["wall_s"], "cli_cpu_s": r["cpu_s"],
                                      "cli_peak_rss_mb": r["peak_rss_mb"]})
                print(f"  [{rep + 1}/{args.repeat}] {name}: {samples[name][-1]}", flush=True)
        cmd = {name: {key: round(statistics.median(s[key] for s in samples[name]), 3) for key in samples[name][0]}
               | {"runs": samples[name]} for name in srcs}
        cmd["identical_decisions"] = filecmp.cmp(outs["old"], outs["new"], shallow=False)
        cmd["speedup"] = round(cmd["old"]["cli_wall_s"] / cmd["new"]["cli_wall_s"], 2)
        cmd["peak_rss_ratio"] = round(cmd["new"]["cli_peak_rss_mb"] / cmd["old"]["cli_peak_rss_mb"], 3)
        doc["command_run"] = cmd
        print(f"predict --threshold {args.threshold:g}, {args.labels} labels: identical {cmd['identical_decisions']}, "
              f"new {cmd['speedup']}x faster, peak RSS {cmd['peak_rss_ratio']}x", flush=True)
        if args.full_rows:
            full: dict = {name: [] for name in srcs}
            for rep in range(args.repeat):
                for name, src in srcs.items():
                    r = run([py, "-c", FULL_SPACE, str(Path(args.trained).resolve()), str(test), str(args.threads),
                             str(args.full_rows), str(args.seed), str(work / f"full-{name}.npz"),
                             repr(args.threshold), repr(args.prune)], src, args.threads)
                    res = json.loads(r["stdout"].strip().splitlines()[-1])
                    res["process_peak_rss_mb"] = r["peak_rss_mb"]
                    full[name].append(res)
                    print(f"  [{rep + 1}/{args.repeat}] all {label_space} labels, {args.full_rows} rows, {name}: "
                          f"{res}", flush=True)
            a, b = (np.load(work / f"full-{n}.npz") for n in ("old", "new"))
            fs = {name: {"wall_s": round(statistics.median(r["wall_s"] for r in full[name]), 3),
                         "runs": full[name]} for name in srcs}
            fs["identical_decisions"] = all(np.array_equal(a[k], b[k]) for k in ("indptr", "indices", "data"))
            fs["speedup"] = round(fs["old"]["wall_s"] / fs["new"]["wall_s"], 2)
            doc["full_label_space"] = fs
            print(f"all {label_space} labels, {args.full_rows} rows: identical {fs['identical_decisions']}, "
                  f"new {fs['speedup']}x faster", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
