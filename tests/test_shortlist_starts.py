"""Shortlisted training's starts (the initialiser registry on sub-problems, per-part
starts of dense + sparse models), per-label weighting and the time budget."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
import scipy.sparse as sp

import headstart.init as init_pkg
from headstart.cli.main import main
from headstart.errors import DataFormatError, ParameterError
from headstart.estimator import fit_model, prepare_data
from headstart.init.base import Initializer, register
from headstart.io import read_xmc
from headstart.model.format import load_model, save_model
from headstart.params import TrainParams
from headstart.shortlist import (DenseSparseParams, FirstStageParams, build_shortlist, fit_shortlisted,
                                 train_shortlisted, train_shortlisted_dir)
from headstart.shortlist.features import combine
from headstart.shortlist.training import prepare_inputs
from headstart.training.trainer import train_labels

LABELS = np.arange(0, 40)


@pytest.fixture(scope="module")
def bib(bibtex_dir):
    X, Y = read_xmc(bibtex_dir / "train.txt.gz")
    return X[:1200], Y[:1200]


@pytest.fixture(scope="module")
def first(bib):
    X, Y = bib
    return build_shortlist(X, Y, FirstStageParams(K=15), threads=2)


@pytest.fixture(scope="module")
def pretrained_dir(bib, tmp_path_factory):
    """A saved model of labels 0:40 stopped after 2 Newton iterations (a start that is
    neither zero nor the solution)."""
    X, Y = bib
    model, _ = fit_model(X, Y, TrainParams(threads=2, max_iter=2, prune=0.0), num_labels=40)
    path = tmp_path_factory.mktemp("pre") / "m"
    save_model(model, path)
    return str(path)


def _same_as_full(X, Y, p, labels=LABELS):
    data = prepare_data(X, Y, p)
    Wf, bf, sf = train_labels(data.X, data.Y, p, labels, locality=False)
    every = sp.csc_matrix(np.ones(data.Y.shape, dtype=np.float32))
    Ws, bs, ss = train_shortlisted(data.X, data.Y, every, p, labels)
    for col in ("f_init", "f_final", "gnorm_zero", "tolerance", "gnorm_final"):
        np.testing.assert_allclose(ss[col], sf[col], rtol=1e-9, err_msg=col)
    np.testing.assert_array_equal(ss["iterations"], sf["iterations"])
    np.testing.assert_allclose(Ws.toarray(), Wf.toarray(), atol=1e-6)
    np.testing.assert_allclose(bs, bf, atol=1e-6)
    return ss


# --------------------------------------------------------------------------- the registry
@pytest.mark.parametrize("name", init_pkg.NAMES)
def test_every_registered_initialiser_starts_a_shortlist_of_every_instance_as_the_full_trainer(
        name, bib, pretrained_dir):
    """The start comes from the registry: with every instance shortlisted, each
    initialiser gives the core trainer's start (f_init), run and model."""
    X, Y = bib
    p = TrainParams(threads=2, prune=0.0, init=name, pretrained=pretrained_dir if name == "pretrained" else None)
    ss = _same_as_full(X, Y, p)
    if name != "zero":
        assert np.any(ss["distance"] > 0)


NEW_INITIALISER = r"""
import json, sys
from typing import NamedTuple
import numpy as np, scipy.sparse as sp
import headstart.init as init_pkg
from headstart.init.base import Initializer, plan_kernel, register
from headstart.io import read_xmc
from headstart.estimator import prepare_data
from headstart.params import TrainParams
from headstart.shortlist import train_shortlisted

class HalfBiasPlan(NamedTuple):
    value: float

def half_bias_start(plan, P, O, w, psum, pos, label):
    w[:] = 0.0
    w[w.size - 1] = plan.value * 0.5
    O.wx[:] = plan.value * 0.5 * P.bias
    return False

class HalfBias(Initializer):
    name = "test-half-bias"
    def prepare(self, ctx):
        return HalfBiasPlan(-1.5)

plan_kernel(HalfBiasPlan, half_bias_start)
register("test-half-bias", lambda p: HalfBias(), "test only")
init_pkg.NAMES = init_pkg.NAMES + ("test-half-bias",)
X, Y = read_xmc(sys.argv[1])
p = TrainParams(threads=1, init="test-half-bias", prune=0.0)
data = prepare_data(X[:300], Y[:300], p)
S = sp.random(300, Y.shape[1], density=0.05, format="csc", random_state=0, dtype=np.float32)
S.data[:] = 1.0
S.sort_indices()
W, b, st = train_shortlisted(data.X, data.Y, S, p, np.arange(6))
W0, b0, _ = train_shortlisted(data.X, data.Y, S, p, np.arange(6), solve=False)
print(json.dumps({"f_init": st["f_init"].tolist(), "f_final": st["f_final"].tolist(), "rows": st["rows"].tolist(),
                  "n_pos": st["n_pos"].tolist(), "status": st["status"].tolist(), "start_nnz": int(W0.nnz),
                  "start_b": b0.tolist()}))
"""


def _copy_package_cache(dst) -> None:
    """Copy this process's Numba cache of headstart's kernels into ``dst``, laid out as
    NUMBA_CACHE_DIR lays it out, so that a fresh interpreter pointed there loads what this
    test session has already compiled and compiles only what is new to it (a cold cache
    cost this test ~45 s of compiling the whole trainer).  Only a speed-up: a kernel
    missing from the copy is compiled, and the process's own cache is not touched.  The
    indexes are copied before the data files: Numba writes a data file before the index
    that names it, so every file a copied index names is there."""
    import shutil
    from pathlib import Path

    from numba.core import caching, config

    import headstart

    if config.CACHE_DIR:          # the session's kernels are there already, in that layout
        shutil.copytree(config.CACHE_DIR, dst, dirs_exist_ok=True)
        return
    for cache_dir in Path(headstart.__file__).resolve().parent.rglob("__pycache__"):
        target = Path(dst) / caching._CacheLocator.get_suitable_cache_subpath(str(cache_dir.parent / "any.py"))
        for pattern in ("*.nbi", "*.nbc"):
            for f in sorted(cache_dir.glob(pattern)):
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, target / f.name)


def test_a_new_initialiser_needs_no_edit_of_shortlisted_training(bib, bibtex_dir, tmp_path):
    """An initialiser registered from outside headstart (a plan class, its per-label
    code, a register call; here one of scalars only) starts shortlisted training with
    no change to headstart.shortlist.  Run in a fresh interpreter with its own Numba
    cache (a copy of the session's): kernels compiled for a plan class defined outside the package must not land
    in the package's cache (other processes could not load its index)."""
    import json
    import os
    import subprocess
    import sys

    cache = tmp_path / "numba-cache"
    _copy_package_cache(cache)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache),
           "PYTHONPATH": str(__import__("pathlib").Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", NEW_INITIALISER, str(bibtex_dir / "train.txt.gz")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # the start: every feature weight 0, bias weight -0.75, so f_init = C sum_i sqhinge(-0.75 y_i)
    # -- or f(0) = C rows where that is lower: the solver then starts from w = 0
    # (solver/newton.py, zero_if_worse)
    assert got["start_nnz"] == 0 and got["start_b"] == [-0.75] * 6
    for f0, rows, npos in zip(got["f_init"], got["rows"], got["n_pos"]):
        assert f0 == pytest.approx(min(npos * 1.75 ** 2 + (rows - npos) * 0.25 ** 2, rows), rel=1e-12)
    assert got["status"] == [0] * 6 and all(f1 < f0 for f0, f1 in zip(got["f_init"], got["f_final"]))


class _ArrayPlan(NamedTuple):
    v: np.ndarray


class _ArrayInit(Initializer):
    name = "test-array"

    def prepare(self, ctx):
        return _ArrayPlan(np.zeros(3))


def test_an_initialiser_whose_plan_cannot_be_restricted_is_refused(bib, monkeypatch):
    """A plan holding arrays needs a sub-problem restriction: without one, shortlisted
    training refuses the initialiser by name before compiling anything."""
    X, Y = bib
    register("test-array", lambda p: _ArrayInit(), "test only")
    try:
        monkeypatch.setattr(init_pkg, "NAMES", init_pkg.NAMES + ("test-array",))
        data = prepare_data(X, Y, TrainParams())
        every = sp.csc_matrix(np.ones(data.Y.shape, dtype=np.float32))
        with pytest.raises(ParameterError, match="'test-array' cannot start shortlisted training: its plan "
                                                 "_ArrayPlan holds arrays"):
            train_shortlisted(data.X, data.Y, every, TrainParams(init="test-array"), LABELS[:2])
        # a tree's small nodes are shortlisted problems: refused before its root is trained
        import headstart.estimator as estimator
        from headstart.tree.train import fit_tree

        def root_trained(*a, **kw):
            raise AssertionError("the root was trained before the start was refused")

        monkeypatch.setattr(estimator, "fit_model", root_trained)
        with pytest.raises(ParameterError, match="'test-array' cannot start shortlisted training"):
            fit_tree(X, Y, TrainParams(init="test-array"), branching=4)
    finally:
        init_pkg.REGISTRY.pop("test-array", None)


def test_aop_on_a_shortlist_uses_the_sub_problem_means(bib, first):
    """aop on a real shortlist: the start is the paper's w = u pbar + v xbar over the
    label's rows (its positives and shortlisted instances), solved here in numpy."""
    X, Y = bib
    p = TrainParams(threads=1)
    data = prepare_data(X, Y, p)
    W0, b0, _ = train_shortlisted(data.X, data.Y, first.shortlist, p, LABELS[:10], solve=False)
    A = sp.hstack([data.X, np.ones((data.X.shape[0], 1))], format="csr").toarray()
    for lab in LABELS[:10]:
        rows = np.union1d(data.Y[:, lab].indices, first.shortlist[:, lab].indices)
        y = np.isin(rows, data.Y[:, lab].indices)
        w = _aop_numpy(A[rows], y, p.aop_s, p.aop_t)
        np.testing.assert_allclose(W0[lab].toarray()[0], w[:-1], atol=1e-9)
        assert b0[lab] == pytest.approx(w[-1], abs=1e-6)


def _aop_numpy(A, y, s, t):
    """The start with <w, mean positive> = s and <w, mean negative> = t in the span of the
    mean positive and the mean row (the paper's definition, as a 2 x 2 system)."""
    pbar, nbar, xbar = A[y].mean(axis=0), A[~y].mean(axis=0), A.mean(axis=0)
    G = np.array([[pbar @ pbar, xbar @ pbar], [pbar @ nbar, xbar @ nbar]])
    u, v = np.linalg.solve(G, [s, t])
    return u * pbar + v * xbar


# --------------------------------------------------------------------------- per-part starts
def _dense(X, k=6, seed=3):
    rng = np.random.default_rng(seed)
    return np.asarray(X @ rng.standard_normal((X.shape[1], k)).astype(np.float32), dtype=np.float32)


def test_aop_per_part_is_the_sum_of_each_parts_aop(bib, first):
    """sparse_init = dense_init = aop: each part's start is the paper's aop on the
    sub-problem restricted to that part's (scaled) columns plus the bias column; the
    start is their concatenation, with the two bias weights added -- computed here in
    numpy from the definition and compared in the original feature space."""
    X, Y = bib
    D = _dense(X)
    dp = DenseSparseParams(sparse_reg=2.0, dense_reg=5.0, normalize_dense=True, sparse_init="aop", dense_init="aop")
    p = TrainParams(threads=1)
    data = prepare_data(X, Y, p)
    Xc, fscale = combine(data.X, D, dp)
    ns = data.X.shape[1]
    inputs = prepare_inputs(Xc, data.Y, p, n_sparse=ns, sparse_init="aop", dense_init="aop")
    W0, b0, _ = train_shortlisted(Xc, data.Y, first.shortlist, p, LABELS[:10], fscale=fscale, inputs=inputs,
                                  solve=False)
    A = Xc.toarray().astype(np.float64)
    one = np.ones((A.shape[0], 1))
    for lab in LABELS[:10]:
        rows = np.union1d(data.Y[:, lab].indices, first.shortlist[:, lab].indices)
        y = np.isin(rows, data.Y[:, lab].indices)
        ws = _aop_numpy(np.hstack([A[rows, :ns], one[rows]]), y, p.aop_s, p.aop_t)
        wd = _aop_numpy(np.hstack([A[rows, ns:], one[rows]]), y, p.aop_s, p.aop_t)
        want = np.concatenate([ws[:-1], wd[:-1]]) * fscale
        np.testing.assert_allclose(W0[lab].toarray()[0], want, rtol=1e-5, atol=1e-6)
        assert b0[lab] == pytest.approx(ws[-1] + wd[-1], rel=1e-5, abs=1e-6)
    # one part only: the other part starts from zero
    inputs = prepare_inputs(Xc, data.Y, p, n_sparse=ns, dense_init="aop")
    W1, _, _ = train_shortlisted(Xc, data.Y, first.shortlist, p, LABELS[:10], fscale=fscale, inputs=inputs,
                                 solve=False)
    assert W1[:, :ns].nnz == 0 and W1[:, ns:].nnz > 0


def test_dense_start_from_the_trained_dense_weights_converges_at_once(tmp_path, bib, first):
    """A dense start read from a file holding the trained model's dense weights (and its
    intercepts), with a sparse part regularised so hard that its solution is ~0 (so the
    zero start is right for it): every label stops within one Newton iteration, at the
    same model.  The files are recorded in the manifest."""
    X, Y = bib
    D = _dense(X)
    p = TrainParams(threads=2, prune=0.0, epsilon=1e-3)
    dp = DenseSparseParams(sparse_reg=1e10, dense_reg=2.0, normalize_dense=True)
    model, st = fit_shortlisted(X, Y, p, first.shortlist, dense=D, dense_params=dp, num_labels=60)
    # (aop's start of the sparse part, regularised by 1e10, is worse than w = 0 for most
    # labels: those start from 0, some within one iteration -- solver/newton.py)
    assert np.mean(st["iterations"]) > 2
    ns = X.shape[1]
    Wd = np.zeros((Y.shape[1], D.shape[1]), dtype=np.float32)
    Wd[:60] = model.weights[:, ns:].toarray()
    b = np.zeros(Y.shape[1], dtype=np.float32)
    b[:60] = model.intercept
    np.save(tmp_path / "w.npy", Wd)
    np.save(tmp_path / "b.npy", b)
    dp2 = DenseSparseParams(sparse_reg=1e10, dense_reg=2.0, normalize_dense=True,
                            dense_init_file=str(tmp_path / "w.npy"), dense_init_bias_file=str(tmp_path / "b.npy"))
    assert dp2.dense_init == "file"
    again, st2 = fit_shortlisted(X, Y, p, first.shortlist, dense=D, dense_params=dp2, num_labels=60)
    assert np.all(st2["iterations"] <= 1), np.bincount(st2["iterations"].astype(int))
    np.testing.assert_allclose(again.weights.toarray(), model.weights.toarray(), atol=2e-4)
    np.testing.assert_allclose(again.intercept, model.intercept, atol=2e-4)
    starts = again.extensions["dense"]["starts"]
    assert starts["sparse"] == "zero" and starts["dense"] == "file"
    assert starts["dense_file"]["path"].endswith("w.npy") and len(starts["dense_file"]["sha256"]) == 64
    save_model(again, tmp_path / "m")
    assert load_model(tmp_path / "m", allow_gaps=True).extensions == again.extensions


def test_bad_dense_start_files_are_refused_with_file_and_shape(tmp_path, bib, first):
    X, Y = bib
    D = _dense(X)
    p = TrainParams(threads=1)

    def fit(**kw):
        return fit_shortlisted(X, Y, p, first.shortlist, dense=D, dense_params=DenseSparseParams(**kw),
                               num_labels=2)

    np.save(tmp_path / "short.npy", np.zeros((Y.shape[1] - 1, D.shape[1])))
    with pytest.raises(DataFormatError, match=rf"short\.npy: dense start weights have shape \({Y.shape[1] - 1}, 6\), "
                                              rf"expected \({Y.shape[1]}, 6\)"):
        fit(dense_init_file=str(tmp_path / "short.npy"))
    bad = np.zeros((Y.shape[1], D.shape[1]))
    bad[7, 2] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    with pytest.raises(DataFormatError, match=r"nan\.npy: entry \(7, 2\) \(label 7, dense feature 2\) is nan"):
        fit(dense_init_file=str(tmp_path / "nan.npy"))
    (tmp_path / "text.npy").write_text("1 2 3\n")
    with pytest.raises(DataFormatError, match=r"text\.npy: dense start weights must be a \.npy file"):
        fit(dense_init_file=str(tmp_path / "text.npy"))
    np.save(tmp_path / "ok.npy", np.zeros((Y.shape[1], D.shape[1])))
    np.save(tmp_path / "b.npy", np.zeros(3))
    with pytest.raises(DataFormatError, match=rf"b\.npy: start intercepts have shape \(3,\), expected \({Y.shape[1]},\)"):
        fit(dense_init_file=str(tmp_path / "ok.npy"), dense_init_bias_file=str(tmp_path / "b.npy"))
    with pytest.raises(ParameterError, match="cannot read dense start weights"):
        fit(dense_init_file=str(tmp_path / "missing.npy"))
    with pytest.raises(ParameterError, match="dense_init must be one of"):
        DenseSparseParams(dense_init="nope")
    with pytest.raises(ParameterError, match="use init='pretrained'"):
        DenseSparseParams(sparse_init="pretrained")
    with pytest.raises(ParameterError, match="exactly when dense_init='file'"):
        DenseSparseParams(dense_init="file")
    with pytest.raises(ParameterError, match="sparse_init must be one of"):
        DenseSparseParams(sparse_init="file")


def test_cli_per_part_starts(tmp_path, bibtex_dir, capsys):
    X, Y = read_xmc(bibtex_dir / "train.txt.gz")
    train = str(bibtex_dir / "train.txt.gz")
    np.save(tmp_path / "d.npy", _dense(X, 4))
    sl = str(tmp_path / "sl.txt")
    assert main(["shortlist", train, "-o", sl, "-K", "5", "-q"]) == 0
    common = ["shortlist-train", train, "--shortlist", sl, "--dense", str(tmp_path / "d.npy"), "--num-labels", "20",
              "-q", "--threads", "2"]
    assert main(common + ["-o", str(tmp_path / "m"), "--init-sparse", "aop", "--init-dense", "zero"]) == 0
    assert load_model(tmp_path / "m", allow_gaps=True).extensions["dense"]["starts"] == {"sparse": "aop", "dense": "zero"}
    capsys.readouterr()     # 'headstart predict' cannot give the dense part: refused first, without a warning
    assert main(["predict", str(tmp_path / "m"), train, "-o", str(tmp_path / "p.txt"), "--allow-gaps"]) == 2
    err = capsys.readouterr().err
    assert "a dense + sparse model needs the dense features" in err and "WARNING" not in err, err
    np.save(tmp_path / "w.npy", np.zeros((Y.shape[1], 3)))
    capsys.readouterr()
    assert main(common + ["-o", str(tmp_path / "bad"), "--init-dense-weights", str(tmp_path / "w.npy")]) == 2
    err = capsys.readouterr().err
    assert "w.npy: dense start weights have shape (159, 3), expected (159, 4)" in err
    assert not (tmp_path / "bad").exists()
    # DiSMEC++ cascade's --X-reg-scale S regularises by S sum w^2: our --X-reg 2S, the same model
    base = common + ["--init-sparse", "aop", "--init-dense", "zero"]
    assert main(base + ["-o", str(tmp_path / "s"), "--sparse-reg-scale", "1.5", "--dense-reg-scale", "2"]) == 0
    assert main(base + ["-o", str(tmp_path / "r"), "--sparse-reg", "3", "--dense-reg", "4"]) == 0
    a, b = (load_model(tmp_path / x, allow_gaps=True) for x in ("s", "r"))
    assert (a.weights != b.weights).nnz == 0 and np.array_equal(a.intercept, b.intercept)
    assert (a.extensions["dense"]["sparse_reg"], a.extensions["dense"]["dense_reg"]) == (3.0, 4.0)
    capsys.readouterr()
    assert main(base + ["-o", str(tmp_path / "both"), "--dense-reg-scale", "2", "--dense-reg", "3"]) == 2
    assert "give --dense-reg LAMBDA or --dense-reg-scale S" in capsys.readouterr().err
    assert main(base + ["-o", str(tmp_path / "both"), "--dense-reg-scale", "0.5", "--dense-reg", "1"]) == 2
    assert "not both" in capsys.readouterr().err     # also when --dense-reg is given at its default
    no_dense = [a for a in common if a not in ("--dense", str(tmp_path / "d.npy"))]
    with pytest.raises(SystemExit):                  # any value, the default's half too: it needs --dense
        main(no_dense + ["-o", str(tmp_path / "nd"), "--sparse-reg-scale", "0.5"])
    assert "need --dense X.npy" in capsys.readouterr().err and not (tmp_path / "nd").exists()
    # --init / --pretrained beside the parts' starts: never used, but recorded (helper-48)
    for extra in (["--init", "zero"], ["--pretrained", str(tmp_path / "m")]):
        assert main(base + ["-o", str(tmp_path / "ip")] + extra) == 2
        assert "the per-part starts (--init-sparse / --init-dense) replace --init" in capsys.readouterr().err
        assert not (tmp_path / "ip").exists()


# --------------------------------------------------------------------------- weighting, time budget
@pytest.mark.parametrize("scheme", ["2pm1", "p2mp", "file"])
def test_weighted_shortlist_of_every_instance_is_the_weighted_full_model(scheme, bib, tmp_path):
    X, Y = bib
    kw = {}
    if scheme == "file":
        rng = np.random.default_rng(0)
        np.save(tmp_path / "pos.npy", rng.uniform(0.5, 3.0, Y.shape[1]))
        (tmp_path / "neg.txt").write_text(" ".join(f"{v:.3f}" for v in rng.uniform(0.2, 1.0, Y.shape[1])))
        kw = dict(weights_pos_file=str(tmp_path / "pos.npy"), weights_neg_file=str(tmp_path / "neg.txt"))
    p = TrainParams(threads=2, prune=0.0, weighting=scheme, propensity_a=0.6, propensity_b=2.0, **kw)
    ss = _same_as_full(X, Y, p)
    unweighted = _same_as_full(X, Y, p.replace(weighting="none", weights_pos_file=None, weights_neg_file=None))
    assert not np.allclose(ss["f_final"], unweighted["f_final"])


def test_bad_weights_file_is_refused_before_anything_is_written(bib, first, tmp_path):
    X, Y = bib
    (tmp_path / "pos.txt").write_text("1 2 x\n")
    p = TrainParams(weighting="file", weights_pos_file=str(tmp_path / "pos.txt"))
    with pytest.raises(DataFormatError, match=r"pos\.txt:1: 'x' is not a number"):
        train_shortlisted_dir(X, Y, p, first.shortlist, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_timeout_then_resume_gives_the_full_model(tmp_path, bib, first):
    """A time budget that runs out part-way: the finished labels are saved, the others
    are missing; resuming trains them, and the model is the one of a single run.  (The
    budget is doubled from 0.2 ms until a run stops part-way, so the test does not
    depend on this machine's speed.)"""
    X, Y = bib
    p = TrainParams(threads=2)
    model, _ = fit_shortlisted(X, Y, p, first.shortlist)
    budget = 2e-4
    for attempt in range(14):
        out = tmp_path / f"m{attempt}"
        r = train_shortlisted_dir(X, Y, p.replace(timeout=budget), first.shortlist, out, shard_size=8)
        if 0 < r.trained_labels < Y.shape[1]:
            break
        budget *= 2
    assert 0 < r.trained_labels < Y.shape[1] and r.missing
    assert load_model(out, allow_gaps=True).missing_ranges == r.missing
    r2 = train_shortlisted_dir(X, Y, p, first.shortlist, out, shard_size=8, resume=True)
    assert r2.complete and r2.already_finished == r.trained_labels
    got = load_model(out)
    assert (got.weights != model.weights).nnz == 0 and np.array_equal(got.intercept, model.intercept)
    # in memory: the labels not started are missing ranges of the model, the others as in the full run
    part, st = fit_shortlisted(X, Y, p.replace(timeout=budget), first.shortlist)
    done = np.asarray(st["label"])
    if 0 < done.size < Y.shape[1]:
        assert part.missing_ranges
        assert (part.weights[done] != model.weights[done]).nnz == 0
    # a budget already spent before training starts: nothing is trained, nothing is lost
    r3 = train_shortlisted_dir(X, Y, p.replace(timeout=1e-9), first.shortlist, tmp_path / "none")
    assert r3.trained_labels == 0 and r3.missing == [(0, Y.shape[1])]


# --------------------------------------------------------------------------- sub-problem details
@pytest.mark.parametrize("init", ["aop", "multi-pos", "zero"])
def test_a_label_without_rows_scores_below_the_others(bib, init):
    """No positive and an empty shortlist: the label is trained against one featureless
    negative (the bias alone) -- no crash for initialisers that divide by the number of
    rows, and a negative score rather than an arbitrary one (aop: t, as before)."""
    X, Y = bib
    p = TrainParams(threads=1, init=init)
    data = prepare_data(X, sp.hstack([Y, sp.csr_matrix((Y.shape[0], 1))], format="csr"), p)
    S = sp.csc_matrix(data.Y.shape, dtype=np.float32)
    W, b, st = train_shortlisted(data.X, data.Y, S, p, [data.Y.shape[1] - 1])
    assert W.nnz == 0 and st["rows"][0] == 0 and st["status"][0] == 0
    assert b[0] <= -1.0 + 1e-6
    if init == "aop":
        assert b[0] == pytest.approx(p.aop_t)


@pytest.mark.parametrize("weighted", [False, True])
def test_labels_without_rows_in_one_chunk_are_their_own_solves(bib, tmp_path, weighted):
    """A chunk solves the row-less problem once per (costs, start) and copies it to the
    next row-less labels: the same weights, intercepts and statistics (but the seconds)
    as every label trained alone (chunks of one label), also when the costs differ
    between such labels (cost file) and labels with rows come between them."""
    X, Y = bib
    k = 7
    kw = {}
    if weighted:
        # the row is a negative: its cost decides the (regularised) bias
        neg = np.ones(Y.shape[1] + k)
        neg[-k:] = [1.0, 1.0, 2.0, 2.0, 1.0, 3.0, 3.0]   # runs of equal and of new costs
        np.save(tmp_path / "neg.npy", neg)
        kw = dict(weighting="file", weights_neg_file=str(tmp_path / "neg.npy"), regularize_bias=True)
    p = TrainParams(threads=1, prune=0.0, **kw)
    data = prepare_data(X, sp.hstack([Y, sp.csr_matrix((Y.shape[0], k))], format="csr"), p)
    S = sp.csc_matrix(data.Y.shape, dtype=np.float32)
    L = data.Y.shape[1]
    labels = np.r_[3, L - k, L - k + 1, 40, np.arange(L - k + 2, L)]
    W1, b1, s1 = train_shortlisted(data.X, data.Y, S, p, labels, chunk_size=1)
    Wc, bc, sc = train_shortlisted(data.X, data.Y, S, p, labels, chunk_size=len(labels))
    assert (W1 != Wc).nnz == 0 and np.array_equal(b1, bc)
    for f in s1.columns:
        if f not in ("seconds", "shared_with"):
            assert np.array_equal(s1[f], sc[f]), f
    assert np.all(sc["rows"][np.isin(sc["label"], labels[labels >= L - k])] == 0)
    # which label took another's solve depends on the chunks (as in the core trainer):
    # none alone; in one chunk every row-less label after the first of its costs, marked
    # with the label solved, whose result it has
    assert np.all(s1["shared_with"] == -1)
    copies = np.flatnonzero(sc["shared_with"] >= 0)
    assert copies.size == (3 if weighted else k - 1)
    solved = np.searchsorted(sc["label"], sc["shared_with"][copies])
    assert np.all(sc["shared_with"][solved] == -1) and np.array_equal(bc[copies], bc[solved])
    assert sc.meta["shared_solves"] == copies.size
    if weighted:
        # the costs do change the row-less problem's solution (else the check is void)
        assert len(np.unique(bc[-k:])) == 3


def test_cli_weighting_and_time_budget(tmp_path, bibtex_dir, capsys):
    """shortlist-train takes --weighting / --propensity-* and --timeout like 'headstart
    train': the costs are in the model's parameters; a spent budget saves nothing, says
    how to resume, and --resume finishes the model."""
    train = str(bibtex_dir / "train.txt.gz")
    sl = str(tmp_path / "sl.txt")
    assert main(["shortlist", train, "-o", sl, "-K", "5", "-q"]) == 0
    base = ["shortlist-train", train, "--shortlist", sl, "--threads", "2", "--weighting", "p2mp",
            "--propensity-a", "0.6", "-o", str(tmp_path / "m")]
    capsys.readouterr()
    assert main(base + ["--timeout", "1e-9", "--shard-size", "40"]) == 3      # incomplete
    assert "time budget of 1e-09 s reached: 159 label(s) not started" in capsys.readouterr().out
    assert main(base + ["--resume", "-q"]) == 0
    m = load_model(tmp_path / "m")
    assert m.params.weighting == "p2mp" and m.params.propensity_a == 0.6 and m.num_labels == 159
