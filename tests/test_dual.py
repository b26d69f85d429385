"""L2 by dual coordinate descent (``l2_solver='dual'``, solver/dual.py) against independent
references: LIBLINEAR -s 1 (squared hinge) and -s 3 (hinge) for the solution's primal
objective, recomputed here in numpy; the dual's rule (max - min of the projected gradient)
recomputed in numpy from the weights' margins."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from headstart import TrainParams
from headstart.errors import ParameterError
from headstart.params import unused_parameters, validate
from headstart.training.trainer import train_labels
from headstart.validation import check_features

import _reference as ref

LABELS = np.array([0, 3, 40, 77, 120, 158])


@pytest.fixture(scope="module")
def bibtex():
    return ref.checked_dataset("bibtex")


def primal(Xa, y, w, loss):
    return float(0.5 * w @ w + ref._phi(loss, y * (Xa @ w)).sum())


def weights(W, b, k):
    return np.append(W[k].toarray().ravel().astype(np.float64), float(b[k]))


def dual_params(**kw):
    return TrainParams(l2_solver="dual", regularize_bias=True, prune=0.0, threads=1, **kw)


@pytest.mark.parametrize("s,loss,kw", [(1, "squared-hinge", {}),
                                      (3, "hinge", dict(loss="huber-hinge", huber_epsilon=0.0)),
                                      (7, "logistic", dict(loss="logistic"))])
def test_primal_objective_matches_liblinear(bibtex, s, loss, kw):
    """At a tight tolerance the dual's weights reach LIBLINEAR's primal objective (-s 1,
    which after 300 dual cycles switches to its primal Newton method -- ours to the
    core's --, and -s 3); the statistics' objective is that of the returned weights."""
    X, Y = bibtex
    eps = 1e-4
    ll = ref.LiblinearOvA(X, threads=1)
    Wl, bl = ll.train_all(Y, LABELS, f"-s {s} -c 1 -e {eps} -B 1 -q")
    W, b, st = train_labels(X, Y, dual_params(epsilon=eps, max_iter=5000, **kw), LABELS)
    Xa = ref.augmented(X, 1.0)
    for k, j in enumerate(LABELS):
        y = ref.label_vector(Y, j)
        ours = primal(Xa, y, weights(W, b, k), loss)
        theirs = primal(Xa, y, np.append(Wl[k], bl[k]), loss)
        assert ours <= theirs * (1 + 1e-3), (j, ours, theirs)
        np.testing.assert_allclose(st["f_final"][k], ours, rtol=1e-5)
        np.testing.assert_allclose(st["f_init"][k], primal(Xa, y, np.zeros(Xa.shape[1]), loss), rtol=1e-12)
    assert np.all(st["status"] == 0)
    if s == 7:
        # the logistic dual's optimum is the primal's (strong duality): the same weights
        np.testing.assert_allclose(W.toarray(), Wl, atol=2e-3)
    if s == 1:
        # -s 1 finishes a label by the Newton method after 300 dual cycles, as LIBLINEAR
        assert np.any(st["iterations"] > 300)
    else:
        assert np.all(st["iterations"] <= 5000)


def test_stops_on_liblinears_dual_rule(bibtex):
    """At the end, max - min of the projected dual gradient over all instances is at most
    eps; recomputed here from the weights (a_i recovered from the margins: squared hinge,
    a_i = 2 C max(0, 1 - m_i), so that G_i = m_i - 1 + a_i / (2 C) = 0 where a_i > 0)."""
    X, Y = bibtex
    eps = 0.1
    labels = np.arange(0, 159, 20)
    W, b, st = train_labels(X, Y, dual_params(epsilon=eps), labels)
    Xa = ref.augmented(X, 1.0)
    for k, j in enumerate(labels):
        y = ref.label_vector(Y, j)
        if st["iterations"][k] <= 300:
            assert st["gnorm_final"][k] <= eps                 # the dual's rule
        else:                                                  # finished by Newton: the primal rule
            assert st["gnorm_final"][k] <= st["tolerance"][k]
        # the primal-dual pair is consistent: w is within the rule of the optimum's
        # first-order condition, whose residual grad f(w) is small against grad f(0)
        w = weights(W, b, k)
        m = y * (Xa @ w)
        g = w + Xa.T @ (y * ref._dphi("squared-hinge", m))
        g0 = Xa.T @ (y * ref._dphi("squared-hinge", np.zeros_like(m)))
        assert np.linalg.norm(g) <= 0.2 * np.linalg.norm(g0), j


def test_threads_edge_labels_and_dense_features(bibtex):
    """Bit-identical weights on 1 and 2 threads; a label without positives and one
    positive on every row train to finite weights; dense (slice-like) features work."""
    X, Y = bibtex
    n = X.shape[0]
    Y2 = sp.hstack([Y[:, :3], sp.csr_matrix((n, 1)), sp.csr_matrix(np.ones((n, 1)))]).tocsr()
    labels = np.arange(5)
    W1, b1, _ = train_labels(X, Y2, dual_params(), labels)
    W2, b2, _ = train_labels(X, Y2, TrainParams(l2_solver="dual", regularize_bias=True, prune=0.0, threads=2),
                             labels, chunk_size=1)
    assert (W1 != W2).nnz == 0 and np.array_equal(b1, b2)
    assert np.all(np.isfinite(W1.data)) and np.all(np.isfinite(b1))
    assert b1[3] < 0 < b1[4]                           # no positive: scores below 0; all positive: above
    # the same for the logistic loss's own dual (-s 7), and a class of cost 0 (-w-1 0: the
    # negatives have no term, a_i = 0 for them)
    lr = dict(l2_solver="dual", regularize_bias=True, prune=0.0, loss="logistic")
    W1, b1, s1 = train_labels(X, Y2, TrainParams(threads=1, **lr), labels)
    W2, b2, _ = train_labels(X, Y2, TrainParams(threads=2, **lr), labels, chunk_size=1)
    assert (W1 != W2).nnz == 0 and np.array_equal(b1, b2) and np.all(s1["status"] == 0)
    assert np.all(np.isfinite(W1.data)) and b1[3] < 0 < b1[4]
    Wz, bz, sz = train_labels(X, Y2, TrainParams(threads=1, weight_neg=0.0, weighting="constant", **lr), [0])
    assert sz["status"][0] == 0 and np.all(np.asarray(X @ Wz.T.toarray()).ravel() + bz[0] > 0)
    rng = np.random.default_rng(0)
    D = rng.standard_normal((300, 12)).astype(np.float32)
    Yd = sp.csr_matrix((D[:, 0] + 0.3 * D[:, 1] > 0).astype(np.float64).reshape(-1, 1))
    Wd, bd, std = train_labels(check_features(D), Yd, dual_params(epsilon=1e-3), [0])
    w = Wd.toarray().ravel()
    assert std["status"][0] == 0 and w[0] > 0 and w[0] > abs(w[5])


def test_options_are_validated(monkeypatch):
    import dataclasses

    from headstart.objective.losses import REGISTRY

    validate(TrainParams(l2_solver="dual", loss="logistic", regularize_bias=True))     # -s 7
    # every built-in loss has a dual method; one without is refused for the dual
    monkeypatch.setitem(REGISTRY, "logistic", dataclasses.replace(REGISTRY["logistic"], has_dual=False))
    with pytest.raises(ParameterError, match="l2_solver"):
        validate(TrainParams(l2_solver="dual", loss="logistic", regularize_bias=True))
    with pytest.raises(ParameterError, match="regularize_bias"):
        validate(TrainParams(l2_solver="dual"))
    with pytest.raises(ParameterError, match="huber_epsilon"):
        validate(TrainParams(loss="huber-hinge", huber_epsilon=0.0))
    with pytest.raises(ParameterError, match="l2_solver"):
        validate(TrainParams(l2_solver="primal"))
    validate(TrainParams(l2_solver="dual", bias=0.0))           # no bias: nothing to regularise
    validate(TrainParams(l2_solver="dual", loss="huber-hinge", huber_epsilon=0.0, regularize_bias=True))
    # the dual starts from zero: an init is not read; l2_solver is not read by l1-exact
    names = [u[0] for u in unused_parameters(TrainParams(l2_solver="dual", regularize_bias=True, init="aop"),
                                             {"init", "l2_solver"})]
    assert names == ["init"]
    names = [u[0] for u in unused_parameters(TrainParams(regularizer="l1-exact", l2_solver="dual", init="zero"),
                                             {"l2_solver"})]
    assert names == ["l2_solver"]


def test_cli_trains_predicts_and_evaluates_with_the_dual(tmp_path, bibtex_dir):
    """The command line end to end: -s 1's defaults (epsilon 0.1), the summary names the
    method, the model predicts, and shortlisted training refuses the option clearly."""
    import subprocess
    import sys

    train, test = bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz"
    r = subprocess.run([sys.executable, "-m", "headstart", "train", str(train), "-o", str(tmp_path / "m"),
                        "--l2-solver", "dual", "--regularize-bias", "--epsilon", "0.1", "--num-labels", "40"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "dual coordinate descent" in r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "headstart", "evaluate", str(tmp_path / "m"), str(test),
                        "--allow-gaps"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "headstart", "train", str(train), "-o", str(tmp_path / "m2"),
                        "--l2-solver", "dual", "--num-labels", "4"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode != 0 and "regularize_bias" in r.stderr and not (tmp_path / "m2").exists()


@pytest.mark.parametrize("options", ["-s 1 -B 1", "-s 7 -B 1", "-s 6 -B 1"])
def test_labels_without_positives_share_one_solve(bibtex, options):
    """Labels without positives (or without negatives) pose one and the same problem: a
    chunk solves the first and copies it to the others (training/coordinate.py).  The
    weights are those of solving each one alone (chunks of one label), bit for bit, and
    equal among themselves; the copies report no time."""
    X, Y = bibtex
    n = X.shape[0]
    empty = sp.csr_matrix((n, 3))
    full = sp.csr_matrix(np.ones((n, 2)))
    Y2 = sp.hstack([Y[:, :2], empty, full, Y[:, 2:3], empty]).tocsr()   # labels 2-4, 8: none; 5, 6: all
    labels = np.arange(Y2.shape[1])
    p = TrainParams.from_liblinear(options, threads=1)
    W1, b1, st1 = train_labels(X, Y2, p, labels)                         # one chunk: shared solves
    W2, b2, _ = train_labels(X, Y2, p.replace(threads=2), labels, chunk_size=1)   # every label alone
    assert (W1 != W2).nnz == 0 and np.array_equal(b1, b2)
    npos = np.diff(Y2.tocsc().indptr)
    kinds = [npos == 0, npos == n]                        # one solve per kind, the others copy it
    assert st1.meta["shared_solves"] == sum(int(k.sum()) - int(k.any()) for k in kinds) >= 4
    for group in ([2, 3, 4, 8], [5, 6]):
        for j in group[1:]:
            assert (W1[j] != W1[group[0]]).nnz == 0 and b1[j] == b1[group[0]]
            assert st1["seconds"][j] == 0.0 and st1["f_final"][j] == st1["f_final"][group[0]]
    assert b1[2] < 0 < b1[5] and np.all(st1["status"] == 0)


@pytest.mark.parametrize("w", ["-w1 0", "-w-1 0"])
def test_a_class_of_cost_zero_is_no_constraint(bibtex, w):
    """-s 1 with a class of cost 0 (LIBLINEAR's -w1 0 / -w-1 0): that class has no loss
    term, so its a_i stay 0 -- the box was inf * 0 = NaN, which made the class a hard
    margin (every positive scored exactly 1, f 19.7 against LIBLINEAR's 0.385; helper-39)."""
    X, Y = bibtex
    labels = np.array([56, 134])
    opts = f"-s 1 -c 1 -e 1e-3 -B 1 {w}"
    Wl, bl = ref.LiblinearOvA(X, threads=1).train_all(Y, labels, opts + " -q")
    W, b, st = train_labels(X, Y, TrainParams.from_liblinear(opts, prune=0.0, threads=1), labels)
    Xa = ref.augmented(X, 1.0)
    for k, j in enumerate(labels):
        y = ref.label_vector(Y, j)
        cost = np.where(y > 0, 0.0, 1.0) if w == "-w1 0" else np.where(y > 0, 1.0, 0.0)

        def f(v):
            return float(0.5 * v @ v + (cost * ref._phi("squared-hinge", y * (Xa @ v))).sum())

        ours, theirs = f(weights(W, b, k)), f(np.append(Wl[k], bl[k]))
        assert st["status"][k] == 0 and ours <= theirs * 1.01 + 1e-6, (j, ours, theirs)
        np.testing.assert_allclose(st["f_final"][k], ours, rtol=1e-5)


def test_exact_hinge_without_bias_trains_rows_without_features(bibtex):
    """-s 3 without -B: a row with no features has a zero diagonal (the hinge's is 0, and
    there is no bias coordinate); its a_i goes to the bound, as LIBLINEAR's infinite
    step clipped -- it divided by zero (ZeroDivisionError; helper-39)."""
    X, Y = bibtex
    X = sp.csr_matrix(X[:300], copy=True)
    X.data[X.indptr[3]:X.indptr[4]] = 0.0
    X.eliminate_zeros()
    Y = sp.csr_matrix(Y[:300])
    labels = np.array([0, 1, 2])
    opts = "-s 3 -c 1 -e 1e-3"
    Wl, _ = ref.LiblinearOvA(X, threads=1).train_all(Y, labels, opts + " -q")
    W, b, st = train_labels(X, Y, TrainParams.from_liblinear(opts, prune=0.0, threads=1), labels)
    assert np.all(b == 0.0) and np.all(st["status"] == 0)
    for k, j in enumerate(labels):
        y = ref.label_vector(Y, j)

        def f(v):
            return float(0.5 * v @ v + np.maximum(0.0, 1.0 - y * (X @ v)).sum())

        ours, theirs = f(W[k].toarray().ravel().astype(np.float64)), f(Wl[k])
        assert ours <= theirs * 1.01 + 1e-6, (j, ours, theirs)


def test_logistic_dual_switches_to_newton_as_liblinear():
    """LIBLINEAR's -s 7 finishes a label by its primal Newton method (-s 0, rule x 0.1)
    after 300 dual cycles, as -s 1 does; on columns of scales 1e-4..1e4 the dual alone
    stopped at max_iter with f 3983 against LIBLINEAR's 135 (helper-44)."""
    rng = np.random.default_rng(0)
    n, d = 300, 10
    X0 = rng.standard_normal((n, d)) * 10.0 ** np.linspace(-4, 4, d)
    y = X0[:, 0] / 1e-4 > 1
    X = sp.csr_matrix(X0.astype(np.float32))
    Y = sp.csr_matrix(y.astype(np.float32)[:, None])
    Wl, bl = ref.LiblinearOvA(X, threads=1).train_all(Y, np.arange(1), "-s 7 -c 1 -e 0.0001 -B 1 -q")
    W, b, st = train_labels(X, Y, TrainParams.from_liblinear("-s 7 -e 0.0001 -B 1", threads=1, max_iter=5000),
                            np.arange(1))
    Xa = ref.augmented(X, 1.0)
    ys = np.where(y, 1.0, -1.0)
    ours, theirs = primal(Xa, ys, weights(W, b, 0), "logistic"), primal(Xa, ys, np.append(Wl[0], bl[0]), "logistic")
    assert st["status"][0] == 0 and st["iterations"][0] > 300
    assert ours == pytest.approx(theirs, rel=1e-6), (ours, theirs)
