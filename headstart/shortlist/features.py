"""Dense + sparse features: X = [sparse | dense], each part with its own regularisation
scale and its own row normalisation.

The objective with separate scales is

    0.5 * lambda_s ||w_s||^2 + 0.5 * lambda_d ||w_d||^2 + C sum_i phi(y_i (x_s.w_s + x_d.w_d + b)).

Substituting w_s = u_s / sqrt(lambda_s), w_d = u_d / sqrt(lambda_d) turns it into the
core's objective 0.5 ||u||^2 + C sum_i phi(y_i (x'.u + b)) on the columns
x' = [x_s / sqrt(lambda_s) | x_d / sqrt(lambda_d)]: rescaling a column by c changes the
L2 penalty of its weight by 1 / c^2.  So training runs unchanged on the scaled columns
and the weights are mapped back (w = u * fscale, :func:`combine`'s second result) before
pruning and saving: the saved model lives in the original feature space and predicts
with ``[x_s | x_d] . w``.  (tests/test_shortlist.py checks the equivalence against a
direct minimisation with scipy.optimize.)  The bias is not rescaled.

Starts: ``TrainParams.init`` on the combined (scaled) columns -- one start vector for
both parts, computed from the sub-problem's rows there -- or one start per part
(``sparse_init`` / ``dense_init``, dense weights from a file; see :mod:`.starts`).

Preprocessing: the sparse part may be L2-normalised row by row, the dense part too,
each on its own (``normalize_sparse`` / ``normalize_dense``), before scaling; tf-idf is
not offered with a dense part (give tf-idf values).  The same is applied at prediction
(:func:`prediction_features`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError, ModelFormatError, ParameterError

MANIFEST_KEY = "dense"


@dataclass(frozen=True)
class DenseSparseParams:
    """How the two parts are combined and started (saved in the manifest's ``dense`` field).

    Starts per part (DiSMEC++'s cascade): ``sparse_init`` / ``dense_init`` name a
    registered initialiser run on that part's columns alone (``aop`` is DiSMEC++'s
    msi), or for the dense part ``file``: the weights in ``dense_init_file`` (a .npy
    matrix, labels x dense features, in the model's feature space) with the intercepts
    in ``dense_init_bias_file`` (optional .npy vector).  Giving either part a start
    replaces ``TrainParams.init``; a part without one starts from zero
    (:mod:`.starts`)."""

    sparse_reg: float = 1.0         # lambda_s: L2 scale of the sparse weights
    dense_reg: float = 1.0          # lambda_d: L2 scale of the dense weights
    normalize_sparse: bool = False  # L2-normalise the sparse part of every row
    normalize_dense: bool = False   # L2-normalise the dense part of every row
    sparse_init: str | None = None  # start of the sparse part (an initialiser's name)
    dense_init: str | None = None   # start of the dense part (an initialiser's name, or 'file')
    dense_init_file: str | None = None       # dense_init='file': start weights (.npy, labels x dense)
    dense_init_bias_file: str | None = None  # dense_init='file': start intercepts (.npy, one per label)

    def __post_init__(self) -> None:
        from .starts import FILE, check_part_init

        for name in ("sparse_reg", "dense_reg"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise ParameterError(f"parameter {name} must be a finite number > 0, got {v!r}")
        for name in ("normalize_sparse", "normalize_dense"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(f"parameter {name} must be true or false, got {getattr(self, name)!r}")
        for name in ("dense_init_file", "dense_init_bias_file"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (str, os.PathLike)) or os.fspath(v) == ""):
                raise ParameterError(f"parameter {name} must be a file name, got {v!r}")
            if v is not None:
                object.__setattr__(self, name, os.fspath(v))
        if self.dense_init_file is not None and self.dense_init is None:
            object.__setattr__(self, "dense_init", FILE)   # the file says what the start is
        check_part_init(self.sparse_init, "sparse_init", False)
        check_part_init(self.dense_init, "dense_init", True)
        if (self.dense_init == FILE) != (self.dense_init_file is not None):
            raise ParameterError("parameter dense_init_file must be given exactly when dense_init='file' "
                                 f"(dense_init={self.dense_init!r}, dense_init_file={self.dense_init_file!r})")
        if self.dense_init_bias_file is not None and self.dense_init != FILE:
            raise ParameterError("parameter dense_init_bias_file needs dense_init='file' (dense_init_file)")

    @property
    def per_part(self) -> bool:
        return self.sparse_init is not None or self.dense_init is not None

    def manifest(self, n_sparse: int, n_dense: int) -> dict[str, Any]:
        from .starts import part_manifest

        m = {"n_sparse": int(n_sparse), "n_dense": int(n_dense), "sparse_reg": float(self.sparse_reg),
             "dense_reg": float(self.dense_reg), "normalize_sparse": self.normalize_sparse,
             "normalize_dense": self.normalize_dense}
        starts = part_manifest(self.sparse_init, self.dense_init, self.dense_init_file, self.dense_init_bias_file)
        if starts is not None:
            m["starts"] = starts
        return m

    @classmethod
    def from_manifest(cls, m: Any, where: str = "manifest") -> tuple["DenseSparseParams", int, int]:
        """The part scales and normalisations of a saved model (what prediction needs;
        the per-part starts, if recorded, are kept in the manifest only)."""
        keys = {"n_sparse", "n_dense", "sparse_reg", "dense_reg", "normalize_sparse", "normalize_dense"}
        if not isinstance(m, dict) or not keys <= set(m) or not set(m) <= keys | {"starts"}:
            raise ModelFormatError(f"{where}: field 'dense' must have the fields {', '.join(sorted(keys))} "
                                   "(and optionally 'starts')")
        if "starts" in m and not isinstance(m["starts"], dict):
            raise ModelFormatError(f"{where}: dense.starts must be an object, got {m['starts']!r}")
        for k in ("n_sparse", "n_dense"):
            if not isinstance(m[k], int) or isinstance(m[k], bool) or m[k] < 0:
                raise ModelFormatError(f"{where}: dense.{k} must be an integer >= 0, got {m[k]!r}")
        try:
            p = cls(m["sparse_reg"], m["dense_reg"], m["normalize_sparse"], m["normalize_dense"])
        except ParameterError as e:
            raise ModelFormatError(f"{where}: dense: {e}") from None
        return p, m["n_sparse"], m["n_dense"]


def _l2_rows_dense(D: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(D.astype(np.float64), axis=1)
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return (D * scale[:, None]).astype(np.float32)


def _l2_rows_sparse(X: sp.csr_matrix) -> sp.csr_matrix:
    X = sp.csr_matrix(X, dtype=np.float32, copy=True)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel())
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    X.data *= np.repeat(scale, np.diff(X.indptr)).astype(np.float32)
    return X


def check_dense(D: Any, n_rows: int, n_dense: int | None = None) -> np.ndarray:
    D = np.asarray(D)
    if D.ndim != 2 or D.dtype.kind not in "biuf":
        raise DataFormatError(f"dense features must be a 2-d real array, got shape {D.shape}, dtype {D.dtype}")
    if D.shape[0] != n_rows:
        raise DataFormatError(f"the dense features have {D.shape[0]} rows but the sparse features {n_rows}")
    if n_dense is not None and D.shape[1] != n_dense:
        raise DataFormatError(f"the dense features have {D.shape[1]} columns, the model was trained on {n_dense}")
    D = np.ascontiguousarray(D, dtype=np.float32)
    if not np.all(np.isfinite(D)):
        raise DataFormatError("dense features contain NaN or infinite values")
    return D


def _hstack(Xs: sp.csr_matrix, D: np.ndarray) -> sp.csr_matrix:
    """[Xs | D] as canonical float32 CSR (exact zeros of D are not stored)."""
    X = sp.hstack([sp.csr_matrix(Xs, dtype=np.float32), sp.csr_matrix(D)], format="csr", dtype=np.float32)
    X.sum_duplicates()
    X.sort_indices()
    return X


def combine(Xs: sp.csr_matrix, D: Any, params: DenseSparseParams) -> tuple[sp.csr_matrix, np.ndarray]:
    """Training columns [Xs' / sqrt(lambda_s) | D' / sqrt(lambda_d)] (' = normalised if
    asked) and ``fscale`` (per column: the weight of the original feature is u * fscale)."""
    D = check_dense(D, Xs.shape[0])
    Xs = _l2_rows_sparse(Xs) if params.normalize_sparse else sp.csr_matrix(Xs, dtype=np.float32)
    if params.normalize_dense:
        D = _l2_rows_dense(D)
    cs = 1.0 / math.sqrt(params.sparse_reg)
    cd = 1.0 / math.sqrt(params.dense_reg)
    X = _hstack(Xs * np.float32(cs) if cs != 1.0 else Xs, D * np.float32(cd) if cd != 1.0 else D)
    fscale = np.concatenate([np.full(Xs.shape[1], cs), np.full(D.shape[1], cd)])
    return X, fscale


def prediction_features(Xs: sp.csr_matrix, D: Any, params: DenseSparseParams, n_sparse: int,
                        n_dense: int) -> sp.csr_matrix:
    """[Xs | D] in the model's original feature space (normalised as in training)."""
    Xs = sp.csr_matrix(Xs, dtype=np.float32)
    if Xs.shape[1] > n_sparse:
        raise DataFormatError(f"the sparse features have {Xs.shape[1]} columns, the model was trained on {n_sparse}")
    if Xs.shape[1] < n_sparse:
        Xs = sp.csr_matrix((Xs.data, Xs.indices, Xs.indptr), shape=(Xs.shape[0], n_sparse))
    D = check_dense(D, Xs.shape[0], n_dense)
    if params.normalize_sparse:
        Xs = _l2_rows_sparse(Xs)
    if params.normalize_dense:
        D = _l2_rows_dense(D)
    return _hstack(Xs, D)


def svd_embedding(X: sp.csr_matrix, dim: int, *, X_other: sp.csr_matrix | None = None, seed: int = 0):
    """A dense embedding made from the data itself: the rows of X projected on the top
    ``dim`` right singular vectors of X (truncated SVD, ``scipy.sparse.linalg.svds``).
    Returns (embedding of X, embedding of X_other or None), float32."""
    from scipy.sparse.linalg import svds

    k = int(min(dim, min(X.shape) - 1))
    if k < 1:
        raise ParameterError(f"an SVD embedding needs dim >= 1 and a matrix larger than 1 x 1, got {X.shape}")
    rng = np.random.default_rng(seed)
    v0 = rng.standard_normal(min(X.shape))
    _, _, vt = svds(sp.csr_matrix(X, dtype=np.float64), k=k, v0=v0)
    V = vt.T.astype(np.float32)
    E = np.asarray(X @ V, dtype=np.float32)
    Eo = None if X_other is None else np.asarray(X_other @ V, dtype=np.float32)
    return E, Eo
