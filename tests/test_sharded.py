"""Sharded, resumable training (local threads), SIGKILL + resume, and merging models."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from headstart.errors import ModelFormatError
from headstart.estimator import fit_model
from headstart.model.format import MANIFEST, load_model, read_manifest, save_model
from headstart.params import TrainParams
from headstart.distributed import plan_shards, read_stats, train_sharded
from headstart.distributed.merging import merge
from headstart.distributed.sharded import load_stats_file, stats_file_name, write_stats_file
from headstart.training.stats import TrainingStats
from headstart.model.ranges import contiguous_runs

NUM = 48          # labels [0, NUM) of bibtex: about a second of training
PARAMS = TrainParams(threads=2)


@pytest.fixture(scope="module")
def bibtex(bibtex_dir):
    from headstart.io import read_xmc

    return read_xmc(str(bibtex_dir / "train.txt.gz"))


@pytest.fixture(scope="module")
def reference(bibtex):
    """The uninterrupted in-memory run of labels [0, NUM)."""
    X, Y = bibtex
    model, stats = fit_model(X, Y, PARAMS, first_label=0, num_labels=NUM)
    return model, stats


def assert_same_weights(model_dir, ref, allow_gaps=False):
    got = load_model(model_dir, allow_gaps=allow_gaps)
    assert got.first_label == ref.first_label
    assert got.num_labels == ref.num_labels
    diff = got.weights - ref.weights
    assert (abs(diff).max() if diff.nnz else 0.0) == 0.0   # bit-identical, not just close
    np.testing.assert_array_equal(got.intercept, ref.intercept)


# --------------------------------------------------------------------------- planning helpers
def test_plan_shards_follows_the_grid():
    assert plan_shards([(0, 10)], 4) == [(0, 4), (4, 8), (8, 10)]
    # a resumed run's cells line up with the interrupted run's grid
    assert plan_shards([(5, 13), (20, 22)], 4) == [(5, 8), (8, 12), (12, 13), (20, 22)]
    assert plan_shards([(7, 12)], 4, origin=3) == [(7, 11), (11, 12)]
    assert plan_shards([], 4) == []
    with pytest.raises(ValueError, match="shard_size"):
        plan_shards([(0, 3)], 0)


def test_contiguous_runs_split_at_gaps():
    assert contiguous_runs(np.array([3, 4, 5, 9, 10, 12])) == [(0, 3), (3, 5), (5, 6)]
    assert contiguous_runs(np.array([], dtype=np.int64)) == []


# --------------------------------------------------------------------------- training
def test_sharded_run_equals_in_memory_run(bibtex, reference, tmp_path):
    X, Y = bibtex
    seen = []
    r = train_sharded(X, Y, PARAMS, tmp_path / "m", num_labels=NUM, shard_size=7, on_shard=seen.append)
    assert r.complete and r.trained_labels == NUM and r.already_finished == 0
    m = read_manifest(tmp_path / "m")
    assert [(s["first_label"], s["first_label"] + s["num_labels"]) for s in m["shards"]] == plan_shards([(0, NUM)], 7)
    assert len(seen) == len(m["shards"])
    assert_same_weights(tmp_path / "m", reference[0], allow_gaps=True)
    # statistics of every shard are kept next to it and add up to the in-memory run's
    assert not r.stats_without
    for col in ("label", "iterations", "cg_steps", "n_pos", "status", "nnz"):
        np.testing.assert_array_equal(r.stats[col], reference[1][col])
    np.testing.assert_array_equal(r.stats.iterations["objective"], reference[1].iterations["objective"])


def test_shards_follow_the_grid_with_labels_without_positives_and_on_resume(bibtex, tmp_path):
    """Labels without positives share one solve per chunk and the trainer lets such chunks
    grow to many shard sizes; a resumed run's chunks start where the missing labels do:
    the shards follow the grid first_label + k * shard_size all the same (helper-62:
    --shard-size 500 wrote shards of 30,976 labels)."""
    X, Y = bibtex
    Y = sp.hstack([Y[:, :3], sp.csr_matrix((Y.shape[0], 600), dtype=Y.dtype), Y[:, 3:5]], format="csr")
    p = PARAMS.replace(threads=1)
    r = train_sharded(X, Y, p, tmp_path / "m", shard_size=50)
    assert r.complete and r.trained_labels == Y.shape[1]
    cells = [(s["first_label"], s["first_label"] + s["num_labels"]) for s in read_manifest(tmp_path / "m")["shards"]]
    assert sorted(cells) == plan_shards([(0, Y.shape[1])], 50)
    full = load_model(tmp_path / "m")
    # a resume of a range that starts off the grid: its shards still end on the grid
    r = train_sharded(X, Y, p, tmp_path / "r", first_label=0, num_labels=130, shard_size=50)
    r = train_sharded(X, Y, p, tmp_path / "r", shard_size=50, resume=True)
    assert r.already_finished == 130 and r.complete
    cells = sorted((s["first_label"], s["first_label"] + s["num_labels"])
                   for s in read_manifest(tmp_path / "r")["shards"])
    assert cells == plan_shards([(0, 130)], 50) + plan_shards([(130, Y.shape[1])], 50)
    assert [len(st) for st in [r.stats]] == [Y.shape[1]] and not r.stats_without
    got = load_model(tmp_path / "r")
    assert (got.weights != full.weights).nnz == 0 and np.array_equal(got.intercept, full.intercept)


def test_stats_file_round_trip(reference, tmp_path):
    st = reference[1].take(np.arange(5, 12))
    path = write_stats_file(tmp_path, st)
    assert path == tmp_path / stats_file_name(5, 7)
    back = load_stats_file(path)
    for k, v in st.columns.items():
        np.testing.assert_array_equal(back[k], v)
    for k, v in st.iterations.items():
        np.testing.assert_array_equal(back.iterations[k], v)
    np.testing.assert_array_equal(back.iter_offsets, st.iter_offsets)


def test_an_input_refused_before_any_shard_leaves_no_model(bibtex, tmp_path):
    """A cost file or pretrained model refused once training starts left a model of 0
    labels, which the corrected command (without --resume) then refused to replace
    (helper-46); the empty model is removed again -- an existing model never is."""
    from headstart.errors import HeadstartError

    X, Y = bibtex
    (tmp_path / "costs.txt").write_text("1.0\nabc\n")
    bad = PARAMS.replace(weighting="file", weights_pos_file=str(tmp_path / "costs.txt"))
    with pytest.raises(HeadstartError, match="costs.txt"):
        train_sharded(X, Y, bad, tmp_path / "m", num_labels=8, shard_size=4)
    assert not (tmp_path / "m").exists()
    train_sharded(X, Y, PARAMS, tmp_path / "m", num_labels=8, shard_size=4)
    with pytest.raises(HeadstartError, match="costs.txt"):
        train_sharded(X, Y, bad, tmp_path / "m", num_labels=8, shard_size=4, overwrite=True)
    assert (tmp_path / "m").is_dir()       # it existed before: not removed


def test_a_damaged_statistics_file_does_not_stop_a_resume(bibtex, reference, tmp_path, caplog):
    """A truncated statistics file (helper-46: an internal BadZipFile after the missing
    labels were trained; an empty one refused the resume) is a warning naming it; its
    labels' statistics are left out, the model is resumed as before.  Files written
    before the zero_start and shared_with columns read with them as 0 and -1 (merged
    with newer statistics too)."""
    import zipfile

    X, Y = bibtex
    out = tmp_path / "m"
    train_sharded(X, Y, PARAMS, out, num_labels=NUM, shard_size=4)
    m = read_manifest(out)
    m["shards"] = m["shards"][:-1]                        # the last shard's labels to train again
    (out / MANIFEST).write_text(json.dumps(m))
    damaged = out / stats_file_name(0, 4)
    damaged.write_bytes(damaged.read_bytes()[:300])
    with pytest.raises(Exception, match="unreadable statistics file") as e:
        load_stats_file(damaged)
    assert not isinstance(e.value, zipfile.BadZipFile)
    r = train_sharded(X, Y, PARAMS, out, num_labels=NUM, shard_size=4, resume=True)
    assert r.complete and r.stats_without == [(0, 4)]
    assert "unreadable statistics file" in caplog.text and str(damaged) in caplog.text
    assert_same_weights(out, reference[0], allow_gaps=True)
    # an older version's file, without the zero_start column
    st = reference[1].take(np.arange(5, 12))
    del st.columns["zero_start"], st.columns["shared_with"]
    old = load_stats_file(write_stats_file(tmp_path, st))
    np.testing.assert_array_equal(old["zero_start"], np.zeros(7))
    np.testing.assert_array_equal(old["shared_with"], np.full(7, -1))
    both = TrainingStats.concat([reference[1].take(np.arange(0, 5)), old])
    assert both["shared_with"].dtype == np.int64 and np.array_equal(both["shared_with"], np.full(12, -1))


def test_statistics_written_as_csv_json_lines_or_json(reference, tmp_path):
    """--stats F.json is one JSON document (a list), F.jsonl a line per label, F.csv a
    table: each with a row per label (helper-18: .json held JSON lines)."""
    import csv

    st = reference[1].take(np.arange(0, 6))
    for name in ("s.json", "s.jsonl", "s.csv"):
        st.write(tmp_path / name)
    doc = json.loads((tmp_path / "s.json").read_text())
    lines = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert len(doc) == len(lines) == len(rows) == 6 and doc == lines
    assert [r["label"] for r in doc] == [int(r["label"]) for r in rows] == list(st["label"])
    # a per-label column keeps its meaning in every format; the per-iteration
    # trajectories sit apart (helper-52: "cg_steps" and "seconds" were replaced by them)
    for r, c in zip(doc, rows):
        assert r["cg_steps"] == int(c["cg_steps"]) and r["seconds"] == float(c["seconds"])
        if "trajectory" in r:
            assert sum(r["trajectory"]["cg_steps"]) == r["cg_steps"]
    st.take(np.arange(0)).write(tmp_path / "e.csv")      # no rows: still the header
    assert (tmp_path / "e.csv").read_text().split("\r\n")[0].startswith("label,")


def test_resume_trains_only_missing_labels(bibtex, reference, tmp_path):
    X, Y = bibtex
    out = tmp_path / "m"
    r1 = train_sharded(X, Y, PARAMS, out, first_label=8, num_labels=16, shard_size=8)
    before = {s["file"]: s["sha256"] for s in read_manifest(out)["shards"]}
    done = []
    r2 = train_sharded(X, Y, PARAMS.replace(threads=1), out, num_labels=NUM, shard_size=8, resume=True,
                       progress=done.append)
    assert r1.trained == [(8, 16), (16, 24)]
    assert r2.already_finished == 16 and r2.trained_labels == NUM - 16
    assert sum(done) == NUM  # progress counts the labels finished earlier too
    assert sorted(r2.trained) == [(0, 8), (24, 32), (32, 40), (40, 48)]
    after = {s["file"]: s["sha256"] for s in read_manifest(out)["shards"]}
    assert all(after[f] == h for f, h in before.items())  # finished shards untouched
    assert_same_weights(out, reference[0], allow_gaps=True)
    assert len(r2.stats) == NUM and not r2.stats_without
    # the run's summary counts the work of this run only (helper-52: the earlier labels' too)
    lab, its = r2.stats.columns["label"], r2.stats.columns["iterations"]
    mine = (lab < 8) | (lab >= 24)
    s2 = r2.run_summary()
    assert s2["labels"] == NUM - 16 and s2["newton_iterations"] == int(its[mine].sum()) < int(its.sum())
    assert r1.run_summary() == r1.stats.summary()
    # nothing left to do: resuming again trains nothing
    r3 = train_sharded(X, Y, PARAMS, out, num_labels=NUM, resume=True)
    assert r3.trained == [] and r3.already_finished == NUM
    # the nonzero weights of a range that cuts shards: its own rows only (helper-52:
    # whole shards were counted)
    r4 = train_sharded(X, Y, PARAMS, out, first_label=4, num_labels=10, resume=True)
    assert r4.nnz == reference[0].weights[4:14].nnz and r2.nnz == reference[0].weights.nnz


def test_resume_checks_parameters_and_data(bibtex, tmp_path):
    X, Y = bibtex
    out = tmp_path / "m"
    train_sharded(X, Y, PARAMS, out, num_labels=4)
    with pytest.raises(ModelFormatError, match=r"parameter C is 1\.0 in the model but 2\.0 now"):
        train_sharded(X, Y, PARAMS.replace(C=2.0), out, num_labels=8, resume=True)
    with pytest.raises(ModelFormatError, match="trained on 4880 instances but the data has 4000"):
        train_sharded(X[:4000], Y[:4000], PARAMS, out, num_labels=8, resume=True)
    Y2 = sp.csr_matrix(Y, copy=True)
    Y2.data[:10] = 0
    Y2.eliminate_zeros()
    with pytest.raises(ModelFormatError, match="label counts"):
        train_sharded(X, Y2, PARAMS, out, num_labels=8, resume=True)
    # other values, same shapes and label counts (a regenerated tf-idf): the data's digest
    X3 = sp.csr_matrix(X, copy=True)
    X3.data *= 3
    with pytest.raises(ModelFormatError, match="trained on other data .* sha256"):
        train_sharded(X3, Y, PARAMS, out, num_labels=8, resume=True)
    # a model written before the digest existed resumes as before
    m = json.loads((out / MANIFEST).read_text())
    assert len(m.pop("data_sha256")) == 64
    (out / MANIFEST).write_text(json.dumps(m))
    train_sharded(X, Y, PARAMS, out, num_labels=8, resume=True)
    assert sum(s["num_labels"] for s in read_manifest(out)["shards"]) == 8


def test_unfinished_model_is_not_replaced_without_resume(bibtex, tmp_path):
    """A label range is a finished model of its range (replaced by a rerun); labels of
    the range a run did not train -- a time budget, a kill between shards -- make it
    unfinished, and only --resume or overwrite=True touch it."""
    X, Y = bibtex
    out = tmp_path / "m"
    train_sharded(X, Y, PARAMS, out, num_labels=4)
    assert read_manifest(out)["label_range"] == [0, 4]
    train_sharded(X, Y, PARAMS, out, num_labels=4, overwrite="complete")     # finished: replaced
    with pytest.raises(ModelFormatError, match="already exists"):
        train_sharded(X, Y, PARAMS, out, num_labels=4)
    m = json.loads((out / MANIFEST).read_text())
    m["label_range"] = [0, 8]                   # as left by a run of 8 labels killed after 4
    (out / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ModelFormatError, match=r"unfinished model .* first \[4, 8\)\): continue it with --resume"):
        train_sharded(X, Y, PARAMS, out, num_labels=4, overwrite="complete")
    r = train_sharded(X, Y, PARAMS, out, num_labels=12, resume=True)    # resuming widens the range
    assert r.trained == [(4, 12)] and read_manifest(out)["label_range"] == [0, 12]
    r = train_sharded(X, Y, PARAMS, out, first_label=4, num_labels=4, overwrite=True)
    assert read_manifest(out)["shards"][0]["first_label"] == 4 and r.trained == [(4, 8)]


def test_a_second_writer_of_the_same_directory_is_refused(bibtex, reference, tmp_path):
    """Two runs writing one model directory at once (a job array with one -o) would each
    rewrite the manifest from its own list and drop the other's shards while both report
    success (helper-37): the second is refused at once, naming the first; a killed holder
    leaves no stale lock (the kernel releases it) and a finished run no lock file."""
    from headstart.errors import ResourceError
    from headstart.model.lock import lock_path, model_dir_lock

    X, Y = bibtex
    out = tmp_path / "m"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom headstart.model.lock import model_dir_lock\n"
         f"with model_dir_lock({str(out)!r}):\n    print('held', flush=True)\n    sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ResourceError, match=rf"another run is writing .* \(process {holder.pid} on "):
            train_sharded(X, Y, PARAMS, out, num_labels=4, shard_size=2)
        assert not out.exists()
        with pytest.raises(ResourceError, match="another run is writing"):      # another spelling of the path
            train_sharded(X, Y, PARAMS, tmp_path / "." / "m", num_labels=4, shard_size=2)
        (tmp_path / "alias").symlink_to(out, target_is_directory=True)   # a link to it (helper-46)
        with pytest.raises(ResourceError, match="another run is writing"):
            train_sharded(X, Y, PARAMS, tmp_path / "alias", num_labels=4, shard_size=2)
        # the writers of whole models too -- a spooled (non-sharded) run, save_model,
        # merge -- would replace the directory a sharded run is filling (helper-46)
        from headstart.estimator import fit_to_directory

        with pytest.raises(ResourceError, match="another run is writing"):
            fit_to_directory(X, Y, PARAMS, out, num_labels=4)
        with pytest.raises(ResourceError, match="another run is writing"):
            save_model(fit_model(X, Y, PARAMS, num_labels=4)[0], out)
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    r = train_sharded(X, Y, PARAMS, out, num_labels=4, shard_size=2)
    assert r.complete and not lock_path(out).exists()
    with model_dir_lock(out), model_dir_lock(out):     # a nested writer in the holding process
        assert lock_path(out).exists()
    assert not lock_path(out).exists()


def test_cli_sharded_run_does_not_delete_a_model_before_it_has_a_new_one(bibtex_dir, tmp_path, capsys):
    """--shard-size writes into MODEL_DIR as shards finish, so over an existing model it
    would delete it at the start (helper-37): refused before any work, the model intact;
    --resume continues it and an unsharded run replaces it once complete."""
    from headstart.cli.main import main

    train = str(bibtex_dir / "train.txt.gz")
    out = tmp_path / "m"
    assert main(["train", train, "-o", str(out), "--num-labels", "4", "-q"]) == 0
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    for extra in (["--shard-size", "2"], ["--shard-size", "2", "--C", "2"]):
        assert main(["train", train, "-o", str(out), "--num-labels", "4", "-q", *extra]) == 2
        err = capsys.readouterr().err
        assert "a model is there, and --shard-size writes the new model into the directory shard by shard" in err
        assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert main(["train", train, "-o", str(out), "--num-labels", "4", "-q", "--shard-size", "2", "--resume"]) == 0
    assert main(["train", train, "-o", str(out), "--num-labels", "4", "-q", "--C", "2"]) == 0
    assert read_manifest(out)["params"]["C"] == 2.0


def test_cli_refuses_an_output_it_could_not_write_before_training(bibtex_dir, tmp_path, capsys, monkeypatch):
    """A statistics file or model directory in a directory that takes no new files (a
    read-only mount) is refused before training, not after it (helper-37; os.access is
    replaced here, since the tests may run as root, for whom permissions do not count)."""
    from headstart.cli.main import main

    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == ro else real(p, mode, **kw))
    train = str(bibtex_dir / "train.txt.gz")
    for argv, what in ((["-o", str(tmp_path / "m"), "--stats", str(ro / "s.csv")], "statistics file"),
                       (["-o", str(ro / "m")], "model directory")):
        capsys.readouterr()
        assert main(["train", train, "--num-labels", "2", "-q", *argv]) == 2
        err = capsys.readouterr().err
        assert f"cannot write the {what}: {ro} is not writable" in err, err
        assert not (tmp_path / "m").exists()


def test_cost_files_are_compared_by_content_not_path(bibtex, tmp_path, monkeypatch):
    """Parts trained with weighting 'file' (helper-18): the same costs under another path
    (jobs started in other directories) merge and resume; other costs under the same
    path are refused -- the manifest keeps the costs' sha256, not only the path."""
    from headstart.model.format import merge_models

    X, Y = bibtex
    costs = tmp_path / "costs.txt"
    costs.write_text("2.0\n" * Y.shape[1])
    monkeypatch.chdir(tmp_path)
    p1 = PARAMS.replace(weighting="file", weights_pos_file="costs.txt", max_iter=3)
    p2 = p1.replace(weights_pos_file="./costs.txt")
    train_sharded(X, Y, p1, tmp_path / "a", num_labels=3)
    train_sharded(X, Y, p2, tmp_path / "b", first_label=3, num_labels=3)
    assert read_manifest(tmp_path / "a")["costs_sha256"] == read_manifest(tmp_path / "b")["costs_sha256"]
    merge_models(tmp_path / "ab", [tmp_path / "a", tmp_path / "b"], allow_gaps=True)
    train_sharded(X, Y, p2, tmp_path / "a", num_labels=5, resume=True)        # same costs, other path
    costs.write_text("3.0\n" * Y.shape[1])
    train_sharded(X, Y, p1, tmp_path / "c", first_label=5, num_labels=3)
    with pytest.raises(ModelFormatError, match="cannot merge: parameter weights_\\*_file \\(the costs' sha256\\)"):
        merge_models(tmp_path / "ac", [tmp_path / "a", tmp_path / "c"], allow_gaps=True)
    with pytest.raises(ModelFormatError, match="cannot resume: parameter weights_\\*_file"):
        train_sharded(X, Y, p1, tmp_path / "a", num_labels=8, resume=True)


def test_a_cost_file_is_parsed_once_per_training(bibtex, tmp_path, monkeypatch):
    """``--weighting file``: the trainer's costs, the manifest's digest of them and the
    shard planner's shared labels each read the file (~0.25 s a parse at 2M labels);
    an unchanged file is parsed once a process, a rewritten one again, a bad one every
    time with the same error (never cached)."""
    from headstart.errors import DataFormatError
    from headstart.io import labelvec
    from headstart.objective import weighting

    X, Y = bibtex
    X, Y = X[:600], sp.hstack([Y[:600, :6], sp.csr_matrix((600, 2))], format="csr")   # 2 unused labels
    L = Y.shape[1]
    parsed = []
    real = labelvec.read_label_values
    monkeypatch.setattr(labelvec, "read_label_values", lambda path, *a, **k: parsed.append(path) or real(path, *a, **k))
    costs = tmp_path / "costs.txt"
    old = time.time() - 60       # a file changed just now is not trusted by its timestamps

    def write(text, age):
        costs.write_text(text)
        os.utime(costs, (old - age, old - age))

    write("2.0\n" * L, 0)
    p = PARAMS.replace(weighting="file", weights_pos_file=str(costs), max_iter=3)
    train_sharded(X, Y, p, tmp_path / "a")
    assert parsed == [str(costs)]
    pos, _ = weighting.label_costs(p, np.diff(Y.tocsc().indptr), 600)
    assert parsed == [str(costs)] and pos.flags.writeable      # the kernels' type: a copy of the cached costs
    assert not weighting.read_costs(costs, L).flags.writeable
    write("3.0\n" * L, 10)                                    # same size, older: another mtime
    train_sharded(X, Y, p, tmp_path / "b")
    assert parsed == [str(costs)] * 2
    assert read_manifest(tmp_path / "a")["costs_sha256"] != read_manifest(tmp_path / "b")["costs_sha256"]
    write("3.0\n" * (L - 1) + "x\n", 20)
    for _ in range(2):
        with pytest.raises(DataFormatError, match=f"^{costs}:{L}: 'x' is not a number$"):
            weighting.read_costs(costs, L)
    assert len(parsed) == 4
    write("3.0\n" * L, 0)
    costs.touch()                # changed just now: read each time until it has aged
    weighting.read_costs(costs, L)
    weighting.read_costs(costs, L)
    assert len(parsed) == 6


def test_leftovers_of_a_crash_are_cleaned_on_resume(bibtex, reference, tmp_path):
    """An unlisted shard file and an orphan statistics file (crash between the writes)."""
    X, Y = bibtex
    out = tmp_path / "m"
    train_sharded(X, Y, PARAMS, out, num_labels=8, shard_size=8)
    save_model(reference[0], tmp_path / "other")  # a real shard file to plant
    (out / "shards" / "labels-0000008-0000015.npz").write_bytes(b"half written")
    write_stats_file(out, reference[1].take(np.arange(8, 16)))
    r = train_sharded(X, Y, PARAMS, out, num_labels=16, shard_size=8, resume=True)
    assert r.trained == [(8, 16)] and len(r.stats) == 16
    assert_same_weights(out, reference[0].__class__(
        weights=reference[0].weights[:16], intercept=reference[0].intercept[:16], n_features=X.shape[1],
        label_space=Y.shape[1]), allow_gaps=True)


# --------------------------------------------------------------------------- SIGKILL and resume
def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "headstart", *args]


def test_sigkill_then_resume_gives_the_uninterrupted_model(bibtex_dir, reference, tmp_path):
    out = tmp_path / "model"
    train = str(bibtex_dir / "train.txt.gz")
    cmd = _cli("train", train, "-o", str(out), "--num-labels", str(NUM), "--shard-size", "2",
               "--threads", "1", "--resume", "-q")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    listed: list[dict] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                listed = json.loads((out / MANIFEST).read_text())["shards"]
            except (OSError, ValueError):  # not created yet (or being replaced)
                listed = []
            if len(listed) >= 3:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.005)
    finally:
        if proc.poll() is None and not listed:
            proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"training ended before it could be killed: {proc.stderr.read()!r}"
    killed = read_manifest(out)
    covered = sum(s["num_labels"] for s in killed["shards"])
    assert 6 <= covered < NUM, "the kill must leave some, not all, labels finished"

    run = subprocess.run(_cli("train", train, "-o", str(out), "--num-labels", str(NUM), "--shard-size", "2",
                              "--threads", "2", "--resume", "--stats", str(tmp_path / "stats.csv")),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert f"trained {NUM - covered} labels of [0, {NUM})" in run.stdout
    assert f"{covered} were finished before" in run.stdout
    final = read_manifest(out)
    final_files = {s["file"]: s["sha256"] for s in final["shards"]}
    for s in killed["shards"]:  # no finished shard was trained twice
        assert final_files[s["file"]] == s["sha256"]
    assert_same_weights(out, reference[0], allow_gaps=True)
    # complete statistics, including the labels trained before the kill
    stats, without = read_stats(out, 0, NUM)
    assert not without
    np.testing.assert_array_equal(stats["iterations"], reference[1]["iterations"])
    assert len((tmp_path / "stats.csv").read_text().splitlines()) == NUM + 1
    leftovers = [p.name for p in out.rglob("*") if p.name.startswith(".")]
    assert leftovers == []
    # resumed once more, nothing is left: said so (not a work summary of the earlier runs)
    run = subprocess.run(_cli("train", train, "-o", str(out), "--num-labels", str(NUM), "--shard-size", "2",
                              "--threads", "1", "--resume"), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and f"nothing to train: all {NUM} labels of [0, {NUM}) were finished" in run.stdout


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_stops_within_a_pass_and_keeps_the_finished_shards(tmp_path, sig, code, word):
    """SIGINT to a sharded run (2 threads, from zero: seconds per 100-label chunk) ends it
    at once -- before, the threads went on through every chunk left -- with exit 130,
    the finished shards kept and the way to resume named.  SIGTERM (a batch scheduler's
    stop, `timeout`) does the same with exit 143: before, it killed the process and left
    the temporary files behind."""
    from _reference import data_path

    train = data_path("debian-deps")
    if train is None:
        pytest.skip("debian-deps is not present (../shared/data)")
    out = tmp_path / "model"
    cmd = _cli("train", str(train), "-o", str(out), "--init", "zero", "--num-labels", "3000",
               "--shard-size", "100", "--threads", "2", "-q")
    # a shell's background job has SIGINT ignored, and a child would inherit that
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    listed: list[dict] = []
    try:
        while time.monotonic() < deadline and proc.poll() is None and not listed:
            try:
                listed = json.loads((out / MANIFEST).read_text())["shards"]
            except (OSError, ValueError):
                listed = []
            time.sleep(0.01)
        assert listed and proc.poll() is None, "the run ended, or wrote no shard, before it could be interrupted"
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        waited = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert word in err and "--resume" in err
    # the 29 chunks left take ~30 s or more on 2 cores; stopping within a pass takes well under a second
    assert waited < 10, f"{waited:.1f} s from SIGINT to exit"
    shards = read_manifest(out)["shards"]
    assert 1 <= sum(s["num_labels"] for s in shards) < 3000
    assert [p.name for p in out.rglob("*") if p.name.startswith(".")] == []


# --------------------------------------------------------------------------- merge
def _main(argv: list[str]) -> int:
    from headstart.cli.main import main

    return main(argv)


@pytest.fixture(scope="module")
def pieces(bibtex_dir, tmp_path_factory):
    """Three batch-scheduler style jobs over --first-label/--num-labels (plain train)."""
    from headstart.cli.main import main

    root = tmp_path_factory.mktemp("pieces")
    train = str(bibtex_dir / "train.txt.gz")
    for name, a, n in (("a", 0, 60), ("b", 60, 50), ("c", 110, 49), ("c2", 100, 10)):
        assert main(["train", train, "-o", str(root / name), "--first-label", str(a), "--num-labels", str(n),
                     "--threads", "2", "-q"]) == 0
    assert main(["train", train, "-o", str(root / "badC"), "--first-label", "110", "--num-labels", "5",
                 "--C", "2", "--threads", "2", "-q"]) == 0
    return root


def test_merge_of_label_range_jobs(pieces, bibtex, reference, tmp_path, capsys):
    X, Y = bibtex
    out = tmp_path / "merged"
    assert _main(["merge", str(out), str(pieces / "c"), str(pieces / "a"), str(pieces / "b")]) == 0
    assert "merged 3 model(s): 3 shard(s), 159 of 159 labels" in capsys.readouterr().out
    merged = load_model(out)
    parts = [load_model(pieces / n, allow_gaps=True) for n in "abc"]
    assert abs(merged.weights - sp.vstack([p.weights for p in parts])).max() == 0.0
    np.testing.assert_array_equal(merged.intercept, np.concatenate([p.intercept for p in parts]))
    # and a label-range job trains the same weights as a run over all labels
    assert abs(merged.weights[:NUM] - reference[0].weights).max() == 0.0


def test_merge_refuses_pieces_trained_on_other_data(pieces, bibtex, tmp_path, capsys):
    """Same shapes and label counts, other values (every feature x 3, as a regenerated
    tf-idf would give): the data's sha256 in the manifests tells them apart."""
    from headstart.io import write_xmc

    X, Y = bibtex
    X3 = sp.csr_matrix(X, copy=True)
    X3.data *= 3
    write_xmc(tmp_path / "x3.txt", X3, Y)
    other = tmp_path / "other"
    assert _main(["train", str(tmp_path / "x3.txt"), "-o", str(other), "--first-label", "60", "--threads", "2",
                  "-q"]) == 0
    assert _main(["merge", str(tmp_path / "o"), str(pieces / "a"), str(other)]) == 2
    err = capsys.readouterr().err
    assert "were trained on other data" in err and not (tmp_path / "o").exists()


def test_merge_reports_overlap(pieces, tmp_path, capsys):
    assert _main(["merge", str(tmp_path / "o"), str(pieces / "a"), str(pieces / "b"), str(pieces / "c2")]) == 2
    err = capsys.readouterr().err
    assert "cannot merge: labels [60, 110)" in err and "overlaps labels [100, 110)" in err
    assert not (tmp_path / "o").exists()


def test_merge_reports_gaps(pieces, tmp_path, capsys):
    assert _main(["merge", str(tmp_path / "g"), str(pieces / "a"), str(pieces / "c")]) == 2
    assert "would miss [60, 110) of [0, 159)" in capsys.readouterr().err
    assert _main(["merge", str(tmp_path / "g"), str(pieces / "a"), str(pieces / "c"), "--allow-gaps"]) == 0
    out = capsys.readouterr().out
    assert "109 of 159 labels" in out and "gaps: 50 label(s) without a shard: [60, 110)" in out
    assert load_model(tmp_path / "g", allow_gaps=True).missing_ranges == [(60, 110)]


def test_merge_reports_mismatched_parameters(pieces, tmp_path, capsys):
    assert _main(["merge", str(tmp_path / "p"), str(pieces / "a"), str(pieces / "b"), str(pieces / "badC")]) == 2
    err = capsys.readouterr().err
    assert "cannot merge: parameter C is 1.0 in" in err and "but 2.0 in" in err


def test_merge_carries_statistics_of_sharded_runs(bibtex, tmp_path):
    X, Y = bibtex
    Y = Y[:, :24]
    train_sharded(X, Y, PARAMS, tmp_path / "x", num_labels=8, shard_size=4)
    train_sharded(X, Y, PARAMS, tmp_path / "y", first_label=8, num_labels=16, shard_size=8)
    r = merge(tmp_path / "m", [tmp_path / "x", tmp_path / "y"])
    assert r.missing == [] and r.stats_files == r.shards == 4
    stats, without = read_stats(tmp_path / "m")
    assert len(stats) == 24 and not without
    with pytest.raises(ModelFormatError, match="also an input"):
        merge(tmp_path / "x", [tmp_path / "x", tmp_path / "y"])


# --------------------------------------------------------------------------- optional extra
def test_import_headstart_never_imports_dask():
    code = ("import sys, headstart, headstart.distributed, headstart.cli.main\n"
            "from headstart.distributed import train_sharded, read_stats\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_dask_options_without_dask_installed_say_how_to_get_it(bibtex_dir, tmp_path):
    code = ("import sys\n"
            "sys.modules['distributed'] = None; sys.modules['dask'] = None  # as if not installed\n"
            "from headstart.cli.main import main\n"
            f"sys.exit(main(['train', {str(bibtex_dir / 'train.txt.gz')!r}, '-o', {str(tmp_path / 'm')!r},\n"
            "                '--num-labels', '2', '--dask-workers', '2']))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "pip install 'headstart[dask]'" in run.stderr


def test_python_save_refuses_an_unfinished_model(bibtex, tmp_path):
    """OvAClassifier.save / save_model replace a finished model, but not one that a
    killed or timed-out run left unfinished (as the command line refuses it): its
    work would be lost silently."""
    from headstart import OvAClassifier
    from headstart.model.writer import save_model

    X, Y = bibtex
    out = tmp_path / "m"
    train_sharded(X, Y, PARAMS, out, num_labels=4)
    clf = OvAClassifier(threads=1).fit(X, Y[:, :3])
    clf.save(out)                                      # a finished model: replaced
    assert read_manifest(out)["label_range"] == [0, 3]
    train_sharded(X, Y, PARAMS, out, num_labels=4, overwrite=True)
    m = json.loads((out / MANIFEST).read_text())
    m["label_range"] = [0, 8]                          # as left by a run of 8 labels killed after 4
    (out / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ModelFormatError, match="unfinished model"):
        clf.save(out)
    with pytest.raises(ModelFormatError, match="unfinished model"):
        save_model(clf._check_fitted(), out)
    assert read_manifest(out)["label_range"] == [0, 8]   # untouched
