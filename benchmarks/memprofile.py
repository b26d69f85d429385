#!/usr/bin/env python
"""Where the memory of one headstart training run goes (issue 4's memory target).

    python benchmarks/memprofile.py DATASET [--labels A:B] [--threads T] [--init aop]

Runs what ``worker.py`` runs for ``headstart-<init>`` (read, warm up, train with
``OvAClassifier.fit``) while a thread samples RSS every millisecond, and wraps the
trainer's steps (renumbered copy of X, problem set-up, init ``prepare``, lane workspaces,
each chunk, the assembly of the model and statistics) so that every RSS change is
attributed to the step that was running.  Prints, per step, the RSS increase it caused
(RSS when it ended minus RSS when it started) and the highest RSS seen while it ran,
both relative to the RSS just before training -- the baseline of the harness's
``train_rss_increase_mb``.

What it found on debian-deps (all 22908 labels, 2 threads, aop; model 94.5 MB, data
12.2 MB), MB of RSS over the start of training, at the end of training / at the peak:

=========================================  ==========  ==============================
item                                        before      after
=========================================  ==========  ==============================
finished chunks' weights                    94.5        54.1 (packed, training/packed.py)
second copy of the model in stack_rows      +94.4       0 (chunks in mappings, released)
lane workspaces (2 threads)                 54.3        44.7 (int8/int32 dtypes, kernel)
per-iteration records (2 threads)           10.3        0.4 (iteration-major)
renumbered copy of X                        10.7        10.7
statistics of the chunks                    8.9         8.9
malloc-held free memory (set-up bincount    ~41         ~16 (no nnz-long temporaries,
temporaries ~21, worker arenas, Y, misc)                 malloc_trim per chunk)
peak (memprofile, 1 ms sampling)            315.9       142.7
harness train_rss_increase_mb               307.6       132.3 (ratio 3.0 -> 1.35)
=========================================  ==========  ==============================
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from common import csr_bytes, dataset_for, label_slice, load_split, parse_label_range  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 2**20


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


class Timeline(threading.Thread):
    def __init__(self, interval: float = 0.001):
        super().__init__(daemon=True)
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self.events: list[tuple[float, str, str]] = []   # (time, "begin"/"end", name)
        self._halt = threading.Event()
        self.lock = threading.Lock()

    def run(self):
        while not self._halt.wait(self.interval):
            self.samples.append((time.perf_counter(), rss()))

    def mark(self, kind: str, name: str):
        r = rss()
        t = time.perf_counter()
        with self.lock:
            self.events.append((t, kind, name))
            self.samples.append((t, r))

    def stop(self):
        self._halt.set()
        self.join()


_libc = None


def libc():
    global _libc
    if _libc is None:
        import ctypes
        import ctypes.util
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    return _libc


def resident_bytes(a) -> int:
    """Bytes of the pages of array ``a`` that are resident (mincore), pages shared with
    neighbours included."""
    import ctypes

    a = np.asarray(a)
    if a.nbytes == 0:
        return 0
    start = a.ctypes.data // PAGE * PAGE
    end = -(-(a.ctypes.data + a.nbytes) // PAGE) * PAGE
    npages = (end - start) // PAGE
    vec = (ctypes.c_ubyte * npages)()
    if libc().mincore(ctypes.c_void_p(start), ctypes.c_size_t(end - start), vec) != 0:
        return -1
    return sum(v & 1 for v in bytes(vec)) * PAGE


def mallinfo() -> dict:
    """glibc's mallinfo2: bytes in use, held free in the arenas, and mmapped."""
    import ctypes

    class MI(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                  "fsmblks", "uordblks", "fordblks", "keepcost")]
    f = libc().mallinfo2
    f.restype = MI
    m = f()
    return {"heap MB": m.arena / MB, "heap in use MB": m.uordblks / MB, "heap free MB": m.fordblks / MB,
            "mmapped MB": m.hblkhd / MB}


def wrap(tl: Timeline, obj, attr: str, name: str | None = None):
    f = getattr(obj, attr)
    label = name or attr

    @functools.wraps(f)
    def g(*a, **kw):
        tag = f"{label}[{threading.current_thread().name}]"
        tl.mark("begin", tag)
        try:
            return f(*a, **kw)
        finally:
            tl.mark("end", tag)

    setattr(obj, attr, g)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--labels", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--init", default="aop")
    ap.add_argument("--chunks", action="store_true", help="list every chunk, not only a summary")
    ap.add_argument("--residency", action="store_true",
                    help="keep the workspaces alive and report their resident pages when training ends "
                         "(inflates the peak: for attribution only)")
    args = ap.parse_args()

    from headstart import OvAClassifier
    from headstart.training import stats as st_mod
    from headstart.training import chunks as ch
    from headstart.training import trainer as tr
    from headstart import estimator as est

    ddir = dataset_for(args.dataset)
    X, Y_full = load_split(ddir / "train.txt.gz")
    a, b = parse_label_range(args.labels, Y_full.shape[1])
    Y = label_slice(Y_full, a, b)
    data_bytes = csr_bytes(X) + csr_bytes(Y)
    settings = dict(C=1.0, epsilon=0.01, bias=1.0, prune=0.01, regularize_bias=False, max_iter=1000,
                    normalize=False)
    # warm-up (JIT), as the worker does
    OvAClassifier(init=args.init, threads=args.threads, **settings).fit(
        X[:300], Y_full[:300], first_label=a, num_labels=min(2, b - a))

    tl = Timeline()
    for obj, attr in [(est, "prepare_data"), (tr, "prepare_problem"), (tr, "make_initializer"),
                      (tr, "make_workspace"), (tr, "make_records"), (tr, "train_chunk"), (ch, "stack_rows"),
                      (ch, "chunk_stats"), (ch, "chunk_weights"),
                      (tr, "report_problems"), (tr.FeatureOrder, "by_frequency"),
                      (tr.FeatureOrder, "to_internal"), (tr.FeatureOrder, "to_original")]:
        wrap(tl, obj, attr)
    wrap(tl, st_mod.TrainingStats, "concat")
    kept: dict[str, object] = {}
    if args.residency:
        tc = tr.train_chunk

        def train_chunk(*a):
            name = threading.current_thread().name
            kept["P"] = a[0]
            kept["WS " + name] = a[2]
            kept["rec " + name] = a[11:16]
            return tc(*a)
        tr.train_chunk = train_chunk
        sr = ch.stack_rows

        def stack_rows(results, d):
            report = {}
            for k, v in kept.items():
                if k == "P":
                    report["X renumbered (P.indptr/indices/data)"] = sum(resident_bytes(x) for x in v[:3]) / MB
                elif k.startswith("WS") and isinstance(v, tuple) and hasattr(v, "_fields"):
                    for f in v._fields:
                        report[f"{k.split()[0]} {f} [{k.split()[1]}]"] = resident_bytes(getattr(v, f)) / MB
                else:
                    report[k] = sum(resident_bytes(x) for x in v) / MB
            W = [r.weights for r in results]
            report["chunk results: weights (nbytes)"] = sum(
                getattr(w, f).nbytes for w in W for f in ("indptr", "indices", "data", "codes", "low", "top")
                if getattr(w, f, None) is not None) / MB
            report["chunk results: stats (nbytes)"] = sum(
                sum(a.nbytes for a in r.stats.columns.values()) + sum(a.nbytes for a in r.stats.iterations.values())
                for r in results) / MB
            report.update(mallinfo())
            report["RSS - base"] = (rss() - base) / MB
            kept["report"] = report
            return sr(results, d)
        ch.stack_rows = stack_rows
    # the initialiser's prepare: wrap the instance method of whatever make_initializer returns
    mk = tr.make_initializer

    def make_initializer(params):
        init = mk(params)
        p = init.prepare

        def prepare(ctx):
            tl.mark("begin", "init.prepare")
            try:
                return p(ctx)
            finally:
                tl.mark("end", "init.prepare")
        init.prepare = prepare
        return init
    tr.make_initializer = make_initializer

    gc.collect()
    base = rss()
    print("malloc before training:", {k: round(v, 1) for k, v in mallinfo().items()})
    tl.start()
    t0 = time.perf_counter()
    tl.mark("begin", "fit")
    clf = OvAClassifier(init=args.init, threads=args.threads, **settings)
    clf.fit(X, Y_full, first_label=a, num_labels=b - a)
    W = clf.coef_.tocsr()
    tl.mark("end", "fit")
    wall = time.perf_counter() - t0
    tl.stop()
    model_bytes = csr_bytes(W) + csr_bytes(np.asarray(clf.intercept_, dtype=np.float32))
    peak = max(r for _, r in tl.samples)

    # per step: RSS change between begin and end, max RSS while running (over base)
    opened: dict[str, tuple[float, int]] = {}
    rows: dict[str, list] = {}
    samples = np.array(tl.samples, dtype=float)
    samples = samples[np.argsort(samples[:, 0], kind="stable")]
    for t, kind, name in sorted(tl.events):
        if kind == "begin":
            i = np.searchsorted(samples[:, 0], t)
            opened[name] = (t, int(samples[min(i, len(samples) - 1), 1]))
        else:
            t_b, r_b = opened.pop(name)
            i0, i1 = np.searchsorted(samples[:, 0], [t_b, t])
            seg = samples[i0:i1 + 1, 1]
            r_e = int(samples[min(i1, len(samples) - 1), 1])
            key = name if args.chunks or not name.startswith(("train_chunk", "chunk_stats", "chunk_weights")) \
                else name.split("[")[0] + "[*]"
            row = rows.setdefault(key, [0, 0.0, -1e18, 0.0])
            row[0] += 1
            row[1] += (r_e - r_b) / MB
            row[2] = max(row[2], (seg.max() - base) / MB if seg.size else 0.0)
            row[3] += t - t_b
    print(f"data {data_bytes / MB:.1f} MB, model {model_bytes / MB:.1f} MB, nnz {W.nnz}, wall {wall:.1f} s")
    print(f"RSS before training {base / MB:.1f} MB; training peak increase {(peak - base) / MB:.1f} MB; "
          f"ratio (data + increase) / (data + model) = "
          f"{(data_bytes + peak - base) / (data_bytes + model_bytes):.2f}")
    print(f"{'step':44s} {'calls':>5s} {'sum dRSS MB':>12s} {'max RSS-base MB':>16s} {'seconds':>8s}")
    for k, (c, dr, mx, sec) in rows.items():
        print(f"{k:44s} {c:5d} {dr:12.1f} {mx:16.1f} {sec:8.2f}")
    if "report" in kept:
        print("at the end of training (before the model is assembled):")
        ws = {}
        for k, v in kept["report"].items():
            if k.startswith("WS "):
                f = k.split()[1]
                ws[f] = ws.get(f, 0.0) + v
            else:
                print(f"  {k:44s} {v:8.1f}")
        print("  lane workspaces, resident MB summed over threads: "
              + ", ".join(f"{f} {v:.1f}" for f, v in ws.items()) + f"; total {sum(ws.values()):.1f}")
    # RSS over time, every 5% of the run
    print("timeline (s, RSS-base MB):", " ".join(
        f"{samples[i, 0] - samples[0, 0]:.1f}:{(samples[i, 1] - base) / MB:.0f}"
        for i in np.linspace(0, len(samples) - 1, 21).astype(int)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
