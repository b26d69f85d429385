"""Run an experiment: one model per initialisation on the same data, with statistics,
each evaluated on the test set; and save / load the result.

The result (:class:`Experiment`) is everything the table, the figures and the report
are made from: per run the :class:`~headstart.training.stats.TrainingStats` (per-label
columns and per-iteration trajectories), the test metrics and the timings.  It is saved
as ``table.json`` (metrics, timings, settings, environment) plus ``stats/<run>.npz``
(the statistics), so a report can be redrawn without training again
(:func:`load_experiment`).

Timing.  A run's training time is the ``wall_seconds`` its statistics record: the time
of :func:`headstart.training.trainer.train_labels`, which includes the initialiser's
preparation (for ``ovap`` the all-negative problem) but not reading the data.  The
numba kernels are compiled (or loaded from the cache) by a short warm-up before the
first timed run, so no run pays for compilation.  The load average of the machine
before and after each run is recorded next to its time: timings on a shared machine
are only comparable when the load was.  The process CPU time of training (all threads)
is recorded too; it is less sensitive to other processes competing for the cores.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError, ParameterError
from ..params import TrainParams
from ..training.stats import ITER_FIELDS, TrainingStats
from .spec import INIT_GROUP, RunSpec
from ..validation import same_feature_space

log = logging.getLogger(__name__)

#: ranks of the reported precision@k
KS = (1, 3, 5)
#: format version of table.json
FORMAT_VERSION = 1
STATS_DIR = "stats"


# --------------------------------------------------------------------------- data
@dataclass
class Dataset:
    X_train: sp.csr_matrix
    Y_train: sp.csr_matrix
    X_test: sp.csr_matrix
    Y_test: sp.csr_matrix
    info: dict


def _read(path: str, wide_ids: bool = False):
    """(X, Y, the file's format); ``wide_ids``: feature ids up to 2^63 - 2 (hashed runs,
    as ``headstart train --hash-buckets`` reads them)."""
    from .. import io as hio

    fmt = hio.detect_format(path)
    if fmt == "xmc":
        return (*hio.read_xmc(path, wide_ids=wide_ids), fmt)
    if fmt == "libsvm":
        return (*hio.read_libsvm(path, wide_ids=wide_ids), fmt)
    raise ParameterError(f"{path}: dense .npy features (slice format) are not supported by the experiment "
                         "command; convert them with 'headstart convert' first")


def load_dataset(train: str | os.PathLike, test: str | os.PathLike, wide_ids: bool = False) -> Dataset:
    """Read train and test data (XMC or libsvm text, gzip or not); ``wide_ids`` for runs
    that hash the features (raw ids beyond int32 allowed, as in ``headstart train
    --hash-buckets``).  The test matrices get
    the training widths (missing trailing features / labels are empty columns).  A
    libsvm test file, which declares no widths, may use feature and label ids that no
    training row has, as ``evaluate`` accepts them (helper-57): the features are dropped
    with a warning, as LIBLINEAR's predict ignores them, and so are the labels -- no run
    trains them, and the metrics here are over the trained label range."""
    from ..validation import model_width

    t0 = time.perf_counter()
    Xtr, Ytr, _ = _read(str(train), wide_ids)
    Xte, Yte, test_format = _read(str(test), wide_ids)
    for path, X in ((train, Xtr), (test, Xte)):
        if X.shape[0] == 0:     # refused before the first run (helper-48: after it, unnamed)
            raise DataFormatError(f"{path}: the file has no instances: nothing to train on or evaluate")
    if test_format == "libsvm":
        Xte = model_width(Xte, Xtr.shape[1], test)
        beyond = Yte.indices >= Ytr.shape[1]
        if np.any(beyond):
            log.warning("%s: %d positive(s) of %d label id(s) that no training row has (beyond its %d labels): "
                        "not trained, left out of the metrics", test, int(np.count_nonzero(beyond)),
                        np.unique(Yte.indices[beyond]).size, Ytr.shape[1])
    elif Yte.shape[1] != Ytr.shape[1]:
        # an xmc header declares its label space: another one is another data set's file,
        # refused as 'headstart evaluate' refuses it (its columns were cut or padded silently)
        raise DataFormatError(f"the test data has {Yte.shape[1]} labels but the training data {Ytr.shape[1]}; "
                              "they must be the same label ids", test, 1)
    Xte = same_feature_space(Xte, Xtr.shape[1], test)
    if Yte.shape[1] != Ytr.shape[1]:
        Yte = _resize_columns(Yte, Ytr.shape[1])
    info = {
        "train": str(train), "test": str(test), "name": _data_name(train),
        "n_train": int(Xtr.shape[0]), "n_test": int(Xte.shape[0]), "n_features": int(Xtr.shape[1]),
        "n_labels": int(Ytr.shape[1]), "train_nnz": int(Xtr.nnz), "test_nnz": int(Xte.nnz),
        "read_seconds": time.perf_counter() - t0,
    }
    return Dataset(Xtr, Ytr, Xte, Yte, info)


def _resize_columns(Y: sp.csr_matrix, L: int) -> sp.csr_matrix:
    """Keep columns < L, add empty ones up to L."""
    Y = sp.csr_matrix(Y)
    if Y.shape[1] > L:
        Y = Y[:, :L]
    return sp.csr_matrix((Y.data, Y.indices, Y.indptr), shape=(Y.shape[0], L))


def _data_name(train) -> str:
    """'debian-deps' for .../debian-deps/train.txt.gz, else 'folder/stem'."""
    p = Path(train)
    name = p.name
    for suffix in (".gz", ".txt", ".svm", ".libsvm"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    parent = p.resolve().parent.name
    if name.lower() in ("train", "trn", "training") and parent:
        return parent
    return f"{parent}/{name}" if parent else name


# --------------------------------------------------------------------------- results
@dataclass
class RunResult:
    spec: RunSpec
    stats: TrainingStats
    metrics: dict             # P@k, precision, recall, n_labels_precision, n_labels_recall
    timing: dict              # train_seconds, init_prepare_seconds, fit_seconds, eval_seconds
    load: dict                # os.getloadavg() before and after the run
    model_nnz: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def train_seconds(self) -> float:
        return float(self.timing["train_seconds"])


@dataclass
class Experiment:
    data: dict
    settings: dict
    environment: dict
    runs: list[RunResult] = field(default_factory=list)

    @property
    def init_runs(self) -> list[RunResult]:
        return [r for r in self.runs if r.spec.group == INIT_GROUP]

    def grid_runs(self) -> list[tuple[str, RunResult]]:
        """(grid point name, run) of the aop grid; a point equal to an initialisation run
        (e.g. s=1 t=-2 and aop) is that run, trained once."""
        out = []
        for point in self.settings.get("aop_grid_points", []):
            r = self.run(point["run"])
            if r is not None:
                out.append((point["name"], r))
        return out

    def run(self, name: str) -> RunResult | None:
        for r in self.runs:
            if r.spec.name == name:
                return r
        return None


class Reporter(Protocol):
    """What :func:`run_experiment` tells its caller while it works."""

    def start_run(self, index: int, total: int, spec: RunSpec, n_labels: int) -> Callable[[int], None] | None: ...

    def end_run(self, result: RunResult) -> None: ...


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # pragma: no cover - not on Linux
        return []


def environment() -> dict:
    import numba
    import scipy

    from .. import __version__

    return {
        "headstart": __version__, "python": platform.python_version(), "numpy": np.__version__,
        "scipy": scipy.__version__, "numba": numba.__version__, "platform": platform.platform(),
        "cpu_count": os.cpu_count(), "loadavg_start": loadavg(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "command": " ".join(sys.argv),
        "git_commit": _git_commit(),
    }


def _git_commit() -> str | None:
    """The commit of the headstart source tree (with '-dirty' if it has local changes), when
    it is a git checkout: when this file is tracked by the repository around it.  An
    installed headstart is not: a virtual environment inside the user's own repository
    (``.venv`` in a project) gave that project's commit as headstart's (helper hA,
    2026-12-02)."""
    import subprocess

    here = Path(__file__).resolve().parent
    try:
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", "--", Path(__file__).name], cwd=here,
                                 capture_output=True, text=True, timeout=10)
        if tracked.returncode != 0:
            return None
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "headstart"],
                               cwd=here.parent.parent, capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


# --------------------------------------------------------------------------- running
def warm_up(data: Dataset, runs: list[RunSpec], first: int, count: int) -> float:
    """Compile (or load from numba's cache) every kernel the runs use, on a few rows and
    labels, so that no timed run pays for compilation.  Returns the seconds spent."""
    from ..estimator import fit_model

    t0 = time.perf_counter()
    rows = min(data.X_train.shape[0], 300)
    X, Y = data.X_train[:rows], data.Y_train[:rows]
    seen = set()
    model = None
    for spec in runs:
        # every initialiser's plan is a type of its own, so each compiles its own trainer
        # (helper-48: only ovap was told apart, and the first bias / aop run's CPU time
        # held ~12 s of compiling); numbers (C, s, t, ...) are run-time values and share
        p = spec.params
        key = (p.init, p.loss, p.regularizer, p.l2_solver, p.l1_solver, p.weighting != "none", p.sparsify > 0,
               p.hash_buckets > 0, p.bias > 0)
        if key in seen:
            continue
        seen.add(key)
        model, _ = fit_model(X, Y, p.replace(threads=1), first_label=first, num_labels=min(count, 2))
    if model is not None:
        # and the evaluation's prediction kernels (helper-57: the first run's evaluation
        # seconds held their compilation)
        rows = min(data.X_test.shape[0], 50)
        evaluate_model(model, data.X_test[:rows],
                       sp.csr_matrix(data.Y_test[:rows])[:, first:first + model.num_labels].tocsr(), 1)
    return time.perf_counter() - t0


def evaluate_model(model, X_test, Y_test_range: sp.csr_matrix, threads: int) -> dict:
    """P@1/3/5 of the model's top-5 and the label-averaged binary precision / recall of
    its decisions score > 0, against the test labels of the model's label range.  A k
    beyond the model's labels is cut to them, as ``headstart evaluate`` cuts it: with 3
    labels "P@5" is P@3 (:func:`capped_ks_note` says so where it is shown)."""
    from ..metrics import binary_precision_recall, capped_k, evaluate
    from ..prediction.topk import predict_topk
    from .scores import positive_decisions

    cut = {k: capped_k(k, model.num_labels) for k in KS}
    labels, _ = predict_topk(model, X_test, k=max(cut.values()), threads=threads)
    local = np.where(labels >= 0, labels.astype(np.int64) - model.first_label, -1)
    ranked = evaluate(Y_test_range, local, ks=sorted(set(cut.values())))
    out = {f"P@{k}": float(ranked[f"P@{c}"]) for k, c in cut.items()}
    binary = binary_precision_recall(Y_test_range, positive_decisions(model, X_test, threads=threads))
    out.update({k: (float(v) if isinstance(v, float) else int(v)) for k, v in binary.items()})
    return out


def capped_ks_note(labels: int) -> str:
    """What the P@k columns of a range of ``labels`` labels hold where a k is beyond
    them ("P@5 is P@3 (3 labels: ...)"; see :func:`evaluate_model`), or "" where none is."""
    from ..metrics import capped_k

    cut = [k for k in KS if capped_k(k, labels) < k]
    if not cut:
        return ""
    names = " and ".join(f"P@{k}" for k in cut)
    return (f"{names} {'is' if len(cut) == 1 else 'are'} P@{labels} ({labels} label{'s' * (labels != 1)}: "
            "a k beyond the labels is cut to them, as headstart evaluate cuts it)")


def run_experiment(data: Dataset, runs: list[RunSpec], first_label: int = 0, num_labels: int | None = None,
                   settings: dict | None = None, reporter: Reporter | None = None,
                   warmup: bool = True, checkpoint: str | os.PathLike | None = None) -> Experiment:
    """Train and evaluate every run on labels ``[first_label, first_label + num_labels)``.

    ``checkpoint``: a directory where every finished run is saved at once (its record and
    statistics); a run found there, of the same parameters on the same data and labels,
    is taken from it instead of trained again -- an interrupted experiment goes on where
    it stopped (helper-68: all finished runs were lost, hours of them on a large set)."""
    from ..estimator import fit_model, resolve_label_range

    if not runs:
        raise ParameterError("an experiment needs at least one initialisation")
    first, count = resolve_label_range(data.Y_train.shape[1], first_label, num_labels)
    if count == 0:
        raise ParameterError("the label range is empty")
    Yte = sp.csr_matrix(data.Y_test)[:, first:first + count].tocsr()
    pos = np.asarray(data.Y_train[:, first:first + count].sum(axis=0)).ravel()
    info = dict(data.info, first_label=first, num_labels=count,
                labels_without_positives=int(np.sum(pos == 0)),
                labels_with_at_most_5_positives=int(np.sum(pos <= 5)),
                median_positives=float(np.median(pos)), max_positives=int(pos.max()))
    exp = Experiment(info, dict(settings or {}), environment())
    # the checkpoint's runs stand for this experiment's only on the same arrays: the
    # shapes and nnz alone pass a file rewritten with other values (another tf-idf)
    saved = dict(info, data_sha256=data_digest(data)) if checkpoint is not None else info
    done = load_checkpoint(checkpoint, saved, runs) if checkpoint is not None else {}
    if done:
        log.info("%s: %d of %d runs finished before (%s), not trained again", checkpoint, len(done), len(runs),
                 ", ".join(r.spec.name for r in done.values()))
        exp.environment["runs_from_checkpoint"] = [r.spec.name for r in done.values()]
    todo = [spec for spec in runs if spec.key not in done]
    exp.environment["warmup_seconds"] = warm_up(data, todo, first, count) if warmup and todo else 0.0
    for index, spec in enumerate(runs):
        if spec.key in done:
            exp.runs.append(done[spec.key])
            continue
        advance = reporter.start_run(index, len(runs), spec, count) if reporter else None
        load_before = loadavg()
        t0, c0 = time.perf_counter(), time.process_time()
        model, stats = fit_model(data.X_train, data.Y_train, spec.params, first_label=first, num_labels=count,
                                 progress=advance)
        fit_seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        load_after = loadavg()
        t0 = time.perf_counter()
        metrics = evaluate_model(model, data.X_test, Yte, spec.params.threads)
        eval_seconds = time.perf_counter() - t0
        timing = {"train_seconds": float(stats.meta["wall_seconds"]),
                  "init_prepare_seconds": float(stats.meta.get("init_prepare_seconds", 0.0)),
                  "fit_seconds": fit_seconds, "cpu_seconds": cpu_seconds, "eval_seconds": eval_seconds}
        result = RunResult(spec, stats, metrics, timing, {"before": load_before, "after": load_after},
                           int(model.nnz))
        exp.runs.append(result)
        del model
        if checkpoint is not None:
            save_checkpoint(checkpoint, saved, result)
        if reporter:
            reporter.end_run(result)
    exp.environment["loadavg_end"] = loadavg()
    return exp


# --------------------------------------------------------------------------- checkpoint
#: what must be equal for a saved run to stand for a run of this experiment
_SAME_DATA = ("train", "test", "n_train", "n_test", "n_features", "n_labels", "train_nnz", "test_nnz",
              "first_label", "num_labels", "data_sha256")


def data_digest(data: Dataset) -> str:
    """sha256 of the training and test arrays (fixed dtypes): tells a data set from another
    of the same shapes and nnz (the same documents with other feature values or labels).
    ~1 s per GB of arrays, against hours of runs it guards."""
    import hashlib

    from .._digest import update

    h = hashlib.sha256()
    for M in (data.X_train, data.Y_train, data.X_test, data.Y_test):
        M = sp.csr_matrix(M)
        update(h, ((M.indptr, np.int64), (M.indices, np.int64), (M.data, np.float64)))
        h.update(np.asarray(M.shape, dtype=np.int64).data)
    return h.hexdigest()


def save_checkpoint(directory: str | os.PathLike, info: dict, r: RunResult) -> None:
    """Save a finished run: ``stats/<key>.npz``, then ``<key>.json`` (written last, so a
    record always has its statistics)."""
    from ..io.atomic import atomic_write

    d = Path(directory)
    (d / STATS_DIR).mkdir(parents=True, exist_ok=True)
    # a record of this key from other parameters or data goes first: were the process
    # stopped between the statistics and the record, that record would otherwise stand
    # beside this run's statistics and be taken with them on the next start
    (d / f"{r.spec.key}.json").unlink(missing_ok=True)
    save_stats(r.stats, d / STATS_DIR / f"{r.spec.key}.npz")
    doc = {"format_version": FORMAT_VERSION, "data": {k: info.get(k) for k in _SAME_DATA}, "run": run_record(r)}
    with atomic_write(str(d / f"{r.spec.key}.json"), "w") as fh:
        fh.write(json.dumps(_plain(doc), allow_nan=False))


def load_checkpoint(directory: str | os.PathLike, info: dict, runs: list[RunSpec]) -> dict[str, RunResult]:
    """The runs of ``runs`` saved in ``directory`` by :func:`save_checkpoint` for the same
    data and label range with the same parameters, by key; others are left out (and
    trained again), with a note of why."""
    d = Path(directory)
    out: dict[str, RunResult] = {}
    if not d.is_dir():
        return out
    same = {k: info.get(k) for k in _SAME_DATA}
    for spec in runs:
        path = d / f"{spec.key}.json"
        if not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            rec = doc["run"]
            params = TrainParams.from_dict(rec["params"])
            if doc.get("format_version") != FORMAT_VERSION or doc.get("data") != same:
                log.warning("%s: a run of other data or labels; trained again", path)
                continue
            if params != spec.params:
                log.warning("%s: a run of other parameters; trained again", path)
                continue
            stats = load_stats(d / rec["stats_file"])
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, ParameterError) as e:
            log.warning("%s: cannot be read (%s); trained again", path, e)
            continue
        metrics = {k: (math.nan if v is None else v) for k, v in rec["metrics"].items()}
        out[spec.key] = RunResult(spec, stats, metrics, rec["timing"], rec["loadavg"], int(rec.get("model_nnz", 0)))
    return out


# --------------------------------------------------------------------------- saving
def save_stats(stats: TrainingStats, path: str | os.PathLike) -> None:
    """Compressed .npz of the statistics: per-label columns, trajectories, meta (JSON)."""
    from ..io.atomic import atomic_write

    arrays = {f"col_{k}": v for k, v in stats.columns.items()}
    arrays["iter_offsets"] = stats.iter_offsets
    for f in ITER_FIELDS:
        arrays[f"it_{f}"] = stats.iterations[f]
    arrays["meta"] = np.array(json.dumps(_plain(stats.meta)))
    with atomic_write(str(path), "wb") as fh:
        np.savez_compressed(fh, **arrays)


def load_stats(path: str | os.PathLike) -> TrainingStats:
    with np.load(path, allow_pickle=False) as z:
        cols = {k[4:]: z[k] for k in z.files if k.startswith("col_")}
        iters = {f: z[f"it_{f}"] for f in ITER_FIELDS}
        return TrainingStats(cols, z["iter_offsets"], iters, json.loads(str(z["meta"])))


def _plain(obj):
    """JSON-ready copy: numpy scalars to Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None    # JSON has no NaN (load: back to NaN)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def run_record(r: RunResult) -> dict:
    """A run as stored in table.json."""
    return _plain({
        "name": r.spec.name, "key": r.spec.key, "group": r.spec.group, "init": r.spec.init,
        "params": r.spec.params.to_dict(), "metrics": r.metrics, "timing": r.timing, "loadavg": r.load,
        "summary": r.stats.summary(), "model_nnz": r.model_nnz,
        "stats_file": f"{STATS_DIR}/{r.spec.key}.npz",
    })


def load_experiment(report_dir: str | os.PathLike) -> Experiment:
    """The experiment a report directory was made from (its table.json and stats/)."""
    d = Path(report_dir)
    path = d / "table.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParameterError(f"{d}: not an experiment report (no table.json)") from None
    except json.JSONDecodeError as e:
        raise DataFormatError(f"not valid JSON: {e.msg}", str(path), e.lineno) from None
    if doc.get("format_version") != FORMAT_VERSION:
        raise DataFormatError(f"unsupported report format {doc.get('format_version')!r}", str(path))
    exp = Experiment(doc["data"], doc["settings"], doc["environment"])
    for rec in doc["runs"]:
        spec = RunSpec(rec["name"], rec["key"], TrainParams.from_dict(rec["params"]), rec["group"])
        stats_path = d / rec["stats_file"]
        if not stats_path.is_file():
            why = "" if (d / STATS_DIR).is_dir() else \
                f" (the report has no {STATS_DIR}/ at all: written with --no-stats?)"
            raise ParameterError(f"{stats_path}: statistics of run {rec['name']!r} are missing{why}; "
                                 "the report cannot be redrawn without them")
        stats = load_stats(stats_path)
        metrics = {k: (math.nan if v is None else v) for k, v in rec["metrics"].items()}
        exp.runs.append(RunResult(spec, stats, metrics, rec["timing"], rec["loadavg"],
                                  int(rec.get("model_nnz", 0))))
    return exp
