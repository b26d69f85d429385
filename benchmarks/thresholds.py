"""Per-label thresholds side by side: headstart's ``tuning.scutfbr`` against
LibMultiLabel's ``libmultilabel.linear.train_thresholding``, on the same data and
machine, in one run.

    python benchmarks/thresholds.py --data bibtex [medical ...] --peer-python /tmp/thr-bench/venv/bin/python \
        [--peer-python OTHER_VENV/bin/python ...] [--threads 2] [--peer-threads 2,1] [--repeat N] \
        [--timeout 1800] [--json out.json]

LibMultiLabel is not a dependency of headstart and pins liblinear-multicore, which
replaces liblinear-official's ``liblinear`` module: it runs from its own venv
(``--peer-python``, repeatable: one column per venv) in a subprocess that loads the data
this script wrote as .npz files.  Both sides get the same rows: features L2-normalised
(per row) here once, so neither side normalises inside its timed region.

Same model on both sides: LIBLINEAR ``-s 2 -e 0.01 -c 1 -B 1`` (squared hinge, C 1,
bias feature 1, regularised) and headstart ``loss=squared-hinge, C=1, epsilon=0.01,
bias=1, regularize_bias=True, prune=0`` (the objective of ``-s 2 -B 1``, unpruned weights,
as tests/test_training.py matches them), ``init=aop``.  Threads: headstart ``threads=T``;
LibMultiLabel passes ``-m T`` to liblinear-multicore (its own default is
psutil.cpu_count(logical=False), or os.cpu_count()/2 in 0.3.x).

Timed: headstart ``scutfbr`` + the final training on all rows (after an untimed warm-up
that compiles the Numba kernels); LibMultiLabel ``train_thresholding`` (includes its
final model).  Evaluated on the test set with ``headstart.metrics.f1_scores`` on dense
decisions (score - threshold > 0), plus headstart's model at the plain threshold 0.

LibMultiLabel draws its folds per label from the unseeded global ``np.random``; the
subprocess calls ``np.random.seed(--seed)`` first, so a run is repeatable.  Note which
algorithm the installed version has: up to 0.3.3 ``train_thresholding`` is SCut + fbr
with nested 3 x 3 cross-validation (what headstart implements); from 0.4.0 it is the
"micromacro-freq" method (one 3-fold level, cut maximising Micro-F1 + Macro-F1, labels in
decreasing frequency, no fbr).  The subprocess reports which one it ran.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import add_peer_arguments  # noqa: E402

#: default python of the peer (a venv with libmultilabel; see the module text)
PEER_PYTHON = "/tmp/thr-bench/venv/bin/python"

OPTIONS = "-s 2 -e 0.01 -c 1 -B 1"
HEADSTART = dict(loss="squared-hinge", C=1.0, epsilon=0.01, bias=1.0, regularize_bias=True, prune=0.0,
                 init="aop")

# Runs in the peer's venv: argv = workdir, options, seed.  Writes decisions.npy and
# prints one JSON line.
PEER_CODE = r"""
import json, sys, time
from importlib.metadata import version
import numpy as np, scipy.sparse as sp
import libmultilabel.linear as lml
import libmultilabel.linear.linear as impl
work, options, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
liblinear = None
for dist in ("liblinear-multicore", "liblinear-official"):
    try:
        liblinear = f"{dist} {version(dist)}"
        break
    except Exception:
        pass
X = sp.csr_matrix(sp.load_npz(f"{work}/X.npz"))
Y = sp.csr_matrix(sp.load_npz(f"{work}/Y.npz"))
Xt = sp.csr_matrix(sp.load_npz(f"{work}/Xt.npz"))
np.random.seed(seed)
t0, c0 = time.perf_counter(), time.process_time()
model = lml.train_thresholding(Y, X, options=options, verbose=False)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
D = np.asarray(lml.predict_values(model, Xt))          # score + their threshold (= -t)
np.save(f"{work}/decisions.npy", D)
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "version": version("libmultilabel"),
                  "liblinear": liblinear,
                  "algorithm": "scut+fbr (nested 3x3)" if hasattr(impl, "_thresholding_one_label")
                               else "micromacro-freq (3-fold)",
                  "thresholds": (-np.asarray(model.thresholds, dtype=float)).tolist()}))
"""


def busy_cpu_s() -> float:
    """CPU seconds all processes of the machine have used (from /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")      # all but idle and iowait


def other_cores(busy0: float, own_cpu: float, wall: float) -> float:
    """Average cores used by other processes during a run of ``wall`` seconds."""
    return round(max(0.0, busy_cpu_s() - busy0 - own_cpu) / wall, 2) if wall > 0 else 0.0


def dataset_paths(name: str) -> tuple[Path, Path]:
    """A data set name (data/NAME, else /work/shared/data/NAME) or a folder with
    train.txt.gz and test.txt.gz."""
    for d in (Path(name), ROOT / "data" / name, Path("/work/shared/data") / name):
        if (d / "train.txt.gz").is_file():
            return d / "train.txt.gz", d / "test.txt.gz"
    raise SystemExit(f"no train.txt.gz for data set {name!r}")


def l2_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X.data /= np.repeat(np.where(norms > 0, norms, 1.0), np.diff(X.indptr))
    return X


def load(name: str, normalize: bool):
    from headstart import read_xmc

    train, test = dataset_paths(name)
    X, Y = read_xmc(train, dtype=np.float64)
    Xt, Yt = read_xmc(test, dtype=np.float64)
    if Xt.shape[1] < X.shape[1]:                    # test may have fewer columns; pad
        Xt = sp.csr_matrix((Xt.data, Xt.indices, Xt.indptr), shape=(Xt.shape[0], X.shape[1]))
    Xt = Xt[:, :X.shape[1]]
    if Yt.shape[1] < Y.shape[1]:
        Yt = sp.csr_matrix((Yt.data, Yt.indices, Yt.indptr), shape=(Yt.shape[0], Y.shape[1]))
    if normalize:
        X, Xt = l2_rows(X), l2_rows(Xt)
    return X, Y, Xt, Yt


def f1(Yt, D: np.ndarray, t: np.ndarray | float = 0.0) -> dict:
    """Micro/Macro/Another-Macro F1 (percent) of the decisions D > t (t per label)."""
    from headstart.metrics import f1_scores

    scores = f1_scores(Yt, np.asarray(D, dtype=np.float64) - np.asarray(t, dtype=np.float64))
    return {k: round(100 * v, 2) for k, v in scores.items()}


def run_headstart(X, Y, Xt, Yt, threads: int, seed: int, repeat: int, method: str = "scutfbr") -> dict:
    from types import SimpleNamespace

    from headstart.estimator import fit_model
    from headstart.params import TrainParams
    from headstart.prediction.topk import decision_function
    from headstart import tuning

    def scutfbr(X, Y, params, seed):
        if method == "scutfbr":
            return tuning.scutfbr(X, Y, params, seed=seed)
        t = tuning.micromacro(X, Y, params, seed=seed)
        return SimpleNamespace(thresholds=t, trainings=3, fbr=np.zeros(0))

    params = TrainParams(**HEADSTART, threads=threads)
    t0 = time.perf_counter()                         # warm-up: compile (or load) the kernels
    m = min(X.shape[0], 300)
    scutfbr(X[:m], Y[:m], params, seed=seed)
    fit_model(X[:m], Y[:m], params)
    warmup = time.perf_counter() - t0
    walls, cpus, others = [], [], []
    for _ in range(repeat):
        t0, c0, b0 = time.perf_counter(), time.process_time(), busy_cpu_s()
        r = scutfbr(X, Y, params, seed=seed)
        t_cv = time.perf_counter() - t0
        model, _ = fit_model(X, Y, params)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        others.append(other_cores(b0, cpus[-1], walls[-1]))
    D = decision_function(model, Xt, threads=threads, max_memory=2**32)
    return {"status": "ok", "wall_s": statistics.median(walls), "walls_s": walls, "cpu_s": statistics.median(cpus),
            "other_cores": others, "cv_s": t_cv, "warmup_s": warmup, "trainings": r.trainings + 1,
            "f1": f1(Yt, D, r.thresholds), "f1_threshold0": f1(Yt, D),
            "thresholds": r.thresholds.tolist(), "fbr": r.fbr.tolist()}


def run_peer(python: str, X, Y, Xt, Yt, threads: int, seed: int, repeat: int, timeout: float) -> dict:
    import resource

    options = f"{OPTIONS} -m {threads}"
    base = Path("/tmp/thr-bench")
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as work:
        for name, M in (("X", X), ("Y", Y), ("Xt", Xt)):
            sp.save_npz(f"{work}/{name}.npz", sp.csr_matrix(M, dtype=np.float64))
        runs = []
        for _ in range(repeat):
            t0, b0 = time.perf_counter(), busy_cpu_s()
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            try:
                p = subprocess.run([python, "-c", PEER_CODE, work, options, str(seed)], capture_output=True,
                                   text=True, timeout=timeout or None)
            except subprocess.TimeoutExpired:
                return {"status": f"timeout after {timeout:g} s", "python": python, "options": options}
            if p.returncode != 0:
                return {"status": "error: " + p.stderr.strip().splitlines()[-1], "python": python,
                        "options": options}
            runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            own = c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime
            runs[-1]["other_cores"] = other_cores(b0, own, time.perf_counter() - t0)
        D = np.load(f"{work}/decisions.npy")
    out = runs[0]
    t = np.asarray(out["thresholds"])
    out.update(status="ok", python=python, options=options, seed=seed,
               wall_s=statistics.median(r["wall_s"] for r in runs), walls_s=[r["wall_s"] for r in runs],
               cpu_s=statistics.median(r["cpu_s"] for r in runs), f1=f1(Yt, D),
               other_cores=[r["other_cores"] for r in runs],
               same_thresholds_every_run=all(r["thresholds"] == out["thresholds"] for r in runs))
    out["thresholds"] = t.tolist()
    return out


def table(results: list[dict]) -> str:
    head = ("| data set | method | wall s | CPU s | time / headstart | other cores | Micro-F1 | Macro-F1 | Another-Macro-F1 |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = [head]
    for res in results:
        hs = res["headstart"]
        entries = [(f"headstart {hs.get('method', 'scutfbr')} + final training", hs, hs["f1"]),
                   ("headstart, threshold 0 (final model only)", None, hs["f1_threshold0"])]
        for peer in res["peers"]:
            label = (f"LibMultiLabel {peer['version']} train_thresholding, {peer['algorithm']}"
                     if "version" in peer else f"LibMultiLabel ({peer['python']})") + f", `{peer['options']}`"
            entries.append((label, peer, peer.get("f1")))
        for label, timing, f in entries:
            if timing is not None and timing.get("status") != "ok":
                rows.append(f"| {res['data']} | {label} | {timing['status']} | | | | | | |")
                continue
            wall = f"{timing['wall_s']:.2f}" if timing else "--"
            if timing and len(timing["walls_s"]) > 1:
                wall += " (" + ", ".join(f"{w:.2f}" for w in timing["walls_s"]) + ")"
            cpu = f"{timing['cpu_s']:.2f}" if timing else "--"
            ratio = f"{timing['wall_s'] / hs['wall_s']:.1f}x" if timing else "--"
            other = "/".join(f"{v:.2f}" for v in timing["other_cores"]) if timing else "--"
            rows.append(f"| {res['data']} | {label} | {wall} | {cpu} | {ratio} | {other} | {f['Micro-F1']:.2f} | "
                        f"{f['Macro-F1']:.2f} | {f['Another-Macro-F1']:.2f} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_peer_arguments(ap, PEER_PYTHON)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer-threads", metavar="LIST",
                    help="LIBLINEAR -m values for LibMultiLabel, comma-separated, one row each (default: --threads)")
    ap.add_argument("--seed", type=int, default=0, help="headstart's fold seed and the peer's np.random.seed")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per side (median reported)")
    ap.add_argument("--timeout", type=float, default=0, help="seconds per LibMultiLabel run (0: none)")
    ap.add_argument("--no-normalize", dest="normalize", action="store_false",
                    help="give both sides the rows as read (default: L2-normalised rows on both sides)")
    ap.add_argument("--method", choices=("scutfbr", "micromacro"), default="scutfbr",
                    help="headstart's method (compare scutfbr with LibMultiLabel <= 0.3.3, micromacro with >= 0.4)")
    ap.add_argument("--json", metavar="FILE", help="write all results (thresholds included) as JSON")
    args = ap.parse_args(argv)
    peers = args.peer_python or [PEER_PYTHON]
    peer_threads = [int(m) for m in args.peer_threads.split(",")] if args.peer_threads else [args.threads]

    results = []
    for name in args.data:
        X, Y, Xt, Yt = load(name, args.normalize)
        res = {"data": name, "shape": {"train": list(X.shape), "test": list(Xt.shape), "labels": Y.shape[1]},
               "normalize": args.normalize, "threads": args.threads, "load_before": os.getloadavg()}
        print(f"{name}: {X.shape[0]} train / {Xt.shape[0]} test rows, {X.shape[1]} features, {Y.shape[1]} labels",
              file=sys.stderr, flush=True)
        res["headstart"] = run_headstart(X, Y, Xt, Yt, args.threads, args.seed, args.repeat, args.method)
        res["headstart"]["method"] = args.method
        res["headstart"]["params"] = dict(HEADSTART, threads=args.threads)
        print(f"  headstart {res['headstart']['wall_s']:.2f} s", file=sys.stderr, flush=True)
        res["peers"] = []
        for py in peers:
            for m in peer_threads:
                r = run_peer(py, X, Y, Xt, Yt, m, args.seed, args.repeat, args.timeout)
                print(f"  {py} -m {m}: {r['status']} {r.get('wall_s', 0):.2f} s", file=sys.stderr, flush=True)
                res["peers"].append(r)
        res["load_after"] = os.getloadavg()
        results.append(res)

    print(table(results))
    for res in results:
        print(f"\n{res['data']}: load average before/after {[round(v, 2) for v in res['load_before']]} / "
              f"{[round(v, 2) for v in res['load_after']]}; rows {'L2-normalised' if res['normalize'] else 'as read'}; "
              f"{res['threads']} threads; headstart warm-up {res['headstart']['warmup_s']:.1f} s (not timed)")
    if args.json:
        commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                                text=True).stdout.strip()
        meta = {"argv": sys.argv, "commit": commit, "python": platform.python_version(), "cpus": os.cpu_count(),
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
