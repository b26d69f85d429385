"""training/sharing.py on its own: which labels of a chunk pose the same problem, and how
a kernel's results over the others are spread back (a stand-in kernel whose rows name
the label they were computed for)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from headstart.training.kernel import LANES, STAT_FIELDS
from headstart.training.sharing import SameProblems, solve_chunk

SECONDS = STAT_FIELDS.index("seconds")


def _same(counts, n, cost_pos=np.zeros(0), cost_neg=np.zeros(0)):
    return SameProblems(np.concatenate([[0], np.cumsum(counts)]), n, cost_pos, cost_neg)


def test_labels_without_positives_or_negatives_of_equal_costs_copy_the_first():
    # 10 instances; labels 0..7 with these positive counts
    same = _same([3, 0, 10, 0, 5, 10, 0, 0], 10)
    chunk = np.arange(8)
    np.testing.assert_array_equal(same.copies(chunk), [-1, -1, -1, 1, -1, 2, 1, 1])
    # positions, not label ids: a chunk of labels 3, 6, 5, 2
    np.testing.assert_array_equal(same.copies(np.array([3, 6, 5, 2])), [-1, 0, -1, 2])
    assert same.copies(np.array([0, 1, 2, 4])) is None        # no two of a kind
    # different costs: different problems
    weighted = _same([0, 0, 0], 10, cost_pos=np.array([1.0, 2.0, 1.0]), cost_neg=np.ones(3))
    np.testing.assert_array_equal(weighted.copies(np.arange(3)), [-1, -1, 0])
    # no instance at all: every label is both kinds, one problem
    np.testing.assert_array_equal(_same([0, 0], 0).copies(np.arange(2)), [-1, 0])


def _reference_copies(counts, n, cost_pos, cost_neg, chunk):
    """copies() as np.unique over the rows (kind, C+, C-) of the labels without positives
    or negatives, first occurrence kept (the code before the hash table)."""
    npos = np.asarray(counts)[chunk]
    u = np.flatnonzero((npos == 0) | (npos == n))
    if u.size < 2:
        return None, 0
    rows = np.column_stack([(npos[u] != 0).astype(float), cost_pos[chunk[u]], cost_neg[chunk[u]]])
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    src = u[first[inverse.reshape(-1)]]
    if np.array_equal(src, u):
        return None, first.size
    copy_of = np.full(chunk.size, -1, dtype=np.int64)
    copy_of[u] = np.where(src == u, -1, src)
    return copy_of, first.size


def test_problems_are_grouped_as_the_rows_of_kind_and_costs_are():
    """The hash table that replaced np.unique(rows, axis=0) (1.4 s for a 2M-label space
    with per-label costs, training/sharing.py) groups the labels as it did: the same
    copies, the same count of problems against ``most``, chunks in any order."""
    rng = np.random.default_rng(5)
    for t in range(200):
        L, n = int(rng.integers(1, 80)), int(rng.integers(0, 4))
        counts = rng.integers(0, n + 1, L) * (rng.random(L) < 0.6)
        cost_pos = rng.choice([1.0, 2.0, 0.0, 3.5, 1.0 + 2**-52], L)
        cost_neg = rng.choice([1.0, 0.5], L) if t % 2 else np.ones(L)
        same = _same(counts, n, cost_pos, cost_neg)
        for _ in range(4):
            chunk = rng.permutation(L)[:rng.integers(1, L + 1)]
            want, problems = _reference_copies(counts, n, cost_pos, cost_neg, chunk)
            got = same.copies(chunk)
            assert (got is None and want is None) or np.array_equal(got, want), (t, got, want)
            for most in (0, 1, 2, 5):
                mask = same.shareable(chunk, most)
                shareable = problems <= most and np.count_nonzero(
                    (counts[chunk] == 0) | (counts[chunk] == n)) >= 2
                assert (mask is not None) == shareable, (t, most)
    # a large label space with a few costs: linear, not a sort of the rows as bytes
    L = 2_000_000
    cost_pos = np.ones(L)
    cost_pos[::100_000] = 3.0
    same = _same(np.zeros(L, dtype=np.int64), 4, cost_pos, np.ones(L))
    assert same.shareable(np.arange(L), 1) is None and same.shareable(np.arange(L), 2).all()
    copy_of = same.copies(np.arange(300_000))
    assert copy_of[0] == copy_of[1] == -1 and np.all(copy_of[100_000::100_000] == 0)
    assert np.all(copy_of[2:100_000] == 1) and np.count_nonzero(copy_of < 0) == 2


def _kernel(seen, stop_after=None):
    """A kernel that trains label j into row [j, j+1, ..., j+j%3] (values j), intercept
    -j, a statistics row of j's, records j at iterations 0..1; it starts only the first
    ``stop_after`` labels (a deadline)."""
    def kernel(chunk, state, rec, abort_flag):
        seen.append(chunk.copy())
        started = chunk.size if stop_after is None else min(stop_after, chunk.size)
        rows = [np.arange(j, j + j % 3 + 1) for j in chunk[:started]]
        indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int64)
        indices = np.concatenate(rows + [np.zeros(0, int)]).astype(np.int32)
        data = indices.astype(np.float32)
        table = np.repeat(chunk[:started, None].astype(float), len(STAT_FIELDS), axis=1)
        table[:, STAT_FIELDS.index("iterations")] = 1
        for a in rec:
            a[:started, :2] = chunk[:started, None]
        return indptr, indices, data, -chunk[:started].astype(np.float32), table, started
    return kernel


def _records(rows, cap):
    return tuple(np.zeros((rows, cap)) for _ in range(5))


def test_results_are_spread_back_in_chunk_order():
    """Weights and intercepts are spread by solve_chunk; statistics and trajectories by
    TrainingStats.spread, from record arrays with rows for the solved labels only (3
    here, for a chunk of 6: label_chunks does not count the copies)."""
    from headstart.training.chunks import chunk_stats

    chunk = np.array([4, 7, 9, 11, 12, 20])
    copy_of = np.array([-1, -1, 0, 1, -1, 0])
    seen = []
    rec = _records(3, 3)
    indptr, indices, data, intercept, table, started, spread = solve_chunk(_kernel(seen), chunk, copy_of, None, rec,
                                                                           None)
    np.testing.assert_array_equal(seen[0], [4, 7, 12])               # the copies are not trained
    assert started == 6 and table.shape[0] == 3
    rows, own = spread
    np.testing.assert_array_equal(rows, [0, 1, 0, 1, 2, 0])
    np.testing.assert_array_equal(own, [True, True, False, False, True, False])
    src = np.array([4, 7, 4, 7, 12, 4])
    W = sp.csr_matrix((data, indices, indptr), shape=(6, 30)).toarray()
    stats = chunk_stats(chunk[own], table, rec, 3).spread(rows, chunk, own)
    np.testing.assert_array_equal(stats["label"], chunk)
    for k, j in enumerate(src):
        np.testing.assert_array_equal(np.flatnonzero(W[k]), np.arange(j, j + j % 3 + 1))
        assert intercept[k] == -j and stats["n_pos"][k] == j
        np.testing.assert_array_equal(stats.trajectory(k, "objective"), [j, j])
        np.testing.assert_array_equal(stats.trajectory(k, "seconds"), [j, j] if own[k] else [0, 0])
    np.testing.assert_array_equal(stats["seconds"], [4, 7, 0, 0, 12, 0])
    # which label's solve each copy took; the totals of work count each solve once
    np.testing.assert_array_equal(stats["shared_with"], [-1, -1, 4, 7, -1, 4])
    assert stats.summary()["newton_iterations"] == 3


def test_label_chunks_do_not_count_the_labels_that_take_a_result():
    """With a mask of shared labels, chunks hold chunk_size labels to solve plus any
    number of shared ones between them (at most SHARED_CHUNK_FACTOR * chunk_size labels);
    without one, as before."""
    from headstart.training.chunks import SHARED_CHUNK_FACTOR, label_chunks, shared_label_chunks

    labels = np.arange(100_000)
    free = np.ones(labels.size, dtype=bool)
    free[[5, 6, 7, 50_000, 99_999]] = False
    chunks = label_chunks(labels, 2, 1, free=free)
    np.testing.assert_array_equal(np.concatenate(chunks), labels)
    assert all(np.count_nonzero(~free[c]) <= 2 for c in chunks)
    assert max(c.size for c in chunks) <= 2 * SHARED_CHUNK_FACTOR
    # threads: guided sizes counted in labels to solve
    free2 = np.arange(10_000) % 10 != 0            # 1000 to solve
    chunks = label_chunks(np.arange(10_000), 256, 2, free=free2)
    work = [int(np.count_nonzero(~free2[c])) for c in chunks]
    assert sum(work) == 1000 and max(work) <= 256 and len(chunks) < 10_000 / 256
    np.testing.assert_array_equal(np.concatenate(chunks), np.arange(10_000))
    # from the problems: 2M ids, 4 used (and every label of 4 instances unused)
    counts = np.zeros(2_000_000, dtype=np.int64)
    counts[[3, 17, 1_999_999]] = 2
    counts[8] = 4                                  # no negative
    same = _same(counts, 4)
    chunks = shared_label_chunks(np.arange(counts.size), 256, 2, same)
    assert len(chunks) <= -(-counts.size // ((256 - LANES) * SHARED_CHUNK_FACTOR)) + 2
    # a few such labels: chunks as before (every label counted)
    few = np.ones(5000, dtype=np.int64)
    few[::10] = 0
    assert [c.size for c in shared_label_chunks(np.arange(5000), 256, 2, _same(few, 4))] == \
        [c.size for c in label_chunks(np.arange(5000), 256, 2)]
    # per-label costs that differ: not shareable beyond a chunk, chunks as before
    costly = _same(counts[:5000], 4, cost_pos=np.arange(5000.0), cost_neg=np.ones(5000))
    assert [c.size for c in shared_label_chunks(np.arange(5000), 256, 1, costly)] == [256] * 19 + [136]


def test_a_deadline_keeps_the_copies_of_labels_started():
    chunk = np.array([4, 7, 9, 11, 12, 20])
    copy_of = np.array([-1, -1, 0, 1, -1, 0])
    # the kernel starts 4 and 7 only: kept are positions 0-3 (12 was not started)
    out = solve_chunk(_kernel([], stop_after=2), chunk, copy_of, None, _records(8, 3), None)
    indptr, _, _, intercept, table, started, (rows, own) = out
    assert started == 4 and indptr.size == 5 and table.shape[0] == 2
    np.testing.assert_array_equal(intercept, [-4, -7, -4, -7])
    np.testing.assert_array_equal(rows, [0, 1, 0, 1])
    # nothing started (an abort): nothing kept
    assert solve_chunk(_kernel([], stop_after=0), chunk, copy_of, None, _records(8, 3), None)[5] == 0


def test_without_copies_the_kernel_sees_the_chunk_unchanged():
    seen = []
    chunk = np.array([1, 2, 3])
    out = solve_chunk(_kernel(seen), chunk, None, None, _records(4, 3), None)
    np.testing.assert_array_equal(seen[0], chunk)
    assert out[5] == 3


def test_the_trainer_takes_a_workers_label_columns_as_they_are_and_never_sorts_the_callers():
    """A Dask task called the trainer on the worker's Y, which converted, checked and
    copied all of Y every call: O(label space) per task (helper-67: 2M labels, 1,954 tasks,
    ~40% of the workers' CPU).  The worker's copy is made int64 and sorted once when it
    arrives, and the trainer uses its arrays as they are; a caller's unsorted CSC Y was
    sorted in place, and is now left alone.  The weights are the same, bit for bit."""
    import pickle

    from headstart.distributed.dask_backend import TrainingArrays, train_range_task
    from headstart.params import TrainParams
    from headstart.training.chunks import label_columns
    from headstart.training.trainer import train_labels

    rng = np.random.default_rng(3)
    n, d, L = 60, 30, 5000
    X = sp.random(n, d, density=0.2, format="csr", dtype=np.float32, random_state=1)
    Yd = (rng.random((n, L)) < 0.002).astype(np.float32)
    Yd[:, 7] = 1.0                          # one label without negatives
    Y = sp.csr_matrix(Yd)
    params = TrainParams(threads=1)
    ref_w, ref_b, _ = train_labels(X, Y, params, np.arange(L))

    arrays = pickle.loads(pickle.dumps(TrainingArrays(X.copy(), sp.csc_matrix(Y))))
    Yc, indptr, indices = label_columns(arrays.Y)
    assert Yc is arrays.Y and indptr is arrays.Y.indptr and indices is arrays.Y.indices
    assert indptr.dtype == np.int64 and indices.dtype == np.int64
    parts = [train_range_task(arrays, params, a, min(a + 1024, L), 1) for a in range(0, L, 1024)]
    w = sp.vstack([p[1] for p in parts], format="csr")
    b = np.concatenate([p[2] for p in parts])
    assert (w != ref_w).nnz == 0 and w.nnz == ref_w.nnz and np.array_equal(b, ref_b)

    # a CSC Y with unsorted rows: trained as the sorted one, and left as it was given
    Yu = sp.csc_matrix(Y)
    for j in range(L):
        a, e = Yu.indptr[j], Yu.indptr[j + 1]
        Yu.indices[a:e] = Yu.indices[a:e][::-1].copy()
    Yu.has_sorted_indices = False
    given = Yu.indices.copy()
    w2, b2, _ = train_labels(X, Yu, params, np.arange(L))
    assert np.array_equal(Yu.indices, given)
    assert (w2 != ref_w).nnz == 0 and np.array_equal(b2, ref_b)


def test_weights_a_sink_receives_equal_the_collected_ones_bit_for_bit(bibtex_dir):
    """A chunk that only goes to a sink is renumbered in place (chunks.chunk_weights), the
    rows of labels sharing a solve are gathered by a kernel (gather_rows): the same
    weights as a collected run, in canonical rows, with labels without positives."""
    from headstart.io import read_xmc
    from headstart.params import TrainParams
    from headstart.training.trainer import train_labels

    X, Y = read_xmc(bibtex_dir / "train.txt.gz")[:2]
    X, Y = X[:1200], Y[:1200, :60]
    Y = sp.hstack([Y[:, :20], sp.csr_matrix((Y.shape[0], 3), dtype=Y.dtype), Y[:, 20:]], format="csr")
    assert np.count_nonzero(np.diff(Y.tocsc().indptr) == 0) >= 3     # labels that share a solve
    labels = np.arange(Y.shape[1])
    params = TrainParams(threads=2)
    W, b, stats = train_labels(X.copy(), Y, params, labels, chunk_size=16)
    got = []
    none, _, sunk = train_labels(X.copy(), Y, params, labels, chunk_size=16, sink=got.append, collect=False)
    assert none is None and sunk.meta["shared_solves"] == stats.meta["shared_solves"] > 0
    got.sort(key=lambda r: int(r.labels[0]))
    assert all(r.weights.has_sorted_indices for r in got)
    V = sp.vstack([r.weights for r in got]).tocsr()
    assert np.array_equal(V.indptr, W.indptr) and np.array_equal(V.indices, W.indices)
    assert np.array_equal(V.data, W.data)
    assert np.array_equal(np.concatenate([r.intercept for r in got]), b)
