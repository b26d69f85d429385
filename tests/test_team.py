"""Lanes shared by a team of threads (headstart/training/team.py): the same weights bit
for bit as threads that each run their own lanes, on real data and on every path
(aop, zero with the logistic loss, uneven lanes per thread, labels without positives);
the layout of lanes and rows; the atomics and barrier the team synchronises with; the
trainer choosing a team where 16 lanes per thread exceed the budget; and the buffers per
thread no longer growing with the lanes (one lane's worth from 16 threads on)."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest
import scipy.sparse as sp

from headstart import TrainParams
from headstart.training import budget as budget_module
from headstart.training import trainer
from headstart.training.kernel import LANES
from headstart.training.team import team_blocks, team_rows
from headstart.validation import check_features, check_labels

import _reference as ref


def bibtex(columns=None):
    d = ref.load_dataset("bibtex", "train")
    if d is None:
        pytest.skip("bibtex not found")
    X, Y = d
    Y = sp.csr_matrix(Y)
    if columns is not None:
        Y = sp.csr_matrix(Y[:, columns])
    return check_features(X), check_labels(Y, X.shape[0])


def same(a, b):
    (W0, b0, s0), (W1, b1, s1) = a, b
    assert W0.shape == W1.shape and (W0 != W1).nnz == 0 and np.array_equal(b0, b1)
    for field in ("label", "iterations", "cg_steps", "f_final", "n_pos", "status"):
        assert np.array_equal(s0.columns[field], s1.columns[field]), field
    # the per-iteration records (the helpers' copied into the chunk's), timings apart
    assert np.array_equal(s0.iter_offsets, s1.iter_offsets)
    for key, v in s0.iterations.items():
        if "time" not in key and "second" not in key:
            assert np.array_equal(v, s1.iterations[key]), key


@pytest.mark.parametrize("threads,init,loss", [(2, "aop", "squared-hinge"), (3, "zero", "logistic"),
                                               (4, "aop", "squared-hinge"), (2, "zero", "squared-hinge")])
def test_a_team_trains_the_same_weights_bit_for_bit(threads, init, loss):
    """2, 3 and 4 threads share 16 lanes: labels go to whichever lane is free, a lane's
    work in each pass to whichever thread takes it, yet every label's solve is its lone
    thread's, to the bit -- also from zero, where each thread forms direction groups of
    the lanes it takes (lanes waiting for their gradients and lanes with a new label's
    in one group, labels the groups finish refilled in the same pass)."""
    X, Y = bibtex()
    labels = np.arange(0, 159, 2)
    p = TrainParams(threads=threads, init=init, loss=loss)
    lone = trainer.train_labels(X, Y, p, labels, shared=False)
    team = trainer.train_labels(X, Y, p, labels, shared=True, chunk_size=40)
    assert team[2].meta["shared_lanes"] and not lone[2].meta["shared_lanes"]
    assert team[2].meta["threads"] == threads
    assert team[2].meta["groups"] == lone[2].meta["groups"] == (init == "zero")
    same(lone, team)


@pytest.mark.parametrize("threads,shared,sizes,init", [(6, True, [3, 3], "aop"), (5, True, [3, 2], "zero"),
                                                     (4, 2, [2, 2], "aop"), (9, True, [3, 3, 3], "zero")])
def test_several_teams_train_the_same_weights_bit_for_bit(threads, shared, sizes, init):
    """More threads than a team takes (TEAM_THREADS, or the size asked) form several
    teams of near-equal sizes, each taking chunks as a lone thread would, each with its
    own lanes and barriers: every label's solve is still its lone thread's, to the bit."""
    from headstart.training.team import team_sizes

    X, Y = bibtex()
    labels = np.arange(0, 159, 2)
    p = TrainParams(threads=threads, init=init)
    lone = trainer.train_labels(X, Y, p, labels, shared=False, chunk_size=16)
    teams = trainer.train_labels(X, Y, p, labels, shared=shared, chunk_size=16)
    assert teams[2].meta["shared_lanes"] and teams[2].meta["threads"] == threads
    assert teams[2].meta["teams"] == len(sizes) and team_sizes(threads, 5, 4 if shared is True else shared) == sizes
    same(lone, teams)
    # fewer chunks than teams: fewer, bigger teams (every thread still works)
    assert team_sizes(9, 2) == [5, 4] and team_sizes(64, 1) == [64] and team_sizes(3) == [3]
    one = trainer.train_labels(X, Y, p, labels[:16], shared=shared, chunk_size=16)
    assert one[2].meta["teams"] == 1 and one[2].meta["threads"] == min(threads, 16)
    same(trainer.train_labels(X, Y, p, labels[:16], shared=False), one)


def test_a_team_with_labels_without_positives_and_copies():
    """Empty labels (one solve shared by the chunk's copies, training/sharing.py) and a
    full one go through the team as through lone threads."""
    X, Y = bibtex([0, 1, 2, 3])
    n = X.shape[0]
    Y = check_labels(sp.hstack([Y, sp.csr_matrix((n, 3)), sp.csr_matrix(np.ones((n, 1)))], format="csr"), n)
    labels = np.arange(Y.shape[1])
    p = TrainParams(threads=2)
    same(trainer.train_labels(X, Y, p, labels, shared=False), trainer.train_labels(X, Y, p, labels, shared=True))


def test_the_rows_are_split_by_nonzeros():
    indptr = np.concatenate([[0], np.cumsum(np.r_[np.full(50, 100), np.full(950, 1)])]).astype(np.int64)
    for threads in (1, 2, 3, 5, 16, 17, 64):
        rows = team_rows(threads, indptr)
        assert team_blocks(threads) == -(-threads // LANES) and len(rows) == threads
        assert rows[0][0] == 0 and rows[-1][1] == 1000 and all(a[1] == b[0] for a, b in zip(rows, rows[1:]))
    # two threads, 5950 nonzeros, the first 50 rows hold 5000
    assert team_rows(2, indptr) == [(0, 30), (30, 1000)]


def test_atomics_and_barrier_between_more_threads_than_cores():
    """Four threads (on a two-core machine), 2000 barriers each: every label counter
    increment is seen once, and no thread passes a barrier before all arrived."""
    from headstart import _atomic
    from headstart._compile import njit

    @njit(nogil=True)
    def work(sync, counter, seen, threads, rounds, abort):
        for r in range(rounds):
            k = _atomic.fetch_add(counter, 0, 1)
            seen[k] += 1
            _atomic.fetch_add(counter, 1 + (r & 1), 1)
            if not _atomic.barrier(sync, threads, abort):
                return False
            if _atomic.load(counter, 1 + (r & 1)) != threads * (r // 2 + 1):
                return False
            if not _atomic.barrier(sync, threads, abort):
                return False
        return True

    T, R = 4, 2000
    sync = np.zeros(2, np.int64)
    counter = np.zeros(3, np.int64)
    seen = np.zeros(T * R, np.int64)
    abort = np.zeros(1, np.uint8)
    assert work(np.zeros(2, np.int64), np.zeros(3, np.int64), np.zeros(1, np.int64), 1, 1, abort)
    out = [None] * T

    def run(t):
        out[t] = work(sync, counter, seen, T, R, abort)

    ts = [threading.Thread(target=run, args=(t,)) for t in range(T)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out == [True] * T and counter[0] == T * R and np.all(seen == 1)
    # an abort frees a thread waiting for others that never come
    abort[0] = 1
    assert not work(np.zeros(2, np.int64), np.zeros(3, np.int64), np.zeros(T * R, np.int64), 2, 1, abort)


def test_the_trainer_shares_lanes_where_8_per_thread_do_not_fit(monkeypatch, caplog):
    """A budget below 8 lanes per thread (of 3 threads) but above the team's buffers:
    the trainer takes the team (said at INFO) instead of one lane per thread, the same
    weights; forced lane counts stay lone."""
    rng = np.random.default_rng(5)
    X = check_features(sp.random(400, 80, density=0.1, format="csr", random_state=5, dtype=np.float32))
    Y = check_labels(sp.csr_matrix((rng.random((400, 40)) < 0.1).astype(np.float32)), 400)
    n, d = X.shape
    p = TrainParams(threads=3)
    labels = np.arange(40)
    ref16 = trainer.train_labels(X, Y, p, labels, chunk_size=10)
    assert not ref16[2].meta["shared_lanes"]
    limit = budget_module.team_workspace_bytes(n, d, 3)
    assert limit < 3 * budget_module.thread_workspace_bytes(n, d, 8)
    monkeypatch.setattr(budget_module, "lane_budget", lambda memory=None: limit)
    monkeypatch.setattr(budget_module, "MIN_LANE_BUDGET", 0)
    with caplog.at_level(logging.INFO, logger="headstart.training.trainer"):
        team = trainer.train_labels(X, Y, p, labels, chunk_size=10)
    assert team[2].meta["shared_lanes"] and team[2].meta["threads"] == 3
    assert any("shared by the 3 threads" in r.getMessage() for r in caplog.records)
    same(ref16, team)
    forced = trainer.train_labels(X, Y, p, labels, chunk_size=10, lanes=8)
    assert not forced[2].meta["shared_lanes"] and forced[2].meta["lanes"] == 8
    same(ref16, forced)


def test_from_zero_a_team_with_direction_groups_where_16_lanes_per_thread_do_not_fit(monkeypatch):
    """From zero (direction groups) with X larger than the cache and a budget below 16
    lanes per thread but above the team's buffers with its threads' groups: the trainer
    takes the team, whose threads group the lanes they take, rather than 8 lanes per
    thread (which form no groups: 1.15x against 1.02x on the Amazon-670K shape); the
    same weights; the estimate follows."""
    from headstart import resources

    rng = np.random.default_rng(7)
    X = check_features(sp.random(400, 80, density=0.1, format="csr", random_state=7, dtype=np.float32))
    Y = check_labels(sp.csr_matrix((rng.random((400, 40)) < 0.1).astype(np.float32)), 400)
    n, d = X.shape
    p = TrainParams(threads=2, init="zero")
    labels = np.arange(40)
    ref16 = trainer.train_labels(X, Y, p, labels, chunk_size=10)
    assert not ref16[2].meta["shared_lanes"] and ref16[2].meta["groups"]
    limit = budget_module.team_workspace_bytes(n, d, 2, True)
    assert limit < 2 * budget_module.thread_workspace_bytes(n, d, LANES)
    monkeypatch.setattr(budget_module, "lane_budget", lambda memory=None: limit)
    monkeypatch.setattr(budget_module, "MIN_LANE_BUDGET", 0)
    monkeypatch.setattr(budget_module, "SWEEP_PREFETCH_NNZ", 0)     # X "larger than the cache"
    monkeypatch.setattr(budget_module, "usable_cores", lambda: 2)
    team = trainer.train_labels(X, Y, p, labels, chunk_size=10)
    assert team[2].meta["shared_lanes"] and team[2].meta["groups"] and team[2].meta["threads"] == 2
    same(ref16, team)
    e = resources.estimate_training_memory(n, d, X.nnz, 40, 2, init="zero", chunk_size=10)
    assert e.details["shared_lanes"] and e.parts["workspaces"] == limit
    # a budget the team's groups do not fit: 8 lanes per thread (no team without groups)
    monkeypatch.setattr(budget_module, "lane_budget", lambda memory=None: limit - 1)
    eight = trainer.train_labels(X, Y, p, labels, chunk_size=10)
    assert not eight[2].meta["shared_lanes"] and eight[2].meta["lanes"] == 8
    same(ref16, eight)


def test_teams_grown_for_want_of_chunks_hold_no_more_lanes_than_the_budget_weighed():
    """Fewer chunks than teams: the trainer forms fewer, bigger teams (team_sizes), but
    their buffers must stay within what share_lanes weighed against the budget (the
    teams of ``size``).  Teams past 16 threads take a block of 16 lanes per 16 threads
    or part: 64 threads in teams of 16 with 3 chunks as 22 + 21 + 21 threads held 96
    lanes instead of 64 (15.5 GiB instead of 13.4 at WikiLSHTC-325K's shape)."""
    from headstart.training.team import team_sizes

    n, d = 1778351, 1617899
    for threads in range(2, 130):
        for size in sorted({2, 3, 4, 8, 16, threads}):
            weighed = team_sizes(threads, size=size)
            for chunks in range(1, len(weighed) + 1):
                got = team_sizes(threads, chunks, size)
                assert sum(got) == threads and len(got) == chunks and min(got) >= 1
                assert got == sorted(got, reverse=True)
                assert sum(map(team_blocks, got)) <= sum(map(team_blocks, weighed)), (threads, size, chunks, got)
                for groups in (False, True):
                    assert sum(budget_module.one_team_bytes(n, d, k, groups) for k in got) <= (
                        budget_module.team_workspace_bytes(n, d, threads, groups, size))
    assert team_sizes(64, 3, 16) == [32, 16, 16] and team_sizes(9, 2) == [5, 4] and team_sizes(64, 1) == [64]


def test_a_teams_buffers_per_thread_do_not_grow_with_the_lanes():
    """16 lanes per thread cost 16 x (n + d) per thread; in teams of four a thread's cost
    is four lanes' worth whatever the threads (WikiLSHTC-325K's shape), and one team of
    all the threads (what a budget too small for teams of four gets) one lane's worth
    from 16 threads on."""
    n, d = 1778351, 1617899
    one = budget_module.thread_workspace_bytes(n, d, 1)
    per = {t: budget_module.team_workspace_bytes(n, d, t) / t for t in (2, 4, 16, 64)}
    assert per[2] > per[4] == per[16] == per[64] <= 4 * one
    assert budget_module.team_workspace_bytes(n, d, 64) < 64 * budget_module.thread_workspace_bytes(n, d, LANES) / 3.9
    whole = {t: budget_module.team_workspace_bytes(n, d, t, size=t) / t for t in (16, 64)}
    assert whole[16] <= one * 1.01 and whole[64] <= one * 1.01


def test_a_team_out_of_time_keeps_whole_labels_only():
    """--timeout inside a team's chunk: no label starts after the deadline, every label
    it returns is whole (its lone thread's weights), none is returned twice."""
    X, Y = bibtex()
    labels = np.arange(159)
    lone = trainer.train_labels(X, Y, TrainParams(threads=2, init="zero"), labels, shared=False)
    for timeout in (1e-6, 0.4):
        W, b, st = trainer.train_labels(X, Y, TrainParams(threads=2, init="zero", timeout=timeout), labels,
                                        shared=True, chunk_size=159)
        got = st.columns["label"]
        assert np.array_equal(got, np.unique(got)) and (got.size == 0 if timeout < 1e-3 else True)
        if got.size:
            assert np.array_equal(got, np.arange(got.size))     # handed out in order
            assert (W[:got.size] != lone[0][got]).nnz == 0 and np.array_equal(b[:got.size], lone[1][got])


def test_the_team_estimate_is_what_the_team_allocates():
    """team_workspace_bytes = the team's buffers as make_team_state lays them out (the
    lanes' xs rows are the common XV) + the kernel's three float64 scratch vectors per
    thread; headstart.resources counts it where the trainer would share the lanes."""
    from headstart import resources
    from headstart.training.team import make_team_state

    n, d = 700, 90
    for threads, groups in ((2, False), (3, False), (17, False), (2, True), (5, True)):
        state = make_team_state(n, d, threads, np.arange(n + 1, dtype=np.int64), groups)
        # the threads' views share the lanes' rows: each array once
        arrays = {id(a): a for ws, os_ in state.members for a in (*ws, *os_._replace(xs=np.zeros(0)))}
        own = sum(a.nbytes for a in arrays.values())
        own += sum(a.nbytes for B in state.groups if B is not None for a in B)
        assert len({id(B) for B in state.groups}) == (threads if groups else 1)
        assert budget_module.one_team_bytes(n, d, threads, groups) == (
            state.V.nbytes + state.XV.nbytes + own + threads * 3 * (d + 1) * 8)
        assert budget_module.team_workspace_bytes(n, d, threads, groups, size=threads) == (
            budget_module.one_team_bytes(n, d, threads, groups))
    # WikiLSHTC-325K's shape, 64 threads: 8 lanes per thread fit none of 32, 48 and 64
    # GiB (half the memory is the lane budget); teams of four 64 GiB, of eight 48 GiB,
    # of sixteen (a lane per thread) 32 GiB
    n, d = 1778351, 1617899
    for memory, size in ((32, 16), (48, 8), (64, 4)):
        e = resources.estimate_training_memory(n, d, n * 42, 325056, 64, collect=False, locality=False,
                                               memory=memory * 2**30)
        assert e.details["shared_lanes"] and e.details["threads"] == 64 and e.details["team_threads"] == size
        assert e.parts["workspaces"] == budget_module.team_workspace_bytes(n, d, 64, size=size)
        assert budget_module.team_workspace_bytes(n, d, 64, size=size) <= memory * 2**30 / 2


def test_from_zero_the_team_size_follows_the_groups_not_only_the_memory():
    """share_lanes with direction groups: where 8 lanes per thread fit, teams only with
    their groups (the smallest size whose teams fit with them); where they do not, the
    smallest size that fits at all.  WikiLSHTC-325K's shape from zero, 64 threads: teams
    of four without groups on 64 and 80 GiB, of eight with groups on 90, of four with
    groups from 104 (budget.share_lanes' docstring)."""
    from headstart import resources

    n, d = 1778351, 1617899
    got = {}
    for memory in (64, 80, 90, 104):
        e = resources.estimate_training_memory(n, d, n * 42, 325056, 64, collect=False, locality=False,
                                               memory=memory * 2**30, init="zero")
        size = e.details["team_threads"]
        grouped = e.parts["workspaces"] == budget_module.team_workspace_bytes(n, d, 64, True, size)
        got[memory] = (size, grouped)
    assert got == {64: (4, False), 80: (4, False), 90: (8, True), 104: (4, True)}


def test_the_estimate_counts_the_teams_the_trainer_forms(monkeypatch):
    """The teams take chunks cut for ceil(threads / 4) workers (guided: no chunk above
    remaining / (2 x teams), none below 4 x LANES), then no more teams than chunks: 9
    threads, 159 labels in chunks of up to 100 are 64 + 64 + 31, three teams, each with
    its records and a chunk's weights in flight.  The estimate counted ceil(159 / 100) =
    2 teams (1,000 labels in chunks of 256 at 64 threads: 4 teams instead of 16, a
    quarter of the records)."""
    from headstart import resources

    X, Y = bibtex()
    n, d = X.shape
    p = TrainParams(threads=9)
    monkeypatch.setattr(budget_module, "share_lanes", lambda *a, **k: 4)     # the estimate's teams of four
    for labels, chunk_size in ((159, 100), (159, 40), (40, 16)):
        e = resources.estimate_training_memory(n, d, X.nnz, labels, 9, chunk_size=chunk_size, locality=False)
        got = trainer.train_labels(X, Y, p, np.arange(labels), shared=True, chunk_size=chunk_size)
        assert e.details["shared_lanes"] and e.details["teams"] == got[2].meta["teams"], (labels, chunk_size)


@pytest.mark.parametrize("init,loss,shared", [("aop", "squared-hinge", False), ("zero", "logistic", False),
                                               ("aop", "squared-hinge", True), ("zero", "logistic", True)])
def test_support_marks_renumbered_when_their_stamps_run_out_change_nothing(monkeypatch, init, loss, shared):
    """The support's marks are two-byte stamps (objective/erm.py, MARK_DTYPE), renumbered
    when they run out (erm._next_stamp).  Lanes that start 3 stamps before the end
    renumber inside their first solve (the current support kept as mark 1, step_move's
    old support too) and train the same weights, to the bit, lone and in a team (with
    direction groups from zero)."""
    from headstart.objective import erm

    X, Y = bibtex()
    labels = np.arange(0, 159, 3)
    p = TrainParams(threads=2, init=init, loss=loss)
    plain = trainer.train_labels(X, Y, p, labels, shared=shared, chunk_size=40)
    late = erm.IST_INIT.copy()
    late[erm.STAMP] = erm.MAX_STAMP - 3
    monkeypatch.setattr(erm, "IST_INIT", late)
    wrapped = trainer.train_labels(X, Y, p, labels, shared=shared, chunk_size=40)
    same(plain, wrapped)


def test_a_sub_problem_view_clears_marks_that_a_solve_could_outlast():
    """The shortlisted trainer's sub-problems are views of one buffer (one_problem): the
    marks are cleared, and the stamps restarted, when fewer are left than a solve may
    draw -- the core's renumbering would see the view only."""
    from headstart.objective import erm
    from headstart.training import one_problem as core

    B = core.new_buffers(8, 10)
    O = B[1]
    O.mark[:] = 7
    O.ist[erm.STAMP] = erm.MAX_STAMP - 50
    core.workspace_view(B, 4, 5, 20)         # 50 left, 20 needed: kept
    assert O.ist[erm.STAMP] == erm.MAX_STAMP - 50 and np.all(O.mark == 7)
    core.workspace_view(B, 4, 5, 51)         # 51 needed: cleared
    assert O.ist[erm.STAMP] == 0 and not O.mark.any()
    S = TrainParams(max_iter=100_000)
    assert core.solve_stamps(core.solver_settings(S)) > erm.MAX_STAMP   # then cleared before every solve
    O.ist[erm.STAMP] = 1
    core.workspace_view(B, 4, 5, core.solve_stamps(core.solver_settings(S)))
    assert O.ist[erm.STAMP] == 0


def test_numpys_true_asks_for_teams_of_four_and_the_estimate_names_its_chunks():
    """shared=np.True_ (a flag from numpy) is True, not teams of one thread; the
    estimate's note names the chunk size in teams mode too."""
    from headstart import resources

    X, Y = bibtex()
    labels = np.arange(0, 159, 2)
    p = TrainParams(threads=6)
    out = trainer.train_labels(X, Y, p, labels, shared=np.True_, chunk_size=16)
    assert out[2].meta["shared_lanes"] and out[2].meta["teams"] == 2
    e = resources.estimate_training_memory(490449, 135909, 490449 * 75, 670091, 64, memory=256 * 2**30,
                                           collect=False)
    assert e.details["shared_lanes"] and any("chunks of" in n for n in e.notes)


@pytest.mark.parametrize("bad", [-1, 0, 1.5, "yes"])
def test_shared_takes_only_a_flag_or_a_team_size(bad):
    """helper-120: train_labels(shared=-1) and shared=1.5 were taken silently, "yes"
    failed in int(); now each is refused before any work, naming what is taken."""
    from headstart.errors import ParameterError

    X, Y = bibtex()
    with pytest.raises(ParameterError, match="shared: None, True, False or the most threads per team"):
        trainer.train_labels(X, Y, TrainParams(threads=2), np.arange(4), shared=bad)


def test_share_lanes_asks_for_teams_or_lone_lanes_with_the_same_weights(monkeypatch):
    """The parameter share_lanes (``--share-lanes``): yes puts the threads in teams
    (from zero with their direction groups) where auto keeps 16 lanes per thread (small
    X), no keeps them lone where auto takes a team (X "larger than the cache", aop or
    zero);
    the same weights bit for bit, and the estimate follows the trainer either way."""
    from headstart import resources
    from headstart.errors import ParameterError

    X, Y = bibtex()
    labels = np.arange(0, 159, 4)
    auto = trainer.train_labels(X, Y, TrainParams(threads=2, init="zero"), labels)
    assert not auto[2].meta["shared_lanes"]
    yes = trainer.train_labels(X, Y, TrainParams(threads=2, init="zero", share_lanes="yes"), labels)
    assert yes[2].meta["shared_lanes"] and yes[2].meta["groups"]
    same(auto, yes)
    e = resources.training_memory_for(X, Y, TrainParams(threads=2, init="zero", share_lanes="yes"), labels.size)
    assert e.details["shared_lanes"] and e.details["team_threads"] == 2
    lone_e = resources.training_memory_for(X, Y, TrainParams(threads=2, init="zero", share_lanes="no"), labels.size)
    assert not lone_e.details["shared_lanes"] and e.parts["workspaces"] < lone_e.parts["workspaces"]
    # aop on X larger than the cache, every thread with a core: auto takes the team, no not
    monkeypatch.setattr(budget_module, "SWEEP_PREFETCH_NNZ", 0)
    monkeypatch.setattr(budget_module, "usable_cores", lambda: 2)
    team = trainer.train_labels(X, Y, TrainParams(threads=2), labels)
    lone = trainer.train_labels(X, Y, TrainParams(threads=2, share_lanes="no"), labels)
    assert team[2].meta["shared_lanes"] and not lone[2].meta["shared_lanes"] and lone[2].meta["lanes"] == LANES
    same(team, lone)
    assert not resources.training_memory_for(X, Y, TrainParams(threads=2, share_lanes="no"),
                                             labels.size).details["shared_lanes"]
    # from zero too (issue 12: a thread's buffers must not grow as 16 lanes x (n + d)
    # where X or they outgrow the cache): auto takes the team with groups, no not
    zero = trainer.train_labels(X, Y, TrainParams(threads=2, init="zero"), labels)
    assert zero[2].meta["shared_lanes"] and zero[2].meta["groups"]
    same(zero, auto)
    assert resources.training_memory_for(X, Y, TrainParams(threads=2, init="zero"), labels.size).details["shared_lanes"]
    with pytest.raises(ParameterError, match="share_lanes must be one of auto, yes, no, got 'maybe'"):
        TrainParams(share_lanes="maybe")
    # yes takes the smallest teams that fit: WikiLSHTC-325K's shape from zero at 64
    # threads, teams of four (with groups) on 256 GiB, of sixteen on 32 GiB (as auto there)
    n, d = 1778351, 1617899
    for memory, size, grouped in ((256, 4, True), (32, 16, False)):
        e = resources.estimate_training_memory(n, d, n * 42, 325056, 64, collect=False, locality=False,
                                               memory=memory * 2**30, init="zero", share_lanes="yes")
        assert e.details["team_threads"] == size
        assert e.parts["workspaces"] == budget_module.team_workspace_bytes(n, d, 64, grouped, size)


def test_auto_shares_lanes_where_x_or_the_lane_buffers_outgrow_the_cache():
    """share_lanes='auto' (budget.share_lanes), every thread with a core: whatever the
    start and loss, teams where X is larger than the cache or a thread's 16 lanes'
    buffers exceed LONE_LANES_BYTES (many rows with few non-zeros); lone lanes where
    both are small (debian-deps' shape); 'no' keeps them lone everywhere."""
    share = budget_module.share_lanes
    big = 256 * 2**30
    for groups in (False, True):
        assert share(39061, 22263, 2, LANES, big, groups, cores=2, nnz=1_400_000) == 0
        assert share(490449, 135910, 2, LANES, big, groups, cores=2, nnz=36_700_000) == 2
        # 5M rows of one non-zero each: X small, the lanes' buffers 2 GiB per thread
        assert budget_module.thread_workspace_bytes(5_000_000, 1000, LANES, groups) > budget_module.LONE_LANES_BYTES
        assert share(5_000_000, 1000, 2, LANES, big, groups, cores=2, nnz=5_000_000) == 2
        assert share(490449, 135910, 2, LANES, big, groups, cores=2, nnz=36_700_000, mode="no") == 0
        assert share(490449, 135910, 4, LANES, big, groups, cores=2, nnz=36_700_000) == 0   # threads > cores
