"""One method, one run, one process: ``python benchmarks/worker.py SPEC.json``.

Phases (only phase 4 is the training time that is compared):

1. read the training split (``headstart.io.read_xmc``, the same reader for every method);
2. cut the label range (or the label sample: its labels become 0..N-1);
3. warm-up on a tiny problem (JIT compilation; reported as ``warmup_s``);
4. **train** -- wall time, CPU time (user + sys of this process and any children), RSS
   sampled every 5 ms, and ``ru_maxrss`` at the end (the peak of the whole process);
5. read the test split, predict the top 5 among the trained labels, compute P@k.

The result (or the error) is written as JSON to the path named in the spec.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from common import csr_bytes, label_columns, label_slice, load_split  # noqa: E402
from methods import K, METHODS, Context  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 2**20


def current_rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * PAGE
    except OSError:
        return 0


class RssSampler(threading.Thread):
    """Peak resident set size of this process while training (reads /proc/self/statm)."""

    def __init__(self, interval: float = 0.005):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = current_rss()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            r = current_rss()
            if r > self.peak:
                self.peak = r

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        self.peak = max(self.peak, current_rss())
        return self.peak


def cpu_seconds() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def maxrss_bytes() -> int:
    s = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024      # kB on Linux
    c = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return max(s, c)


def warmup(method, ctx: Context) -> float:
    """Train the method once on a tiny problem and score 20 rows: imports, JIT compilation and
    lazy initialisation are paid here, not in the timed run.  Returns the seconds spent.

    The tiny problem is 2 labels of the range starting at the first one with a training
    positive, on the first 200 rows plus up to 100 rows where that label is positive (some
    peers abort on a problem without any positive).
    """
    t = time.perf_counter()
    k = ctx.Y.shape[1]
    counts = np.diff(ctx.Y.tocsc().indptr)
    c = int(np.flatnonzero(counts)[0]) if counts.any() else 0
    c = min(c, max(k - 2, 0))
    z = min(c + 2, k)
    pos = ctx.Y.tocsc()[:, c].indices[:100]
    rows = np.union1d(np.arange(min(ctx.X.shape[0], 200)), pos)
    wdir = os.path.join(ctx.tmpdir, "warmup")
    os.makedirs(wdir, exist_ok=True)
    Yf = ctx.Y_full[rows]
    tiny = Context(X=ctx.X[rows], Y=ctx.Y[rows][:, c:z].tocsr(), Y_full=Yf, first=ctx.first + c,
                   threads=ctx.threads, settings=dict(ctx.settings), tmpdir=wdir, train_path=ctx.train_path)
    m = method.train(tiny)
    if m.W is not None:
        from headstart.prediction.topk import predict_topk

        predict_topk((m.W, m.b), ctx.X[:20], K, threads=ctx.threads)
    else:
        m.predict(ctx.X[:20], K)
    if method.warmup is not None:
        method.warmup(ctx)
    del m
    return time.perf_counter() - t


def precision(Yt, labels: np.ndarray) -> dict:
    from headstart.metrics import evaluate

    m = evaluate(Yt, labels, ks=(1, 3, 5))
    return {k: round(100.0 * float(m[k]), 4) for k in ("P@1", "P@3", "P@5", "nDCG@5")}


def run(spec: dict) -> dict:
    method = METHODS[spec["method"]]
    ddir = Path(spec["dataset_dir"])
    a, b = int(spec["first"]), int(spec["last"])
    threads = int(spec["threads"])
    out: dict = {"method": method.name, "status": "ok", "pid": os.getpid()}

    # a label sample becomes labels 0..N-1 of a narrower label matrix, for every method alike
    sample = spec.get("label_sample")
    t = time.perf_counter()
    X, Y_full = load_split(ddir / "train.txt.gz")
    if sample is not None:
        Y_full = label_columns(Y_full, sample)
    Y = label_slice(Y_full, a, b)
    out["load_train_s"] = round(time.perf_counter() - t, 4)
    out["train_data_bytes"] = csr_bytes(X) + csr_bytes(Y)

    with tempfile.TemporaryDirectory(prefix=f"hsbench-{method.name}-", dir=spec.get("tmp_root")) as tmp:
        ctx = Context(X=X, Y=Y, Y_full=Y_full, first=a, threads=threads, settings=dict(spec["settings"]),
                      tmpdir=tmp, train_path=str(ddir / "train.txt.gz"))
        out["warmup_s"] = round(warmup(method, ctx), 4) if spec.get("warmup", True) else 0.0

        gc.collect()
        out["rss_before_train_mb"] = round(current_rss() / MB, 2)
        sampler = RssSampler()
        sampler.start()
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        model = method.train(ctx)
        wall = time.perf_counter() - t0
        cpu = cpu_seconds() - c0
        peak = sampler.stop()
        out["wall_s"] = round(wall - model.untimed_s, 4)
        out["cpu_s"] = round(cpu - model.untimed_cpu_s, 4)
        out["untimed_s"] = round(model.untimed_s, 4)
        out["train_peak_rss_mb"] = round(peak / MB, 2)
        out["peak_rss_mb"] = round(maxrss_bytes() / MB, 2)
        out["nnz"] = model.nnz
        out["model_bytes"] = (csr_bytes(model.W) + csr_bytes(model.b)) if model.W is not None else None
        out["info"] = model.info

        # ---- evaluation (not timed as training)
        t = time.perf_counter()
        Xt, Yt_full = load_split(ddir / "test.txt.gz")
        if sample is not None:
            Yt_full = label_columns(Yt_full, sample)
        Yt = label_slice(Yt_full, a, b)
        out["load_test_s"] = round(time.perf_counter() - t, 4)
        t = time.perf_counter()
        if model.W is not None:
            from headstart.prediction.topk import predict_topk

            lab, _ = predict_topk((model.W, model.b), Xt, K, threads=threads)
            out["predict_via"] = "headstart.prediction.topk.predict_topk on the extracted weights"
        else:
            lab = model.predict(Xt, K)
            out["predict_via"] = f"{method.name} native predict"
        out["predict_s"] = round(time.perf_counter() - t, 4)
        out.update(precision(Yt, np.asarray(lab, dtype=np.int64)))
        out["test_rows"] = int(Xt.shape[0])
        out["test_rows_with_labels_in_range"] = int(np.count_nonzero(np.diff(Yt.indptr)))
        out["train_positives"] = int(Y.nnz)
    out["peak_rss_total_mb"] = round(maxrss_bytes() / MB, 2)
    return out


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    try:
        res = run(spec)
        code = 0
    except MemoryError as e:
        res = {"method": spec["method"], "status": "error", "error": f"MemoryError: {e}",
               "traceback": traceback.format_exc(limit=8)}
        code = 1
    except BaseException as e:  # noqa: BLE001 - every failure is a result
        res = {"method": spec["method"], "status": "error", "error": f"{type(e).__name__}: {e}",
               "traceback": traceback.format_exc(limit=8)}
        code = 1
    Path(spec["result_path"]).write_text(json.dumps(res, indent=1, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
