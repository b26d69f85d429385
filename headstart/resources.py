"""Memory estimates for training and prediction, and the memory this process may use.

headstart can run for days; finding out after hours that the job does not fit is the
worst way to learn it.  ``headstart train`` therefore estimates its memory need from the
shapes of the data before it starts and refuses (exit code 2, a message with both
numbers) when the estimate exceeds :func:`available_memory`; ``--no-memory-check``
goes on anyway.  ``headstart predict --max-memory MB`` sizes its blocks of instances
with :func:`prediction_chunk_rows`.

The estimates follow the buffers the code actually allocates (see
:mod:`headstart.training.chunks`, :mod:`headstart.training.budget` and :mod:`headstart.training.kernel`):

data
    ``X`` as CSR: float32 values + int32 column indices per non-zero, an int64 row
    pointer; ``Y`` likewise.
data copies
    the validated copy of ``Y``, its CSC copy and int64 index copies the kernels use, the
    int64 row pointer of ``X`` for the kernels, the copy of ``X`` with features renumbered
    by frequency, the preprocessed copy of ``X`` (tf-idf or normalisation), label counts.
init
    column sums and sums of squares, the initialisation's plan (aop: the mean instance; ovap: a shared
    solution and a workspace of its own).
workspaces
    per training thread, ``lanes`` (:data:`headstart.training.kernel.LANES`, 16; 8 when 16
    would take more than :func:`headstart.training.budget.lane_budget`, 1 when 8 would too) lane workspaces as
    :func:`headstart.training.kernel.make_lane_workspace` lays them out (read from it:
    per lane w, s (float64) and the support and its marks (uint32) of ``n_features + 1``,
    the scores wx, xs (float64) and the labels (int8) of ``n``; shared by a thread's
    lanes, the gradient, CG vectors and Hessian diagonal (6 float64 of ``n_features + 1``) and the active
    set (uint32) with its two coefficient vectors (float64) of ``n``), plus the kernel's
    sweep buffer (``lanes`` float32 columns), three float64 scratch vectors of
    ``n_features + 1`` (a finished label's recomputed start vector, the positives' sum,
    the exact remainder) and, with 16 lanes, the
    direction group's buffers (7 float64 vectors of ``n_features + 1`` per member of
    :data:`headstart.objective.erm.GROUP`, and per instance 5 bytes plus a float64 per
    member).
    An upper bound: the workspaces live in mappings of their own
    (:mod:`headstart.training.pages`) and pages the solver never writes (parts of the
    active-set arrays) never become resident.
records
    per thread, the per-iteration record arrays, stored iteration-major: only the pages
    of iterations actually run become resident, 5 x ``chunk_size`` float64 per iteration
    of a chunk's longest trajectory, assumed ``4 * expected_iterations`` (at most
    ``min(max_iter, 1000) + 1``).
chunk buffers
    per thread, the weights of the chunk being trained: the kernel's buffer, which grows
    by doubling (up to twice the chunk's weights plus ``n_features``), its output copy
    and the chunk's mapped copy (about three times the chunk's weights).
weights
    the trained weights kept until the model is saved (float32 value + int32 index per
    non-zero), counted once: until the model is assembled the finished chunks keep
    their indices and values packed (about 4.6 instead of 8 bytes per weight,
    :mod:`headstart.training.packed`), and the assembly, which writes the 8-byte model
    while releasing the chunks one by one, runs after the workspaces are released.
    Their number is not
    known before training: it is ``weight_density * (features_used + 1)`` per label.
    With ``prune = 0`` every feature that occurs gets a weight (density 1); with the
    default ``prune = 0.01`` densities range from well below 0.01 (sparse text features,
    many labels: DiSMEC's Amazon-670K model) to 0.75 (bibtex, 1836 dense-ish features);
    the default assumption is :data:`DEFAULT_WEIGHT_DENSITY` (5%), so that the check does
    not refuse big sparse problems that fit; the refusal message shows the assumption.  Sharded training (``--shard-size``,
    ``--resume``) writes the weights as they finish and keeps none.
label arrays
    per label trained: its id (int64: the range the trainer is given) and what the
    weights keep per row besides the weights -- collected, the model's int64 row pointer
    and float32 intercept; written as they finish, the spool's label id and row length
    (int64) and intercept (float32) per label (:mod:`headstart.model.spool`).
statistics
    per label the columns of :class:`headstart.training.stats.TrainingStats` (the label,
    the kernel's ``STAT_FIELDS``, ``shared_with``: int64 / float64 each) and its int64
    trajectory offset, plus 5 per-iteration trajectories (assumed
    ``expected_iterations`` long; none with ``trajectories=False``, as the command line
    trains unless its ``--stats`` file holds them), twice while the chunks' parts are
    concatenated (after training, when the workspaces are gone).  (Until stop 79, 14
    scalars per copy were counted of the 17 a label holds, and the label arrays not at
    all: at 2M labels and 3,000 instances the estimate said 481 MiB, the run took 673.)
settled labels
    labels known before training to end at their start (:func:`settled_labels`: no
    positive instance, and a start that is the optimum -- the defaults') keep no weights
    and a trajectory of one record, and of them a chunk hands one to the kernel
    (:mod:`headstart.training.sharing`): the record rows and weights in flight are those
    of the labels a chunk solves itself, at most its share under guided scheduling
    (:func:`headstart.training.chunks.label_chunks`).  (Until stop 79 every label was
    counted with ``expected_iterations`` and ``weight_density``, and a chunk of the
    shard's full width per thread: ``--shard-size 100000`` at 2M labels, ~9K used, said
    5.0 GiB where the run took 753 MiB; now 822 MiB.)

Not counted: the interpreter, numpy/scipy/numba themselves and compiled code (about
200 MB, already in use when the check runs) and the reading of the data file (done, and
freed, before the check).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from ._memory import available_memory, thread_address_space
from ._threads import usable_cores
from .errors import ResourceError

__all__ = ["MemoryEstimate", "estimate_training_memory", "training_memory_for", "available_memory",
           "thread_address_space", "check_memory", "estimate_prediction_memory", "prediction_chunk_rows",
           "topk_block_rows", "topk_row_bytes", "TOPK_BLOCK_BYTES", "text_bytes_per_row", "format_bytes",
           "DEFAULT_WEIGHT_DENSITY", "settled_labels"]

#: assumed fraction of ``features_used + 1`` that keeps a weight after pruning (prune > 0)
DEFAULT_WEIGHT_DENSITY = 0.05
#: assumed Newton iterations per label, for the size of the statistics
DEFAULT_EXPECTED_ITERATIONS = 20

_F64 = 8
_NNZ = 8            # float32 value + int32 index of one stored non-zero
#: int64 / float64 arrays of a label's statistics besides the kernel's STAT_FIELDS: the label,
#: ``shared_with`` (training/stats.py) and the trajectory offset
_STAT_EXTRA = 3
#: numpy reads an archive member in pieces of up to 256 KiB, each copied once more by zipfile
_READ_PIECE = 1 << 18
_ITER_RECORDS = 5    # objective, active_fraction, step, cg_steps, seconds
_PAGE = 4096         # a page of memory: what becomes resident of a mapping written


def format_bytes(n: float) -> str:
    """``1.5 GiB``-style text."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


@dataclass(frozen=True)
class MemoryEstimate:
    """An estimate in bytes, by part (``parts``), with what it assumed (``notes``)."""

    parts: dict[str, int]
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return int(sum(self.parts.values()))

    def without(self, *names: str) -> int:
        """Total without the named parts (e.g. the data, already in memory)."""
        return int(sum(v for k, v in self.parts.items() if k not in names))

    def describe(self, skip: tuple[str, ...] = ()) -> str:
        """``data 1.2 GiB, workspaces 3.4 GiB, ...`` (largest first, empty parts left out)."""
        items = sorted(((v, k) for k, v in self.parts.items() if v > 0 and k not in skip), reverse=True)
        return ", ".join(f"{k} {format_bytes(v)}" for v, k in items)


def _training_layout(n: int, d: int, n_labels: int, threads: int, chunk_size: int | None,
                     lanes: int | None, memory: int | None = None, groups: bool = False,
                     cores: int | None = None, nnz: int | None = None,
                     share: str = "auto") -> tuple[int, int, int, bool]:
    """(threads actually used, chunk size, lanes, the threads per team where they share
    16 lanes per team, else 0), as :func:`train_labels` decides them on a machine where
    the process can use ``memory`` bytes (default: this one); ``share``: the parameter
    share_lanes (auto: as the budget decides, yes: teams of the size the budget allows, no:
    none)."""
    from .training.budget import choose_lanes, lane_budget, share_lanes
    from .training.chunks import default_chunk_size

    threads = max(1, int(threads) if threads else usable_cores())
    if chunk_size is None:
        chunk_size = default_chunk_size(n_labels, threads)
    chunk_size = max(1, int(chunk_size))
    used = max(1, min(threads, -(-max(n_labels, 1) // chunk_size)))
    shared = 0
    if lanes is None:
        budget = lane_budget(memory)
        lanes = choose_lanes(n, d, used, budget)
        team = max(1, min(threads, n_labels))    # the trainer weighs the same threads
        shared = share_lanes(n, d, team, lanes, budget, groups, cores, nnz, share) if team > 1 else 0
        if shared:
            used, lanes = team, 16
    return used, chunk_size, int(lanes), int(shared)


#: the statistics' peak over their size (:meth:`TrainingStats.concat` with ``consume``)
_STATS_PEAK = 1.35


def estimate_training_memory(n: int, d: int, nnz: int, n_labels: int, threads: int = 0, *,
                             label_nnz: int | None = None, label_space: int | None = None,
                             features_used: int | None = None, chunk_size: int | None = None,
                             lanes: int | None = None, max_iter: int = 1000, init: str = "aop",
                             loss: str = "squared-hinge",
                             preprocess: bool = False, collect: bool = True, trajectories: bool = True,
                             dense_input: bool = False, tfidf: bool = False,
                             locality: bool = True, memory: int | None = None,
                             weight_density: float = DEFAULT_WEIGHT_DENSITY,
                             expected_iterations: int = DEFAULT_EXPECTED_ITERATIONS,
                             solver: str = "newton", settled_labels: int = 0,
                             share_lanes: str = "auto") -> MemoryEstimate:
    """Peak memory of training ``n_labels`` labels on ``n`` instances x ``d`` features
    with ``nnz`` non-zeros (see the module docstring for what is counted).  ``solver``:
    "newton" (the Newton-CG lanes), exact L1's coordinate descent, "newglmnet" or "cdn"
    (one label per thread at a time over a column copy of X: :mod:`.training.coordinate`),
    or "dual" (one label per thread at a time over X's rows, no copy).

    ``threads`` 0 = all cores; ``label_nnz`` (non-zeros of Y, default ``n``),
    ``label_space`` (columns of Y, default ``n_labels``); ``features_used`` (features that
    occur in X, default ``d``) bounds the weights per label; ``chunk_size``/``lanes``
    default to what the trainer picks; ``collect=False`` for sharded training (weights
    go to disk as they finish); ``preprocess`` when tf-idf or normalisation copies X;
    ``dense_input`` when X is a dense float32 array (``nnz = n * d``), converted to CSR;
    ``tfidf`` when the run learns tf-idf weights (a float32 per feature of the space, kept
    with the model, and the temporaries of counting the documents per feature);
    ``locality`` when the trainer works on a copy of X with features renumbered by
    frequency (its default, :mod:`headstart.training.locality`); ``memory``: the bytes the
    training process may use on the machine in question (default: this machine's), which
    decides whether the threads keep 16 lanes (:func:`headstart.training.budget.lane_budget`).
    ``settled_labels``: labels of the ``n_labels`` known to end at their start (Newton
    only; see :func:`settled_labels` and the module docstring): no weights, a trajectory
    of one record, and no lane of their own.  ``share_lanes``: the parameter of that name
    (auto, yes, no: whether the threads share 16 lanes per team).
    """
    for name, v in (("n", n), ("d", d), ("nnz", nnz), ("n_labels", n_labels)):
        if int(v) < 0:
            raise ValueError(f"{name} must be >= 0, got {v}")
    n, d, nnz, n_labels = int(n), int(d), int(nnz), int(n_labels)
    label_nnz = n if label_nnz is None else int(label_nnz)
    L = n_labels if label_space is None else int(label_space)
    fu = d if features_used is None else min(int(features_used), d)
    # the kernels work on the features that occur (training/locality.py), except from a
    # pretrained start
    dk = d if init == "pretrained" else fu
    # (``memory`` given: another machine's, whose threads are taken to have cores)
    # (the other solvers run no lanes: one label per thread)
    used, chunk_size, lanes, shared = _training_layout(n, dk, n_labels, threads, chunk_size,
                                                       lanes if solver == "newton" else 1, memory,
                                                       groups=_groups(16, init, loss),
                                                       cores=None if memory is None else threads, nnz=nnz,
                                                       share=share_lanes)
    from .training.budget import thread_workspace_bytes

    nv = dk + 1
    cap = min(int(max_iter), 1000) + 1
    per_label_w = weight_density * (fu + 1)
    settled = min(max(int(settled_labels), 0), n_labels) if solver == "newton" else 0
    # labels that get weights and run iterations; of the settled ones a chunk hands one
    # (one per kind of shared problem, at most LANES) to the kernel (training/sharing.py),
    # whose result the others take, and chunks are cut counting the others only
    active = n_labels - settled
    from .training.kernel import LANES

    free = settled > 0 and 2 * settled >= n_labels and chunk_size > 2 * LANES   # (chunks.shared_label_chunks)
    largest = chunk_size
    # the workers that take chunks: the threads, or where they share lanes their teams --
    # the chunks cut for ceil(threads / size) teams, then no more teams than chunks
    # (trainer._train; guided chunks are more than labels / chunk_size: 1,000 labels in
    # chunks of 256 for 16 teams are 16 chunks of 64, not 4)
    workers = cutting = used
    if shared:
        import numpy as np

        from .training.chunks import label_chunks
        from .training.team import team_sizes

        cutting = len(team_sizes(used, size=shared))
        cut = label_chunks(np.arange(max(active if free else n_labels, 1)), chunk_size - LANES if free else chunk_size,
                           cutting)
        workers = len(team_sizes(used, len(cut), shared))
        del cut
    if cutting > 1:
        # guided scheduling (chunks.label_chunks): no chunk above remaining / (2 x workers)
        # of the labels it counts, nor below 4 x LANES
        largest = min(chunk_size, max(4 * LANES, -(-(active if free else n_labels) // (2 * cutting))))
    # the most labels a chunk hands to the kernel: record rows and weights in flight
    solved = min(chunk_size, active + (1 if settled else 0), largest + (LANES if settled else 0))

    parts: dict[str, int] = {}
    x_bytes = n * d * 4 if dense_input else nnz * _NNZ + (n + 1) * _F64
    parts["data"] = x_bytes + label_nnz * _NNZ + (n + 1) * _F64
    copies = (label_nnz * _NNZ + (n + 1) * _F64          # check_labels' copy of Y
              + label_nnz * _NNZ + (L + 1) * _F64        # Y as CSC
              + label_nnz * _F64 + (L + 1) * _F64        # int64 y_indices / y_indptr
              + (n + 1) * _F64                           # int64 row pointer of X for the kernels
              + L * _F64)                                # label counts
    if preprocess:
        copies += nnz * _NNZ + (n + 1) * _F64
    if tfidf:   # prediction/preprocess.fit_idf: the idf vector; the ids of positive values, sorted, counted
        copies += 4 * d + (nnz * 9 + fu * 12 if not dense_input else 8 * d)
    if dense_input:                                      # the CSR the kernels work on
        copies += nnz * _NNZ + (n + 1) * _F64
    if locality:                                         # X with features renumbered by frequency
        copies += nnz * _NNZ + (n + 1) * _F64
    # the renumbering's tables (also when X is renumbered in place): counts, argsort, perm
    # and inv per feature, or per feature that occurs in the compact form
    # (training/locality.py: a feature space beyond 4 x the nonzeros)
    if init != "pretrained" and d > 4 * nnz:     # + np.unique's sorted copy of the ids and its mask
        copies += fu * (_F64 + _F64 + 4 + 4 + 4) + nnz * (4 + 1)
    else:
        copies += d * (_F64 + 4 + 4 + _F64)
    parts["data copies"] = copies
    from .init import REGISTRY as _INITS

    # column sums and sums of squares (erm.Problem) + what the initialiser's prepare()
    # keeps (declared with the strategy)
    parts["init"] = 2 * nv * _F64 + (_INITS[init].memory(n, nv) if init in _INITS else 0)
    chunk_w = (max(min(solved, active), 1) if solver == "newton" else min(chunk_size, max(n_labels, 1))) \
        * per_label_w * _NNZ
    if solver in ("newglmnet", "cdn"):
        # no lanes and no column sums; X by columns (int64 column pointers), and per thread
        # solver.glmnet.Work (5 vectors per weight, 7 per instance, the int8 labels; CDN
        # also X's values times y, 4 bytes per nonzero) and the label's weights as they grow
        lanes = 1
        parts["init"] = 0
        parts["data copies"] += nnz * _NNZ + (d + 1) * _F64
        parts["workspaces"] = used * (5 * nv * _F64 + 7 * n * _F64 + n + (4 * nnz if solver == "cdn" else 0))
        parts["records"] = used * _ITER_RECORDS * chunk_size * (min(cap, 4 * expected_iterations + 1)
                                                                if trajectories else 1) * _F64
        parts["chunk buffers"] = int(used * (3 * chunk_w + 2 * (dk + 1) * _NNZ))
    elif solver == "dual":
        # no lanes, no copy of X (the uint32 view of its indices); per thread
        # solver.dual.Work (w per weight; a, Q_ii and the order per instance -- the logistic dual:
        # a_i, c_i - a_i and the order) and the int8
        # labels, ||x_i||^2 once; with the squared hinge and the logistic loss the Newton method's buffers for
        # the switch after 300 cycles (training.one_problem.new_buffers: ~11 vectors per weight, 6
        # per instance) and X's column sums; records: one per label (training/coordinate.py)
        from .training.coordinate import DUAL_NEWTON_SWITCH

        lanes = 1
        switch = loss in DUAL_NEWTON_SWITCH   # (helper-55: the logistic dual's switch was not counted)
        parts["init"] = nv * _F64 if switch else 0
        parts["workspaces"] = (used * (nv * _F64 + 3 * n * _F64 + n + ((11 * nv + 6 * n) * _F64 if switch else 0))
                               + n * _F64)
        parts["records"] = used * _ITER_RECORDS * chunk_size * _F64
        parts["chunk buffers"] = int(used * (3 * chunk_w + 2 * (dk + 1) * _NNZ))
    else:
        # a team's threads train one chunk at a time: per team one set of records, one
        # chunk's weights
        if shared:
            from .training.budget import lane_budget, team_groups, team_workspace_bytes

            holders = workers
            # (each thread's direction-group buffers where the teams form groups)
            grouped = team_groups(n, dk, used, lane_budget(memory), _groups(16, init, loss), shared)
            parts["workspaces"] = team_workspace_bytes(n, dk, used, grouped, shared)
        else:
            holders = used
            parts["workspaces"] = used * thread_workspace_bytes(n, dk, lanes, _groups(lanes, init, loss))
        # the record arrays are (chunk_size, cap), iteration-major: an iteration's row of
        # chunk_size values becomes resident where the kernel's labels write it, the first
        # ``solved`` positions (fewer than chunk_size when most of a chunk is settled)
        row = chunk_size * _F64 if solved >= chunk_size else min(chunk_size * _F64, solved * _F64 + _PAGE)
        parts["records"] = holders * _ITER_RECORDS * row * min(cap, 4 * expected_iterations + 1)
        parts["chunk buffers"] = int(holders * 3 * chunk_w + used * 2 * dk * _NNZ)
    parts["weights"] = int(active * per_label_w * _NNZ) if collect else 0
    # the label ids (int64), and per row: collected, the model's indptr (int64) and
    # intercept (float32); spooled (model.spool), the label, row length (int64) and intercept
    parts["label arrays"] = n_labels * (_F64 + (_F64 + 4 if collect else 2 * _F64 + 4))
    # trajectories are flat arrays per chunk (no array object per label and quantity)
    from .training.kernel import STAT_FIELDS

    per_label_trajectory = _ITER_RECORDS * (expected_iterations + 1) * _F64 if trajectories and solver != "dual" else 0
    # (a settled label's trajectory: its start, one record)
    settled_trajectory = _ITER_RECORDS * _F64 if trajectories else 0
    # the chunks' parts and their concatenation (TrainingStats.concat), which drops each
    # part once copied and hands the memory back every eighth of the labels: the result
    # and about a quarter more, 1.35x with a JSON file's writing (2M labels, 2 threads:
    # 1.2x measured; 2x before stop 85, when every part lived until the end of the copy)
    parts["statistics"] = int(_STATS_PEAK * (n_labels * (len(STAT_FIELDS) + _STAT_EXTRA) * _F64
                                             + active * per_label_trajectory + settled * settled_trajectory))
    notes = ((f"{used} thread(s) sharing {lanes} lanes per team of up to {shared}" if shared
              else f"{used} thread(s) x {lanes} lane(s)") + f", chunks of {chunk_size} labels",
             f"weights assumed {weight_density:g} x {fu + 1} per label" if collect
             else "weights written as they finish, not kept")
    if settled:
        notes += (f"{settled} label(s) without a positive end at their start (no weights)",)
    return MemoryEstimate({k: int(v) for k, v in parts.items()}, notes,
                          {"threads": used, "lanes": lanes, "chunk_size": chunk_size, "shared_lanes": bool(shared),
                           "team_threads": shared, "teams": workers if shared else 0})


def training_memory_for(X: Any, Y: Any, params: Any, num_labels: int | None = None, *,
                        collect: bool = True, chunk_size: int | None = None,
                        weight_density: float | None = None, own_data: bool = False,
                        trajectories: bool = True, first_label: int = 0) -> MemoryEstimate:
    """:func:`estimate_training_memory` for in-memory data and a :class:`TrainParams`.

    ``weight_density`` defaults to 1 when ``params.prune == 0`` (every feature that
    occurs keeps its weight) and to :data:`DEFAULT_WEIGHT_DENSITY` otherwise.  The labels
    trained are ``num_labels`` (default: all) from ``first_label``; those of them that
    :func:`settled_labels` finds end at their start.
    """
    import numpy as np
    import scipy.sparse as sp

    from .params import method_of

    n, d = int(X.shape[0]), int(X.shape[1])
    if sp.issparse(X):
        nnz = int(X.nnz)
        indices = X.tocsr().indices if X.format != "csr" else X.indices
        if not nnz:
            features_used = 0
        elif d <= 4 * nnz:
            features_used = int(np.count_nonzero(np.bincount(indices, minlength=d)))
        else:  # never allocate per feature of a huge, nearly empty feature space
            features_used = int(np.unique(indices).size)
    else:
        nnz = n * d                       # dense input becomes CSR with every value stored
        features_used = d
    label_nnz = int(Y.nnz) if sp.issparse(Y) else int(np.count_nonzero(Y))
    L = int(Y.shape[1])
    if weight_density is None:
        weight_density = 1.0 if params.prune == 0 else DEFAULT_WEIGHT_DENSITY
    dense_input = not sp.issparse(X)
    hash_buckets = params.hash_buckets
    if hash_buckets:
        # training sees the hashed copy: R stored values per input value at most (fewer
        # when features collide), over hash_buckets * R features
        R = params.hash_functions
        d = hash_buckets * R
        nnz = min(nnz * R, n * d)
        features_used = min(features_used * R, d)
        dense_input = False
    preprocess = bool(params.tfidf or params.normalize or hash_buckets
                      or params.feature_transform != "identity")
    count = L - int(first_label) if num_labels is None else int(num_labels)
    return estimate_training_memory(
        n, d, nnz, count, params.threads, label_nnz=label_nnz,
        label_space=L, features_used=features_used, chunk_size=chunk_size, max_iter=params.max_iter,
        init=params.init, loss=params.loss, preprocess=preprocess, collect=collect, trajectories=trajectories,
        dense_input=dense_input, weight_density=weight_density, tfidf=bool(params.tfidf),
        # the trainer renumbers X in place when X is its own (preprocessed, or handed over)
        locality=not (preprocess or own_data), solver=method_of(params),
        settled_labels=settled_labels(Y, params, int(first_label), count), share_lanes=params.share_lanes)


def settled_labels(Y: Any, params: Any, first_label: int = 0, num_labels: int | None = None) -> int:
    """How many of the labels ``[first_label, first_label + num_labels)`` of ``Y`` are
    known before training to end at their start: the labels without a positive instance,
    where that start is their optimum -- the squared hinge's Newton solve from
    ``--init aop`` (its ``aop_t <= -1``) with an unregularised bias (``bias > 0``), every
    cost 1 (``weighting`` none, no per-label weight files).  aop starts such a label at
    the bias-only vector that scores every instance ``aop_t`` (init/aop.py
    ``no_positive_start``): every margin is beyond 1, the loss and the gradient of the
    regularised weights are zero, so the solve stops at iteration 0 with no weight
    besides the intercept, and one such label per chunk is solved, the others take its
    result (training/sharing.py).  0 otherwise (their solves are counted as any label's).
    """
    import numpy as np
    import scipy.sparse as sp

    from .params import method_of

    if (method_of(params) != "newton" or params.init != "aop" or params.loss != "squared-hinge"
            or not params.aop_t <= -1.0 or not params.bias > 0 or params.regularize_bias
            or params.weighting != "none" or params.weights_pos_file or params.weights_neg_file):
        return 0
    L = int(Y.shape[1])
    lo = max(0, min(int(first_label), L))
    hi = L if num_labels is None else max(lo, min(lo + int(num_labels), L))
    if sp.issparse(Y):
        if Y.format == "csc":
            used = np.diff(Y.indptr)[lo:hi] > 0
        else:
            Yr = Y.tocsr() if Y.format != "csr" else Y
            used = np.zeros(L, dtype=np.bool_)     # a byte per label (not an int64 count)
            used[Yr.indices] = True     # (a stored zero counted as a positive: fewer settled)
            used = used[lo:hi]
    else:
        used = np.any(np.asarray(Y)[:, lo:hi] != 0, axis=0)
    return int((hi - lo) - np.count_nonzero(used))


def _groups(lanes: int, init: str, loss: str) -> bool:
    """Whether the trainer forms direction groups for this initialiser (with its
    default parameters) and loss (see :func:`headstart.training.budget.use_groups`)."""
    from .init import REGISTRY as INITS
    from .objective import losses
    from .params import TrainParams
    from .training.budget import use_groups

    try:
        sparse = bool(INITS[init].make(TrainParams(init=init)).sparse_start)
    except Exception:   # noqa: BLE001 - an initialiser that needs more parameters: count the groups
        sparse = False
    return use_groups(lanes, sparse, losses.get(loss).mines if loss in losses.REGISTRY else False)


def check_memory(need: int, what: str, *, available: int | None = None, breakdown: str = "",
                 option: str = "--no-memory-check", advice: str = "", threads: int = 0) -> None:
    """Raise :class:`ResourceError` when ``need`` bytes exceed ``available`` (default:
    :func:`available_memory` for a run of ``threads`` worker threads; nothing is checked
    when that is unknown)."""
    if available is None:
        available = available_memory(threads)
    if available is None or need <= available:
        return
    text = (f"{what} needs an estimated {format_bytes(need)} of memory but only "
            f"{format_bytes(available)} is available")
    if breakdown:
        text += f" (estimate: {breakdown})"
    if advice:
        text += f"; {advice}"
    text += f"; pass {option} to go on anyway"
    raise ResourceError(text)


# --------------------------------------------------------------------------- prediction
def estimate_prediction_memory(rows: int, n_features: int, n_labels: int, weight_nnz: int, k: int,
                               threads: int = 1, *, row_bytes: float = 0.0, streamed: bool = False,
                               shard_labels: int | None = None, shard_nnz: int | None = None,
                               tfidf: bool = False) -> MemoryEstimate:
    """Peak memory of scoring ``rows`` instances at a time (see :func:`prediction_chunk_rows`),
    beyond the interpreter, numpy/scipy/numba and the compiled kernels (about 200 MB,
    in use before the model is read; not counted, as in the training estimate).

    model: what the model takes at its peak, while it is read and turned into its
    scoring form (:mod:`headstart.prediction.topk`) -- the larger of

    * reading: a shard file's bytes and the arrays parsed from them (CSR: ``nnz`` float32
      values and int32 indices, int64 row pointers, float32 intercepts), twice the shard
      (:func:`headstart.model.shards.read_shard`), and the pieces it is read in; a model
      of several shards is then stacked into one CSR, again twice its weights;
    * converting: that CSR and the scoring form beside it -- per weight at most 8 bytes
      (a sparse column's label and value; a dense column's 4 bytes a label hold at least
      half of the labels), per feature an int64 column start, dense-column map and
      placing cursor, per label a float64 intercept and its place in the intercept order
      -- plus, for a feature space wider than the weights, their renumbered column ids.

    (The conversion used to make a CSC copy of the whole CSR and then split its dense
    columns off it: about 3 times the weights, where the estimate counted 2.)  When
    ``streamed``, only the largest shard (``shard_labels`` labels, ``shard_nnz`` weights)
    is in memory, for every block, while the block is: its peak adds to the block's.
    Otherwise the model is read once, before any block: then ``loading`` is what its
    peak holds beyond the scoring form, the scratch and the block (zero when they take
    more), and ``model`` the scoring form kept while the blocks are scored.  With
    ``tfidf`` the idf vector (a float32 per feature) is kept too.

    scratch: per label and thread a float64 accumulator, an int64 row stamp, an int32
    touched entry and (thresholded) an int32 hit (headstart.prediction.topk).  block:
    ``row_bytes`` per instance for the block of data and its preprocessed copy, the top-k
    labels and scores (and when streamed a second set for merging).

    ``total`` is the estimated peak; ``details``: ``per_row``, ``held`` (the scoring
    form), ``model_peak`` (the model's own peak), ``labels`` and ``nnz`` (of the model or
    its largest shard).
    """
    threads = max(1, int(threads))
    if streamed:
        L = n_labels if shard_labels is None else int(shard_labels)
        nnz = weight_nnz if shard_nnz is None else int(shard_nnz)
    else:
        L, nnz = int(n_labels), int(weight_nnz)
    F = int(n_features)
    # the columns the scoring form is laid over: the features that occur in the weights
    # where the others outnumber the weights (headstart._columns.UsedColumns.if_sparse),
    # so never more than twice the weights
    Fs = min(F, 2 * nnz)
    csr = nnz * _NNZ + (L + 1) * _F64 + L * 4           # as read: CSR + float32 intercepts
    if not streamed:
        csr += L * _F64                                  # the model's label counts (int64), read with it
    held = nnz * _NNZ + (Fs + 1) * _F64 + Fs * _F64 + L * (_F64 + 4) + (F * 4 if tfidf else 0)
    renumbered = nnz * 5 if F > nnz else 0               # int32 column ids + a mark per weight
    pieces = 2 * min(_READ_PIECE, max(4 * nnz, (L + 1) * _F64)) + _READ_PIECE   # + zipfile's, the header's
    peak = max(2 * csr + pieces, csr + held + renumbered + Fs * _F64)
    scratch = threads * L * (_F64 + 8 + 4 + 4)
    per_row = 2 * row_bytes + topk_row_bytes(k, streamed)
    block = rows * per_row
    if streamed:
        parts = {"model": peak, "scratch": scratch, "block": block}
    else:
        parts = {"model": held, "loading": max(0, peak - held - scratch - block), "scratch": scratch,
                 "block": block}
    return MemoryEstimate({k_: int(v) for k_, v in parts.items()},
                          details={"per_row": per_row, "held": int(held), "model_peak": int(peak), "labels": L,
                                   "nnz": nnz})


#: what the top k of one block of instances may take without --max-memory (its labels and
#: scores, their merge and the writer's copies: :func:`topk_row_bytes` per instance).  At
#: -k 5 it allows over a million instances, more than --chunk-rows' default: only a large k
#: shrinks the block (-k 200000 over 500 instances took 2.2 GB in one block).
TOPK_BLOCK_BYTES = 256 << 20


def topk_row_bytes(k: int, streamed: bool = False) -> int:
    """Bytes per instance of a block's top k: the int32 labels and float32 scores (when
    the model is streamed, two more sets while a shard's are merged in) and what the
    predictions writer makes of them (int64 labels, a sorted copy, the masks of its
    checks)."""
    return int(k) * 8 * (3 if streamed else 1) + int(k) * 24


def topk_block_rows(k: int, limit: int, streamed: bool = False, budget: int | None = None) -> int:
    """Instances per block of a top-k prediction: at most ``limit`` (--chunk-rows), fewer
    when their top ``k`` would take more than ``budget`` bytes (default
    :data:`TOPK_BLOCK_BYTES`); at least one."""
    budget = TOPK_BLOCK_BYTES if budget is None else budget
    return max(1, min(int(limit), int(budget) // max(1, topk_row_bytes(k, streamed))))


def prediction_chunk_rows(max_memory: int, n_features: int, n_labels: int, weight_nnz: int, k: int,
                          threads: int = 1, *, row_bytes: float = 0.0, streamed: bool = False,
                          shard_labels: int | None = None, shard_nnz: int | None = None,
                          limit: int | None = None, tfidf: bool = False) -> int:
    """Largest number of instances to score at a time within ``max_memory`` bytes
    (at most ``limit``); :class:`ResourceError` when not even one fits, or when reading
    the model (streamed: its largest shard) alone exceeds the bound."""
    est = estimate_prediction_memory(1, n_features, n_labels, weight_nnz, k, threads, row_bytes=row_bytes,
                                     streamed=streamed, shard_labels=shard_labels, shard_nnz=shard_nnz,
                                     tfidf=tfidf)
    fixed = est.without("block", "loading")
    per_row = max(1.0, float(est.details["per_row"]))
    rows = int((int(max_memory) - fixed) // per_row)
    peak = est.details["model_peak"]
    if peak > max_memory:
        if streamed:
            raise ResourceError(
                f"--max-memory {format_bytes(max_memory)} is too small: reading the model's largest shard "
                f"({est.details['labels']} labels, {est.details['nnz']} weights) and turning it into its scoring "
                "form alone needs "
                f"{format_bytes(peak)}, and shards are the smallest part of a model that is read; raise "
                "--max-memory, or write the model in smaller shards: train it with --shard-size N (an existing "
                "model: headstart.load(MODEL).save(NEW_DIR, shard_size=N))")
        raise ResourceError(
            f"--max-memory {format_bytes(max_memory)} is too small: reading the model and turning it into its "
            f"scoring form alone needs {format_bytes(peak)}; raise --max-memory, or lower --model-memory so that "
            "the model is streamed shard by shard")
    if rows < 1:
        raise ResourceError(
            f"--max-memory {format_bytes(max_memory)} is too small: the model and scratch space alone need "
            f"{format_bytes(fixed)} ({est.describe(skip=('block', 'loading'))}) and every instance about "
            f"{format_bytes(per_row)}; raise --max-memory or use fewer --threads"
            + ("" if streamed else ", or lower --model-memory so that the model is streamed shard by shard"))
    return rows if limit is None else max(1, min(rows, int(limit)))


_HEADER = re.compile(rb"\s*(\d+)\s+\d+\s+\d+\s*$")


def text_bytes_per_row(path: str | os.PathLike, rows: int | None = None) -> float:
    """Average bytes of text per instance of a data file (uncompressed size / rows).

    The size of a gzip file is read from its trailer (modulo 4 GiB; a wrapped value is
    replaced by 8 x the compressed size).  ``rows`` defaults to the XMC header's count.
    0.0 when unknown.
    """
    from .errors import DataFormatError
    from .io._common import compression, open_stream

    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            kind = compression(f.read(16), path)
            if kind == "gzip" and size >= 18:
                f.seek(-4, os.SEEK_END)
                isize = int.from_bytes(f.read(4), "little")
                size = isize if isize >= size else 8 * size
            elif kind is not None:
                size = 8 * size     # bz2, xz: no size recorded; text compresses about that much
        if rows is None:
            with open_stream(path) as f:
                m = _HEADER.match(f.readline(1 << 16))
            rows = int(m.group(1)) if m else None
    except (OSError, EOFError, ValueError, DataFormatError):
        return 0.0
    if not rows:
        return 0.0
    return size / rows
