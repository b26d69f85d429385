"""Feature value transforms: the values, and that prediction applies exactly what
training applied (API, model directory, sharded training, command line)."""

from __future__ import annotations

import json
import math
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
from headstart.prediction.transforms import transform_values_inplace

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
    msg = rf"transform {name} needs values {domain}.*row 1, feature 1 has value {value}"
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
    ({"transform": "log"}, "parameter transform must be one of identity, log-one-plus, one-plus-log, sqrt"),
    ({"transform": None}, "parameter transform must be one of"),
    ({"transform": 1}, "parameter transform must be one of"),
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
    with_t, _ = fit_model(X, Y, params.replace(transform=name), num_labels=NUM)
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
    params = PARAMS.replace(transform="sqrt", tfidf=True, normalize=True)
    model, _ = fit_model(X, Y, params, num_labels=NUM)
    want = predict_topk(model, Xt, 5)
    save_model(model, tmp_path / "m", shard_size=5)
    m = read_manifest(tmp_path / "m")
    assert m["preprocessing"] == {"normalize": True, "tfidf": True, "transform": "sqrt"}
    back = load_model(tmp_path / "m", allow_gaps=True)
    assert back.preprocessing.transform == "sqrt"
    np.testing.assert_array_equal(back.preprocessing.idf, model.preprocessing.idf)
    for got in (predict_topk(back, Xt, 5), predict_topk_streaming(tmp_path / "m", Xt, 5, allow_gaps=True),
                predict_topk(back, Xt.toarray(), 5, chunk_rows=100)):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_manifest_preprocessing_is_validated(counts, tmp_path):
    (X, Y), _ = counts
    model, _ = fit_model(X[:200], Y[:200], PARAMS.replace(transform="sqrt"), num_labels=3)
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
    del m["preprocessing"]["transform"], m["params"]["transform"]
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(m))
    back = load_model(tmp_path / "m")
    assert back.preprocessing.transform == "identity"
    ModelWriter.open(tmp_path / "m", PARAMS)  # resuming compares the complete parameter sets
    with pytest.raises(ModelFormatError, match="parameter transform is 'identity' in the model but 'sqrt' now"):
        ModelWriter.open(tmp_path / "m", PARAMS.replace(transform="sqrt"))


# --------------------------------------------------------------------------- sharded training
def test_sharded_training_transforms_and_resumes_like_the_local_run(counts, tmp_path):
    from headstart.distributed import train_sharded

    (X, Y), (Xt, _) = counts
    params = PARAMS.replace(transform="one-plus-log")
    ref, _ = fit_model(X, Y, params, num_labels=NUM)
    train_sharded(X, Y, params, tmp_path / "m", num_labels=8, shard_size=4)
    with pytest.raises(ModelFormatError, match="parameter transform is 'one-plus-log' in the model but 'sqrt' now"):
        train_sharded(X, Y, params.replace(transform="sqrt"), tmp_path / "m", num_labels=NUM, shard_size=4,
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
    assert m["params"]["transform"] == "log-one-plus" and m["preprocessing"]["transform"] == "log-one-plus"
    r = _cli("predict", tmp_path / "m", tmp_path / "test.txt", "-o", tmp_path / "pred.txt", "-k", 3,
             "--allow-gaps")
    assert r.returncode == 0, r.stderr
    labels, scores = read_predictions(tmp_path / "pred.txt")
    model, _ = fit_model(X[:1500], Y[:1500], TrainParams(threads=1, transform="log-one-plus"), num_labels=NUM)
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
    (tmp_path / "p.json").write_text('{"transform": "cube"}')
    r = _cli("train", "x.txt", "-o", tmp_path / "m", "--params", tmp_path / "p.json")
    assert r.returncode != 0 and "parameter transform (--transform) must be one of identity" in r.stderr
    assert not (tmp_path / "m").exists()
