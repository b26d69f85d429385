"""The trainers compared by the harness: headstart (four initialisations), the LIBLINEAR
reference, and the pip-installable one-vs-all peers.

Each method is a :class:`Method`: default ``settings`` (overridable from the command line
with ``--set NAME.key=value``), a ``warmup`` run on a tiny problem (so that one-off JIT
compilation is not counted as training time), and a ``train`` that gets the training
data of the label range and returns a :class:`Trained`: either the weights (labels x
features CSR, no bias column, plus the intercepts) -- then every such method is scored
by the *same* top-k routine -- or a native ``predict`` for libraries that do not expose
their weights.

The worker (``worker.py``) times ``train`` only; it runs in its own process.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

K = 5


def process_cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class Context:
    X: sp.csr_matrix            # training features, float32 CSR (as read)
    Y: sp.csr_matrix            # training labels of the range only, column j = label first + j
    Y_full: sp.csr_matrix       # all training labels (headstart takes the range itself)
    first: int                  # first label of the range
    threads: int
    settings: dict
    tmpdir: str
    train_path: str             # the training file (for methods that read files)


@dataclass
class Trained:
    W: sp.csr_matrix | None = None          # (labels, features) float32, pruned, bias column removed
    b: np.ndarray | None = None             # (labels,) intercepts (bias weight x bias value)
    predict: Callable[[sp.csr_matrix, int], np.ndarray] | None = None   # native: (X, k) -> local label ids
    nnz: int | None = None                  # non-zero weights of the model (bias excluded)
    info: dict = field(default_factory=dict)
    untimed_s: float = 0.0                  # wall time inside train() spent on harness work, subtracted
    untimed_cpu_s: float = 0.0              # CPU time of that work, subtracted


@dataclass
class Method:
    name: str
    family: str
    settings: dict
    train: Callable[[Context], Trained]
    warmup: Callable[[Context], None] | None = None   # extra warm-up (the generic one always runs)
    package: str | None = None              # pip distribution name
    command: str = ""                       # what the call looks like, for the docs
    caveats: tuple[str, ...] = ()


def prune_rows(W: np.ndarray, threshold: float) -> sp.csr_matrix:
    """Dense (labels x features) -> CSR float32 with |w| < threshold set to zero."""
    W = np.asarray(W)
    if threshold > 0:
        W = np.where(np.abs(W) >= threshold, W, 0.0)
    M = sp.csr_matrix(W.astype(np.float32))
    M.eliminate_zeros()
    return M


# =========================================================================== headstart
HEADSTART_SETTINGS = {"C": 1.0, "epsilon": 0.01, "bias": 1.0, "prune": 0.01, "regularize_bias": False,
                      "max_iter": 1000, "normalize": False,
                      # headstart's defaults, settable to compare e.g. its dual against LIBLINEAR's -s 1
                      "loss": "squared-hinge", "l2_solver": "newton"}


def _headstart_train(init: str):
    def train(ctx: Context) -> Trained:
        from headstart import OvAClassifier

        clf = OvAClassifier(init=init, threads=ctx.threads, **ctx.settings)
        clf.fit(ctx.X, ctx.Y_full, first_label=ctx.first, num_labels=ctx.Y.shape[1])
        W = clf.coef_.tocsr()
        info = {}
        try:
            s = clf.stats_.summary()
            info = {k: v for k, v in s.items() if isinstance(v, (int, float, str, dict))}
        except Exception as e:  # statistics are a bonus, never a failure
            info = {"stats_error": repr(e)}
        return Trained(W=W, b=np.asarray(clf.intercept_, dtype=np.float32), nnz=int(W.nnz), info=info)
    return train





# =========================================================================== LIBLINEAR
LIBLINEAR_SETTINGS = {"s": 2, "e": 0.01, "c": 1.0, "B": 1.0, "prune": 0.01}


def ctypes_releases_gil(func) -> bool:
    """A ctypes foreign function releases the GIL unless it was made with PyDLL."""
    return not (getattr(func, "_flags_", 0) & ctypes._FUNCFLAG_PYTHONAPI)


def _liblinear_problem(X: sp.csr_matrix, bias: float):
    from liblinear import liblinear as ll

    return ll.problem(np.zeros(X.shape[0]), X, bias=bias)


def _liblinear_view(base):
    """A second ``problem`` struct over the same feature nodes with its own ``y``.

    ``problem.y`` is a ``POINTER(c_double)`` field: assigning a ctypes array stores the
    array's address, so the array must be kept alive (it is kept on the struct object).
    ``x`` (the row pointers) and ``x_space`` (the nodes, bias node included) are only read
    by ``train()``, so threads can share them; only ``y`` differs between labels.
    """
    from liblinear import liblinear as ll

    p = ll.problem.__new__(ll.problem)
    p.l, p.n, p.bias, p.x = base.l, base.n, base.bias, base.x
    p.x_space, p.rowptr = base.x_space, base.rowptr            # keep the nodes alive
    p.y_buf = (ctypes.c_double * base.l)()
    p.y = p.y_buf
    p.y_np = np.ctypeslib.as_array(p.y_buf)
    assert ctypes.addressof(p.y.contents) == ctypes.addressof(p.y_buf)
    return p


def _liblinear_train(ctx: Context) -> Trained:
    from liblinear import liblinear as ll

    s = ctx.settings
    X, Ycsc = ctx.X, ctx.Y.tocsc()
    n, d = X.shape
    k = Ycsc.shape[1]
    param = ll.parameter(f"-s {int(s['s'])} -e {s['e']} -c {s['c']} -B {s['B']} -q")
    base = _liblinear_problem(X, float(s["B"]))           # built once: x_space shared by all threads
    err = ll.liblinear.check_parameter(base, param)
    if err:
        raise RuntimeError(f"liblinear check_parameter: {err.decode()}")
    has_bias = float(s["B"]) >= 0
    thr = float(s["prune"])
    lock = threading.Lock()
    next_label = [0]
    rows: list = [None] * k
    solver_s = [0.0] * ctx.threads
    errors: list = []

    def work(t: int) -> None:
        try:
            p = _liblinear_view(base)
            y = p.y_np
            while True:
                with lock:
                    j = next_label[0]
                    next_label[0] += 1
                if j >= k:
                    return
                y.fill(-1.0)
                y[Ycsc.indices[Ycsc.indptr[j]:Ycsc.indptr[j + 1]]] = 1.0
                t0 = time.perf_counter()
                mp = ll.liblinear.train(p, param)
                solver_s[t] += time.perf_counter() - t0
                m = mp.contents
                w = np.ctypeslib.as_array(m.w, (p.n,)).astype(np.float64)
                # LIBLINEAR's first label is the positive one (+1 first whenever both occur);
                # a label without positives has the single class -1: flip the sign then.
                if m.label[0] != 1:
                    w = -w
                ll.liblinear.free_and_destroy_model(ctypes.byref(mp))
                feat = w[:d]
                keep = np.flatnonzero(np.abs(feat) >= thr) if thr > 0 else np.flatnonzero(feat)
                rows[j] = (keep.astype(np.int32), feat[keep].astype(np.float32),
                           float(w[d] * s["B"]) if has_bias else 0.0)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(ctx.threads)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    indptr = np.zeros(k + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r[0]) for r in rows])
    W = sp.csr_matrix((np.concatenate([r[1] for r in rows]) if k else np.zeros(0, np.float32),
                       np.concatenate([r[0] for r in rows]) if k else np.zeros(0, np.int32), indptr),
                      shape=(k, d))
    b = np.array([r[2] for r in rows], dtype=np.float32)
    info = {"solver_seconds_sum": round(sum(solver_s), 4), "threads_wall_s": round(wall, 4),
            "solver_concurrency": round(sum(solver_s) / wall, 3) if wall > 0 else None,
            "gil_released_by_ctypes_call": ctypes_releases_gil(ll.liblinear.train)}
    return Trained(W=W, b=b, nnz=int(W.nnz), info=info)





# =========================================================================== napkinXC
NAPKINXC_SETTINGS = {"optimizer": "liblinear", "loss": "l2", "liblinear_solver": "L2R_L2LOSS_SVC",
                     "liblinear_c": 1.0, "liblinear_eps": 0.01, "liblinear_max_iter": 1000, "bias": 1.0,
                     "weights_threshold": 0.01, "norm": False, "features_threshold": 0.0}


class capture_fd2:
    """Collect what native code writes to file descriptor 2 (stderr) inside the block."""

    def __enter__(self):
        import tempfile

        sys.stderr.flush()
        self._saved = os.dup(2)
        self._file = tempfile.TemporaryFile()
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode(errors="replace")
        self._file.close()
        return False


def _napkinxc_args(params: dict) -> list[str]:
    from napkinxc.models import Model

    out: list[str] = []
    for k, v in params.items():
        if v is None:
            continue
        out += [("--" if len(k) > 1 else "-") + Model._to_camelcase(k), str(int(v)) if isinstance(v, bool) else str(v)]
    return out


def _napkinxc_train(kind: str):
    def train(ctx: Context) -> Trained:
        import re

        from napkinxc import models

        cls = getattr(models, kind)
        out = os.path.join(ctx.tmpdir, f"napkinxc-{kind}")
        model = cls(output=out, threads=ctx.threads, verbose=0, **ctx.settings)
        info: dict = {}
        if kind == "OVR" and model.get_params().get("model") != "ovr":
            # napkinxc 0.7.2: OVR.__init__ calls BR.__init__, which sets model=br again, and
            # set_params refuses to change the model: pass the full argument list with
            # --model ovr to the C++ core directly.
            params = dict(model.get_params(), model="ovr")
            model._model.set_args(_napkinxc_args(params))
            model._params["model"] = "ovr"
            info["wrapper_fix"] = "OVR class trains BR in napkinxc 0.7.2; --model ovr passed to the core"
        model.fit(ctx.X, ctx.Y)
        t0, c0 = time.perf_counter(), process_cpu_s()      # loading to read the log: not training
        model.set_params(verbose=1)
        with capture_fd2() as cap:
            model.load()
        m = re.search(r"Non-zero weights / classifiers:\s*([0-9.eE+-]+)", cap.text)
        nnz = None
        if m:
            nnz = int(round(float(m.group(1)) * ctx.Y.shape[1]))
            info["nnz_note"] = "napkinXC's log: mean non-zero weights per classifier x labels (bias included)"

        def predict(Xt: sp.csr_matrix, k: int) -> np.ndarray:
            pred = model.predict(Xt, top_k=k)
            lab = np.full((Xt.shape[0], k), -1, dtype=np.int64)
            for i, row in enumerate(pred):
                ids = [int(r[0]) if isinstance(r, (tuple, list)) else int(r) for r in row[:k]]
                lab[i, :len(ids)] = ids
            return lab

        info["model_dir_bytes"] = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
        return Trained(predict=predict, nnz=nnz, info=info, untimed_s=time.perf_counter() - t0,
                       untimed_cpu_s=process_cpu_s() - c0)
    return train


# =========================================================================== omikuji
OMIKUJI_SETTINGS = {"n_trees": 1, "linear_loss_type": "hinge", "linear_c": 1.0, "linear_eps": 0.1,
                    "linear_max_iter": 1000, "linear_weight_threshold": 0.01, "min_branch_size": "labels+1",
                    "max_depth": 1, "collapse_every_n_layers": 0, "train_trees_1_by_1": False,
                    "drop_rows_without_features": False}


def write_xmc(path: str, X: sp.csr_matrix, Y: sp.csr_matrix) -> None:
    """Plain XMC text of (X, Y); a row without labels starts with a space."""
    X = sp.csr_matrix(X)
    Y = sp.csr_matrix(Y)
    with open(path, "w", encoding="ascii") as fh:
        fh.write(f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}\n")
        for i in range(X.shape[0]):
            labs = ",".join(str(j) for j in Y.indices[Y.indptr[i]:Y.indptr[i + 1]])
            a, z = X.indptr[i], X.indptr[i + 1]
            feats = " ".join(f"{j}:{v:.9g}" for j, v in zip(X.indices[a:z], X.data[a:z]))
            fh.write(f"{labs} {feats}\n")


def _omikuji_train(ctx: Context) -> Trained:
    import omikuji
    from omikuji._libomikuji import ffi, lib

    s = dict(ctx.settings)
    drop = bool(s.pop("drop_rows_without_features"))
    k = ctx.Y.shape[1]
    path = os.path.join(ctx.tmpdir, "omikuji-train.txt")
    t_w, c_w = time.perf_counter(), process_cpu_s()
    X, Y = ctx.X, ctx.Y
    empty = np.flatnonzero(np.diff(X.indptr) == 0)
    if drop and len(empty):                           # a deviation from the common data: recorded
        keep = np.flatnonzero(np.diff(X.indptr) > 0)
        X, Y = X[keep], Y[keep]
    write_xmc(path, X, Y)                             # harness work: not counted
    untimed = time.perf_counter() - t_w
    untimed_cpu = process_cpu_s() - c_w
    hp = omikuji.Model.default_hyper_param()
    for key, v in s.items():
        if key == "linear_loss_type":
            v = lib.Hinge if v == "hinge" else lib.Log
        elif key == "min_branch_size" and v == "labels+1":
            v = k + 1                                 # the root holds every label: one flat layer
        setattr(hp, key, v)
    pool = omikuji._ThreadPoolHandle(ctx.threads)
    t_l, c_l = time.perf_counter(), process_cpu_s()
    ds = lib.load_omikuji_data_set(ffi.new("char[]", path.encode()), pool.ptr)
    load_s = time.perf_counter() - t_l
    untimed_cpu += process_cpu_s() - c_l
    if ds == ffi.NULL:
        raise RuntimeError(f"omikuji could not load the training data (its log: 'Failed to laod data file'); "
                           f"the file has {len(empty)} row(s) without features, e.g. row {empty[:3].tolist()}"
                           if len(empty) else "omikuji could not load the training data")
    ds = ffi.gc(ds, lib.free_omikuji_data_set)
    untimed += load_s                                 # parsing its own file is not training
    mp = lib.train_omikuji_model(ds, hp, pool.ptr)
    if mp == ffi.NULL:
        raise RuntimeError("omikuji train_omikuji_model failed")
    model = omikuji.Model(mp, pool)

    def predict(Xt: sp.csr_matrix, kk: int) -> np.ndarray:
        lab = np.full((Xt.shape[0], kk), -1, dtype=np.int64)
        for i in range(Xt.shape[0]):
            a, z = Xt.indptr[i], Xt.indptr[i + 1]
            pairs = list(zip(Xt.indices[a:z].tolist(), Xt.data[a:z].tolist()))
            out = model.predict(pairs, beam_size=10, top_k=kk)
            for r, (lbl, _score) in enumerate(out[:kk]):
                lab[i, r] = lbl
        return lab

    mdir = os.path.join(ctx.tmpdir, "omikuji-model")
    model.save(mdir)
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(mdir) for f in fs)
    return Trained(predict=predict, untimed_s=untimed, untimed_cpu_s=untimed_cpu,
                   info={"rows_dropped": int(len(empty)) if drop else 0, "load_own_file_s": round(load_s, 4), "model_dir_bytes": size, "n_trees": model.n_trees,
                         "nnz_note": "omikuji does not expose its weights"})


# =========================================================================== PECOS
PECOS_SETTINGS = {"solver_type": "L2R_L2LOSS_SVC_PRIMAL", "newton_eps": 0.01, "Cp": 1.0, "Cn": 1.0,
                  "bias": 1.0, "threshold": 0.01, "max_iter": 1000}


def _pecos_train(ctx: Context) -> Trained:
    from pecos.xmc.xlinear.model import XLinearModel

    Y = sp.csc_matrix(ctx.Y, dtype=np.float32)
    X = sp.csr_matrix(ctx.X, dtype=np.float32)
    model = XLinearModel.train(X, Y, C=None, threads=ctx.threads, **ctx.settings)
    t0, c0 = time.perf_counter(), process_cpu_s()        # weight extraction: not training
    ml = model.model.model_chain[-1]
    Wfull = sp.csc_matrix(ml.W)                       # (features [+ bias], labels)
    d = X.shape[1]
    bias = float(ctx.settings.get("bias", 1.0))
    W = sp.csr_matrix(Wfull[:d].T, dtype=np.float32)
    if Wfull.shape[0] > d:
        b = np.asarray(Wfull[d].todense(), dtype=np.float32).ravel() * bias
    else:
        b = np.zeros(W.shape[0], dtype=np.float32)
    W.eliminate_zeros()
    return Trained(W=W, b=b, nnz=int(W.nnz), untimed_s=time.perf_counter() - t0,
                   untimed_cpu_s=process_cpu_s() - c0, info={"weights_shape": list(Wfull.shape)})


# =========================================================================== LibMultiLabel
LIBMULTILABEL_SETTINGS = {"options": "-s 2 -e 0.01 -c 1 -B 1", "prune": 0.01}


def _libmultilabel_train(ctx: Context) -> Trained:
    import libmultilabel.linear as lml
    import libmultilabel.linear.linear as lml_linear

    # train_1vsrest starts psutil.cpu_count(logical=False) threads; make that --threads.
    class _Cores:
        def __getattr__(self, name):
            import psutil
            return getattr(psutil, name)

        def cpu_count(self, logical=True):
            return ctx.threads

    lml_linear.psutil = _Cores()
    model = lml.train_1vsrest(ctx.Y, ctx.X, options=ctx.settings["options"], verbose=False)
    t0, c0 = time.perf_counter(), process_cpu_s()        # weight extraction and pruning: not training
    Wt = np.asarray(model.weights)                     # (features + bias, labels), dense float64
    d = ctx.X.shape[1]
    bias = float(model.bias)
    W = prune_rows(Wt[:d].T, float(ctx.settings["prune"]))
    b = (Wt[d] * bias).astype(np.float32) if Wt.shape[0] > d and bias > 0 else np.zeros(W.shape[0], np.float32)
    return Trained(W=W, b=b, nnz=int(W.nnz), untimed_s=time.perf_counter() - t0,
                   untimed_cpu_s=process_cpu_s() - c0, info={"dense_weights_bytes": int(Wt.nbytes)})





# =========================================================================== scikit-learn
SKLEARN_SETTINGS = {"loss": "squared_hinge", "penalty": "l2", "dual": False, "C": 1.0, "tol": 0.01,
                    "max_iter": 1000, "fit_intercept": True, "intercept_scaling": 1.0, "backend": "threading",
                    "prune": 0.01}


def _sklearn_train(ctx: Context) -> Trained:
    from joblib import parallel_backend
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import LinearSVC

    s = dict(ctx.settings)
    backend = s.pop("backend")
    prune = float(s.pop("prune"))
    X = ctx.X.astype(np.float64)                       # liblinear inside sklearn needs float64
    est = OneVsRestClassifier(LinearSVC(**s), n_jobs=ctx.threads)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with parallel_backend(backend, n_jobs=ctx.threads):
            est.fit(X, ctx.Y)
    t0, c0 = time.perf_counter(), process_cpu_s()        # weight extraction and pruning: not training
    d = ctx.X.shape[1]
    k = ctx.Y.shape[1]
    Wd = np.zeros((k, d))
    b = np.zeros(k, dtype=np.float32)
    constant = 0
    for j, e in enumerate(est.estimators_):
        if hasattr(e, "coef_"):
            Wd[j] = np.asarray(e.coef_).ravel()
            b[j] = float(np.asarray(e.intercept_).ravel()[0])
        else:                                          # _ConstantPredictor: label never positive
            constant += 1
            b[j] = -1e6 if not np.any(getattr(e, "y_", [0])) else 1e6
    W = prune_rows(Wd, prune)
    return Trained(W=W, b=b, nnz=int(W.nnz), untimed_s=time.perf_counter() - t0,
                   untimed_cpu_s=process_cpu_s() - c0, info={"constant_predictors": constant})


# =========================================================================== registry
_HS_CAVEATS = (
    "Stopping rule: LIBLINEAR's ||grad f(w)|| <= eps * max(min(#pos,#neg),1)/n * ||grad f(0)||, eps = 0.01, "
    "the same as the reference.",
    "The bias weight is not regularised by default (regularize_bias=False); LIBLINEAR -B 1 regularises it. "
    "`--set headstart.regularize_bias=true` trains exactly LIBLINEAR's objective.",
    "headstart gets the full label matrix and the range (first_label, num_labels), as a user would call it; "
    "its validation of the full Y is inside the timed region (the peers get the range's columns).",
    "Numba compilation happens in the warm-up (see 'What is measured'), reported as warm-up seconds.",
)

METHODS: dict[str, Method] = {}
for _init in ("zero", "bias", "ovap", "aop"):
    METHODS[f"headstart-{_init}"] = Method(
        name=f"headstart-{_init}", family="headstart", settings=dict(HEADSTART_SETTINGS),
        train=_headstart_train(_init), package="headstart",
        command=f"headstart.OvAClassifier(init='{_init}', threads=T, C=1, epsilon=0.01, bias=1, prune=0.01)"
                ".fit(X, Y, first_label=A, num_labels=B-A)",
        caveats=_HS_CAVEATS)

METHODS["liblinear"] = Method(
    name="liblinear", family="reference", settings=dict(LIBLINEAR_SETTINGS), train=_liblinear_train,
    package="liblinear-official",
    command="liblinear.train(problem, parameter('-s 2 -e 0.01 -c 1 -B 1 -q')) once per label, T Python threads",
    caveats=(
        "One `problem` (feature nodes with the bias node) is built once; every thread gets its own `problem` "
        "struct over the same nodes with its own `y` buffer, overwritten per label (problem.y is a "
        "POINTER(c_double) to a ctypes array kept alive on the struct); the C code only reads x and y.",
        "Labels are handed to threads from a shared counter (dynamic scheduling).",
        "ctypes calls into a CDLL release the GIL (the harness checks the function's flags and records "
        "solver_concurrency = sum of solver seconds / wall seconds, ~T when the threads really run at once).",
        "Weights with |w| < 0.01 are dropped afterwards (model nnz); the bias weight is kept as the intercept.",
        "The sign follows LIBLINEAR's label order: w is negated when the model's first label is -1 "
        "(labels without positives).",
    ))

METHODS["napkinxc-br"] = Method(
    name="napkinxc-br", family="peer", settings=dict(NAPKINXC_SETTINGS), train=_napkinxc_train("BR"),
    package="napkinxc",
    command="napkinxc.models.BR(loss='l2', liblinear_solver='L2R_L2LOSS_SVC', liblinear_c=1, liblinear_eps=0.01, "
            "bias=1, weights_threshold=0.01, norm=False, threads=T).fit(X, Y)",
    caveats=(
        "Binary relevance = napkinXC's multi-label one-vs-all; same primal Newton solver (its bundled "
        "LIBLINEAR copy), same eps and C.",
        "fit() includes napkinXC's conversion of the input and writing the model to disk.",
        "Predictions and P@k come from napkinXC's own predict(top_k=5). The weights are not exposed: nnz is "
        "read from napkinXC's log when the model is loaded (mean non-zeros per classifier x labels, bias "
        "included); loading is not timed.",
    ))
METHODS["napkinxc-ovr"] = Method(
    name="napkinxc-ovr", family="peer", settings=dict(NAPKINXC_SETTINGS, pick_one_label_weighting=True),
    train=_napkinxc_train("OVR"), package="napkinxc",
    command="napkinxc.models.OVR(same settings as napkinxc-br, pick_one_label_weighting=True).fit(X, Y)",
    caveats=(
        "napkinXC's `ovr` is its multi-class one-versus-rest: it skips every row that does not have exactly one "
        "label unless pick_one_label_weighting=True, which turns a row with m labels into m weighted "
        "single-label copies (napkinXC's way to run it on multi-label data). So it is not the same model as "
        "binary relevance; its P@k differs.",
        "In napkinxc 0.7.2 the Python OVR class silently trains BR (OVR.__init__ calls BR.__init__, which sets "
        "model=br); the harness passes --model ovr to the C++ core itself (the log then says Type: ovr).",
        "nnz is read from napkinXC's own log when the model is loaded (mean non-zeros per classifier x labels).",
    ))
METHODS["omikuji"] = Method(
    name="omikuji", family="peer", settings=dict(OMIKUJI_SETTINGS), train=_omikuji_train, package="omikuji",
    command="omikuji: n_trees=1, min_branch_size=#labels+1 (the root is a leaf holding every label: one flat "
            "one-vs-all layer), linear loss hinge (squared hinge), C=1, eps=0.1, max_iter=1000, "
            "weight_threshold=0.01",
    caveats=(
        "omikuji's own solver is dual coordinate descent for the squared hinge (LIBLINEAR -s 1 style), not "
        "primal Newton: eps means something else; eps=0.1 (LIBLINEAR's dual default) and max_iter=1000 "
        "instead of omikuji's default 20.",
        "omikuji always L2-normalises every row and appends a bias feature of 1; it cannot be switched off "
        "(a no-op on debian-deps, whose rows are already unit length; not on bibtex/delicious).",
        "omikuji cannot parse a row without features ('Failed to laod data file'; debian-deps has one): "
        "that failure is the result. `--set omikuji.drop_rows_without_features=true` drops such rows "
        "(a different training set, recorded as rows_dropped) to get numbers anyway.",
        "omikuji trains from a file: the harness writes the label range as an XMC file beforehand and times "
        "omikuji's parsing of it separately (not counted as training).",
        "Scores are omikuji's -(max(0, 1 - w.x))^2: all labels with w.x >= 1 tie at 0.",
        "Predictions come from omikuji's own predict (one Python call per row); nnz is not exposed.",
    ))
METHODS["pecos"] = Method(
    name="pecos", family="peer", settings=dict(PECOS_SETTINGS), train=_pecos_train, package="libpecos",
    command="pecos.xmc.xlinear.XLinearModel.train(X, Y, C=None, solver_type='L2R_L2LOSS_SVC_PRIMAL', "
            "newton_eps=0.01, Cp=1, Cn=1, bias=1, threshold=0.01, threads=T)",
    caveats=(
        "C=None gives one flat one-vs-all layer (XLinearModel's documented 'single OVA model' mode).",
        "PECOS's primal squared-hinge solver uses newton_eps as its eps (0.01). Its weights come out much denser "
        "than LIBLINEAR's at the same threshold (about 20x the nnz on debian-deps labels 0:30): a different w, "
        "similar P@k.",
        "libpecos 1.2.8 declares numpy<2, scipy<1.14 and torch/transformers; it is installed with --no-deps "
        "(its core is a ctypes library, independent of numpy's ABI).",
    ))
METHODS["libmultilabel"] = Method(
    name="libmultilabel", family="peer", settings=dict(LIBMULTILABEL_SETTINGS), train=_libmultilabel_train,
    package="libmultilabel",
    command="libmultilabel.linear.train_1vsrest(Y, X, options='-s 2 -e 0.01 -c 1 -B 1')",
    caveats=(
        "LibMultiLabel runs LIBLINEAR per label with psutil.cpu_count(logical=False) threads; the harness "
        "makes that count --threads.",
        "It keeps a dense (features+1) x labels float64 weight matrix; weights |w| < 0.01 are pruned by the "
        "harness afterwards (not timed).",
        "It needs liblinear-multicore, which installs the same `liblinear` module as liblinear-official: "
        "installed with --no-deps so that the reference stays liblinear-official (train_1vsrest strips "
        "the -m option, so the official build works).",
    ))
METHODS["sklearn"] = Method(
    name="sklearn", family="peer", settings=dict(SKLEARN_SETTINGS), train=_sklearn_train, package="scikit-learn",
    command="OneVsRestClassifier(LinearSVC(loss='squared_hinge', dual=False, C=1, tol=0.01, max_iter=1000), "
            "n_jobs=T).fit(X.astype(float64), Y) under joblib's threading backend",
    caveats=(
        "LinearSVC(dual=False) is scikit-learn's bundled LIBLINEAR -s 2; it regularises the intercept "
        "(intercept_scaling=1) like -B 1.",
        "The threading backend is used (the liblinear call releases the GIL) so memory is one process; "
        "X is converted to float64 once inside the timed region.",
        "Labels without positives become constant predictors (ranked last).",
        "Much slower than the LIBLINEAR reference it wraps in development runs: every label re-validates X and "
        "rebuilds LIBLINEAR's problem; the plan's --timeout bounds it on debian-deps.",
    ))

#: method groups accepted by --methods
GROUPS = {
    "all": list(METHODS),
    "headstart": [m for m in METHODS if m.startswith("headstart-")],
    "peers": [m for m in METHODS if METHODS[m].family == "peer"],
}


def expand_methods(spec: str) -> list[str]:
    out: list[str] = []
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        names = GROUPS.get(part, [part])
        for n in names:
            if n not in METHODS:
                raise SystemExit(f"unknown method {n!r}; known: {', '.join(METHODS)} and groups "
                                 f"{', '.join(GROUPS)}")
            if n not in out:
                out.append(n)
    return out


def parse_value(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def apply_overrides(sets: list[str]) -> dict[str, dict]:
    """``["headstart.regularize_bias=true", "omikuji.linear_eps=0.01"]`` -> per-method overrides.
    A prefix names one method or a family/group (``headstart`` = every init)."""
    out: dict[str, dict] = {}
    for item in sets or []:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise SystemExit(f"--set expects METHOD.key=value, got {item!r}")
        lhs, val = item.split("=", 1)
        target, key = lhs.split(".", 1)
        names = GROUPS.get(target, [target])
        for n in names:
            if n not in METHODS:
                raise SystemExit(f"--set {item}: unknown method {n!r}")
            if key not in METHODS[n].settings:
                raise SystemExit(f"--set {item}: {n} has no setting {key!r}; settings: "
                                 f"{', '.join(METHODS[n].settings)}")
            out.setdefault(n, {})[key] = parse_value(val)
    return out
