"""The synthetic data generator (benchmarks/synth.py): statistics of the presets at a small
scale, learnable labels, determinism, and files that headstart's strict reader accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import synth  # noqa: E402

#: small scales: a few thousand rows each, well under a second to generate
SCALES = {"amazon-670k": 0.01, "amazoncat-13k": 0.01, "wikilshtc-325k": 0.004, "eurlex-4k": 0.2,
          "wiki10-31k": 0.2}


@pytest.fixture(scope="module")
def sets():
    return {name: synth.generate(name, s, seed=0) for name, s in SCALES.items()}


@pytest.mark.parametrize("name", sorted(SCALES))
def test_statistics_match_the_preset(sets, name):
    D, P = sets[name], synth.PRESETS[name]
    s = synth.statistics(D.X_train, D.Y_train)
    sp_ = synth.scaled(P, SCALES[name])
    assert (s["rows"], s["features"], s["labels"]) == (sp_.n_train, sp_.n_features, sp_.n_labels)
    assert D.X_test.shape[0] == sp_.n_test and D.Y_test.shape[1] == sp_.n_labels
    # the means the repository publishes, within a few percent at a few thousand rows
    assert s["labels_per_row"] == pytest.approx(P.labels_per_row, rel=0.04)
    assert s["rows_per_label"] == pytest.approx(P.rows_per_label, rel=0.04)
    assert s["nnz_per_row"] == pytest.approx(P.nnz_per_row, rel=0.03)
    # tf-idf like values: positive, every row L2-normalised
    X = D.X_train
    assert X.dtype == np.float32 and np.all(X.data > 0)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)
    assert np.all(np.diff(D.Y_train.indptr) >= 1)  # every row has a label


def test_label_and_feature_laws(sets):
    # Amazon-670K is tail-heavy, AmazonCat-13K head-heavy
    tail = synth.statistics(sets["amazon-670k"].X_train, sets["amazon-670k"].Y_train)
    head = synth.statistics(sets["amazoncat-13k"].X_train, sets["amazoncat-13k"].Y_train)
    assert tail["share_labels_le5"] > 0.7 and head["share_labels_le5"] < 0.05
    for name, D in sets.items():
        P = synth.scaled(synth.PRESETS[name], SCALES[name])
        pos = np.bincount(D.Y_train.indices, minlength=P.n_labels)
        srt = np.sort(pos)[::-1].astype(float)
        # Zipf: the log-log slope of frequency by rank over the head is about -exponent
        r = np.arange(2, max(4, P.n_labels // 10))
        ok = srt[r - 1] > 0
        slope = np.polyfit(np.log(r[ok]), np.log(srt[r - 1][ok]), 1)[0]
        assert -P.label_zipf - 0.35 < slope < -P.label_zipf + 0.35, (name, slope)
        # label ids are not frequency-ordered: id and frequency are uncorrelated
        rho = np.corrcoef(np.argsort(np.argsort(pos)), np.arange(P.n_labels))[0, 1]
        assert abs(rho) < 0.15, (name, rho)
        # words: a Zipf law (slope about -1 between ranks 10 and 200), no word in every row
        # -- for short documents; long ones (EURLex-4K's 237 of 5,000 words a row,
        # Wiki10-31K's 670) hold the common words in nearly every row, which flattens
        # the head of the document frequencies, as in real text
        df = np.sort(np.bincount(D.X_train.indices, minlength=P.n_features))[::-1].astype(float)
        assert df[0] < D.X_train.shape[0]
        if P.nnz_per_row < 100:
            r = np.arange(10, 200)
            slope = np.polyfit(np.log(r), np.log(df[r - 1]), 1)[0]
            assert -1.4 < slope < -0.5, (name, slope)
            assert df[0] < 0.8 * D.X_train.shape[0]


@pytest.mark.parametrize("name", ["amazon-670k", "wikilshtc-325k"])
def test_labels_are_learnable(name):
    """headstart (public API, all labels) ranks far better than always predicting the most
    frequent labels; an unlearnable set would score about the same."""
    from headstart import OvAClassifier
    from headstart.metrics import evaluate

    D = synth.generate(name, {"amazon-670k": 0.005, "wikilshtc-325k": 0.003}[name], seed=1)
    clf = OvAClassifier(init="aop", threads=2).fit(D.X_train, D.Y_train)
    lab, _ = clf.predict_topk(D.X_test, 5)
    pos = np.bincount(D.Y_train.indices, minlength=D.Y_train.shape[1])
    popular = np.tile(np.argsort(-pos, kind="stable")[:5], (D.X_test.shape[0], 1))
    got = float(evaluate(D.Y_test, lab, ks=(1,))["P@1"])
    base = float(evaluate(D.Y_test, popular, ks=(1,))["P@1"])
    assert got > 2.5 * base and got > base + 0.15, (got, base)


def test_deterministic_by_seed():
    a = synth.generate("amazon-670k", 0.003, seed=7)
    b = synth.generate("amazon-670k", 0.003, seed=7)
    c = synth.generate("amazon-670k", 0.003, seed=8)
    for x, y in ((a.X_train, b.X_train), (a.Y_train, b.Y_train), (a.X_test, b.X_test), (a.Y_test, b.Y_test)):
        assert (x != y).nnz == 0 and x.dtype == y.dtype
        np.testing.assert_array_equal(x.indptr, y.indptr)
        np.testing.assert_array_equal(x.indices, y.indices)
        np.testing.assert_array_equal(x.data, y.data)
    assert (a.Y_train != c.Y_train).nnz > 0 and (a.X_train != c.X_train).nnz > 0


@pytest.mark.parametrize("gzip", [True, False])
def test_files_read_back_exactly_with_the_strict_reader(tmp_path, gzip):
    from headstart.io import read_xmc

    D = synth.generate("wikilshtc-325k", 0.002, seed=3)
    meta = synth.write(D, tmp_path, gzip=gzip)
    ext = ".txt.gz" if gzip else ".txt"
    for split, X, Y in (("train", D.X_train, D.Y_train), ("test", D.X_test, D.Y_test)):
        Xr, Yr = read_xmc(tmp_path / f"{split}{ext}")
        assert Xr.shape == X.shape and Yr.shape == Y.shape
        for a, b in ((Xr, sp.csr_matrix(X)), (Yr, sp.csr_matrix(Y))):
            b = b.copy()
            b.sort_indices()
            np.testing.assert_array_equal(a.indptr, b.indptr)
            np.testing.assert_array_equal(a.indices, b.indices)
            np.testing.assert_array_equal(a.data, b.data.astype(a.dtype))
    assert meta["train"]["rows"] == D.X_train.shape[0]
    assert (tmp_path / "synth.json").is_file()


def test_cli_prints_generated_next_to_published(tmp_path):
    out = tmp_path / "am"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.synth", "amazon-670k", "--scale", "0.002",
                           "--seed", "1", "-o", str(out), "--plain"], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for word in ("generated", "published", "labels / row", "rows / label", "nonzeros / row",
                 "labels with <= 5 positives"):
        assert word in proc.stdout
    assert (out / "train.txt").is_file() and (out / "test.txt").is_file()
    bad = subprocess.run([sys.executable, str(REPO / "benchmarks" / "synth.py"), "amazon-670k", "--scale", "2",
                          "-o", str(out)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert bad.returncode != 0 and "--scale" in bad.stderr
