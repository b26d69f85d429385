"""Where a sub-problem's Newton solve starts: the initialisers of the registry
(:mod:`headstart.init`), on the whole vector or on each part of [sparse | dense].

* **Whole vector** (default): the initialiser ``params.init`` (any registered one whose
  plan :func:`headstart.training.one_problem.local_plan` can restrict: aop, zero, bias, mean, multi-pos,
  ovap, ovap-strict, pretrained) runs on the sub-problem, over all its columns.
* **Per part** (dense + sparse features, DiSMEC++'s cascade): the sparse columns and the
  dense columns each get their own start -- any registered initialiser run on the
  sub-problem restricted to that part's columns (plus the bias column), or, for the
  dense part, weights read from a ``.npy`` file -- and the start is their sum:
  w0 = [w_s | w_d], bias weight b_s + b_d, so every instance's start score is the sum of
  the two parts' scores (with aop on both parts, the mean positive scores 2 s and the
  mean negative 2 t, as in DiSMEC++ where both parts aim at +1 / -2).  A part without a
  start of its own starts from zero (DiSMEC++'s default).

The per-label code is the registry's own (:func:`headstart.init.initial_weights`),
given the sub-problem (or a part of it) and the plan restricted to it; nothing here
names an initialiser except ``file``, which is the registry's ``pretrained`` plan built
from the dense weights file instead of a saved model.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from .._compile import njit
from ..errors import DataFormatError, ParameterError
from ..training import one_problem as core

#: the start of the dense part read from a file (DiSMEC++'s --init-dense-weights)
FILE = "file"
#: initialisers a part cannot use: a saved model covers both parts (use it as init)
NOT_PER_PART = ("pretrained",)


class Starts(NamedTuple):
    """The prepared starts of one training run (plans of the registry's initialisers)."""

    whole: Any          # plan on all columns (when not per_part)
    sparse: Any         # plan on the sparse columns [0, n_sparse) (per_part)
    dense: Any          # plan on the dense columns [n_sparse, ...) (per_part)
    n_sparse: int
    per_part: bool
    name: str           # how the statistics and messages name it


def part_names() -> tuple[str, ...]:
    from ..init import NAMES

    return tuple(n for n in NAMES if n not in NOT_PER_PART)


def check_part_init(name: Any, what: str, dense: bool) -> None:
    choices = part_names() + ((FILE,) if dense else ())
    if name is not None and name not in choices:
        raise ParameterError(f"parameter {what} must be one of {', '.join(choices)}, got {name!r}"
                             + (" (a saved model covers both parts: use init='pretrained')"
                                if name in NOT_PER_PART else ""))


# --------------------------------------------------------------------------- the dense weights file
def _load_npy(path: str, what: str) -> np.ndarray:
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
    except OSError as e:
        raise ParameterError(f"{path}: cannot read {what}: {e.strerror}") from None
    if magic != b"\x93NUMPY":
        raise DataFormatError(f"{path}: {what} must be a .npy file (numpy.save), this is not one")
    try:
        a = np.load(path, allow_pickle=False)
    except ValueError as e:
        raise DataFormatError(f"{path}: not a plain numeric .npy array: {e}") from None
    if a.dtype.kind not in "fiu":
        raise DataFormatError(f"{path}: {what} must be numbers, got dtype {a.dtype}")
    return a


def _first_bad(a: np.ndarray) -> tuple[int, ...] | None:
    bad = np.argwhere(~np.isfinite(a))
    return tuple(int(x) for x in bad[0]) if bad.size else None


def read_dense_start(path: str, num_labels: int, n_dense: int) -> np.ndarray:
    """Dense start weights: a .npy matrix, one row per label of the label space, one column
    per dense feature (the model's dense weights: row l of a saved model's dense block)."""
    a = _load_npy(path, "dense start weights")
    if a.ndim != 2 or a.shape != (num_labels, n_dense):
        raise DataFormatError(f"{path}: dense start weights have shape {a.shape}, expected ({num_labels}, "
                              f"{n_dense}) (one row per label, one column per dense feature)")
    bad = _first_bad(a)
    if bad is not None:
        raise DataFormatError(f"{path}: entry {bad} (label {bad[0]}, dense feature {bad[1]}) is "
                              f"{float(a[bad])!r}, not a finite number")
    return a.astype(np.float64)


def read_dense_start_bias(path: str, num_labels: int) -> np.ndarray:
    """Start intercepts (bias weight times bias value, as a model's ``intercept``): a .npy
    vector with one value per label."""
    a = _load_npy(path, "start intercepts")
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1 or a.size != num_labels:
        raise DataFormatError(f"{path}: start intercepts have shape {a.shape}, expected ({num_labels},) "
                              f"(one per label)")
    bad = _first_bad(a)
    if bad is not None:
        raise DataFormatError(f"{path}: entry {bad[0]} (label {bad[0]}) is {float(a[bad])!r}, not a finite number")
    return a.astype(np.float64)


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dense_file_plan(W: np.ndarray, intercept: np.ndarray | None, bias: float):
    """The registry's ``pretrained`` plan over the dense columns, from start weights W
    (labels x dense features) and intercepts (bias weight = intercept / bias)."""
    if intercept is not None and bias <= 0:
        raise ParameterError("start intercepts need a bias feature (bias > 0)")
    M = sp.csr_matrix(W)
    M.sort_indices()
    wb = np.zeros(W.shape[0]) if intercept is None else intercept / bias
    return core.pretrained_plan(M.indptr.astype(np.int64), M.indices.astype(np.int32), M.data.astype(np.float64),
                                wb, 0, W.shape[0])


# --------------------------------------------------------------------------- preparation (Python)
def prepare_starts(X: sp.csr_matrix, Y: sp.csc_matrix, params, *, n_sparse: int | None = None,
                   sparse_init: str | None = None, dense_init: str | None = None,
                   dense_weights: np.ndarray | None = None, dense_intercept: np.ndarray | None = None,
                   threads: int = 1) -> Starts:
    """Prepare the starts of a run on the training columns X (scaled when there is a dense
    part) and labels Y: ``params.init`` on the whole vector, or -- when ``sparse_init`` or
    ``dense_init`` is given -- one initialiser per part (columns [0, n_sparse) and the
    rest), ``dense_init='file'`` taking ``dense_weights`` (+ ``dense_intercept``)."""
    per_part = sparse_init is not None or dense_init is not None
    if not per_part:
        plan = core.prepare_plan(params.init, params, X, Y, threads)
        return Starts(plan, core.ZeroPlan(), core.ZeroPlan(), int(X.shape[1]), False, params.init)
    if n_sparse is None:
        raise ParameterError("per-part starts need dense + sparse features")
    check_part_init(sparse_init, "sparse_init", False)
    check_part_init(dense_init, "dense_init", True)
    Xc = sp.csc_matrix(X)
    parts = []
    for name, cols in ((sparse_init or "zero", slice(0, n_sparse)), (dense_init or "zero", slice(n_sparse, None))):
        if name == FILE:
            if dense_weights is None:
                raise ParameterError("dense_init='file' needs the dense start weights")
            parts.append(dense_file_plan(dense_weights, dense_intercept, float(params.bias)))
            continue
        Xp = sp.csr_matrix(Xc[:, cols])
        Xp.sort_indices()
        parts.append(core.prepare_plan(name, params, Xp, Y, threads))
    return Starts(core.ZeroPlan(), parts[0], parts[1], int(n_sparse), True,
                  f"sparse:{sparse_init or 'zero'}+dense:{dense_init or 'zero'}")


def aligned_starts(T: Starts) -> Starts:
    """The starts with every array aligned (after Dask's deserialisation; see
    :func:`headstart.distributed.dask_backend.aligned`)."""
    from ..distributed.dask_backend import aligned

    def plan(p):
        return type(p)(*(aligned(v) if isinstance(v, np.ndarray) else v for v in p))

    return T._replace(whole=plan(T.whole), sparse=plan(T.sparse), dense=plan(T.dense))


# --------------------------------------------------------------------------- per label (compiled)
@njit(cache=True, nogil=True)
def _part(plan, P, O, colsum, psum, pos, label, feats, rows, scales, a, b, offset):
    """The start of the part of local columns [a, b) (global ids offset + ...), computed
    by the registry's code on the sub-problem restricted to those columns and the bias
    column; returns it (b - a weights, bias weight last)."""
    m = P.indptr.size - 1
    nf = P.n_features
    k = b - a
    # a row's entries are sorted by local column, so the part is one run of each row
    indptr = np.zeros(m + 1, dtype=np.int64)
    for i in range(m):
        c = 0
        for p in range(P.indptr[i], P.indptr[i + 1]):
            j = P.indices[p]
            if a <= j < b:
                c += 1
        indptr[i + 1] = indptr[i] + c
    indices = np.empty(indptr[m], dtype=P.indices.dtype)
    data = np.empty(indptr[m], dtype=P.data.dtype)
    t = 0
    for i in range(m):
        for p in range(P.indptr[i], P.indptr[i + 1]):
            j = P.indices[p]
            if a <= j < b:
                indices[t] = j - a
                data[t] = P.data[p]
                t += 1
    Pp = core.make_problem(indptr, indices, data, k, P.bias, P.loss, P.reg, P.regularize_bias)
    xm = np.empty(k + 1)
    ps = np.empty(k + 1)
    pf = np.empty(k, dtype=np.int32)
    for q in range(k):
        xm[q] = colsum[a + q] / max(m, 1)
        ps[q] = psum[a + q]
        pf[q] = feats[a + q] - offset
    xm[k] = colsum[nf] / max(m, 1)
    ps[k] = psum[nf]
    R = core.SubProblem(pf, rows, xm, scales[a:b].copy(), label)
    wp = np.zeros(k + 1)
    # the part's code may write O.wx (the caller recomputes the scores of the sum)
    core.initial_weights(core.local_plan(plan, R), Pp, O, wp, ps, pos, label)
    return wp


@njit(cache=True, nogil=True)
def start_vector(T, P, O, w, colsum, psum, pos, label, feats, rows, scales):
    """Write the start of ``label``'s sub-problem P into w and its scores into O.wx.

    ``colsum`` / ``psum``: the column sums of the sub-problem and of its positives (bias
    coordinate last, from :func:`headstart.training.one_problem.setup`); ``pos``: local rows of the
    positives; ``feats`` / ``rows``: global ids of the local columns / rows; ``scales``:
    per local column, original weight = training weight * scale."""
    m = P.indptr.size - 1
    nf = P.n_features
    nv = nf + 1
    if not T.per_part:
        xm = np.empty(nv)
        for j in range(nv):
            xm[j] = colsum[j] / max(m, 1)
        R = core.SubProblem(feats, rows, xm, scales[:nf].copy(), label)
        if core.initial_weights(core.local_plan(T.whole, R), P, O, w, psum[:nv], pos, label):
            core.round_start(w)
            core.scores(P, w, O.wx)
        return
    ns = np.searchsorted(feats, T.n_sparse)
    ws = _part(T.sparse, P, O, colsum, psum, pos, label, feats, rows, scales, 0, ns, 0)
    wd = _part(T.dense, P, O, colsum, psum, pos, label, feats, rows, scales, ns, nf, T.n_sparse)
    for q in range(ns):
        w[q] = ws[q]
    for q in range(ns, nf):
        w[q] = wd[q - ns]
    w[nf] = ws[ns] + wd[nf - ns]
    core.scores(P, w, O.wx)


def describe(T: Starts) -> str:
    return T.name


def part_manifest(sparse_init: str | None, dense_init: str | None, dense_file: str | None,
                  dense_bias_file: str | None) -> dict[str, Any] | None:
    """How a dense + sparse model's per-part starts are recorded in its manifest (files by
    path and sha256); None without per-part starts."""
    if sparse_init is None and dense_init is None:
        return None
    out: dict[str, Any] = {"sparse": sparse_init or "zero", "dense": dense_init or "zero"}
    for key, path in (("dense_file", dense_file), ("dense_bias_file", dense_bias_file)):
        if path is not None:
            out[key] = {"path": os.path.abspath(path), "sha256": file_digest(path)}
    return out
