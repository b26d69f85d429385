"""Lanes shared by the threads of a run: the batched sweep at the memory of one lane.

A thread of the Newton-CG kernel trains LANES (16) labels side by side so that one pass
over X serves 16 labels (:mod:`.kernel`).  Each lane holds O(n + d) buffers (the
label's scores, X-products, weights, direction and support), so per thread the lanes
cost 16 x (n + d): 1.2 GB per thread on a WikiLSHTC-325K-sized problem, 77 GB at 64
threads.  Measured on the Amazon-670K shape, those buffers are really used (docs/design.md,
"Not done" of issue 12): a label touches most of its n + d entries, so the per-lane
size cannot shrink much.  What can change is how many lanes there are.

Here the threads share the batching instead of each doing its own: one team of
``threads`` threads trains a chunk together, with 16 lanes in all (16 per block, one
block per 16 threads), each thread owning 16 / threads of them.  A thread does
everything of its own lanes' labels -- start, line search, gradient, CG -- alone and
without locks, as before; only the pass over X is common: every thread computes the
X-products of *all* the team's lanes for its own share of X's rows (split by
nonzeros), between two barriers (:func:`.kernel.team_sweep`, :mod:`headstart._atomic`).
So one pass over X still serves 16 labels, but the lanes' buffers no longer grow with
the threads: per thread 16 / threads lanes (one lane from 16 threads on), instead of
16.

Labels are handed out from a shared counter, so a thread whose labels finish takes the
next one at once; a chunk ends when no thread has a busy lane.  Each label's
arithmetic is exactly what it is in a thread of its own (same operations, same order,
the sweep's sums row by row as in :func:`.kernel.lanes_scores`), so the weights are
the same bit for bit whichever mode trains them.  The price is the waits at the
barriers: a thread whose lanes took longer holds the others' sweep back.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ..solver.newton import DELTA_DTYPE
from . import pages
from .kernel import LANES, TEAM_SYNC_WORDS, Team, make_lane_workspace


def team_blocks(threads: int) -> int:
    """Blocks of LANES lanes a team of ``threads`` threads shares: one per 16 threads, so
    that every thread owns at least one lane."""
    return -(-max(1, threads) // LANES)


def team_layout(threads: int, indptr: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Per thread (first global lane, lanes, first row, end row): the team's blocks of
    LANES lanes split as evenly as possible between the threads of each block (thread t
    in block t mod blocks), and X's rows split into ``threads`` runs of about equal
    nonzeros (the sweep's cost)."""
    threads = max(1, threads)
    q = team_blocks(threads)
    members = [[t for t in range(threads) if t % q == b] for b in range(q)]
    col = {}
    for b, ts in enumerate(members):
        at = b * LANES
        for i, t in enumerate(ts):
            lanes = LANES // len(ts) + (1 if i < LANES % len(ts) else 0)
            col[t] = (at, lanes)
            at += lanes
    n = indptr.size - 1
    cuts = np.searchsorted(indptr, np.linspace(0, indptr[-1], threads + 1)[1:-1], side="left")
    bounds = np.concatenate([[0], np.clip(cuts, 0, n), [n]]).astype(np.int64)
    return [(col[t][0], col[t][1], int(bounds[t]), int(bounds[t + 1])) for t in range(threads)]


@dataclass
class TeamState:
    """A team's buffers, made once per run: the common sweep buffer V (blocks, features
    + 1, LANES) and X-products XV (blocks x LANES, n); per thread its lane workspace and
    objective state (their xs rows are XV's rows of the thread's lanes), its layout and
    (all but the calling thread) its own record arrays."""
    V: np.ndarray
    XV: np.ndarray
    members: list
    layout: list
    records: list


def make_team_state(n: int, d: int, threads: int, indptr: np.ndarray, make_records=None) -> TeamState:
    """The buffers of a team of ``threads`` threads (mappings of their own, :mod:`.pages`:
    pages no thread writes cost nothing).  ``make_records()``: record arrays for each
    helper thread (the calling thread gets the run's own in every call)."""
    layout = team_layout(threads, indptr)
    q = team_blocks(threads)
    V = pages.zeros((q, d + 1, LANES), DELTA_DTYPE)
    XV = pages.zeros((q * LANES, n), np.float64)
    members = []
    for col, lanes, _, _ in layout:
        ws, os_ = make_lane_workspace(n, d, lanes)
        os_ = os_._replace(xs=np.zeros((lanes, 0)))   # XV's rows instead (below)
        ws = type(ws)(*pages.zeros_like_workspace(ws))
        os_ = type(os_)(*pages.zeros_like_workspace(os_))._replace(xs=XV[col:col + lanes])
        members.append((ws, os_))
    records = [None] + [make_records() if make_records is not None else None for _ in layout[1:]]
    return TeamState(V, XV, members, layout, records)


def run_team(call, state: TeamState, chunk: np.ndarray, rec, abort_flag: np.ndarray):
    """Train ``chunk`` with the team: ``call(chunk, WS, OS, records, team)`` is
    :func:`.kernel.train_chunk` with this run's other arguments; thread 0 is the
    calling one.  Returns what train_chunk returns, for the whole chunk: each label's
    row from the thread that trained it.  A thread's exception stops the others (the
    abort flag) and is raised here once all have returned."""
    T = len(state.members)
    sync = np.zeros(TEAM_SYNC_WORDS, dtype=np.int64)
    owner = np.full(chunk.size, -1, dtype=np.int32)
    outputs: list = [None] * T
    errors: list[BaseException] = []

    def work(t: int) -> None:
        col, _, r0, r1 = state.layout[t]
        team = Team(state.V, state.XV, np.int64(col), np.int64(r0), np.int64(r1), sync, owner, np.int64(T),
                    np.int64(t))
        WS, OS = state.members[t]
        try:
            outputs[t] = call(chunk, WS, OS, rec if t == 0 else state.records[t], team)
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
    return merge_outputs(outputs, owner, rec, state.records)


def merge_outputs(outputs: list, owner: np.ndarray, rec, records: list):
    """One train_chunk result from the team's: label k's weights, intercept and
    statistics from thread owner[k]; its records copied into ``rec`` (thread 0's)."""
    started = int(outputs[0][5])
    indptr = np.zeros(started + 1, dtype=np.int64)
    lengths = sum(np.diff(o[0][:started + 1]) for o in outputs)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=outputs[0][1].dtype)
    data = np.empty(indptr[-1], dtype=outputs[0][2].dtype)
    intercept = np.zeros(started, dtype=outputs[0][3].dtype)
    stats = np.zeros((started, outputs[0][4].shape[1]), dtype=outputs[0][4].dtype)
    own = owner[:started]
    for t, (ip, ind, dat, icp, table, _) in enumerate(outputs):
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
        stats[rows] = table[rows]
        if t > 0 and records[t] is not None:
            for mine, theirs in zip(rec, records[t]):
                mine[rows] = theirs[rows]
    return indptr, indices, data, intercept, stats, started
