"""Writing models: :func:`save_model` (all at once) and :class:`ModelWriter` (shard by shard).

Whole models (:func:`save_model`, :meth:`ModelWriter.create`) are built in a temporary
sibling directory and renamed into place (:func:`headstart.io.atomic.atomic_directory`).
Only a missing or empty directory or an existing headstart model holding nothing but
headstart's own files (:data:`MODEL_ENTRIES`) may be replaced -- replacing deletes the
old directory whole; anything else is refused before a byte is written.

:meth:`ModelWriter.add_shard` writes the shard file first and the manifest last, so a
crash in between leaves an unlisted file, which readers ignore and
:meth:`ModelWriter.open` deletes: the manifest's ``shards`` list decides which labels
are finished.

The manifest lists every shard, so rewriting it after each of N shards costs O(N^2)
(measured 2026-11-30: 1M labels of 200 rows in 3,906 shards of 256, ``train``: 96 s
with a rewrite per shard, 39 s with the lag below; ``shortlist-train``, 489 shards:
5.2 of 14 s were manifest writes).  So the trainers set
``manifest_lag`` (:data:`TRAINING_MANIFEST_LAG`): :meth:`add_shard` then rewrites the
manifest only when at least ``manifest_lag`` times its last write's duration has passed
since that write, and otherwise leaves the shard listed in memory (queries see it)
until the next write or :meth:`ModelWriter.flush`, which the trainers call when a run
ends, fails or is interrupted.  Manifest writes then take at most ~1 / (1 + lag) of a
run's time.  What a kill can cost is the shards of that lag (their files are unlisted:
deleted on resume and trained again), never a listed shard.  The default, 0, lists
every shard on disk before :meth:`add_shard` returns.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import ModelFormatError
from ..io.atomic import TEMP_NAME_RE, atomic_directory, replace_refusal
from ..params import TrainParams
from .archive import read_verified
from .extras import read_extras, write_extras
from .lock import model_dir_lock
from .manifest import (EXTRA_FILES, MANIFEST, RANGE_KEY, SHARD_DIR, SHARD_NAME_RE, STATS_DIR, base_manifest,
                       costs_digest, is_headstart_model, is_int, model_params_difference, read_manifest,
                       shard_file_name, write_manifest)
from .model import OvAModel, Preprocessing
from .ranges import Range, finished_ranges_of, fmt_range, missing_ranges_of, unfinished_ranges_of, uncovered
from .shards import canonical_intercept, canonical_weights, row_view, write_shard_file

log = logging.getLogger(__name__)

#: every entry headstart writes at the top of a model directory: a directory holding
#: anything else is not replaced (:func:`refuse_foreign`)
MODEL_ENTRIES = (MANIFEST, SHARD_DIR, STATS_DIR, *EXTRA_FILES)


def refuse_foreign(path: Path) -> None:
    """ModelFormatError unless the existing directory ``path`` may be replaced by a new
    model: it is empty, or a headstart model holding only :data:`MODEL_ENTRIES` (and a
    killed write's temporaries) -- replacing deletes it whole, a user's files with it.
    Shared by the writers and the command line's check before training."""
    why = replace_refusal(path, "a headstart model", MANIFEST, MODEL_ENTRIES)
    if why and not (path / MANIFEST).exists() and (path / "ensemble.json").is_file():
        # (tree/ensemble.py's marker, named here: the model layer does not import the trees)
        why = (f"{path}: holds an ensemble of label trees (headstart tree --trees), which a single model does not "
               "replace: remove it, or write to another directory")
    elif why is None and (path / MANIFEST).exists() and not is_headstart_model(path):
        why = f"{path}: exists, is not empty and is not a headstart model (its {MANIFEST} is another's); " \
              "refusing to replace it"
    if why:
        raise ModelFormatError(why)


def prepare_target(path: Path, overwrite: bool | str = True, unknown_range_unfinished: bool = True) -> None:
    """Refuse a target that exists and is not replaceable: not a headstart model or one
    holding files headstart did not write (:func:`refuse_foreign`), or
    (``overwrite`` False) any model, or (``overwrite`` "complete") an unfinished one --
    labels a time budget left untrained, which ``--resume`` would train.  A model without
    a recorded label range (earlier versions) counts as unfinished when it misses labels
    if ``unknown_range_unfinished`` (sharded training's rule before), else as finished
    (the unsharded path replaced any model before)."""
    if not path.exists() and not path.is_symlink():
        if not path.parent.is_dir():
            why = "is not a directory" if path.parent.exists() else "does not exist"
            raise ModelFormatError(f"{path}: parent directory {path.parent} {why}")
        return
    if not path.is_dir():
        raise ModelFormatError(f"{path}: exists and is not a directory; refusing to replace it")
    if not any(path.iterdir()):
        return
    refuse_foreign(path)
    if not overwrite:
        raise ModelFormatError(f"{path}: a model already exists there (open it to resume, or remove it)")
    if overwrite == "complete":
        refuse_unfinished(path, whole_space=unknown_range_unfinished)


def refuse_unfinished(path: Path, whole_space: bool, resume: str = "--resume (resume=True)") -> None:
    """ModelFormatError if the model at ``path`` is unfinished (:func:`.ranges.unfinished_ranges_of`
    with ``whole_space``), naming its first gap and how to continue it (``resume``)."""
    missing = unfinished_ranges_of(read_manifest(path), whole_space=whole_space)
    if missing:
        a, b = missing[0]
        raise ModelFormatError(f"{path}: an unfinished model is there (missing {len(missing)} label range(s), first "
                               f"[{a}, {b})): continue it with {resume}, or remove it")


@contextlib.contextmanager
def building(path: Path) -> Iterator[Path]:
    """A new model directory with its ``shards/`` folder, renamed to ``path`` on success."""
    with atomic_directory(path) as tmp:
        (tmp / SHARD_DIR).mkdir()
        yield tmp


@contextlib.contextmanager
def new_model_dir(path: Path, **target: Any) -> Iterator[Path]:
    """:func:`building` a model for ``path`` after :func:`prepare_target` (``target``: its
    options) allowed replacing what is there, holding the directory's writer lock from
    the check to the rename: a sharded run resuming into ``path`` meanwhile is refused,
    not overwritten, and this one is refused while another writes there."""
    with model_dir_lock(path):
        prepare_target(path, **target)
        with building(path) as tmp:
            yield tmp


def save_model(model: OvAModel, path: str | os.PathLike, *, shard_size: int | None = None) -> None:
    """Write ``model`` to the directory ``path`` atomically.

    The labels are split into shards of at most ``shard_size`` labels (default: one
    shard).  An existing finished headstart model at ``path`` is replaced; an unfinished
    one (labels a time budget or a kill left untrained, which resuming would train), one
    holding files headstart did not write, any other non-empty directory or a file is
    refused with :class:`ModelFormatError`.
    """
    path = Path(os.path.abspath(path))
    if shard_size is not None and (not is_int(shard_size) or shard_size < 1):
        raise ModelFormatError(f"shard_size must be an integer >= 1, got {shard_size!r}")
    what = f"model for {path}"
    w = canonical_weights(model.weights, int(model.n_features), what)
    b = canonical_intercept(model.intercept, w.shape[0], what)
    first, label_space = int(model.first_label), int(model.label_space)
    if first < 0 or first + w.shape[0] > label_space:
        raise ModelFormatError(f"{what}: {fmt_range((first, first + w.shape[0]))} outside the label space "
                               f"[0, {label_space})")
    # labels listed in ``missing_ranges`` (a model loaded with allow_gaps) are not written
    covered = uncovered(getattr(model, "missing_ranges", None) or [], first, first + w.shape[0])
    # (as the command line does: an interrupted run's work is not silently replaced)
    manifest = base_manifest(model.n_features, label_space, model.n_train, model.params, model.preprocessing,
                             getattr(model, "extensions", None), label_range=(first, first + w.shape[0]))
    with new_model_dir(path, overwrite="complete", unknown_range_unfinished=False) as tmp:
        write_extras(tmp, manifest, model.preprocessing, model.label_counts)
        for a, z in covered:
            step = shard_size or (z - a)
            for s in range(a, z, step):
                e = min(s + step, z)
                manifest["shards"].append(
                    write_shard_file(tmp, s, row_view(w, s - first, e - first), b[s - first:e - first]))
        write_manifest(tmp, manifest)


#: the trainers' ``manifest_lag`` (module text): manifest writes ~5% of a run at most
TRAINING_MANIFEST_LAG = 20.0


class ModelWriter:
    """Incremental writer of a sharded model (one process, any number of threads).

    ``ModelWriter.create`` makes a new model directory without shards;
    ``ModelWriter.open`` reopens one to resume.  :meth:`add_shard` is thread safe.
    """

    def __init__(self, path: str | os.PathLike, template: dict[str, Any]):
        self.path = Path(path)
        #: see the module text: add_shard rewrites the manifest once this many times its
        #: last write's duration has passed since that write (else the next one, or flush)
        self.manifest_lag = 0.0
        self._manifest = template
        self._lock = threading.Lock()
        self._pending: set[Range] = set()
        # the listed shards' first labels, ascending (bisect: the overlap test of a new
        # shard is O(log N), not a scan of every shard)
        template["shards"].sort(key=lambda e: e["first_label"])
        self._firsts = [int(e["first_label"]) for e in template["shards"]]
        self._dirty = False                 # shards listed here but not yet on disk
        self._written_at = -float("inf")    # perf_counter at the end of the last write
        self._write_seconds = 0.0

    # ---- construction
    @classmethod
    def create(cls, path: str | os.PathLike, n_features: int, label_space: int, params: TrainParams,
               preprocessing: Preprocessing | None = None, label_counts: Any = None, n_train: int = 0,
               *, overwrite: bool = False, extensions: dict[str, Any] | None = None,
               data_sha256: str | None = None, label_range: tuple[int, int] | None = None) -> "ModelWriter":
        """Create an empty model directory atomically (refuses an existing model unless ``overwrite``)."""
        path = Path(os.path.abspath(path))
        for name, v in (("n_features", n_features), ("label_space", label_space), ("n_train", n_train)):
            if not is_int(v) and not isinstance(v, np.integer) or v < 0:
                raise ModelFormatError(f"{name} must be an integer >= 0, got {v!r}")
        if not isinstance(params, TrainParams):
            raise ModelFormatError(f"params must be a TrainParams, got {type(params).__name__}")
        preprocessing = preprocessing or Preprocessing()
        manifest = base_manifest(n_features, label_space, n_train, params, preprocessing, extensions, data_sha256,
                                 label_range)
        with new_model_dir(path, overwrite=overwrite) as tmp:
            write_extras(tmp, manifest, preprocessing, label_counts)
            write_manifest(tmp, manifest)
        return cls(path, manifest)

    @classmethod
    def open(cls, path: str | os.PathLike, params: TrainParams | None = None, *,
             n_features: int | None = None, label_space: int | None = None,
             verify: bool = True, clean: bool = True) -> "ModelWriter":
        """Reopen ``path`` to resume.

        ``params``/``n_features``/``label_space``, when given, must agree with the model
        (``threads`` may differ); the error names the first differing parameter and both
        values.  ``verify`` checks every listed file's checksum; ``clean`` deletes shard
        files not listed in the manifest and stale temporary files (left by a crash).
        """
        path = Path(path)
        m = read_manifest(path)
        if params is not None:
            diff = model_params_difference(m, params, costs_digest(params, m["label_space"]))
            if diff:
                name, old, new = diff[0]
                more = f" (and {', '.join(d[0] for d in diff[1:])})" if len(diff) > 1 else ""
                raise ModelFormatError(f"{path}: cannot resume: parameter {name} is {old!r} in the model but "
                                       f"{new!r} now{more}")
        for name, v in (("n_features", n_features), ("label_space", label_space)):
            if v is not None and int(v) != m[name]:
                raise ModelFormatError(f"{path}: cannot resume: the model has {name}={m[name]} but the data "
                                       f"has {name}={v}")
        if verify:
            read_extras(path, m)
            for entry in m["shards"]:
                read_verified(path / entry["file"], entry["sha256"])
        writer = cls(path, m)
        if clean:
            writer.clean()
        return writer

    # ---- queries
    @property
    def manifest(self) -> dict[str, Any]:
        with self._lock:
            return json.loads(json.dumps(self._manifest))

    @property
    def n_features(self) -> int:
        return self._manifest["n_features"]

    @property
    def label_space(self) -> int:
        return self._manifest["label_space"]

    @property
    def params(self) -> TrainParams:
        return TrainParams.from_dict(self._manifest["params"])

    def finished_ranges(self) -> list[Range]:
        with self._lock:
            return finished_ranges_of(self._manifest)

    def missing_ranges(self, first: int = 0, count: int | None = None) -> list[Range]:
        """Ranges of ``[first, first+count)`` (default: all labels) that have no shard yet."""
        with self._lock:
            return missing_ranges_of(self._manifest, first, count)

    def is_complete(self) -> bool:
        return not self.missing_ranges()

    # ---- changes
    def clean(self) -> list[Path]:
        """Delete unlisted shard files and stale temporaries; return what was removed."""
        removed = []
        with self._lock:
            listed = {Path(s["file"]).name for s in self._manifest["shards"]}
            pending = {Path(shard_file_name(a, b - a)).name for a, b in self._pending}
            for d in (self.path, self.path / SHARD_DIR):
                if not d.is_dir():
                    continue
                for f in d.iterdir():
                    if d == self.path and not TEMP_NAME_RE.match(f.name):
                        continue
                    if (SHARD_NAME_RE.match(f.name) and f.name not in listed and f.name not in pending) \
                            or (TEMP_NAME_RE.match(f.name) and not self._pending):
                        if f.is_file():
                            f.unlink()
                            removed.append(f)
        return removed

    def add_shard(self, first_label: int, weights: Any, intercept: Any) -> dict[str, Any]:
        """Write the shard of labels ``[first_label, first_label + rows)`` and list it.

        The shard file is written atomically, then the manifest is rewritten atomically,
        so a listed shard is always complete.  Overlap with a finished or in-progress
        shard raises :class:`ModelFormatError`.  Returns the manifest entry.
        """
        what = f"{self.path}: shard at label {first_label}"
        w = canonical_weights(weights, self.n_features, what)
        b = canonical_intercept(intercept, w.shape[0], what)
        first_label = int(first_label)
        rng = (first_label, first_label + w.shape[0])
        if w.shape[0] < 1:
            raise ModelFormatError(f"{what}: a shard needs at least one label")
        if first_label < 0 or rng[1] > self.label_space:
            raise ModelFormatError(f"{what}: {fmt_range(rng)} outside the label space [0, {self.label_space})")
        with self._lock:
            # the listed shards do not overlap: only the last one starting before rng's
            # end can reach into it
            i = bisect.bisect_left(self._firsts, rng[1]) - 1
            taken = []
            if i >= 0:
                e = self._manifest["shards"][i]
                taken = [(e["first_label"], e["first_label"] + e["num_labels"])]
            for r in taken + sorted(self._pending):
                if r[0] < rng[1] and rng[0] < r[1]:
                    state = "finished" if r in taken else "in-progress"
                    raise ModelFormatError(f"{what}: {fmt_range(rng)} overlaps the {state} shard {fmt_range(r)}")
            self._pending.add(rng)
        try:
            (self.path / SHARD_DIR).mkdir(exist_ok=True)
            entry = write_shard_file(self.path, first_label, w, b)
            with self._lock:
                at = bisect.bisect_left(self._firsts, first_label)
                self._manifest["shards"].insert(at, entry)
                self._firsts.insert(at, first_label)
                was_dirty, self._dirty = self._dirty, True
                if time.perf_counter() - self._written_at >= self.manifest_lag * self._write_seconds:
                    try:
                        self._write_manifest()
                    except BaseException:
                        # not listed after all (its file is an unlisted leftover)
                        del self._manifest["shards"][at], self._firsts[at]
                        self._dirty = was_dirty
                        raise
        finally:
            with self._lock:
                self._pending.discard(rng)
        return entry

    def flush(self) -> None:
        """Write the manifest if shards were listed since its last write (see the module
        text); a no-op otherwise.  Called when a run ends, fails or is interrupted."""
        with self._lock:
            if self._dirty:
                self._write_manifest()

    def _write_manifest(self) -> None:
        # (with the lock held) the manifest in memory to disk, timed for the next lag
        t0 = time.perf_counter()
        write_manifest(self.path, self._manifest)
        self._written_at = time.perf_counter()
        self._write_seconds = self._written_at - t0
        self._dirty = False

    def widen_range(self, first: int, stop: int) -> None:
        """A resumed run asked for labels [first, stop): the manifest's ``label_range``
        (when it has one) now spans them too, so that labels of either run left untrained
        make the model unfinished."""
        with self._lock:
            r = self._manifest.get(RANGE_KEY)
            if r is None or (r[0] <= first and stop <= r[1]):
                return
            self._manifest[RANGE_KEY] = [min(int(r[0]), int(first)), max(int(r[1]), int(stop))]
            try:
                self._write_manifest()
            except BaseException:
                self._manifest[RANGE_KEY] = r
                raise

    def __enter__(self) -> "ModelWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.flush()
            return
        # the run failed or was interrupted: its error is the one to see; a failure to
        # list the finished shards as well is logged (their files are deleted on resume)
        try:
            self.flush()
        except Exception as e:  # noqa: BLE001 - reported, the original error propagates
            log.error("%s: could not list the finished shards in the manifest: %s: %s", self.path,
                      type(e).__name__, e)
