"""Sharded, resumable training into a model directory (one machine).

Training writes every finished run of labels as its own shard (atomically, through
:class:`~headstart.model.writer.ModelWriter`), so no finished work is ever lost:

* ``train_sharded(X, Y, params, "model")`` trains the requested label range and writes
  each chunk of labels as a shard the moment it is finished;
* ``train_sharded(..., resume=True)`` reopens an existing model directory, checks that
  parameters and data agree with it, and trains only the labels that have no finished
  shard.  Killing the process at any moment (SIGKILL included) and resuming gives the
  same model as an uninterrupted run: every label is computed by the same deterministic
  code whatever chunk, thread, process or machine computes it, and a shard is either
  listed in the manifest (complete, checksummed) or ignored and deleted on resume.

Per-shard training statistics are kept next to the shards, in
``stats/labels-AAAAAAA-BBBBBBB.npz`` (same name as the shard; numeric arrays only).
A statistics file is written *before* its shard is registered, so every listed shard
has its statistics; files whose shard never got listed are deleted on resume.
:func:`read_stats` reassembles the statistics of a label range, including the labels
trained by earlier (interrupted) runs.

The Dask backend (:mod:`headstart.distributed.dask_backend`) shares the preparation,
the directory handling and the shard registration of this module; only *where* a
label range is trained differs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import scipy.sparse as sp

from ..errors import ModelFormatError, ParameterError
from ..estimator import PreparedData, prepare_data
from ..model.extras import read_extras
from ..model.lock import writes_model_dir
from ..model.manifest import DATA_DIGEST_KEY, MANIFEST, read_manifest
from ..model.ranges import contiguous_runs, finished_ranges_of
from ..model.shards import read_shard
from ..model.writer import TRAINING_MANIFEST_LAG, ModelWriter, prepare_target
from ..params import TrainParams
from ..training.kernel import LANES
from ..training.stats import (STATS_DIR, TrainingStats, clean_stats, load_stats_file, read_stats,  # noqa: F401
                              stats_file_name, write_stats_file)   # (re-exported: the model directory's files)

log = logging.getLogger(__name__)

Range = tuple[int, int]

#: default number of labels per shard is chosen like the trainer's chunks, within these
#: bounds: at least 4 labels per lane (as the trainer's chunks, so the lanes stay busy)
MIN_DEFAULT_SHARD, MAX_DEFAULT_SHARD = 4 * LANES, 256


# --------------------------------------------------------------------------- data preparation
# --------------------------------------------------------------------------- model directory
def _is_model_dir(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def _check_same_data(path: Path, writer: ModelWriter, data: PreparedData) -> None:
    """Resume only onto a model trained on the same data (beyond what ModelWriter checks)."""
    m = writer.manifest
    if m["n_train"] == 0:
        raise ModelFormatError(f"{path}: cannot resume: the model has no training record (imported, e.g. by "
                               "import-dismec, whose files hold no training options or data): train the missing "
                               "labels into a model of their own and predict with each, or import a complete model")
    if m["n_train"] != data.n_train:
        raise ModelFormatError(f"{path}: cannot resume: the model was trained on {m['n_train']} instances "
                               f"but the data has {data.n_train}")
    if m["preprocessing"] != data.preprocessing.to_manifest():
        raise ModelFormatError(f"{path}: cannot resume: preprocessing {m['preprocessing']} in the model but "
                               f"{data.preprocessing.to_manifest()} now")
    pre, counts = read_extras(path, m)
    if pre.idf is not None and not np.array_equal(pre.idf, data.preprocessing.idf):
        raise ModelFormatError(f"{path}: cannot resume: the tf-idf weights of the model differ from those "
                               "of the data (is it the same training file?)")
    if counts is not None and not np.array_equal(counts, data.label_counts):
        raise ModelFormatError(f"{path}: cannot resume: the label counts of the model differ from those "
                               "of the data (is it the same training file?)")
    if DATA_DIGEST_KEY in m and m[DATA_DIGEST_KEY] != data.digest():
        raise ModelFormatError(f"{path}: cannot resume: the model was trained on other data (same shapes and "
                               "label counts, other values: its sha256 differs from this data's)")


def open_model_dir(path: str | os.PathLike, params: TrainParams, data: PreparedData, *,
                   resume: bool = False, overwrite: bool | str = False,
                   extensions: dict[str, Any] | None = None) -> ModelWriter:
    """A :class:`ModelWriter` for ``path``: a new empty model, or the existing one.

    ``resume``: reopen an existing model (after checking parameters and data); a missing
    or empty directory starts a new model.  Otherwise an existing model is replaced when
    ``overwrite`` is True, or is ``"complete"`` and the model has no missing label;
    else :class:`ModelFormatError` (an unfinished model is never thrown away silently).
    """
    path = Path(os.path.abspath(path))
    if _is_model_dir(path) and resume:
        if "tree" in read_manifest(path):
            raise ModelFormatError(f"{path}: cannot resume: this is a label-tree model (its rows are the tree "
                                   "nodes' outputs, not labels), trained whole by 'headstart tree'")
        writer = ModelWriter.open(path, params, n_features=data.n_features, label_space=data.label_space)
        # the settings first: a dense part's other scale or normalisation changes the data's
        # digest too, which named "other data" instead of the setting (helper-59)
        _check_same_extensions(path, writer, extensions)
        _check_same_data(path, writer, data)
        clean_stats(path, writer.manifest)
        writer.widen_range(data.first_label, data.stop)
    else:
        if _is_model_dir(path):
            if overwrite == "complete":
                prepare_target(path, overwrite="complete")
            elif not overwrite:
                raise ModelFormatError(f"{path}: a model already exists there: continue it with --resume "
                                       "(resume=True), or replace it (overwrite=True)")
        writer = ModelWriter.create(path, data.n_features, data.label_space, params, data.preprocessing,
                                    data.label_counts, data.n_train, overwrite=True, extensions=extensions,
                                    data_sha256=data.digest(), label_range=(data.first_label, data.stop))
    return writer


@contextlib.contextmanager
def undone_if_nothing_trained(path: str | os.PathLike) -> Iterator[None]:
    """Around the creation and training of a sharded model at ``path``: when the block
    fails before any shard is listed and there was no model at ``path`` before, the
    empty model it created is removed again (an empty directory given as the target is
    left empty) -- an input refused late (a cost file, a pretrained model, an unreachable
    scheduler: helper-46) must not leave a model of 0 labels that a corrected run
    without --resume then refuses to replace."""
    path = Path(os.path.abspath(path))
    fresh = not _is_model_dir(path)
    was_dir = path.is_dir()
    try:
        yield
    except BaseException:
        if fresh and _is_model_dir(path):
            with contextlib.suppress(OSError, ValueError):   # (ModelFormatError is a ValueError)
                if not read_manifest(path)["shards"]:
                    shutil.rmtree(path)
                    if was_dir:
                        path.mkdir()
        raise


def _check_same_extensions(path: Path, writer: ModelWriter, extensions: dict[str, Any] | None) -> None:
    """A model variant (dense + sparse, shortlisted: the manifest's optional fields)
    resumes only as the same variant with the same settings."""
    from ..model.format import OPTIONAL_MANIFEST_KEYS
    from ..model.manifest import settings_of

    m = writer.manifest
    ext = json.loads(json.dumps(extensions or {}))
    for key in OPTIONAL_MANIFEST_KEYS:
        if settings_of(m, key) != settings_of(ext, key) and not _named_before_the_cut(m.get(key), ext.get(key), key):
            raise ModelFormatError(f"{path}: cannot resume: {key} settings are {m.get(key)!r} in the model but "
                                   f"{ext.get(key)!r} now")


def _named_before_the_cut(old: Any, new: Any, key: str) -> bool:
    """A shortlisted model trained with remove_no_label_data before 2026-12-01 (5b8abd6)
    named its shortlist after the cut of the rows without labels; a run now names the
    shortlist as given and also as cut (``cut_nnz``, ``cut_sha256``): the same shortlist
    (helper-60: such a model could no longer be resumed)."""
    return (key == "shortlist" and isinstance(old, dict) and isinstance(new, dict) and "cut_sha256" in new
            and "cut_sha256" not in old
            and (old.get("nnz"), old.get("sha256")) == (new.get("cut_nnz"), new.get("cut_sha256")))


# --------------------------------------------------------------------------- planning
def default_shard_size(num_labels: int, threads: int, cap: int = MAX_DEFAULT_SHARD) -> int:
    """Like the trainer's chunk size: enough labels to keep the lanes busy, few enough
    to balance the threads (and to lose little when interrupted), at most ``cap``."""
    return int(min(cap, max(MIN_DEFAULT_SHARD, num_labels // max(4 * threads, 1))))


#: a label whose solve is shared (:func:`shared_labels`; for shortlisted training a label
#: without positives and shortlisted rows) counts this share of another when default
#: shards are sized by work (:func:`shard_size_by_work`): its solve is copied from
#: another's (training/sharing.py) or takes microseconds, where the others take from
#: ~0.1 ms (shortlisted) to seconds (a head label of full one-vs-all)
ROWLESS_SHARE = 1 / 256

#: the most labels in a default shard of a label space of mostly row-less labels
MAX_ROWLESS_SHARD = 65536


def shared_labels(counts: np.ndarray, n_train: int, params: TrainParams, first: int = 0,
                  count: int | None = None) -> np.ndarray:
    """Which labels of ``[first, first + count)`` (``counts``: the positives of every
    label of the label space; by default the range is all of them) pose the problem an
    earlier label without positives (or without negatives) poses: the trainer solves it
    once per chunk and copies it (``SameProblems``), so they cost next to nothing --
    unless the start depends on the label (not ``label_free``: then only labels of
    equal start rows share, a pretrained model's, read here as the trainer compares
    them, ``Initializer.planned_rows``; a start whose rows cannot be read counts every
    label solved), or their costs differ (a cost file: each label of costs of its own
    is a problem of its own)."""
    from ..init import make_initializer

    counts = np.asarray(counts)
    stop = counts.size if count is None else int(first) + int(count)
    part = counts[first:stop]
    shared = (part <= 0) | (part >= n_train)
    init = make_initializer(params)
    starts = None
    if not init.label_free:
        # (only where two labels could share: a start's rows are read for nothing else)
        starts = init.planned_rows(first, stop) if np.count_nonzero(shared) > 1 else None
        if starts is None:
            return np.zeros(stop - int(first), dtype=bool)
    if (params.weighting == "file" or starts is not None) and shared.any():
        # the trainer's own rule, SameProblems: per-label costs (a cost file that gave
        # unused labels costs of their own made shards of 65,536 labels each solved
        # itself, s81 review) and start rows (a pretrained start counted every label a
        # solve: bibtex's 48 labels spread over 20,000, 20 Dask tasks where 2 do)
        from ..objective.weighting import label_costs
        from ..training.sharing import SameProblems

        if params.weighting == "file":
            cost_pos, cost_neg = label_costs(params, counts, n_train)
        else:    # the other schemes' costs are a function of the count: equal for these labels
            cost_pos = cost_neg = np.zeros(0)
        y_indptr = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=y_indptr[1:])
        copy_of = SameProblems(y_indptr, n_train, cost_pos, cost_neg, starts).copies(
            np.arange(first, stop, dtype=np.int64))
        shared = np.zeros(stop - int(first), dtype=bool) if copy_of is None else copy_of >= 0
    return shared


def shard_size_by_work(num_labels: int, busy: int, threads: int, cap: int = MAX_DEFAULT_SHARD) -> int:
    """Labels per shard by default where ``busy`` of the ``num_labels`` labels take a
    solve of their own: a shard holds about the work of :func:`default_shard_size` such
    labels, one whose solve is shared counting :data:`ROWLESS_SHARE` of one, at most
    :data:`MAX_ROWLESS_SHARD` labels (and never fewer than by count).  Cut by label
    count alone, a label space of mostly unused ids made a shard -- a weights file, a
    statistics file and a manifest entry, ~11 ms -- of every 256 labels of microseconds
    each: ``train --resume`` of 2M
    declared labels, 300 used, 1,000 rows wrote 7,813 shards (24-55 s wall against 8.4 s
    without --resume, 2026-12-06; now 162 shards, 5.3 s on a loaded machine: the
    trainer's chunks stay those of the count rule, :func:`_train_sharded`); shortlisted
    training the same with 2,048 (997 shards against 63)."""
    by_count = default_shard_size(num_labels, threads, cap)
    work = busy + (num_labels - busy) * ROWLESS_SHARE
    per_shard = default_shard_size(max(1, int(np.ceil(work))), threads, cap)
    return int(min(max(by_count, int(per_shard * num_labels / max(work, 1.0))), max(by_count, MAX_ROWLESS_SHARD)))


def plan_shards(missing: Iterable[Range], shard_size: int, origin: int = 0) -> list[Range]:
    """Cut the missing ranges into shards on the grid ``origin + k * shard_size``.

    Keeping the grid fixed makes the shards of a resumed run line up with those of the
    interrupted one (only the cells that were in progress are retrained).
    """
    if not isinstance(shard_size, (int, np.integer)) or isinstance(shard_size, bool) or shard_size < 1:
        raise ParameterError(f"parameter shard_size must be an integer >= 1, got {shard_size!r}")
    out = []
    for a, b in missing:
        s = a
        while s < b:
            cell_end = origin + ((s - origin) // shard_size + 1) * shard_size
            e = min(b, cell_end)
            out.append((int(s), int(e)))
            s = e
    return out


# --------------------------------------------------------------------------- registration
ShardCallback = Callable[[dict[str, Any]], None]


class ShardRecorder:
    """Saves finished label runs: statistics file first, then the shard (which lists it).

    Thread safe (the writer is); used as the trainer's sink locally and by the Dask
    client for the results that come back from the workers.
    """

    def __init__(self, writer: ModelWriter, *, keep_stats: bool = True,
                 progress: Callable[[int], None] | None = None, on_shard: ShardCallback | None = None,
                 grid: tuple[int, int] | None = None, keep_parts: bool = True):
        self.writer = writer
        self.keep_stats = keep_stats
        self.progress = progress
        self.on_shard = on_shard
        # (origin, size): shards never cross origin + k * size, however the trainer cut
        # its chunks (helper-62: chunks of labels without positives grow to 64 x the
        # shard size, and a resume's chunks start off the grid)
        self.grid = grid
        # the statistics of every shard, for the run's report (finish_result); not kept
        # where the caller reports from the trainer's own (2M labels: 230 MB twice)
        self.keep_parts = keep_parts
        self.trained: list[Range] = []
        self.stats_parts: list[TrainingStats] = []

    def _runs(self, labels: np.ndarray) -> list[Range]:
        runs = contiguous_runs(labels)
        if self.grid is None or labels.size == 0:
            return runs
        origin, size = self.grid
        cut = np.flatnonzero(np.diff((labels - origin) // size)) + 1     # a new grid cell starts
        out = []
        for i, j in runs:
            inner = cut[(cut > i) & (cut < j)].tolist()
            out.extend(zip([i, *inner], [*inner, j]))
        return out

    def record(self, labels: np.ndarray, weights: sp.csr_matrix, intercept: np.ndarray,
               stats: TrainingStats) -> None:
        """Register a finished set of labels (ascending; split into shards at gaps and at
        the grid's cells)."""
        labels = np.asarray(labels, dtype=np.int64)
        weights = sp.csr_matrix(weights)
        intercept = np.asarray(intercept)
        for i, j in self._runs(labels):
            first = int(labels[i])
            st = stats.take(np.arange(i, j)) if (i, j) != (0, labels.size) else stats
            if self.keep_stats:
                write_stats_file(self.writer.path, st)
            entry = self.writer.add_shard(first, weights[i:j], intercept[i:j])
            self.trained.append((first, first + (j - i)))
            if self.keep_parts:
                self.stats_parts.append(st)
            if self.on_shard is not None:
                self.on_shard(entry)
        if self.progress is not None:
            self.progress(int(labels.size))

    def sink(self, chunk) -> None:
        """The trainer's ``sink``: a :class:`~headstart.training.chunks.ChunkResult`."""
        self.record(chunk.labels, chunk.weights, chunk.intercept, chunk.stats)


# --------------------------------------------------------------------------- results
@dataclass
class ShardedResult:
    """What a sharded training run did."""

    path: Path
    first_label: int
    num_labels: int
    trained: list[Range]                    # label ranges trained (and written) by this run
    already_finished: int                   # labels of the range that had a shard before the run
    missing: list[Range]                    # labels of the range still without a shard (normally none)
    stats: TrainingStats | None             # the whole range, earlier runs included (see stats_without)
    stats_without: list[Range] = field(default_factory=list)
    wall_seconds: float = 0.0
    backend: str = "local"
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def trained_labels(self) -> int:
        return int(sum(b - a for a, b in self.trained))

    @property
    def complete(self) -> bool:
        return not self.missing

    def run_summary(self) -> dict:
        """``stats.summary()`` of the labels this run trained: a resumed run's ``stats``
        hold the earlier runs' labels too, whose iterations this run did not do (helper-52)."""
        st = self.stats
        if not self.already_finished or st is None or not len(st):
            return st.summary() if st is not None else {}
        starts = np.array(sorted(a for a, _ in self.trained), dtype=np.int64)
        ends = np.array(sorted(b for _, b in self.trained), dtype=np.int64)  # ranges do not overlap
        lab = st.columns["label"]
        at = np.searchsorted(starts, lab, side="right") - 1
        mine = (at >= 0) & (lab < ends[np.maximum(at, 0)]) if starts.size else np.zeros(lab.size, bool)
        return st.without_trajectories().take(np.flatnonzero(mine)).summary()

    @property
    def nnz(self) -> int:
        m = read_manifest(self.path)
        lo, hi = self.first_label, self.first_label + self.num_labels
        total = 0
        for s in m["shards"]:
            a, b = s["first_label"], s["first_label"] + s["num_labels"]
            if b <= lo or a >= hi:
                continue
            if lo <= a and b <= hi:
                total += int(s["nnz"])
            else:   # a shard reaching beyond the range: its rows inside it (helper-52)
                _, w, _ = read_shard(Path(self.path), s, int(m["n_features"]))
                total += int(w.indptr[min(b, hi) - a] - w.indptr[max(a, lo) - a])
        return total


def finish_result(writer: ModelWriter, data: PreparedData, recorder: ShardRecorder, before: int,
                  t_start: float, backend: str, info: dict[str, Any] | None = None,
                  run_stats: TrainingStats | None = None) -> ShardedResult:
    """The run's result; ``run_stats``: the statistics of the labels this run trained (the
    trainer's), else those the recorder kept."""
    from ..training.chunks import note_zero_starts, report_problems

    missing = writer.missing_ranges(data.first_label, data.num_labels)
    st = run_stats
    if st is None and recorder.stats_parts:
        st = TrainingStats.concat(recorder.stats_parts, consume=True)    # (empties the list)
    if st is not None:
        report_problems(st)
        if backend == "dask":    # said in the workers' logs, per task; here once, for the run (helper-56)
            note_zero_starts(st, "start")
    if st is not None and before == 0 and recorder.keep_stats:
        # every finished label of the range is this run's, and its statistics files were
        # written from these: not read back (2M labels: 580 MB more at the peak, helper-62)
        stats, without = st, []
    else:
        del st
        stats, without = read_stats(writer.path, data.first_label, data.num_labels)
    wall = time.perf_counter() - t_start
    stats.meta.update({"wall_seconds": wall, "backend": backend})
    return ShardedResult(writer.path, data.first_label, data.num_labels, sorted(recorder.trained), before,
                         missing, stats, without, wall, backend, dict(info or {}))


def count_finished(writer: ModelWriter, first: int, count: int) -> int:
    return count - int(sum(b - a for a, b in writer.missing_ranges(first, count)))


# --------------------------------------------------------------------------- local training
@writes_model_dir
def train_sharded(X: Any, Y: Any, params: TrainParams, model_dir: str | os.PathLike, *,
                  first_label: int = 0, num_labels: int | None = None, shard_size: int | None = None,
                  resume: bool = False, overwrite: bool | str = False,
                  progress: Callable[[int], None] | None = None, on_shard: ShardCallback | None = None,
                  keep_stats: bool = True, data: PreparedData | None = None,
                  own_data: bool = False, extensions: dict[str, Any] | None = None,
                  train_fn: Callable | None = None) -> ShardedResult:
    """Train labels ``[first_label, first_label + num_labels)`` into ``model_dir``, shard by shard.

    ``own_data``: X is handed over (not read until this returns): training renumbers it in
    place instead of copying it (restored afterwards).

    With this process's threads (``params.threads``); each finished chunk of
    ``shard_size`` labels is written at once.  See the module docstring for ``resume``
    and :func:`open_model_dir` for ``overwrite``.  ``progress(n)`` is called with the
    number of labels finished (from worker threads); ``on_shard(entry)`` after each shard
    is listed.  ``data`` (from :func:`prepare_data`) skips the preparation of X, Y.
    ``extensions`` (manifest fields of a model variant) and ``train_fn`` (in place of
    :func:`~headstart.training.trainer.train_labels`, same signature) let another training
    mode (headstart.shortlist) use the same shards, resume and statistics.
    """
    t_start = time.perf_counter()
    if data is None:
        data = prepare_data(X, Y, params, first_label, num_labels)
    with undone_if_nothing_trained(model_dir):
        return _train_sharded(data, params, model_dir, resume, overwrite, extensions, shard_size, progress,
                              on_shard, keep_stats, train_fn, own_data, t_start)


def _train_sharded(data, params, model_dir, resume, overwrite, extensions, shard_size, progress, on_shard,
                   keep_stats, train_fn, own_data, t_start) -> "ShardedResult":
    from ..training.trainer import train_labels

    writer = open_model_dir(model_dir, params, data, resume=resume, overwrite=overwrite, extensions=extensions)
    before = count_finished(writer, data.first_label, data.num_labels)
    if progress is not None and before:
        progress(before)  # the labels of the range finished by earlier runs
    missing = writer.missing_ranges(data.first_label, data.num_labels)
    threads = params.effective_threads()
    if shard_size is None:
        a, z = int(data.first_label), int(data.first_label + data.num_labels)
        shared = shared_labels(data.label_counts, data.n_train, params, a, z - a)
        size = shard_size_by_work(data.num_labels, int(data.num_labels - np.count_nonzero(shared)), threads)
        # the trainer's chunks stay those of the count rule: each solves at most that many
        # labels itself (the shared ones ride along, chunks.shared_label_chunks), so where
        # the used labels lie together (frequency-ordered ids, unused ones at the end) a
        # shard of the wider grid is still cut where a chunk ends (s81 review: 100K used
        # and 1M unused labels made chunks of ~2,700 solves, the work an interruption loses)
        chunk = default_shard_size(data.num_labels, threads)
    else:
        size = chunk = shard_size
    plan = plan_shards(missing, size, origin=data.first_label)
    # the run is reported from the trainer's statistics (the recorder keeps no second copy)
    st = None
    recorder = ShardRecorder(writer, keep_stats=keep_stats, progress=progress, on_shard=on_shard,
                             grid=(data.first_label, size), keep_parts=False)
    if plan:
        log.info("%s: training %d labels in %d shard(s) of <= %d labels (%d already finished)",
                 writer.path, sum(b - a for a, b in plan), len(plan), size, before)
        labels = np.concatenate([np.arange(a, b) for a, b in plan])
        # chunks of the trainer are cut from the concatenated labels; a chunk that spans
        # a gap between missing ranges is split into contiguous shards by the recorder
        # the manifest is rewritten at most every TRAINING_MANIFEST_LAG write-durations
        # (its cost grows with the shards listed: model/writer.py); leaving the block
        # writes it, however the training ends
        writer.manifest_lag = TRAINING_MANIFEST_LAG
        with writer:
            if train_fn is not None:
                st = train_fn(data.X, data.Y, params, labels, chunk_size=chunk, sink=recorder.sink,
                              collect=False)[2]
            else:
                st = train_labels(data.X, data.Y, params, labels, chunk_size=chunk, sink=recorder.sink,
                                  collect=False, inplace=data.owned or own_data)[2]
    return finish_result(writer, data, recorder, before, t_start, "local",
                         {"shard_size": size, "threads": threads}, run_stats=st)


__all__ = ["PreparedData", "prepare_data", "open_model_dir", "plan_shards", "default_shard_size",
           "train_sharded", "ShardedResult", "ShardRecorder", "read_stats", "write_stats_file",
           "load_stats_file", "clean_stats", "stats_file_name", "finished_ranges_of"]
