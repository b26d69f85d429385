"""Feature value transforms and feature hashing: the values, the hashing kernel against
numpy, and that prediction applies exactly what training applied (API, model directory,
sharded training, command line)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from headstart.errors import DataFormatError, ModelFormatError, ParameterError
from headstart.estimator import OvAClassifier, fit_model
from headstart.model import load_model, read_manifest, save_model
from headstart.params import TrainParams
from headstart.prediction import apply_preprocessing, fit_preprocessing
from headstart.prediction.topk import decision_function, predict_topk, predict_topk_streaming
from headstart.prediction.transforms import hash_features, transform_values_inplace

NUM = 16            # labels trained per model in these tests
PARAMS = TrainParams(threads=2)


# --------------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def counts(bibtex_dir):
    """bibtex with its binary values replaced by seeded multiples of 1/2 (0.5 .. 3): count-like
    values for which the three transforms all differ from the identity."""
    from headstart.io import read_xmc

    rng = np.random.default_rng(0)
    out = []
    for name in ("train", "test"):
        X, Y = read_xmc(str(bibtex_dir / f"{name}.txt.gz"))
        X = X.astype(np.float32)
        X.data = (rng.integers(1, 7, size=X.nnz) / 2).astype(np.float32)
        out.append((X, Y))
    return out


def numpy_transform(X: sp.csr_matrix, name: str) -> sp.csr_matrix:
    """The transforms written independently with numpy (float64, stored as float32)."""
    X = X.copy()
    v = X.data.astype(np.float64)
    X.data = {"log-one-plus": np.log1p, "one-plus-log": lambda a: 1.0 + np.log(a), "sqrt": np.sqrt}[name](v) \
        .astype(np.float32)
    return X


# --------------------------------------------------------------------------- values by hand
X_HAND = sp.csr_matrix(np.array([[0.0, 1.0, math.e, 4.0],
                                 [0.25, 0.0, 9.0, 0.0]], dtype=np.float32))
# log(2), log(1+e), log(5); log(1.25), log(10)
LOG_ONE_PLUS = [[0, 0.69314718, 1.31326169, 1.60943791], [0.22314355, 0, 2.30258509, 0]]
# 1+log(1), 1+log(e), 1+2log(2); 1-2log(2), 1+2log(3)
ONE_PLUS_LOG = [[0, 1.0, 2.0, 2.38629436], [-0.38629436, 0, 3.19722458, 0]]
SQRT = [[0, 1.0, 1.64872127, 2.0], [0.5, 0, 3.0, 0]]


@pytest.mark.parametrize("name, expected", [("log-one-plus", LOG_ONE_PLUS), ("one-plus-log", ONE_PLUS_LOG),
                                            ("sqrt", SQRT)])
def test_transform_values_by_hand(name, expected):
    X = X_HAND.copy()
    transform_values_inplace(X, name)
    assert X.nnz == X_HAND.nnz and X.dtype == np.float32  # zeros stay absent
    np.testing.assert_allclose(X.toarray(), expected, rtol=2e-7, atol=1e-7)
    dense = X_HAND.toarray()
    transform_values_inplace(dense, name)
    np.testing.assert_array_equal(dense, X.toarray())
    # through the preprocessing, sparse and dense, learned and applied
    pre, Xt = fit_preprocessing(X_HAND, normalize=False, tfidf=False, transform=name)
    assert pre.transform == name
    np.testing.assert_array_equal(Xt.toarray(), X.toarray())
    np.testing.assert_array_equal(apply_preprocessing(X_HAND.toarray(), pre), X.toarray())


def test_identity_is_a_no_op():
    pre, Xt = fit_preprocessing(X_HAND, normalize=False, tfidf=False, transform="identity")
    np.testing.assert_array_equal(Xt.toarray(), X_HAND.toarray())
    assert apply_preprocessing(X_HAND, pre) is X_HAND


@pytest.mark.parametrize("name, value, domain", [("sqrt", -1.0, ">= 0"), ("one-plus-log", -0.5, ">= 0"),
                                                 ("log-one-plus", -1.0, "> -1"), ("log-one-plus", -3.0, "> -1")])
def test_values_outside_the_domain_are_refused(name, value, domain):
    X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, value, 1.0]], dtype=np.float32))
    msg = rf"instance 1 \(counting from 0\): the feature transform {name} needs values {domain}.*; feature 1 has value {value}"
    with pytest.raises(DataFormatError, match=msg):
        fit_preprocessing(X, normalize=False, tfidf=False, transform=name)
    with pytest.raises(DataFormatError, match=msg):
        apply_preprocessing(X.toarray(), fit_preprocessing(X[:1], False, False, transform=name)[0])


def test_transform_then_tfidf_then_normalize():
    """The documented order: the transform sees raw values, tf-idf the transformed ones,
    normalisation comes last (every row has norm 1)."""
    X = sp.csr_matrix(np.array([[1.0, 3.0, 0.0], [8.0, 0.0, 1.0], [0.0, 15.0, 3.0]], dtype=np.float32))
    pre, Xt = fit_preprocessing(X, normalize=True, tfidf=True, transform="sqrt")
    S = np.sqrt(X.toarray().astype(np.float64))
    idf = np.log(3 / np.array([2, 2, 2]))
    W = np.where(S > 0, (1 + np.log(np.where(S > 0, S, 1))) * idf, 0)
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    np.testing.assert_allclose(Xt.toarray(), W, rtol=1e-6)
    np.testing.assert_array_equal(apply_preprocessing(X, pre).toarray(), Xt.toarray())


def test_one_plus_log_below_one_over_e_cannot_feed_tfidf():
    X = sp.csr_matrix(np.array([[0.25, 1.0]], dtype=np.float32))
    with pytest.raises(DataFormatError, match=r"tf-idf needs non-negative.*after the transform one-plus-log"):
        fit_preprocessing(X, normalize=False, tfidf=True, transform="one-plus-log")


# --------------------------------------------------------------------------- options
@pytest.mark.parametrize("kw, match", [
    ({"feature_transform": "log"}, "parameter feature_transform must be one of identity, log-one-plus, one-plus-log, sqrt"),
    ({"feature_transform": None}, "parameter feature_transform must be one of"),
    ({"feature_transform": 1}, "parameter feature_transform must be one of"),
])
def test_bad_options_are_refused(kw, match):
    with pytest.raises(ParameterError, match=match):
        TrainParams(**kw)
    with pytest.raises(ParameterError, match=match):
        OvAClassifier(**kw).fit(X_HAND, sp.csr_matrix(np.eye(2, dtype=np.float32)))
    with pytest.raises(ParameterError):
        TrainParams.from_dict(kw)


def test_kernel_functions_refuse_bad_arguments():
    with pytest.raises(ParameterError, match="parameter transform must be one of"):
        transform_values_inplace(X_HAND.copy(), "exp")


# --------------------------------------------------------------------------- training = prediction
@pytest.mark.parametrize("name", ["log-one-plus", "one-plus-log", "sqrt"])
@pytest.mark.parametrize("normalize", [False, True])
def test_a_transformed_model_scores_raw_data_as_training_did(counts, name, normalize):
    """Train with the transform on raw data, and without it on data transformed by numpy:
    the same weights, and predicting the raw test data with the first gives exactly the
    scores of predicting the transformed test data with the second."""
    (X, Y), (Xt, _) = counts
    params = PARAMS.replace(normalize=normalize)
    with_t, _ = fit_model(X, Y, params.replace(feature_transform=name), num_labels=NUM)
    plain, _ = fit_model(numpy_transform(X, name), Y, params, num_labels=NUM)
    assert with_t.preprocessing.transform == name and plain.preprocessing.transform == "identity"
    assert (with_t.weights != plain.weights).nnz == 0
    np.testing.assert_array_equal(with_t.intercept, plain.intercept)
    la, sa = predict_topk(with_t, Xt, 5)
    lb, sb = predict_topk(plain, numpy_transform(Xt, name), 5)
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(sa, sb)
    np.testing.assert_array_equal(decision_function(with_t, Xt[:50].toarray()),
                                  decision_function(plain, numpy_transform(Xt[:50], name)))
    # and forgetting the transform would have mattered
    lc, sc = predict_topk(with_t, Xt, 5, preprocess=False)
    assert not np.array_equal(sa, sc)


def test_transformed_model_round_trips_and_predicts_identically(counts, tmp_path):
    (X, Y), (Xt, _) = counts
    params = PARAMS.replace(feature_transform="sqrt", tfidf=True, normalize=True)
    model, _ = fit_model(X, Y, params, num_labels=NUM)
    want = predict_topk(model, Xt, 5)
    save_model(model, tmp_path / "m", shard_size=5)
    m = read_manifest(tmp_path / "m")
    assert m["preprocessing"] == {"normalize": True, "tfidf": True, "transform": "sqrt", "hash": None}
    back = load_model(tmp_path / "m", allow_gaps=True)
    assert back.preprocessing.transform == "sqrt"
    np.testing.assert_array_equal(back.preprocessing.idf, model.preprocessing.idf)
    for got in (predict_topk(back, Xt, 5), predict_topk_streaming(tmp_path / "m", Xt, 5, allow_gaps=True),
                predict_topk(back, Xt.toarray(), 5, chunk_rows=100)):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_manifest_preprocessing_is_validated(counts, tmp_path):
    (X, Y), _ = counts
    model, _ = fit_model(X[:200], Y[:200], PARAMS.replace(feature_transform="sqrt"), num_labels=3)
    save_model(model, tmp_path / "m")

    def forged(change):
        m = json.loads((tmp_path / "m" / "manifest.json").read_text())
        change(m["preprocessing"])
        (tmp_path / "m" / "manifest.json").write_text(json.dumps(m))

    good = (tmp_path / "m" / "manifest.json").read_text()
    for change, match in [(lambda p: p.update(transform="exp"), "preprocessing.transform is 'exp'"),
                          (lambda p: p.update(transform=None), "preprocessing.transform is None"),
                          (lambda p: p.update(extra=1), "field 'preprocessing' must be")]:
        forged(change)
        with pytest.raises(ModelFormatError, match=match):
            load_model(tmp_path / "m", allow_gaps=True)
        (tmp_path / "m" / "manifest.json").write_text(good)
    load_model(tmp_path / "m", allow_gaps=True)


def test_models_written_before_transforms_still_load(tmp_path):
    """A manifest with only normalize/tfidf (and params without the new name) means no
    transform."""
    from headstart.model import ModelWriter

    model, _ = fit_model(X_HAND, sp.csr_matrix(np.eye(2, dtype=np.float32)), PARAMS)
    save_model(model, tmp_path / "m")
    m = json.loads((tmp_path / "m" / "manifest.json").read_text())
    del m["preprocessing"]["transform"], m["params"]["feature_transform"]
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(m))
    back = load_model(tmp_path / "m")
    assert back.preprocessing.transform == "identity"
    ModelWriter.open(tmp_path / "m", PARAMS)  # resuming compares the complete parameter sets
    with pytest.raises(ModelFormatError, match="parameter feature_transform is 'identity' in the model but 'sqrt' now"):
        ModelWriter.open(tmp_path / "m", PARAMS.replace(feature_transform="sqrt"))


# --------------------------------------------------------------------------- sharded training
def test_sharded_training_transforms_and_resumes_like_the_local_run(counts, tmp_path):
    from headstart.distributed import train_sharded

    (X, Y), (Xt, _) = counts
    params = PARAMS.replace(feature_transform="one-plus-log")
    ref, _ = fit_model(X, Y, params, num_labels=NUM)
    train_sharded(X, Y, params, tmp_path / "m", num_labels=8, shard_size=4)
    with pytest.raises(ModelFormatError, match="parameter feature_transform is 'one-plus-log' in the model but 'sqrt' now"):
        train_sharded(X, Y, params.replace(feature_transform="sqrt"), tmp_path / "m", num_labels=NUM, shard_size=4,
                      resume=True)
    train_sharded(X, Y, params, tmp_path / "m", num_labels=NUM, shard_size=4, resume=True)
    got = load_model(tmp_path / "m", allow_gaps=True)
    assert (got.weights != ref.weights).nnz == 0
    np.testing.assert_array_equal(predict_topk_streaming(tmp_path / "m", Xt, 3, allow_gaps=True)[1],
                                  predict_topk(ref, Xt, 3)[1])


# --------------------------------------------------------------------------- command line
def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "headstart", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_cli_train_predict_evaluate_with_a_transform(counts, tmp_path):
    from headstart.io import read_predictions, write_xmc

    (X, Y), (Xt, Yt) = counts
    write_xmc(tmp_path / "train.txt", X[:1500], Y[:1500])
    write_xmc(tmp_path / "test.txt", Xt[:400], Yt[:400])
    opts = ["--transform", "log-one-plus", "--num-labels", NUM, "--threads", 1]
    r = _cli("train", tmp_path / "train.txt", "-o", tmp_path / "m", *opts)
    assert r.returncode == 0, r.stderr
    m = read_manifest(tmp_path / "m")
    assert m["params"]["feature_transform"] == "log-one-plus" and m["preprocessing"]["transform"] == "log-one-plus"
    r = _cli("predict", tmp_path / "m", tmp_path / "test.txt", "-o", tmp_path / "pred.txt", "-k", 3,
             "--allow-gaps")
    assert r.returncode == 0, r.stderr
    labels, scores = read_predictions(tmp_path / "pred.txt")
    model, _ = fit_model(X[:1500], Y[:1500], TrainParams(threads=1, feature_transform="log-one-plus"), num_labels=NUM)
    want_l, want_s = predict_topk(model, Xt[:400], 3)
    np.testing.assert_array_equal(labels, want_l)
    np.testing.assert_allclose(scores, want_s, rtol=5e-6)  # the file keeps 6 significant digits
    r = _cli("evaluate", tmp_path / "m", tmp_path / "test.txt", "-k", 3, "--allow-gaps", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["P@1"] > 0
    r = _cli("info", tmp_path / "m")
    assert r.returncode == 0 and "log-one-plus" in r.stdout


def test_cli_refuses_a_bad_transform(tmp_path):
    r = _cli("train", "x.txt", "-o", tmp_path / "m", "--transform", "log")
    assert r.returncode == 2 and "invalid choice: 'log'" in r.stderr
    (tmp_path / "p.json").write_text('{"feature_transform": "cube"}')
    r = _cli("train", "x.txt", "-o", tmp_path / "m", "--params", tmp_path / "p.json")
    assert r.returncode != 0 and "p.json: parameter feature_transform (--transform) must be one of identity" in r.stderr
    assert not (tmp_path / "m").exists()


# =========================================================================== feature hashing
def _mix(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def numpy_hash(X: sp.csr_matrix, buckets: int, functions: int, seed: int) -> sp.csr_matrix:
    """Reference feature hashing: every (row, feature, value) goes to the column
    r*B + mix(salt_r ^ feature) % B of each hash function r; scipy adds the duplicates."""
    X = sp.csr_matrix(X, dtype=np.float32)
    salts = _mix((np.uint64(seed) << np.uint64(32)) | np.arange(functions, dtype=np.uint64))
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    feats = X.indices.astype(np.uint64)
    cols = [r * buckets + (_mix(salts[r] ^ feats) % np.uint64(buckets)).astype(np.int64) for r in range(functions)]
    coo = sp.coo_matrix((np.tile(X.data.astype(np.float64), functions),
                         (np.tile(rows, functions), np.concatenate(cols))), shape=(X.shape[0], buckets * functions))
    out = coo.tocsr()
    out.sum_duplicates()
    out = out.astype(np.float32)
    out.eliminate_zeros()
    out.sort_indices()
    return out


@pytest.mark.parametrize("buckets, functions, seed", [(1, 1, 0), (7, 3, 42), (64, 2, 2**32 - 1), (1000, 5, 9)])
def test_hashing_matches_the_numpy_reference(counts, buckets, functions, seed):
    (X, _), _ = counts
    X = X[:300]
    got = hash_features(X, buckets, functions, seed)
    want = numpy_hash(X, buckets, functions, seed)
    assert got.shape == (300, buckets * functions) and got.dtype == np.float32 and got.has_canonical_format
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)  # sums of halves are exact
    # every value lands once per hash function: the row sums are R times the raw ones
    np.testing.assert_allclose(np.asarray(got.sum(axis=1)).ravel(), functions * np.asarray(X.sum(axis=1)).ravel(),
                               rtol=1e-6)


def test_hashing_random_values_signs_and_cancellation():
    rng = np.random.default_rng(3)
    X = sp.random(200, 5000, density=0.01, format="csr", dtype=np.float32, random_state=4)
    X.data = rng.normal(size=X.nnz).astype(np.float32)
    got, want = hash_features(X, 50, 3, 7), numpy_hash(X, 50, 3, 7)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.data, want.data, rtol=1e-6)
    assert (got.data < 0).any()  # negative sums are kept (DiSMEC++ would drop them)
    # two features that collide in the only bucket cancel: nothing is stored
    Z = sp.csr_matrix(np.array([[1.5, -1.5, 0.0], [2.0, 0.0, 0.0]], dtype=np.float32))
    H = hash_features(Z, 1, 1, 0)
    assert H.nnz == 1 and H.toarray().tolist() == [[0.0], [2.0]]


def test_hashing_is_deterministic_by_seed_and_spreads_evenly():
    X = sp.csr_matrix(np.ones((1, 100_000), dtype=np.float32))
    a, b = hash_features(X, 64, 2, 5), hash_features(X, 64, 2, 5)
    assert (a != b).nnz == 0
    c = hash_features(X, 64, 2, 6)
    assert (a != c).nnz > 0
    # 100000 features into 64 buckets per function: chi-square with 63 degrees of freedom
    for r in range(2):
        load = a.toarray()[0, 64 * r:64 * (r + 1)]
        assert load.sum() == 100_000
        chi2 = float(((load - 100_000 / 64) ** 2 / (100_000 / 64)).sum())
        assert chi2 < 120, chi2  # P(chi2_63 > 120) < 1e-5
    # features independent of the matrix width: feature 3 hashes alike in a 4- and a 10**6-wide row
    narrow = hash_features(sp.csr_matrix(([1.0], ([0], [3])), shape=(1, 4)), 1000, 3, 1)
    wide = hash_features(sp.csr_matrix(([1.0], ([0], [3])), shape=(1, 10**6)), 1000, 3, 1)
    np.testing.assert_array_equal(narrow.indices, wide.indices)


def test_hashing_dense_input_and_empty_rows():
    X = np.array([[0, 2, 0, 1], [0, 0, 0, 0]], dtype=np.float32)
    got = hash_features(X, 8, 2, 3)
    assert got.shape == (2, 16) and got.indptr[2] == got.indptr[1]
    np.testing.assert_array_equal(got.toarray(), numpy_hash(sp.csr_matrix(X), 8, 2, 3).toarray())


@pytest.mark.parametrize("kw, match", [
    ({"hash_buckets": -1}, r"parameter hash_buckets must be an integer >= 0 \(0 = no hashing\), got -1"),
    ({"hash_buckets": 2.5}, "parameter hash_buckets must be an integer"),
    ({"hash_buckets": 8, "hash_functions": 0}, "parameter hash_functions must be an integer >= 1, got 0"),
    ({"hash_buckets": 8, "hash_seed": -1}, r"parameter hash_seed must be an integer in \[0, 2\^32\), got -1"),
    ({"hash_buckets": 8, "hash_seed": 2**32}, "parameter hash_seed must be an integer in"),
    ({"hash_buckets": 2**28, "hash_functions": 8}, r"hash_buckets \* hash_functions <= 2147483647"),
])
def test_bad_hashing_options_are_refused(kw, match):
    with pytest.raises(ParameterError, match=match):
        TrainParams(**kw)
    with pytest.raises(ParameterError, match=match):
        OvAClassifier(**kw).fit(X_HAND, sp.csr_matrix(np.eye(2, dtype=np.float32)))
    with pytest.raises(ParameterError, match="hash_buckets must be an integer >= 1"):
        hash_features(X_HAND, 0, 1, 0)
    with pytest.raises(ParameterError, match="hash_seed"):
        hash_features(X_HAND, 4, 1, -5)


def test_hashed_model_equals_a_model_trained_on_prehashed_data(counts):
    """Hashing, then the transform, is what training did: a plain model trained on data
    hashed and transformed by numpy has the same weights and the same scores."""
    (X, Y), (Xt, _) = counts
    hp = dict(hash_buckets=300, hash_functions=3, hash_seed=11)
    hashed, _ = fit_model(X, Y, PARAMS.replace(feature_transform="log-one-plus", **hp), num_labels=NUM)
    plain, _ = fit_model(numpy_transform(numpy_hash(X, 300, 3, 11), "log-one-plus"), Y, PARAMS, num_labels=NUM)
    assert hashed.n_features == 900
    assert (hashed.weights != plain.weights).nnz == 0
    la, sa = predict_topk(hashed, Xt, 5)
    lb, sb = predict_topk(plain, numpy_transform(numpy_hash(Xt, 300, 3, 11), "log-one-plus"), 5)
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(sa, sb)
    # the estimator's n_features_in_ is the width of the X fitted on (scikit-learn's
    # meaning), not the hashed width of coef_ (helper-50)
    from headstart import OvAClassifier

    clf = OvAClassifier(threads=1, **hp).fit(X[:100], Y[:100, :2])
    assert clf.n_features_in_ == X.shape[1] and clf.coef_.shape[1] == 900


def test_hashed_model_round_trips_and_predicts_identically(counts, tmp_path):
    (X, Y), (Xt, _) = counts
    params = PARAMS.replace(hash_buckets=256, hash_functions=2, hash_seed=123, feature_transform="sqrt", tfidf=True,
                            normalize=True)
    model, _ = fit_model(X, Y, params, num_labels=NUM)
    want = predict_topk(model, Xt, 5)
    save_model(model, tmp_path / "m", shard_size=5)
    m = read_manifest(tmp_path / "m")
    assert m["n_features"] == 512
    assert m["preprocessing"] == {"normalize": True, "tfidf": True, "transform": "sqrt",
                                  "hash": {"buckets": 256, "functions": 2, "seed": 123}}
    back = load_model(tmp_path / "m", allow_gaps=True)
    assert back.preprocessing.hashing == model.preprocessing.hashing and back.preprocessing.transform == "sqrt"
    np.testing.assert_array_equal(back.preprocessing.idf, model.preprocessing.idf)
    for got in (predict_topk(back, Xt, 5), predict_topk_streaming(tmp_path / "m", Xt, 5, allow_gaps=True),
                predict_topk(back, Xt.toarray(), 5, chunk_rows=100)):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    # raw data wider than the training data is hashed like the rest (its extra features too)
    wide = sp.hstack([Xt, sp.csr_matrix(np.ones((Xt.shape[0], 3), dtype=np.float32))], format="csr")
    got = predict_topk(back, wide, 5)
    assert got[0].shape == want[0].shape and not np.array_equal(got[1], want[1])
    # already hashed input: preprocess=False takes the model's width only
    with pytest.raises(ModelFormatError, match="features but the model was trained on 512"):
        predict_topk(back, Xt, 5, preprocess=False)


def test_manifest_hashing_is_validated(counts, tmp_path):
    (X, Y), _ = counts
    model, _ = fit_model(X[:200], Y[:200], PARAMS.replace(hash_buckets=16, hash_functions=2), num_labels=3)
    save_model(model, tmp_path / "m")
    good = (tmp_path / "m" / "manifest.json").read_text()
    for change, match in [(lambda p: p["hash"].update(buckets=17), "must be equal"),
                          (lambda p: p["hash"].update(seed=-1), "seed"),
                          (lambda p: p["hash"].update(functions=True), "preprocessing.hash must be null or"),
                          (lambda p: p["hash"].pop("seed"), "preprocessing.hash must be null or")]:
        m = json.loads(good)
        change(m["preprocessing"])
        (tmp_path / "m" / "manifest.json").write_text(json.dumps(m))
        with pytest.raises(ModelFormatError, match=match):
            load_model(tmp_path / "m", allow_gaps=True)
    (tmp_path / "m" / "manifest.json").write_text(good)
    assert load_model(tmp_path / "m", allow_gaps=True).preprocessing.hashing.n_features == 32


def test_a_loaded_hashed_estimator_keeps_the_width_it_was_fitted_on(counts, tmp_path):
    """n_features_in_ of a hashed estimator is the width of the X it was fitted on; the
    manifest's "input" field keeps it through save, load and merging (helper-90 found the
    hashed width after load); a directory without the field loads as before."""
    from headstart.estimator import load as load_estimator
    from headstart.model import merge_models
    from headstart.model.dismec import write_dismec_model

    (X, Y), (Xt, _) = counts
    d = X.shape[1]
    hp = dict(threads=1, hash_buckets=150, hash_functions=2, hash_seed=7)
    clf = OvAClassifier(**hp).fit(X, Y[:, :NUM])
    assert clf.n_features_in_ == d and clf.model_.n_features == 300 < d
    clf.save(tmp_path / "m")
    assert read_manifest(tmp_path / "m")["input"] == {"n_features": d}
    from headstart.cli.info import model_info

    shown = model_info(str(tmp_path / "m"))
    assert shown["input_features"] == d and shown["features"] == 300
    back = load_estimator(tmp_path / "m")
    assert back.n_features_in_ == d
    for a, b in ((clf.predict_topk(Xt, 5), back.predict_topk(Xt, 5)),
                 ((clf.decision_function(Xt),), (back.decision_function(Xt),))):
        for got, want in zip(b, a):
            np.testing.assert_array_equal(got, want)
    assert (back.predict(Xt) != clf.predict(Xt)).nnz == 0

    # label ranges fitted apart carry the field into their merged model
    for lo in (0, 8):
        OvAClassifier(**hp).fit(X, Y[:, :NUM], first_label=lo, num_labels=8).save(tmp_path / f"part{lo}")
    merged = merge_models(tmp_path / "merged", [tmp_path / "part0", tmp_path / "part8"])
    assert merged["input"] == {"n_features": d}
    assert load_estimator(tmp_path / "merged").n_features_in_ == d

    # the DiSMEC++ export ignores the field as it ignores classes: the hashing is what it refuses
    with pytest.raises(ModelFormatError, match="hashes its features"):
        write_dismec_model(load_model(tmp_path / "m"), tmp_path / "x.model")

    # a model saved before the field existed: the hashed width, as then, and the same scores
    m = json.loads((tmp_path / "m" / "manifest.json").read_text())
    del m["input"]
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(m))
    old = load_estimator(tmp_path / "m")
    assert old.n_features_in_ == 300
    np.testing.assert_array_equal(old.decision_function(Xt), clf.decision_function(Xt))

    # written only where the widths differ: not for a model without hashing
    OvAClassifier(threads=1).fit(X_HAND, sp.csr_matrix(np.eye(2, dtype=np.float32))).save(tmp_path / "plain")
    assert "input" not in read_manifest(tmp_path / "plain")


@pytest.mark.parametrize("field, match", [
    ({"n_features": 0}, 'must be {"n_features": N} with N an integer in [1, 2147483647]'),
    ({"n_features": -4}, "an integer in [1,"),
    ({"n_features": 2**31}, "an integer in [1,"),
    ({"n_features": 12.5}, "got {'n_features': 12.5}"),
    ({"n_features": True}, "got {'n_features': True}"),
    ({"n_features": "1836"}, "got {'n_features': '1836'}"),
    ({}, "got {}"),
    ({"n_features": 1836, "columns": 2}, 'must be {"n_features": N}'),
    (1836, "field 'input' must be an object"),
])
def test_a_manifest_with_a_bad_input_width_is_refused(counts, tmp_path, field, match):
    from headstart.estimator import load as load_estimator

    (X, Y), _ = counts
    OvAClassifier(threads=1, hash_buckets=16, hash_functions=2).fit(X[:200], Y[:200, :3]).save(tmp_path / "m")
    path = tmp_path / "m" / "manifest.json"
    m = json.loads(path.read_text())
    assert m["input"] == {"n_features": X.shape[1]}
    m["input"] = field
    path.write_text(json.dumps(m))
    with pytest.raises(ModelFormatError, match=re.escape(match)) as e:
        load_estimator(tmp_path / "m")
    assert str(tmp_path / "m") in str(e.value)


def test_an_input_width_on_a_model_without_hashing_is_refused(tmp_path):
    from headstart.estimator import load as load_estimator

    OvAClassifier(threads=1).fit(X_HAND, sp.csr_matrix(np.eye(2, dtype=np.float32))).save(tmp_path / "m")
    path = tmp_path / "m" / "manifest.json"
    m = json.loads(path.read_text())
    m["input"] = {"n_features": 10}
    path.write_text(json.dumps(m))
    with pytest.raises(ModelFormatError, match=r"m: .*fitted on 10 features, but the model does not hash its "
                                               r"features: its input is its n_features, 4"):
        load_estimator(tmp_path / "m")


def test_models_written_before_hashing_still_load(tmp_path):
    model, _ = fit_model(X_HAND, sp.csr_matrix(np.eye(2, dtype=np.float32)), PARAMS)
    save_model(model, tmp_path / "m")
    m = json.loads((tmp_path / "m" / "manifest.json").read_text())
    del m["preprocessing"]["hash"]
    for name in ("hash_buckets", "hash_functions", "hash_seed"):
        del m["params"][name]
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(m))
    assert load_model(tmp_path / "m").preprocessing.hashing is None


def test_sharded_training_hashes_and_resumes_like_the_local_run(counts, tmp_path):
    from headstart.distributed import train_sharded

    (X, Y), (Xt, _) = counts
    params = PARAMS.replace(feature_transform="one-plus-log", hash_buckets=200, hash_functions=2, hash_seed=5)
    ref, _ = fit_model(X, Y, params, num_labels=NUM)
    train_sharded(X, Y, params, tmp_path / "m", num_labels=8, shard_size=4)
    with pytest.raises(ModelFormatError, match="parameter hash_seed is 5 in the model but 6 now"):
        train_sharded(X, Y, params.replace(hash_seed=6), tmp_path / "m", num_labels=NUM, shard_size=4, resume=True)
    train_sharded(X, Y, params, tmp_path / "m", num_labels=NUM, shard_size=4, resume=True)
    got = load_model(tmp_path / "m", allow_gaps=True)
    assert got.n_features == 400 and (got.weights != ref.weights).nnz == 0
    np.testing.assert_array_equal(predict_topk_streaming(tmp_path / "m", Xt, 3, allow_gaps=True)[1],
                                  predict_topk(ref, Xt, 3)[1])


def test_cli_train_predict_evaluate_with_hashing(counts, tmp_path):
    """Train with hashing on one libsvm file (no header), predict a test file whose
    features go beyond the training file's: it is hashed like the training data."""
    from headstart.io import read_predictions

    def write_libsvm(path, X, Y):  # 1-based features, no header; the values are halves, exact in text
        with open(path, "w") as f:
            for i in range(X.shape[0]):
                x, y = X[i], Y[i]
                f.write(",".join(map(str, y.indices)) + "".join(f" {j + 1}:{v:g}" for j, v in zip(x.indices, x.data))
                        + "\n")

    (X, Y), (Xt, Yt) = counts
    Xt_wide = sp.hstack([Xt[:400], sp.csr_matrix(np.full((400, 2), 0.5, dtype=np.float32))], format="csr")
    write_libsvm(tmp_path / "train.svm", X[:1500], Y[:1500])
    write_libsvm(tmp_path / "test.svm", Xt_wide, Yt[:400])
    opts = ["--transform", "sqrt", "--hash-buckets", "128", "--hash-repeat", "2", "--hash-seed", "3",
            "--num-labels", NUM, "--threads", 1]
    r = _cli("train", tmp_path / "train.svm", "-o", tmp_path / "m", *opts)
    assert r.returncode == 0, r.stderr
    m = read_manifest(tmp_path / "m")
    assert m["params"]["hash_functions"] == 2 and m["n_features"] == 256
    assert m["preprocessing"]["hash"] == {"buckets": 128, "functions": 2, "seed": 3}
    r = _cli("predict", tmp_path / "m", tmp_path / "test.svm", "-o", tmp_path / "pred.txt", "-k", 3,
             "--allow-gaps")
    assert r.returncode == 0, r.stderr
    labels, scores = read_predictions(tmp_path / "pred.txt")
    model, _ = fit_model(X[:1500], Y[:1500], TrainParams(threads=1, feature_transform="sqrt", hash_buckets=128,
                                                           hash_functions=2, hash_seed=3), num_labels=NUM)
    want_l, want_s = predict_topk(model, Xt_wide, 3)
    np.testing.assert_array_equal(labels, want_l)
    np.testing.assert_allclose(scores, want_s, rtol=5e-6)  # the file keeps 6 significant digits
    r = _cli("evaluate", tmp_path / "m", tmp_path / "test.svm", "-k", 3, "--allow-gaps", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["P@1"] > 0


def test_cli_refuses_bad_hash_options(tmp_path):
    r = _cli("train", "x.txt", "-o", tmp_path / "m", "--hash-buckets", "-4")
    assert r.returncode != 0 and "parameter hash_buckets (--hash-buckets) must be an integer >= 0" in r.stderr
    r = _cli("train", "x.txt", "-o", tmp_path / "m", "--hash-buckets", "8", "--hash-seed", "99999999999")
    assert r.returncode != 0 and "hash_seed (--hash-seed) must be an integer in [0, 2^32)" in r.stderr
    r = _cli("train", "x.txt", "-o", tmp_path / "m", "--hash-buckets", "8", "--hash-functions", "x")
    assert r.returncode == 2 and "--hash-functions" in r.stderr
    assert not (tmp_path / "m").exists()


def test_hashing_with_an_absolute_prune_threshold_warns(counts, caplog):
    """R hash functions repeat every value R times and each copy's weight is about 1/R of
    the feature's: the default absolute --prune 0.01 then removed most of them, silently
    (helper-54: bibtex P@1 35.3 against 53.6 unpruned).  Said, with the scaled value."""
    (X, Y), _ = counts
    for params, warned in ((PARAMS.replace(hash_buckets=16, hash_functions=4), True),
                           (PARAMS.replace(hash_buckets=16, hash_functions=4, prune=0.0), False),
                           (PARAMS.replace(hash_buckets=16, hash_functions=1), False)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="headstart"):
            fit_model(X[:100], Y[:100], params, num_labels=2)
        said = [r.getMessage() for r in caplog.records if "hash functions" in r.getMessage()]
        assert said == (["feature hashing with 4 hash functions makes every weight about 1/4 as large: pruning "
                         "below 0.01 then removes much more than without hashing; consider prune=0.0025 "
                         "(--prune) or sparsify"] if warned else []), params


# --------------------------------------------------------------------------- raw ids beyond int32
RAW_TOP = 2**63 - 2          # the largest raw feature id the readers take for hashing


def _widen(X: sp.csr_matrix) -> sp.csr_matrix:
    """X with feature j renamed to the raw id j * 2^40 + 12345 (all beyond int32), and its
    last row's first feature to 2^63 - 2: ids as 64-bit hashes of tokens give them."""
    ids = X.indices.astype(np.int64) * 2**40 + 12345
    last = X.indptr[-2]
    ids[last] = RAW_TOP
    order = np.concatenate([np.arange(last + 1, X.nnz), [last]])   # keep the last row's ids sorted
    idx = np.concatenate([ids[:last], ids[order]])
    data = np.concatenate([X.data[:last], X.data[order]])
    W = sp.csr_matrix((data, idx, X.indptr.astype(np.int64)), shape=(X.shape[0], RAW_TOP + 1))
    assert W.indices.dtype == np.int64 and W.has_sorted_indices
    return W


def test_readers_take_raw_ids_up_to_2_63_for_hashing(tmp_path):
    """wide_ids: ids up to 2^63 - 2 read exactly (int64 indices, the header's width); one
    more is refused with its line and column; without wide_ids the int32 limit stays and
    says what would read such ids (helper-80: hashed models refused ids >= 2^31)."""
    from headstart.io import read_libsvm, read_xmc

    (tmp_path / "w.txt").write_text(f"2 {RAW_TOP + 1} 2\n0 3:1 4294967296:2\n1 {RAW_TOP}:0.5\n")
    X, Y = read_xmc(tmp_path / "w.txt", wide_ids=True)
    assert X.shape == (2, RAW_TOP + 1) and X.indices.dtype == np.int64
    assert X.indices.tolist() == [3, 2**32, RAW_TOP] and X.data.tolist() == [1, 2, 0.5]
    (tmp_path / "w.svm").write_text(f"0 4:1 4294967297:2\n1 {RAW_TOP}:0.5\n")
    X, _ = read_libsvm(tmp_path / "w.svm", wide_ids=True)   # 1-based: columns id - 1
    assert X.shape == (2, RAW_TOP) and X.indices.tolist() == [3, 2**32, RAW_TOP - 1]
    for name, text, where in (("b.svm", f"0 4:1\n1 {RAW_TOP + 1}:1\n", (2, 3)),
                              ("c.svm", "0 4:1 99999999999999999999:1\n", (1, 7)),
                              ("b.txt", f"2 {RAW_TOP + 1} 2\n0 4:1\n1 {RAW_TOP + 1}:1\n", (3, 3))):
        (tmp_path / name).write_text(text)
        reader = read_libsvm if name.endswith(".svm") else read_xmc
        with pytest.raises(DataFormatError, match="out of range .*raw feature ids of hashed data are int64") as e:
            reader(tmp_path / name, wide_ids=True)
        assert (e.value.line, e.value.column) == where
    (tmp_path / "h.txt").write_text(f"1 {RAW_TOP + 2} 2\n0 4:1\n")
    with pytest.raises(DataFormatError, match="num_features = 9223372036854775808 exceeds the supported maximum "
                                              "9223372036854775807") as e:
        read_xmc(tmp_path / "h.txt", wide_ids=True)
    # without hashing: int32 ids, as before, and the error says what reads more
    with pytest.raises(DataFormatError, match=r"feature index 4294967297 out of range \[1, 2147483647\] \(feature "
                                              r"ids are int32; with feature hashing, --hash-buckets") as e:
        read_libsvm(tmp_path / "w.svm")
    assert (e.value.line, e.value.column) == (1, 7)
    with pytest.raises(DataFormatError, match="exceeds the supported maximum 2147483647 .*--hash-buckets"):
        read_xmc(tmp_path / "w.txt")


def test_hashing_keys_are_the_raw_64_bit_ids(counts):
    """A raw id beyond int32 is hashed as itself (not truncated): the numpy reference of
    the documented hash, computed on the ids as uint64, agrees; a matrix that wide trains
    with hashing and is refused without it."""
    (X, Y), _ = counts
    W = _widen(X[:300])
    got, want = hash_features(W, 64, 3, 5), numpy_hash(W, 64, 3, 5)
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)
    model, _ = fit_model(W, Y[:300], PARAMS.replace(hash_buckets=64, hash_functions=3, hash_seed=5), num_labels=2)
    assert model.n_features == 192
    with pytest.raises(DataFormatError, match="at most 2147483647 are supported without feature hashing"):
        fit_model(W, Y[:300], PARAMS, num_labels=2)


@pytest.mark.parametrize("fmt", ["xmc", "libsvm"])
def test_cli_hashed_model_takes_raw_ids_beyond_int32(counts, tmp_path, fmt):
    """train --hash-buckets on a file of raw ids up to 2^63 - 2, predict / evaluate another
    such file: hashed the same way in both (the scores of the Python API on the same
    matrices); without hashing train refuses the file (file:line, exit 2, no model), and
    a raw id beyond 2^63 - 2 is refused before anything is written."""
    from headstart.io import read_predictions, write_libsvm, write_xmc

    (X, Y), (Xt, Yt) = counts
    W, Wt = _widen(X[:800]), _widen(Xt[:200])
    write = write_xmc if fmt == "xmc" else write_libsvm
    ext = ".txt" if fmt == "xmc" else ".svm"
    train, test = tmp_path / f"train{ext}", tmp_path / f"test{ext}"
    if fmt == "xmc":
        write(train, W, Y[:800])
        write(test, Wt, Yt[:200])
    else:   # 1-based in the file: the raw ids are the columns + 1, at most 2^63 - 2
        write(train, W[:, :RAW_TOP], Y[:800])
        write(test, Wt[:, :RAW_TOP], Yt[:200])
        W, Wt = W[:, :RAW_TOP], Wt[:, :RAW_TOP]
    opts = ["--hash-buckets", 256, "--hash-functions", 2, "--num-labels", NUM, "--threads", 1, "--format", fmt]
    r = _cli("train", train, "-o", tmp_path / "m", *opts)
    assert r.returncode == 0, r.stderr
    r = _cli("predict", tmp_path / "m", test, "-o", tmp_path / "pred.txt", "-k", 3, "--allow-gaps", "--format", fmt)
    assert r.returncode == 0, r.stderr
    labels, scores = read_predictions(tmp_path / "pred.txt")
    model, _ = fit_model(W, Y[:800], TrainParams(threads=1, hash_buckets=256, hash_functions=2), num_labels=NUM)
    want_l, want_s = predict_topk(model, Wt, 3)
    np.testing.assert_array_equal(labels, want_l)
    np.testing.assert_allclose(scores, want_s, rtol=5e-6)
    r = _cli("evaluate", tmp_path / "m", test, "-k", 3, "--allow-gaps", "--json", "--format", fmt)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["P@1"] > 0
    r = _cli("evaluate", "--predictions", tmp_path / "pred.txt", test, "--json", "--format", fmt)
    assert r.returncode == 0, r.stderr      # (the predictions' data: its features are not read as int32)
    r = _cli("train", train, "-o", tmp_path / "plain", "--num-labels", NUM, "--threads", 1, "--format", fmt)
    assert r.returncode == 2 and f"train{ext}:" in r.stderr and "--hash-buckets" in r.stderr, r.stderr
    assert not (tmp_path / "plain").exists()
    if fmt == "libsvm":
        with open(test, "a") as f:
            f.write(f"0 {RAW_TOP + 1}:1\n")
        r = _cli("predict", tmp_path / "m", test, "-o", tmp_path / "bad.txt", "--allow-gaps", "--format", fmt)
        assert r.returncode == 2 and f"test{ext}:201:3: feature index {RAW_TOP + 1} out of range" in r.stderr, r.stderr
        assert not (tmp_path / "bad.txt").exists()
