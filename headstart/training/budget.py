"""How many lanes a training thread runs: the lanes' buffers against the memory.

A thread of the Newton-CG kernel (:func:`.kernel.train_chunk`) trains ``lanes`` labels
at once, one pass over X serving all of them; each lane holds vectors of the length of
the features and of the instances (:func:`.kernel.make_lane_workspace`).  This module
measures that layout (:func:`thread_workspace_bytes`), and chooses 16, 8 or 1 lanes so
that all threads' lanes fit half the memory the process may still use
(:func:`lane_budget`, :func:`choose_lanes`); :mod:`headstart.resources` uses the same
numbers for its estimate of a whole run.  The memory itself is probed by
:mod:`headstart._memory`, below the training code.
"""

from __future__ import annotations

from .._memory import available_memory
from .._threads import usable_cores
from ..objective.erm import GROUP
from ..solver.cg import CG_SCALARS
from .kernel import HALF_LANES, LANES, SWEEP_PREFETCH_NNZ, make_lane_workspace
from .team import TEAM_THREADS, team_blocks, team_sizes

_F64 = 8


#: the lanes' buffers may take this share of the memory the process can use (and at
#: least MIN_LANE_BUDGET); beyond it a thread runs one lane
LANE_MEMORY_SHARE = 0.5
#: a thread's 16 lanes' buffers (groups included) beyond which its threads share lanes
#: by default even where X is small (:func:`share_lanes`): twice the 32 MiB last-level
#: cache, where the buffers are swept from memory like a large X (debian-deps' are 27 MiB)
LONE_LANES_BYTES = 64 * 2**20
MIN_LANE_BUDGET = 2 * 2**30


def lane_budget(memory: int | None = None) -> int:
    """Bytes the lane buffers of all threads may take: half of ``memory`` (default: what
    this process can still allocate, :func:`headstart._memory.available_memory`), at
    least 2 GiB.  A fixed 2 GiB gave up the lanes -- and with them the batched sweep, 16x
    the passes over X per label -- on every big shape at 64 threads, even on a 256 GB
    machine that holds 16 lanes per thread (WikiLSHTC-325K's shape: 77 GB at 64
    threads); half of the machine keeps them wherever they fit beside the data and the
    rest of training (which the command line checks before it starts)."""
    if memory is None:
        memory = available_memory()
    return max(MIN_LANE_BUDGET, int(LANE_MEMORY_SHARE * memory)) if memory else MIN_LANE_BUDGET


def choose_lanes(n: int, d: int, threads: int, budget: float | None = None) -> int:
    """LANES lanes (one sweep over X serves LANES labels) unless their threads' buffers
    (:func:`thread_workspace_bytes`: per lane w, s, F and marks per
    feature, scores and labels per instance; the sweep buffer and the direction group)
    would exceed ``budget`` bytes (default :func:`lane_budget`); then HALF_LANES (8, no
    direction groups: a bit more than half the memory, twice the sweeps; see
    kernel.lanes_scores8) if those fit, else one lane per thread."""
    return plan_lanes(n, d, threads, budget)[0]


def plan_lanes(n: int, d: int, threads: int, budget: float | None = None) -> tuple[int, float | None]:
    """(lanes, the budget they were weighed against) as :func:`choose_lanes`.  Without a
    ``budget`` the memory is probed only when the lanes exceed the floor every budget
    has (MIN_LANE_BUDGET): the /proc and cgroup reads of :func:`lane_budget` take
    ~0.2 ms, 1% of a small problem's fit (stop 64).  The budget is then None."""
    for lanes in (LANES, HALF_LANES):
        need = thread_workspace_bytes(n, d, lanes) * threads
        if budget is None and need <= MIN_LANE_BUDGET:
            return lanes, None
        if budget is None:
            budget = lane_budget()   # once: it reads the memory available, which changes
        if need <= budget:
            return lanes, budget
    return 1, budget


def use_groups(lanes: int, sparse_start: bool, mines: bool) -> bool:
    """Whether threads with ``lanes`` lanes form direction groups (kernel.DENSE_SHARE;
    16 lanes only): unless the run's start leaves the active sets sparse (the
    initialiser's ``sparse_start``) under a loss that mines negatives (its ``mines``).

    Groups pay where many lanes are dense at once: from zero, 1.09x on bibtex and 1.12x
    on delicious; with the logistic loss 1.74x on bibtex.  With aop they do not: 0.99x
    on bibtex, 0.94x on delicious (labels 0:400, 2 threads, medians of 5 alternating
    runs, 2026-11-26; docs/design.md, "Direction groups").  Without them the kernel is
    compiled without their code: ~2 s less in a first run (issue 13)."""
    return lanes == LANES and not (sparse_start and mines)


_LANE_LAYOUT: tuple[int, int, int] | None = None


def lane_workspace_layout() -> tuple[int, int, int, int, int]:
    """Bytes of the kernel's workspace per ``n_features + 1`` and per ``n``, for each lane
    and shared by the lanes of a thread, plus fixed bytes per lane: read from
    :func:`~headstart.training.kernel.make_lane_workspace` on a tiny problem (arrays
    with a leading axis of 1 whatever the lane count are shared), so the estimate
    follows its layout and dtypes (``y`` int8, ``act`` uint32, ...).
    Returns (per_nv, per_n, fixed, shared_nv, shared_n)."""
    global _LANE_LAYOUT
    if _LANE_LAYOUT is None:
        n, d = 5, 6                      # distinct lengths: n = 5, n_features + 1 = 7 (the
        #                                  objective's scalars: 3, the lane delta: 1)
        per_nv = per_n = fixed = shared_nv = shared_n = 0
        ws, state = make_lane_workspace(n, d, 2)
        for a in (*ws, *state):
            length = int(a.size // a.shape[0])
            shared = a.shape[0] == 1
            if length == d + 1:
                if shared:
                    shared_nv += a.itemsize
                else:
                    per_nv += a.itemsize
            elif length == n:
                if shared:
                    shared_n += a.itemsize
                else:
                    per_n += a.itemsize
            else:
                fixed += a.itemsize * length
        _LANE_LAYOUT = (per_nv, per_n, fixed, shared_nv, shared_n)
    return _LANE_LAYOUT


def thread_workspace_bytes(n: int, d: int, lanes: int, groups: bool = True) -> int:
    """Bytes of one training thread's buffers: its lanes' workspaces
    (:func:`lane_workspace_layout`), the kernel's float32 sweep buffer (one column per
    lane), the recomputed start vector, the positives' sum and the exact-remainder
    scratch (float64), and with 16 lanes the direction group's seven float64 vectors per
    member (gradient, preconditioner, residual, direction and product, each also
    interleaved), the members' gradient coefficients (float64 per instance), its row
    union (uint32) and marks (``groups``: whether the threads
    form groups, :func:`use_groups`; by default counted
    whenever they have 16 lanes, the most they may take).  Also what
    :func:`choose_lanes` weighs against the lane budget."""
    nv = d + 1
    per_nv, per_n, fixed, shared_nv, shared_n = lane_workspace_layout()
    group = group_workspace_bytes(n, d) if groups and lanes == LANES else 0
    return (lanes * (per_nv * nv + per_n * n + fixed) + shared_nv * nv + shared_n * n
            + 3 * nv * _F64 + lanes * nv * 4 + group)


def group_workspace_bytes(n: int, d: int) -> int:
    """Bytes of one thread's direction-group buffers (:func:`.kernel.make_group`): seven
    float64 vectors of ``d + 1`` per member (gradient, preconditioner, residual,
    direction and product, each also interleaved), the members' gradient coefficients
    (float64 per instance), the row union (uint32) and its marks, and per member its
    lane, CG scalars and run flag."""
    return 7 * GROUP * (d + 1) * _F64 + (5 + GROUP * _F64) * n + GROUP * (_F64 + CG_SCALARS * _F64 + 1)


def team_workspace_bytes(n: int, d: int, threads: int, groups: bool = False, size: int = TEAM_THREADS) -> int:
    """Bytes of the buffers of ``threads`` threads sharing lanes in teams of at most
    ``size`` threads (:func:`.team.team_sizes`; ``size=threads``: one team): the sum of
    :func:`one_team_bytes` over the teams."""
    return sum(one_team_bytes(n, d, k, groups) for k in team_sizes(threads, size=size))


def one_team_bytes(n: int, d: int, threads: int, groups: bool = False) -> int:
    """Bytes of the buffers of one team of ``threads`` threads (:func:`.team.make_team_state`):
    LANES lanes per block of 16 threads (their X-products are the team's XV), the
    common float32 sweep buffer, and per thread the lanes' shared vectors, the kernel's
    three float64 scratch vectors and (``groups``) its direction-group buffers."""
    nv = d + 1
    per_nv, per_n, fixed, shared_nv, shared_n = lane_workspace_layout()
    lanes = LANES * team_blocks(threads)
    return (lanes * (per_nv * nv + per_n * n + fixed) + lanes * nv * 4
            + threads * (shared_nv * nv + shared_n * n + 3 * nv * _F64
                         + (group_workspace_bytes(n, d) if groups else 0)))


def share_lanes(n: int, d: int, threads: int, lanes: int, budget: float | None, groups: bool = False,
                cores: int | None = None, nnz: int | None = None, mode: str = "auto") -> int:
    """Whether ``threads`` threads share 16 lanes per team (:mod:`.team`) instead of
    running ``lanes`` (:func:`plan_lanes`) each; ``groups``: whether the run forms
    direction groups (:func:`use_groups`; a team's threads each form their own where
    their buffers fit, :func:`team_groups`); ``nnz``: X's non-zeros (None: large).

    Teams wherever X is larger than the cache (more than ``SWEEP_PREFETCH_NNZ``
    non-zeros) or a thread's 16 lanes' buffers exceed ``LONE_LANES_BYTES``, their
    buffers (16 lanes per team of up to four threads, :func:`team_workspace_bytes`,
    with the threads' direction groups where the run forms them) fit ``budget`` and
    every thread has a core -- whatever the start and the loss, so that a thread's
    memory does not grow as 16 lanes x (n + d) (issue 12).  Without groups -- the
    sparse starts with a loss that mines negatives, aop with the squared hinge -- that
    is the fast choice too: faster than 16 lanes
    per thread, at 4 lanes' memory per thread (8 with two threads), since the threads'
    sweeps over X come from memory once per 16 labels of the team instead of once per
    16 labels of each thread.  Measured with benchmarks/lanes.py (2 threads, aop,
    2026-12-04, medians, the same weights throughout; the lane work then in functions of its own, the same
    schedule): on the Amazon-670K shape (36.7M non-zeros), labels
    0:320, team 13.80 s, 16 lanes 16.96 s, 8 lanes 17.74 s; labels 0:1000, team
    40.37 s, 16 lanes 49.61 s, 8 lanes 43.59 s.  Where X fits the cache the sweeps
    cost little and the team's barriers do: on all of debian-deps (1.4M non-zeros)
    the default team took 1.07x the time of 16 lanes per thread (benchmarks/
    before_after.py, two runs of 2).
    With groups (from zero, the logistic loss) the team costs time instead: on the
    Amazon-670K shape at 2 threads 0.96-1.24x that of 16 lanes per thread from zero
    and 1.07-1.19x with the logistic loss (stops 87-88, benchmarks/lanes.py and
    before_after.py, docs/design.md "Teams by default"; the team's barrier
    waits for the thread still in a group's directions, docs/design.md, "Direction
    groups in a team"), paid for four lanes' buffers and one group's per thread
    instead of 16 lanes' (246 -> 156 MiB per thread there; at 64 threads the estimate's
    lane workspaces 15.4 -> 6.9 GiB).  ``share_lanes='no'`` keeps the lone lanes where
    the memory is there.  The team with groups is also what a run takes where 16 lanes
    per thread do not fit, rather than 8 lanes per thread, which form no groups: from
    zero, labels 0:128, 8 lanes took 1.15x the time of 16, the team with groups 1.02x
    (one run each, the same weights; benchmarks/lanes.py).
    Where 8 lanes per thread do not fit, teams' 16 lanes instead of one per thread
    (one pass over X per 16 labels instead of one per label), if their buffers fit or
    take no more than one lane per thread would.

    Returns the threads per team (:func:`.team.team_sizes`; 0: no team): TEAM_THREADS,
    or where teams of four do not fit the budget, the smallest of 8, 16 and all the
    threads whose teams do -- fewer lanes per thread, at a worse balance of the lanes'
    work (:data:`.team.TEAM_THREADS`).  With groups, where 8 lanes per thread fit,
    teams fit only with their threads' group buffers (the rules above), so the size
    is the smallest whose teams fit *with* groups; where 8 lanes per thread do not
    fit, the smallest whose teams fit at all, with groups or without.  So from zero
    the size need not fall as the memory grows: WikiLSHTC-325K's shape at 64 threads
    takes teams of four without groups on 64-80 GiB, of eight with groups on 90 GiB
    (8 lanes per thread fit there, teams of four with groups not), of four with
    groups from 104 GiB.

    The speed rule holds only where every thread has a core (``cores``: default
    :func:`headstart._threads.usable_cores`): the team meets at a barrier twice a pass,
    and a thread without a core holds all the others back.

    ``mode``: the parameter share_lanes -- auto the rules above; no: never; yes: teams
    whatever the start and X, of the smallest size whose buffers fit (with groups where
    they fit too), else one team of all the threads."""
    if threads <= 1 or mode == "no":
        return 0
    asked = mode == "yes"
    beyond_cache = (nnz is None or nnz > SWEEP_PREFETCH_NNZ
                    or thread_workspace_bytes(n, d, LANES, groups) > LONE_LANES_BYTES)
    cored = threads <= (usable_cores() if cores is None else cores)
    one_lane = threads * thread_workspace_bytes(n, d, 1, groups=False)
    for size in [s for s in (TEAM_THREADS, 2 * TEAM_THREADS, LANES) if s < threads] + [threads]:
        grouped = team_groups(n, d, threads, budget, groups, size)
        team = team_workspace_bytes(n, d, threads, grouped, size)
        # (no budget: 16 lanes per thread, more than the teams', were below every budget's floor)
        fits = budget is None or team <= budget
        if fits and beyond_cache and (not groups or grouped) and cored:
            return min(size, threads)
        if lanes < HALF_LANES and (fits or team <= 1.05 * one_lane):
            return min(size, threads)
        if asked and fits:
            return min(size, threads)
    return threads if asked else 0


def team_groups(n: int, d: int, threads: int, budget: float | None, groups: bool, size: int = TEAM_THREADS) -> bool:
    """Whether teams' threads form direction groups: where the run forms them
    (``groups``, :func:`use_groups`) and the teams' buffers with them (``threads`` in
    teams of at most ``size``) fit ``budget`` (each thread has its own group buffers,
    :func:`group_workspace_bytes`: ~10 lanes' worth per feature).  Without them a team
    from zero took 1.16x the time of one with them, with the logistic loss 1.5x
    (Amazon-670K shape, docs/design.md)."""
    return groups and (budget is None or team_workspace_bytes(n, d, threads, True, size) <= budget)
