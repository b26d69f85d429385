"""Lanes shared by the threads of a run: the batched sweep at the memory of one lane.

A thread of the Newton-CG kernel trains LANES (16) labels side by side so that one pass
over X serves 16 labels (:mod:`.kernel`).  Each lane holds O(n + d) buffers (the
label's scores, X-products, weights, direction and support), so per thread the lanes
cost 16 x (n + d): 1.2 GB per thread on a WikiLSHTC-325K-sized problem, 77 GB at 64
threads.  Measured on the Amazon-670K shape, those buffers are really used (docs/design.md,
"Not done" of issue 12): a label touches most of its n + d entries, so the per-lane
size cannot shrink much.  What can change is how many lanes there are.

Here the threads share the batching instead of each doing its own: a team of up to
TEAM_THREADS (4) threads trains a chunk together with 16 lanes in all, and a run of
more threads forms several teams, each taking chunks as a lone thread would
(:func:`team_sizes`).  The lanes belong to the team, not to a thread: their buffers,
their scheduler state (:class:`.kernel.Lanes`) and the sweep's buffers are common, and
in every pass each thread takes lanes from a counter and does a taken lane's whole
work between two passes -- line search, step, gradient, the next direction, or a new
label's start -- alone and without locks (:func:`.kernel.train_chunk`), with scratch
vectors of its own.  The pass over X is common too: every thread computes the
X-products of *all* the lanes for its own share of X's rows (split by nonzeros),
between two barriers (:func:`.kernel.team_sweep`, :mod:`headstart._atomic`).  So one
pass over X still serves 16 labels, but the lanes' buffers no longer grow with the
lanes a thread would keep alone: per thread 16 / k lanes in a team of k threads, four
lanes' from four threads on where the threads are a multiple of four (8 with two; 5
threads are teams of 3 + 2, 6.4 lanes' per thread), instead of 16.

Why teams of four and not one team of all threads (stops 70-81: 16 lanes per block of
16 threads, one lane per thread from 16 threads on): a pass ends at a barrier when its
slowest lane iteration ends, and with one lane per thread nothing evens the lanes'
iterations out -- replayed on measured times, one team of 64 threads would be busy only
15-46% of its lane phase, a team of four 74-87% (:data:`TEAM_THREADS`).

Why lanes are taken, not owned: each thread owning 16 / threads lanes (stop 70) made
the team wait at every barrier for the thread whose lanes had the most work in that
pass -- ~9% of the time on debian-deps with 2 threads.  Taken from a counter, a lane's
work goes to whichever thread is free, and the threads arrive at the barrier within
about one lane's work of each other.

Direction groups (:data:`.kernel.DENSE_SHARE`; unless the start is sparse and the loss
mines negatives, as aop with the squared hinge: :func:`.budget.use_groups`) form
per thread, of the lanes it takes, each thread with its own group buffers: a team's thread
does a lane's line search and its new label's start together, so one group may hold
lanes waiting for their gradients and lanes with a new label's (stop 74; docs/design.md,
"Direction groups in a team").  Such a team hands its lanes out in lane order, not longest
first (stop 83, :func:`.kernel.team_order`).

Labels are handed out from a shared counter, and a chunk ends when no lane is busy.
Each label's arithmetic is exactly what it is in a thread of its own (same operations,
same order, the sweep's sums row by row as in :func:`.kernel.lanes_scores`), so the
weights are the same bit for bit whichever mode or thread trains them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ..solver.newton import DELTA_DTYPE
from . import pages
from .kernel import (IDLE, LANES, N_STATS, SCRATCH_O, SCRATCH_W, TEAM_SYNC_WORDS, Team, make_group,
                     make_lane_workspace, make_lanes)


#: threads per team: a run of T threads that shares its lanes forms ceil(T / 4) teams
#: (:func:`team_sizes`), each with its own 16 lanes, pass and barriers.  One team of all
#: T threads (stops 70-81) waits at every pass for the slowest of T lane iterations;
#: replayed on measured per-iteration times (benchmarks/team_balance.py, docs/design.md,
#: "A team's balance at many threads"), its threads would be busy 15-46% of the lane
#: phase at 64 threads; a team of four 74-87% whatever the threads (two: 93-96%, at
#: twice the lanes per thread) -- all in lane order; handing out the longest lanes
#: first (:func:`.kernel.team_order`; teams without direction groups), a team of four
#: 82-92%, of two 96-99%.  Four keeps a thread's lane buffers at four lanes' whatever
#: the threads, and the passes over X at one per 16 labels of a team (a quarter of lone
#: threads').
TEAM_THREADS = 4


def team_sizes(threads: int, chunks: int | None = None, size: int = TEAM_THREADS) -> list[int]:
    """The threads of each team when ``threads`` threads share lanes: ceil(threads / size)
    teams of near-equal sizes (6 threads: 3 + 3, 5: 3 + 2), but no more teams than
    ``chunks`` (a team trains one chunk at a time; with fewer chunks the teams grow
    instead, so that every thread still works on the few labels there are).

    Teams grown past LANES threads take whole blocks of lanes (:func:`team_blocks`), so
    they are split in about equal threads per block rather than equal threads per team:
    ceil(threads / 16) blocks in all, never more lanes than the teams ``size`` would
    form (whose buffers the budget weighed, :func:`.budget.share_lanes`).  Near-equal
    teams did not: 64 threads in teams of 16, 3 chunks, were 22 + 21 + 21 threads, two
    blocks each, 96 lanes instead of 64 (WikiLSHTC-325K's shape: 15.5 GiB, not 13.4)."""
    threads = max(1, int(threads))
    m = -(-threads // max(1, int(size)))
    if chunks is not None:
        m = max(1, min(m, int(chunks)))
    base, extra = divmod(threads, m)
    if base + (extra > 0) <= LANES:
        return [base + 1] * extra + [base] * (m - extra)
    blocks = -(-threads // LANES)
    b, e = divmod(blocks, m)
    cuts = np.cumsum([b + 1] * e + [b] * (m - e)) * threads // blocks
    return sorted(np.diff(cuts, prepend=0).tolist(), reverse=True)


def team_blocks(threads: int) -> int:
    """Blocks of LANES lanes one team of ``threads`` threads shares: one per 16 threads,
    so that every thread owns at least one lane (teams of more than 16 threads form
    where only one team of all the threads fits the budget, :func:`.budget.share_lanes`,
    or where there are fewer chunks than teams, :func:`team_sizes`)."""
    return -(-max(1, threads) // LANES)


def team_rows(threads: int, indptr: np.ndarray) -> list[tuple[int, int]]:
    """Per thread the rows [r0, r1) of X it sweeps: ``threads`` runs of about equal
    nonzeros (the sweep's cost)."""
    threads = max(1, threads)
    n = indptr.size - 1
    cuts = np.searchsorted(indptr, np.linspace(0, indptr[-1], threads + 1)[1:-1], side="left")
    bounds = np.concatenate([[0], np.clip(cuts, 0, n), [n]]).astype(np.int64)
    return [(int(bounds[t]), int(bounds[t + 1])) for t in range(threads)]


@dataclass
class TeamState:
    """A team's buffers, made once per run: the common sweep buffer V (blocks, features
    + 1, LANES) and X-products XV (blocks x LANES, n), the lanes' scheduler state, and
    per thread its view of the lane workspace and objective state (the lanes' own rows
    common, xs = XV, the scratch rows its own), its rows of X and its direction-group
    buffers (None: the team forms no groups)."""
    V: np.ndarray
    XV: np.ndarray
    lanes: tuple
    members: list
    rows: list
    groups: list


def make_team_state(n: int, d: int, threads: int, indptr: np.ndarray, groups: bool = False) -> TeamState:
    """The buffers of a team of ``threads`` threads (mappings of their own, :mod:`.pages`:
    pages no thread writes cost nothing); with ``groups`` each thread forms direction
    groups of the lanes it takes (:func:`.kernel.make_group`, its own buffers)."""
    L = LANES * team_blocks(threads)
    V = pages.zeros((L // LANES, d + 1, LANES), DELTA_DTYPE)
    XV = pages.zeros((L, n), np.float64)
    ws, os_ = make_lane_workspace(n, d, L)
    os_ = os_._replace(xs=np.zeros((L, 0)))   # XV instead (below)
    ws = type(ws)(*pages.zeros_like_workspace(ws))
    os_ = type(os_)(*pages.zeros_like_workspace(os_))._replace(xs=XV)
    members = [(ws, os_)]
    for _ in range(1, max(1, threads)):
        # the thread's scratch: the rows one copy of which serves a lane at a time
        fresh = lambda a: pages.zeros(a.shape, a.dtype)  # noqa: E731
        members.append((ws._replace(**{f: fresh(getattr(ws, f)) for f in SCRATCH_W}),
                        os_._replace(**{f: fresh(getattr(os_, f)) for f in SCRATCH_O})))
    B = [make_group(n, d, LANES) if groups else None for _ in members]
    return TeamState(V, XV, make_lanes(L), members, team_rows(threads, indptr), B)


def member(state: TeamState, t: int, sync: np.ndarray, owner: np.ndarray, stats: np.ndarray):
    """Thread t's (Team, WS, OS, B) for one chunk (``sync``, ``owner``, ``stats``: the
    chunk's; B: its direction-group buffers or None)."""
    r0, r1 = state.rows[t]
    team = Team(state.V, state.XV, np.int64(r0), np.int64(r1), sync, owner, np.int64(len(state.members)),
                np.int64(t), state.lanes, stats)
    return (team, *state.members[t], state.groups[t])


def run_team(call, state: TeamState, chunk: np.ndarray, rec, abort_flag: np.ndarray):
    """Train ``chunk`` with the team: ``call(chunk, WS, OS, B, records, team)`` is
    :func:`.kernel.train_chunk` with this run's other arguments; thread 0 is the
    calling one, and all write the records ``rec``.  Returns what train_chunk returns,
    for the whole chunk: each label's row from the thread that finished it.  A thread's
    exception stops the others (the abort flag) and is raised here once all have
    returned."""
    T = len(state.members)
    sync = np.zeros(TEAM_SYNC_WORDS, dtype=np.int64)
    owner = np.full(chunk.size, -1, dtype=np.int32)
    stats = np.zeros((chunk.size, N_STATS))
    # (an aborted chunk may leave lanes busy; the run stops then, but a caller that
    # catches the error may train again)
    state.lanes.phase[:] = IDLE
    outputs: list = [None] * T
    errors: list[BaseException] = []

    def work(t: int) -> None:
        team, WS, OS, B = member(state, t, sync, owner, stats)
        try:
            outputs[t] = call(chunk, WS, OS, B, rec, team)
        except BaseException as e:   # noqa: BLE001 - raised below, after the others stopped
            abort_flag[0] = 1
            errors.append(e)

    helpers = [threading.Thread(target=work, args=(t,), name=f"{threading.current_thread().name}-team{t}",
                                daemon=True) for t in range(1, T)]
    for h in helpers:
        h.start()
    work(0)
    for h in helpers:
        h.join()
    if errors:
        raise errors[0]
    return merge_outputs(outputs, owner)


def merge_outputs(outputs: list, owner: np.ndarray):
    """One train_chunk result from the team's: label k's weights and intercept from
    thread owner[k]; the statistics are the team's (every thread returns them)."""
    started = int(outputs[0][5])
    indptr = np.zeros(started + 1, dtype=np.int64)
    lengths = sum(np.diff(o[0][:started + 1]) for o in outputs)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=outputs[0][1].dtype)
    data = np.empty(indptr[-1], dtype=outputs[0][2].dtype)
    intercept = np.zeros(started, dtype=outputs[0][3].dtype)
    own = owner[:started]
    for t, (ip, ind, dat, icp, _, _) in enumerate(outputs):
        rows = np.flatnonzero(own == t)
        if rows.size == 0:
            continue
        count = ip[rows + 1] - ip[rows]
        total = int(count.sum())
        step = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        src = np.repeat(ip[rows], count) + step
        dst = np.repeat(indptr[rows], count) + step
        indices[dst] = ind[src]
        data[dst] = dat[src]
        intercept[rows] = icp[rows]
    return indptr, indices, data, intercept, outputs[0][4], started
