"""Every training path against LIBLINEAR, one thread, label by label: time and objective.

    python benchmarks/paths.py DATASET [--svd 128] [--top 50] [--rand 250] [--reps 2]
        [--paths sq:zero:reg,sq:aop:reg,lr:aop:reg,lrL1:aop:reg,...] [--C 1] [--ref-eps 1e-4]

A path is LOSS:INIT:BIAS -- LOSS ``sq`` (squared hinge, LIBLINEAR -s 2), ``lr`` (logistic,
-s 0), ``sqL1`` / ``lrL1`` (with headstart's l1 regulariser, the Huber-smoothed one, -s 5
/ -s 6), ``sqL1x`` / ``lrL1x`` (headstart's l1-exact: newGLMNET; ``sqL1c`` the same with
``--l1-solver cdn``, -s 5's method; both start from zero
whatever INIT says); INIT any
registered initialiser; BIAS ``reg`` (-B 1, bias regularised), ``noreg`` (-B 1 -R) or
``none`` (-B -1).  Labels: the ``--top`` most frequent and ``--rand`` random others.

For each path, after compiling headstart's kernels on 4 labels, headstart and LIBLINEAR
(liblinear-official, through the plumbing of :mod:`methods`) train the same labels,
alternating, ``--reps`` times; the minimum of each is reported, with the ratio LIBLINEAR /
headstart (below 1: headstart is slower).  Both models' objectives are recomputed here in
float64 from their unpruned weights with one formula (exact L1 for the l1 paths: headstart
solves a Huber-smoothed L1, DiSMEC++'s), the relative difference per label summarised;
``--ref-eps`` adds the distance of both to a tighter LIBLINEAR solution.  One JSON line per
path on stdout (``--json FILE``: all of them).  Written for the probe of 2026-11-28
(docs/benchmarks.md, "Paths where headstart is not faster").
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import resolve_dataset  # noqa: E402
from methods import _liblinear_problem, _liblinear_view  # noqa: E402

from headstart import OvAClassifier  # noqa: E402
from headstart.io import read_xmc  # noqa: E402

SOLVER = {"sq": 2, "lr": 0, "sqL1": 5, "lrL1": 6, "sqL1x": 5, "lrL1x": 6, "sqL1c": 5}
LOSS = {"sq": "squared-hinge", "lr": "logistic", "sqL1": "squared-hinge", "lrL1": "logistic",
        "sqL1x": "squared-hinge", "lrL1x": "logistic", "sqL1c": "squared-hinge"}


def load(name: str, svd: int = 0, seed: int = 0):
    d = resolve_dataset(name)
    Xtr, Ytr = read_xmc(d / "train.txt.gz")
    Xte, Yte = read_xmc(d / "test.txt.gz")
    Xtr, Xte = sp.csr_matrix(Xtr, dtype=np.float32), sp.csr_matrix(Xte, dtype=np.float32)
    if svd:     # a dense embedding of the data itself, columns scaled to [-1, 1]
        from scipy.sparse.linalg import svds

        _, S, Vt = svds(Xtr.astype(np.float64), k=svd, random_state=seed)
        P = Vt.T / S
        Ztr, Zte = np.asarray(Xtr @ P), np.asarray(Xte @ P)
        sc = np.abs(Ztr).max(axis=0) + 1e-12
        Xtr, Xte = sp.csr_matrix((Ztr / sc).astype(np.float32)), sp.csr_matrix((Zte / sc).astype(np.float32))
    return Xtr, sp.csr_matrix(Ytr), Xte, sp.csr_matrix(Yte)


def pick_labels(Y, n_top: int, n_rand: int, seed: int = 0) -> list[int]:
    cnt = np.asarray(Y.sum(axis=0)).ravel()
    top = [int(j) for j in np.argsort(-cnt, kind="stable")[:n_top]]
    rest = np.setdiff1d(np.flatnonzero(cnt >= 1), top)
    rnd = np.random.default_rng(seed).choice(rest, size=min(n_rand, rest.size), replace=False) if n_rand else []
    return sorted(set(top) | {int(j) for j in rnd})


def objective(X, y, w, wb, B, C, loss, l1, reg_bias):
    """f(w) in float64: C sum phi(y (x.w + B wb)) + ||w||^2/2 (or ||w||_1), the bias weight
    included in the regulariser when it is regularised."""
    m = y * (X @ w + (B * wb if B > 0 else 0.0))
    v = np.maximum(0.0, 1.0 - m)
    f = C * (v * v if loss == "squared-hinge" else np.logaddexp(0.0, -m)).sum()
    b = wb if (B > 0 and reg_bias) else 0.0
    return f + (np.abs(w).sum() + abs(b) if l1 else 0.5 * (w @ w + b * b))


def liblinear_run(X, Ys, s, B, C, eps, R=False):
    """(seconds, W (k x d), bias weights): one LIBLINEAR model per column of Ys."""
    d, k, Yc = X.shape[1], Ys.shape[1], sp.csc_matrix(Ys)
    from liblinear import liblinear as ll

    param = ll.parameter(f"-s {s} -e {eps} -c {C} -B {B} -q" + (" -R" if R else ""))
    t0 = time.perf_counter()
    p = _liblinear_view(_liblinear_problem(X, float(B)))
    y = p.y_np
    W, wb = np.zeros((k, d)), np.zeros(k)
    for j in range(k):
        y.fill(-1.0)
        y[Yc.indices[Yc.indptr[j]:Yc.indptr[j + 1]]] = 1.0
        mp = ll.liblinear.train(p, param)
        w = np.ctypeslib.as_array(mp.contents.w, (p.n,)).astype(np.float64)
        if mp.contents.label[0] != 1:
            w = -w
        ll.liblinear.free_and_destroy_model(ctypes.byref(mp))
        W[j] = w[:d]
        wb[j] = w[d] if B > 0 else 0.0
    return time.perf_counter() - t0, W, wb


def headstart_run(X, Ys, **kw):
    clf = OvAClassifier(prune=0.0, threads=1, **kw)
    t0 = time.perf_counter()
    clf.fit(X, Ys)
    t = time.perf_counter() - t0
    B = kw.get("bias", 1.0)
    wb = np.asarray(clf.intercept_, dtype=np.float64) / B if B > 0 else np.zeros(Ys.shape[1])
    return t, clf.coef_.toarray().astype(np.float64), wb, clf.stats_


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--svd", type=int, default=0)
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--rand", type=int, default=250)
    ap.add_argument("--paths", default="sq:zero:reg,sq:aop:reg,lr:zero:reg,lr:aop:reg,lrL1:aop:reg")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--ref-eps", type=float, default=0.0)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--eps", type=float, default=0.01)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    Xtr, Ytr, _, _ = load(a.data, a.svd)
    labels = pick_labels(Ytr, a.top, a.rand)
    Ys = sp.csr_matrix(Ytr[:, labels])
    Yd = Ys.toarray() > 0
    rows = []
    for path in a.paths.split(","):
        loss, init, bmode = path.split(":")
        l1, s, B = "L1" in loss, SOLVER[loss], (-1 if bmode == "none" else 1)
        reg = "l1-exact" if loss.endswith(("L1x", "L1c")) else "l1"
        kw = dict(loss=LOSS[loss], init=init, C=a.C, epsilon=a.eps, bias=0.0 if B < 0 else 1.0,
                  regularize_bias=bmode == "reg", **({"regularizer": reg} if l1 else {}),
                  **({"l1_solver": "cdn"} if loss.endswith("L1c") else {}))
        headstart_run(Xtr, Ys[:, :4], **kw)          # compile (or load) the kernels first
        th, tl = [], []
        for _ in range(a.reps):
            t, Wh, bh, st = headstart_run(Xtr, Ys, **kw)
            th.append(t)
            t, Wl, bl = liblinear_run(Xtr, Ys, s, B, a.C, a.eps, R=bmode == "noreg")
            tl.append(t)

        def f(W, b):
            return np.array([objective(Xtr, np.where(Yd[:, j], 1.0, -1.0), W[j], b[j], max(B, 0), a.C, LOSS[loss],
                                       l1, bmode == "reg") for j in range(len(labels))])

        fh, fl = f(Wh, bh), f(Wl, bl)
        rel = (fh - fl) / np.abs(fl)
        names, counts = np.unique(st.status_names(), return_counts=True)
        row = {"data": a.data + (f"-svd{a.svd}" if a.svd else ""), "path": path, "labels": len(labels),
               "headstart_s": min(th), "liblinear_s": min(tl), "ratio": min(tl) / min(th),
               "objective_rel_median": float(np.median(rel)), "objective_rel_max": float(rel.max()),
               "labels_worse_1e-3": int((rel > 1e-3).sum()), "newton_iterations": int(st["iterations"].sum()),
               "status": {str(k): int(v) for k, v in zip(names, counts)}}
        if a.ref_eps:
            _, Wr, br = liblinear_run(Xtr, Ys, s, B, a.C, a.ref_eps, R=bmode == "noreg")
            fr = np.minimum(f(Wr, br), np.minimum(fh, fl))
            row.update(gap_headstart_median=float(np.median((fh - fr) / np.abs(fr))),
                       gap_liblinear_median=float(np.median((fl - fr) / np.abs(fr))))
        rows.append(row)
        print(json.dumps({k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
