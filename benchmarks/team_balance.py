"""How evenly a team's threads would share its lanes' work: a model, from measured times.

A team (headstart/training/team.py) of T threads trains 16 lanes per block of k
threads, 16 x ceil(T / k) lanes in all.  In every pass over X the threads take lanes
from a counter and each does a taken lane's whole iteration (line search, gradient, the
next direction) alone; the next pass starts when every lane's iteration is done (a
barrier).  So in each pass the team is as slow as its most loaded thread: with 2 threads
taking 8 lanes each the loads even out, with 16 threads taking one lane each the pass
lasts as long as its slowest lane's iteration -- and with more lanes in one team, the
slowest of more.  The table's rows are the threads of one team, its columns k; a run of
several independent teams of k threads (the trainer's teams of TEAM_THREADS = 4, each
with its own barrier) is the row T = k, whatever the run's threads.

This replays that schedule on the per-iteration times of a real run (a ``--stats`` file
in JSON lines from ``headstart train --threads 1``: each label's ``trajectory.seconds``,
the seconds of each of its Newton iterations, a share of the sweep included) and prints,
per number of threads sharing 16 lanes, the busy share of the lane work: the work done
over (threads x the passes' durations).  A lane that finishes takes the next label, as
in the trainer; the labels come in a random order (5 orders, averaged).  The sweep's own
split over the threads is not modelled (it divides evenly by nonzeros), nor the memory
bandwidth that lone threads' separate sweeps compete for -- so this bounds only the
lane phase of a team, the part that does not shrink with the threads.

    python -m headstart train DATA -o M --threads 1 --num-labels 400 --init zero --stats s.jsonl
    python benchmarks/team_balance.py s.jsonl --threads 2,4,16,64 --per-block 2,4,16

Where the labels would not keep a team's lanes busy for three labels each, they are
drawn with replacement (the same distribution of per-iteration times).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

LANES = 16


def iteration_times(path: str) -> list[np.ndarray]:
    """Per label, the seconds of its Newton iterations (the start's record, index 0, is
    the start alone and is left out)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            t = np.asarray(json.loads(line).get("trajectory", {}).get("seconds", [])[1:], dtype=float)
            if t.size:
                out.append(t)
    if not out:
        raise SystemExit(f"{path}: no per-iteration seconds (write --stats as .jsonl)")
    return out


def busy_share(labels: list[np.ndarray], threads: int, rng: np.random.Generator, lanes: int = LANES,
               rounds: int = 3, order: str = "prev") -> float:
    """The busy share of ``threads`` threads taking ``lanes`` lanes from a counter, on a
    random order of the labels; where the labels would not keep the lanes busy for
    ``rounds`` labels each, they are drawn with replacement (the same distribution of
    per-iteration times, enough labels for the lanes).  ``order``: the order in which a
    pass hands out its lanes -- "lane" (by lane number, the trainer before stop 82),
    "prev" (longest last-pass work first, the trainer's kernel.team_order; a lane with a
    new label first of all) or "oracle" (longest work of this pass first: a bound)."""
    if len(labels) >= rounds * lanes:
        queue = list(rng.permutation(len(labels)))
    else:
        queue = list(rng.integers(0, len(labels), rounds * lanes))
    lane = [None] * lanes
    pos = [0] * lanes
    prev = [np.inf] * lanes

    def take(b):
        lane[b] = labels[queue.pop()] if queue else None
        pos[b] = 0

    for b in range(lanes):
        take(b)
    span = work = 0.0
    while any(x is not None for x in lane):
        load = np.zeros(threads)
        items = [(b, lane[b][pos[b]]) for b in range(lanes) if lane[b] is not None]
        if order == "prev":
            items.sort(key=lambda x: -prev[x[0]])
        elif order == "oracle":
            items.sort(key=lambda x: -x[1])
        for b, c in items:
            load[load.argmin()] += c          # the next free thread takes the lane
            work += c
            prev[b] = c
            pos[b] += 1
            if pos[b] == lane[b].size:
                take(b)
                prev[b] = np.inf
        span += load.max()                     # the barrier waits for the busiest thread
    return work / (threads * span)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stats", help="a --stats file in JSON lines (.jsonl) of a one-thread run")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--per-block", default="16",
                    help="threads per block of 16 lanes: a team of T threads shares 16 x ceil(T / k) lanes")
    ap.add_argument("--orders", type=int, default=5)
    ap.add_argument("--order", choices=("lane", "prev", "oracle"), default="prev",
                    help="how a pass hands out its lanes (see busy_share)")
    a = ap.parse_args()
    labels = iteration_times(a.stats)
    print(f"{len(labels)} labels, {sum(x.size for x in labels)} iterations")
    per_block = [int(x) for x in a.per_block.split(",")]
    print("busy share of the lane work; columns: threads per block of 16 lanes (lanes per thread)")
    print("threads  " + "  ".join(f"{k:>14d}" for k in per_block))
    for t in (int(x) for x in a.threads.split(",")):
        cells = []
        for k in per_block:
            lanes = LANES * -(-t // k)
            rng = np.random.default_rng(0)
            s = np.mean([busy_share(labels, t, rng, lanes, order=a.order) for _ in range(a.orders)])
            cells.append(f"{s:6.3f} ({lanes / t:4.1f})")
        print(f"{t:7d}  " + "  ".join(f"{c:>14s}" for c in cells))


if __name__ == "__main__":
    main()
