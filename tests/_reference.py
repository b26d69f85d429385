"""Independent references for the core tests: a tiny XMC loader, the objective of one
binary problem written directly in numpy (never through headstart's kernels), and a
LIBLINEAR one-vs-all helper built on ``liblinear-official``.

Nothing here imports headstart's objective, solver or trainer: these are the yardsticks
those are measured against.
"""

from __future__ import annotations

import gzip
import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import scipy.sparse as sp

SHARED_DATA = Path(os.environ.get("HEADSTART_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
REPO_DATA = Path(__file__).resolve().parents[1] / "data"


# ----------------------------------------------------------------------------- data
def data_path(name: str, split: str = "train") -> Path | None:
    """The gzip XMC file of a dataset: the repository's shipped copy, else ../shared/data."""
    for base in (REPO_DATA / name, SHARED_DATA / name):
        for fn in (f"{split}.txt.gz", f"{split}.txt"):
            p = base / fn
            if p.is_file():
                return p
    return None


def load_xmc_local(path) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Minimal reader of the XMC repository format (header ``n d L``, then
    ``l1,l2 f:v f:v ...`` per line; a line starting with a blank has no labels)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        n, d, L = (int(t) for t in fh.readline().split())
        xi, xj, xv, yi, yj = [], [], [], [], []
        for i in range(n):
            line = fh.readline().rstrip("\r\n")
            parts = line.split(" ")
            if parts and parts[0] != "" and ":" not in parts[0]:
                for t in parts[0].split(","):
                    yi.append(i)
                    yj.append(int(t))
                parts = parts[1:]
            for tok in parts:
                if not tok:
                    continue
                f, v = tok.split(":")
                xi.append(i)
                xj.append(int(f))
                xv.append(float(v))
    X = sp.csr_matrix((np.asarray(xv, dtype=np.float32), (xi, xj)), shape=(n, d))
    Y = sp.csr_matrix((np.ones(len(yi), dtype=np.float32), (yi, yj)), shape=(n, L))
    X.sum_duplicates()
    Y.sum_duplicates()
    return X, Y


def _reader():
    """headstart's own reader when it exists, else the local one."""
    try:
        from headstart.io import read_xmc  # noqa: PLC0415
        return read_xmc
    except (ImportError, AttributeError):
        return load_xmc_local


@lru_cache(maxsize=None)
def load_dataset(name: str, split: str = "train"):
    """(X float32 CSR, Y CSR) of a dataset split, or None when the file is absent."""
    p = data_path(name, split)
    if p is None:
        return None
    X, Y = _reader()(str(p))
    X = sp.csr_matrix(X, dtype=np.float32)
    X.sort_indices()
    return X, sp.csr_matrix(Y)


def checked_dataset(name: str):
    """(X, Y) of a dataset's training split through headstart's input checks, as the
    trainer takes them; skips the test when the data is absent."""
    import pytest

    from headstart.validation import check_features, check_labels

    d = load_dataset(name)
    if d is None:
        pytest.skip(f"{name} not found")
    X, Y = d
    return check_features(X), check_labels(Y, X.shape[0])


def l2_normalize(X: sp.csr_matrix) -> sp.csr_matrix:
    """Rows scaled to unit Euclidean norm (zero rows stay zero), float32."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    X = sp.diags(1.0 / norms) @ X
    return sp.csr_matrix(X, dtype=np.float32)


# ------------------------------------------------------------------ the objective in numpy
def augmented(X, bias: float) -> sp.csr_matrix:
    """[X, bias] in float64 (the bias feature made explicit)."""
    X = sp.csr_matrix(X, dtype=np.float64)
    return sp.hstack([X, np.full((X.shape[0], 1), float(bias))], format="csr")


# Losses and regularisers, written directly from their formulas (docs/design.md).  A
# loss or regulariser is a name or a (name, parameter...) tuple; "curv" is the curvature
# the Newton method is documented to use (the true second derivative where it exists and
# is positive; the majorising 1/v or 1/|w| of the authors' trainer on linear pieces).
def _spec(x):
    return (x,) if isinstance(x, str) else tuple(x)


def _phi(loss, m):
    name, *par = _spec(loss)
    v = 1.0 - m
    if name == "squared-hinge":
        return np.maximum(0.0, v) ** 2
    if name == "hinge":
        return np.maximum(0.0, v)
    if name == "huber-hinge":
        eps = par[0]
        return np.where(v <= 0, 0.0, np.where(v > eps, v - eps / 2, v * v / (2 * eps)))
    if name == "logistic":
        return np.logaddexp(0.0, -m)
    raise KeyError(f"no reference formula for loss {name!r}: add it here (tests/_reference.py)")


def _dphi(loss, m):
    name, *par = _spec(loss)
    v = 1.0 - m
    if name == "squared-hinge":
        return -2.0 * np.maximum(0.0, v)
    if name == "hinge":
        return np.where(v > 0, -1.0, 0.0)
    if name == "huber-hinge":
        eps = par[0]
        return np.where(v <= 0, 0.0, np.where(v > eps, -1.0, -v / eps))
    if name == "logistic":
        return -0.5 * (1.0 - np.tanh(0.5 * m))      # = -1 / (1 + e^m), overflow-free
    raise KeyError(f"no reference formula for loss {name!r}: add it here (tests/_reference.py)")


def _d2phi(loss, m):
    name, *par = _spec(loss)
    v = 1.0 - m
    if name == "squared-hinge":
        return np.where(m < 1.0, 2.0, 0.0)
    if name == "hinge":
        return np.where(v > 0, 1.0 / np.maximum(v, 1e-8), 0.0)
    if name == "huber-hinge":
        eps = par[0]
        return np.where(v <= 0, 0.0, np.where(v > eps, 1.0 / np.where(v > 0, v, 1.0), 1.0 / eps))
    if name == "logistic":
        s = 0.5 * (1.0 + np.tanh(0.5 * m))            # sigmoid(m)
        return s * (1.0 - s)
    raise KeyError(f"no reference formula for loss {name!r}: add it here (tests/_reference.py)")


def _huber(eps, w):
    a = np.abs(w)
    return np.where(a > eps, a - eps / 2, w * w / (2 * eps))


def _reg_spec(reg):
    """(name, *parameters) of a regulariser the formulas below know; any other refused
    (helper-55: an unknown name with two parameters was computed as the elastic net)."""
    name, *par = _spec(reg)
    if name not in ("l2", "huber", "elastic"):
        raise KeyError(f"no reference formula for regulariser {name!r}: add it here (tests/_reference.py)")
    return (name, *par)


def _r(reg, w):
    name, *par = _reg_spec(reg)
    if name == "l2":
        return 0.5 * w * w
    if name == "huber":
        return _huber(par[0], w)
    eps, share = par                                   # elastic net
    return (1 - share) * _huber(eps, w) + share * 0.5 * w * w


def _dr(reg, w):
    name, *par = _reg_spec(reg)
    if name == "l2":
        return w
    hub = lambda eps: np.clip(w / eps, -1.0, 1.0)  # noqa: E731
    if name == "huber":
        return hub(par[0])
    eps, share = par
    return (1 - share) * hub(eps) + share * w


def _d2r(reg, w):
    name, *par = _reg_spec(reg)
    if name == "l2":
        return np.ones_like(w)
    a = np.abs(w)
    hub = lambda eps: np.where(a > eps, 1.0 / np.where(a > 0, a, 1.0), 1.0 / eps)  # noqa: E731
    if name == "huber":
        return hub(par[0])
    eps, share = par
    return (1 - share) * hub(eps) + share


def _reg_mask(d1: int, regularize_bias: bool) -> np.ndarray:
    r = np.ones(d1)
    if not regularize_bias:
        r[-1] = 0.0
    return r


def _costs(y, C, costs):
    """Per-instance c_i: C, or C * (c_+ on positives, c_- on negatives)."""
    if costs is None:
        return np.full(y.size, float(C))
    cp, cn = costs
    return C * np.where(y > 0, cp, cn)


def objective(Xa, y, w, C, loss="squared-hinge", regularize_bias=True, reg="l2", costs=None) -> float:
    """sum_j r(w_j) (bias only if regularised) + sum_i c_i phi(y_i w.x_i), Xa = augmented(X, bias)."""
    w = np.asarray(w, dtype=np.float64)
    r = _reg_mask(w.size, regularize_bias)
    m = y * (Xa @ w)
    return float(np.sum(r * _r(reg, w)) + np.sum(_costs(y, C, costs) * _phi(loss, m)))


def gradient(Xa, y, w, C, loss="squared-hinge", regularize_bias=True, reg="l2", costs=None) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    r = _reg_mask(w.size, regularize_bias)
    m = y * (Xa @ w)
    return r * _dr(reg, w) + Xa.T @ (_costs(y, C, costs) * _dphi(loss, m) * y)


def hessian(Xa, y, w, C, loss="squared-hinge", regularize_bias=True, reg="l2", costs=None) -> np.ndarray:
    """Dense (generalised) Hessian -- small problems only."""
    w = np.asarray(w, dtype=np.float64)
    r = _reg_mask(w.size, regularize_bias)
    m = y * (Xa @ w)
    D = _costs(y, C, costs) * _d2phi(loss, m)
    A = Xa.toarray()
    return np.diag(r * _d2r(reg, w)) + A.T @ (D[:, None] * A)


def stopping_tolerance(Xa, y, C, loss, epsilon) -> tuple[float, float]:
    """(tol, ||grad f(0)||) of LIBLINEAR's rule eps * max(min(pos, neg), 1) / n * ||grad f(0)||."""
    g0 = gradient(Xa, y, np.zeros(Xa.shape[1]), C, loss, True)   # w = 0: regulariser irrelevant
    n = y.size
    npos = int(np.sum(y > 0))
    g0n = float(np.linalg.norm(g0))
    return epsilon * max(min(npos, n - npos), 1) / n * g0n, g0n


def full_weights(coef_row, intercept: float, bias: float) -> np.ndarray:
    """Our model's row as the augmented weight vector [w, w_bias] (intercept = w_bias * bias)."""
    w = np.asarray(coef_row.toarray() if sp.issparse(coef_row) else coef_row, dtype=np.float64).ravel()
    wb = float(intercept) / bias if bias > 0 else 0.0
    return np.concatenate([w, [wb]])


def label_vector(Y: sp.csr_matrix, j: int) -> np.ndarray:
    """+1 for the instances that carry label j, -1 elsewhere."""
    col = np.asarray(Y[:, j].toarray()).ravel()
    return np.where(col > 0, 1.0, -1.0)


# ------------------------------------------------------------------------ LIBLINEAR
def _libc():
    import ctypes

    return ctypes.CDLL(None)


class LiblinearOvA:
    """LIBLINEAR one-vs-all over one feature matrix.

    The problem (with its -B 1 bias feature) is built once per worker and reused for
    every label by overwriting its ctypes ``y`` array in place.  LIBLINEAR's train runs
    in C without the GIL (ctypes releases it), so ``threads`` workers -- each with its
    own problem -- train labels side by side.
    """

    def __init__(self, X: sp.csr_matrix, threads: int = 2):
        from liblinear.liblinearutil import problem

        self.X = sp.csr_matrix(X, dtype=np.float64)
        self.n, self.d = self.X.shape
        self.probs = [problem(np.ones(self.n), self.X) for _ in range(max(1, threads))]

    def _train(self, prob, y: np.ndarray, options, log: list | None = None) -> np.ndarray:
        from liblinear.liblinear import PRINT_STRING_FUN, parameter
        from liblinear.liblinearutil import train

        np.ctypeslib.as_array(prob.y, (self.n,))[:] = y
        # LIBLINEAR's coordinate-descent solvers (-s 1/3/5/6/7) draw their order from C's
        # rand(), whose state is the process's: without a seed the reference's solution
        # depended on which tests ran before in the same worker (a -s 5 comparison failed
        # by 0.3% once, 2026-11-30).  Seeded per call: the same reference every run.
        _libc().srand(1)
        if log is not None:
            # LIBLINEAR's own progress lines ("iter k f ... CG c step_size a") into ``log``
            param = parameter(options)
            cb = PRINT_STRING_FUN(lambda b: log.append(b.decode()))
            param.print_func = cb
            m = train(prob, param)
        else:
            m = train(prob, options)
        labels = m.get_labels()
        nf = m.get_nr_feature()
        nw = nf + (1 if m.bias >= 0 else 0)
        w = np.ctypeslib.as_array(m.w, (nw,)).astype(np.float64).copy()
        if m.bias < 0:
            w = np.concatenate([w, [0.0]])
        # LIBLINEAR's binary model scores its first label (labels[0]) positive
        if len(labels) == 1:
            w[:] = 0.0          # single-class problem: no usable weights
        elif labels[0] != 1:
            w = -w
        if w.size < self.d + 1:                 # trailing features absent from every row
            w = np.concatenate([w[:-1], np.zeros(self.d + 1 - w.size), w[-1:]])
        return w

    def train(self, y: np.ndarray, options: str) -> np.ndarray:
        """Weights [w, w_bias] of the decision function for y = +1 (bias value 1)."""
        return self._train(self.probs[0], y, options)

    def newton_trace(self, y: np.ndarray, options: str) -> list[tuple[float, int, float]]:
        """LIBLINEAR's primal Newton iterations for labels y (options without -q):
        one (f, CG steps, step size) per iteration, parsed from its log."""
        import re

        log: list[str] = []
        self._train(self.probs[0], y, options, log)
        pat = re.compile(r"iter\s*(\d+) f (\S+) \|g\| (\S+) CG\s*(\d+) step_size (\S+)")
        return [(float(f), int(cg), float(st)) for _, f, _, cg, st in pat.findall("".join(log))]

    def train_all(self, Y: sp.csr_matrix, labels, options: str) -> tuple[np.ndarray, np.ndarray]:
        """(W (len(labels) x d) float64, bias weights) for the given label ids."""
        from concurrent.futures import ThreadPoolExecutor

        Yc = sp.csc_matrix(Y)
        labels = list(labels)
        Ws = np.zeros((len(labels), self.d))
        b = np.zeros(len(labels))
        T = len(self.probs)

        def work(t):
            for k in range(t, len(labels), T):
                j = labels[k]
                y = -np.ones(self.n)
                y[Yc.indices[Yc.indptr[j]:Yc.indptr[j + 1]]] = 1.0
                w = self._train(self.probs[t], y, options)
                Ws[k] = w[:-1]
                b[k] = w[-1]

        if T == 1:
            work(0)
        else:
            with ThreadPoolExecutor(T) as pool:
                list(pool.map(work, range(T)))
        return Ws, b


def topk_dense(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores per row, best first (ties: lower label id first)."""
    idx = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return idx


def precision_at(Y_true: sp.csr_matrix, top: np.ndarray, k: int) -> float:
    """P@k = mean over rows of |top_k(i) & y_i| / k (rows without labels count as 0)."""
    Y = sp.csr_matrix(Y_true)
    hits = 0
    for i in range(Y.shape[0]):
        truth = set(Y.indices[Y.indptr[i]:Y.indptr[i + 1]].tolist())
        hits += sum(1 for l in top[i, :k] if l in truth)
    return hits / (k * Y.shape[0])
