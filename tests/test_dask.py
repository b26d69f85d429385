"""The Dask backend on a LocalCluster of 2 worker processes on loopback.

Worker *processes* (``processes=True``, with a nanny each), not threads: a worker can
then be killed with SIGKILL like a lost machine (and its nanny restarts it), the
arguments and results really cross process boundaries (serialisation is tested), and
the workers' Python code does not share the test process's GIL.  Startup costs a few
seconds, so one cluster serves the whole module (the test that kills a worker runs last
and waits for the cluster to be whole again).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from headstart.estimator import fit_model  # noqa: E402
from headstart.metrics import precision_at_k  # noqa: E402
from headstart.model.format import load_model, read_manifest  # noqa: E402
from headstart.params import TrainParams  # noqa: E402
from headstart.prediction.topk import predict_topk, predict_topk_streaming  # noqa: E402
from headstart.distributed import train_sharded  # noqa: E402
from headstart.distributed.dask_backend import predict_dask, train_dask  # noqa: E402

NUM = 48
PARAMS = TrainParams(threads=2)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None, silence_logs=logging.ERROR)
    c = distributed.Client(cluster)
    try:
        c.wait_for_workers(2, timeout=120)
        # load the compiled kernels once per worker (numba's on-disk cache)
        c.run(lambda: __import__("headstart.training.trainer") and None)
        yield c
    finally:
        c.close()
        cluster.close()


@pytest.fixture(scope="module")
def data(bibtex_dir):
    from headstart.io import read_xmc

    return read_xmc(str(bibtex_dir / "train.txt.gz")), read_xmc(str(bibtex_dir / "test.txt.gz"))


@pytest.fixture(scope="module")
def reference(data):
    (X, Y), _ = data
    model, stats = fit_model(X, Y, PARAMS, first_label=0, num_labels=NUM)
    return model, stats


def assert_same_model(model_dir, ref):
    got = load_model(model_dir, allow_gaps=True)
    assert (got.first_label, got.num_labels) == (ref.first_label, ref.num_labels)
    # bit-identical: every label runs the same deterministic code anywhere
    assert (got.weights != ref.weights).nnz == 0 and got.weights.nnz == ref.weights.nnz
    assert np.array_equal(got.intercept, ref.intercept)
    return got


def test_scattered_data_arrives_aligned(client, data):
    """Received buffers can be unaligned; numba would then recompile, slower, on every worker."""
    from headstart.distributed.dask_backend import TrainingArrays

    (X, Y), _ = data
    before = X.copy()
    arrays = client.scatter(TrainingArrays(X, Y.tocsc()), broadcast=True, hash=False)

    def flags(a):
        return [getattr(M, k).flags.aligned for M in (a.X, a.Y) for k in ("data", "indices", "indptr")]

    assert client.submit(flags, arrays).result() == [True] * 6
    # and renumbered into the kernels' order once, there, for all its tasks (helper-56:
    # every task renumbered a copy of its own)
    from headstart.training.locality import FeatureOrder

    back = client.submit(lambda a: a, arrays).result()
    assert back.order is not None and np.array_equal(back.order.perm, FeatureOrder.by_frequency(X).perm)
    assert (back.X != FeatureOrder.by_frequency(X).to_internal(X)).nnz == 0
    assert (X != before).nnz == 0 and np.array_equal(X.indices, before.indices)   # the client's X as it was


def test_dask_run_equals_local_run(client, data, reference, tmp_path, caplog):
    (X, Y), (Xt, Yt) = data
    shards = []
    with caplog.at_level(logging.WARNING, logger="headstart"):
        r = train_dask(X, Y, PARAMS, tmp_path / "m", client=client, num_labels=NUM, shard_size=8, task_threads=1,
                       on_shard=shards.append)
    # tasks this small are slow, and said to be (helper-56)
    assert "tasks of 8 label(s) keep few of a task's 16 lanes per thread busy" in caplog.text
    assert r.complete and r.backend == "dask" and r.trained_labels == NUM
    assert r.info["workers"] == 2 and r.info["rounds"] == 1
    assert [s["first_label"] for s in read_manifest(tmp_path / "m")["shards"]] == list(range(0, NUM, 8))
    assert len(shards) == NUM // 8
    got = assert_same_model(tmp_path / "m", reference[0])
    # the same statistics as the local run, assembled from the per-shard files
    np.testing.assert_array_equal(r.stats["iterations"], reference[1]["iterations"])
    # and the same precision at k on the test set
    for k in (1, 3, 5):
        la, _ = predict_topk(got, Xt, k)
        lb, _ = predict_topk(reference[0], Xt, k)
        assert precision_at_k(Yt, la, k) == precision_at_k(Yt, lb, k)
        np.testing.assert_array_equal(la, lb)


def test_a_mostly_empty_label_space_trains_in_few_tasks_like_a_local_run(client, data, tmp_path):
    """The widened label space's run: the same model as a local one, bit for bit, in 2 tasks
    where default_task_size made 20.  (Placed before the tests of refused and foreign
    addresses: a training run on this module's cluster after them hung, helper-73; open.)"""
    import scipy.sparse as sp

    (X, Y), _ = data
    L, wide = 20_000, 400
    Yc = sp.csc_matrix(Y)[:, :NUM]
    cols = np.repeat(np.arange(NUM) * wide, np.diff(Yc.indptr))      # label j at j * wide, the others empty
    Yw = sp.csc_matrix((Yc.data, (Yc.indices, cols)), shape=(Y.shape[0], L))
    assert int((np.diff(Yw.indptr) > 0).sum()) == NUM
    ref, _ = fit_model(X, Yw.tocsr(), PARAMS)
    r = train_dask(X, Yw.tocsr(), PARAMS, tmp_path / "m", client=client)
    assert r.info["tasks"] == 2 and not r.missing
    assert_same_model(tmp_path / "m", ref)


def test_a_pretrained_start_of_a_mostly_empty_label_space_trains_in_few_tasks(client, data, tmp_path):
    """Labels without positives whose pretrained rows are equal share a solve in the
    trainer (SameProblems' start rows); the planner counted each a solve of its own (a
    start that depends on the label): 20 tasks where 2 do.  It now reads the model's rows
    as the trainer compares them: 2 tasks, the local model bit for bit."""
    import scipy.sparse as sp

    from headstart.distributed.sharded import shared_labels
    from headstart.model.writer import save_model

    (X, Y), _ = data
    L, wide = 20_000, 400
    Yc = sp.csc_matrix(Y)[:, :NUM]
    cols = np.repeat(np.arange(NUM) * wide, np.diff(Yc.indptr))      # label j at j * wide, the others empty
    Yw = sp.csc_matrix((Yc.data, (Yc.indices, cols)), shape=(Y.shape[0], L)).tocsr()
    start, _ = fit_model(X, Yw, PARAMS.replace(max_iter=3))
    save_model(start, tmp_path / "start")
    params = PARAMS.replace(init="pretrained", pretrained=str(tmp_path / "start"))
    ref, _ = fit_model(X, Yw, params)
    r = train_dask(X, Yw, params, tmp_path / "m", client=client)
    assert r.info["tasks"] == 2 and not r.missing
    assert_same_model(tmp_path / "m", ref)
    # the unused labels' rows are equal (they shared their solve): all but the first share
    counts = np.diff(sp.csc_matrix(Yw).indptr)
    assert shared_labels(counts, X.shape[0], params).sum() == L - NUM - 1


def test_dask_trains_every_objective_option_like_a_local_run(client, data, tmp_path):
    """Loss, regulariser, weighting, initialiser and post-processing travel to the workers
    with the parameters: the Dask model is the local model, bit for bit."""
    (X, Y), _ = data
    p = PARAMS.replace(loss="huber-hinge", huber_epsilon=0.5, regularizer="elastic-90-10", reg_scale=2.0,
                       weighting="2pm1", init="multi-pos", max_num_pos=3, sparsify=1.0)
    local, _ = fit_model(X, Y, p, first_label=0, num_labels=16)
    r = train_dask(X, Y, p, tmp_path / "m", client=client, num_labels=16, shard_size=8, task_threads=1)
    assert r.complete
    assert read_manifest(tmp_path / "m")["params"]["regularizer"] == "elastic-90-10"
    assert_same_model(tmp_path / "m", local)


def test_dask_resumes_a_local_run(client, data, reference, tmp_path):
    (X, Y), _ = data
    out = tmp_path / "m"
    train_sharded(X, Y, PARAMS, out, first_label=16, num_labels=16, shard_size=8)
    before = {s["file"]: s["sha256"] for s in read_manifest(out)["shards"]}
    r = train_dask(X, Y, PARAMS, out, client=client, num_labels=NUM, shard_size=8, task_threads=1, resume=True)
    assert r.already_finished == 16 and sorted(r.trained) == [(0, 8), (8, 16), (32, 40), (40, 48)]
    after = {s["file"]: s["sha256"] for s in read_manifest(out)["shards"]}
    assert all(after[f] == h for f, h in before.items())
    assert_same_model(out, reference[0])
    assert len(r.stats) == NUM and not r.stats_without


def test_predict_over_dask_equals_streaming(client, data, reference, tmp_path):
    (X, Y), (Xt, _) = data
    from headstart.model.format import save_model

    save_model(reference[0], tmp_path / "m", shard_size=10)
    want = predict_topk_streaming(tmp_path / "m", Xt, 5, allow_gaps=True)
    for model_memory in (1 << 30, 0):  # scattered model / every worker streams the shards
        got = predict_dask(tmp_path / "m", Xt, 5, client=client, chunk_rows=600, allow_gaps=True,
                           model_memory=model_memory)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_thresholded_prediction_over_dask_equals_the_local_one(client, data, reference, tmp_path):
    """Decisions score > a number or one threshold per label, on Dask, equal the local
    predict_above of the whole model, with the scattered model and with every worker
    streaming the shards."""
    import scipy.sparse as sp

    from headstart.distributed.dask_backend import iter_predict_dask
    from headstart.model.format import save_model
    from headstart.prediction.topk import predict_above

    (X, Y), (Xt, _) = data
    save_model(reference[0], tmp_path / "m", shard_size=10)
    model = load_model(tmp_path / "m", allow_gaps=True)
    per_label = np.random.default_rng(0).normal(-0.5, 0.3, size=model.label_space)
    for threshold in (-0.3, per_label):
        want = predict_above(model, Xt, threshold, return_scores=True)
        for model_memory in (1 << 30, 0):
            blocks = (Xt[r:r + 600] for r in range(0, Xt.shape[0], 600))
            got = sp.vstack(list(iter_predict_dask(tmp_path / "m", blocks, 1, client=client, allow_gaps=True,
                                                   model_memory=model_memory, threshold=threshold)))
            assert got.nnz == want.nnz > 0
            assert (got != want).nnz == 0


def test_dask_applies_the_transform_and_hashing_like_the_local_run(client, data, tmp_path):
    """TrainParams' feature transform and hashing reach the workers: the model and its
    predictions of raw test data are those of the local run."""
    (X, Y), (Xt, _) = data
    params = PARAMS.replace(feature_transform="log-one-plus", hash_buckets=200, hash_functions=2, hash_seed=9)
    ref, _ = fit_model(X, Y, params, num_labels=16)
    r = train_dask(X, Y, params, tmp_path / "m", client=client, num_labels=16, shard_size=8, task_threads=1)
    assert r.complete and read_manifest(tmp_path / "m")["preprocessing"]["hash"] == {
        "buckets": 200, "functions": 2, "seed": 9}
    got = assert_same_model(tmp_path / "m", ref)
    assert got.n_features == 400
    want = predict_topk(ref, Xt, 5)
    la, sa = predict_dask(tmp_path / "m", Xt, 5, client=client, chunk_rows=600, allow_gaps=True)
    np.testing.assert_array_equal(la, want[0])
    np.testing.assert_array_equal(sa, want[1])


def test_a_failing_task_stops_the_run_with_its_error(client, data, tmp_path):
    """An error raised inside a task (here: the pretrained model is missing on the
    workers) is not mistaken for a lost worker: the run stops with that error."""
    from headstart.errors import HeadstartError

    (X, Y), _ = data
    params = PARAMS.replace(init="pretrained", pretrained=str(tmp_path / "no-such-model"))
    with pytest.raises(HeadstartError, match="no-such-model"):
        train_dask(X, Y, params, tmp_path / "m", client=client, num_labels=16, shard_size=8, task_threads=1,
                   retries=0)
    # nothing was trained: the new model of 0 labels is gone again, so the corrected
    # command needs no --resume (helper-46); an empty target directory stays, empty
    assert not (tmp_path / "m").exists()
    (tmp_path / "e").mkdir()
    with pytest.raises(HeadstartError, match="no-such-model"):
        train_dask(X, Y, params, tmp_path / "e", client=client, num_labels=16, shard_size=8, task_threads=1,
                   retries=0)
    assert (tmp_path / "e").is_dir() and not any((tmp_path / "e").iterdir())


def test_the_time_budget_is_the_runs_not_each_tasks(client, data, tmp_path):
    """--timeout over Dask ends the run, as a local run's: each round's tasks get what is
    left of it and no round starts after it; the labels not reached are missing (resume),
    not an error after max_rounds of resubmissions (helper-46)."""
    (X, Y), _ = data
    r = train_dask(X, Y, PARAMS.replace(timeout=1e-3), tmp_path / "m", client=client, num_labels=NUM, shard_size=4,
                   task_threads=1)
    assert r.missing and r.info["rounds"] <= 1
    assert sum(b - a for a, b in r.missing) + r.trained_labels == NUM


def test_scheduler_files_are_read_strictly(tmp_path):
    """A scheduler file that is missing (Dask waited for it without end), not JSON, or
    without an address (internal errors) is refused naming it (helper-46)."""
    from headstart.distributed.dask_backend import scheduler_address
    from headstart.errors import DataFormatError, ParameterError

    assert scheduler_address("tcp://127.0.0.1:8786") == "tcp://127.0.0.1:8786"
    with pytest.raises(ParameterError, match="no.json: scheduler file not found"):
        scheduler_address(str(tmp_path / "no.json"))
    for body in ('{"address":', "[1, 2]", '{"address": 3}'):
        (tmp_path / "s.json").write_text(body)
        with pytest.raises(DataFormatError, match="s.json: not a Dask scheduler file"):
            scheduler_address(str(tmp_path / "s.json"))
    (tmp_path / "s.json").write_text('{"address": "tcp://10.0.0.1:8786", "type": "Scheduler"}')
    assert scheduler_address(str(tmp_path / "s.json")) == "tcp://10.0.0.1:8786"


def test_lost_worker_only_costs_its_task(client, data, reference, tmp_path):
    """SIGKILL a worker that is training a shard: the scheduler reruns its task elsewhere
    (its nanny restarts it), and the model is still the local one."""
    (X, Y), _ = data
    pids = client.run(os.getpid)
    killed: dict[str, list] = {}

    def kill_a_busy_worker(entry):
        if killed:
            return
        processing = client.processing()
        busy = [w for w, keys in processing.items() if keys]
        victim = busy[0] if busy else next(iter(pids))
        killed[victim] = list(processing.get(victim, ()))
        os.kill(pids[victim], signal.SIGKILL)

    try:
        r = train_dask(X, Y, PARAMS, tmp_path / "m", client=client, num_labels=NUM, shard_size=2,
                       task_threads=1, on_shard=kill_a_busy_worker)
        assert killed and next(iter(killed.values())), "the killed worker had a task in flight"
        assert r.complete and r.trained_labels == NUM
        entries = read_manifest(tmp_path / "m")["shards"]
        assert len(entries) == NUM // 2  # every shard registered once (an overlap would have raised)
        assert_same_model(tmp_path / "m", reference[0])
    finally:
        client.wait_for_workers(2, timeout=120)


def test_losing_every_worker_costs_a_round_not_the_run(client, data, reference, tmp_path):
    """SIGKILL both workers: the scattered data is gone with them, so the client scatters
    again and resubmits the shards still missing (a second round)."""
    (X, Y), _ = data
    pids = client.run(os.getpid)
    killed = []

    def kill_all(entry):
        if not killed:
            killed.append(entry["first_label"])
            for pid in pids.values():
                os.kill(pid, signal.SIGKILL)

    try:
        r = train_dask(X, Y, PARAMS, tmp_path / "m", client=client, num_labels=NUM, shard_size=2,
                       task_threads=1, on_shard=kill_all)
        assert killed and r.complete and r.info["rounds"] == 2 and r.info["task_errors"] > 0
        assert_same_model(tmp_path / "m", reference[0])
    finally:
        client.wait_for_workers(2, timeout=120)


def test_cli_evaluate_on_dask_equals_the_local_evaluation(client, reference, bibtex_dir, tmp_path, capsys):
    """``headstart evaluate --scheduler``: the same metrics, and the same F1 of thresholded
    decisions (whose scores the workers send back), as evaluating in this process."""
    import json

    from headstart.cli import main as cli_main
    from headstart.model.format import save_model

    save_model(reference[0], tmp_path / "m")
    test = str(bibtex_dir / "test.txt.gz")
    out = {}
    for name, extra in (("local", []), ("dask", ["--scheduler", client.scheduler.address])):
        for rule in (["-k", "5"], ["--threshold=-0.5"]):
            code = cli_main.main(["evaluate", str(tmp_path / "m"), test, "--json", "--allow-gaps",
                                  "--chunk-rows", "700", *rule, *extra])
            assert code == 0
            out[name, rule[0]] = json.loads(capsys.readouterr().out)
    for rule in ("-k", "--threshold=-0.5"):
        assert out["dask", rule] == out["local", rule]
    assert "Macro-F1" in out["dask", "--threshold=-0.5"] and out["dask", "-k"]["P@1"] > 0
    # a predictions file is evaluated here, not on Dask
    with pytest.raises(SystemExit):
        cli_main.main(["evaluate", "--predictions", str(tmp_path / "p.txt"), test, "--dask-workers", "1"])


@pytest.mark.slow
def test_cli_train_and_predict_with_local_dask_workers(bibtex_dir, tmp_path):
    """The command line end to end (starts its own LocalClusters: slow)."""
    train, test = str(bibtex_dir / "train.txt.gz"), str(bibtex_dir / "test.txt.gz")
    run = [sys.executable, "-m", "headstart"]
    subprocess.run(run + ["train", train, "-o", str(tmp_path / "d"), "--num-labels", "16", "--dask-workers", "2",
                          "--threads", "1"], check=True, timeout=600)
    subprocess.run(run + ["train", train, "-o", str(tmp_path / "l"), "--num-labels", "16"], check=True, timeout=600)
    for name in ("d", "l"):
        subprocess.run(run + ["predict", str(tmp_path / name), test, "-o", str(tmp_path / f"{name}.txt"),
                              "--allow-gaps", "--dask-workers", "2", "--chunk-rows", "1000"],
                       check=True, timeout=600)
    assert (tmp_path / "d.txt").read_bytes() == (tmp_path / "l.txt").read_bytes()
    # decisions above a threshold: the same file on Dask as locally
    for name, extra in (("td.txt", ["--dask-workers", "2"]), ("tl.txt", [])):
        subprocess.run(run + ["predict", str(tmp_path / "l"), test, "-o", str(tmp_path / name), "--allow-gaps",
                              "--threshold=-0.5", "--chunk-rows", "1000", *extra], check=True, timeout=600)
    assert (tmp_path / "td.txt").read_bytes() == (tmp_path / "tl.txt").read_bytes()


def test_a_task_cut_inside_its_range_registers_the_labels_it_trained(client, data, reference, tmp_path):
    """A time budget that ends inside a task of several threads leaves gaps in its range
    (the threads' chunks stop where they are): the client registers each row under the
    label the task's statistics name (helper-56: rows taken as first, first + 1, ...
    gave 262 labels other labels' weights, and --resume called the model complete)."""
    from headstart.distributed.dask_backend import train_range_task

    (X, Y), _ = data

    def gapped(arrays, params, first, stop, threads):
        a, W, b, st = train_range_task(arrays, params, first, stop, threads)
        if stop - first < 8:
            return a, W, b, st
        keep = np.r_[0:2, 5:W.shape[0]]           # labels first + 2 .. first + 4 not reached
        return a, W[keep], b[keep], st.take(keep)

    r = train_dask(X, Y, PARAMS, tmp_path / "m", client=client, num_labels=16, shard_size=8, task_threads=1,
                   task_fn=gapped)
    assert r.complete and r.info["rounds"] == 2            # the gaps trained in the second round
    got = load_model(tmp_path / "m", allow_gaps=True)      # (labels 0..15 of bibtex's 159)
    ref = reference[0]
    assert (got.weights != ref.weights[:16]).nnz == 0 and np.array_equal(got.intercept, ref.intercept[:16])


def test_tasks_get_what_is_left_of_the_budget_when_they_start_and_the_clients_code(monkeypatch, tmp_path):
    """run_task, on its own: the deadline is the client's wall clock, so a task that
    waited in the queue gets only what is left (helper-56: each got the whole budget
    again); a worker with other headstart code refuses (helper-56: 5,410 weights of
    bibtex differed, silently); relative paths are made absolute for the workers
    (helper-56: a worker read its own directory's cost file)."""
    import time

    from headstart.distributed import dask_backend as db
    from headstart.errors import HeadstartError

    seen = []
    task = lambda arrays, params, first, stop, threads: seen.append(params) or first   # noqa: E731
    digest = db.code_digest()
    assert db.run_task(task, digest, None, None, PARAMS, 3, 5, 1) == 3 and seen[-1] == PARAMS
    db.run_task(task, digest, time.time() - 10, None, PARAMS, 3, 5, 1)
    assert seen[-1].timeout == pytest.approx(1e-3)
    db.run_task(task, digest, time.time() + 100, None, PARAMS, 3, 5, 1)
    assert 90 < seen[-1].timeout <= 100
    with pytest.raises(HeadstartError, match="other headstart code"):
        db.run_task(task, "0" * 64, None, None, PARAMS, 3, 5, 1)
    monkeypatch.chdir(tmp_path)
    p = db._task_params(PARAMS.replace(weighting="file", weights_pos_file="w.txt"))
    assert p.weights_pos_file == str(tmp_path / "w.txt") and p.weights_neg_file is None
    with pytest.raises(Exception, match="unknown scheme 'nonsense'"):
        db.scheduler_address("nonsense://x")
    assert db.scheduler_address("tcp://127.0.0.1:8786") == "tcp://127.0.0.1:8786"


def test_no_worker_is_a_clear_error_after_worker_wait(data, tmp_path):
    """A scheduler without workers: the client says it waits, honours worker_wait and
    fails with a message that names the problem (helper-56: "60.0: 1" after a fixed
    60 s, whatever worker_wait said); nothing is left behind."""
    from headstart.distributed.dask_backend import DistributedTrainingError

    (X, Y), _ = data
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as c:
        with pytest.raises(DistributedTrainingError, match="no Dask worker joined the scheduler within 1 s"):
            train_dask(X, Y, PARAMS, tmp_path / "m", client=c, num_labels=4, worker_wait=1.0)
    assert not (tmp_path / "m").exists()


def test_prediction_that_loses_every_worker_for_good_ends_after_worker_wait(data, reference, tmp_path):
    """A cluster whose workers all go away during prediction, none coming back (helper-76):
    the block's task just waits in the scheduler for a worker, and ``result()`` waited for
    ever.  Now prediction fails with a clear error once no worker has been there for
    worker_wait seconds."""
    import threading

    from headstart.distributed.dask_backend import DistributedTrainingError, iter_predict_dask
    from headstart.model.format import save_model

    (X, Y), (Xt, _) = data
    save_model(reference[0], tmp_path / "m", shard_size=10)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(1, timeout=120)

        def blocks():
            yield Xt[:100]
            cluster.scale(0)       # the only worker goes; its results with it
            deadline = time.monotonic() + 60
            while c.scheduler_info()["workers"] and time.monotonic() < deadline:
                time.sleep(0.1)
            yield Xt[100:200]

        got: list = []
        run = threading.Thread(target=lambda: got.append(_outcome(
            lambda: list(iter_predict_dask(tmp_path / "m", blocks(), 5, client=c, allow_gaps=True, window=1,
                                           model_memory=0, worker_wait=1.0)))), daemon=True)
        t0 = time.monotonic()
        run.start()
        run.join(90)
        assert not run.is_alive(), "prediction still waited 90 s after its last worker went"
        assert isinstance(got[0], DistributedTrainingError), got
        assert "no Dask worker joined the scheduler within 1 s" in str(got[0])
        assert time.monotonic() - t0 < 60


def _outcome(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the test looks at it
        return e


def _service(greeting: bytes = b""):
    """A TCP service on loopback that is not a Dask scheduler: it accepts connections, sends
    ``greeting`` (if any) and holds them.  Returns (address, stop): ``stop()`` ends it and
    closes the connections it holds -- a Dask client stuck in its handshake with it then
    fails and ends.  (Closing the listening socket alone left the thread blocked in
    accept(), which kept the connections open: the stuck clients, their threads and event
    loops stayed in the test process for the rest of its files, helper-76.)"""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    held: list = []

    def loop() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            if greeting:
                conn.sendall(greeting)

    thread = threading.Thread(target=loop, name="test-dask-service", daemon=True)
    thread.start()

    def stop() -> None:
        try:
            srv.shutdown(socket.SHUT_RDWR)     # wakes the accept() (close() from here does not)
        except OSError:
            pass
        srv.close()
        thread.join(10)
        assert not thread.is_alive(), "the test service did not stop"
        for conn in held:
            conn.close()

    return f"tcp://127.0.0.1:{srv.getsockname()[1]}", stop


def _wait_for_threads_to_end(threads, wait: float = 60.0) -> list:
    """The threads of ``threads`` still alive after up to ``wait`` seconds."""
    import time

    deadline = time.monotonic() + wait
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [t for t in threads if t.is_alive()]


def test_a_service_that_is_not_a_scheduler_is_named_within_the_wait():
    """An address where something else listens (helper-56): a service that waits for its
    own request held Dask's handshake ~14 minutes, and one that greets first was read as
    a frame length ("out of memory"); both now fail within the wait, naming the address.
    The connection attempts left behind end once the service is gone: none stays in the
    process (helper-76: they stayed, with their event loops, for every later test file)."""
    import threading
    import time

    from headstart.distributed.dask_backend import DistributedTrainingError, _connect

    before = set(threading.enumerate())
    for greeting, message in ((b"", "no Dask scheduler answered within 2 s"),
                              (b"SSH-2.0-OpenSSH_9.2p1\r\n" * 4, "not a Dask scheduler: the service there")):
        address, stop = _service(greeting)
        try:
            t0 = time.time()
            with pytest.raises(DistributedTrainingError, match=message) as err:
                _connect(distributed, address, wait=1.0)
            assert address in str(err.value) and time.time() - t0 < 10
        finally:
            stop()
    left = [t for t in threading.enumerate() if t not in before and t.name == "headstart-dask-connect"]
    assert not _wait_for_threads_to_end(left), "an abandoned connection attempt outlived its service"


def test_a_failed_connection_leaves_no_open_client_for_the_garbage_collector(monkeypatch):
    """The Client of a connection attempt that failed other than with an OSError (a service
    that greets first) was left "connecting"; the cyclic garbage collector found it later,
    anywhere, and its __del__ took LoopRunner's class-wide lock to stop its loop -- inside
    another LoopRunner.start(), which holds that lock, the test process waited on itself
    for ever (helper-76: making this module's LocalCluster after the test above).  The
    attempt's Client is now closed where it failed."""
    import gc
    import threading
    import types

    from distributed.utils import LoopRunner

    from headstart.distributed.dask_backend import DistributedTrainingError, _connect

    made: list = []

    class Recorded(distributed.Client):
        def __init__(self, *args, **kwargs):
            made.append(self)
            super().__init__(*args, **kwargs)

    address, stop = _service(b"SSH-2.0-OpenSSH_9.2p1\r\n" * 4)
    try:
        with pytest.raises(DistributedTrainingError, match="not a Dask scheduler: the service there"):
            _connect(types.SimpleNamespace(Client=Recorded), address, wait=1.0)
    finally:
        stop()
    assert len(made) == 1 and made[0].status == "closed"
    del made[:]
    # the collection at the worst moment: inside a LoopRunner's start (on a lock of this
    # test's own, so that a failure here cannot block the rest of the process)
    monkeypatch.setattr(LoopRunner, "_lock", threading.Lock())
    real = LoopRunner._start_unlocked

    def start_with_a_collection(self):
        gc.collect()
        return real(self)

    monkeypatch.setattr(LoopRunner, "_start_unlocked", start_with_a_collection)
    done: list = []

    def make_a_cluster():
        with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0",
                                      silence_logs=logging.ERROR):
            done.append(True)

    maker = threading.Thread(target=make_a_cluster, daemon=True)
    maker.start()
    maker.join(60)
    assert done, "making a LocalCluster waited on LoopRunner's lock: a collected Client stopped its loop there"


def test_training_waits_on_its_own_client_whatever_the_default_client(client, data, tmp_path):
    """Dask's as_completed waited on the event loop of the process's *default* client -- the
    Client made last, here one stuck in its handshake with a service that never answers,
    as the test above left behind: training on ``client`` then never saw its tasks end
    (CI ran out of time, stop 59).  Training now waits on its own client's loop, and
    headstart's own connection attempts never make themselves the default."""
    import threading
    import time

    from distributed.client import _get_global_client, _set_global_client

    from headstart.distributed.dask_backend import DistributedTrainingError, _connect

    (X, Y), _ = data
    before = _get_global_client()
    address, stop = _service()
    def users_client() -> None:
        try:
            distributed.Client(address=address, timeout="60s")
        except OSError:      # (its handshake fails once the service is gone: expected)
            pass

    stuck = threading.Thread(target=users_client, daemon=True)
    try:
        with pytest.raises(DistributedTrainingError, match="no Dask scheduler answered"):
            _connect(distributed, address, wait=1.0)
        assert _get_global_client() is before             # the abandoned attempt is not the default
        stuck.start()                                     # a user's Client, stuck, is the default
        deadline = time.monotonic() + 30
        while _get_global_client() is before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _get_global_client() is not before and _get_global_client() is not client
        done: list = []
        trainer = threading.Thread(target=lambda: done.append(
            train_dask(X, Y, PARAMS, tmp_path / "m", client=client, num_labels=6)), daemon=True)
        trainer.start()
        trainer.join(120)
        assert done and done[0].complete, "training on the given client did not end"
        assert load_model(tmp_path / "m", allow_gaps=True).num_labels == 6
    finally:
        stop()
        if stuck.ident is not None:
            stuck.join(60)                                # its handshake fails once the service is gone
        _set_global_client(before)


def test_a_workers_memory_limit_bounds_the_memory_a_task_sees():
    """A worker limited to part of the machine sized its lanes by the machine's memory
    (helper-56: the nanny then killed it, reported as lost tasks); inside a task the
    memory available is the limit's share that is left, and the lanes follow it."""
    from headstart.resources import available_memory
    from headstart.training.budget import choose_lanes

    def inside() -> tuple:
        return available_memory(), choose_lanes(4_000_000, 4_000_000, 1)

    limit = 3 * 2**30
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, memory_limit=limit,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as c:
        seen, lanes = c.submit(inside, pure=False).result()
    outside = available_memory()
    assert 0 < seen < 0.95 * limit and (outside is None or seen < outside)
    # 16 lanes of 4M rows and 4M features take ~4 GiB, 8 lanes ~1.7 GiB: the lane budget
    # (half of what is left, at least 2 GiB) holds 8, where the machine's would hold 16
    assert lanes == 8 and choose_lanes(4_000_000, 4_000_000, 1, budget=16 * 2**30) == 16


def test_the_local_cluster_runs_without_dasks_wall_clock_timers():
    """The LocalCluster of n_workers: Dask's profiler (every 10 ms), tick monitor (20 ms) and
    memory monitor (100 ms) cost CPU per second of wall time (helper-73: an idle 2-worker
    cluster 0.19 cores, 0.025 without); they are off or slowed there, and only there."""
    import dask

    from headstart.distributed.dask_backend import dask_client

    before = dask.config.get("distributed.worker.profile.enabled")
    with dask_client(None, 1) as c:
        c.wait_for_workers(1, timeout=120)
        timers = c.run(lambda dask_worker: {k: v.callback_time for k, v in dask_worker.periodic_callbacks.items()})
    (worker,) = timers.values()
    assert "profile" not in worker and worker["tick"] >= 1000 and worker["memory_monitor"] >= 1000
    assert dask.config.get("distributed.worker.profile.enabled") == before     # the client's own config


def test_default_tasks_are_cut_by_work_and_line_up_on_resume():
    """Labels without positives are nearly free (one shared solve per chunk): a label
    space of them is cut into few wide tasks (helper-73: 2M labels made 1,954 tasks of
    1,024); a space of labels with positives keeps default_task_size's grid; a resumed run's
    cells are those of the interrupted run; a start that depends on the label counts all."""
    from headstart.distributed import plan_shards
    from headstart.distributed.dask_backend import (MAX_TASK_LABELS, MAX_TASK_SPAN, TASKS_PER_WORKER,
                                                    default_task_size, plan_tasks, shared_labels)

    for count, slots in ((1500, 2), (100, 2), (22908, 2), (300_000, 8)):
        assert plan_tasks([(7, 7 + count)], np.zeros(count, bool), 7, slots) == \
            plan_shards([(7, 7 + count)], default_task_size(count, slots), origin=7)
    rng = np.random.default_rng(0)
    counts = np.where(rng.random(2_000_000) < 0.01, 3, 0)     # 1% of 2M labels with positives
    shared = shared_labels(counts, 100, PARAMS)
    assert shared.sum() == (counts == 0).sum()
    plan = plan_tasks([(0, counts.size)], shared, 0, 2)
    edges = [a for a, _ in plan] + [plan[-1][1]]
    assert edges[0] == 0 and edges[-1] == counts.size and all(b == c for (_, b), (c, _) in zip(plan, plan[1:]))
    assert TASKS_PER_WORKER * 2 <= len(plan) < 100          # (1,954 of default_task_size)
    assert max(b - a for a, b in plan) <= MAX_TASK_SPAN
    assert max(int((~shared[a:b]).sum()) for a, b in plan) <= MAX_TASK_LABELS
    # resume: the missing ranges are cut into the same cells
    missing = [(0, edges[3]), (edges[5], edges[9]), (edges[20] + 17, counts.size)]
    again = plan_tasks(missing, shared, 0, 2)
    cells = set(plan)
    assert all(cell in cells for cell in again if cell[0] != edges[20] + 17)
    assert sum(b - a for a, b in again) == sum(b - a for a, b in missing)
    # every label costs a solve where the start depends on the label (a pretrained model)
    assert not shared_labels(counts, 100, PARAMS.replace(init="pretrained", pretrained="/nowhere")).any()
    # labels of every instance are shared too
    assert shared_labels(np.array([0, 1, 99, 100]), 100, PARAMS).tolist() == [True, False, False, True]


def test_a_refused_address_fails_at_once(monkeypatch):
    """Nothing listening at the address: Dask retried for its whole 60 s timeout; a plain TCP
    connect sees it at once, and a scheduler being started gets REFUSED_WAIT to listen."""
    import socket
    import time

    from headstart.distributed import dask_backend
    from headstart.distributed.dask_backend import DistributedTrainingError, _connect

    monkeypatch.setattr(dask_backend, "REFUSED_WAIT", 1.0, raising=False)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    t0 = time.time()
    with pytest.raises(DistributedTrainingError, match="connection refused: no Dask scheduler listens there"):
        _connect(distributed, address, wait=60.0)
    assert time.time() - t0 < 10
    t0 = time.time()
    with pytest.raises(DistributedTrainingError, match="host not found"):
        _connect(distributed, "tcp://no-such-host.invalid:8786", wait=60.0)
    assert time.time() - t0 < 10
