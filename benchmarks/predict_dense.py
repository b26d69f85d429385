#!/usr/bin/env python
"""Top-k prediction, dense weight columns: an old and a new source tree side by side.

    python benchmarks/predict_dense.py DATA --old-src OLD_CHECKOUT [--new-src .]
        [--labels 0] [--init INIT] [--repeat 5] [--threads 1] [--json OUT.json]

DATA is a dense data set of ``dense_paths.py make`` (``.npz``, e.g. ``make
svd:delicious:384``) or a shared XMC data set by name (``bibtex``, ``debian-deps``).
A model of the first ``--labels`` labels (0: all) is trained once by the new tree, with
the defaults and ``--init`` (default: zero on a dense set, aop -- the default -- on an
XMC set); then, for the old and the new tree in separate processes
(``PYTHONPATH`` = the tree), ``predict_topk`` (k = 5) of every test row is timed, min of
``--repeat`` calls after a warm-up, the two trees alternating.  Also timed in the same
run, on a dense set: the float32 BLAS product ``X @ W.T`` plus ``np.argpartition`` (numpy, one thread if
the BLAS honours ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``), the lower bound a
scorer that rounds sums differently could reach.  The two trees' labels and scores must
be identical bit for bit (the new code changes the loop, not the sums).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import sys, time, numpy as np, scipy.sparse as sp
from headstart.prediction.topk import predict_topk, prepare
z = np.load(sys.argv[1])
W = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
X = z["X"] if "X" in z.files else sp.csr_matrix((z["X_data"], z["X_indices"], z["X_indptr"]), shape=tuple(z["X_shape"]))
b, reps, threads = z["b"], int(sys.argv[3]), int(sys.argv[4])
pr = prepare((W, b))
predict_topk(pr, X[:50], k=5, threads=threads)          # compiles or loads the kernels
ts = []
for _ in range(reps):
    t0 = time.perf_counter(); labels, scores = predict_topk(pr, X, k=5, threads=threads); ts.append(time.perf_counter() - t0)
np.savez(sys.argv[2], labels=labels, scores=scores, times=np.array(ts))
"""


def _blas(X, W, b, reps):
    Wt = np.ascontiguousarray(W.toarray().T, dtype=np.float32)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        S = X @ Wt + b.astype(np.float32)
        np.argpartition(-S, 4, axis=1)[:, :5]
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--old-src", required=True)
    ap.add_argument("--new-src", default=str(HERE.parent))
    ap.add_argument("--labels", type=int, default=0)
    ap.add_argument("--init", default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(a.new_src).resolve()))
    from headstart.estimator import OvAClassifier

    if a.data.endswith(".npz"):
        z = np.load(a.data)
        Xtr, Xte = z["Xtr"], z["Xte"]
        Ytr = sp.csr_matrix((z["Ytr_data"], z["Ytr_indices"], z["Ytr_indptr"]), shape=tuple(z["Ytr_shape"]))
    else:
        sys.path.insert(0, str(HERE))
        from common import resolve_dataset
        from headstart.io import read_xmc

        d = resolve_dataset(a.data)
        (Xtr, Ytr), (Xte, _) = read_xmc(d / "train.txt.gz"), read_xmc(d / "test.txt.gz")
    if a.labels:
        Ytr = Ytr[:, :a.labels]
    init = a.init or ("zero" if a.data.endswith(".npz") else "aop")
    clf = OvAClassifier(init=init, threads=2).fit(Xtr, Ytr)
    W, b = sp.csr_matrix(clf.coef_, dtype=np.float32), np.asarray(clf.intercept_, dtype=np.float64)
    counts = np.diff(sp.csc_matrix(W).indptr)
    products = int(np.asarray((Xte != 0) @ counts).sum())     # weight products of the test rows
    out = {"data": a.data, "init": init, "test_rows": int(Xte.shape[0]), "features": int(W.shape[1]),
           "labels": int(W.shape[0]), "weights": int(W.nnz),
           "columns_half_full": int(np.count_nonzero((counts > 0) & (2 * counts >= W.shape[0]))),
           "threads": a.threads, "repeat": a.repeat}
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model.npz")
        Xs = ({f"X_{k}": v for k, v in (("data", Xte.data), ("indices", Xte.indices), ("indptr", Xte.indptr),
                                           ("shape", np.array(Xte.shape)))} if sp.issparse(Xte) else {"X": Xte})
        np.savez(model, data=W.data, indices=W.indices, indptr=W.indptr, shape=np.array(W.shape), b=b, **Xs)
        res = {}
        for side in ("old", "new"):          # one warm-up run each fills numba's cache
            src = str(Path(a.old_src if side == "old" else a.new_src).resolve())
            env = dict(os.environ, PYTHONPATH=src, NUMBA_NUM_THREADS=str(a.threads),
                       NUMBA_CACHE_DIR=os.path.join(tmp, f"numba-{side}"))
            for _round in range(2):
                path = os.path.join(tmp, f"{side}.npz")
                # cwd: a `python -c` child puts its working directory first on sys.path, which
                # would import the headstart of the directory it was started from
                subprocess.run([sys.executable, "-c", _CHILD + f"\nassert __import__('headstart').__file__.startswith({src!r})",
                                model, path, str(a.repeat), str(a.threads)], env=env, check=True, cwd=tmp)
                r = np.load(path)
                res[side] = {"labels": r["labels"], "scores": r["scores"],
                             "min": min(float(r["times"].min()), res.get(side, {}).get("min", np.inf))}
        if not sp.issparse(Xte):          # (a dense W of a sparse set's labels x features can be GBs)
            out["blas_float32_s"] = _blas(Xte, W, b, a.repeat)
    for side in ("old", "new"):
        out[f"{side}_s"] = res[side]["min"]
        out[f"{side}_ns_per_product"] = 1e9 * res[side]["min"] / max(products, 1)
    out["speedup"] = out["old_s"] / out["new_s"]
    if "blas_float32_s" in out:
        out["new_over_blas"] = out["new_s"] / out["blas_float32_s"]
    out["identical"] = bool(np.array_equal(res["old"]["labels"], res["new"]["labels"])
                            and np.array_equal(res["old"]["scores"].view(np.uint32), res["new"]["scores"].view(np.uint32)))
    print(json.dumps(out))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0 if out["identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
