"""CPU cost of Dask training against local training, summed over every process.

    .venv/bin/python benchmarks/dask_cpu.py [--data debian-deps | --synth DIR] [--labels A:B]
        [--widen L] [--configs local-1t,local-2t,dask-2w] [--repeat 1] [--json FILE]

Each configuration runs in a fresh child process (``--one NAME``) that reads the data,
then measures around the training call alone: wall time, and CPU seconds of itself plus
all its descendants (``getrusage`` of the process and of its reaped children: the
LocalCluster's nannies and workers are joined before the call returns, so their whole
CPU time -- start-up, scatter, tasks, shut-down -- is counted).  ``dask-2w`` is
``train_dask(n_workers=2)``: what ``headstart train --dask-workers 2`` runs, with the
cluster it starts and stops; ``dask-2w-warm`` runs on a cluster started beforehand and
counts the training alone (psutil over the process tree).  A name ending in ``-old``
runs the backend as it was before helper-73 (Dask's default timers in the LocalCluster,
tasks of ``default_task_size`` labels) in the same session.  Every model is compared with
the first configuration's, bit for bit.

``--widen L`` spreads the data set's labels over a label space of ``L`` labels (label
``j`` becomes ``j * L // L0``; the others have no positive instance): the shape of a
multi-million label space where most labels are (nearly) empty.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def tree_cpu() -> float:
    """CPU seconds of this process and its reaped children, plus its live descendants."""
    import psutil

    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def load(args):
    from headstart.io import read_xmc

    path = Path(args.synth) / "train.txt.gz" if args.synth else Path("/work/shared/data") / args.data / "train.txt.gz"
    X, Y = read_xmc(str(path))
    if args.widen:
        import scipy.sparse as sp

        L0 = Y.shape[1]
        Y = sp.csr_matrix(Y)
        Y = sp.csr_matrix((Y.data, (np.arange(L0, dtype=np.int64) * args.widen // L0)[Y.indices], Y.indptr),
                          shape=(Y.shape[0], args.widen))
    return X, Y


def one(args) -> dict:
    from headstart.distributed import prepare_data, train_sharded
    from headstart.distributed.dask_backend import dask_client, train_dask
    from headstart.params import TrainParams

    X, Y = load(args)
    a, _, b = args.labels.partition(":")
    a, b = int(a or 0), min(int(b or Y.shape[1]), Y.shape[1])
    params = TrainParams()
    data = prepare_data(X, Y, params, a, b - a)
    out = Path(args.out)
    kind = args.one
    rec: dict = {"config": kind, "labels": b - a}
    size = args.shard_size
    if kind.endswith("-old"):
        # the backend before helper-73: Dask's default timers, tasks of default_task_size labels
        from headstart.distributed import dask_backend

        kind = kind[:-len("-old")]
        dask_backend.LOCAL_CLUSTER_CONFIG = {}
        size = size or dask_backend.default_task_size(b - a, 2)
    if kind.startswith("local"):
        threads = int(kind.split("-")[1][:-1])
        c0, t0 = tree_cpu(), time.perf_counter()
        r = train_sharded(None, None, params.replace(threads=threads), out, data=data, shard_size=size)
    elif kind == "dask-2w":
        c0, t0 = tree_cpu(), time.perf_counter()
        r = train_dask(None, None, params, out, n_workers=2, data=data, shard_size=size)
    elif kind == "dask-2w-warm":
        with dask_client(None, 2) as client:
            client.wait_for_workers(2)
            c0, t0 = tree_cpu(), time.perf_counter()
            r = train_dask(None, None, params, out, client=client, data=data, task_threads=1, shard_size=size)
            rec["wall_s"] = time.perf_counter() - t0
            rec["cpu_s"] = tree_cpu() - c0
    else:
        raise SystemExit(f"unknown configuration {kind}")
    rec.setdefault("wall_s", time.perf_counter() - t0)
    rec.setdefault("cpu_s", tree_cpu() - c0)
    rec["shard_size"] = r.info.get("shard_size", size)
    rec["tasks"] = r.info.get("tasks")
    rec["trained"] = int(sum(b - a for a, b in r.trained))
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="debian-deps")
    ap.add_argument("--synth", help="a directory written by benchmarks/synth.py")
    ap.add_argument("--labels", default="0:")
    ap.add_argument("--widen", type=int, default=0)
    ap.add_argument("--shard-size", type=int, default=None)
    ap.add_argument("--configs", default="local-1t,local-2t,dask-2w")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args)))
        return 0

    from headstart.model.format import load_model

    work = Path(tempfile.mkdtemp(prefix="headstart-dask-cpu-"))
    results, ref = [], None
    try:
        for rep in range(args.repeat):
            for name in args.configs.split(","):
                out = work / f"{name}-{rep}"
                cmd = [sys.executable, __file__, "--one", name, "--out", str(out), "--labels", args.labels,
                       "--data", args.data] + (["--synth", args.synth] if args.synth else []) \
                    + (["--widen", str(args.widen)] if args.widen else []) \
                    + (["--shard-size", str(args.shard_size)] if args.shard_size else [])
                load0 = os.getloadavg()[0]
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode:
                    print(p.stderr[-3000:])
                    raise SystemExit(f"{name} failed")
                rec = json.loads(p.stdout.strip().splitlines()[-1])
                rec["load"] = round(load0, 2)
                m = load_model(out, allow_gaps=True)
                if ref is None:
                    ref = m
                rec["same"] = bool((m.weights != ref.weights).nnz == 0 and np.array_equal(m.intercept, ref.intercept))
                shutil.rmtree(out, ignore_errors=True)
                results.append(rec)
                print(f"{name:13s} rep {rep}: wall {rec['wall_s']:7.2f} s  CPU {rec['cpu_s']:7.2f} s  "
                      f"shard {rec['shard_size']} tasks {rec.get('tasks')}  load {rec['load']:.1f}  same={rec['same']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
