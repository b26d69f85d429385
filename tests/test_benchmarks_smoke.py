"""Smoke test of the benchmark harness (benchmarks/compare.py) so that it cannot rot.

Runs headstart-aop and the LIBLINEAR reference on 3 bibtex labels and checks the shape
of the JSON, not any timing (no timing assertions in unit tests).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"


@pytest.fixture(scope="module")
def bench_modules():
    sys.path.insert(0, str(BENCH))
    try:
        import common
        import methods
        yield common, methods
    finally:
        sys.path.remove(str(BENCH))


def test_label_range_and_overrides(bench_modules):
    common, methods = bench_modules
    assert common.parse_label_range("0:50", 159) == (0, 50)
    assert common.parse_label_range(None, 159) == (0, 159)
    assert common.parse_label_range("100:", 159) == (100, 159)
    assert common.parse_label_range(":999", 159) == (0, 159)
    with pytest.raises(SystemExit):
        common.parse_label_range("50:10", 159)
    assert methods.expand_methods("headstart,liblinear")[-1] == "liblinear"
    assert len(methods.expand_methods("headstart")) == 4
    ov = methods.apply_overrides(["headstart.regularize_bias=true", "liblinear.e=0.1"])
    assert ov["headstart-aop"] == {"regularize_bias": True} and ov["liblinear"] == {"e": 0.1}
    with pytest.raises(SystemExit):
        methods.apply_overrides(["liblinear.nosuch=1"])


def test_liblinear_runner_matches_liblinearutil(bench_modules, bibtex_dir):
    """The reference shares one problem between threads and overwrites y per label: it must
    give exactly the weights of a fresh liblinearutil.train per label (sign included, also for
    a label without positives)."""
    pytest.importorskip("liblinear")
    import numpy as np
    import scipy.sparse as sp
    from liblinear.liblinearutil import parameter, problem, train

    common, methods = bench_modules
    X, Y = common.load_split(bibtex_dir / "train.txt.gz")
    X = X[:1500]
    Ys = sp.hstack([common.label_slice(Y[:1500], 0, 4), sp.csr_matrix((X.shape[0], 1), dtype=np.float32)]).tocsr()
    ctx = methods.Context(X=X, Y=Ys, Y_full=Y[:1500], first=0, threads=2,
                          settings=dict(methods.METHODS["liblinear"].settings, prune=0.0), tmpdir="", train_path="")
    m = methods.METHODS["liblinear"].train(ctx)
    W = m.W.toarray()
    for j in range(Ys.shape[1]):
        y = Ys[:, j].toarray().ravel() * 2 - 1
        ref = train(problem(y, X), parameter("-s 2 -e 0.01 -c 1 -B 1 -q"))
        w = np.ctypeslib.as_array(ref.w, (X.shape[1] + 1,)).copy()
        if ref.get_labels()[0] != 1:
            w = -w
        np.testing.assert_allclose(W[j], w[:-1], atol=1e-6)
        assert abs(m.b[j] - w[-1]) < 1e-6


def test_harness_end_to_end(bibtex_dir, tmp_path):
    pytest.importorskip("liblinear")
    out = tmp_path / "smoke.json"
    cmd = [sys.executable, str(BENCH / "compare.py"), str(bibtex_dir), "--labels", "0:3", "--threads", "1",
           "--methods", "headstart-aop,liblinear", "--repeat", "1", "--no-quiet-probe", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "headstart-aop" in proc.stdout and "liblinear" in proc.stdout
    d = json.loads(out.read_text())
    assert d["labels"] == [0, 3] and d["threads"] == 1
    assert {r["method"] for r in d["runs"]} == {"headstart-aop", "liblinear"}
    for r in d["runs"]:
        assert r["status"] == "ok", r
        for key in ("wall_s", "cpu_s", "peak_rss_mb", "warmup_s", "P@1", "P@3", "P@5", "nnz"):
            assert r[key] is not None and r[key] >= 0, (key, r)
        assert 0 <= r["P@1"] <= 100
        assert len(r["load"]["loadavg_before"]) == 3 and len(r["load"]["loadavg_after"]) == 3
    s = d["summary"]
    assert s["liblinear"]["speedup_vs_liblinear"] == 1.0
    assert s["headstart-aop"]["speedup_vs_liblinear"] > 0
    # same problem, same stopping rule: the two models rank alike on 3 labels
    assert abs(s["headstart-aop"]["P@1"] - s["liblinear"]["P@1"]) < 2.0
    assert s["liblinear"]["gil_released_by_ctypes_call"] is True


def test_harness_on_a_synthetic_preset_with_a_label_sample(bench_modules, tmp_path):
    """A preset name is generated into the cache folder; a random label sample is trained
    and the all-label time is extrapolated (and says so)."""
    common, _ = bench_modules
    out, cache = tmp_path / "synth.json", tmp_path / "cache"
    cmd = [sys.executable, str(BENCH / "compare.py"), "amazon-670k", "--scale", "0.002", "--sample-labels", "6",
           "--seed", "3", "--threads", "1", "--methods", "headstart-aop", "--no-quiet-probe",
           "--cache-dir", str(cache), "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "generating amazon-670k-x0.002" in proc.stdout and "EXTRAPOLATED" in proc.stdout
    d = json.loads(out.read_text())
    L = d["train_shape"][2]
    assert L == 1340 and d["dataset"] == "amazon-670k-x0.002" and d["synthetic"]["preset"] == "amazon-670k"
    sample = d["label_sample"]
    assert sample == common.sample_labels(L, 6, 3) and len(set(sample)) == 6 and sample == sorted(sample)
    assert d["labels"] == {"sample": 6, "seed": 3}
    (run,) = d["runs"]
    assert run["status"] == "ok", run
    s = d["summary"]["headstart-aop"]
    assert d["extrapolation"]["factor"] == pytest.approx(L / 6, rel=1e-3)
    assert s["extrapolated_all_labels_wall_s"] == pytest.approx(s["wall_s"] * L / 6, abs=0.1)
    assert "EXTRAPOLATED" in d["extrapolation"]["note"]
    # the sampled labels are those the worker trained and scored: positives of the sample only
    X, Y = common.load_split(cache / "amazon-670k-x0.002" / "train.txt.gz")
    assert run["train_positives"] == common.label_columns(Y, sample).nnz
    # the second time the cached set is used as it is
    before = (cache / "amazon-670k-x0.002" / "train.txt.gz").stat().st_mtime_ns
    again = common.dataset_for("amazon-670k", 0.002, 0, cache, log=lambda *a: pytest.fail("regenerated"))
    assert again == (cache / "amazon-670k-x0.002").resolve()
    assert (again / "train.txt.gz").stat().st_mtime_ns == before
    with pytest.raises(SystemExit):
        common.dataset_for("bibtex", 0.5)


def test_predict_scale_old_and_new_side_by_side(tmp_path):
    """benchmarks/predict_scale.py end to end on a tiny preset, this checkout as both the old
    and the new source: the predictions must be byte-identical and every figure present."""
    sys.path.insert(0, str(REPO))
    try:
        from benchmarks import synth
    finally:
        sys.path.remove(str(REPO))
    data = tmp_path / "data"
    synth.write(synth.generate("amazon-670k", 0.002, seed=2), data)
    model = tmp_path / "model"
    train = subprocess.run([sys.executable, "-m", "headstart", "train", str(data / "train.txt.gz"), "-o", str(model),
                            "--num-labels", "30", "--threads", "1", "--quiet"], capture_output=True, text=True,
                           timeout=300, cwd=REPO)
    assert train.returncode == 0, train.stderr
    out = tmp_path / "p.json"
    proc = subprocess.run([sys.executable, str(BENCH / "predict_scale.py"), "--data", str(data), "--trained",
                           str(model), "--labels", "80", "--prune", "0,0.3", "--old-src", str(REPO), "--threads", "1",
                           "--full-rows", "30", "--json", str(out)], capture_output=True, text=True, timeout=600,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    d = json.loads(out.read_text())
    assert [r["model"]["extra_prune"] for r in d["runs"]] == [0.0, 0.3]
    for r in d["runs"]:
        assert r["identical_predictions"] is True
        assert r["model"]["labels"] == 80 and r["old"]["score_s"] > 0 and r["new"]["cli_wall_s"] > 0
        assert "EXTRAPOLATED" in r["extrapolated_to_label_space"]["note"]
    assert d["runs"][1]["model"]["nnz"] < d["runs"][0]["model"]["nnz"]
    assert d["full_label_space"]["identical_predictions"] is True
    assert d["full_label_space"]["old"]["labels"] == 1340


def test_docs_placeholders(tmp_path):
    doc = tmp_path / "benchmarks.md"
    proc = subprocess.run([sys.executable, str(BENCH / "compare.py"), "--write-docs", "--docs", str(doc)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = doc.read_text()
    for heading in ("## Plan", "## Targets", "## Machine", "## Results", "## Methods, settings and caveats",
                    "## Synthetic sets shaped like the paper's"):
        assert heading in text
    assert "--sample-labels 2000 --seed 0" in text
    assert "## Prediction at 670K labels" in text
    assert "python benchmarks/compare.py debian-deps --threads 2 --labels 0:1000" in text


def test_shortlist_scale_pipeline_sample_and_report(bibtex_dir, tmp_path):
    """benchmarks/shortlist_scale.py on bibtex: the three commands run and are timed, the
    label sample runs both trainers, and the report collects them (no timing asserted)."""
    work, results = tmp_path / "work", tmp_path / "results"
    script = [sys.executable, str(BENCH / "shortlist_scale.py")]
    for argv in (["pipeline", str(bibtex_dir), str(work), "--backend", "pruned", "--keep", "16", "-K", "20"],
                 ["sample", str(bibtex_dir), str(work), "--sample", "12", "--repeat", "1"],
                 ["report", str(work), "--results", str(results)]):
        r = subprocess.run(script + argv, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads((results / "shortlist-scale-bibtex-pruned-K20.json").read_text())
    assert set(out["steps"]) == {"shortlist", "train", "predict"}
    assert all(s["seconds"] > 0 and s["peak_rss_mb"] > 0 for s in out["steps"].values())
    assert out["steps"]["train"]["labels"] == 159 and len(out["steps"]["predict"]["P@1,3,5"]) == 3
    assert out["sample"]["labels"] == 12 and out["sample"]["runs"][0]["ratio"] > 0


def test_capped_shortlist_keeps_each_labels_best_ranked_negatives(bench_modules):
    """benchmarks/shortlist_cap.py's cap, against a hand-made example: positives leave
    the shortlist, each label keeps its budget of negatives, best rank (or score) first."""
    import numpy as np
    import scipy.sparse as sp

    sys.path.insert(0, str(BENCH))
    try:
        import shortlist_cap
    finally:
        sys.path.remove(str(BENCH))
    # 4 instances x 3 candidates over 3 labels (-1: an empty slot)
    labels = np.array([[0, 1, 2], [1, 0, -1], [2, 1, 0], [0, 2, 1]])
    scores = np.array([[0.9, 0.5, 0.1], [0.8, 0.7, -np.inf], [0.6, 0.4, 0.3], [0.2, 0.95, 0.05]])
    Y = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 0]]))
    by_rank = shortlist_cap.capped_shortlist(labels, scores, Y, np.array([1, 2, 5]), "rank").toarray()
    # label 0: negatives 1 (rank 1), 2 (rank 2), 3 (rank 0); budget 1 -> instance 3
    # label 1: 0 (rank 1), 1 (rank 0), 2 (rank 1), 3 (rank 2); budget 2 -> 1, then 0 (ties by instance)
    # label 2: 0 (rank 2), 3 (rank 1); instance 2 is a positive; budget 5 -> both
    assert by_rank.T.tolist() == [[0, 0, 0, 1], [1, 1, 0, 0], [1, 0, 0, 1]]
    by_score = shortlist_cap.capped_shortlist(labels, scores, Y, np.array([1, 2, 5]), "score").toarray()
    # label 0 by score: 1 (0.7), 2 (0.3), 3 (0.2) -> instance 1
    # label 1: 1 (0.8), 0 (0.5), 2 (0.4), 3 (0.05) -> 1 and 0
    assert by_score.T.tolist() == [[0, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 1]]


def test_paths_probe_runs_and_reports_every_path(tmp_path):
    """benchmarks/paths.py (every training path against LIBLINEAR) on 3 labels of bibtex:
    one JSON row per path with its ratio and objective comparison."""
    pytest.importorskip("liblinear")
    out = tmp_path / "paths.json"
    r = subprocess.run([sys.executable, str(BENCH / "paths.py"), "bibtex", "--top", "2", "--rand", "1", "--reps", "1",
                        "--paths", "sq:aop:reg,lr:zero:none", "--json", str(out)],
                       capture_output=True, text=True, timeout=900, cwd=REPO)
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())
    assert [x["path"] for x in rows] == ["sq:aop:reg", "lr:zero:none"]
    for x in rows:
        assert x["labels"] == 3 and x["ratio"] > 0 and sum(x["status"].values()) == 3
        assert abs(x["objective_rel_median"]) < 0.05


def test_before_after_reads_the_cli_summary(bench_modules, bibtex_dir, tmp_path):
    """benchmarks/before_after.py parses `headstart train`'s summary line; both of its forms
    (Newton: "N Newton iterations, M CG steps"; coordinate descent: "N dual cycles, M
    coordinate steps") must keep matching what the CLI prints.  A change of one pattern
    once broke the harness on the default path with no test noticing."""
    sys.path.insert(0, str(BENCH))
    try:
        import before_after
    finally:
        sys.path.remove(str(BENCH))
    train = bibtex_dir / "train.txt.gz"
    for extra in ([], ["--liblinear", "-s 1"]):
        r = before_after.run_train(REPO, train, tmp_path / f"m{len(extra)}", "0:3", 1, extra)
        assert r["iterations"] > 0 and r["cg_steps"] > 0 and r["nnz"] > 0, (extra, r)
        assert r["train_seconds"] > 0 and r["peak_rss_mb"] > 10
    assert before_after.this_commit()


def test_dense_paths_probe_makes_runs_and_reports(tmp_path):
    """benchmarks/dense_paths.py (dense embedding features against LIBLINEAR): a small
    synthetic set is made with unit rows, and the run reports both paths of a loss with
    LIBLINEAR's runs shared between them (it starts at zero whatever INIT says)."""
    pytest.importorskip("liblinear")
    npz, out = tmp_path / "s.npz", tmp_path / "dense.json"
    r = subprocess.run([sys.executable, str(BENCH / "dense_paths.py"), "make", "synth:600:16:12", str(npz)],
                       capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr
    import numpy as np

    X = np.load(npz)["Xtr"]
    assert X.dtype == np.float32 and X.shape == (500, 16)
    assert np.allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-5)
    r = subprocess.run([sys.executable, str(BENCH / "dense_paths.py"), "run", str(npz), "--top", "2", "--rand", "1",
                        "--reps", "1", "--paths", "sq:zero:reg,sq:aop:reg", "--json", str(out)],
                       capture_output=True, text=True, timeout=900, cwd=REPO)
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())
    assert [x["path"] for x in rows] == ["sq:zero:reg", "sq:aop:reg"]
    assert rows[0]["liblinear_runs"] == rows[1]["liblinear_runs"]
    for x in rows:
        assert x["labels"] == 3 and x["ratio"] > 0 and len(x["p135_headstart"]) == 3
        assert abs(x["objective_rel_median"]) < 0.05
