"""Shortlisted training (headstart.shortlist): sub-problems, the shortlist file, the
first stage, dense + sparse features, prediction through candidates, sharded runs."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from headstart.cli.main import main
from headstart.errors import DataFormatError, ModelFormatError, ParameterError
from headstart.estimator import prepare_data
from headstart.io import read_predictions, read_xmc, write_xmc
from headstart.model.format import load_model, save_model
from headstart.model.manifest import read_manifest
from headstart.params import TrainParams
from headstart.prediction.topk import predict_topk
from headstart.shortlist import (DenseSparseParams, FirstStageParams, build_shortlist, candidates_to_shortlist,
                                 fit_shortlisted, predict_model, predict_model_dir, read_shortlist, recall,
                                 train_shortlisted, train_shortlisted_dir, write_shortlist)
from headstart.shortlist.api import model_features
from headstart.shortlist.candidates import FirstStage, keep_largest
from headstart.shortlist.predict import predict_candidates
from headstart.training.trainer import train_labels


@pytest.fixture(scope="module")
def bib(bibtex_dir):
    """The first 1200 training rows and 600 test rows of bibtex."""
    X, Y = read_xmc(bibtex_dir / "train.txt.gz")
    Xt, Yt = read_xmc(bibtex_dir / "test.txt.gz")
    return X[:1200], Y[:1200], Xt[:600], Yt[:600]


@pytest.fixture(scope="module")
def first(bib):
    X, Y, _, _ = bib
    return build_shortlist(X, Y, FirstStageParams(K=15), threads=2)


# --------------------------------------------------------------------------- sub-problems
def test_shortlist_of_every_instance_is_the_full_one_vs_all_model(bib):
    """With every instance shortlisted, each sub-problem is the full problem: the same
    objective values, iterations and weights as the core trainer.  (The core trainer is
    run without its locality renumbering, which only reorders sums: with it the values
    agree to rounding, and rounding can move the last Newton step.)"""
    X, Y, _, _ = bib
    p = TrainParams(threads=2, prune=0.0)
    data = prepare_data(X, Y, p)
    labels = np.arange(0, 40)
    Wf, bf, sf = train_labels(data.X, data.Y, p, labels, locality=False)
    every = sp.csc_matrix(np.ones(data.Y.shape, dtype=np.float32))
    Ws, bs, ss = train_shortlisted(data.X, data.Y, every, p, labels)
    for col in ("f_init", "f_final", "gnorm_zero", "tolerance", "gnorm_final"):
        np.testing.assert_allclose(ss[col], sf[col], rtol=1e-10, err_msg=col)
    np.testing.assert_array_equal(ss["iterations"], sf["iterations"])
    np.testing.assert_array_equal(ss["rows"], X.shape[0])
    np.testing.assert_allclose(Ws.toarray(), Wf.toarray(), atol=1e-6)
    np.testing.assert_allclose(bs, bf, atol=1e-6)


def test_labels_trained_on_positives_only_are_said(bib, caplog):
    """A label whose shortlist holds none of its negatives learns w = 0 and bias +1 and
    scores +1 wherever it is a candidate; said with the labels (helper-59: silent, 120 of
    debian-deps' labels with the default first stage)."""
    import logging

    from headstart.shortlist.api import fit_shortlisted

    X, Y, _, _ = bib
    Y = sp.csc_matrix(Y)
    S = sp.lil_matrix(Y.shape, dtype=np.float32)
    for j in range(6):                       # labels 0-5 get one negative each, 6-9 none
        S[np.flatnonzero(Y[:, j].toarray().ravel() == 0)[0], j] = 1
    with caplog.at_level(logging.WARNING, logger="headstart"):
        model, stats = fit_shortlisted(X, Y, TrainParams(threads=1), S.tocsc(), num_labels=10)
    assert "4 label(s) had no negative among their shortlisted rows" in caplog.text and ": 6, 7, 8, 9;" in caplog.text
    assert np.all(model.weights[6:].toarray() == 0) and np.allclose(model.intercept[6:], 1.0)


def test_what_a_dense_part_does_not_offer_is_refused_before_any_work(bib, first, tmp_path):
    """With separate regularisation scales only L2 and prune are exact; refused by the
    preparation, so nothing is written and no Dask worker gets the data first (helper-59);
    with both scales 1 the combined problem is an ordinary one, and L1 trains."""
    from headstart.errors import ParameterError
    from headstart.shortlist.api import fit_shortlisted, prepare_shortlisted

    X, Y, _, _ = bib
    D = np.random.default_rng(0).normal(size=(X.shape[0], 3)).astype(np.float32)
    scaled = DenseSparseParams(dense_reg=4.0)
    for p, words in ((TrainParams(regularizer="l1"), "need regularizer 'l2'"),
                     (TrainParams(sparsify=0.01), "need sparsify = 0")):
        with pytest.raises(ParameterError, match=words):
            prepare_shortlisted(X, Y, p, first.shortlist, dense=D, dense_params=scaled, num_labels=3)
        with pytest.raises(ParameterError, match=words):
            train_shortlisted_dir(X, Y, p, first.shortlist, tmp_path / "m", dense=D, dense_params=scaled,
                                  num_labels=3)
        assert not (tmp_path / "m").exists()
    model, _ = fit_shortlisted(X, Y, TrainParams(regularizer="l1", threads=1), first.shortlist, dense=D, num_labels=3)
    assert model.num_labels == 3


def test_sub_problem_is_positives_plus_shortlist(bib):
    """A label's problem has exactly its positives and its shortlisted instances as rows,
    and the model does not depend on threads or chunking."""
    X, Y, _, _ = bib
    p = TrainParams(threads=1)
    data = prepare_data(X, Y, p)
    rng = np.random.default_rng(0)
    S = sp.csc_matrix((rng.random(data.Y.shape) < 0.05).astype(np.float32))
    S.sort_indices()
    W1, b1, s1 = train_shortlisted(data.X, data.Y, S, p, np.arange(30), chunk_size=7)
    W2, b2, s2 = train_shortlisted(data.X, data.Y, S, p.replace(threads=2), np.arange(30))
    want = [np.union1d(data.Y[:, j].indices, S[:, j].indices).size for j in range(30)]
    np.testing.assert_array_equal(s1["rows"], want)
    assert (W1 != W2).nnz == 0 and np.array_equal(b1, b2)


# --------------------------------------------------------------------------- shortlist file
def _write(path, text):
    path.write_text(text)
    return path


def test_shortlist_file_round_trip(tmp_path):
    M = sp.csr_matrix(np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0]], dtype=np.float32))
    for name in ("s.txt", "s.txt.gz"):
        write_shortlist(tmp_path / name, M)
        got = read_shortlist(tmp_path / name, n_instances=3, n_labels=3)
        assert got.format == "csc" and (got != M).nnz == 0
    # the DiSMEC++ conventions: blank and '#' lines are skipped, values 1 in any spelling
    f = _write(tmp_path / "c.txt", "3 3\n# comment\n0:1 2:1.0\n\n \n1:1e0\n")
    assert (read_shortlist(f) != M).nnz == 0


@pytest.mark.parametrize("body, line, col, token, words", [
    ("0:1\n1:1 7:1\n2:1\n", 3, 5, "7:1", "out of range"),
    ("0:1\n1:1\n2:0.5\n", 4, 1, "2:0.5", "must be 1"),
    ("0:1\n1:x\n2:1\n", 3, 1, "1:x", "expected a token"),
    ("0:1\n1:1 1:1\n2:1\n", 3, 5, "1:1", "twice"),
    ("0:1\n1:1\n2:1\n0:1\n", 5, 1, "0:1", "more instance lines"),
])
def test_shortlist_file_bad_tokens_are_refused_with_their_location(tmp_path, body, line, col, token, words):
    f = _write(tmp_path / "bad.txt", "3 4\n" + body)
    with pytest.raises(DataFormatError) as e:
        read_shortlist(f)
    err = e.value
    assert (err.path, err.line, err.column, err.token) == (str(f), line, col, token)
    assert words in str(err) and f"{f}:{line}:{col}:" in str(err)


def test_shortlist_file_that_disagrees_with_the_data_is_refused(tmp_path):
    f = _write(tmp_path / "s.txt", "3 4\n0:1\n1:1\n2:1\n")
    with pytest.raises(DataFormatError, match=r"s\.txt:1: the shortlist has 4 labels \(header\), the training "
                                              r"data has 5; refused"):
        read_shortlist(f, n_instances=3, n_labels=5)
    with pytest.raises(DataFormatError, match="3 instances .* has 2"):
        read_shortlist(f, n_instances=2, n_labels=4)
    short = _write(tmp_path / "short.txt", "3 4\n0:1\n\n1:1\n")
    with pytest.raises(DataFormatError, match="announces 3 instance lines but the file has 2"):
        read_shortlist(short)
    with pytest.raises(DataFormatError, match="header"):
        read_shortlist(_write(tmp_path / "h.txt", "3 4 5\n0:1\n"))


def test_cli_refuses_a_bad_shortlist_file_with_its_location(tmp_path, bibtex_dir, capsys):
    X, Y = read_xmc(bibtex_dir / "train.txt.gz")
    n, L = X.shape[0], Y.shape[1]
    lines = [f"{n} {L}"] + ["0:1"] * n
    lines[3] = f"1:1 {L + 2}:1"
    f = tmp_path / "sl.txt"
    f.write_text("\n".join(lines) + "\n")
    code = main(["shortlist-train", str(bibtex_dir / "train.txt.gz"), "--shortlist", str(f), "-o",
                 str(tmp_path / "m"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and f"{f}:4:5: label id out of range" in err and f"'{L + 2}:1'" in err
    assert not (tmp_path / "m").exists()


# --------------------------------------------------------------------------- first stage
def _recall_by_hand(cand, Y):
    Y = sp.csr_matrix(Y)
    hits = sum(len(set(Y[i].indices.tolist()) & set(cand[i].tolist())) for i in range(Y.shape[0]))
    return hits / Y.nnz


def test_recall_is_the_fraction_of_positives_among_the_candidates(bib, first):
    _, _, Xt, Yt = bib
    cand, _ = first.first_stage.candidates(Xt)
    assert cand.shape == (Xt.shape[0], 15)
    assert recall(cand, Yt) == pytest.approx(_recall_by_hand(cand, Yt), abs=1e-12)
    assert first.train_recall == pytest.approx(_recall_by_hand(first.train_candidates, bib[1]), abs=1e-12)


def test_exact_neighbours_match_brute_force(bib):
    """The inverted-index search returns the cosine top-k of numpy's dense product, the
    candidate labels are the neighbours' summed similarities, and a training row never
    counts itself."""
    X, Y, Xt, _ = bib
    fs = FirstStage.fit(X, Y, FirstStageParams(K=10, neighbours=7))
    ids, sims = fs.index.search(fs.rows[:50], 7, exclude_self=True)
    S = (fs.rows[:50] @ fs.rows.T).toarray()
    S[np.arange(50), np.arange(50)] = -np.inf
    for r in range(50):
        assert r not in ids[r]
        np.testing.assert_allclose(np.sort(sims[r])[::-1], np.sort(S[r])[::-1][:7], rtol=1e-5)
    cand, score = fs.candidates(X[:50], training=True)
    Yd = sp.csr_matrix(Y).toarray()
    for r in range(5):
        want = np.zeros(Y.shape[1])
        for i, s in zip(ids[r], sims[r]):
            want += s * Yd[i]
        top = sorted(np.flatnonzero(want), key=lambda j: (-want[j], j))[:10]
        got = {int(c): float(v) for c, v in zip(cand[r], score[r]) if v > 0}
        assert got == pytest.approx({int(j): want[j] for j in top}, rel=1e-6)


def test_exact_search_both_ways_of_scoring_match_brute_force():
    """Queries with a common feature are scored densely (one scan over the rows), those
    with rare features only through the rows they touch: both return numpy's top-k of
    the inner products (rows with a nonzero product only), the same ids, same values."""
    from headstart.shortlist.candidates import DENSE_SHARE, ExactIndex

    rng = np.random.default_rng(5)
    n, d, k = 400, 300, 6
    M = sp.random(n, d, density=0.01, random_state=6, format="lil", dtype=np.float32)
    M[: n // 2, 0] = rng.uniform(0.1, 1.0, (n // 2, 1)).astype(np.float32)   # a common feature
    M = sp.csr_matrix(M)
    M.sort_indices()
    df = np.bincount(M.indices, minlength=d)
    work = np.array([df[M.indices[M.indptr[r]:M.indptr[r + 1]]].sum() for r in range(n)])
    assert (work * DENSE_SHARE > n).any() and (work * DENSE_SHARE <= n).any()
    ids, sims = ExactIndex(M, threads=2).search(M, k, exclude_self=True)
    D = (M @ M.T).toarray().astype(np.float64)
    np.fill_diagonal(D, 0.0)
    for r in range(n):
        nz = np.flatnonzero(D[r])
        want = nz[np.lexsort((nz, -D[r, nz]))][:k]
        got = ids[r][ids[r] >= 0]
        assert got.tolist() == want.tolist()
        np.testing.assert_allclose(sims[r][: got.size], D[r, want], rtol=1e-6)


def test_first_stage_without_filling(tmp_path, bib):
    """fill=False: a row's candidates are exactly its neighbours' labels (at most K of
    them); fill=True tops them up with the most frequent labels.  Saved and loaded."""
    X, Y, _, _ = bib
    fs = FirstStage.fit(X, Y, FirstStageParams(K=40, neighbours=3, fill=False))
    ids, _ = fs.index.search(fs.rows, 3, exclude_self=True)
    cand, _ = fs.candidates(X, training=True)
    Yr = sp.csr_matrix(Y)
    short = 0
    for r in range(0, X.shape[0], 7):
        theirs = set(np.concatenate([Yr[i].indices for i in ids[r] if i >= 0]).tolist())
        got = set(cand[r][cand[r] >= 0].tolist())
        assert got <= theirs and (len(theirs) > 40 or got == theirs)
        short += len(got) < 40
    assert short > 0
    full, _ = FirstStage.fit(X, Y, FirstStageParams(K=40, neighbours=3)).candidates(X, training=True)
    assert (full >= 0).all() and (cand >= 0).sum() < full.size
    fs.save(tmp_path / "fs")
    again = FirstStage.load(tmp_path / "fs")
    assert again.params.fill is False and np.array_equal(again.candidates(X[:20])[0], fs.candidates(X[:20])[0])


def test_keep_largest_keeps_each_rows_largest_entries_by_magnitude():
    """Checked against a sort by hand, ties going to the earlier entry."""
    M = sp.csr_matrix(np.array([[0.5, -0.9, 0.1, 0.0, 0.3],
                                [0.2, 0.2, 0.2, 0.2, 0.0],
                                [0.0, 0.0, 0.7, 0.0, 0.0],
                                [0.0, 0.0, 0.0, 0.0, 0.0]], dtype=np.float32))
    got = keep_largest(M, 2).toarray()
    want = np.array([[0.5, -0.9, 0, 0, 0], [0.2, 0.2, 0, 0, 0], [0, 0, 0.7, 0, 0], [0, 0, 0, 0, 0]], np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(keep_largest(M, 5).toarray(), M.toarray())


def test_pruned_backend_is_the_exact_search_on_the_pruned_rows(bib):
    """The pruned index finds the exact cosine top-k of the query against the rows cut to
    their `keep` largest entries (numpy's dense product), and with `keep` at least the
    longest row it gives the exact back-end's candidates."""
    X, Y, Xt, _ = bib
    exact = FirstStage.fit(X, Y, FirstStageParams(K=10, neighbours=7))
    fs = FirstStage.fit(X, Y, FirstStageParams(K=10, neighbours=7, backend="pruned", keep=5))
    Q = exact.rows[:40]
    ids, sims = fs.index.search(Q, 7, exclude_self=True)
    S = (Q @ keep_largest(fs.rows, 5).T).toarray()
    S[np.arange(40), np.arange(40)] = -np.inf
    for r in range(40):
        assert r not in ids[r]
        top = np.sort(S[r][S[r] > 0])[::-1][:7]
        np.testing.assert_allclose(np.sort(sims[r][sims[r] > -np.inf])[::-1], top, rtol=1e-5)
    longest = int(np.diff(exact.rows.indptr).max())
    full = FirstStage.fit(X, Y, FirstStageParams(K=10, neighbours=7, backend="pruned", keep=longest))
    for training, Z in ((True, X), (False, Xt)):
        a, sa = exact.candidates(Z, training=training)
        b, sb = full.candidates(Z, training=training)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(sa, sb)


def test_pruned_first_stage_round_trips_with_its_keep(tmp_path, bib):
    X, Y, Xt, _ = bib
    fs = FirstStage.fit(X, Y, FirstStageParams(K=10, backend="pruned", keep=6))
    fs.save(tmp_path / "fs")
    back = FirstStage.load(tmp_path / "fs")
    assert back.params == fs.params
    assert np.array_equal(fs.candidates(Xt)[0], back.candidates(Xt)[0])
    # a first stage saved before `keep` existed loads with the default
    meta = json.loads((tmp_path / "fs" / "first_stage.json").read_text())
    del meta["keep"]
    (tmp_path / "fs" / "first_stage.json").write_text(json.dumps(meta))
    assert FirstStage.load(tmp_path / "fs").params.keep == FirstStageParams().keep
    with pytest.raises(ParameterError, match="keep"):
        FirstStageParams(backend="pruned", keep=0)


def test_training_shortlist_can_be_larger_than_the_prediction_candidates(tmp_path, bib):
    """train_K: the training shortlist holds each instance's train_K best candidates (the
    same ranking, longer), prediction still ranks among K; smaller train_K is refused;
    saved, loaded, and a file without the new keys loads as before."""
    X, Y, Xt, _ = bib
    r = build_shortlist(X, Y, FirstStageParams(K=8, train_K=20, neighbours=7), threads=2)
    wide, _ = FirstStage.fit(X, Y, FirstStageParams(K=20, neighbours=7)).candidates(X, training=True)
    assert r.train_candidates.shape == (X.shape[0], 20) and np.array_equal(r.train_candidates, wide)
    assert np.array_equal(r.shortlist.toarray(), candidates_to_shortlist(wide, Y.shape[1]).toarray())
    test, _ = r.first_stage.candidates(Xt)
    assert test.shape == (Xt.shape[0], 8)
    assert np.array_equal(test, r.first_stage.prediction_candidates(Xt, 5)[0])
    narrow, _ = FirstStage.fit(X, Y, FirstStageParams(K=20, neighbours=7)).candidates(Xt)
    assert np.array_equal(test, narrow[:, :8])           # the best 8 of the same ranking
    r.first_stage.save(tmp_path / "fs")
    back = FirstStage.load(tmp_path / "fs")
    assert back.params == r.first_stage.params and back.params.training_K == 20
    meta = json.loads((tmp_path / "fs" / "first_stage.json").read_text())
    for key in ("train_K", "random_negatives", "seed"):
        del meta[key]
    (tmp_path / "fs" / "first_stage.json").write_text(json.dumps(meta))
    assert FirstStage.load(tmp_path / "fs").params.training_K == 8
    with pytest.raises(ParameterError, match="train_K"):
        FirstStageParams(K=10, train_K=5)
    with pytest.raises(ParameterError, match="random_negatives"):
        FirstStageParams(random_negatives=-1)


def test_random_negatives_are_added_to_every_label_deterministically(bib):
    """random_negatives R: every label's shortlist is its candidates' instances plus R
    instances drawn uniformly (duplicates once), the same for the same seed; the recall
    is the candidates'."""
    from headstart.shortlist.candidates import add_random_negatives

    X, Y, _, _ = bib
    base = build_shortlist(X, Y, FirstStageParams(K=10), threads=2)
    r = build_shortlist(X, Y, FirstStageParams(K=10, random_negatives=6, seed=3), threads=2)
    again = build_shortlist(X, Y, FirstStageParams(K=10, random_negatives=6, seed=3), threads=2)
    other = build_shortlist(X, Y, FirstStageParams(K=10, random_negatives=6, seed=4), threads=2)
    assert r.train_recall == base.train_recall
    A, B = base.shortlist.tocsc(), r.shortlist.tocsc()
    added = np.diff(B.indptr) - np.diff(A.indptr)
    assert (added >= 0).all() and (added <= 6).all() and added.sum() > 0.8 * 6 * Y.shape[1]
    for j in range(Y.shape[1]):
        assert set(A[:, j].indices) <= set(B[:, j].indices)
    assert (B != again.shortlist).nnz == 0 and (B != other.shortlist).nnz > 0
    assert B.has_sorted_indices and set(np.unique(B.data)) == {1.0}
    # the draws are numpy's: rows uniform in [0, n), R per label in label order
    one = add_random_negatives(sp.csc_matrix((5, 3), dtype=np.float32), 4, seed=9)
    rows = np.random.default_rng(9).integers(0, 5, size=12, dtype=np.int64).reshape(3, 4)
    for j in range(3):
        assert set(one[:, j].indices) == set(rows[j])
    assert add_random_negatives(sp.csc_matrix((0, 3), dtype=np.float32), 4).nnz == 0


def test_shortlist_inversion(first, bib):
    cand = first.train_candidates
    S = candidates_to_shortlist(cand, bib[1].shape[1])
    for j in (0, 5, 100):
        assert set(S[:, j].indices.tolist()) == set(np.flatnonzero((cand == j).any(axis=1)).tolist())


def test_first_stage_save_load(tmp_path, bib, first):
    _, _, Xt, _ = bib
    first.first_stage.save(tmp_path / "fs")
    fs = FirstStage.load(tmp_path / "fs")
    a, _ = first.first_stage.candidates(Xt)
    b, _ = fs.candidates(Xt)
    assert np.array_equal(a, b)


# --------------------------------------------------------------------------- dense + sparse
def test_separate_regularisation_scales_equal_the_direct_objective():
    """Training on scaled columns and mapping back minimises
    0.5 ls |ws|^2 + 0.5 ld |wd|^2 + C sum sqhinge(y (xs.ws + xd.wd + b)): compared with
    scipy.optimize on that objective written out directly."""
    rng = np.random.default_rng(1)
    n, ds, dd = 80, 12, 4
    Xs = sp.random(n, ds, density=0.4, random_state=2, dtype=np.float32, format="csr")
    D = rng.standard_normal((n, dd)).astype(np.float32)
    y = (rng.random(n) < 0.3).astype(np.float32)
    Y = sp.csr_matrix(y[:, None])
    ls, ld, C = 2.0, 0.25, 1.0
    p = TrainParams(threads=1, prune=0.0, epsilon=1e-8, C=C)
    model, _ = fit_shortlisted(Xs, Y, p, np.ones((n, 1)), dense=D, dense_params=DenseSparseParams(ls, ld))
    w = np.concatenate([model.weights.toarray()[0], [model.intercept[0]]])
    A = np.hstack([Xs.toarray(), D, np.ones((n, 1))]).astype(np.float64)
    ys = 2 * y.astype(np.float64) - 1
    reg = np.concatenate([np.full(ds, ls), np.full(dd, ld), [0.0]])

    def f(v):
        m = np.maximum(0.0, 1 - ys * (A @ v))
        return 0.5 * np.sum(reg * v * v) + C * np.sum(m * m), reg * v - 2 * C * A.T @ (ys * m)

    ref = minimize(f, np.zeros(A.shape[1]), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15})
    assert f(w)[0] == pytest.approx(ref.fun, rel=1e-6)
    np.testing.assert_allclose(w, ref.x, atol=2e-3)


def test_dense_sparse_model_round_trip_predicts_identically(tmp_path, bib, first):
    X, Y, Xt, _ = bib
    rng = np.random.default_rng(3)
    V = rng.standard_normal((X.shape[1], 8)).astype(np.float32)
    D, Dt = np.asarray(X @ V), np.asarray(Xt @ V)
    dp = DenseSparseParams(sparse_reg=1.0, dense_reg=3.0, normalize_sparse=True, normalize_dense=True)
    model, _ = fit_shortlisted(X, Y, TrainParams(threads=2), first.shortlist, dense=D, dense_params=dp)
    assert model.n_features == X.shape[1] + 8 and model.extensions["dense"]["dense_reg"] == 3.0
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.extensions == model.extensions and (loaded.weights != model.weights).nnz == 0
    a = predict_model(model, Xt, first.first_stage, 5, dense=Dt)
    b = predict_model(loaded, Xt, first.first_stage, 5, dense=Dt)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    # the full predictor must not score the sparse columns alone
    with pytest.raises(ModelFormatError, match="dense"):
        predict_topk(loaded, Xt, 5)



def test_the_estimator_does_not_load_a_dense_model_and_warns_on_a_shortlisted_one(tmp_path, bib, first):
    """headstart.load gave a dense + sparse model as an OvAClassifier, which scored the
    sparse and dense columns side by side without their separate normalisation: other
    scores, silently (P@1 0.88 against 1.00 on a synthetic set).  Now refused with the way
    to predict it; a shortlisted model loads with a warning ('headstart predict' refuses it
    without --score-all-labels)."""
    import warnings

    import headstart

    X, Y, Xt, _ = bib
    D = np.asarray(X @ np.random.default_rng(5).standard_normal((X.shape[1], 4))).astype(np.float32)
    dp = DenseSparseParams(normalize_dense=True)
    model, _ = fit_shortlisted(X, Y, TrainParams(threads=2), first.shortlist, dense=D, dense_params=dp)
    save_model(model, tmp_path / "dense")
    with pytest.raises(ModelFormatError, match="dense \\+ sparse model .*predict_model"):
        headstart.load(tmp_path / "dense")
    sparse_only, _ = fit_shortlisted(X, Y, TrainParams(threads=2), first.shortlist)
    save_model(sparse_only, tmp_path / "sparse")
    with pytest.warns(UserWarning, match="shortlisted model ranks its first stage's candidates only"):
        clf = headstart.load(tmp_path / "sparse")
    assert clf.coef_.shape == (Y.shape[1], X.shape[1])
    model_dir = tmp_path / "plain"
    headstart.OvAClassifier(threads=2).fit(X[:, :50], Y[:, :3]).save(model_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        headstart.load(model_dir)


@pytest.mark.parametrize("opts", [dict(feature_transform="sqrt"),
                                  dict(hash_buckets=64, hash_functions=4, feature_transform="log-one-plus")])
def test_dense_sparse_model_keeps_and_applies_the_sparse_preprocessing(tmp_path, bib, first, opts):
    """A value transform or hashing of the sparse part is recorded in a dense + sparse
    model and applied to the sparse part at prediction: the same weights and the same
    predictions (after save / load) as a model trained on features preprocessed by hand.
    (They were dropped: the model predicted on untransformed values, or could not be read.)"""
    from headstart.prediction.preprocess import apply_preprocessing

    X, Y, Xt, _ = bib
    rng = np.random.default_rng(4)
    V = rng.standard_normal((X.shape[1], 6)).astype(np.float32)
    D, Dt = np.asarray(X @ V), np.asarray(Xt @ V)
    p = TrainParams(threads=2, **opts)
    model, _ = fit_shortlisted(X, Y, p, first.shortlist, dense=D)
    assert not model.preprocessing.is_identity
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    hand = lambda A: sp.csr_matrix(apply_preprocessing(sp.csr_matrix(A), model.preprocessing))  # noqa: E731
    manual, _ = fit_shortlisted(hand(X), Y, TrainParams(threads=2), first.shortlist, dense=D)
    assert (manual.weights != loaded.weights).nnz == 0 and np.array_equal(manual.intercept, loaded.intercept)
    cand, _ = first.first_stage.candidates(Xt)
    a = predict_model(loaded, Xt, first.first_stage, 5, dense=Dt, candidates=cand)
    b = predict_model(manual, hand(Xt), first.first_stage, 5, dense=Dt, candidates=cand)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    # the generic predictor on X in the model's space (model_features) applies nothing
    # more: the sparse preprocessing belongs to the sparse columns only (the dense ones,
    # negative here, were transformed or hashed with them)
    Xm = model_features(loaded, Xt, Dt)
    c = predict_topk(loaded, Xm, 5)
    d = predict_topk(manual, model_features(manual, hand(Xt), Dt), 5)
    assert np.array_equal(c[0], d[0]) and np.array_equal(c[1], d[1])
    F = (Xm @ loaded.weights.T).toarray() + loaded.intercept
    np.testing.assert_allclose(c[1][:, 0], F.max(axis=1), rtol=1e-5, atol=1e-5)


def test_a_hashed_sparse_model_predicts_on_the_raw_features(tmp_path, bib, first):
    """A shortlisted model of hashed features (no dense part) predicts on the raw
    features, which hashing takes to the model's width, as a model trained on features
    hashed by hand does -- loaded, and from its directory shard by shard (it was refused:
    'X has 1836 features, the model was trained on 256', so shortlist-predict could not
    use what shortlist-train --hash-buckets wrote)."""
    from headstart.prediction.preprocess import apply_preprocessing

    X, Y, Xt, _ = bib
    p = TrainParams(threads=2, hash_buckets=64, hash_functions=4, feature_transform="sqrt")
    out = tmp_path / "m"
    train_shortlisted_dir(X, Y, p, first.shortlist, out, shard_size=60)
    loaded = load_model(out)
    assert loaded.n_features == 256 and X.shape[1] > 256
    hand = lambda A: sp.csr_matrix(apply_preprocessing(sp.csr_matrix(A), loaded.preprocessing))  # noqa: E731
    manual, _ = fit_shortlisted(hand(X), Y, TrainParams(threads=2), first.shortlist)
    assert (manual.weights != loaded.weights).nnz == 0 and np.array_equal(manual.intercept, loaded.intercept)
    cand, _ = first.first_stage.candidates(Xt)
    want = predict_model(manual, hand(Xt), first.first_stage, 5, candidates=cand)
    for got in (predict_model(loaded, Xt, first.first_stage, 5, candidates=cand),
                predict_model_dir(out, Xt, first.first_stage, 5, candidates=cand),
                predict_model_dir(out, Xt, first.first_stage, 5)):     # the candidates of the raw features
        assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])


def test_a_dense_model_whose_preprocessing_was_not_recorded_is_said_so(tmp_path, bib, first, caplog):
    """A dense + sparse model written before its sparse preprocessing was recorded (the
    manifest's preprocessing is the identity, its params say sqrt): reading it warns."""
    X, Y, _, _ = bib
    D = np.asarray(X[:, :5].todense(), dtype=np.float32)
    model, _ = fit_shortlisted(X, Y, TrainParams(threads=2, feature_transform="sqrt"), first.shortlist, dense=D)
    save_model(model, tmp_path / "m")
    with caplog.at_level("WARNING", logger="headstart.model.manifest"):
        read_manifest(tmp_path / "m")
    assert "does not record" not in caplog.text
    path = tmp_path / "m" / "manifest.json"
    m = json.loads(path.read_text())
    m["preprocessing"]["transform"] = "identity"
    path.write_text(json.dumps(m))
    with caplog.at_level("WARNING", logger="headstart.model.manifest"):
        read_manifest(tmp_path / "m")
        read_manifest(tmp_path / "m")
    assert caplog.text.count("trained with --transform sqrt, which its manifest does not record") == 1


def test_candidate_prediction_equals_full_scores_restricted_to_candidates(bib, first):
    X, Y, Xt, _ = bib
    model, _ = fit_shortlisted(X, Y, TrainParams(threads=2), first.shortlist)
    cand, _ = first.first_stage.candidates(Xt)
    labels, scores = predict_model(model, Xt, first.first_stage, 3, candidates=cand)
    F = (sp.csr_matrix(Xt) @ model.weights.T).toarray() + model.intercept
    for r in range(0, Xt.shape[0], 37):
        c = cand[r][cand[r] >= 0]
        s = F[r, c].astype(np.float32)
        order = np.lexsort((c, -s))[:3]
        assert labels[r].tolist() == c[order].tolist()
        np.testing.assert_allclose(scores[r], s[order], rtol=1e-6, atol=1e-6)


def test_features_that_never_occur_change_nothing(tmp_path, bib, first):
    """bibtex's features spread over 10^8 ids (a hashed vocabulary's header): the first
    stage (both methods), shortlisted training (in memory and into a model directory)
    and prediction through the candidates give the same results, mapped, bit for bit.
    At that width every O(features) structure is avoided: the search index and the
    training kernel see the columns that occur, and prediction merges sorted lists
    instead of scattering x into a buffer of 10^8 features (shortlist.predict)."""
    X, Y, Xt, _ = bib
    space = 10**8
    ids = np.sort(np.random.default_rng(3).choice(space, X.shape[1], replace=False))

    def spread(M):
        M = sp.csr_matrix(M)
        return sp.csr_matrix((M.data, ids[M.indices].astype(np.int32), M.indptr), shape=(M.shape[0], space))

    Xw, Xtw = spread(X), spread(Xt)
    wide = build_shortlist(Xw, Y, FirstStageParams(K=15), threads=2)
    assert (wide.shortlist != first.shortlist).nnz == 0 and np.array_equal(wide.train_candidates, first.train_candidates)
    a = build_shortlist(X, Y, FirstStageParams(K=15, method="centroids"), threads=2)
    b = build_shortlist(Xw, Y, FirstStageParams(K=15, method="centroids"), threads=2)
    assert np.array_equal(a.train_candidates, b.train_candidates)
    p = TrainParams(threads=2)
    model, st = fit_shortlisted(X, Y, p, first.shortlist)
    model_w, st_w = fit_shortlisted(Xw, Y, p, wide.shortlist)
    assert model_w.weights.shape == (Y.shape[1], space)
    mapped = sp.csr_matrix((model.weights.data, ids[model.weights.indices], model.weights.indptr),
                           shape=model_w.weights.shape)
    assert (mapped != model_w.weights).nnz == 0 and np.array_equal(model.intercept, model_w.intercept)
    assert np.array_equal(st["f_final"], st_w["f_final"]) and np.array_equal(st["features"], st_w["features"])
    train_shortlisted_dir(Xw, Y, p, wide.shortlist, tmp_path / "m", shard_size=60)
    got = load_model(tmp_path / "m")
    assert (got.weights != model_w.weights).nnz == 0 and np.array_equal(got.intercept, model_w.intercept)
    la, sa = predict_model(model, Xt, first.first_stage, 5)
    lb, sb = predict_model(model_w, Xtw, wide.first_stage, 5)
    assert np.array_equal(la, lb) and np.array_equal(sa, sb)


def test_used_columns_renumber_in_order_and_drop_the_others():
    from headstart._columns import UsedColumns

    M = sp.csr_matrix((np.array([1., 2, 3, 4], dtype=np.float32), np.array([7, 2, 9, 7]), np.array([0, 2, 3, 4])),
                      shape=(3, 12))
    c = UsedColumns.of(M)
    assert c.used.tolist() == [2, 7, 9] and not c.all
    assert c.compact(M).toarray().tolist() == M.toarray()[:, [2, 7, 9]].tolist()
    Q = sp.csr_matrix(np.array([[5, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 6]], dtype=np.float32))
    assert c.compact(Q).toarray().tolist() == [[1, 2, 0]]      # columns 0 and 11 meet nothing
    assert UsedColumns.of(sp.csr_matrix((2, 10**9))).compact(Q).shape == (1, 0)
    full = sp.csr_matrix(np.eye(3, dtype=np.float32))
    assert UsedColumns.of(full).all and UsedColumns.of(full).compact(full).shape == (3, 3)


# --------------------------------------------------------------------------- sharded, resumable
def test_sharded_resumed_run_equals_in_memory_run(tmp_path, bib, first):
    X, Y, _, _ = bib
    p = TrainParams(threads=2)
    model, _ = fit_shortlisted(X, Y, p, first.shortlist)
    out = tmp_path / "m"
    train_shortlisted_dir(X, Y, p, first.shortlist, out, num_labels=70, shard_size=25, source="sl.txt")
    # the same shortlist read from another path (a resumed batch job in another folder):
    # the same settings (it was refused for its 'source')
    r = train_shortlisted_dir(X, Y, p, first.shortlist, out, shard_size=25, resume=True, source="/jobs/sl.txt")
    assert r.already_finished == 70 and r.trained_labels == Y.shape[1] - 70
    got = load_model(out)
    assert (got.weights != model.weights).nnz == 0 and np.array_equal(got.intercept, model.intercept)
    assert got.extensions["shortlist"]["nnz"] == first.shortlist.nnz
    other = first.shortlist.copy().tolil()
    other[0, 0] = 0 if other[0, 0] else 1
    with pytest.raises(ModelFormatError, match="cannot resume: shortlist settings"):
        train_shortlisted_dir(X, Y, p, other.tocsc(), out, resume=True)
    # a dense part's other settings are named, not taken for other data (helper-59)
    D = np.random.default_rng(0).normal(size=(X.shape[0], 3)).astype(np.float32)
    dout = tmp_path / "d"
    train_shortlisted_dir(X, Y, p, first.shortlist, dout, num_labels=10, dense=D)
    for dp in (DenseSparseParams(normalize_dense=True), DenseSparseParams(dense_reg=3.0)):
        with pytest.raises(ModelFormatError, match="cannot resume: dense settings are"):
            train_shortlisted_dir(X, Y, p, first.shortlist, dout, resume=True, dense=D, dense_params=dp)


def test_prediction_from_a_model_directory_shard_by_shard_equals_the_loaded_model(tmp_path, bib, first):
    """predict_model_dir reads one shard at a time (what lets 670K labels predict within
    memory) and gives the loaded model's predictions bit for bit, dense + sparse too; an
    incomplete model directory is refused."""
    X, Y, Xt, _ = bib
    p = TrainParams(threads=2)
    cand, _ = first.first_stage.candidates(Xt)
    out = tmp_path / "m"
    train_shortlisted_dir(X, Y, p, first.shortlist, out, shard_size=25)
    assert len(read_manifest(out)["shards"]) >= 7
    want = predict_model(load_model(out), Xt, first.first_stage, 5, candidates=cand)
    for block_nnz in (1, 30_000, 10**9):        # one shard per block, a few, all at once
        got = predict_model_dir(out, Xt, first.first_stage, 5, candidates=cand, block_nnz=block_nnz)
        assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    rng = np.random.default_rng(5)
    V = rng.standard_normal((X.shape[1], 4)).astype(np.float32)
    D, Dt = np.asarray(X @ V), np.asarray(Xt @ V)
    dense_dir = tmp_path / "d"
    train_shortlisted_dir(X, Y, p, first.shortlist, dense_dir, shard_size=40, dense=D,
                          dense_params=DenseSparseParams(dense_reg=2.0))
    want = predict_model(load_model(dense_dir), Xt, first.first_stage, 3, dense=Dt)
    got = predict_model_dir(dense_dir, Xt, first.first_stage, 3, dense=Dt)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    part = tmp_path / "part"
    train_shortlisted_dir(X, Y, p, first.shortlist, part, num_labels=30)
    with pytest.raises(ModelFormatError, match=r"incomplete, missing \[30, 159\)"):
        predict_model_dir(part, Xt, first.first_stage, 5)
    with pytest.raises(ParameterError, match="finite"):
        bad = load_model(out).weights.copy()
        bad.data[0] = np.nan
        predict_candidates(bad, np.zeros(bad.shape[0]), Xt, cand)


def test_cli_pipeline(tmp_path, bibtex_dir, capsys):
    train, test = str(bibtex_dir / "train.txt.gz"), str(bibtex_dir / "test.txt.gz")
    sl, fs, m, pred = (str(tmp_path / x) for x in ("sl.txt.gz", "fs", "m", "pred.txt"))
    assert main(["shortlist", train, "-o", sl, "-K", "10", "--test", test, "--save-first-stage", fs,
                 "--backend", "pruned", "--keep", "24"]) == 0
    out = capsys.readouterr().out
    assert "recall" in out and "leave-one-out" in out
    with gzip.open(sl, "rt") as fh:
        assert fh.readline().split() == ["4880", "159"]
    assert main(["shortlist-train", train, "--shortlist", sl, "-o", m, "-q", "--threads", "2"]) == 0
    assert main(["shortlist-predict", m, test, "--first-stage", fs, "-o", pred, "--evaluate"]) == 0
    out, err = capsys.readouterr()
    assert "P@1" in out and "another shortlist" not in err
    with open(pred) as fh:
        assert fh.readline().split() == ["2515", "5", "159"]
    # scored over every label, a shortlisted model ranks labels trained on few negatives
    # first (helper-59: debian-deps P@1 24 against 69): predict and evaluate say where to go
    for cmd in (["predict", m, test, "-o", str(tmp_path / "all.txt")], ["evaluate", m, test]):
        assert main(cmd) == 2
        assert "ranks its first stage's candidates only" in capsys.readouterr().err
        assert not (tmp_path / "all.txt").exists()
    assert main(["predict", m, test, "-o", str(tmp_path / "all.txt"), "--score-all-labels", "-q"]) == 0
    assert main(["shortlist-predict", m, test, "--first-stage", fs, "-o", str(tmp_path / "d.txt"), "--header",
                 "dismec"]) == 0      # DiSMEC++'s header, the same lines
    assert open(tmp_path / "d.txt").read().split("\n", 1) == ["2515 5", open(pred).read().split("\n", 1)[1]]
    # label names: the same predictions, each id written as its name
    assert main(["shortlist-predict", m, test, "--first-stage", fs, "-o", str(tmp_path / "named.txt"), "--label-names",
                 str(bibtex_dir / "label_names.txt.gz")]) == 0
    with gzip.open(bibtex_dir / "label_names.txt.gz", "rt") as fh:
        names = fh.read().splitlines()
    ids = open(pred).read().splitlines()[1:]
    named = open(tmp_path / "named.txt").read().splitlines()[1:]
    assert len(named) == len(ids) == 2515
    assert [line.split(" ") for line in named] == [    # blank-free names: blank-separated
        [f"{names[int(t.split(':')[0])]}:{t.split(':')[1]}" for t in line.split()] for line in ids]
    # a first stage of another K than the training shortlist's: said (helper-18)
    fs2 = str(tmp_path / "fs2")
    assert main(["shortlist", train, "-o", str(tmp_path / "sl2.txt"), "-K", "20", "--save-first-stage", fs2,
                 "--backend", "pruned", "--keep", "24", "-q"]) == 0
    capsys.readouterr()
    assert main(["shortlist-predict", m, test, "--first-stage", fs2, "-o", str(tmp_path / "p2.txt")]) == 0
    assert "was trained on another shortlist than this first stage made (K = 20" in capsys.readouterr().err
    # an incomplete model is refused before the data is read or searched
    part = str(tmp_path / "part")
    assert main(["shortlist-train", train, "--shortlist", sl, "-o", part, "-q", "--num-labels", "30"]) == 0
    capsys.readouterr()
    assert main(["shortlist-predict", part, str(tmp_path / "missing.txt"), "--first-stage", fs, "--evaluate"]) == 2
    err = capsys.readouterr().err
    assert "incomplete, missing [30, 159)" in err and "shortlist-train --resume" in err
    assert main(["train", train, "-o", str(tmp_path / "ova"), "-q", "--num-labels", "30"]) == 0
    capsys.readouterr()     # a model made by train is continued by train
    assert main(["shortlist-predict", str(tmp_path / "ova"), test, "--first-stage", fs, "--evaluate"]) == 2
    assert "first (train --resume)" in capsys.readouterr().err


def test_cli_no_fill_says_how_many_candidates_there_are(tmp_path, bibtex_dir, capsys):
    """--no-fill leaves instances fewer than K candidates: said with the average, and that
    shortlist-predict fills the rest (helper-59: "20 candidates" said of 8.8)."""
    from headstart.shortlist import read_shortlist

    train, test = str(bibtex_dir / "train.txt.gz"), str(bibtex_dir / "test.txt.gz")
    sl = tmp_path / "sl.txt"
    assert main(["shortlist", train, "-o", str(sl), "-K", "20", "--no-fill", "--neighbours", "5", "--test", test,
                 "--threads", "1"]) == 0
    out = capsys.readouterr().out
    S = read_shortlist(sl)
    assert f"at most 20 candidates ({S.nnz / 4880:.2f} per instance on average, --no-fill)" in out
    assert "shortlist-predict fills the empty slots" in out
    # a training shortlist larger than K, with random negatives: said as such
    assert main(["shortlist", train, "-o", str(sl), "-K", "10", "--train-candidates", "20", "--random-negatives",
                 "3", "--neighbours", "5", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "shortlist of 20 candidates and 3 random instances per label for 4880 instances" in out
    assert main(["shortlist", train, "-o", str(tmp_path / "sl2.txt"), "-K", "10", "--train-candidates", "5"]) == 2
    assert "--train-candidates 5 is fewer than -K 10" in capsys.readouterr().err
    assert not (tmp_path / "sl2.txt").exists()
    # the first stage's own checks name the options, not its fields
    for opts, said in ((["--random-negatives", "-1"], "--random-negatives must be an integer >= 0, got -1"),
                       (["--neighbours", "0"], "--neighbours must be an integer >= 1, got 0"),
                       (["-K", "0"], "-K/--candidates must be an integer >= 1, got 0")):
        assert main(["shortlist", train, "-o", str(tmp_path / "sl2.txt"), *opts]) == 2
        err = capsys.readouterr().err
        assert said in err and "parameter" not in err
        assert not (tmp_path / "sl2.txt").exists()


def test_cli_few_or_no_labels(tmp_path, capsys):
    """k beyond a 3-label model is cut with a warning (as 'headstart predict' does); data
    without labels is refused by 'shortlist' and 'evaluate' instead of giving nan."""
    tiny, nolab = tmp_path / "tiny.txt", tmp_path / "nolab.txt"
    tiny.write_text("4 3 3\n0,1 0:1 1:2\n1 1:1\n 2:1\n1 \n")
    nolab.write_text("3 3 0\n 0:1\n 1:1\n 2:1\n")
    sl, fs, m, pred = (str(tmp_path / x) for x in ("sl.txt", "fs", "m", "p.txt"))
    assert main(["shortlist", str(tiny), "-o", sl, "-K", "2", "--save-first-stage", fs, "-q"]) == 0
    assert main(["shortlist-train", str(tiny), "--shortlist", sl, "-o", m, "-q"]) == 0
    capsys.readouterr()
    assert main(["shortlist-predict", m, str(tiny), "--first-stage", fs, "-o", pred]) == 0
    assert "only 3 label(s): k = 3 labels per instance" in capsys.readouterr().err
    with open(pred) as fh:
        assert fh.readline().split() == ["4", "3", "3"]
    assert main(["evaluate", "--predictions", pred, str(tiny), "-k", "5", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "metrics up to k = 3" in err and "P@3" in json.loads(out) and "P@5" not in json.loads(out)
    assert main(["shortlist", str(nolab), "-o", str(tmp_path / "n.txt"), "-K", "2"]) == 2
    assert "no labels" in capsys.readouterr().err and not (tmp_path / "n.txt").exists()
    # a model of no labels could never predict: training refuses it (helper-27)
    assert main(["train", str(nolab), "-o", str(tmp_path / "nm"), "-q"]) == 2
    assert "the data has no labels" in capsys.readouterr().err and not (tmp_path / "nm").exists()
    assert main(["evaluate", "--predictions", pred, str(nolab)]) == 2
    assert "nolab.txt" in capsys.readouterr().err
    # refused before anything is written, naming the file (helper-48): no instances; a
    # test file of more features; --save-first-stage naming a file; an empty test set or
    # dense rows of another count for shortlist-predict --evaluate
    empty, wide, dense = tmp_path / "empty.txt", tmp_path / "wide.txt", tmp_path / "d.npy"
    empty.write_text("0 3 3\n")
    wide.write_text("2 7 3\n0 0:1 6:1\n1 2:1\n")
    np.save(dense, np.ones((3, 2), dtype=np.float32))
    (tmp_path / "afile").write_text("")
    for argv, needle in ((["shortlist", empty, "-K", "2"], "empty.txt: the data has no instances (its header "
                                                           "announces 0 points): there is nothing to shortlist"),
                         (["shortlist", tiny, "-K", "2", "--test", wide], "wide.txt: the data has 7 features but "
                                                                          "the training data 3"),
                         (["shortlist", tiny, "-K", "2", "--save-first-stage", tmp_path / "afile"],
                          "afile: --save-first-stage names a directory")):
        out = tmp_path / "s_out.txt"
        assert main([str(a) for a in argv] + ["-o", str(out)]) == 2, argv
        assert needle in capsys.readouterr().err and not out.exists(), argv
    for data, argv, needle in ((empty, ["--evaluate"], "empty.txt: the data has no instances (its header announces 0 "
                                                       "points): there is nothing to evaluate"),
                               (empty, [], "empty.txt: the data has no instances (its header announces 0 points): "
                                           "there is nothing to predict"),
                               (tiny, ["--dense", dense], "d.npy: 3 rows of dense features for the 4 instances")):
        assert main(["shortlist-predict", m, str(data), "--first-stage", fs, "-o", str(tmp_path / "q.txt"),
                     *map(str, argv)]) == 2, argv
        assert needle in capsys.readouterr().err and not (tmp_path / "q.txt").exists(), argv
    # dense features for a model without a dense part: named with the file (helper-59)
    np.save(tmp_path / "d4.npy", np.ones((4, 2), dtype=np.float32))
    assert main(["shortlist-predict", m, str(tiny), "--first-stage", fs, "--evaluate", "--dense",
                 str(tmp_path / "d4.npy")]) == 2
    assert "d4.npy: 2 columns of dense features, the model was trained on 0" in capsys.readouterr().err
    # the scores asked for are printed under -q too
    assert main(["shortlist-predict", m, str(tiny), "--first-stage", fs, "--evaluate", "-q"]) == 0
    assert "P@1 " in capsys.readouterr().out
    # a libsvm test file with a label id the model never saw: a miss, as evaluate counts it
    # (helper-59: refused by shortlist-predict --evaluate only)
    (tmp_path / "t.svm").write_text("0,5 1:1 2:2\n1 2:1\n")
    assert main(["shortlist-predict", m, str(tmp_path / "t.svm"), "--first-stage", fs, "--evaluate", "-q"]) == 0
    assert "P@1 " in capsys.readouterr().out


def test_cli_ctrl_c_says_the_shards_are_kept_and_how_to_resume(tmp_path, capsys, monkeypatch):
    """Ctrl-C during shortlist-train: exit 130, a warning that the finished shards are kept
    and the command that continues them (as for train)."""
    import headstart.shortlist as hs_shortlist

    tiny = tmp_path / "tiny.txt"
    tiny.write_text("4 3 3\n0,1 0:1 1:2\n1 1:1\n 2:1\n1 \n")
    sl, m = str(tmp_path / "sl.txt"), str(tmp_path / "m")
    assert main(["shortlist", str(tiny), "-o", sl, "-K", "2", "-q"]) == 0

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(hs_shortlist, "train_shortlisted_dir", interrupted)
    capsys.readouterr()
    assert main(["shortlist-train", str(tiny), "--shortlist", sl, "-o", m, "-q"]) == 130
    err = capsys.readouterr().err
    assert f"before any shard was finished: no trained label is kept in {m}" in err


def test_prediction_ranks_k_labels_when_the_first_stage_has_fewer(tmp_path, bib):
    """A first stage without filling (rows with few candidates) or with K < k: prediction
    widens the candidates to max(K, k) and fills them with the most frequent training
    labels, so every row gets k real labels with their real scores (the CLI writes them;
    it failed on the padding before), the stage's own K ranked first; a first stage of another label space or feature
    width than the model is refused, naming both."""
    X, Y, Xt, _ = bib
    fs = FirstStage.fit(X, Y, FirstStageParams(K=5, neighbours=2, fill=False))
    cand0, _ = fs.candidates(Xt)
    assert (cand0 < 0).any()                              # some rows have fewer than K
    model, _ = fit_shortlisted(X, Y, TrainParams(threads=2), candidates_to_shortlist(
        fs.candidates(X, training=True)[0], Y.shape[1]))
    F = (sp.csr_matrix(Xt) @ model.weights.T).toarray() + model.intercept
    for k in (3, 8):
        labels, scores = predict_model(model, Xt, fs, k)
        assert (labels >= 0).all() and np.isfinite(scores).all()
        cand, _ = fs.prediction_candidates(Xt, k)
        assert cand.shape[1] == max(5, k) and (cand >= 0).all()
        for r in range(0, Xt.shape[0], 41):
            own = cand0[r][cand0[r] >= 0]
            assert set(own.tolist()) <= set(cand[r].tolist())   # the stage's own candidates stay
            s = F[r, cand[r]].astype(np.float32)
            # the stage's own K candidates first, then those added for k > K (helper-102)
            order = np.lexsort((cand[r], -s, np.arange(cand.shape[1]) >= 5))[:k]
            assert labels[r].tolist() == cand[r][order].tolist()
            np.testing.assert_allclose(scores[r], s[order], rtol=1e-6, atol=1e-6)
    # so asking for more labels never changes the first ones
    np.testing.assert_array_equal(predict_model(model, Xt, fs, 8)[0][:, :5], predict_model(model, Xt, fs, 5)[0])
    np.testing.assert_array_equal(predict_model(model, Xt, fs, 8)[0][:, :3], predict_model(model, Xt, fs, 3)[0])
    out = tmp_path / "m"
    train_shortlisted_dir(X, Y, TrainParams(threads=2), candidates_to_shortlist(
        fs.candidates(X, training=True)[0], Y.shape[1]), out)
    fs.save(tmp_path / "fs")
    Xt_file = tmp_path / "t.txt"
    write_xmc(Xt_file, Xt, sp.csr_matrix(bib[3]))
    pred = tmp_path / "p.txt"
    assert main(["shortlist-predict", str(out), str(Xt_file), "--first-stage", str(tmp_path / "fs"), "-o", str(pred),
                 "-k", "8", "-q"]) == 0
    got_l, got_s = read_predictions(pred)
    want_l, want_s = predict_model_dir(out, Xt, fs, 8)
    assert np.array_equal(got_l, want_l) and np.allclose(got_s, want_s, rtol=1e-5, atol=1e-6)
    other = FirstStage.fit(X[:, :1000], Y[:, :150], FirstStageParams(K=5))
    with pytest.raises(ParameterError, match="made for 150 labels, the model .* has 159"):
        predict_model_dir(out, Xt, other, 3)
    wide = FirstStage.fit(sp.hstack([X, X[:, :3]]).tocsr(), Y, FirstStageParams(K=5))
    with pytest.raises(ParameterError, match=f"made on {X.shape[1] + 3} features, the model .* on {X.shape[1]}"):
        predict_model_dir(out, Xt, wide, 3)


def test_dask_run_equals_in_memory_run(tmp_path, bib, first):
    """Dask (a LocalCluster of 2 worker processes on loopback) gives the same model."""
    distributed = pytest.importorskip("distributed")
    X, Y, _, _ = bib
    p = TrainParams(threads=1)
    model, _ = fit_shortlisted(X, Y, p, first.shortlist)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None)
    try:
        with distributed.Client(cluster) as c:
            r = train_shortlisted_dir(X, Y, p, first.shortlist, tmp_path / "m", shard_size=40, client=c)
    finally:
        cluster.close()
    assert r.backend == "dask" and r.complete
    got = load_model(tmp_path / "m")
    assert (got.weights != model.weights).nnz == 0 and np.array_equal(got.intercept, model.intercept)


# ~2 minutes of PyNNDescent compiling its Numba code in a fresh environment, the
# largest single item of the suite; benchmarks/shortlist.py --backend pynndescent
# measures the same recall against the exact search on real data (docs/shortlist.md)
@pytest.mark.slow
def test_pynndescent_backend_finds_nearly_the_exact_candidates(bib):
    pytest.importorskip("pynndescent")
    X, Y, Xt, Yt = bib
    exact = build_shortlist(X, Y, FirstStageParams(K=15, backend="exact"), threads=2)
    ann = build_shortlist(X, Y, FirstStageParams(K=15, backend="pynndescent"), threads=2)
    a, _ = exact.first_stage.candidates(Xt)
    b, _ = ann.first_stage.candidates(Xt)
    assert recall(b, Yt) >= recall(a, Yt) - 0.02
    assert ann.train_recall >= exact.train_recall - 0.02


def test_centroid_candidates_of_a_row_without_features_are_filled(tmp_path, capsys):
    """The centroid search reaches fewer than K labels for a row without features: its
    empty slots (-1) went to shortlist-predict, which aborted ("label ids must be in [0,
    5)"; helper-45).  They are filled with the most frequent training labels, as the
    neighbours' first stage fills its rows."""
    train = tmp_path / "tr.txt"
    train.write_text("6 4 5\n0,1 0:1 1:0.5\n0 2:1\n0,2 3:1 0:0.2\n1 1:1\n\n2 0:1 3:1\n")
    X, Y = read_xmc(train)
    fs = FirstStage.fit(X, Y, FirstStageParams(K=5, method="centroids"), threads=1)
    labels, scores = fs.prediction_candidates(sp.csr_matrix((1, 4), dtype=np.float32), 5)
    assert sorted(labels[0].tolist()) == [0, 1, 2, 3, 4]
    assert labels[0, :3].tolist() == [0, 1, 2] and np.all(np.isneginf(scores[0]))   # by training frequency
    (tmp_path / "te.txt").write_text("2 4 5\n0 0:1\n1\n")
    for argv in (["shortlist", train, "-o", tmp_path / "sl.txt", "--save-first-stage", tmp_path / "fs",
                  "--method", "centroids", "--threads", "1", "-q"],
                 ["shortlist-train", train, "--shortlist", tmp_path / "sl.txt", "-o", tmp_path / "m", "--threads",
                  "1", "-q"],
                 ["shortlist-predict", tmp_path / "m", tmp_path / "te.txt", "--first-stage", tmp_path / "fs", "-o",
                  tmp_path / "p.txt", "--threads", "1", "-k", "5"]):
        assert main([str(a) for a in argv]) == 0
    # a centroid holds its own label's instances: the training recall is in-sample
    # (helper-54: it was called leave-one-out)
    assert main([str(a) for a in ["shortlist", train, "-o", tmp_path / "sl2.txt", "--method", "centroids",
                                  "--threads", "1"]]) == 0
    out = capsys.readouterr().out
    assert "(in-sample, an optimistic bound)" in out and "leave-one-out" not in out
    got, _ = read_predictions(tmp_path / "p.txt")
    assert sorted(got[1].tolist()) == [0, 1, 2, 3, 4]
    # --evaluate on test data of another label count: the file and its header named
    (tmp_path / "te6.txt").write_text("2 4 6\n0 0:1\n5\n")
    assert main([str(a) for a in ("shortlist-predict", tmp_path / "m", tmp_path / "te6.txt", "--first-stage",
                                  tmp_path / "fs", "--evaluate", "--threads", "1")]) == 2


def test_the_search_reports_progress_and_warns_of_its_work(bib, monkeypatch, caplog):
    """build_shortlist reports the instances searched (the shortlist command's progress
    bar; helper-65: 13 minutes without a sign); an exact search whose multiply-adds
    (query nonzeros x postings of their columns, counted independently here) pass the
    warning's bound says so and names the pruned back-end; the pruned one does not."""
    import headstart.shortlist.candidates as cand

    X, Y, _, _ = bib
    seen = []
    r = build_shortlist(X, Y, FirstStageParams(K=15, method="centroids"), threads=2, progress=seen.append)
    assert sum(seen) == X.shape[0] and len(seen) == -(-X.shape[0] // 1024)
    C = cand.normalize_rows(cand.label_centroids(cand.normalize_rows(sp.csr_matrix(X)), Y))
    Xb, Cb = (sp.csr_matrix(M, dtype=bool).astype(np.float64) for M in (cand.normalize_rows(sp.csr_matrix(X)), C))
    work = float((Xb @ Cb.T).sum())           # one multiply-add per shared (row, centroid) feature
    monkeypatch.setattr(cand, "EXACT_WORK_WARNING", work - 1)
    with caplog.at_level("WARNING", logger="headstart.shortlist.candidates"):
        build_shortlist(X, Y, FirstStageParams(K=15, method="centroids"), threads=2)
    assert [f"the exact search does about {work:.2g} multiply-adds" in m and "--backend pruned" in m
            for m in caplog.messages] == [True]
    caplog.clear()
    monkeypatch.setattr(cand, "EXACT_WORK_WARNING", work + 1)
    with caplog.at_level("WARNING", logger="headstart.shortlist.candidates"):
        build_shortlist(X, Y, FirstStageParams(K=15, method="centroids"), threads=2)
        build_shortlist(X, Y, FirstStageParams(K=15, method="centroids", backend="pruned"), threads=2)
    assert not caplog.messages
    assert r.train_recall > 0


@pytest.mark.parametrize("d, density, enumerated", [(200, 0.2, True), (200000, 0.00002, False), (64 * 3, 1.0, True)])
def test_extract_gives_the_rows_on_their_own_columns_in_ascending_order(d, density, enumerated):
    """A sub-problem's CSR (rows gathered, the columns it uses renumbered in ascending
    global order) and its column sums, against scipy and a sequential float64 sum, both
    ways of listing the columns: by one pass over the column bitmap (many used columns
    per word), or by sorting what the marking pass collected (few, among very many);
    the bitmap is left all zero for the next label.  Two labels in a row share the
    buffers, as in a chunk."""
    from headstart.shortlist.training import ENUMERATE_SHARE, extract

    rng = np.random.default_rng(d)
    X = sp.random(300, d, density=density, format="csr", random_state=rng, dtype=np.float32)
    X.sort_indices()
    colmap = np.empty(d, dtype=np.int32)
    bits = np.zeros((d + 63) // 64, dtype=np.uint64)
    for take in (20, 40):
        rows = np.sort(rng.choice(300, take, replace=False)).astype(np.int64)
        sub = X[rows]
        used = np.unique(sub.indices)
        assert (bits.size <= ENUMERATE_SHARE * used.size) == enumerated
        nnz = sub.nnz
        feats = np.empty(min(nnz, d) + 1, dtype=np.int32)
        ip, ix, dt = np.empty(take + 1, dtype=np.int64), np.empty(nnz, dtype=np.int32), np.empty(nnz, dtype=np.float32)
        colsum = np.empty(min(nnz, d) + 1)
        nf = extract(X.indptr.astype(np.int64), X.indices, X.data, rows, take, colmap, bits, feats, ip, ix, dt, colsum)
        assert nf == used.size
        np.testing.assert_array_equal(feats[:nf], used)
        got = sp.csr_matrix((dt, ix, ip), shape=(take, nf))
        want = sub[:, used]
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.data, want.data)
        sums = np.zeros(nf)
        np.add.at(sums, ix, dt.astype(np.float64))      # in the order of the rows, as the kernel sums
        np.testing.assert_array_equal(colsum[:nf], sums)
        assert not bits.any()


# --------------------------------------------------------------------------- the API's boundary
def _bad_column(X, at=10**7):
    """X with one column id far beyond its shape (scipy does not check it)."""
    B = sp.csr_matrix(X, dtype=np.float32, copy=True)
    B.indices[0] = at
    return B


def test_the_shortlist_api_refuses_what_its_kernels_cannot_index(bib, first, tmp_path):
    """helper-90: mismatched or malformed inputs crashed the process (segmentation faults,
    writes past an array) where the estimator refuses them; every public entry of
    headstart.shortlist now checks shapes, index arrays and candidate ids first."""
    X, Y, Xt, Yt = bib
    X, Y = X[:300], Y[:300]
    fsp = FirstStageParams(K=5, neighbours=5)
    with pytest.raises(DataFormatError, match="Y has 295 rows but X has 300"):
        build_shortlist(X, Y[:-5], fsp, threads=1)
    with pytest.raises(DataFormatError, match="Y has 600 rows but X has 300"):
        build_shortlist(X, sp.vstack([Y, Y]).tocsr(), fsp, threads=1)
    with pytest.raises(DataFormatError, match="row 0 holds the column index 10000000"):
        build_shortlist(_bad_column(X), Y, fsp, threads=1)
    with pytest.raises(DataFormatError, match="found the value -1"):
        build_shortlist(X, 2 * Y.toarray() - 1, fsp, threads=1)
    Xn = sp.csr_matrix(X, dtype=np.float32, copy=True)
    Xn.data[3] = np.nan
    with pytest.raises(DataFormatError, match="NaN|not finite|finite"):
        build_shortlist(Xn, Y, fsp, threads=1)
    with pytest.raises(DataFormatError, match="row 0 holds the column index 10000000"):
        first.first_stage.candidates(_bad_column(Xt))
    # candidates: one row per instance, integer ids in [-1, L), none twice in a row
    cand, _ = first.first_stage.candidates(Xt)
    L = Yt.shape[1]
    with pytest.raises(DataFormatError, match="candidates has 1 rows but there are 600 instances"):
        recall(cand[:1], Yt)
    over = cand.copy()
    over[2, 1] = L
    with pytest.raises(DataFormatError, match=rf"row 2, slot 1 holds the label id {L}, outside \[-1, {L}\)"):
        recall(over, Yt)
    with pytest.raises(DataFormatError, match="outside"):
        candidates_to_shortlist(over, L)
    under = cand.copy()
    under[0, 0] = -2
    with pytest.raises(DataFormatError, match="row 0, slot 0 holds the label id -2"):
        candidates_to_shortlist(under, L)
    model, _ = fit_shortlisted(X, Y, TrainParams(threads=1), build_shortlist(X, Y, fsp, threads=1).shortlist)
    twice = cand.copy()
    twice[4, 2] = twice[4, 0]
    with pytest.raises(DataFormatError, match=f"row 4 lists label {twice[4, 0]} twice"):
        predict_model(model, Xt, first.first_stage, 3, candidates=twice)
    with pytest.raises(DataFormatError, match="integer label ids"):
        predict_model(model, Xt, first.first_stage, 3, candidates=cand.astype(np.float64))
    with pytest.raises(DataFormatError, match="row 0 holds the column index 10000000"):
        predict_model(model, _bad_column(Xt), first.first_stage, 3)
    Xm = model_features(model, Xt)
    with pytest.raises(DataFormatError, match="row 0 holds the column index 10000000"):
        predict_candidates(model.weights, model.intercept, _bad_column(Xm), cand, 3)
    for b in (model.intercept[:-1], np.concatenate([model.intercept, [0.0]])):
        with pytest.raises(ParameterError, match="intercept has shape"):
            predict_candidates(model.weights, b, Xm, cand, 3)
    # the good inputs still give the same predictions
    want = predict_model(model, Xt, first.first_stage, 3, candidates=cand)
    got = predict_candidates(model.weights, model.intercept, Xm, cand, 3)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])


@pytest.mark.parametrize("value", [np.nan, -1.0, 0.3, 2.0])
def test_a_shortlist_holds_zeros_and_ones_only(bib, value):
    """A shortlist's stored values are membership: a NaN, -1, a score or a count is a
    mistake, refused with its place (helper-90: any of them read as "shortlisted")."""
    X, Y, _, _ = bib
    X, Y = X[:200], Y[:200]
    S = sp.csc_matrix(np.ones((200, Y.shape[1]), dtype=np.float64))
    S.data[5] = value
    with pytest.raises(DataFormatError, match=r"0/1 matrix: found the value .* at instance 5, label 0"):
        fit_shortlisted(X, Y, TrainParams(threads=1), S)
    B = sp.csc_matrix(S, copy=True)
    B.data[:] = 1
    B.indices[7] = 10**6
    with pytest.raises(DataFormatError, match="holds the row index 1000000"):
        fit_shortlisted(X, Y, TrainParams(threads=1), B)


def test_save_first_stage_is_checked_before_the_work(tmp_path, capsys):
    """--save-first-stage DIR was created under a missing parent, failed after the
    shortlist was written on a read-only one, and wrote into a model directory, which
    'info' then no longer recognised (helper-89).  Now refused up front (exit 2, nothing
    written) unless new, empty, or an earlier first stage (replaced)."""
    data = tmp_path / "d.txt"
    data.write_text("3 4 3\n0 0:1 1:0.5\n1 2:1\n0,1 0:0.5 2:0.5\n")
    sl = tmp_path / "sl.txt"
    model = tmp_path / "model"
    assert main(["train", str(data), "-o", str(model), "-q"]) == 0
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("mine\n")
    for target, words in ((tmp_path / "nope" / "fs", "parent directory .* does not exist"),
                          (model, "holds other files than a first stage"),
                          (junk, r"holds other files than a first stage \(notes.txt\)"),
                          (data, "names a directory; a file is there")):
        capsys.readouterr()
        code = main(["shortlist", str(data), "-o", str(sl), "-K", "2", "--save-first-stage", str(target), "-q"])
        err = capsys.readouterr().err
        assert code == 2 and re.search(words, err), (target, err)
        assert not sl.exists() and not (tmp_path / "nope").exists()
    assert not (model / "first_stage.json").exists() and not (junk / "first_stage.json").exists()
    assert main(["info", str(model)]) == 0
    fs = tmp_path / "fs"
    for _ in range(2):           # a new directory, then the earlier first stage replaced
        assert main(["shortlist", str(data), "-o", str(sl), "-K", "2", "--save-first-stage", str(fs), "-q"]) == 0
        assert sorted(q.name for q in fs.iterdir()) == ["first_stage.json", "first_stage.npz"]
        sl.unlink()


def test_ctrl_c_names_the_labels_the_kept_shards_hold(tmp_path, caplog):
    """With shards listed in the manifest, the interrupt says how many labels they hold and
    how to continue; without a manifest, that nothing trained is kept."""
    from headstart.cli.common import shards_kept_on_interrupt

    m = tmp_path / "m"
    m.mkdir()
    (m / "manifest.json").write_text(json.dumps({"shards": [{"first_label": 0, "num_labels": 40},
                                                            {"first_label": 100, "num_labels": 7}]}))
    with caplog.at_level("WARNING"), pytest.raises(KeyboardInterrupt):
        with shards_kept_on_interrupt("train", str(m)):
            raise KeyboardInterrupt
    assert f"(47 labels) are kept in {m}" in caplog.text and f"headstart train ... -o {m} --resume" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"), pytest.raises(KeyboardInterrupt):
        with shards_kept_on_interrupt("train", str(tmp_path / "none")):
            raise KeyboardInterrupt
    assert "before any shard was finished: no trained label is kept" in caplog.text


def test_a_file_of_shortlist_predict_evaluates_as_the_command_did(tmp_path, capsys):
    """-k above K: the stage's own candidates are listed before the added ones, so a line
    need not be in score order; `evaluate --predictions` ranks headstart's files as
    listed, and gives the P@k the command's --evaluate printed (helper-106: 65.83 against
    70.00 when it re-ranked by score)."""
    rng = np.random.default_rng(0)
    n, d, L = 40, 20, 6
    X = rng.random((n, d)) * (rng.random((n, d)) < 0.3)
    rows = [",".join(map(str, sorted({i % 4, 5} | ({(i + 1) % 4} if X[i, 0] > 0.5 else set()))))
            + " " + " ".join(f"{j}:{X[i, j]:.4f}" for j in range(d) if X[i, j] > 0) for i in range(n)]
    data = tmp_path / "base.txt"
    data.write_text(f"{n} {d} {L}\n" + "\n".join(rows) + "\n")
    sl, fs, m, pred = (str(tmp_path / x) for x in ("sl.txt", "fs", "m", "pred.txt"))
    assert main(["shortlist", str(data), "-o", sl, "--save-first-stage", fs, "-K", "3", "-q"]) == 0
    assert main(["shortlist-train", str(data), "--shortlist", sl, "-o", m, "-q"]) == 0
    capsys.readouterr()
    assert main(["shortlist-predict", m, str(data), "--first-stage", fs, "-o", pred, "-k", "4", "--evaluate"]) == 0
    out = capsys.readouterr().out
    said = {f"P@{k}": float(re.search(rf"P@{k} ([0-9.]+)", out).group(1)) / 100 for k in (1, 3)}
    lines = [[float(t.split(":")[1]) for t in x.split()] for x in open(pred).read().splitlines()[1:]]
    assert any(s != sorted(s, reverse=True) for s in lines)     # the case: not in score order
    assert main(["evaluate", "--predictions", pred, str(data), "-k", "4", "--json"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [got[f"P@{k}"] for k in (1, 3)] == pytest.approx([said[f"P@{k}"] for k in (1, 3)], abs=6e-5), (got, said)
    # another header is read as another tool's (ranked by score): said when the file is written
    assert main(["shortlist-predict", m, str(data), "--first-stage", fs, "-o", pred, "-k", "4",
                 "--header", "dismec"]) == 0
    assert "ranks a file with the 'dismec' header by score" in capsys.readouterr().err


def test_default_shards_follow_the_work_of_a_mostly_unused_label_space(tmp_path):
    """Row-less labels (no positive, nothing shortlisted) count 1/256 of a label with
    rows when the default shards are cut: by label count alone a mostly unused label
    space got a shard file of every 2,048 labels of microseconds each (2M labels, 300
    used: 977 shards, 12.7 against 7.3 CPU-s).  A label space of labels with rows keeps
    its shards of at most 2,048 labels; the model is the same whatever the shards."""
    from headstart.shortlist.api import SHARD_CAP

    rng = np.random.default_rng(7)
    n, L = 40, 300_000
    used = np.sort(rng.choice(L, 6, replace=False))
    X = sp.random(n, 10, density=0.4, random_state=8, dtype=np.float32, format="csr")
    Y = sp.csr_matrix((np.ones(n, dtype=np.float32), (np.arange(n), used[rng.integers(0, 6, n)])), shape=(n, L))
    S = sp.csc_matrix((np.ones(n, dtype=np.float32), (np.arange(n), used[rng.integers(0, 6, n)])), shape=(n, L))
    p = TrainParams(threads=2)
    r = train_shortlisted_dir(X, Y, p, S, tmp_path / "m")
    shards = read_manifest(tmp_path / "m")["shards"]
    assert len(shards) < L / SHARD_CAP / 3      # (the guided tail adds ~30 small ones)
    assert max(s["num_labels"] for s in shards) > SHARD_CAP
    train_shortlisted_dir(X, Y, p, S, tmp_path / "c", shard_size=SHARD_CAP)
    a, b = load_model(tmp_path / "m"), load_model(tmp_path / "c")
    assert (a.weights != b.weights).nnz == 0 and np.array_equal(a.intercept, b.intercept)
    assert r.info["shard_size"] > SHARD_CAP
    # every label with rows: shards by count, as before
    Yd = sp.csr_matrix((np.ones(n, dtype=np.float32), (np.arange(n), np.arange(n) % 30)), shape=(n, 30))
    Sd = sp.csc_matrix(np.ones((n, 30), dtype=np.float32))
    r = train_shortlisted_dir(X, Yd, p, Sd, tmp_path / "d")
    assert r.info["shard_size"] <= SHARD_CAP
