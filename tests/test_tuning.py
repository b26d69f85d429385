"""Per-label thresholds by cross-validation (headstart.tuning; LibMultiLabel's
``thresholding``): the compiled cuts against brute force over every threshold, the
nested procedure against a per-label reference written with numpy, the gain in
Macro-F1 on bibtex, and the command line."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp

import headstart
from headstart.metrics import f1_scores
from headstart.prediction.topk import decision_function
from headstart.tuning import scutfbr
from headstart.tuning._kernels import best_cuts, f1_at
from test_cli import run

PARAMS = headstart.TrainParams(init="aop", normalize=True, threads=2)


def f1(y: np.ndarray, d: np.ndarray) -> float:
    tp = int(np.sum(y & d))
    den = int(y.sum() + d.sum())
    return 2 * tp / den if den else 0.0


def no_decision(top: float) -> float:
    """A fold's 'predict nothing' threshold: above its largest score, never below 0."""
    return 0.0 if top < 0 else float(np.nextafter(np.float32(top), np.float32(np.inf)))


def brute_cut(s: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(threshold, F1, no-decision threshold) by trying every distinct decision set
    'score > t'; of equal F1 the highest t, and 0 unless it beats the decision score > 0."""
    v = np.unique(s.astype(np.float64))
    cands = np.concatenate([[v[0] - 1.0], (v[:-1] + v[1:]) / 2, [v[-1] + 1.0]])
    scores = [f1(y, s > t) for t in cands]
    best = max(scores)
    t = max(c for c, f in zip(cands, scores) if f == best)
    f0 = f1(y, s > 0)
    top = no_decision(float(s.max()))
    return (t, best, top) if best > f0 else (0.0, f0, top)


def test_best_cuts_are_the_brute_force_optimum():
    rng = np.random.default_rng(3)
    rows = []
    for case in range(300):
        n = int(rng.integers(1, 40))
        s = rng.normal(size=n).astype(np.float32)
        if case % 3 == 0:                       # ties between positives and negatives
            s = np.round(s, 0).astype(np.float32)
        p = [0.0, 1.0, 0.1, 0.3, 0.6][case % 5]
        y = rng.random(n) < p
        rows.append((s, y))
    n = max(len(s) for s, _ in rows)
    # one block of labels; pad the shorter ones with a score far below (never predicted
    # by any candidate threshold, and a negative): compare on the padded data
    S = np.full((len(rows), n), -1e6, dtype=np.float32)
    ind, ptr = [], [0]
    for j, (s, y) in enumerate(rows):
        S[j, :s.size] = s
        ind.extend(np.flatnonzero(y))
        ptr.append(len(ind))
    t, f, top = np.empty(len(rows)), np.empty(len(rows)), np.empty(len(rows))
    best_cuts(S, np.asarray(ptr, np.int64), np.asarray(ind, np.int64), t, f, top)
    for j, (s, y) in enumerate(rows):
        sp_, yp = S[j], np.zeros(n, bool)
        yp[:y.size] = y
        bt, bf, btop = brute_cut(sp_, yp)
        assert f[j] == pytest.approx(bf, abs=1e-12), j
        assert top[j] == btop
        # the same decisions (the thresholds may differ inside the same gap)
        assert np.array_equal(sp_ > t[j], sp_ > bt), (j, t[j], bt)
        assert f1(yp, sp_ > t[j]) == pytest.approx(f[j], abs=1e-12)


def test_f1_at_counts_like_numpy():
    rng = np.random.default_rng(0)
    S = rng.normal(size=(7, 50)).astype(np.float32)
    Y = rng.random((7, 50)) < 0.2
    T = rng.normal(size=(7, 4))
    out = np.empty((7, 4))
    ptr = np.concatenate([[0], np.cumsum(Y.sum(1))]).astype(np.int64)
    ind = np.concatenate([np.flatnonzero(y) for y in Y]).astype(np.int64)
    f1_at(S, ptr, ind, T, out)
    want = [[f1(Y[j], S[j] > T[j, m]) for m in range(4)] for j in range(7)]
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def bib(bibtex_dir):
    X, Y = headstart.read_xmc(bibtex_dir / "train.txt.gz")
    Xt, Yt = headstart.read_xmc(bibtex_dir / "test.txt.gz")
    return X, Y, Xt, Yt


def reference_scutfbr(X, Y, params, folds, fbr_values, seed):
    """The nested procedure label by label with numpy (the same folds, drawn from the
    generator in the same order; each fold's one-vs-all model from fit_model)."""
    from headstart.estimator import fit_model, prepare_data

    data = prepare_data(X, Y, params)
    Xp, Yd = data.X.tocsr(), sp.csr_matrix(data.Y).toarray().astype(bool)
    plain = dataclasses.replace(params, normalize=False)
    n, L = Yd.shape
    rng = np.random.default_rng(seed)

    def split(perm):
        return [np.sort(perm[f * perm.size // folds:(f + 1) * perm.size // folds]) for f in range(folds)]

    def scores(train, val):
        m, _ = fit_model(Xp[train], Yd[train], plain)
        return decision_function(m, Xp[val], preprocess=False)

    def inner(rows, fbr_of_label):                    # fbr_of_label: L x values
        acc = np.zeros_like(fbr_of_label)
        for v in split(rng.permutation(rows.size)):
            val = rows[v]
            S = scores(np.setdiff1d(rows, val), val)
            for j in range(L):
                t, f, top = brute_cut(S[:, j], Yd[val, j])
                acc[j] += np.where(f > fbr_of_label[j], t, top)
        return acc / folds

    outer_f = np.zeros((L, len(fbr_values)))
    for val in split(rng.permutation(n)):
        train = np.setdiff1d(np.arange(n), val)
        t = inner(train, np.tile(fbr_values, (L, 1)))
        S = scores(train, val)
        for j in range(L):
            outer_f[j] += [f1(Yd[val, j], S[:, j] > t[j, m]) for m in range(len(fbr_values))]
    chosen = np.empty(L)
    for j in range(L):
        f = outer_f[j] / folds
        chosen[j] = min(fbr_values) if f.max() == 0 else max(v for v, x in zip(fbr_values, f) if x == f.max())
    return inner(np.arange(n), chosen[:, None])[:, 0], chosen


def test_scutfbr_is_the_per_label_procedure(bib):
    X, Y, _, _ = bib
    # labels with few and many positives in 600 rows, and one without any
    X, Y = X[:600], sp.hstack([Y[:600, :40], sp.csr_matrix((600, 1))], format="csr")
    fbr = (0.1, 0.3, 0.5)
    got = scutfbr(X, Y, PARAMS, folds=3, fbr_values=fbr, seed=7)
    want_t, want_fbr = reference_scutfbr(X, Y, PARAMS, 3, fbr, 7)
    assert got.trainings == 15
    np.testing.assert_array_equal(got.fbr, want_fbr)
    # thresholds inside the same gaps of scores may differ; the midpoints are the same here
    np.testing.assert_allclose(got.thresholds, want_t, rtol=1e-6, atol=1e-6)
    assert (np.asarray(Y.sum(0)).ravel() == 0).any()   # the empty-label case is covered


def test_thresholds_raise_macro_f1_on_bibtex(bib):
    """LibMultiLabel's reason for thresholding: per-label thresholds chosen on held-out
    folds nearly double Macro-F1 of the sign decisions (0.21 -> 0.40 measured)."""
    X, Y, Xt, Yt = bib
    r = scutfbr(X, Y, PARAMS)
    clf = headstart.OvAClassifier(init="aop", normalize=True, threads=2).fit(X, Y)
    S = clf.decision_function(Xt)
    sign = f1_scores(Yt, S, 0.0)
    D = clf.predict(Xt, threshold=r.thresholds)
    assert np.array_equal(D.toarray().astype(bool), S > r.thresholds[None, :])
    # the record itself stands for its thresholds, as micromacro's array does
    assert (clf.predict(Xt, threshold=r) != D).nnz == 0
    tuned = f1_scores(Yt, D.toarray(), 0.5)
    assert tuned["Macro-F1"] > sign["Macro-F1"] + 0.1
    assert tuned["Micro-F1"] > sign["Micro-F1"]


def test_scutfbr_refuses_bad_parameters(bib):
    X, Y, _, _ = bib
    with pytest.raises(headstart.ParameterError, match="folds"):
        scutfbr(X[:50], Y[:50], PARAMS, folds=1)
    with pytest.raises(headstart.ParameterError, match="fbr_values"):
        scutfbr(X[:50], Y[:50], PARAMS, fbr_values=(0.1, 1.5))
    with pytest.raises(headstart.ParameterError, match="too few"):
        scutfbr(X[:5], Y[:5], PARAMS)
    with pytest.raises(headstart.ParameterError, match="seed"):
        scutfbr(X[:50], Y[:50], PARAMS, seed=-1)
    with pytest.raises(headstart.ParameterError, match="timeout"):
        scutfbr(X[:50], Y[:50], headstart.TrainParams(timeout=1.0))


def test_cli_thresholds_predict_and_evaluate(bibtex_dir, tmp_path, capsys):
    train, test = bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz"
    thr, model, pred = tmp_path / "t.txt", tmp_path / "m", tmp_path / "p.txt"
    opts = ["--init", "aop", "--normalize", "--threads", "2"]
    code, out, err = run(capsys, "thresholds", train, "-o", thr, "--method", "scutfbr", "--fbr", "0.1,0.4", *opts)
    assert code == 0, err
    t = np.loadtxt(thr)
    want = scutfbr(*headstart.read_xmc(train), PARAMS, fbr_values=(0.1, 0.4)).thresholds
    np.testing.assert_array_equal(t, want)        # written with every digit
    assert run(capsys, "train", train, "-o", model, "-q", *opts)[0] == 0
    code, out, err = run(capsys, "predict", model, test, "-o", pred, "--thresholds", thr)
    assert code == 0, err
    D = headstart.io.read_label_file(pred)
    m = headstart.load(model)
    Xt, Yt = headstart.read_xmc(test)
    S = m.decision_function(Xt)
    assert np.array_equal(D.toarray().astype(bool), S > t[None, :])
    code, out, err = run(capsys, "evaluate", model, test, "--thresholds", thr, "--json")
    assert code == 0, err
    import json
    res = json.loads(out)
    assert res["Macro-F1"] == pytest.approx(f1_scores(Yt, S > t[None, :], 0.5)["Macro-F1"], abs=1e-12)
    # the file says what it was chosen for; a model trained otherwise is warned of (helper-80:
    # a logistic model's thresholds on a squared-hinge model lost 2/3 of Micro-F1 silently)
    from headstart.io.labelvec import read_label_header

    header = read_label_header(thr)
    assert header["made_by"] == "headstart thresholds" and header["method"] == "scutfbr"
    assert header["params"]["loss"] == "squared-hinge" and header["params"]["normalize"] is True
    assert "chosen for" not in err
    other = tmp_path / "m2"
    assert run(capsys, "train", train, "-o", other, "-q", "--loss", "logistic", *opts)[0] == 0
    for cmd in (["predict", other, test, "-o", tmp_path / "p2.txt"], ["evaluate", other, test]):
        code, out, err = run(capsys, *cmd, "--thresholds", thr)
        assert code == 0 and err.count("chosen for models trained with --loss 'squared-hinge' (model: 'logistic')") == 1, err
    # a file written by hand, with comments, reads as before and is compared with nothing
    hand = tmp_path / "hand.txt"
    hand.write_text("# my thresholds\n" + "".join(f"{float(v)!r}\n" for v in t))
    code, out, err = run(capsys, "predict", other, test, "-o", tmp_path / "p3.txt", "--thresholds", hand)
    assert code == 0 and "chosen for" not in err
    assert (tmp_path / "p3.txt").read_bytes() == (tmp_path / "p2.txt").read_bytes()


def test_thresholds_of_another_C_are_warned_of():
    """The README promises a warning when the model's loss, C, bias, normalisation ...
    differ from the options the thresholds were chosen with; C (what 'headstart cv'
    changes, and which scales the scores as reg_scale does) was not compared (audit
    s80-h1: thresholds chosen at C 2 applied to a C 1 model without a word).  Options
    that do not change the scores' scale (threads, epsilon) stay uncompared."""
    from dataclasses import asdict

    from headstart.cli.predict import score_options_differ

    chosen = asdict(headstart.TrainParams(C=2.0, normalize=True))
    model = asdict(headstart.TrainParams(C=1.0, normalize=True, threads=2, epsilon=0.001))
    assert score_options_differ(chosen, model) == ["--C 2.0 (model: 1.0)"]
    assert score_options_differ(chosen, {**chosen, "threads": 3}) == []


def test_cli_threshold_files_are_read_strictly(bibtex_dir, tmp_path, capsys):
    train, test = bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz"
    model = tmp_path / "m"
    assert run(capsys, "train", train, "-o", model, "-q", "--first-label", "0", "--num-labels", "3")[0] == 0
    bad = tmp_path / "bad.txt"
    bad.write_text("0.5\n" * 10 + "0.1 x\n")
    out = tmp_path / "p.txt"
    code, _, err = run(capsys, "predict", model, test, "-o", out, "--thresholds", bad, "--allow-gaps")
    assert code == 2 and "bad.txt:11: 'x' is not a number" in err and not out.exists()
    bad.write_text("0.5\n" * 3)
    code, _, err = run(capsys, "evaluate", model, test, "--thresholds", bad, "--allow-gaps")
    assert code == 2 and "3 thresholds, the model has 159 labels" in err
    code, _, err = run(capsys, "predict", model, test, "-o", out, "--thresholds", bad, "--threshold", "0")
    assert code == 2 and "give one of them" in err
    code, _, err = run(capsys, "thresholds", train, "-o", tmp_path / "t.txt", "--folds", "1")
    assert code == 2 and "--folds" in err and not (tmp_path / "t.txt").exists()
    code, _, err = run(capsys, "thresholds", train, "-o", tmp_path / "t.txt", "--fbr", "0.2,1")
    assert code == 2 and "--fbr" in err
    code, _, err = run(capsys, "thresholds", train, "-o", tmp_path / "t.txt", "--fbr", "0.1")
    assert code == 2 and "--fbr is for --method scutfbr" in err     # helper-51: was ignored
    for bad in (["--seed=-1"], ["--timeout", "5"]):     # refused before the data is read
        code, _, err = run(capsys, "thresholds", train, "-o", tmp_path / "t.txt", *bad)
        assert code == 2 and bad[0].split("=")[0] in err and not (tmp_path / "t.txt").exists()
    small = tmp_path / "small.txt"
    small.write_text("8 3 2\n" + "0 0:1 1:0.5\n1 2:1\n" * 4)
    code, _, err = run(capsys, "thresholds", small, "-o", tmp_path / "t.txt", "--method", "scutfbr")
    assert code == 2 and "small.txt" in err and "too few for --folds 3" in err
    code, _, err = run(capsys, "thresholds", small, "-o", small)
    assert code == 2 and "would replace an input" in err and small.read_text().startswith("8 3 2")


def test_one_comparison_rule_for_a_number_and_a_vector():
    """A float32 score against 0.1: the same decision for --threshold 0.1 and a vector of
    0.1s (both exact in float64), where rounding only the number to float32 would not."""
    from headstart.prediction.topk import predict_above

    W = sp.csr_matrix(np.array([[0.1, 0.3]], dtype=np.float32))
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    one = predict_above((W, np.zeros(1)), X, 0.1).toarray()
    vec = predict_above((W, np.zeros(1)), X, np.array([0.1])).toarray()
    assert np.array_equal(one, vec) and one.ravel().tolist() == [1, 1]   # float32(0.1) > 0.1 exactly


def test_thresholds_with_a_hashing_model_and_npy_files(bibtex_dir, tmp_path, capsys):
    """Per-label thresholds on a model that hashes its features (raw data of any width),
    in memory and from the API; thresholds written and read as .npy."""
    train, test = bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz"
    opts = ["--hash-buckets", "64", "--hash-functions", "4", "--threads", "2"]
    assert run(capsys, "thresholds", train, "-o", tmp_path / "t.npy", *opts)[0] == 0
    t = np.load(tmp_path / "t.npy", allow_pickle=False)
    assert t.shape == (159,) and t.dtype == np.float64
    assert run(capsys, "train", train, "-o", tmp_path / "m", "-q", *opts)[0] == 0
    code, out, err = run(capsys, "predict", tmp_path / "m", test, "-o", tmp_path / "p.txt", "--thresholds",
                         tmp_path / "t.npy")
    assert code == 0, err
    m = headstart.load(tmp_path / "m")
    Xt, _ = headstart.read_xmc(test)
    want = m.decision_function(Xt).astype(np.float64) > t[None, :]
    assert np.array_equal(m.predict(Xt, threshold=t).toarray().astype(bool), want)
    assert np.array_equal(headstart.io.read_label_file(tmp_path / "p.txt").toarray().astype(bool), want)
    # a non-finite entry is named plainly (was "np.float64(inf)"), nothing written
    t[3] = np.inf
    np.save(tmp_path / "bad.npy", t)
    code, _, err = run(capsys, "predict", tmp_path / "m", test, "-o", tmp_path / "q.txt", "--thresholds",
                       tmp_path / "bad.npy")
    assert code == 2 and "entry 3: threshold inf is not a finite number" in err and not (tmp_path / "q.txt").exists()
    # --beam-width is a tree's option, but an invalid value is refused for any model
    code, _, err = run(capsys, "predict", tmp_path / "m", test, "-o", tmp_path / "q.txt", "--beam-width", "0")
    assert code == 2 and "--beam-width: must be >= 1" in err and not (tmp_path / "q.txt").exists()


def reference_costs(X, Y, params, folds, candidates, seed, tmp):
    """LibMultiLabel's cost_sensitive label by label with numpy: the cross-validated
    decisions score > 0 of every candidate cost (LIBLINEAR's -w1 is weighting 'file'
    with that cost for every label), F1 per label, the first best."""
    from headstart.estimator import fit_model, prepare_data

    data = prepare_data(X, Y, params)
    Xp, Yd = data.X.tocsr(), sp.csr_matrix(data.Y).toarray().astype(bool)
    n, L = Yd.shape
    perm = np.random.default_rng(seed).permutation(n)
    parts = [np.sort(perm[f * n // folds:(f + 1) * n // folds]) for f in range(folds)]
    F = np.zeros((L, len(candidates)))
    for c, a in enumerate(candidates):
        path = tmp / f"c{c}.txt"
        np.savetxt(path, np.full(L, a))
        p = dataclasses.replace(params, normalize=False, weighting="file", weights_pos_file=path)
        D = np.zeros_like(Yd)
        for val in parts:
            m, _ = fit_model(Xp[np.setdiff1d(np.arange(n), val)], Yd[np.setdiff1d(np.arange(n), val)], p)
            D[val] = decision_function(m, Xp[val], preprocess=False) > 0
        F[:, c] = [f1(Yd[:, j], D[:, j]) for j in range(L)]
    return np.asarray(candidates)[np.argmax(F, axis=1)], F


def test_cost_sensitive_is_the_per_label_procedure(bib, tmp_path):
    from headstart.tuning import cost_sensitive

    X, Y, _, _ = bib
    X, Y = X[:600], sp.hstack([Y[:600, :40], sp.csr_matrix((600, 1))], format="csr")
    cands = (1.0, 2.5, 13.0)
    got = cost_sensitive(X, Y, PARAMS, costs=cands, seed=5)
    want, F = reference_costs(X, Y, PARAMS, 3, cands, 5, tmp_path)
    assert got.trainings == 9
    np.testing.assert_allclose(got.f1, F, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got.costs, want)
    assert len(set(got.costs)) > 1
    micro = cost_sensitive(X, Y, PARAMS, costs=cands, seed=5, micro=True)
    assert len(set(micro.costs)) == 1 and micro.costs[0] == cands[int(np.argmax(micro.micro_f1))]
    with pytest.raises(headstart.ParameterError, match="weighting"):
        cost_sensitive(X, Y, headstart.TrainParams(weighting="2pm1"))


def test_cli_costs_train_with_them(bibtex_dir, tmp_path, capsys):
    """'headstart costs' then 'train --weighting file --weights-pos-file': Macro-F1 of the
    sign decisions on bibtex rises (0.21 -> 0.34 measured)."""
    import json

    train, test = bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz"
    costs, plain, tuned = tmp_path / "c.txt", tmp_path / "plain", tmp_path / "tuned"
    opts = ["--init", "aop", "--normalize", "--threads", "2"]
    code, out, err = run(capsys, "costs", train, "-o", costs, "--costs", "1,3.67,13", *opts)
    assert code == 0 and "--weights-pos-file" in out, err
    assert np.loadtxt(costs).shape == (159,)
    assert run(capsys, "train", train, "-o", plain, "-q", *opts)[0] == 0
    assert run(capsys, "train", train, "-o", tuned, "-q", "--weighting", "file", "--weights-pos-file", costs,
               *opts)[0] == 0
    f = {}
    for name, model in (("plain", plain), ("tuned", tuned)):
        code, out, err = run(capsys, "evaluate", model, test, "--threshold", "0", "--json")
        assert code == 0, err
        f[name] = json.loads(out)["Macro-F1"]
    assert f["tuned"] > f["plain"] + 0.08
    code, _, err = run(capsys, "costs", train, "-o", tmp_path / "x.txt", "--costs", "1,0")
    assert code == 2 and "--costs" in err and not (tmp_path / "x.txt").exists()


def literal_micromacro(S, Y, parts, order):
    """LibMultiLabel's micromacro-freq scan written out label by label, fold by fold:
    every cut from 'all positive' upwards, the objective Micro-F1 (with the counts of
    the labels before) + F1 / labels so far, the later of equal cuts (float64 scores
    without ties, so its tie handling does not matter)."""
    T = np.zeros(len(order))
    tp_all = fp_all = fn_all = 0
    for k, j in enumerate(order, 1):
        ts, stp, sfp, sfn = [], 0, 0, 0
        for val in parts:
            s, y = S[val, j], Y[val, j]
            o = np.argsort(s, kind="stable")
            ss = s[o]

            def obj(tp, fp, fn):
                d = 2 * tp + fp + fn
                D = 2 * (tp + tp_all) + fp + fn + fp_all + fn_all
                return (2 * (tp + tp_all) / D if D else 0.0) + ((2 * tp / d if d else 0.0) / k)

            tp, fp, fn = int(y.sum()), int((~y).sum()), 0
            best, cut, counts = obj(tp, fp, fn), -1, (tp, fp, fn)
            for i in range(s.size):
                if y[o[i]]:
                    tp, fn = tp - 1, fn + 1
                else:
                    fp -= 1
                v = obj(tp, fp, fn)
                if v >= best:
                    best, cut, counts = v, i, (tp, fp, fn)
            if cut == -1:
                ts.append(np.nextafter(ss[0], -np.inf))
            elif cut == s.size - 1:
                ts.append(no_decision(ss[-1]))
            else:
                ts.append((ss[cut] + ss[cut + 1]) / 2)
            stp, sfp, sfn = stp + counts[0], sfp + counts[1], sfn + counts[2]
        T[j] = np.mean(ts)
        tp_all, fp_all, fn_all = tp_all + stp, fp_all + sfp, fn_all + sfn
    return T


def test_micromacro_cuts_follow_the_literal_scan():
    from headstart.tuning._kernels import micromacro_cuts

    rng = np.random.default_rng(11)
    n, L = 90, 40
    S = rng.normal(size=(n, L)).astype(np.float32)         # float32 values, no ties (checked)
    assert all(np.unique(S[:, j]).size == n for j in range(L))
    Y = rng.random((n, L)) < rng.uniform(0, 0.4, size=L)
    Y[:, 3] = False                                          # a label without positives
    parts = [np.arange(0, 30), np.arange(30, 61), np.arange(61, 90)]
    order = np.lexsort((np.arange(L), -Y.sum(0)))
    want = literal_micromacro(S.astype(np.float64), Y, parts, order)
    stats, got = np.zeros(4), np.empty(L)
    for a in range(0, L, 7):                                 # blocks carry the counts on
        lab = order[a:a + 7]
        Yb = sp.csc_matrix(Y[:, lab])
        t = np.empty(lab.size)
        micromacro_cuts(np.ascontiguousarray(S[:, lab].T), np.array([0, 30, 61, 90]), Yb.indptr.astype(np.int64),
                        Yb.indices.astype(np.int64), stats, t)
        got[lab] = t
    # equal but where a fold's cut is above or below all its scores: one float32 step
    # there, one float64 step in the literal scan
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert stats[3] == L


def test_a_fold_without_negatives_keeps_every_row_at_most_at_0():
    """A label positive on every row: each fold's cut predicts every row, just below the
    fold's lowest score and never above 0, as the fold had nothing to reject.  Before,
    the fold models' scores (about the bias) were above the final model's, and the mean
    of thresholds just below them rejected every row (F1 0 on a label that is always on)."""
    from headstart.tuning import micromacro
    from headstart.tuning._kernels import micromacro_cuts

    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.random((60, 8)) * (rng.random((60, 8)) < 0.6))
    Y = np.zeros((60, 3), dtype=bool)
    Y[:, 0] = True
    Y[:, 1] = X.toarray()[:, 0] > 0.3
    Y[:, 2] = X.toarray()[:, 1] > 0.5
    params = headstart.TrainParams(threads=1)
    t = micromacro(X, sp.csr_matrix(Y), params)
    assert t[0] <= 0
    clf = headstart.OvAClassifier(threads=1).fit(X, sp.csr_matrix(Y))
    kept = clf.predict(X, threshold=t).toarray()[:, 0].astype(bool)
    assert f1(Y[:, 0], kept) == 1.0

    # the kernel on its own: all positives in both folds; scores above 0 give 0, a fold
    # reaching below 0 gives just below its lowest score
    S = np.array([[0.5, 2.0, 1.0, -0.25, 3.0, 0.75]], dtype=np.float32)
    idx = np.arange(6, dtype=np.int64)
    out = np.empty(1)
    micromacro_cuts(S, np.array([0, 3, 6]), np.array([0, 6]), idx, np.zeros(4), out)
    below = float(np.nextafter(np.float32(-0.25), np.float32(-np.inf)))
    assert out[0] == (0.0 + below) / 2               # the mean of the two folds' cuts


def test_micromacro_raises_micro_and_macro_f1_on_bibtex(bib, bibtex_dir, tmp_path, capsys):
    """LibMultiLabel >= 0.4's method: Micro-F1 39.35 -> 47.75 and Macro-F1 21.24 -> 40.17
    on bibtex (its own run: 47.74 / 40.24, docs/benchmarks.md); the CLI's default."""
    from headstart.tuning import micromacro

    X, Y, Xt, Yt = bib
    t = micromacro(X, Y, PARAMS)
    clf = headstart.OvAClassifier(init="aop", normalize=True, threads=2).fit(X, Y)
    sign = f1_scores(Yt, clf.decision_function(Xt), 0.0)
    tuned = f1_scores(Yt, clf.predict(Xt, threshold=t).toarray(), 0.5)
    assert tuned["Macro-F1"] > sign["Macro-F1"] + 0.15 and tuned["Micro-F1"] > sign["Micro-F1"] + 0.05
    out = tmp_path / "t.txt"
    code, _, err = run(capsys, "thresholds", bibtex_dir / "train.txt.gz", "-o", out, "--init", "aop", "--normalize",
                       "--threads", "2")
    assert code == 0, err
    np.testing.assert_array_equal(np.loadtxt(out), t)


def test_no_command_writes_its_output_over_an_input(bibtex_dir, tmp_path, capsys):
    """'-o' naming a file the command reads is refused before any work: the atomic write
    would otherwise replace the user's data with the output."""
    import shutil

    test = tmp_path / "test.txt.gz"
    shutil.copy(bibtex_dir / "test.txt.gz", test)
    before = test.read_bytes()
    model = tmp_path / "m"
    assert run(capsys, "train", bibtex_dir / "train.txt.gz", "-o", model, "-q", "--num-labels", "3")[0] == 0
    thr = tmp_path / "t.txt"
    np.savetxt(thr, np.zeros(159))
    for argv in (["predict", model, test, "-o", test, "--allow-gaps"],
                 ["predict", model, test, "-o", thr, "--thresholds", thr, "--allow-gaps"],
                 ["convert", test, test]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and "would replace an input" in err, (argv, err)
    assert test.read_bytes() == before and np.loadtxt(thr).shape == (159,)


def test_npy_thresholds_carry_their_training_options(tmp_path, capsys):
    """thresholds -o FILE.npy: the options go in FILE.npy.json beside it (a .npy has no room
    for the text form's '# headstart' line), which names the .npy's checksum; predict and
    evaluate warn of a model trained otherwise as for the text form (helper-80 left .npy
    thresholds without); a plain .npy of the user's, or one replaced after its sidecar,
    reads as before and is compared with nothing (the replaced one said)."""
    from pathlib import Path

    from headstart.io.labelvec import read_label_header, sidecar, write_label_values

    from _reference import data_path

    train, test = data_path("medical", "train"), data_path("medical", "test")
    if train is None or test is None:     # a fresh checkout without ../shared/data
        pytest.skip("dataset medical not found (data/ or ../shared/data)")
    thr, txt = tmp_path / "t.npy", tmp_path / "t.txt"
    opts = ["--threads", "1", "--folds", "2"]
    for out in (thr, txt):
        code, _, err = run(capsys, "thresholds", train, "-o", out, *opts)
        assert code == 0, err
    np.testing.assert_array_equal(np.load(thr), np.loadtxt(txt))
    assert read_label_header(thr) == read_label_header(txt) and read_label_header(thr)["params"]["loss"] == "squared-hinge"
    assert json.loads(Path(sidecar(thr)).read_text())["header"] == read_label_header(txt)
    model, other = tmp_path / "m", tmp_path / "m2"
    assert run(capsys, "train", train, "-o", model, "-q", "--threads", "1")[0] == 0
    assert run(capsys, "train", train, "-o", other, "-q", "--threads", "1", "--loss", "logistic")[0] == 0
    code, _, err = run(capsys, "predict", model, test, "-o", tmp_path / "p.txt", "--thresholds", thr)
    assert code == 0 and "chosen for" not in err, err
    for cmd in (["predict", other, test, "-o", tmp_path / "p2.txt"], ["evaluate", other, test]):
        code, _, err = run(capsys, *cmd, "--thresholds", thr)
        assert code == 0 and err.count("chosen for models trained with --loss 'squared-hinge' (model: "
                                       "'logistic')") == 1, err
    code, out, err = run(capsys, "info", thr)
    assert code == 0 and "made for: headstart thresholds (its header: " in out, err
    # a user's own .npy (no sidecar) and one replaced after its sidecar: read, not compared
    plain = tmp_path / "plain.npy"
    np.save(plain, np.load(thr))
    code, _, err = run(capsys, "predict", other, test, "-o", tmp_path / "p3.txt", "--thresholds", plain)
    assert code == 0 and "chosen for" not in err and "checksum" not in err, err
    assert (tmp_path / "p3.txt").read_bytes() == (tmp_path / "p2.txt").read_bytes()
    np.save(thr, np.load(thr) + 0.25)
    code, _, err = run(capsys, "predict", other, test, "-o", tmp_path / "p4.txt", "--thresholds", thr)
    assert code == 0 and "chosen for" not in err and "t.npy.json describes other values than" in err, err
    # written again without a header (e.g. costs): the old sidecar goes
    write_label_values(thr, np.zeros(3))
    assert not Path(sidecar(thr)).exists() and read_label_header(thr) is None


def _mostly_unused_label_space(L: int = 30_000, used: int = 12, n: int = 90, d: int = 15, seed: int = 0):
    """(X, Y): n rows whose 1-2 labels each are ``used`` ids spread over a label space
    of L (the rest without a positive), features that tell the labels apart."""
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(L, used, replace=False))
    X = sp.random(n, d, density=0.3, random_state=seed, dtype=np.float32, format="lil")
    rows, cols = [], []
    for i in range(n):
        for j in rng.choice(used, int(rng.integers(1, 3)), replace=False):
            rows.append(i)
            cols.append(ids[j])
            X[i, j % d] = 1.0 + j
    Y = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n, L))
    Y.sum_duplicates()
    return sp.csr_matrix(X), Y


@pytest.mark.parametrize("costs", [False, True])
@pytest.mark.parametrize("method", ["micromacro", "scutfbr"])
def test_thresholds_score_the_unused_labels_of_a_label_space_once(method, costs, monkeypatch, tmp_path):
    """Labels without a positive whose fold models score their intercept everywhere
    (empty weight rows) take the results of one of equal intercepts instead of dense
    score blocks of their own: O(rows x labels) per fold made micromacro 35 s on 5,000
    rows of a 2M-label space of which 300 are used.  The thresholds are bit for bit those
    of scoring every label."""
    from headstart.tuning import folds as F
    from headstart.tuning import micromacro

    X, Y = _mostly_unused_label_space()
    L = Y.shape[1]
    params = dataclasses.replace(PARAMS, threads=1)
    if costs:
        # from zero, the negatives' cost moves the intercept of a label without positives:
        # two intercepts among the unused labels (and a different one per fold model)
        path = tmp_path / "neg.npy"
        np.save(path, np.where(np.arange(L) % 2 == 0, 1.0, 3.0))
        params = dataclasses.replace(params, init="zero", weighting="file", weights_neg_file=str(path))
    scored: list[int] = []
    scores = F.FoldRunner.scores

    def counting(self, W, b, Xv, out=None):
        scored.append(W.shape[0])
        return scores(self, W, b, Xv, out)

    def tune():
        if method == "micromacro":
            return (micromacro(X, Y, params, folds=3, seed=1),)
        r = scutfbr(X, Y, params, folds=3, fbr_values=(0.1, 0.5), seed=1)
        return r.thresholds, r.fbr, r.outer_f1

    monkeypatch.setattr(F.FoldRunner, "scores", counting)
    got = tune()
    shared = sum(scored)
    scored.clear()
    # one result per intercept of the unused labels (two with two costs from zero)
    run = F.FoldRunner(X, Y, params, None, min_rows=3, what="a test")
    W, b = run.train(np.arange(60))
    src = run.shared_results([(W, b)], np.arange(L))
    assert np.unique(src[run.free]).size == (2 if costs else 1)
    assert np.unique(b[run.free]).size == (2 if costs else 1)
    # the reference: every label scored on its own
    monkeypatch.setattr(F.FoldRunner, "shared_results", lambda self, models, labels, extra=None:
                        np.arange(len(labels)))
    want = tune()
    every = sum(scored)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert every >= 3 * L
    assert shared < every / 100
