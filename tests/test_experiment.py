"""``headstart experiment``: the report directory, and that its table says what the
statistics and the models say."""

from __future__ import annotations

import json
from html import escape as html_escape

import numpy as np
import pytest
import scipy.sparse as sp

from headstart.cli import main as cli_main
from headstart.errors import ParameterError
from headstart.experiment import load_stats, parse_grid, parse_inits, parse_label_range, plan_runs
from headstart.experiment.figures import FIGURES, GRID_FIGURE, binned, iteration_cutoff, per_iteration, positive_bins
from headstart.experiment.table import MAIN_COLUMNS, fmt
from headstart.params import TrainParams

FIRST, COUNT = 10, 24          # a small label range of the shipped bibtex keeps this quick
INITS = "zero,bias,bias:-0.9,bias:-2,ovap,ovap-strict,aop"
GRID = "1:-1,-2"               # s=1 t=-2 is the aop run: trained once


def run(capsys, *argv):
    capsys.readouterr()
    try:
        code = cli_main.main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def report(bibtex_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("experiment") / "report"
    code = cli_main.main([
        "experiment", str(bibtex_dir / "train.txt.gz"), str(bibtex_dir / "test.txt.gz"), "-o", str(d),
        "--labels", f"{FIRST}:{FIRST + COUNT}", "--threads", "2", "--inits", INITS, "--aop-grid", GRID,
        "--normalize", "--quiet"])
    assert code == 0
    doc = json.loads((d / "table.json").read_text())
    return d, doc


# --------------------------------------------------------------------------- files
def test_every_file_is_written(report):
    d, doc = report
    for name in ("table.md", "table.json", "report.html"):
        assert (d / name).is_file() and (d / name).stat().st_size > 0
    html = (d / "report.html").read_text()
    for fname, _, caption in list(FIGURES) + [GRID_FIGURE]:
        data = (d / fname).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", fname
        assert f'src="{fname}"' in html
        assert html_escape(caption) in html
    assert [r["name"] for r in doc["runs"]] == ["zero", "bias -1", "bias -0.9", "bias -2", "ovap", "ovap-strict",
                                                "aop", "s=1 t=-1"]
    for r in doc["runs"]:
        assert (d / r["stats_file"]).is_file()
    assert [p["run"] for p in doc["settings"]["aop_grid_points"]] == ["s=1 t=-1", "aop"]
    assert doc["data"]["name"] == "bibtex"
    assert doc["data"]["first_label"] == FIRST and doc["data"]["num_labels"] == COUNT
    assert len(doc["environment"]["loadavg_start"]) == 3


# --------------------------------------------------------------------------- numbers
def test_table_numbers_are_the_statistics(report):
    d, doc = report
    runs = {r["name"]: r for r in doc["runs"]}
    main = doc["tables"]["main"]
    assert [row["run"] for row in main] == [n for n in runs if runs[n]["group"] == "inits"]
    zero_stats = load_stats(d / runs["zero"]["stats_file"])
    t_zero = zero_stats.meta["wall_seconds"]
    for row in main:
        st = load_stats(d / runs[row["run"]]["stats_file"])
        assert len(st) == COUNT
        assert list(st["label"]) == list(range(FIRST, FIRST + COUNT))
        assert row["seconds"] == st.meta["wall_seconds"]
        assert row["time_over_zero"] == pytest.approx(st.meta["wall_seconds"] / t_zero, rel=1e-12)
        assert row["speedup"] == pytest.approx(t_zero / st.meta["wall_seconds"], rel=1e-12)
        assert row["cpu_seconds"] == runs[row["run"]]["timing"]["cpu_seconds"] > 0
        assert row["newton_iterations"] == int(st["iterations"].sum())
        assert row["cg_steps"] == int(st["cg_steps"].sum())
        # per-iteration CG counts add up to the per-label totals
        assert st.iterations["cg_steps"].sum() == st["cg_steps"].sum()
        for key in ("P@1", "P@3", "P@5", "precision", "recall"):
            assert row[key] == runs[row["run"]]["metrics"][key]
    grid = {row["point"]: row for row in doc["tables"]["aop_grid"]}
    aop = next(row for row in main if row["run"] == "aop")
    assert grid["s=1 t=-2"]["seconds"] == aop["seconds"] and grid["s=1 t=-2"]["s"] == 1.0


def test_table_md_shows_the_json_rows(report):
    d, doc = report
    md = (d / "table.md").read_text()
    for row in doc["tables"]["main"]:
        cells = [str(row[k]) if kind == "str" else fmt(row[k], kind) for _, k, kind in MAIN_COLUMNS]
        assert "| " + " | ".join(cells) + " |" in md
    # zero's own ratio is exactly 1
    zero = doc["tables"]["main"][0]
    assert fmt(zero["time_over_zero"], "ratio") == "1.00"


def test_metrics_are_those_of_the_trained_model(report, bibtex_dir):
    """Retrain one run with the library: same statistics (deterministic), same metrics."""
    from headstart.estimator import fit_model
    from headstart.io import read_xmc
    from headstart.metrics import binary_precision_recall, evaluate
    from headstart.prediction.topk import decision_function, predict_topk

    d, doc = report
    rec = next(r for r in doc["runs"] if r["name"] == "bias -2")
    params = TrainParams.from_dict(rec["params"])
    assert params.init == "bias" and params.bias_init == -2.0 and params.normalize
    Xtr, Ytr = read_xmc(bibtex_dir / "train.txt.gz")
    Xte, Yte = read_xmc(bibtex_dir / "test.txt.gz")
    model, stats = fit_model(Xtr, Ytr, params, first_label=FIRST, num_labels=COUNT)
    saved = load_stats(d / rec["stats_file"])
    for col in ("iterations", "cg_steps", "f_init", "f_final", "distance", "n_pos"):
        np.testing.assert_array_equal(stats[col], saved[col])
    Yr = Yte[:, FIRST:FIRST + COUNT]
    labels, _ = predict_topk(model, Xte, k=5)
    m = evaluate(Yr, np.where(labels >= 0, labels - FIRST, -1), ks=(1, 3, 5))
    b = binary_precision_recall(Yr, decision_function(model, Xte) > 0)
    for k in (1, 3, 5):
        assert rec["metrics"][f"P@{k}"] == pytest.approx(m[f"P@{k}"], abs=1e-12)
    assert rec["metrics"]["precision"] == pytest.approx(b["precision"], abs=1e-12)
    assert rec["metrics"]["recall"] == pytest.approx(b["recall"], abs=1e-12)
    first = next(r for r in doc["tables"]["first_iteration"] if r["run"] == "bias -2")
    off = stats.iter_offsets
    took = np.diff(off) >= 2
    f = stats.iterations["objective"]
    assert first["median_f1_over_f0"] == pytest.approx(float(np.median((f[off[:-1] + 1] / f[off[:-1]])[took])))


def test_replot_redraws_the_same_tables(report, capsys, tmp_path):
    import shutil

    d, _ = report
    copy = tmp_path / "copy"
    shutil.copytree(d, copy)
    (copy / "objective.png").unlink()
    code, out, err = run(capsys, "experiment", "--replot", "-o", copy, "--quiet")
    assert code == 0, err
    assert (copy / "objective.png").is_file()
    assert (copy / "table.md").read_text() == (d / "table.md").read_text()
    assert json.loads((copy / "table.json").read_text()) == json.loads((d / "table.json").read_text())


def test_a_report_that_fails_half_way_leaves_the_old_one_whole(report, capsys, tmp_path, monkeypatch):
    """The report is drawn beside REPORT_DIR and renamed into place: a figure that cannot
    be drawn (after the new statistics and tables exist) leaves every file of the earlier
    report as it was and no temporary directory; a file of the user's is kept by a
    successful redraw, and the statistics --replot read are in the new report."""
    import shutil

    from headstart.experiment import figures

    d, _ = report
    copy = tmp_path / "copy"
    shutil.copytree(d, copy)
    (copy / "notes.txt").write_text("mine")
    before = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()}

    def broken(runs, path):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(figures, "FIGURES", ((FIGURES[0][0], broken, FIGURES[0][2]),) + tuple(FIGURES[1:]))
    code, out, err = run(capsys, "experiment", "--replot", "-o", copy, "--quiet")
    assert code != 0 and "drawing failed" in err
    assert {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]

    monkeypatch.undo()
    code, out, err = run(capsys, "experiment", "--replot", "-o", copy, "--quiet")
    assert code == 0, err
    assert (copy / "notes.txt").read_text() == "mine"
    for r in json.loads((copy / "table.json").read_text())["runs"]:
        assert (copy / r["stats_file"]).read_bytes() == (d / r["stats_file"]).read_bytes() or \
            load_stats(copy / r["stats_file"]).summary() == load_stats(d / r["stats_file"]).summary()
    code, out, err = run(capsys, "experiment", "--replot", "-o", copy, "--quiet")
    assert code == 0, err      # and again: the redrawn report can itself be redrawn


# --------------------------------------------------------------------------- usage errors
def test_usage_errors(bibtex_dir, capsys, tmp_path, monkeypatch):
    tr, te = bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz"
    code, _, err = run(capsys, "experiment", tr, te, "-o", tmp_path / "r", "--inits", "zero,warm")
    assert code == 2 and "unknown initialisation 'warm'" in err
    code, _, err = run(capsys, "experiment", tr, te, "-o", tmp_path / "r", "--labels", "5")
    assert code == 2 and "A:B" in err
    with monkeypatch.context() as m:     # from the XMC header, before reading (helper-57)
        m.setattr("headstart.experiment.load_dataset", lambda *a: pytest.fail("the data was read"))
        code, _, err = run(capsys, "experiment", tr, te, "-o", tmp_path / "r", "--labels", "100:200", "--inits",
                           "aop")
    assert code == 2 and "159 labels" in err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    code, _, err = run(capsys, "experiment", tr, te, "-o", busy, "--inits", "aop", "--labels", "0:2")
    assert code == 2 and "refusing" in err
    code, _, err = run(capsys, "experiment", tr, "-o", tmp_path / "r")
    assert code == 2 and "TRAIN TEST" in err
    code, _, err = run(capsys, "experiment", "--replot", "-o", tmp_path)
    assert code == 2 and "table.json" in err
    (tmp_path / "empty.txt").write_text("0 1836 159\n")
    code, _, err = run(capsys, "experiment", tr, tmp_path / "empty.txt", "-o", tmp_path / "r", "--inits", "aop")
    assert code == 2 and "empty.txt: the file has no instances" in err and not (tmp_path / "r").exists()
    # no comparison of initialisations (helper-57): refused before reading the data
    for extra, words in ((["--timeout", "3"], ["--timeout", "--labels A:B"]),
                         (["--init", "aop"], ["--init", "--inits"]),
                         (["--regularizer", "l1-exact"], ["--regularizer l1-exact", "zero run"]),
                         (["--l2-solver", "dual", "--regularize-bias"], ["--l2-solver dual", "zero run"])):
        code, _, err = run(capsys, "experiment", tr, te, "-o", tmp_path / "r", *extra)
        assert code == 2 and all(w in err for w in words), (extra, err)
        assert not (tmp_path / "r").exists()


def test_libsvm_test_data_with_ids_training_never_saw(tmp_path, capsys):
    """A libsvm test file may use feature and label ids beyond the training file's (it
    declares no widths): evaluate accepts it, and so does experiment (helper-57: refused
    with 'feature index out of range'); the metrics are those of the trained labels."""
    rng = np.random.default_rng(3)

    def write(path, n, features, labels):
        lines = []
        for i in range(n):
            ls = sorted(set(rng.integers(0, labels, 2).tolist()))
            fs = sorted(set(rng.integers(1, features + 1, 6).tolist()))
            lines.append(",".join(map(str, ls)) + " " + " ".join(f"{f}:{rng.random():.3f}" for f in fs))
        path.write_text("\n".join(lines) + "\n")

    write(tmp_path / "tr.svm", 120, 50, 6)
    write(tmp_path / "te.svm", 40, 60, 8)
    code, out, err = run(capsys, "experiment", tmp_path / "tr.svm", tmp_path / "te.svm", "-o", tmp_path / "r",
                         "--inits", "zero,aop", "--threads", "1", "--quiet")
    assert code == 0, err
    assert "feature ids the model was not trained on" in err and "not trained, left out of the metrics" in err
    doc = json.loads((tmp_path / "r" / "table.json").read_text())
    assert doc["data"]["n_features"] == 50 and doc["data"]["n_labels"] == 6

    # an xmc test file declares its label space: another one (another data set's file) is
    # refused before any run, as evaluate refuses it -- its labels were cut to the training
    # file's and a report of nonsense metrics written
    (tmp_path / "tr.txt").write_text("3 4 3\n0 0:1\n1 1:1\n2 2:1 3:1\n")
    (tmp_path / "te.txt").write_text("2 4 5\n4 0:1\n1 1:1\n")
    code, _, err = run(capsys, "experiment", tmp_path / "tr.txt", tmp_path / "te.txt", "-o", tmp_path / "r2",
                       "--inits", "zero", "--threads", "1", "--quiet")
    assert code == 2 and "te.txt:1: the test data has 5 labels but the training data 3" in err, err
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r2.partial").exists()


def test_hashed_experiment_takes_raw_feature_ids_beyond_int32(tmp_path, capsys):
    """With --hash-buckets the experiment reads raw feature ids up to 2^63 - 2, as train
    and predict do (helper-82: it read int32 ids and refused them); without hashing such
    an id is refused with its location and what would read it, and nothing is written."""
    rng = np.random.default_rng(5)
    big = [2**40 + 7, 2**62 + 3, 2**63 - 2]

    def write(path, n):
        lines = [f"{n} {2**63 - 1} 3"]
        for i in range(n):
            ls = sorted(set(rng.integers(0, 3, 2).tolist()))
            fs = sorted(set(rng.integers(0, 40, 5).tolist()) | {big[i % 3]})
            lines.append(",".join(map(str, ls)) + " " + " ".join(f"{f}:{rng.random():.3f}" for f in fs))
        path.write_text("\n".join(lines) + "\n")

    write(tmp_path / "tr.txt", 90)
    write(tmp_path / "te.txt", 30)
    code, out, err = run(capsys, "experiment", tmp_path / "tr.txt", tmp_path / "te.txt", "-o", tmp_path / "r",
                         "--inits", "zero,aop", "--threads", "1", "--hash-buckets", "64", "--quiet")
    assert code == 0, err
    doc = json.loads((tmp_path / "r" / "table.json").read_text())
    assert doc["data"]["n_features"] == 2**63 - 1 and doc["data"]["n_labels"] == 3
    code, _, err = run(capsys, "experiment", tmp_path / "tr.txt", tmp_path / "te.txt", "-o", tmp_path / "r2",
                       "--inits", "zero", "--threads", "1", "--quiet")
    assert code == 2 and "tr.txt:1" in err and "--hash-buckets" in err, err
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r2.partial").exists()


def test_p_at_k_beyond_the_labels_is_cut_as_evaluate_cuts_k(tmp_path, capsys):
    """With 3 labels, P@5 is P@3 in the experiment as in evaluate (which cuts -k to the
    model's labels, predict.k_for_model); it divided 3 hits by 5 before (helper-89), and
    the table, the report and the summary line say what the column holds."""
    rng = np.random.default_rng(8)

    def write(path, n):
        lines = [f"{n} 30 3"]
        for _ in range(n):
            ls = sorted(set(rng.integers(0, 3, 2).tolist()))
            fs = sorted(set(rng.integers(0, 30, 6).tolist()))
            lines.append(",".join(map(str, ls)) + " " + " ".join(f"{f}:{rng.random():.3f}" for f in fs))
        path.write_text("\n".join(lines) + "\n")

    write(tmp_path / "tr.txt", 120)
    write(tmp_path / "te.txt", 50)
    code, out, err = run(capsys, "experiment", tmp_path / "tr.txt", tmp_path / "te.txt", "-o", tmp_path / "r",
                         "--inits", "zero", "--threads", "1")
    assert code == 0, err
    note = "P@5 is P@3 (3 labels: a k beyond the labels is cut to them, as headstart evaluate cuts it)"
    assert note in out + err
    assert note in (tmp_path / "r" / "table.md").read_text()
    assert html_escape(note) in (tmp_path / "r" / "report.html").read_text()
    got = json.loads((tmp_path / "r" / "table.json").read_text())["runs"][0]["metrics"]
    code, _, err = run(capsys, "train", tmp_path / "tr.txt", "-o", tmp_path / "m", "--init", "zero", "--threads",
                       "1", "-q")
    assert code == 0, err
    code, out, err = run(capsys, "evaluate", tmp_path / "m", tmp_path / "te.txt", "-k", "5", "--json")
    assert code == 0 and "only 3 label(s)" in err, err
    want = json.loads(out)
    assert "P@5" not in want
    assert got["P@1"] == want["P@1"] and got["P@3"] == want["P@3"] and got["P@5"] == want["P@3"]
    assert got["P@5"] > 3 / 5 * want["P@3"]          # not the 3 hits over 5 slots of before


# --------------------------------------------------------------------------- parsing
def test_parse_inits_and_grid():
    base = TrainParams(threads=1)
    specs = parse_inits("zero, bias, bias:-2, ovap-strict, aop, aop:-3, bias:-1", base)
    assert [s.name for s in specs] == ["zero", "bias -1", "bias -2", "ovap-strict", "aop", "aop t=-3"]
    assert specs[2].params.bias_init == -2.0 and specs[5].params.aop_t == -3.0
    # plain 'bias' takes --bias-init, as plain 'aop' takes --aop-t (helper-57)
    assert [s.name for s in parse_inits("bias,bias:-2", base.replace(bias_init=-0.5))] == ["bias -0.5", "bias -2"]
    assert len({s.key for s in specs}) == len(specs)
    for bad in ("", "zero,,aop", "ovap:1", "bias:x", "aop:5"):
        with pytest.raises(ParameterError):
            parse_inits(bad, base)
    grid = parse_grid("1,2:-1,1.5,-3", base)
    assert [(g.params.aop_s, g.params.aop_t) for g in grid] == [(1, -1), (1, -3), (2, -1), (2, 1.5), (2, -3)]
    runs, points = plan_runs(parse_inits("zero,aop", base), parse_grid("1:-2,-3", base))
    assert [r.name for r in runs] == ["zero", "aop", "s=1 t=-3"]
    assert [p["run"] for p in points] == ["aop", "s=1 t=-3"]
    assert parse_label_range("3:10") == (3, 10) and parse_label_range(":4") == (0, 4)
    assert parse_label_range("7:") == (7, -1)
    for bad in ("3", "5:5", "a:b", "-1:3"):
        with pytest.raises(ParameterError):
            parse_label_range(bad)


# --------------------------------------------------------------------------- aggregation
def _stats(trajectories, n_pos=None):
    from headstart.training.stats import ITER_FIELDS, TrainingStats

    lengths = np.array([len(t) for t in trajectories])
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    flat = np.concatenate([np.asarray(t, dtype=float) for t in trajectories])
    cols = {"label": np.arange(len(lengths)), "iterations": lengths - 1,
            "f_final": np.array([t[-1] for t in trajectories], dtype=float),
            "n_pos": np.asarray(n_pos if n_pos is not None else np.ones(len(lengths)), dtype=np.int64)}
    return TrainingStats(cols, off, {f: flat.copy() for f in ITER_FIELDS})


def test_per_iteration_aggregation():
    st = _stats([[8.0, 4.0, 2.0], [3.0, 1.0], [5.0]])
    raw = per_iteration(st, "objective", 0, 2)
    assert [list(v) for _, v in raw] == [[8, 3, 5], [4, 1], [2]]
    norm = per_iteration(st, "objective", 0, 2, hold_final=True, normalise=True)
    assert [sorted(v) for _, v in norm] == [[1, 3, 4], [1, 1, 2], [1, 1, 1]]
    assert iteration_cutoff(st, share=0.0, min_labels=1) == 2
    assert iteration_cutoff(st, share=0.0, min_labels=2) == 1


def test_positive_bins_and_binning():
    edges = positive_bins(1000)
    assert list(edges[:11]) == list(range(1, 12)) and edges[-1] > 1000
    assert np.all(np.diff(edges) > 0)
    npos = np.array([0, 1, 1, 1, 2, 2, 2, 500, 600, 700])
    x, mean, lo, hi, cnt = binned(npos, npos * 2.0, edges, min_labels=3)
    assert list(cnt) == [3, 3] and list(x) == [1.0, 2.0] and list(mean) == [2.0, 4.0]


def test_positive_decisions_in_blocks_equal_dense():
    from headstart.experiment.scores import positive_decisions
    from headstart.model.model import OvAModel

    rng = np.random.default_rng(0)
    W = sp.random(7, 20, density=0.4, random_state=1, dtype=np.float32, format="csr")
    W.data -= 0.5
    model = OvAModel(weights=W, intercept=rng.normal(size=7).astype(np.float32), n_features=20, label_space=12,
                     first_label=3)
    X = sp.random(50, 20, density=0.3, random_state=2, dtype=np.float32, format="csr")
    dense = (X @ W.T).toarray() + model.intercept > 0
    P = positive_decisions(model, X, block_bytes=4 * 7 * 6)   # blocks of 6 rows
    assert P.shape == (50, 7)
    np.testing.assert_array_equal(P.toarray(), dense)


def test_positive_decisions_follow_the_weights_not_the_label_space(monkeypatch):
    # a label space of mostly unused ids (their rows empty, a negative intercept): the
    # decisions come from the weight products and the few intercepts above the
    # threshold, never from dense scores of every label of every row (O(rows x labels):
    # 2.1 s a model on 500 test rows of a 2M-label space)
    import headstart.prediction.topk as topk
    from headstart.experiment.scores import positive_decisions
    from headstart.model.model import OvAModel

    def dense(*a, **kw):
        raise AssertionError("dense scores of every label")

    monkeypatch.setattr(topk, "_dense_block", dense)
    monkeypatch.setattr(topk, "decision_function", dense)
    L, d, first = 400_000, 30, 7
    rng = np.random.default_rng(3)
    used = np.sort(rng.choice(L, 40, replace=False))
    Wu = sp.random(used.size, d, density=0.3, random_state=4, dtype=np.float32, format="csr")
    Wu.data -= 0.3
    counts = np.zeros(L + 1, dtype=np.int64)
    counts[used + 1] = np.diff(Wu.indptr)
    W = sp.csr_matrix((Wu.data, Wu.indices, np.cumsum(counts)), shape=(L, d))
    b = np.full(L, -1.0, dtype=np.float32)
    b[used] = rng.normal(size=used.size).astype(np.float32)
    b[[5, L - 1]] = 0.25                     # two empty rows decided by their intercept alone
    model = OvAModel(weights=W, intercept=b, n_features=d, label_space=first + L, first_label=first)
    X = sp.random(60, d, density=0.3, random_state=5, dtype=np.float32, format="csr")
    P = positive_decisions(model, X, threads=1)
    assert P.shape == (60, L) and P.dtype == np.bool_
    cols = np.union1d(used, [5, L - 1])
    S = (X @ W[cols].T).toarray() + b[cols]
    expected = np.zeros((60, L), dtype=bool)
    expected[:, cols] = S > 0
    assert (P != sp.csr_matrix(expected)).nnz == 0


def test_contended_runs_are_flagged():
    from headstart.experiment.run import Experiment, RunResult
    from headstart.experiment.spec import RunSpec
    from headstart.experiment.table import contended_runs

    def result(name, before, after):
        return RunResult(RunSpec(name, name, TrainParams()), None, {}, {}, {"before": before, "after": after})

    exp = Experiment({}, {"threads": 2}, {"cpu_count": 2},
                     [result("quiet", [2.1, 2.0, 2.0], [2.4, 2.1, 2.0]), result("busy", [2.2, 2, 2], [3.5, 2.5, 2]),
                      result("unknown", [], [])])
    assert contended_runs(exp) == [{"run": "busy", "max_load_1min": 3.5}]


def test_figures_are_written_atomically(tmp_path):
    """A figure that fails while being drawn leaves the previous PNG whole and no
    temporary file behind (figures go through headstart.io.atomic.atomic_write)."""
    from headstart.experiment import figures

    fig, (ax,) = figures._figure()
    ax.plot([0, 1], [0, 1])
    path = tmp_path / "f.png"
    figures._save(fig, path)
    good = path.read_bytes()
    assert good[:8] == b"\x89PNG\r\n\x1a\n"

    class Broken:
        def savefig(self, fh, format):
            fh.write(b"\x89PNG partial")
            raise RuntimeError("drawing failed")

    with pytest.raises(RuntimeError, match="drawing failed"):
        figures._save(Broken(), path)
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png"]


def test_figures_by_positives_of_a_few_labels_are_drawn(tmp_path):
    """Two labels fill no bin of positives with enough labels: the log-log panels were
    empty and matplotlib refused them ('experiment --labels 0:3' ended in an internal
    error with half the figures written); now they are drawn, saying so."""
    from headstart.experiment import figures

    st = {"n_pos": np.array([3, 40]), "seconds": np.array([0.01, 0.02]), "iterations": np.array([2, 5]),
          "f_init": np.array([10.0, 50.0]), "distance": np.array([0.5, 2.0])}
    runs = [("zero", st), ("aop", dict(st))]
    for draw in (figures.time_vs_positives_figure, figures.iterations_vs_positives_figure,
                 figures.initial_loss_figure, figures.distance_figure):
        path = tmp_path / f"{draw.__name__}.png"
        draw(runs, path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_empty_panel_says_why(tmp_path):
    """A panel with nothing to draw names the reason: no label with training positives
    (helper-57: the objective figure, which has no bins, spoke of bins of positives)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from headstart.experiment.figures import _axes_scales

    for n_pos, words in (([0, 0], "no label of this range has"), ([3, 0], "no bin of positives holds")):
        fig, ax = plt.subplots()
        _axes_scales(ax, False, True, True, [("zero", {"n_pos": np.array(n_pos)})])
        assert words in ax.texts[0].get_text()
        plt.close(fig)


def test_feature_options_reach_every_run(bibtex_dir, capsys, tmp_path):
    """--transform and the hashing options are training parameters of every run, and the
    runs' metrics are those of the library's model trained with them."""
    from headstart.estimator import fit_model
    from headstart.experiment.run import evaluate_model, load_dataset

    code, _, err = run(capsys, "experiment", bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz", "-o",
                       tmp_path / "r", "--inits", "zero,aop", "--labels", f"{FIRST}:{FIRST + COUNT}", "--threads", "1",
                       "--no-stats",
                       "--transform", "log-one-plus", "--hash-buckets", "100", "--hash-functions", "2",
                       "--hash-seed", "4", "--quiet")
    assert code == 0, err
    doc = json.loads((tmp_path / "r" / "table.json").read_text())
    data = load_dataset(bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz")
    for rec in doc["runs"]:
        params = TrainParams.from_dict(rec["params"])
        assert (params.feature_transform, params.hash_buckets, params.hash_functions, params.hash_seed) == \
            ("log-one-plus", 100, 2, 4)
        model, _ = fit_model(data.X_train, data.Y_train, params, first_label=FIRST, num_labels=COUNT)
        assert model.n_features == 200
        assert rec["metrics"] == evaluate_model(model, data.X_test, data.Y_test[:, FIRST:FIRST + COUNT], 1)
    code, _, err = run(capsys, "experiment", bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz", "-o",
                       tmp_path / "r2", "--transform", "cube")
    assert code == 2 and "invalid choice: 'cube'" in err


def test_aop_grid_figure_of_few_labels_is_drawn(bibtex_dir, tmp_path):
    """A few labels leave no bin of positives with enough labels to draw: the grid figure
    failed there (log axes without data, helper-48: an internal error after all the
    training); its panels now say so, as the per-initialisation figures' do."""
    import headstart
    from headstart.training.trainer import train_labels

    X, Y = headstart.read_xmc(bibtex_dir / "train.txt.gz")
    _, _, st = train_labels(X, Y, TrainParams(threads=1), np.arange(4))
    _, fn, _ = GRID_FIGURE
    out = fn([("s=1 t=-1", st), ("aop", st)], tmp_path / "grid.png")
    assert (tmp_path / "grid.png").stat().st_size > 1000, out


def test_table_json_is_json_when_a_metric_is_undefined():
    """A precision no label defines (no positive decision in the range) is NaN in
    memory, null in table.json (NaN is not JSON: helper-57) and NaN again when read."""
    from headstart.experiment.run import _plain

    doc = _plain({"precision": float("nan"), "recall": np.float64("inf"), "P@1": np.float32(0.5), "k": [np.int64(3)]})
    assert doc == {"precision": None, "recall": None, "P@1": 0.5, "k": [3]}
    json.dumps(doc, allow_nan=False)


def test_an_interrupted_experiment_goes_on_with_the_same_command(bibtex_dir, capsys, tmp_path, monkeypatch):
    """helper-68: an interrupt lost every finished run (the report is written at the end),
    hours of them on a large set; now each finished run is kept in REPORT.partial and the
    same command trains only the others -- not a run of other parameters."""
    from headstart.cli import experiment as cli_experiment

    out = tmp_path / "rep"
    argv = ["experiment", bibtex_dir / "train.txt.gz", bibtex_dir / "test.txt.gz", "-o", out,
            "--labels", "0:8", "--threads", "1", "--inits", "zero,bias:-2,aop", "--quiet"]
    trained = []
    start = cli_experiment._Reporter.start_run

    def stop_at_aop(self, index, total, spec, n):
        trained.append(spec.name)
        if spec.name == "aop":
            raise KeyboardInterrupt
        return start(self, index, total, spec, n)

    monkeypatch.setattr(cli_experiment._Reporter, "start_run", stop_at_aop)
    code, _, _ = run(capsys, *argv)
    assert code != 0 and not out.exists()
    partial = tmp_path / "rep.partial"
    assert sorted(p.name for p in partial.glob("*.json")) == ["bias_-2.json", "zero.json"]
    first = {k: json.loads((partial / f"{k}.json").read_text())["run"] for k in ("zero", "bias_-2")}
    (tmp_path / "zero_first.npz").write_bytes((partial / "stats" / "zero.npz").read_bytes())
    trained.clear()
    monkeypatch.setattr(cli_experiment._Reporter, "start_run", lambda self, *a: trained.append(a[2].name) or
                        start(self, *a))
    code, _, _ = run(capsys, *argv)
    assert code == 0 and trained == ["aop"]
    doc = json.loads((out / "table.json").read_text())
    for rec in doc["runs"][:2]:
        saved = first[rec["key"]]
        assert rec["metrics"] == saved["metrics"] and rec["timing"] == saved["timing"]
        assert rec["summary"]["newton_iterations"] == saved["summary"]["newton_iterations"]
    np.testing.assert_array_equal(load_stats(out / "stats" / "zero.npz").columns["iterations"],
                                  load_stats(tmp_path / "zero_first.npz").columns["iterations"])
    assert not partial.exists()
    # a run of other parameters is trained again, not taken
    monkeypatch.setattr(cli_experiment._Reporter, "start_run", stop_at_aop)
    run(capsys, *argv, "--C", "2")
    assert (partial / "zero.json").is_file()
    trained.clear()
    monkeypatch.setattr(cli_experiment._Reporter, "start_run", lambda self, *a: trained.append(a[2].name) or
                        start(self, *a))
    code, _, _ = run(capsys, *argv)
    assert code == 0 and trained == ["zero", "bias -2", "aop"]


def _small_files(d, values_seed: int):
    """A tiny train/test pair whose sparsity pattern (shapes, nnz) does not depend on
    ``values_seed``, only its feature values: another tf-idf of the same documents."""
    from headstart.io.xmc import write_xmc

    rng = np.random.default_rng(0)
    X = sp.random(60, 30, density=0.2, format="csr", random_state=1, dtype=np.float32)
    Y = sp.csr_matrix((rng.random((60, 4)) < 0.3).astype(np.float32))
    X.data = np.random.default_rng(values_seed).uniform(0.1, 1.0, X.nnz).astype(np.float32)
    write_xmc(d / "train.txt", X, Y)
    write_xmc(d / "test.txt", X[:20], Y[:20])
    return d / "train.txt", d / "test.txt"


def test_a_checkpoint_of_other_data_of_the_same_shapes_is_not_taken(tmp_path):
    """REPORT_DIR.partial told its data by the paths, shapes and nnz only: a file rewritten
    with other values (another tf-idf, normalised rows) passed, and the report mixed runs
    of two data sets silently.  A digest of the arrays tells them apart (as a resumed
    model's data digest does)."""
    from headstart.experiment import load_dataset, run_experiment

    part = tmp_path / "rep.partial"
    base = TrainParams(threads=1)
    runs, _ = plan_runs(parse_inits("zero", base), [])
    train, test = _small_files(tmp_path, values_seed=1)
    first = run_experiment(load_dataset(train, test), runs, warmup=False, checkpoint=part)
    assert (part / "zero.json").is_file()
    again = run_experiment(load_dataset(train, test), runs, warmup=False, checkpoint=part)
    assert again.environment.get("runs_from_checkpoint") == ["zero"]       # the same data: taken
    train, test = _small_files(tmp_path, values_seed=2)                      # same shapes and nnz
    other = run_experiment(load_dataset(train, test), runs, warmup=False, checkpoint=part)
    assert "runs_from_checkpoint" not in other.environment
    assert other.runs[0].stats.columns["f_final"].tolist() != first.runs[0].stats.columns["f_final"].tolist()


def test_a_checkpoint_record_never_pairs_with_another_runs_statistics(tmp_path, monkeypatch):
    """save_checkpoint wrote stats/<key>.npz, then <key>.json: a crash between the two,
    while a record of the same key from other parameters was there, left that record
    with the new run's statistics -- taken as the old run's on the next start."""
    import headstart.io.atomic as atomic_mod
    from headstart.experiment import load_dataset, run_experiment
    from headstart.experiment import run as run_mod

    part = tmp_path / "rep.partial"
    train, test = _small_files(tmp_path, values_seed=1)
    data = load_dataset(train, test)
    runs1, _ = plan_runs(parse_inits("zero", TrainParams(threads=1)), [])
    runs2, _ = plan_runs(parse_inits("zero", TrainParams(threads=1, C=4.0)), [])
    run_experiment(data, runs1, warmup=False, checkpoint=part)
    real = atomic_mod.atomic_write

    def crash_on_record(path, *a, **k):
        if str(path).endswith(".json"):
            raise KeyboardInterrupt           # the record of the C = 4 run is never written
        return real(path, *a, **k)

    monkeypatch.setattr(atomic_mod, "atomic_write", crash_on_record)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(data, runs2, warmup=False, checkpoint=part)
    monkeypatch.undo()
    info = dict(data.info, first_label=0, num_labels=data.Y_train.shape[1])
    done = run_mod.load_checkpoint(part, info, runs1)
    if done:     # the C = 1 record may only come with the C = 1 statistics
        again = run_experiment(data, runs1, warmup=False)
        assert done["zero"].stats.columns["f_final"].tolist() == again.runs[0].stats.columns["f_final"].tolist()


def _git(cwd, *args):
    import subprocess

    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_source_commit_is_headstart_s_own_not_that_of_a_repository_around_the_install(tmp_path, monkeypatch):
    """The report's 'source' commit: an installed headstart in a virtual environment
    inside the user's own repository gave that repository's commit; it is recorded only
    for a git checkout of headstart (run.py tracked), with '-dirty' after an edit."""
    import shutil

    from headstart.experiment import run as run_module

    project = tmp_path / "project"
    installed = project / ".venv" / "lib" / "site-packages" / "headstart" / "experiment"
    installed.mkdir(parents=True)
    shutil.copy(run_module.__file__, installed / "run.py")
    (project / ".gitignore").write_text(".venv/\n")
    _git(project, "init", "-q")
    _git(project, "add", ".gitignore")
    _git(project, "commit", "-q", "-m", "the user's project")
    monkeypatch.setattr(run_module, "__file__", str(installed / "run.py"))
    assert run_module._git_commit() is None

    checkout = tmp_path / "checkout"
    (checkout / "headstart" / "experiment").mkdir(parents=True)
    shutil.copy(installed / "run.py", checkout / "headstart" / "experiment" / "run.py")
    _git(checkout, "init", "-q")
    _git(checkout, "add", "headstart")
    _git(checkout, "commit", "-q", "-m", "headstart")
    head = _git(checkout, "rev-parse", "HEAD")
    monkeypatch.setattr(run_module, "__file__", str(checkout / "headstart" / "experiment" / "run.py"))
    assert run_module._git_commit() == head
    with open(checkout / "headstart" / "experiment" / "run.py", "a") as fh:
        fh.write("# an edit\n")
    assert run_module._git_commit() == head + "-dirty"
