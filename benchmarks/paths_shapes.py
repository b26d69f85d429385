"""Data shapes the shared sets lack, for :mod:`paths` (headstart against LIBLINEAR).

    python benchmarks/paths_shapes.py NAME [OUT]   -> OUT/NAME/{train,test}.txt.gz (default OUT: build/shapes)
    python benchmarks/paths.py build/shapes/NAME --top 20 --rand 0 --reps 3 --paths sq:zero:reg,sq:aop:reg,...

NAME: nd_tall (200K x 50 dense), wide (2K x 500K, 200 nonzeros a row), longrows (5K rows of
5K nonzeros), tinyrows (500K x 1000, 3 nonzeros a row), frequent (labels with 50-90%
positives), counts / counts20 (raw counts 1..100, not normalised: badly conditioned),
counts_l2 (counts20's rows L2-normalised, the control).  Labels threshold a random linear
score plus noise at the given frequencies.  Seed fixed (64).  Written by the probe of
2026-12-02 (helper-86, docs/benchmarks.md "Shapes not tried before"); a generator for a
probe, not the paper-shaped sets (those are :mod:`synth`): some shapes loop over rows in
Python (a minute for the largest).
"""
import os
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from headstart.io import write_xmc  # noqa: E402

OUT = str(Path(__file__).resolve().parent.parent / "build" / "shapes")


def sparse_rows(rng, n, d, nnz, zipf=None):
    """n rows with exactly nnz distinct features each (zipf-ish feature popularity if zipf)."""
    if zipf:
        p = 1.0 / np.arange(1, d + 1) ** zipf
        p /= p.sum()
        perm = rng.permutation(d)
    cols = np.empty((n, nnz), dtype=np.int32)
    for i in range(n):
        if zipf:
            c = np.unique(perm[rng.choice(d, size=int(nnz * 1.6) + 5, p=p)])
            while c.size < nnz:
                c = np.unique(np.concatenate([c, rng.integers(0, d, nnz)]))
            cols[i] = np.sort(rng.choice(c, nnz, replace=False))
        else:
            cols[i] = np.sort(rng.choice(d, nnz, replace=False))
    return cols


def make_csr(n, d, cols, vals):
    nnz = cols.shape[1]
    indptr = np.arange(0, n * nnz + 1, nnz, dtype=np.int64)
    return sp.csr_matrix((vals.ravel().astype(np.float32), cols.ravel(), indptr), shape=(n, d))


def labels_from(rng, X, freqs, noise=0.1):
    """Labels by thresholding a random linear score (+ noise) at quantiles: one per frequency."""
    n, d = X.shape
    cols = []
    for f in freqs:
        w = rng.standard_normal(d) * (rng.random(d) < 0.3)
        s = X @ w
        s = s / (s.std() + 1e-12) + noise * rng.standard_normal(n) * 3
        t = np.quantile(s, 1 - f)
        cols.append(s > t)
    Yd = np.stack(cols, 1)
    return sp.csr_matrix(Yd.astype(np.float32))


def l2(X):
    nr = np.sqrt(np.asarray(X.multiply(X).sum(1)).ravel()) + 1e-12
    return sp.csr_matrix(sp.diags(1 / nr) @ X, dtype=np.float32)


def build(name, rng):
    if name == "nd_tall":        # (a) n >> d: 200K x 50, every feature present
        n, d = 200_000, 50
        X = sp.csr_matrix(rng.standard_normal((n, d)).astype(np.float32))
        X = l2(X)
        freqs = [0.01, 0.03, 0.1, 0.25, 0.4]
    elif name == "nd_tall_sp":   # (a') n >> d: 200K x 200, 50 nnz/row, positive values
        n, d = 200_000, 200
        X = l2(make_csr(n, d, sparse_rows(rng, n, d, 50), rng.random((n, 50)) + 0.1))
        freqs = [0.01, 0.03, 0.1, 0.25, 0.4]
    elif name == "wide":         # (b) d >> n: 2K x 500K, 200 nnz/row, tf-idf-like
        n, d = 2_000, 500_000
        X = l2(make_csr(n, d, sparse_rows(rng, n, d, 200, zipf=1.0), rng.exponential(1.0, (n, 200)) + 0.05))
        freqs = [0.01, 0.03, 0.1, 0.25, 0.4]
    elif name == "longrows":     # (c) 5K rows x 5K nnz each, d = 20K
        n, d, k = 5_000, 20_000, 5_000
        X = l2(make_csr(n, d, sparse_rows(rng, n, d, k), rng.exponential(1.0, (n, k)) + 0.05))
        freqs = [0.01, 0.03, 0.1, 0.25, 0.4]
    elif name == "counts":       # (d) unnormalised counts 1..100, 20K x 5K, 50 nnz/row
        n, d, k = 20_000, 5_000, 50
        v = np.minimum(100, np.floor(rng.pareto(1.2, (n, k)) + 1))   # heavy-tailed integer counts
        X = make_csr(n, d, sparse_rows(rng, n, d, k, zipf=0.8), v)
        freqs = [0.01, 0.03, 0.1, 0.25, 0.4]
    elif name == "frequent":     # (e) 50-90% positives, 20K x 10K tf-idf, 30 nnz/row
        n, d, k = 20_000, 10_000, 30
        X = l2(make_csr(n, d, sparse_rows(rng, n, d, k, zipf=1.0), rng.exponential(1.0, (n, k)) + 0.05))
        freqs = [0.5, 0.6, 0.7, 0.8, 0.9]
    elif name == "counts20":     # (d') as counts, 20 labels from 0.5% to 45%
        n, d, k = 20_000, 5_000, 50
        v = np.minimum(100, np.floor(rng.pareto(1.2, (n, k)) + 1))
        X = make_csr(n, d, sparse_rows(rng, n, d, k, zipf=0.8), v)
        freqs = list(np.geomspace(0.005, 0.45, 20))
    elif name == "counts_l2":    # (d'') counts20's rows L2-normalised: the conditioning control
        X, Y = build("counts20", rng)
        return l2(X), Y
    elif name == "tinyrows":     # (g) n >> d, very short rows: 500K x 1000, 3 nnz/row (binary, L2-normalised)
        n, d, k = 500_000, 1_000, 3
        cols = np.sort(rng.integers(0, d, (n, k)), axis=1).astype(np.int32)
        X = sp.csr_matrix((np.ones(n * k, np.float32), cols.ravel(), np.arange(0, n * k + 1, k)), shape=(n, d))
        X.sum_duplicates()
        X = l2(X)
        freqs = [0.001, 0.01, 0.1, 0.25, 0.4]
    else:
        raise SystemExit(name)
    Y = labels_from(rng, X, freqs)
    return X, Y


if __name__ == "__main__":
    name = sys.argv[1]
    if len(sys.argv) > 2:
        OUT = sys.argv[2]
    rng = np.random.default_rng(64)
    X, Y = build(name, rng)
    os.makedirs(f"{OUT}/{name}", exist_ok=True)
    write_xmc(f"{OUT}/{name}/train.txt.gz", X, Y)
    write_xmc(f"{OUT}/{name}/test.txt.gz", X[:100], Y[:100])
    print(name, X.shape, X.nnz, "label freqs", np.asarray(Y.mean(0)).ravel().round(3))
