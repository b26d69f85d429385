"""headstart against LIBLINEAR on dense embedding features (paths.py's comparison, dense X).

    python benchmarks/dense_paths.py make svd:DATASET:K OUT.npz     # tf-idf -> SVD-K -> L2 rows
    python benchmarks/dense_paths.py make synth[:N:D:L] OUT.npz     # Gaussian mixture per label
    python benchmarks/dense_paths.py run OUT.npz [--top 50] [--rand 100] [--reps 2]
        [--paths sq:zero:reg,sq:aop:reg,lr:zero:reg,lr:aop:reg] [--rows N] [--json FILE]
    python benchmarks/dense_paths.py memory OUT.npz --path sq:aop:reg [--side headstart|liblinear]
    python benchmarks/dense_paths.py kernels OUT.npz [--rows N] [--reps 5]
    python benchmarks/dense_paths.py profile OUT.npz --path sq:aop:reg [--rows N]

Sentence-embedding style data: 384-768 float32 columns, every value nonzero, rows of unit
L2 norm.  ``make svd:...`` embeds a shared data set (train and test) by a truncated SVD of
its tf-idf rows (idf = log(n / df) + 1, rows L2-normalised; ``scipy.sparse.linalg.svds``
on the training rows; test rows projected on the same basis), then normalises the rows;
``make synth`` draws N rows in D columns for L labels of Zipf sizes (label of rank r has
about n_top / r positives), each label a mixture of two Gaussian components, a row the
sum of its labels' component means plus isotropic noise, normalised (rows without a
label are noise only).  The .npz holds X (dense float32) and Y (CSR) for train and test.

``run``: for each path (LOSS:INIT:BIAS as in paths.py: ``sq`` / ``lr``, any initialiser,
``reg`` / ``noreg`` / ``none``) headstart (given the dense array, as a user would) and
LIBLINEAR (liblinear-official, -s 2 / -s 0, the same C, eps and bias) train the ``--top``
most frequent and ``--rand`` random other labels, one thread each, alternating ``--reps``
times (LIBLINEAR starts at zero whatever INIT says: its runs are made once per loss and
bias and shared by the paths that differ only in INIT); min times, their ratio (LIBLINEAR / headstart: above 1, headstart is faster), the
per-label objective gap recomputed in float64 by paths.objective, and P@1/3/5 of both
models on the test rows (ranking only the trained labels).  ``--ref-eps E``: both gaps
to a solution at tolerance E (headstart from aop; the lowest of the three values counts).

``memory``: one side, one path, in a fresh process (run it once per side): the RSS with
the dense data loaded, and the peak RSS (``ru_maxrss``) after training.

``kernels``: a micro-benchmark, one thread: X v and X^T u over every row, CSR (the form
headstart trains on: float32 values, uint32 column ids) against the same matrix as a
dense row-major float32 array, written alike in numba (float64 sums).  ``profile``: the
nonzeros each phase of headstart's training touched on one path (from its per-iteration
records: active fraction, CG steps) priced at ``kernels``'s CSR ns per value, against the
measured fit time -- an estimate of the split, not a sampling profile (numba's compiled
code has no symbols for perf).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from paths import LOSS, SOLVER, headstart_run, liblinear_run, objective, pick_labels  # noqa: E402


# --- data -----------------------------------------------------------------------------

def _l2_rows(A):
    norms = np.sqrt(np.einsum("ij,ij->i", A, A))
    norms[norms == 0] = 1.0
    return A / norms[:, None]


def make_svd(name: str, k: int, seed: int = 0):
    from scipy.sparse.linalg import svds

    from common import resolve_dataset
    from headstart.io import read_xmc

    d = resolve_dataset(name)
    Xtr, Ytr = read_xmc(d / "train.txt.gz")
    Xte, Yte = read_xmc(d / "test.txt.gz")
    Xtr, Xte = sp.csr_matrix(Xtr, dtype=np.float64), sp.csr_matrix(Xte, dtype=np.float64)
    df = np.bincount(Xtr.indices, minlength=Xtr.shape[1])
    idf = np.log(Xtr.shape[0] / np.maximum(df, 1)) + 1.0

    def tfidf(X):
        X = sp.csr_matrix(X @ sp.diags(idf))
        n = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        n[n == 0] = 1.0
        return sp.csr_matrix(sp.diags(1.0 / n) @ X)

    Ttr, Tte = tfidf(Xtr), tfidf(Xte)
    k = min(k, min(Ttr.shape) - 1)
    _, _, Vt = svds(Ttr, k=k, random_state=seed)
    Ztr, Zte = _l2_rows(np.asarray(Ttr @ Vt.T)), _l2_rows(np.asarray(Tte @ Vt.T))
    return Ztr.astype(np.float32), sp.csr_matrix(Ytr), Zte.astype(np.float32), sp.csr_matrix(Yte)


def make_synth(n: int = 60000, d: int = 768, L: int = 200, n_test_share: float = 1 / 6, top: float = 0.1,
               noise: float = 1.5, seed: int = 0):
    """n rows (a share of them the test split), L labels, label of rank r with about
    top * n / r positives (at least 20), two components per label."""
    rng = np.random.default_rng(seed)
    mu = rng.standard_normal((L, 2, d)).astype(np.float32) / np.sqrt(d)
    sizes = np.maximum(20, np.round(top * n / np.arange(1, L + 1))).astype(np.int64)
    rows, cols = [], []
    for j in range(L):
        r = rng.choice(n, size=sizes[j], replace=False)
        rows.append(r)
        cols.append(np.full(r.size, j))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    Y = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, L))
    Y.sum_duplicates()
    X = np.empty((n, d), dtype=np.float32)
    step = 8192
    for a in range(0, n, step):
        b = min(a + step, n)
        B = (noise / np.sqrt(d)) * rng.standard_normal((b - a, d)).astype(np.float32)
        Yb = Y[a:b].tocoo()
        comp = rng.integers(0, 2, size=Yb.nnz)
        np.add.at(B, Yb.row, mu[Yb.col, comp])
        X[a:b] = _l2_rows(B)
    perm = rng.permutation(n)
    nte = int(n * n_test_share)
    te, tr = perm[:nte], perm[nte:]
    return X[tr], sp.csr_matrix(Y[tr]), X[te], sp.csr_matrix(Y[te])


def cmd_make(a) -> int:
    t0 = time.perf_counter()
    kind, *args = a.source.split(":")
    if kind == "svd":
        Xtr, Ytr, Xte, Yte = make_svd(args[0], int(args[1]) if len(args) > 1 else 768)
    elif kind == "synth":
        n, d, L = (int(v) for v in (args + ["60000", "768", "200"][len(args):]))
        Xtr, Ytr, Xte, Yte = make_synth(n, d, L)
    else:
        raise SystemExit(f"make: unknown source {a.source!r} (svd:DATASET:K or synth[:N:D:L])")
    np.savez(a.out, Xtr=Xtr, Xte=Xte, **{f"Ytr_{k}": v for k, v in _csr_parts(Ytr).items()},
             **{f"Yte_{k}": v for k, v in _csr_parts(Yte).items()})
    print(json.dumps({"out": a.out, "train": list(Xtr.shape), "test": list(Xte.shape), "labels": Ytr.shape[1],
                      "seconds": round(time.perf_counter() - t0, 1)}))
    return 0


def _csr_parts(Y):
    return {"data": Y.data, "indices": Y.indices, "indptr": Y.indptr, "shape": np.array(Y.shape)}


def load(path: str, rows: int = 0):
    z = np.load(path)

    def y(p):
        return sp.csr_matrix((z[f"{p}_data"], z[f"{p}_indices"], z[f"{p}_indptr"]), shape=tuple(z[f"{p}_shape"]))

    Xtr, Ytr = z["Xtr"], y("Ytr")
    if rows and rows < Xtr.shape[0]:
        Xtr, Ytr = Xtr[:rows], Ytr[:rows]
    return np.ascontiguousarray(Xtr, dtype=np.float32), Ytr, np.ascontiguousarray(z["Xte"], dtype=np.float32), y("Yte")


# --- comparison -------------------------------------------------------------------------

def precision_at(S, Yte, ks=(1, 3, 5)):
    """P@k over all test rows (rows without a trained label count as 0), S the scores."""
    Yd = Yte.toarray() > 0
    top = np.argsort(-S, axis=1, kind="stable")[:, :max(ks)]
    hits = np.take_along_axis(Yd, top, axis=1)
    return [round(100.0 * hits[:, :k].sum() / (k * S.shape[0]), 2) for k in ks]


def _path_kw(path, C, eps):
    loss, init, bmode = path.split(":")
    B = -1 if bmode == "none" else 1
    kw = dict(loss=LOSS[loss], init=init, C=C, epsilon=eps, bias=0.0 if B < 0 else 1.0,
              regularize_bias=bmode == "reg")
    return loss, bmode, B, kw


def cmd_run(a) -> int:
    Xtr, Ytr, Xte, Yte = load(a.data, a.rows)
    labels = pick_labels(Ytr, a.top, a.rand)
    Ys, Yt = sp.csr_matrix(Ytr[:, labels]), sp.csr_matrix(Yte[:, labels])
    Yd = Ys.toarray() > 0
    Xcsr = sp.csr_matrix(Xtr)      # LIBLINEAR's python interface builds its nodes from CSR
    X64 = Xtr.astype(np.float64)
    rows = []
    paths = a.paths.split(",")
    ll_cache = {}      # LIBLINEAR starts at zero whatever INIT says: one set of runs per loss and bias
    for path in paths:
        loss, bmode, B, kw = _path_kw(path, a.C, a.eps)
        headstart_run(Xtr, Ys[:, :4], **kw)          # compile (or load) the kernels first
        th, tl = [], list(ll_cache.get((loss, bmode), ([], None, None))[0])
        for r in range(a.reps):
            t, Wh, bh, st = headstart_run(Xtr, Ys, **kw)
            th.append(t)
            if len(tl) <= r:
                t, Wl, bl = liblinear_run(Xcsr, Ys, SOLVER[loss], B, a.C, a.eps, R=bmode == "noreg")
                tl.append(t)
                ll_cache[(loss, bmode)] = (list(tl), Wl, bl)
        _, Wl, bl = ll_cache[(loss, bmode)]

        def f(W, b):
            return np.array([objective(X64, np.where(Yd[:, j], 1.0, -1.0), W[j], b[j], max(B, 0), a.C, LOSS[loss],
                                       False, bmode == "reg") for j in range(len(labels))])

        fh, fl = f(Wh, bh), f(Wl, bl)
        rel = (fh - fl) / np.abs(fl)
        Bs = max(B, 0)
        ph = precision_at(Xte @ Wh.T.astype(np.float32) + (Bs * bh)[None, :], Yt)
        pl = precision_at(Xte @ Wl.T.astype(np.float32) + (Bs * bl)[None, :], Yt)
        names, counts = np.unique(st.status_names(), return_counts=True)
        row = {"data": Path(a.data).stem, "rows": Xtr.shape[0], "d": Xtr.shape[1], "path": path,
               "labels": len(labels), "headstart_s": min(th), "liblinear_s": min(tl), "ratio": min(tl) / min(th),
               "headstart_runs": th, "liblinear_runs": tl,
               "objective_rel_median": float(np.median(rel)), "objective_rel_max": float(rel.max()),
               "objective_rel_min": float(rel.min()), "labels_worse_1e-3": int((rel > 1e-3).sum()),
               "p135_headstart": ph, "p135_liblinear": pl, "newton_iterations": int(st["iterations"].sum()),
               "status": {str(k): int(v) for k, v in zip(names, counts)}, "load": os.getloadavg()[0]}
        if a.ref_eps:
            # a tighter solution of the same objective (headstart's from aop, the cheaper); both
            # gaps are measured against the lowest value any of the three reached
            _, Wr, br, _ = headstart_run(Xtr, Ys, **{**kw, "init": "aop", "epsilon": a.ref_eps})
            fr = np.minimum(f(Wr, br), np.minimum(fh, fl))
            row.update(gap_headstart_median=float(np.median((fh - fr) / np.abs(fr))),
                       gap_headstart_max=float(np.max((fh - fr) / np.abs(fr))),
                       gap_liblinear_median=float(np.median((fl - fr) / np.abs(fr))),
                       gap_liblinear_max=float(np.max((fl - fr) / np.abs(fr))))
        rows.append(row)
        print(json.dumps({k: (round(v, 5) if isinstance(v, float) else
                              [round(x, 3) for x in v] if k.endswith("_runs") else v) for k, v in row.items()}),
              flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def _rss_mb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cmd_memory(a) -> int:
    Xtr, Ytr, _, _ = load(a.data, a.rows)
    labels = pick_labels(Ytr, a.top, a.rand)
    Ys = sp.csr_matrix(Ytr[:, labels])
    loss, bmode, B, kw = _path_kw(a.path, a.C, a.eps)
    import headstart  # noqa: F401  (imported on both sides: the same interpreter baseline)
    base = _rss_mb()
    t0 = time.perf_counter()
    if a.side == "headstart":
        headstart_run(Xtr, Ys, **kw)
    else:
        Xcsr = sp.csr_matrix(Xtr)
        liblinear_run(Xcsr, Ys, SOLVER[loss], B, a.C, a.eps, R=bmode == "noreg")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"side": a.side, "path": a.path, "rows": Xtr.shape[0], "d": Xtr.shape[1],
                      "labels": len(labels), "dense_X_mb": round(Xtr.nbytes / 2**20, 1),
                      "rss_loaded_mb": round(base, 1), "peak_rss_mb": round(peak, 1),
                      "peak_above_loaded_mb": round(peak - base, 1), "seconds": round(time.perf_counter() - t0, 2)}))
    return 0


# --- kernels ----------------------------------------------------------------------------

def _kernels():
    import numba as nb

    @nb.njit(cache=False, nogil=True)
    def csr_xv(indptr, indices, data, v, out):
        for i in range(indptr.size - 1):
            acc = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                acc += np.float64(data[k]) * v[indices[k]]
            out[i] = acc

    @nb.njit(cache=False, nogil=True)
    def csr_xtu(indptr, indices, data, u, out):
        out[:] = 0.0
        for i in range(indptr.size - 1):
            c = u[i]
            for k in range(indptr[i], indptr[i + 1]):
                out[indices[k]] += c * data[k]

    def xv(A, v, out):
        n, d = A.shape
        for i in range(n):
            acc = 0.0
            for j in range(d):
                acc += np.float64(A[i, j]) * v[j]
            out[i] = acc

    # the same loop twice: with fastmath numba may reassociate the sum (SIMD); without,
    # it keeps the CSR kernel's order of additions (the bit-for-bit one)
    dense_xv = nb.njit(cache=False, nogil=True, fastmath=True)(xv)
    dense_xv_strict = nb.njit(cache=False, nogil=True)(xv)

    @nb.njit(cache=False, nogil=True, fastmath=True)
    def dense_xtu(A, u, out):
        n, d = A.shape
        out[:] = 0.0
        for i in range(n):
            c = u[i]
            for j in range(d):
                out[j] += c * A[i, j]

    return csr_xv, csr_xtu, dense_xv, dense_xtu, dense_xv_strict


def cmd_kernels(a) -> int:
    Xtr, _, _, _ = load(a.data, a.rows)
    k = _kernel_times(Xtr, a.reps)
    print(json.dumps({"rows": Xtr.shape[0], "d": Xtr.shape[1], "nnz": Xtr.size, "load": os.getloadavg()[0],
                      "ns_per_value": {k2: round(v * 1e9, 3) for k2, v in k.items()}}, indent=1))
    return 0


def _kernel_times(Xtr, reps):
    """Seconds per stored value of each kernel (min over ``reps`` alternating calls)."""
    from headstart.validation import check_features

    X = check_features(Xtr)
    indptr, indices, data = X.indptr.astype(np.int64), X.indices.view(np.uint32), X.data
    n, d = Xtr.shape
    rng = np.random.default_rng(0)
    v, u = rng.standard_normal(d + 1), rng.standard_normal(n)
    csr_xv, csr_xtu, dense_xv, dense_xtu, dense_xv_strict = _kernels()
    o1, o2 = np.zeros(n), np.zeros(d)
    cases = {"csr X v": lambda: csr_xv(indptr, indices, data, v, o1),
             "dense X v (fastmath)": lambda: dense_xv(Xtr, v, o1),
             "dense X v (strict order)": lambda: dense_xv_strict(Xtr, v, o1),
             "csr X^T u": lambda: csr_xtu(indptr, indices, data, u, o2),
             "dense X^T u (fastmath)": lambda: dense_xtu(Xtr, u, o2),
             "numpy float32 X @ v (BLAS sgemv)": lambda: Xtr @ v[:d].astype(np.float32)}
    for fn in cases.values():
        fn()                                                  # compile
    best = {k: [] for k in cases}
    for _ in range(reps):                                   # alternate the kernels
        for k, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            best[k].append(time.perf_counter() - t0)
    return {k: min(ts) / X.nnz for k, ts in best.items()}


# --- profile ----------------------------------------------------------------------------

def cmd_profile(a) -> int:
    """Where headstart's time goes on one path: its own per-iteration records (active
    fraction, CG steps) turned into nonzeros touched by each phase, priced by the
    kernels' measured ns per value (``kernels``'s CSR loops), against the measured time."""
    Xtr, Ytr, _, _ = load(a.data, a.rows)
    labels = pick_labels(Ytr, a.top, a.rand)
    Ys = sp.csr_matrix(Ytr[:, labels])
    loss, bmode, B, kw = _path_kw(a.path, a.C, a.eps)
    headstart_run(Xtr, Ys[:, :4], **kw)
    t_fit = min(headstart_run(Xtr, Ys, **kw)[0] for _ in range(a.reps))
    _, _, _, st = headstart_run(Xtr, Ys, **kw)
    it = st.iterations
    nnz = Xtr.size
    from headstart.training.kernel import LANES
    # per Newton iteration (the records' index 0 is the start): one gradient pass over the
    # active rows (gather-free: g += c x), cg_steps Hessian products over them (a dot and a
    # scatter per row), one scores pass over all rows shared by up to LANES labels
    act, cg = it["active_fraction"], it["cg_steps"]
    first = np.zeros(act.size, dtype=bool)
    first[st.iter_offsets[:-1]] = True
    act_it, cg_it = act[~first], cg[~first]
    grad_nz = float((act[~first] * nnz).sum() + (act[first] * nnz).sum())
    hv_nz = float((cg_it * act_it * nnz).sum())
    n_iter = int((~first).sum())
    sweeps = n_iter / min(LANES, len(labels))
    k = _kernel_times(Xtr, a.reps)
    est = {"hessian_products_s": hv_nz * (k["csr X v"] + k["csr X^T u"]),
           "gradient_passes_s": grad_nz * k["csr X^T u"],
           "line_search_sweeps_s": (sweeps + len(labels) / min(LANES, len(labels))) * nnz * k["csr X v"]}
    est["rest_s"] = t_fit - sum(est.values())
    print(json.dumps({"path": a.path, "rows": Xtr.shape[0], "d": Xtr.shape[1], "labels": len(labels),
                      "fit_s": round(t_fit, 3), "newton_iterations": n_iter, "cg_steps": int(cg_it.sum()),
                      "mean_active_fraction": round(float(act_it.mean()) if act_it.size else 0.0, 4),
                      "values_touched_by_hessian_products": hv_nz, "by_gradients": grad_nz,
                      "estimate_s": {k2: round(v, 3) for k2, v in est.items()},
                      "ns_per_value": {k2: round(v * 1e9, 3) for k2, v in k.items()},
                      "load": os.getloadavg()[0]}, indent=1))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("source")
    m.add_argument("out")
    for name in ("run", "memory", "kernels", "profile"):
        r = sub.add_parser(name)
        r.add_argument("data")
        r.add_argument("--rows", type=int, default=0, help="first N training rows only")
        r.add_argument("--top", type=int, default=50)
        r.add_argument("--rand", type=int, default=100)
        r.add_argument("--C", type=float, default=1.0)
        r.add_argument("--eps", type=float, default=0.01)
        r.add_argument("--reps", type=int, default=2)
        if name == "run":
            r.add_argument("--paths", default="sq:zero:reg,sq:aop:reg,lr:zero:reg,lr:aop:reg")
            r.add_argument("--json", default=None)
            r.add_argument("--ref-eps", type=float, default=0.0)
        if name == "profile":
            r.add_argument("--path", default="sq:aop:reg")
        if name == "memory":
            r.add_argument("--path", default="sq:aop:reg")
            r.add_argument("--side", choices=("headstart", "liblinear"), default="headstart")
    a = ap.parse_args(argv)
    return {"make": cmd_make, "run": cmd_run, "memory": cmd_memory, "kernels": cmd_kernels, "profile": cmd_profile}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
