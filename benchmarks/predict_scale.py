#!/usr/bin/env python
"""Top-k prediction with many labels: an old and a new checkout side by side (issue 12).

    python benchmarks/predict_scale.py --data DIR --trained MODEL_DIR --labels 5000,20000 \\
        --old-src OLD_CHECKOUT [--new-src .] [--threads 2] [--json OUT.json]

DIR holds test.txt.gz (e.g. the Amazon-670K preset, ``python -m benchmarks.synth
amazon-670k -o DIR``).  MODEL_DIR is a model trained on DIR's training split for some labels
(``headstart train DIR/train.txt.gz --first-label 0 --num-labels 1000``).  For every count
in ``--labels`` a model of that many labels is made from the trained labels' weight rows
(drawn with replacement, intercepts with them; label ids of the data set's label space),
so it has the trained models' weights per label and their features; then, for the old and
the new source tree, in separate processes:

* ``headstart predict MODEL test.txt.gz -o P --allow-gaps --threads T`` (whole command: wall
  time and peak RSS of the process), after a warm-up on 200 rows that fills numba's cache;
* ``predict_topk`` alone on the test rows already in memory (scoring time only).

With ``--repeat R`` both are run R times per version, old and new interleaved, and the
medians are reported (every run is kept in the JSON).

The two prediction files must be byte-identical.  Also recorded: per test row the weight
products (sum over its features of the model's labels with a weight on the feature) and,
on a sample of rows, the number of labels touched.  Times extrapolated to all labels of the
label space (x L / labels) are marked as such.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import filecmp
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine_info  # noqa: E402

sys.path.insert(1, str(REPO))  # this checkout's headstart for the models and statistics made here

SCORE_ONLY = r"""
import json, resource, sys, time
from headstart.io import read_xmc
from headstart.model import load_model
from headstart.prediction.topk import predict_topk
model = load_model(sys.argv[1], allow_gaps=True)
X, _ = read_xmc(sys.argv[2])
threads = int(sys.argv[3])
kw = {"max_memory": int(sys.argv[4])} if len(sys.argv) > 4 else {}
predict_topk(model, X[:200], 5, threads=threads)         # compile / load numba's cache
c = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
labels, scores = predict_topk(model, X, 5, threads=threads, **kw)
wall = time.perf_counter() - t
c2 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"score_s": wall, "cpu_s": (c2.ru_utime + c2.ru_stime) - (c.ru_utime + c.ru_stime),
                  "rows": X.shape[0]}))
"""


FULL_SPACE = r"""
import json, resource, sys, time
import numpy as np, scipy.sparse as sp
from headstart.io import read_xmc
from headstart.model import load_model
from headstart.prediction.topk import predict_topk
trained, test, threads, rows, seed, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
m = load_model(trained, allow_gaps=True)
L = m.label_space
pick = np.random.default_rng(seed).integers(0, m.weights.shape[0], size=L)
W = sp.csr_matrix(m.weights)[pick]
b = np.asarray(m.intercept)[pick]
X, _ = read_xmc(test)
X = X[:rows]
predict_topk((W[:50], b[:50]), X[:20], 5, threads=threads)  # compile / load numba's cache
# the feature-major copy is made before the clock starts (both versions take a CSC as it
# is): the time below is scoring; the copy's own time is reported apart
t = time.perf_counter()
W = sp.csc_matrix(W, dtype=np.float32)
csc_s = time.perf_counter() - t
c = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
labels, scores = predict_topk((W, b), X, 5, threads=threads)
wall = time.perf_counter() - t
c2 = resource.getrusage(resource.RUSAGE_SELF)
np.save(out + "-labels.npy", labels)
np.save(out + "-scores.npy", scores)
print(json.dumps({"labels": int(L), "nnz": int(W.nnz), "rows": int(X.shape[0]), "wall_s": wall, "csc_s": csc_s,
                  "cpu_s": (c2.ru_utime + c2.ru_stime) - (c.ru_utime + c.ru_stime)}))
"""


#: runs one command and reports its peak RSS: started from a small process, because a child's
#: ru_maxrss also counts the RSS of the process it was forked from (this one holds the data)
RSS_WRAPPER = ("import resource, subprocess, sys\n"
               "r = subprocess.run(sys.argv[1:])\n"
               "sys.stderr.write('\\nMAXRSS_KB %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "sys.exit(r.returncode)\n")


def run(cmd: list[str], src: Path, threads: int) -> dict:
    """Run a command with ``src`` first on the import path; wall time, CPU time and peak RSS."""
    cmd = [sys.executable, "-c", RSS_WRAPPER] + cmd
    env = dict(os.environ, PYTHONPATH=str(src), NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS="1")
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t = time.perf_counter()
        # run in src: "python -c" and "python -m" put the working directory first on the
        # import path, ahead of PYTHONPATH, so from a checkout's root both versions would
        # import that checkout (until 2026-11-29 the "old" runs did: see docs/benchmarks.md)
        p = subprocess.Popen(cmd, env=env, stdout=fo, stderr=fe, cwd=src)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode(), fe.read().decode()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{err[-3000:]}")
    rss = [int(line.split()[1]) for line in err.splitlines() if line.startswith("MAXRSS_KB ")]
    return {"wall_s": round(wall, 3), "peak_rss_mb": round(rss[-1] / 1024, 1) if rss else None,
            "cpu_s": round(ru.ru_utime + ru.ru_stime, 3), "stdout": out}


def make_model(trained: Path, labels: int, out: Path, seed: int, prune: float = 0.0) -> dict:
    from headstart.model import OvAModel, load_model, save_model

    m = load_model(trained, allow_gaps=True)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, m.weights.shape[0], size=labels)
    W = sp.csr_matrix(m.weights)[pick]
    if prune > 0:  # a sparser model: the small weights dropped
        W.data[np.abs(W.data) < prune] = 0
        W.eliminate_zeros()
    b = np.asarray(m.intercept)[pick]
    save_model(OvAModel(weights=W, intercept=b, n_features=m.n_features, label_space=m.label_space,
                        first_label=0, params=m.params, preprocessing=m.preprocessing), out)
    return {"labels": labels, "extra_prune": prune, "nnz": int(W.nnz), "nnz_per_label": round(W.nnz / labels, 1),
            "trained_labels": int(m.weights.shape[0]), "intercepts_nonzero": int(np.count_nonzero(b))}


def work_stats(model_dir: Path, X: sp.csr_matrix, sample: int = 2000) -> dict:
    """Weight products per row, the share of rows the new kernel scores densely (its rule),
    and labels touched per row on a sample of rows."""
    from headstart.model import load_model
    from headstart.prediction.topk import _DENSE_RATIO

    m = load_model(model_dir, allow_gaps=True)
    W = sp.csr_matrix(m.weights)
    L = W.shape[0]
    col = np.bincount(W.indices, minlength=W.shape[1]).astype(np.float64)
    work = X.sign() @ col if X.nnz else np.zeros(X.shape[0])
    rows = np.random.default_rng(0).choice(X.shape[0], size=min(sample, X.shape[0]), replace=False)
    P = (X[rows].sign() @ W.sign().T).tocsr()
    touched = np.diff(P.indptr)
    return {"weight_products_per_row_mean": round(float(np.mean(work)), 1),
            "weight_products_per_row_p90": round(float(np.percentile(work, 90)), 1),
            "rows_scored_dense": round(float(np.mean(work >= max(1.0, _DENSE_RATIO * L))), 4),
            "touched_labels_per_row_mean": round(float(touched.mean()), 1),
            "touched_share_of_labels": round(float(touched.mean() / L), 4)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="folder with test.txt.gz")
    p.add_argument("--trained", required=True, help="model trained on the data set (some labels)")
    p.add_argument("--labels", default="20000", help="comma-separated label counts of the models (default 20000)")
    p.add_argument("--old-src", required=True, help="source tree of the old code (a git worktree)")
    p.add_argument("--new-src", default=str(REPO), help="source tree of the new code (default: this one)")
    p.add_argument("--prune", default="0",
                   help="comma-separated thresholds: also make models without the weights |w| < T (default 0: none)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1,
                   help="timed runs per version, interleaved old/new; medians reported (default 1)")
    p.add_argument("--full-rows", type=int, default=0, metavar="N",
                   help="also score the first N test rows with a model of the whole label space (weight rows "
                        "drawn like the others; needs about 16 bytes per weight of memory), old and new")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=None, help="keep models and predictions here (default: a temp folder)")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    data = Path(args.data).resolve()      # absolute: the versions run in their own folders
    test = data / "test.txt.gz"
    args.trained = str(Path(args.trained).resolve())
    if args.workdir:
        args.workdir = str(Path(args.workdir).resolve())
    srcs = {"old": Path(args.old_src).resolve(), "new": Path(args.new_src).resolve()}
    from headstart.io import read_xmc, read_xmc_header, write_xmc

    label_space = read_xmc_header(test)[2]
    doc: dict = {"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                 "command": "python benchmarks/predict_scale.py " + shlex.join(argv or sys.argv[1:]),
                 "data": data.name, "label_space": label_space, "threads": args.threads, "repeat": args.repeat,
                 "sources": {k: str(v) for k, v in srcs.items()},
                 "old_commit": subprocess.run(["git", "-C", str(srcs["old"]), "rev-parse", "HEAD"],
                                              capture_output=True, text=True).stdout.strip(),
                 "machine": machine_info(), "runs": []}
    synth_json = data / "synth.json"
    if synth_json.is_file():
        doc["synthetic"] = {k: json.loads(synth_json.read_text())[k] for k in ("preset", "scale", "seed")}
    X, Y = read_xmc(test)
    doc["test_rows"] = int(X.shape[0])
    with tempfile.TemporaryDirectory(prefix="hs-predict-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        warm = work / "warm.txt"
        write_xmc(warm, X[:200], Y[:200])
        counts = [int(v) for v in args.labels.split(",") if v.strip()]
        for n_labels, prune in [(n, float(t)) for n in counts for t in args.prune.split(",")]:
            mdir = work / f"model-{n_labels}-p{prune:g}"
            info = make_model(Path(args.trained), n_labels, mdir, args.seed, prune)
            info.update(work_stats(mdir, X))
            print(f"{n_labels} labels: {info}", flush=True)
            entry: dict = {"model": info}
            outs = {}
            py = sys.executable
            base = [py, "-m", "headstart", "predict", str(mdir)]
            opts = ["--allow-gaps", "--threads", str(args.threads), "--quiet", "-k", "5"]
            for name, src in srcs.items():  # numba's cache filled for both before any timing
                run(base + [str(warm), "-o", str(work / f"warm-{name}.txt")] + opts, src, args.threads)
            samples: dict = {name: [] for name in srcs}
            for rep in range(args.repeat):  # old, new, old, new, ...: both see the same machine
                for name, src in srcs.items():
                    outs[name] = work / f"pred-{n_labels}-p{prune:g}-{name}.txt"
                    cli = run(base + [str(test), "-o", str(outs[name])] + opts, src, args.threads)
                    sc = run([py, "-c", SCORE_ONLY, str(mdir), str(test), str(args.threads)], src, args.threads)
                    score = json.loads(sc["stdout"].strip().splitlines()[-1])
                    samples[name].append({"cli_wall_s": cli["wall_s"], "cli_cpu_s": cli["cpu_s"],
                                          "cli_peak_rss_mb": cli["peak_rss_mb"], "score_s": round(score["score_s"], 3),
                                          "score_cpu_s": round(score["cpu_s"], 3),
                                          "score_process_peak_rss_mb": sc["peak_rss_mb"]})
                    print(f"  [{rep + 1}/{args.repeat}] {name}: {samples[name][-1]}", flush=True)
            for name in srcs:
                entry[name] = {key: round(statistics.median(r[key] for r in samples[name]), 3)
                               for key in samples[name][0]}
                entry[name]["runs"] = samples[name]
            # the old predict_topk sizes its row chunks by labels (256 MiB / (4 bytes x labels)): at the
            # label space's size that is this many rows, and a chunk below 2 x 64 rows runs on one thread
            old_rows = (256 << 20) // (4 * label_space)
            sc = run([sys.executable, "-c", SCORE_ONLY, str(mdir), str(test), str(args.threads),
                      str(4 * n_labels * old_rows)], srcs["old"], args.threads)
            res = json.loads(sc["stdout"].strip().splitlines()[-1])
            entry["old_chunked_as_at_label_space"] = {
                "chunk_rows": int(old_rows), "score_s": round(res["score_s"], 3), "cpu_s": round(res["cpu_s"], 3),
                "note": "old code with the row chunks it uses at the full label space (its default max_memory "
                        "divided by 4 bytes x label_space), emulated on this model with max_memory scaled"}
            print(f"  old, chunked as at {label_space} labels: {entry['old_chunked_as_at_label_space']}", flush=True)
            entry["identical_predictions"] = filecmp.cmp(outs["old"], outs["new"], shallow=False)
            f = label_space / n_labels
            entry["extrapolated_to_label_space"] = {
                "factor": round(f, 3),
                "old_score_s": round(entry["old"]["score_s"] * f, 1),
                "old_chunked_score_s": round(entry["old_chunked_as_at_label_space"]["score_s"] * f, 1),
                "new_score_s": round(entry["new"]["score_s"] * f, 1),
                "note": "EXTRAPOLATED, not measured: scoring time x label_space / labels; both the dense scan "
                        "and the weight products grow linearly with the labels of a model whose labels are "
                        "drawn from the same weight rows"}
            entry["score_speedup"] = round(entry["old"]["score_s"] / entry["new"]["score_s"], 2)
            entry["score_cpu_ratio"] = round(entry["old"]["score_cpu_s"] / entry["new"]["score_cpu_s"], 2)
            entry["cli_speedup"] = round(entry["old"]["cli_wall_s"] / entry["new"]["cli_wall_s"], 2)
            print(f"  identical predictions: {entry['identical_predictions']}; scoring {entry['score_speedup']}x, "
                  f"whole command {entry['cli_speedup']}x", flush=True)
            doc["runs"].append(entry)
        if args.full_rows:
            full: dict = {}
            samples: dict = {name: [] for name in srcs}
            for rep in range(args.repeat):  # old, new, old, new, ...
                for name, src in srcs.items():
                    r = run([sys.executable, "-c", FULL_SPACE, str(args.trained), str(test), str(args.threads),
                             str(args.full_rows), str(args.seed), str(work / f"full-{name}")], src, args.threads)
                    res = {k: (round(v, 3) if isinstance(v, float) else v)
                           for k, v in json.loads(r["stdout"].strip().splitlines()[-1]).items()}
                    res["process_peak_rss_mb"] = r["peak_rss_mb"]
                    samples[name].append(res)
                    print(f"  [{rep + 1}/{args.repeat}] all {label_space} labels, {args.full_rows} rows, {name}: "
                          f"{res}", flush=True)
            for name in srcs:
                full[name] = dict(samples[name][0])
                for key in ("wall_s", "cpu_s", "process_peak_rss_mb"):
                    full[name][key] = round(statistics.median(r[key] for r in samples[name]), 3)
                full[name]["runs"] = samples[name]
            full["identical_predictions"] = all(
                np.array_equal(np.load(work / f"full-old-{x}.npy"), np.load(work / f"full-new-{x}.npy"))
                for x in ("labels", "scores"))
            full["speedup"] = round(full["old"]["wall_s"] / full["new"]["wall_s"], 2)
            f = doc["test_rows"] / args.full_rows
            full["extrapolated_to_test_rows"] = {
                "factor": round(f, 2), "old_wall_s": round(full["old"]["wall_s"] * f, 1),
                "new_wall_s": round(full["new"]["wall_s"] * f, 1),
                "note": "EXTRAPOLATED, not measured: wall time of the first rows x test rows / rows"}
            doc["full_label_space"] = full
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
