"""Top-k prediction, streaming over shards, dense scores and preprocessing."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from headstart.errors import DataFormatError, ModelFormatError, ParameterError
from headstart.model import ModelWriter, OvAModel, Preprocessing, load_model, save_model
from headstart.params import TrainParams
from headstart.prediction import (apply_preprocessing, decision_function, fit_preprocessing, merge_topk,
                                  predict_above, predict_topk, predict_topk_streaming)
from headstart.prediction import topk as topk_module

#: how the kernel scores a row (module setting): every row dense (all labels filled and
#: scanned, as before issue 12), every row sparse (touched labels + intercept order), or
#: the automatic choice per row
PATHS = {"dense": {"_DENSE_RATIO": 0.0}, "sparse": {"_DENSE_RATIO": float("inf")}, "auto": {}}


@contextlib.contextmanager
def scoring_path(name):
    old = {key: getattr(topk_module, key) for key in PATHS[name]}
    for key, v in PATHS[name].items():
        setattr(topk_module, key, v)
    try:
        yield
    finally:
        for key, v in old.items():
            setattr(topk_module, key, v)


def topk_all_paths(*args, **kw):
    """predict_topk on every path; asserts they agree bit for bit and returns the result."""
    out = {}
    for name in PATHS:
        with scoring_path(name):
            out[name] = predict_topk(*args, **kw)
    for name in PATHS:
        np.testing.assert_array_equal(out[name][0], out["dense"][0], err_msg=name)
        np.testing.assert_array_equal(out[name][1], out["dense"][1], err_msg=name)
    return out["dense"]


def above_all_paths(*args, **kw):
    """predict_above on every path; asserts they agree exactly and returns the result."""
    out = {}
    for name in PATHS:
        with scoring_path(name):
            out[name] = predict_above(*args, **kw)
    for name in PATHS:
        assert (out[name] != out["dense"]).nnz == 0, name
        np.testing.assert_array_equal(out[name].indptr, out["dense"].indptr, err_msg=name)
        np.testing.assert_array_equal(out[name].indices, out["dense"].indices, err_msg=name)
    return out["dense"]


def previous_predictor(model, X, k):
    """The predictor before issue 12, step by step in numpy: per row a float64 buffer of all
    labels set to the intercepts, each feature of the row in order adding ``v * W[:, f]``,
    rounded to float32; ranked by score, then lower label id.  Same float64 operations in
    the same order per label, so it must agree bit for bit."""
    pred = topk_module.prepare(model)
    X = sp.csr_matrix(X, dtype=np.float32)
    n, L = X.shape[0], pred.num_labels
    labels = np.full((n, k), -1, np.int32)
    scores = np.full((n, k), -np.inf, np.float32)
    ids = np.arange(L)
    for i in range(n):
        buf = pred.intercept.copy()
        for p in range(X.indptr[i], X.indptr[i + 1]):
            f, v = X.indices[p], np.float64(X.data[p])
            rows, w = pred.column(f)
            buf[rows] += v * w.astype(np.float64)
        keep = buf != -np.inf
        s = buf[keep].astype(np.float32)
        order = np.lexsort((ids[keep], -s))[:k]
        labels[i, :len(order)] = ids[keep][order] + pred.first_label
        scores[i, :len(order)] = s[order]
    return labels, scores


def exact_model(seed=0, num_labels=40, n_features=30, density=0.3, first_label=0, label_space=None, tfidf=False,
                normalize=False):
    """Weights, intercepts on a coarse dyadic grid: every score is exact, so ties abound."""
    rng = np.random.default_rng(seed)
    w = sp.random(num_labels, n_features, density=density, format="csr", random_state=rng,
                  data_rvs=lambda n: rng.integers(-8, 9, size=n) / 4.0).astype(np.float32)
    b = (rng.integers(-4, 5, size=num_labels) / 2.0).astype(np.float32)
    idf = rng.random(n_features).astype(np.float32) if tfidf else None
    return OvAModel(weights=w, intercept=b, n_features=n_features, label_space=label_space or first_label + num_labels,
                    first_label=first_label, params=TrainParams(tfidf=tfidf, normalize=normalize),
                    preprocessing=Preprocessing(normalize=normalize, idf=idf))


def exact_X(seed=1, n=50, n_features=30, density=0.2):
    rng = np.random.default_rng(seed)
    return sp.random(n, n_features, density=density, format="csr", random_state=rng,
                     data_rvs=lambda m: rng.integers(1, 4, size=m).astype(float)).astype(np.float32)


def reference_topk(W, b, X, k, first_label=0, exclude=()):
    """Dense numpy reference: float64 scores rounded to float32, ranked by (-score, label)."""
    W = W.toarray() if sp.issparse(W) else np.asarray(W)
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    S = (X.astype(np.float64) @ W.astype(np.float64).T + np.asarray(b, np.float64)).astype(np.float32)
    n, L = S.shape
    labels = np.full((n, k), -1, np.int32)
    scores = np.full((n, k), -np.inf, np.float32)
    ids = np.arange(L)
    keep = np.ones(L, bool)
    for a, z in exclude:
        keep[max(a - first_label, 0):max(z - first_label, 0)] = False
    for i in range(n):
        cand = ids[keep]
        order = np.lexsort((cand, -S[i, cand]))[:k]
        labels[i, :len(order)] = cand[order] + first_label
        scores[i, :len(order)] = S[i, cand[order]]
    return labels, scores


# --------------------------------------------------------------------------- correctness
@pytest.mark.parametrize("k", [1, 3, 5, 40])
def test_topk_matches_dense_reference_exactly(k):
    model = exact_model()
    X = exact_X()
    labels, scores = topk_all_paths(model, X, k)
    ref_l, ref_s = reference_topk(model.weights, model.intercept, X, k)
    assert labels.dtype == np.int32 and scores.dtype == np.float32 and labels.shape == (50, k)
    np.testing.assert_array_equal(scores, ref_s)
    np.testing.assert_array_equal(labels, ref_l)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), num_labels=st.integers(1, 30), n_features=st.integers(1, 20),
       n=st.integers(0, 20), k=st.integers(1, 35), density=st.floats(0, 1), first_label=st.integers(0, 3),
       chunk_rows=st.one_of(st.none(), st.integers(1, 7)), threads=st.integers(1, 3))
def test_topk_property(seed, num_labels, n_features, n, k, density, first_label, chunk_rows, threads):
    model = exact_model(seed, num_labels, n_features, density, first_label=first_label)
    X = exact_X(seed + 1, n, n_features, density)
    labels, scores = topk_all_paths(model, X, k, chunk_rows=chunk_rows, threads=threads)
    ref_l, ref_s = reference_topk(model.weights, model.intercept, X, k, first_label)
    np.testing.assert_array_equal(labels, ref_l)
    np.testing.assert_array_equal(scores, ref_s)


def test_topk_continuous_values():
    rng = np.random.default_rng(5)
    W = sp.random(300, 200, density=0.05, format="csr", dtype=np.float32, random_state=rng)
    W.data -= 0.5
    b = rng.normal(size=300).astype(np.float32)
    X = sp.random(80, 200, density=0.1, format="csr", dtype=np.float32, random_state=rng)
    labels, scores = predict_topk((W, b), X, 10)
    S = X.toarray().astype(np.float64) @ W.toarray().T.astype(np.float64) + b
    np.testing.assert_allclose(scores, np.take_along_axis(S, labels, 1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(scores, -np.sort(-S, axis=1)[:, :10], rtol=1e-6, atol=1e-6)
    assert np.all(np.diff(scores, axis=1) <= 0)


def test_ties_broken_by_lower_label():
    row = sp.csr_matrix(np.array([[1.0, 0.0, 2.0]], np.float32))
    W = sp.vstack([row, row * 3, row, row, row * 3, row]).tocsr()
    b = np.array([0, -3, 0, 1, -3, 0], np.float32)  # scores 3, 6, 3, 4, 6, 3
    X = sp.csr_matrix(np.array([[1, 1, 1], [0, 5, 0]], np.float32))
    labels, scores = predict_topk((W, b, 100), X, 6)
    assert labels[0].tolist() == [101, 104, 103, 100, 102, 105]
    assert scores[0].tolist() == [6, 6, 4, 3, 3, 3]
    # all-zero row: intercepts only; 0 = 0 = 0 tie resolved by label id
    assert labels[1].tolist() == [103, 100, 102, 105, 101, 104]


@pytest.mark.parametrize("zero_intercepts", [False, True])
def test_sparse_model_with_intercepts_every_path(zero_intercepts):
    """Many labels, few weights per row: labels untouched by a row score their intercept and
    must be merged in (a label with a high intercept and no weight on the row's features
    still wins); ties on the dyadic grid broken by label id; excluded labels never appear."""
    rng = np.random.default_rng(11)
    L, d = 5000, 400
    W = sp.random(L, d, density=0.004, format="csr", random_state=rng,
                  data_rvs=lambda n: rng.integers(-8, 9, size=n) / 4.0).astype(np.float32)
    b = (rng.integers(-6, 3, size=L) / 2.0).astype(np.float32)
    b[rng.choice(L, 5, replace=False)] = 3.0       # strong labels that most rows do not touch
    b[rng.choice(L, 50, replace=False)] = -0.0     # -0.0 == 0.0: a tie, broken by label id
    if zero_intercepts:
        b[:] = 0
    model = OvAModel(weights=W, intercept=b, n_features=d, label_space=L + 7, first_label=7,
                     missing_ranges=[(7, 20), (900, 1400)], params=TrainParams())
    X = exact_X(seed=4, n=300, n_features=d, density=0.01)
    X = sp.vstack([X, sp.csr_matrix((2, d), dtype=np.float32)]).tocsr()   # rows without features
    for k in (1, 5, 37):
        labels, scores = topk_all_paths(model, X, k, threads=2)
        ref_l, ref_s = reference_topk(W, b, X, k, first_label=7, exclude=[(7, 20), (900, 1400)])
        np.testing.assert_array_equal(labels, ref_l)
        np.testing.assert_array_equal(scores, ref_s)
    prepared = topk_module.prepare(model)   # the reusable scoring form gives the same result
    for got, ref in zip(predict_topk(prepared, X, 37), (labels, scores)):
        np.testing.assert_array_equal(got, ref)


def test_thresholded_labels_of_a_sparse_model_on_every_path():
    """Labels above a threshold, scored sparsely (touched labels, plus the untouched ones
    whose intercept alone passes): the same labels, in order, and scores as the dense
    scores' test, for one threshold and per-label ones, with excluded labels never set,
    rows without features, thresholds equal to intercepts and scores (dyadic grid)."""
    rng = np.random.default_rng(12)
    L, d = 3000, 300
    W = sp.random(L, d, density=0.005, format="csr", random_state=rng,
                  data_rvs=lambda n: rng.integers(-8, 9, size=n) / 4.0).astype(np.float32)
    b = (rng.integers(-6, 3, size=L) / 2.0).astype(np.float32)
    b[rng.choice(L, 40, replace=False)] = 2.0      # pass a threshold of 0 untouched
    model = OvAModel(weights=W, intercept=b, n_features=d, label_space=L + 3, first_label=3,
                     missing_ranges=[(3, 10), (500, 800)], params=TrainParams())
    X = exact_X(seed=5, n=200, n_features=d, density=0.02)
    X = sp.vstack([X, sp.csr_matrix((2, d), dtype=np.float32)]).tocsr()
    S = decision_function(model, X).astype(np.float64)
    per_label = np.full(L + 3, 0.5)
    per_label[3:] = rng.integers(-4, 5, size=L) / 2.0
    for threshold in (0.0, -0.5, 2.0, per_label):
        Y = above_all_paths(model, X, threshold, threads=2, chunk_rows=64, return_scores=True)
        t = np.broadcast_to(np.asarray(threshold, np.float64), (L + 3,))[3:]
        assert np.isneginf(S[:, :7]).all() and np.isneginf(S[:, 497:797]).all()   # excluded
        np.testing.assert_array_equal(Y.toarray()[:, 3:], np.where(S > t, S, 0.0))
        assert Y.has_canonical_format and Y.nnz == (S > t).sum()   # a score of 0 above t is stored


def _shared_data(name):
    for root in (Path(__file__).resolve().parent.parent / "data", Path(__file__).resolve().parents[2] / "shared" / "data",
                 Path("/work/shared/data")):
        if (root / name / "train.txt.gz").is_file():
            return root / name
    pytest.skip(f"data set {name} not present")


@pytest.mark.parametrize("name,labels", [("bibtex", None), ("debian-deps", (0, 1500))])
def test_trained_models_same_topk_on_every_path(name, labels):
    """Models trained on real data (aop, pruned, with intercepts): the sparse and automatic
    paths give exactly the dense predictor's labels, scores and tie order."""
    from headstart import OvAClassifier
    from headstart.io import read_xmc

    ddir = _shared_data(name)
    X, Y = read_xmc(ddir / "train.txt.gz")
    Xt, _ = read_xmc(ddir / "test.txt.gz")
    a, n = labels if labels else (0, None)
    clf = OvAClassifier(init="aop", threads=2, prune=0.01).fit(X, Y, first_label=a, num_labels=n)
    Xt = Xt[:1500]
    labels, scores = topk_all_paths(clf.model_, Xt, 5, threads=2)
    ref_l, ref_s = previous_predictor(clf.model_, Xt, 5)
    np.testing.assert_array_equal(labels, ref_l)
    np.testing.assert_array_equal(scores, ref_s)
    topk_all_paths(clf.model_, Xt, 1, threads=1)


def test_dense_columns_score_as_the_sparse_scatter_did():
    """Weight columns set for at least half of the labels are stored dense and scored by a
    contiguous loop (embeddings, unpruned models): with continuous values, where the order
    of every sum shows in the last bits, top-k, dense scores and thresholded labels are
    exactly the feature-by-feature float64 sums of the sparse scatter, with excluded labels
    (a gap) never returned; and dense columns are no larger than their CSC entries."""
    rng = np.random.default_rng(5)
    L, d, n = 37, 24, 60
    W = rng.standard_normal((L, d)).astype(np.float32)
    fill = np.r_[np.ones(8), np.full(8, 0.8), np.full(8, 0.2)]       # full, >= half, < half
    W *= rng.random((L, d)) < fill
    W[:, 5] = 0.0
    W[np.arange(L) % 2 == 0, 6] = 0.0                                # 18 of 37: sparse
    W[np.arange(L) % 2 == 1, 7] = 0.0                                # 19 of 37: dense
    b = rng.standard_normal(L).astype(np.float32)
    model = OvAModel(weights=sp.csr_matrix(W), intercept=b, n_features=d, label_space=L + 3, first_label=3,
                     missing_ranges=[(10, 14)])
    pred = topk_module.prepare(model)
    counts = np.diff(sp.csc_matrix(W).indptr)
    np.testing.assert_array_equal(pred.dmap >= 0, (counts > 0) & (2 * counts >= L))
    assert 8 <= int(np.count_nonzero(pred.dmap >= 0)) < d and pred.dmap[7] >= 0 and pred.dmap[6] < 0
    assert pred.dcols.nbytes <= 8 * counts[pred.dmap >= 0].sum()
    X = rng.standard_normal((n, d)).astype(np.float32) * (rng.random((n, d)) < 0.7)
    labels, scores = topk_all_paths(model, X, 6, threads=2)
    # the reference from W itself: per row the intercepts, then each feature in order adds
    # v * w over the labels with a weight on it, in float64, rounded to float32
    Wc, Xc = sp.csc_matrix(W), sp.csr_matrix(X)
    S_ref = np.empty((n, L), dtype=np.float32)
    for i in range(n):
        buf = b.astype(np.float64)
        for p in range(Xc.indptr[i], Xc.indptr[i + 1]):
            f, v = Xc.indices[p], np.float64(Xc.data[p])
            a, z = Wc.indptr[f], Wc.indptr[f + 1]
            buf[Wc.indices[a:z]] += v * Wc.data[a:z].astype(np.float64)
        S_ref[i] = buf
    S_ref[:, 10 - 3:14 - 3] = -np.inf
    ref_l, ref_s = reference_topk(np.zeros((L, 1)), np.zeros(L), np.zeros((n, 1)), 6)   # shapes only
    for i in range(n):
        keep = np.flatnonzero(S_ref[i] != -np.inf)
        order = keep[np.lexsort((keep, -S_ref[i, keep]))][:6]
        ref_l[i], ref_s[i] = order + 3, S_ref[i, order]
    np.testing.assert_array_equal(labels, ref_l)
    np.testing.assert_array_equal(scores.view(np.uint32), ref_s.view(np.uint32))
    assert not np.isin(labels, np.arange(10, 14)).any()
    S = decision_function(model, X, threads=2)
    np.testing.assert_array_equal(S[:, np.r_[0:7, 11:L]].view(np.uint32), S_ref[:, np.r_[0:7, 11:L]].view(np.uint32))
    np.testing.assert_array_equal(np.take_along_axis(S, labels - 3, 1), scores)
    Y = predict_above(model, X, 0.5, threads=2)
    np.testing.assert_array_equal(Y.toarray()[:, 3:], (S > 0.5).astype(np.int32))


def _csc_scoring_form(W):
    """The scoring form as it was built until the direct conversion: a float32 CSC copy of
    the weights (repeats summed there), its dense columns split off it -- the reference."""
    wt = sp.csc_matrix(W, dtype=np.float32)
    if not wt.has_canonical_format:
        wt.sum_duplicates()
    L, F = wt.shape
    counts = np.diff(wt.indptr)
    dense = np.flatnonzero((counts > 0) & (counts >= 0.5 * L))
    dmap = np.full(F, -1, dtype=np.int64)
    dmap[dense] = np.arange(dense.size)
    dcols = np.zeros((dense.size, L), dtype=np.float32)
    for r, f in enumerate(dense):
        dcols[r, wt.indices[wt.indptr[f]:wt.indptr[f + 1]]] = wt.data[wt.indptr[f]:wt.indptr[f + 1]]
    keep = np.repeat(dmap < 0, counts)
    indptr = np.concatenate([[0], np.cumsum(np.where(dmap < 0, counts, 0))])
    return indptr, wt.indices[keep], wt.data[keep], dmap, dcols


@pytest.mark.parametrize("case", ["mixed", "float64", "repeats", "unsorted", "wide", "sparse", "dense", "empty"])
def test_scoring_form_is_built_as_the_csc_copy_built_it(case):
    """The feature-major scoring form is built straight from the label-major rows (no CSC
    copy of the whole model beside them, tests/test_robustness.py for the memory): its
    columns, labels, values (explicit zeros and -0.0 kept), dense columns and map are those
    the CSC copy gave, for float64 weights, repeated entries (summed in float32 in the CSC's
    order), unsorted rows and a feature space the weights hardly use."""
    rng = np.random.default_rng(11)
    L, d = 41, 30
    W = rng.standard_normal((L, d)).astype(np.float32)
    W *= rng.random((L, d)) < np.linspace(1.0, 0.05, d)               # dense to sparse columns
    W[3, :5] = 0.0
    W = sp.csr_matrix(W)
    W.data[::7] = 0.0                                                 # explicit zeros
    W.data[1::7] = -0.0
    if case == "float64":
        W = W.astype(np.float64) * (1 + 1e-9)
    elif case == "repeats":
        # every third entry of a row repeated twice more, at other values, after the row's own
        rows_i, rows_v = [], []
        for a, z in zip(W.indptr[:-1], W.indptr[1:]):
            rep = np.arange(a, z)[::3]
            rows_i.append(np.r_[W.indices[a:z], W.indices[rep], W.indices[rep]])
            rows_v.append(np.r_[W.data[a:z], W.data[rep] * np.float32(0.37), W.data[rep] * np.float32(1.3)])
        indptr = np.r_[0, np.cumsum([r.size for r in rows_i])]
        W = sp.csr_matrix((np.concatenate(rows_v), np.concatenate(rows_i), indptr), shape=W.shape)
        assert not W.has_canonical_format
    elif case == "unsorted":
        order = np.concatenate([np.arange(a, z)[::-1] for a, z in zip(W.indptr[:-1], W.indptr[1:])])
        W = sp.csr_matrix((W.data[order], W.indices[order], W.indptr), shape=W.shape)
        assert not W.has_canonical_format
    elif case == "wide":
        cols = np.sort(rng.choice(10 ** 6, d, replace=False))
        W = sp.csr_matrix((W.data, cols[W.indices], W.indptr), shape=(L, 10 ** 6))
    elif case == "sparse":
        W = sp.csr_matrix(W.multiply(rng.random(W.shape) < 0.2))
    elif case == "dense":
        W = sp.csr_matrix(np.where(W.toarray() == 0, 0.5, W.toarray()).astype(np.float32))
    elif case == "empty":
        W = sp.csr_matrix((L, d), dtype=np.float32)
    pred = topk_module.prepare((W, np.zeros(L, dtype=np.float32)))
    ref_W = W if pred.columns is None else pred.columns.compact(W)
    if case == "wide":
        assert pred.columns is not None and pred.dmap.shape == (d,)
    indptr, indices, data, dmap, dcols = _csc_scoring_form(ref_W)
    np.testing.assert_array_equal(pred.wt_indptr, indptr)
    np.testing.assert_array_equal(pred.wt_indices, indices)
    np.testing.assert_array_equal(pred.wt_data.view(np.uint32), data.astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(pred.dmap, dmap)
    np.testing.assert_array_equal(pred.dcols.view(np.uint32), dcols.view(np.uint32))
    assert pred.wt_indptr.dtype == np.int64 and pred.wt_indices.dtype == np.int32
    assert pred.wt_data.dtype == np.float32 and pred.dcols.dtype == np.float32
    if case in ("mixed", "dense"):
        assert dcols.shape[0] > 0 and (case == "dense" or indices.size > 0)


def test_features_the_model_never_uses_change_no_prediction():
    """medical's model and test rows spread over 10^8 feature ids: the predictor keeps
    its feature-major weights over the columns they use only (not 10^8 pointers), x's
    other features dropped, and gives the same labels and scores bit for bit -- top k on
    every path, dense scores and labels above a threshold."""
    from headstart import OvAClassifier
    from headstart.io import read_xmc

    ddir = _shared_data("medical")
    X, Y = read_xmc(ddir / "train.txt.gz")
    Xt, _ = read_xmc(ddir / "test.txt.gz")
    model = OvAClassifier(init="aop", threads=2).fit(X, Y).model_
    space = 10**8
    ids = np.sort(np.random.default_rng(1).choice(space, X.shape[1], replace=False))
    W = model.weights
    wide = OvAModel(weights=sp.csr_matrix((W.data, ids[W.indices], W.indptr), shape=(W.shape[0], space)),
                    intercept=model.intercept, n_features=space, label_space=model.label_space)
    # test rows: their features spread the same way, plus words no weight uses
    Xw = sp.csr_matrix((Xt.data, ids[Xt.indices], Xt.indptr), shape=(Xt.shape[0], space)).tolil()
    Xw[:, space - 1] = 1.0
    Xw = sp.csr_matrix(Xw)
    assert topk_module.prepare(wide).wt_indptr.size <= X.shape[1] + 1
    la, sa = topk_all_paths(model, Xt, 5, threads=2)
    lb, sb = topk_all_paths(wide, Xw, 5, threads=2)
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(sa, sb)
    np.testing.assert_array_equal(decision_function(model, Xt), decision_function(wide, Xw))
    assert (predict_above(model, Xt, 0.0) != predict_above(wide, Xw, 0.0)).nnz == 0


def test_padding_when_k_exceeds_labels():
    model = exact_model(num_labels=3, first_label=7, label_space=20)
    X = exact_X()
    labels, scores = predict_topk(model, X, 5)
    assert (labels[:, 3:] == -1).all() and np.isneginf(scores[:, 3:]).all()
    assert set(labels[:, :3].ravel()) == {7, 8, 9}
    empty = OvAModel(weights=sp.csr_matrix((0, 30), dtype=np.float32), intercept=np.zeros(0, np.float32),
                     n_features=30, label_space=0)
    labels, scores = predict_topk(empty, X, 2)
    assert (labels == -1).all() and np.isneginf(scores).all()
    labels, scores = predict_topk(model, X[:0], 4)
    assert labels.shape == (0, 4) and scores.shape == (0, 4)
    # a k far above the labels whose padding alone would take gigabytes: refused, not allocated
    with pytest.raises(ParameterError, match=r"k=200000000 is more than the model's 3 labels.*k <= 3"):
        predict_topk(model, X, 200_000_000)


@pytest.mark.parametrize("chunk_rows", [1, 2, 7, 49, 50, 1000])
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_chunking_and_threads_invariance(chunk_rows, threads):
    rng = np.random.default_rng(9)
    W = sp.random(120, 60, density=0.1, format="csr", dtype=np.float32, random_state=rng)
    b = rng.normal(size=120).astype(np.float32)
    X = sp.random(300, 60, density=0.1, format="csr", dtype=np.float32, random_state=rng)
    base = predict_topk((W, b), X, 7, threads=1)
    got = predict_topk((W, b), X, 7, chunk_rows=chunk_rows, threads=threads)
    np.testing.assert_array_equal(base[0], got[0])
    np.testing.assert_array_equal(base[1], got[1])
    small = predict_topk((W, b), X, 7, max_memory=3 * (64 + 24 * 6))  # about 3 rows per chunk
    np.testing.assert_array_equal(base[0], small[0])


def test_input_kinds():
    model = exact_model()
    X = exact_X()
    base = predict_topk(model, X, 5)
    for other in (X.toarray(), X.tocoo(), X.tocsc(), X.astype(np.float64), X.toarray().astype(np.float64)):
        got = predict_topk(model, other, 5)
        np.testing.assert_array_equal(base[0], got[0])
        np.testing.assert_array_equal(base[1], got[1])
    got = predict_topk(model.weights, X, 5)  # weights only: intercept 0
    ref = reference_topk(model.weights, np.zeros(40), X, 5)
    np.testing.assert_array_equal(got[0], ref[0])
    got = predict_topk(model.weights.toarray(), X, 5)
    np.testing.assert_array_equal(got[0], ref[0])


def test_feature_count_checks():
    model = exact_model(n_features=30)
    X = exact_X(n_features=30)
    fewer = X[:, :25]
    full = sp.hstack([fewer, sp.csr_matrix((X.shape[0], 5), dtype=np.float32)]).tocsr()
    np.testing.assert_array_equal(predict_topk(model, fewer, 5)[0], predict_topk(model, full, 5)[0])
    more = sp.hstack([X, sp.csr_matrix((X.shape[0], 2), dtype=np.float32)]).tocsr()
    with pytest.raises(ModelFormatError, match="X has 32 features but the model was trained on 30"):
        predict_topk(model, more, 5)
    with pytest.raises(ModelFormatError, match="32 features"):
        decision_function(model, more)


def test_bad_inputs():
    model = exact_model()
    X = exact_X()
    with pytest.raises(ParameterError, match="k must be"):
        predict_topk(model, X, 0)
    with pytest.raises(DataFormatError, match="2-D"):
        predict_topk(model, np.zeros(30), 5)
    bad = X.copy()
    bad.data[bad.indptr[3]] = np.nan
    col = bad.indices[bad.indptr[3]]
    with pytest.raises(DataFormatError, match=rf"X has a NaN or infinite value \(row 3, column {col}, value nan"):
        predict_topk(model, bad, 5, chunk_rows=2)   # row 3 is the second chunk's row 1
    with pytest.raises(TypeError, match="OvAModel"):
        predict_topk("model", X, 5)


# --------------------------------------------------------------------------- decision_function
def test_decision_function():
    model = exact_model(first_label=2, label_space=50)
    X = exact_X()
    S = decision_function(model, X, chunk_rows=7, threads=2)
    ref = (X.toarray() @ model.weights.toarray().T + model.intercept).astype(np.float32)
    np.testing.assert_array_equal(S, ref)
    labels, scores = predict_topk(model, X, 5)
    np.testing.assert_array_equal(np.take_along_axis(S, labels - 2, 1), scores)
    with pytest.raises(ParameterError, match="use predict_topk"):
        decision_function(model, X, max_memory=1000)


# --------------------------------------------------------------------------- labels above a threshold
@pytest.mark.parametrize("threshold", [0.0, -1.5, 0.75, 100.0])
@pytest.mark.parametrize("chunk_rows, threads", [(None, 1), (7, 2), (1, 3)])
def test_predict_above_is_the_thresholded_dense_scores(threshold, chunk_rows, threads):
    """On the dyadic grid many scores equal the threshold exactly: strictly above counts."""
    model = exact_model(first_label=2, label_space=50)
    X = exact_X()
    Y = above_all_paths(model, X, threshold, chunk_rows=chunk_rows, threads=threads)
    S = decision_function(model, X)
    assert sp.isspmatrix_csr(Y) and Y.shape == (X.shape[0], 50) and Y.dtype == np.int32
    assert Y.has_canonical_format and np.all(Y.data == 1)
    expect = np.zeros((X.shape[0], 50), dtype=np.int32)
    expect[:, 2:42] = S > threshold
    np.testing.assert_array_equal(Y.toarray(), expect)
    if threshold == 0.0:
        assert (S == 0).any()   # the boundary case occurs


def test_predict_above_edges(tmp_path):
    model = exact_model(num_labels=30, label_space=30)
    X = exact_X(n_features=30)
    # no rows, fewer columns, a gappy model
    assert predict_above(model, X[:0]).shape == (0, 30)
    np.testing.assert_array_equal(predict_above(model, X[:, :20]).toarray(),
                                  (decision_function(model, X[:, :20]) > 0).astype(np.int32))
    w = ModelWriter.create(tmp_path / "m", 30, 30, model.params)
    w.add_shard(0, model.weights[:10], model.intercept[:10])
    gappy = load_model(tmp_path / "m", allow_gaps=True)
    got = predict_above(gappy, X, -1e30).toarray()
    assert got[:, :10].all() and not got[:, 10:].any()
    with pytest.raises(ParameterError, match="threshold"):
        predict_above(model, X, float("nan"))
    with pytest.raises(ParameterError, match="n_columns"):
        predict_above(model, X, n_columns=10)


# --------------------------------------------------------------------------- merging / streaming
def test_merge_topk():
    la = np.array([[5, 1, -1]], np.int32)
    sa = np.array([[2.0, 1.0, -np.inf]], np.float32)
    lb = np.array([[0, 9]], np.int32)
    sb = np.array([[2.0, 1.0]], np.float32)
    labels, scores = merge_topk(la, sa, lb, sb, 4)
    assert labels.tolist() == [[0, 5, 1, 9]] and scores.tolist() == [[2, 2, 1, 1]]
    labels, scores = merge_topk(la[:, :1], sa[:, :1], lb[:, :0], sb[:, :0], 3)
    assert labels.tolist() == [[5, -1, -1]] and scores[0, 0] == 2 and np.isneginf(scores[0, 1:]).all()


@pytest.mark.parametrize("shard_size", [1, 3, 16, None])
@pytest.mark.parametrize("pre", [(False, False), (True, True), (False, True)])
def test_streaming_equals_whole(tmp_path, shard_size, pre):
    rng = np.random.default_rng(3)
    W = sp.random(50, 40, density=0.2, format="csr", dtype=np.float32, random_state=rng)
    W.data -= 0.5
    idf = rng.random(40).astype(np.float32) if pre[0] else None
    model = OvAModel(weights=W, intercept=rng.normal(size=50).astype(np.float32), n_features=40, label_space=50,
                     params=TrainParams(tfidf=pre[0], normalize=pre[1]),
                     preprocessing=Preprocessing(normalize=pre[1], idf=idf))
    X = sp.random(70, 40, density=0.2, format="csr", random_state=rng, dtype=np.float32) * 5
    save_model(model, tmp_path / "m", shard_size=shard_size)
    whole = predict_topk(load_model(tmp_path / "m"), X, 8)
    stream = predict_topk_streaming(tmp_path / "m", X, 8, chunk_rows=11, threads=2)
    np.testing.assert_array_equal(whole[0], stream[0])
    np.testing.assert_array_equal(whole[1], stream[1])
    direct = predict_topk(model, X, 8)
    np.testing.assert_array_equal(whole[0], direct[0])


def test_gappy_model_never_predicts_missing_labels(tmp_path):
    model = exact_model(num_labels=30, label_space=30)
    w = ModelWriter.create(tmp_path / "m", 30, 30, model.params)
    w.add_shard(0, model.weights[:10], model.intercept[:10])
    w.add_shard(20, model.weights[20:25], model.intercept[20:25])
    X = exact_X(n_features=30)
    with pytest.raises(ModelFormatError, match="incomplete"):
        predict_topk_streaming(tmp_path / "m", X, 5)
    loaded = load_model(tmp_path / "m", allow_gaps=True)
    got = predict_topk(loaded, X, 20)
    ref = reference_topk(model.weights, model.intercept, X, 20, exclude=[(10, 20), (25, 30)])
    np.testing.assert_array_equal(got[0], ref[0])
    assert (got[0][:, 15:] == -1).all()
    stream = predict_topk_streaming(tmp_path / "m", X, 20, allow_gaps=True)
    np.testing.assert_array_equal(got[0], stream[0])
    np.testing.assert_array_equal(got[1], stream[1])
    S = decision_function(loaded, X)
    assert np.isneginf(S[:, 10:20]).all() and np.isfinite(S[:, :10]).all()


# --------------------------------------------------------------------------- preprocessing
def test_fit_preprocessing_tfidf_by_hand():
    X = sp.csr_matrix(np.array([[1, 0, 3, 0], [0, 0, 1, 0], [2, 0, 0, 0], [1, 0, 1, 0]], np.float32))
    pre, Xt = fit_preprocessing(X, normalize=False, tfidf=True)
    idf = np.log([4 / 3, 1, 4 / 3, 1])
    idf[[1, 3]] = 0  # feature 1 and 3 never seen
    np.testing.assert_allclose(pre.idf, idf, rtol=1e-6)
    assert pre.idf.dtype == np.float32 and pre.normalize is False
    tf = np.where(X.toarray() > 0, 1 + np.log(np.maximum(X.toarray(), 1)), 0)
    np.testing.assert_allclose(Xt.toarray(), tf * idf, rtol=1e-6)
    assert X[0, 2] == 3  # input untouched


def test_tfidf_of_values_below_one_is_warned_about(caplog):
    """1 + log(tf) weighs a value below 1/e negatively: a present feature then counts for
    less than an absent one.  Such data (already weighted, real-valued) trains, with a
    warning that says so; counts pass silently (helper-38)."""
    import logging

    X = sp.csr_matrix(np.array([[0.1, 1.0], [0, 1.0], [0.5, 0]], np.float32))
    with caplog.at_level(logging.WARNING, logger="headstart"):
        _, Xt = fit_preprocessing(X, normalize=False, tfidf=True)
    assert Xt[0, 0] < 0
    assert "2 of the 4 stored values are below 1, 1 of them below 1/e and so weighted negatively" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="headstart"):
        fit_preprocessing(sp.csr_matrix(np.array([[1, 3], [2, 0]], np.float32)), normalize=False, tfidf=True)
    assert caplog.text == ""


def test_fit_and_apply_preprocessing_agree():
    rng = np.random.default_rng(2)
    X = sp.random(60, 25, density=0.3, format="csr", random_state=rng, dtype=np.float32)
    X.data = np.ceil(X.data * 5)
    for normalize, tfidf in [(False, False), (True, False), (False, True), (True, True)]:
        pre, Xt = fit_preprocessing(X, normalize, tfidf)
        assert (pre.idf is not None) == tfidf and pre.normalize == normalize
        again = apply_preprocessing(X, pre)
        np.testing.assert_allclose(again.toarray(), Xt.toarray(), rtol=1e-6)
        chunked = sp.vstack([apply_preprocessing(X[a:a + 7], pre) for a in range(0, 60, 7)])
        np.testing.assert_allclose(chunked.toarray(), Xt.toarray(), rtol=1e-6)
        dense = apply_preprocessing(X.toarray(), pre)
        assert isinstance(dense, np.ndarray)
        np.testing.assert_array_equal(dense, Xt.toarray())  # the same arithmetic as the sparse path
        pre_d, Xt_d = fit_preprocessing(X.toarray(), normalize, tfidf)
        np.testing.assert_array_equal(Xt_d, Xt.toarray())
        if normalize:
            norms = np.sqrt(np.asarray(Xt.multiply(Xt).sum(axis=1)).ravel())
            nonzero = np.asarray((X != 0).sum(axis=1)).ravel() > 0
            if tfidf:
                nonzero &= np.asarray((Xt != 0).sum(axis=1)).ravel() > 0
            np.testing.assert_allclose(norms[nonzero], 1, rtol=1e-5)
    assert apply_preprocessing(X, Preprocessing()) is X


def test_preprocessing_fewer_columns_and_errors():
    X = sp.csr_matrix(np.array([[1, 2, 0], [0, 1, 1]], np.float32))
    pre, _ = fit_preprocessing(X, True, True)
    part = apply_preprocessing(X[:, :2], pre)
    assert part.shape == (2, 2)
    with pytest.raises(DataFormatError, match="X has 4 features but the tf-idf weights cover 3"):
        apply_preprocessing(sp.csr_matrix((1, 4), dtype=np.float32), pre)
    with pytest.raises(DataFormatError, match=r"instance 1 \(counting from 0\): .*feature 2 has value -1.0") as e:
        fit_preprocessing(sp.csr_matrix(np.array([[1, 0, 0], [0, 1, -1]], np.float32)), False, True)
    assert e.value.row == 1
    with pytest.raises(DataFormatError, match="instance 0 .*feature 1") as e:
        apply_preprocessing(np.array([[1, -2, 0]], np.float32), pre)
    assert e.value.row == 0
    # negative values are fine without tf-idf
    pre2, Xn = fit_preprocessing(np.array([[3, -4]], np.float32), True, False)
    np.testing.assert_allclose(Xn, [[0.6, -0.8]])


def test_predict_applies_model_preprocessing():
    rng = np.random.default_rng(4)
    X = sp.random(40, 20, density=0.3, format="csr", random_state=rng, dtype=np.float32)
    X.data = np.ceil(X.data * 4)
    pre, Xt = fit_preprocessing(X, normalize=True, tfidf=True)
    W = sp.random(15, 20, density=0.4, format="csr", random_state=rng, dtype=np.float32)
    b = np.zeros(15, np.float32)
    model = OvAModel(weights=W, intercept=b, n_features=20, label_space=15, preprocessing=pre)
    got = predict_topk(model, X, 4, chunk_rows=6)
    ref = predict_topk((W, b), Xt, 4)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-6)
    raw = predict_topk(model, Xt, 4, preprocess=False)
    np.testing.assert_array_equal(raw[0], ref[0])


def test_a_dense_array_with_fewer_columns_is_refused_not_padded():
    """Sparse rows may lack the model's last features (svmlight files whose highest id
    does not occur); a dense array's width is its feature space, so a 2-column array for
    a 3-feature model is other features.  The CLI refused it; predict_topk (library and
    estimator) padded it with a zero column and ranked silently (helper-78)."""
    from headstart import OvAClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)).astype(np.float32)
    Y = sp.csr_matrix(np.stack([X[:, 0] > 0, X[:, 1] > 0], axis=1).astype(np.float32))
    clf = OvAClassifier(threads=1).fit(X, Y)
    with pytest.raises(ModelFormatError, match="dense array of 2 columns .* 3 features"):
        predict_topk(clf.model_, X[:, 1:], k=1)
    with pytest.raises(DataFormatError, match="X has 2 features, but OvAClassifier is expecting 3"):
        clf.predict_topk(X[:, 1:], k=1)
    # sparse rows with fewer columns stay padded, as before
    narrow = sp.csr_matrix(X[:, :2])
    wide = sp.hstack([narrow, sp.csr_matrix((60, 1), dtype=np.float32)]).tocsr()
    np.testing.assert_array_equal(clf.predict_topk(narrow, k=2)[0], clf.predict_topk(wide, k=2)[0])
    np.testing.assert_array_equal(predict_topk(clf.model_, narrow, k=2)[0], predict_topk(clf.model_, wide, k=2)[0])


def test_estimator_boundary_mends_of_helper_109(tmp_path):
    """Big-endian sparse X predicts as fit reads it; a 0-d array threshold is a number;
    an unknown keyword, a threshold with more than two classes or a vector of them for
    two, a progress that is no callable, a save under a file and scores that overflow are
    refused in the estimator's terms."""
    import headstart
    from headstart.errors import DataFormatError, ModelFormatError, ParameterError

    rng = np.random.default_rng(1)
    X = rng.random((40, 12)) * (rng.random((40, 12)) < 0.5)
    Y = (rng.random((40, 5)) < 0.3).astype(int)
    clf = headstart.OvAClassifier(threads=1).fit(X, Y)
    Xs = sp.csr_matrix(X)
    Xbe = sp.csr_matrix((Xs.data.astype(">f8"), Xs.indices, Xs.indptr), shape=Xs.shape)
    assert (clf.predict(Xbe) != clf.predict(X)).nnz == 0
    assert (clf.predict(X, threshold=np.array(0.1)) != clf.predict(X, threshold=0.1)).nnz == 0
    with pytest.raises(TypeError, match="'foo'; prediction takes"):
        clf.predict(X, foo=1)
    with pytest.raises(ParameterError, match="progress must be a callable"):
        headstart.OvAClassifier(threads=1).fit(X, Y, progress=1)
    three = headstart.OvAClassifier(threads=1).fit(X, rng.integers(0, 3, 40))
    with pytest.raises(ParameterError, match="with 3 classes predict returns the class of the largest score"):
        three.predict(X, threshold=0.5)
    two = headstart.OvAClassifier(threads=1).fit(X, rng.integers(0, 2, 40))
    with pytest.raises(ParameterError, match="must be one number"):
        two.predict(X, threshold=np.zeros(40))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ModelFormatError, match="afile is not a directory"):
        clf.save(tmp_path / "afile" / "m")
    big = X[:3].copy()
    big[1] = 3.4e38
    with pytest.raises(DataFormatError, match="instance 1 .*scores of this instance are not finite"):
        clf.predict_topk(big, 3)
