"""The trainer's memory-saving representations are exact (issue 4's memory target)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import headstart
from headstart.training import pages
from headstart.training.packed import PackedRows
from headstart.training.kernel import STAT_FIELDS
from headstart.training.stats import ITER_FIELDS, TrainingStats
from headstart.training.chunks import ChunkResult, stack_rows


def _weights(rows=200, d=70000, density=0.01, seed=0):
    """Like pruned weights: |w| in [0.01, 2] (a few distinct top bytes), either sign."""
    rng = np.random.default_rng(seed)
    W = sp.random(rows, d, density=density, format="csr", dtype=np.float32, random_state=seed)
    W.data = (rng.choice([-1.0, 1.0], W.nnz) * np.exp(rng.uniform(np.log(0.01), np.log(2.0), W.nnz))
              ).astype(np.float32)
    W.data[::97] = -0.0
    return W


def _same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    return (a.shape == b.shape and np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
            and np.array_equal(a.data.view(np.uint32), b.data.view(np.uint32)))


@pytest.mark.parametrize("density", [0.0005, 0.02, 0.9])
def test_packed_rows_round_trip_bit_exact(density):
    W = _weights(density=density, d=70000 if density < 0.5 else 300)
    P = PackedRows.pack(W)
    assert isinstance(P, PackedRows) and P.data is None          # few top bytes: values packed too
    assert _same(P.to_csr(), W)
    stored = P.codes.nbytes + P.low.nbytes + P.top.nbytes
    assert stored < 0.75 * (W.indices.nbytes + W.data.nbytes)


def test_packed_rows_fall_back_where_they_cannot_pack():
    rng = np.random.default_rng(1)
    W = _weights()
    W.data = (rng.standard_normal(W.nnz) * 10.0 ** rng.integers(-30, 30, W.nnz)).astype(np.float32)
    P = PackedRows.pack(W)                       # > 16 distinct top bytes: values kept as they are
    assert P.data is not None and _same(P.to_csr(), W)
    U = sp.csr_matrix((np.ones(3, np.float32), np.array([5, 2, 9], np.int32), np.array([0, 3])), shape=(1, 10))
    assert PackedRows.pack(U) is U               # unsorted row: not packed
    E = sp.csr_matrix((4, 10), dtype=np.float32)
    assert _same(PackedRows.pack(E).to_csr(), E)


def test_stack_rows_assembles_packed_and_plain_chunks():
    parts = [_weights(rows=r, d=5000, density=0.05, seed=s) for s, r in enumerate((7, 1, 30, 12))]
    ref = sp.vstack(parts, format="csr")
    chunks = []
    for i, W in enumerate(parts):
        w = PackedRows.pack(W) if i % 2 == 0 else W
        chunks.append(ChunkResult(np.arange(W.shape[0]), w, np.full(W.shape[0], i, np.float32), None))
    M, b = stack_rows(chunks, 5000)
    assert _same(M, ref)
    assert np.array_equal(b, np.repeat(np.arange(4, dtype=np.float32), [7, 1, 30, 12]))
    assert all(c.weights is None for c in chunks)   # released as they are copied


def test_pages_arrays_are_zero_and_writable():
    a = pages.zeros((3, 100000))
    assert a.shape == (3, 100000) and a.flags.c_contiguous and a.flags.writeable and not a.any()
    a[2, -1] = 5.0
    assert a.sum() == 5.0
    small = pages.zeros(10, np.int64)
    assert small.dtype == np.int64 and not small.any()
    ws = [np.zeros((2, 70000)), np.arange(5.0), np.zeros(1, dtype=np.int64)]
    re = pages.zeros_like_workspace(ws)
    assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(ws, re))


def _stats(labels, lengths, seed=0):
    rng = np.random.default_rng(seed)
    table = rng.random((len(labels), len(STAT_FIELDS)))
    flat = {f: rng.random(int(np.sum(lengths))) for f in ITER_FIELDS}
    return TrainingStats.from_table(np.asarray(labels), table, np.asarray(lengths), flat)


def test_stats_take_and_concat_keep_each_labels_trajectory():
    a = _stats([5, 9, 11], [2, 1, 4], seed=1)
    b = _stats([1, 7], [3, 2], seed=2)
    c = TrainingStats.concat([a, b])
    assert list(c["label"]) == [1, 5, 7, 9, 11]
    for st in (a, b):
        for i, lab in enumerate(st["label"]):
            j = int(np.flatnonzero(c["label"] == lab)[0])
            for f in ITER_FIELDS:
                assert np.array_equal(c.trajectory(j, f), st.trajectory(i, f))
    t = c.take([4, 0, 2])
    assert list(t["label"]) == [11, 1, 7]
    assert np.array_equal(t.trajectory(0, "objective"), c.trajectory(4, "objective"))
    assert len(c.take([])) == 0


def test_a_consuming_concat_is_the_same_table_and_empties_its_list(monkeypatch):
    """concat(parts, consume=True) drops each part once copied (the peak: the result and
    one part, not the result and all of them) and hands memory back as it goes: the same
    table as the plain concat, None parts and parts without trajectories included, and
    the caller's list emptied."""
    from headstart.training import stats as stats_module

    parts = [_stats([9, 10, 11], [2, 0, 4], seed=1), None, _stats([1, 2], [3, 2], seed=2),
             _stats([5], [1], seed=3).without_trajectories(), _stats([20, 21], [1, 1], seed=4)]
    plain = TrainingStats.concat(list(parts))
    trims = []
    monkeypatch.setattr(stats_module, "_TRIM_LABELS", 2)
    monkeypatch.setattr(stats_module, "release_free_memory", lambda: trims.append(1))
    given = list(parts)
    got = TrainingStats.concat(given, consume=True)
    assert given == [] and trims
    assert list(got["label"]) == [1, 2, 5, 9, 10, 11, 20, 21]
    assert got.columns.keys() == plain.columns.keys()
    for k in plain.columns:
        assert np.array_equal(got[k], plain[k]) and got[k].dtype == plain[k].dtype, k
    assert np.array_equal(got.iter_offsets, plain.iter_offsets)
    for f in ITER_FIELDS:
        assert np.array_equal(got.iterations[f], plain.iterations[f]), f
    assert len(TrainingStats.concat([None], consume=True)) == 0


def test_training_records_every_iteration_and_threads_agree():
    rng = np.random.default_rng(3)
    X = sp.random(400, 60, density=0.2, format="csr", dtype=np.float32, random_state=3)
    Y = sp.csr_matrix((rng.random((400, 70)) < 0.2).astype(np.float32))
    one = headstart.OvAClassifier(threads=1, init="zero").fit(X, Y)
    two = headstart.OvAClassifier(threads=2, init="zero").fit(X, Y)
    assert _same(one.coef_, two.coef_)
    s = one.stats_
    assert np.array_equal(np.diff(s.iter_offsets), s["iterations"] + 1)
    for f in ITER_FIELDS:
        if f != "seconds":
            assert np.array_equal(s.iterations[f], two.stats_.iterations[f])


#: what the peak-RSS scripts below share: the repository first on the path (argv[1]), and
#: status(field), a line of /proc/self/status in bytes (VmRSS now, VmHWM the peak)
_PEAK_SCRIPT_HEAD = r"""
import sys, tempfile, os
import numpy as np, scipy.sparse as sp
sys.path.insert(0, sys.argv[1])

def status(field):
    for line in open('/proc/self/status'):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

def settle():
    # the warm-up's freed heap handed back before the base is read: where the warm-up
    # compiled the kernels (a cold cache, as in CI) the run reused LLVM's freed memory and
    # its peak rose ~20 MB less than with a warm cache (stop 85's CI: 74.6 MB, 94.7 here)
    from headstart.training.pages import release_free_memory
    release_free_memory()
"""

#: data(n, d, L, used, seed): n x d sparse X, 3 labels per row drawn from ``used`` of L
_MANY_LABELS_DATA = r"""
def data(n, d, L, used, seed):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=20 / d, format="csr", dtype=np.float32, random_state=seed)
    pool = rng.choice(L, size=used, replace=False)
    rows = np.repeat(np.arange(n), 3)
    Y = sp.csr_matrix((np.ones(rows.size, np.float32), (rows, rng.choice(pool, rows.size))), shape=(n, L))
    Y.sum_duplicates()
    Y.data[:] = 1
    return X, Y
"""

_ESTIMATE_CHECK = _PEAK_SCRIPT_HEAD + r"""
from benchmarks import synth
from headstart import resources
from headstart.params import TrainParams
from headstart.training.trainer import train_labels

p = TrainParams(threads=2)
rng = np.random.default_rng(0)
# load the compiled kernels and start the thread pool's machinery on a tiny problem first:
# the estimate is of training's own buffers, not of the interpreter and its code
Xs = sp.random(50, 30, density=0.2, format="csr", dtype=np.float32, random_state=0)
Ys = sp.csr_matrix((rng.random((50, 4)) < 0.3).astype(np.float32))
train_labels(Xs, Ys, p, np.arange(4))
if p.regularizer == "l2":
    # and the team's kernels: threads share 16 lanes on X larger than the cache (8.4M
    # nonzeros here, budget.share_lanes), a specialisation of its own
    train_labels(Xs, Ys, p, np.arange(4), shared=True)
settle()
base = status("VmRSS")
S = synth.generate("amazoncat-13k", scale=0.1, seed=0)
X, Y = S.X_train.copy(), S.Y_train.copy()
del S
labels = np.arange(200)
est = resources.training_memory_for(X, Y, p, num_labels=labels.size)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                    # reset the peak (VmHWM) to the current RSS
train_labels(X, Y, p, labels)
print(status("VmHWM") - base, est.total)
"""


def _peak_and_estimate(script: str, *argv: str, may_skip: bool = False) -> tuple[int, int]:
    """(measured peak growth, estimate) in bytes, as the peak-RSS ``script`` prints them, run
    in a fresh interpreter; ``may_skip``: skipped where the peak cannot be reset."""
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", script, str(repo), *argv], capture_output=True, text=True,
                       cwd=repo, timeout=600)
    if may_skip and r.returncode != 0 and "clear_refs" in r.stderr:
        pytest.skip("cannot reset the peak RSS here")
    assert r.returncode == 0, r.stderr[-2000:]
    measured, estimate = map(int, r.stdout.split()[-2:])
    return measured, estimate


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_exact_l1_memory_estimate_matches_the_measured_peak():
    """The same check for exact L1 with CDN (no lanes: X by columns, one Work per thread,
    X's values times y): within 20% (measured 262 against 268 MB at scale 0.1 and 4 labels
    when written; the Newton-lane estimate it replaced said 214)."""
    script = (_ESTIMATE_CHECK
              .replace("p = TrainParams(threads=2)",
                       "p = TrainParams(threads=2, regularizer='l1-exact', l1_solver='cdn', init='zero')")
              .replace('scale=0.1', 'scale=0.05').replace("labels = np.arange(200)", "labels = np.arange(2)"))
    assert "l1_solver='cdn'" in script and "scale=0.05" in script and "arange(2)" in script
    measured, estimate = _peak_and_estimate(script)
    assert abs(estimate - measured) <= 0.2 * measured, (measured, estimate)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_training_memory_estimate_matches_the_measured_peak():
    """The estimate headstart prints and checks before training (resources) against the
    peak RSS of a mid-size run (an AmazonCat-13K-shaped set at scale 0.1: 119K x 20K,
    8.4M nonzeros, 200 labels, 2 threads): within 20%, measured over a baseline of the
    interpreter with the kernels loaded."""
    measured, estimate = _peak_and_estimate(_ESTIMATE_CHECK)
    assert abs(estimate - measured) <= 0.2 * measured, (measured, estimate)


_HUGE_LABELS_CHECK = _PEAK_SCRIPT_HEAD + _MANY_LABELS_DATA + r"""
from headstart import resources
from headstart.estimator import fit_to_directory
from headstart.params import TrainParams

p = TrainParams(threads=2)
out = tempfile.mkdtemp()
# the kernels loaded (or compiled) on a small problem of the same kind first
X, Y = data(200, 300, 5000, 50, 1)
fit_to_directory(X, Y, p, os.path.join(out, "warm"), own_data=True, trajectories=False)
X, Y = data(2000, 2000, 1_000_000, 200, 0)
# as headstart train estimates it (cli/train.py _check_memory): beyond the data read
est = resources.training_memory_for(X, Y, p, Y.shape[1], collect=False, own_data=True, trajectories=False)
settle()
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                    # reset the peak (VmHWM) to the current RSS
fit_to_directory(X, Y, p, os.path.join(out, "model"), own_data=True, trajectories=False)
print(status("VmHWM") - base, est.without("data"))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_training_memory_estimate_matches_the_measured_peak_at_a_million_labels():
    """At a huge label space (1M labels of which 200 used, 2,000 x 2,000, as headstart
    train runs it: weights spooled, no trajectories) the per-label arrays are the peak --
    the chunks' statistics and their concatenation, the label ids, the spool's rows --
    and the estimate counts them (stop 79: 14 of a label's 17 statistics arrays were
    counted, and no label array; at 2M labels 481 MiB estimated, 673 MiB measured;
    after: 626 against 628).  Never more than 5% below the measured peak (the check
    must not let a run through that does not fit) and at most 25% above it: the
    statistics' concatenation hands its parts back as it copies (stop 86), so how much
    of that memory the peak holds depends on the allocator's reuse -- 1.09-1.10x here
    (stop 86), 1.11x in one of stop 85's CI runs (217 MiB measured, 241 estimated)."""
    measured, estimate = _peak_and_estimate(_HUGE_LABELS_CHECK, may_skip=True)
    assert 0.95 * measured <= estimate <= 1.25 * measured, (measured, estimate)


_SETTLED_CHECK = _PEAK_SCRIPT_HEAD + _MANY_LABELS_DATA + r"""
mode = sys.argv[2]
import headstart
from headstart import resources
from headstart.distributed import train_model_dir
from headstart.estimator import fit_to_directory
from headstart.params import TrainParams

p = TrainParams(threads=2)
out = tempfile.mkdtemp()
# the kernels loaded (or compiled) on a small problem of the same kind first
X, Y = data(200, 300, 5000, 50, 1)
if mode == "sharded":
    train_model_dir(X, Y, p, os.path.join(out, "warm"), shard_size=1000, own_data=True)
    X, Y = data(2000, 2000, 300_000, 3000, 0)
    # as headstart train --shard-size estimates it (cli/train.py _check_memory)
    est = resources.training_memory_for(X, Y, p, Y.shape[1], collect=False, chunk_size=50_000, own_data=True,
                                        trajectories=True)
elif mode == "stats":
    fit_to_directory(X, Y, p, os.path.join(out, "warm"), own_data=True, trajectories=True)
    X, Y = data(2000, 2000, 200_000, 200, 0)
    # as headstart train --stats x.json estimates it
    est = resources.training_memory_for(X, Y, p, Y.shape[1], collect=False, own_data=True, trajectories=True)
else:
    headstart.OvAClassifier(threads=2).fit(X, Y)
    X, Y = data(2000, 2000, 300_000, 2000, 0)
    est = resources.training_memory_for(X, Y, p)
settle()
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                    # reset the peak (VmHWM) to the current RSS
if mode == "sharded":
    train_model_dir(X, Y, p, os.path.join(out, "model"), shard_size=50_000, own_data=True)
elif mode == "stats":
    st, _ = fit_to_directory(X, Y, p, os.path.join(out, "model"), own_data=True, trajectories=True)
    st.write(os.path.join(out, "stats.json"))
else:
    headstart.OvAClassifier(threads=2).fit(X, Y)
print(status("VmHWM") - base, est.without("data"))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("mode", ["sharded", "stats", "api"])
def test_training_memory_estimate_of_mostly_unused_labels_matches_the_measured_peak(mode):
    """Labels without a positive end at their start under the defaults (aop's bias-only
    start is the squared hinge's optimum): no weights, one trajectory record, one of them
    per chunk through the kernel (resources.settled_labels).  The estimate counted 20
    iterations, 5% weights and record rows for each, and the chunk's full width per
    thread: 6.8x the peak of --shard-size at 2M labels, 7.7x the API's fit at 500K
    (stop 79).  --stats x.json: the statistics file is written block by block (its whole
    text was built in memory first: 2.0 GiB beyond the statistics at 2M labels, 1.9x
    what was estimated after all).  Now within [-5%, +40%] of the measured peak, for
    --shard-size (300K labels, 3,000 used, shards of 50K), --stats x.json (200K labels,
    200 used) and the API's fit, weights collected (300K labels, 2,000 used).  The upper
    side is loose because the statistics' concatenation hands its parts back as it
    copies, so the peak depends on the allocator's reuse: --shard-size measured 92-93 MB
    here against 99 estimated (stop 86), 74.6-76.3 MB in stop 85's CI runs."""
    measured, estimate = _peak_and_estimate(_SETTLED_CHECK, mode, may_skip=True)
    assert 0.95 * measured <= estimate <= 1.4 * measured, (measured, estimate)
