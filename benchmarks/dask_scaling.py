"""Scaling of the Dask backend: 1 vs 2 workers, and its overhead against local threads.

    .venv/bin/python benchmarks/dask_scaling.py [--data debian-deps] [--labels 0:600] [--repeat 1]
                                                [--json results.json]

Trains one label range of a data set (default: debian-deps, labels 0..599) with

* ``local-1t`` / ``local-2t``: :func:`headstart.distributed.train_sharded` on this
  machine's threads (1 and 2);
* ``dask-1w-1t``, ``dask-1w-2t``: a LocalCluster of one worker process whose tasks use
  1 or 2 threads;
* ``dask-2w-1t``: two worker processes, one thread each (the usual "one worker per
  core" layout on this 2-core machine);

checks that every run produced the same weights as ``local-2t``, and prints wall time,
labels per second, the overhead of Dask against the local run with the same number of
cores, the per-label cost (CPU-seconds per label from the per-label timings), the load
average and how many cores our processes and *other* processes used meanwhile.  Cluster start-up (including
the first call of the compiled kernels on every worker) and the scatter of the data are
reported separately from the training time.

The machine is shared (2 cores, other sessions run builds and tests): numbers are
noisy, and the foreign-cores column says how noisy each one was.  Wall-clock numbers are only
meaningful on a quiet machine; the CPU time of our own processes (this one and the Dask
workers, ``CPU/label``) is much less sensitive to sharing, so overheads are also given
as CPU ratios.  ``--repeat`` keeps the run with the least CPU time; ``--max-load`` waits
for a quieter moment.

It also measures what decides *scatter vs shared path* for the training data: the time
to parse the training file versus the time to scatter the parsed arrays to the workers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def find_data(name: str) -> Path:
    for root in (Path(name), HERE.parent / "data" / name, HERE.parent.parent / "shared" / "data" / name,
                 Path("/work/shared/data") / name):
        if (root / "train.txt.gz").is_file():
            return root
    raise SystemExit(f"data set {name!r} not found (looked for {name}/train.txt.gz, data/, shared/data/)")


def busy_jiffies() -> tuple[int, int] | None:
    try:
        with open("/proc/stat") as fh:
            v = [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v[:8]) - idle, sum(v[:8])


class Probe:
    """Load average around a run, the cores the whole machine kept busy, the CPU time of
    our own processes (this one and the Dask workers) and so the cores used by others."""

    def __init__(self, client=None) -> None:
        self.client = client
        self.load0 = os.getloadavg()
        self.cpu0 = self._own_cpu()
        self.j0 = busy_jiffies()
        self.t0 = time.perf_counter()

    def _own_cpu(self) -> float:
        own = time.process_time()
        if self.client is not None:
            own += sum(self.client.run(time.process_time).values())
        return own

    def done(self) -> dict:
        wall = time.perf_counter() - self.t0
        j1 = busy_jiffies()
        own_s = self._own_cpu() - self.cpu0
        own = own_s / wall
        out = {"loadavg_before": round(self.load0[0], 2), "loadavg_after": round(os.getloadavg()[0], 2),
               "own_cpu_s": round(own_s, 3), "own_cores": round(own, 2)}
        if self.j0 and j1 and wall > 0:
            busy = (j1[0] - self.j0[0]) / os.sysconf("SC_CLK_TCK") / wall
            out["machine_busy_cores"] = round(busy, 2)
            out["foreign_cores"] = round(max(0.0, busy - own), 2)
        return out


def parse_range(text: str, L: int) -> tuple[int, int]:
    a, _, b = text.partition(":")
    a = int(a or 0)
    b = min(int(b or L), L)
    if not 0 <= a < b:
        raise SystemExit(f"--labels {text}: empty range")
    return a, b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="debian-deps")
    ap.add_argument("--labels", default="0:600", help="label range A:B (default 0:600)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration; the fastest is reported")
    ap.add_argument("--configs", default="local-1t,local-2t,dask-1w-1t,dask-1w-2t,dask-2w-1t")
    ap.add_argument("--json", help="write the results here as JSON")
    ap.add_argument("--max-load", type=float, default=None,
                    help="before each run, wait (up to --wait seconds) for the 1-minute load average "
                         "to drop below this")
    ap.add_argument("--wait", type=float, default=300.0)
    args = ap.parse_args(argv)

    import distributed

    from headstart.distributed import prepare_data, train_sharded
    from headstart.distributed.dask_backend import TrainingArrays, train_dask
    from headstart.io import read_xmc
    from headstart.model.format import load_model
    from headstart.params import TrainParams

    root = find_data(args.data)
    t = time.perf_counter()
    X, Y = read_xmc(str(root / "train.txt.gz"))
    t_parse = time.perf_counter() - t
    a, b = parse_range(args.labels, Y.shape[1])
    params = TrainParams()
    data = prepare_data(X, Y, params, a, b - a)
    n_labels = b - a
    print(f"{args.data}: n={X.shape[0]} d={X.shape[1]} L={Y.shape[1]} nnz(X)={X.nnz}; labels [{a}, {b}); "
          f"parse {t_parse:.2f} s; {os.cpu_count()} cores; loadavg {os.getloadavg()[0]:.2f}", flush=True)

    work = Path(tempfile.mkdtemp(prefix="headstart-dask-bench-"))
    results: dict[str, dict] = {}
    reference = None
    try:
        # warm the compiled kernels in this process
        train_sharded(None, None, params.replace(threads=1), work / "warm", data=prepare_data(X, Y, params, a, 8))
        for name in args.configs.split(","):
            kind, *rest = name.split("-")
            best = None
            for _ in range(args.repeat):
                if args.max_load is not None:
                    t_end = time.monotonic() + args.wait
                    while os.getloadavg()[0] > args.max_load and time.monotonic() < t_end:
                        time.sleep(5)
                out = work / name
                shutil.rmtree(out, ignore_errors=True)
                rec: dict = {}
                if kind == "local":
                    threads = int(rest[0][:-1])
                    probe = Probe()
                    t = time.perf_counter()
                    r = train_sharded(None, None, params.replace(threads=threads), out, data=data)
                    rec["train_s"] = time.perf_counter() - t
                    rec.update(probe.done())
                    rec["cores"] = threads
                else:
                    workers, threads = int(rest[0][:-1]), int(rest[1][:-1])
                    t = time.perf_counter()
                    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                       host="127.0.0.1", dashboard_address=None,
                                                       silence_logs=logging.ERROR)
                    client = distributed.Client(cluster)
                    client.wait_for_workers(workers)
                    # start-up: imports and the first call of the compiled kernels on every worker
                    warm = prepare_data(X, Y, params, a, 2 * workers)
                    train_dask(None, None, params, work / "warm-dask", client=client, data=warm, shard_size=2,
                               task_threads=threads, overwrite=True)
                    rec["cluster_start_s"] = time.perf_counter() - t
                    try:
                        t = time.perf_counter()
                        fut = client.scatter(TrainingArrays(data.X, data.Y), broadcast=True, hash=False)
                        rec["scatter_s"] = time.perf_counter() - t
                        del fut
                        probe = Probe(client)
                        t = time.perf_counter()
                        r = train_dask(None, None, params, out, client=client, data=data, task_threads=threads)
                        rec["train_s"] = time.perf_counter() - t
                        rec.update(probe.done())
                        rec["tasks"] = -(-n_labels // r.info["shard_size"])
                        rec["shard_size"] = r.info["shard_size"]
                    finally:
                        client.close()
                        cluster.close()
                    rec["cores"] = workers * threads
                rec["labels_per_s"] = n_labels / rec["train_s"]
                # CPU time of our processes per label: the cost, whatever else runs on the machine
                rec["cpu_s_per_label"] = rec["own_cpu_s"] / n_labels
                # the kernel's per-label wall clock (inflated when the cores are shared)
                rec["label_wall_s"] = float(np.sum(r.stats["seconds"])) / n_labels
                if best is None or rec["own_cpu_s"] < best["own_cpu_s"]:
                    best = rec
            model = load_model(work / name, allow_gaps=True)
            if reference is None:
                reference = model
            best["same_weights"] = bool(abs(model.weights - reference.weights).max() == 0.0
                                        and np.array_equal(model.intercept, reference.intercept))
            results[name] = best
            print(f"  {name:11s} {best['train_s']:7.2f} s  {best['labels_per_s']:6.1f} labels/s  "
                  f"CPU/label {best['cpu_s_per_label'] * 1e3:5.1f} ms  "
                  f"label wall {best['label_wall_s'] * 1e3:5.1f} ms  "
                  f"load {best['loadavg_before']:.1f}->{best['loadavg_after']:.1f}  own cores {best['own_cores']:.2f}  "
                  f"foreign cores {best.get('foreign_cores', float('nan')):.2f}"
                  + (f"  (cluster start {best['cluster_start_s']:.1f} s, scatter {best['scatter_s']:.2f} s)"
                     if "cluster_start_s" in best else "") + ("" if best["same_weights"] else "  WEIGHTS DIFFER"),
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def ratio(x: str, y: str, key: str = "train_s") -> float | None:
        return results[x][key] / results[y][key] if x in results and y in results else None

    summary = {
        "wall_speedup_dask_2w_vs_1w": ratio("dask-1w-1t", "dask-2w-1t"),
        "wall_speedup_local_2t_vs_1t": ratio("local-1t", "local-2t"),
        "wall_dask_1w1t_over_local_1t": ratio("dask-1w-1t", "local-1t"),
        "wall_dask_2w1t_over_local_2t": ratio("dask-2w-1t", "local-2t"),
        "cpu_dask_1w1t_over_local_1t": ratio("dask-1w-1t", "local-1t", "own_cpu_s"),
        "cpu_dask_2w1t_over_local_2t": ratio("dask-2w-1t", "local-2t", "own_cpu_s"),
        "cpu_dask_1w2t_over_local_2t": ratio("dask-1w-2t", "local-2t", "own_cpu_s"),
    }
    print("summary: " + ", ".join(f"{k} {v:.2f}" for k, v in summary.items() if v is not None))
    cpu = min(r["cpu_s_per_label"] for k, r in results.items() if k.startswith("local")) \
        if any(k.startswith("local") for k in results) else min(r["cpu_s_per_label"] for r in results.values())
    print(f"per-label cost: {cpu * 1e3:.1f} CPU-ms per label at nnz(X)={X.nnz} "
          f"({cpu / X.nnz * 1e9:.2f} CPU-ns per label per stored feature value); "
          f"loadavg now {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    summary["cpu_s_per_label"] = cpu
    summary["cpu_ns_per_label_per_nnz"] = cpu / X.nnz * 1e9
    out = {"data": args.data, "n": X.shape[0], "d": X.shape[1], "L": Y.shape[1], "nnz": int(X.nnz),
           "labels": [a, b], "parse_s": t_parse, "cores": os.cpu_count(), "results": results, "summary": summary,
           "x_bytes": int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
