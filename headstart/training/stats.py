"""Per-label training statistics: the raw material of the paper's analysis and figures.

Scalars per label (``columns``) plus per-iteration trajectories stored ragged (a flat
array per quantity and an offset per label): iteration 0 is the starting point.
Collected inside the compiled loop at the cost of a few stores per iteration, so they
are always on.
"""

from __future__ import annotations

import json
import logging
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from ..model.archive import write_npz
from ..model.manifest import STATS_DIR, read_manifest
from ..solver.newton import STATUS_NAMES
from .kernel import STAT_FIELDS
from .pages import release_free_memory

log = logging.getLogger(__name__)

#: from how many labels a consuming :meth:`TrainingStats.concat` hands the parts' freed
#: memory back as it goes (malloc_trim walks every arena: ~0.2 ms even on a small heap)
_TRIM_LABELS = 100_000

_CSV_BLOCK = 65536   # labels formatted at a time by TrainingStats.write
_JSON_BLOCK = 4096    # labels (JSON objects) written at a time by TrainingStats.write

ITER_FIELDS = ("objective", "active_fraction", "step", "cg_steps", "seconds")

#: per label: the label whose solve it took (-1: its own), see :mod:`.sharing` -- its
#: other columns repeat that solve's, so totals of work (``summary``) leave it out
SHARED = "shared_with"

# (``rows``, ``node``, ``label_id``, ``tree``: the columns of a tree's statistics, headstart tree --stats)
_INT_FIELDS = {"label", "n_pos", "status", "iterations", "cg_steps", "nnz", SHARED, "nnz_unpruned", "rows", "node",
               "label_id", "tree"}


@dataclass
class TrainingStats:
    columns: dict[str, np.ndarray]                 # per label: "label" plus STAT_FIELDS
    iter_offsets: np.ndarray                       # (num_labels + 1,) into the flat per-iteration arrays
    iterations: dict[str, np.ndarray] = field(default_factory=dict)   # ITER_FIELDS -> flat arrays
    meta: dict = field(default_factory=dict)       # e.g. init preparation time, wall time

    def __post_init__(self):
        if "label" in self.columns:     # (every path builds its columns through here)
            _add_missing_columns(self.columns)

    # --- assembly ---------------------------------------------------------------
    @classmethod
    def from_chunks(cls, chunks, meta=None) -> "TrainingStats":
        """chunks: list of (labels, stats (k, len(STAT_FIELDS)), records dict of lists of arrays)."""
        if not chunks:
            return cls.empty(meta=meta)
        labels = np.concatenate([c[0] for c in chunks]).astype(np.int64)
        table = np.concatenate([c[1] for c in chunks], axis=0)
        cols = {"label": labels}
        for i, f in enumerate(STAT_FIELDS):
            cols[f] = table[:, i]
        recs = {f: [] for f in ITER_FIELDS}
        for c in chunks:
            for f in ITER_FIELDS:
                recs[f].extend(c[2][f])
        lengths = np.array([len(a) for a in recs[ITER_FIELDS[0]]], dtype=np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = {f: (np.concatenate(recs[f]) if recs[f] else np.zeros(0)) for f in ITER_FIELDS}
        order = np.argsort(labels, kind="stable")
        out = cls(cls._typed(cols), offsets, flat, dict(meta or {}))
        return out.take(order)

    @classmethod
    def empty(cls, fields=STAT_FIELDS, meta=None) -> "TrainingStats":
        """No label, with the columns ``fields`` (a kernel's table columns)."""
        cols = {"label": np.zeros(0, dtype=np.int64)}
        cols.update({f: np.zeros(0) for f in fields})
        return cls(cls._typed(cols), np.zeros(1, dtype=np.int64), {f: np.zeros(0) for f in ITER_FIELDS},
                   dict(meta or {}))

    @classmethod
    def from_table(cls, labels, table, lengths, iterations, meta=None, fields=STAT_FIELDS) -> "TrainingStats":
        """One chunk: ``labels`` ascending, the kernel's ``table`` (k, len(fields); the
        Newton kernel's STAT_FIELDS unless a kernel reports more, e.g. the shortlisted
        sub-problem's size), per-label trajectory ``lengths`` and the trajectories already
        flat (label-major)."""
        labels = np.asarray(labels, dtype=np.int64)
        cols = {"label": labels.copy()}
        for i, f in enumerate(fields):
            cols[f] = table[:, i]
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = {f: np.ascontiguousarray(iterations[f], dtype=np.float64) for f in ITER_FIELDS}
        out = cls(cls._typed(cols), offsets, flat, dict(meta or {}))
        if labels.size > 1 and not np.all(labels[1:] > labels[:-1]):
            out = out.take(np.argsort(labels, kind="stable"))
        return out

    @staticmethod
    def _typed(cols):
        return {k: (v.astype(np.int64) if k in _INT_FIELDS else v.astype(np.float64)) for k, v in cols.items()}

    def without_trajectories(self) -> "TrainingStats":
        """The per-label scalars only (every trajectory empty): what a run keeps when no
        one will read the trajectories -- 40 bytes per Newton iteration, ~190 MB for all
        labels of an Amazon-670K-sized problem."""
        return TrainingStats(self.columns, np.zeros(len(self) + 1, dtype=np.int64),
                             {f: np.zeros(0) for f in ITER_FIELDS}, dict(self.meta))

    def take(self, idx) -> "TrainingStats":
        idx = np.asarray(idx, dtype=np.int64)
        cols = {k: v[idx] for k, v in self.columns.items()}
        lengths = np.diff(self.iter_offsets)[idx]
        offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # positions of the selected labels' runs, in the new order, without a Python loop
        gather = np.repeat(self.iter_offsets[:-1][idx] - offsets[:-1], lengths) + np.arange(offsets[-1])
        iters = {f: a[gather] for f, a in self.iterations.items()}
        return TrainingStats(cols, offsets, iters, dict(self.meta))

    def spread(self, rows, labels, own) -> "TrainingStats":
        """The statistics of ``labels``, label i with those of row ``rows[i]``: labels
        that took another's result (``own`` False, :mod:`.sharing`) get its statistics
        and trajectory, with no seconds of their own, and its label in ``shared_with``."""
        rows = np.asarray(rows, dtype=np.int64)
        out = self.take(rows)                 # (fresh arrays: take indexes)
        labels = np.asarray(labels, dtype=np.int64)
        out.columns["label"] = labels.copy()
        own = np.asarray(own, dtype=np.bool_)
        copies = ~own
        out.columns["seconds"][copies] = 0.0
        if np.any(copies):
            solved_by = np.full(int(rows.max()) + 1, -1, dtype=np.int64)
            solved_by[rows[own]] = labels[own]    # a copy comes after the label it copies
            out.columns[SHARED][copies] = solved_by[rows[copies]]
        if out.iterations.get("seconds") is not None and out.iterations["seconds"].size:
            out.iterations["seconds"][np.repeat(copies, np.diff(out.iter_offsets))] = 0.0
        return out

    @classmethod
    def concat(cls, parts, consume: bool = False) -> "TrainingStats":
        """The parts' labels in one table, in label order.  ``consume``: ``parts`` (a
        list) is emptied and each part dropped as soon as it is copied, its memory handed
        back to the system as it goes where the parts are large (glibc's malloc_trim) --
        the peak is then the result and one part, not the result and every part: at 2M
        labels the statistics' share of a run's peak halves (~130 bytes a label)."""
        src = parts
        parts = [p for p in parts if p is not None]
        if consume:
            src.clear()     # the caller's references: each part dies once copied
        if not parts:
            return cls.from_chunks([])
        # threads finish chunks out of order; chunks are runs of consecutive sorted labels,
        # so ordering the parts by their first label usually leaves nothing to sort below
        # (the take of 2M labels' statistics took 0.9 s)
        parts.sort(key=lambda p: int(p.columns["label"][0]) if len(p) else -1)
        # the columns every part has: a resumed run meets statistics files of a version
        # without a column a trainer records now (exact L1's nnz_unpruned)
        keys = [k for k in parts[0].columns if all(k in p.columns for p in parts)]
        total = sum(len(p) for p in parts)
        cols = {k: np.empty(total, dtype=np.result_type(*[p.columns[k] for p in parts])) for k in keys}
        steps = sum(int(p.iter_offsets[-1] - p.iter_offsets[0]) for p in parts)
        iters = {f: np.empty(steps, dtype=np.result_type(*[p.iterations[f] for p in parts])) for f in ITER_FIELDS}
        # the offsets part by part: the parts' lengths (np.diff) and their concatenation
        # were two int64 arrays per label at the peak of this copy (2M labels: 30 MiB)
        offsets = np.zeros(total + 1, dtype=np.int64)
        meta = dict(parts[0].meta)
        trim = consume and total >= _TRIM_LABELS
        pos = at = 0
        freed = 0
        parts.reverse()     # popped from the end: first label first
        while parts:
            p = parts.pop()
            k = len(p)
            for key in keys:
                cols[key][pos: pos + k] = p.columns[key]
            lo, hi = int(p.iter_offsets[0]), int(p.iter_offsets[-1])
            for f in ITER_FIELDS:
                iters[f][at: at + hi - lo] = p.iterations[f][lo:hi]
            offsets[pos + 1: pos + k + 1] = p.iter_offsets[1:] - lo + offsets[pos]
            pos += k
            at += hi - lo
            freed += k
            del p
            if trim and freed >= max(_TRIM_LABELS, total // 8):
                freed = 0
                release_free_memory()
        out = cls(cols, offsets, iters, meta)
        lab = cols["label"]
        if lab.size > 1 and not np.all(lab[1:] > lab[:-1]):   # already in label order: no copy
            out = out.take(np.argsort(lab, kind="stable"))
        return out

    # --- access -----------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.columns["label"].size)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __contains__(self, name: object) -> bool:
        # without it ``"status" in stats`` would iterate through __getitem__ with 0, 1, ...
        return name in self.columns

    def trajectory(self, i: int, name: str) -> np.ndarray:
        """Per-iteration values of label number ``i`` (row index, not label id)."""
        return self.iterations[name][self.iter_offsets[i]: self.iter_offsets[i + 1]]

    def status_names(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The status of labels number ``start`` to ``stop`` (default: all) by name."""
        return np.asarray(STATUS_NAMES)[self.columns["status"][start:stop].astype(np.int64)]

    def summary(self) -> dict:
        """Counts and totals; the totals of work (iterations, CG steps) leave out the
        labels that took another label's solve (``shared_with``): that solve is counted
        once, where it ran (2M mostly empty labels from ``--init zero`` reported 18M
        Newton iterations, helper-54)."""
        c = self.columns
        status = c["status"].astype(int)
        own = c[SHARED] < 0
        return {
            "labels": len(self),
            "converged": int(np.sum(status == 0)),
            "not_converged": {STATUS_NAMES[s]: int(np.sum(status == s)) for s in range(1, len(STATUS_NAMES))
                              if np.any(status == s)},
            "labels_without_positives": int(np.sum(c["n_pos"] == 0)),
            "newton_iterations": int(c["iterations"][own].sum()),
            "cg_steps": int(c["cg_steps"][own].sum()),
            "label_seconds": float(c["seconds"].sum()),
            "nnz": int(c["nnz"].sum()),
            **self.meta,
        }

    # --- output -----------------------------------------------------------------
    def _rows(self):
        # (a label's status name as its row is made, as the CSV writer takes them per
        # block: no array of every label's name beside the rows)
        keys = list(self.columns)
        status = self.columns["status"]
        for i in range(len(self)):
            row = {}
            for k in keys:
                v = self.columns[k][i]
                row[k] = int(v) if k in _INT_FIELDS else float(v)
            row["status"] = STATUS_NAMES[int(status[i])]
            yield i, row

    def write(self, path: str | os.PathLike, fmt: str | None = None, iterations: bool = True) -> None:
        """Write as CSV (one row per label), JSON lines (one object per label, with the
        per-iteration trajectories when ``iterations``) or JSON (a list of those objects:
        a path ending in .json), atomically."""
        from ..io.atomic import atomic_write

        path = str(path)
        if fmt is None:
            fmt = "csv" if path.endswith(".csv") else "json" if path.endswith(".json") else "jsonl"
        if fmt not in ("csv", "jsonl", "json"):
            raise ValueError(f"unknown statistics format {fmt!r}; use csv or jsonl")
        # written block by block into the temporary file: the whole text used to be built
        # in a StringIO and copied out of it (and encoded) at once, ~2.5 x the file at the
        # peak -- a 2M-label JSON file (~850 MB) took 2.0 GiB beyond the statistics, above
        # what headstart.resources estimates (stop 79)
        with atomic_write(path, "w") as fh:
            if fmt == "csv":
                # column by column (what csv.DictWriter wrote row by row: str() of Python ints
                # and floats, '\r\n' line ends): 2M labels in ~3 s instead of ~25 s
                fh.write(",".join(self.columns) + "\r\n")     # also without rows: a header (helper-52)
                if len(self):
                    # (the status names per block too: all labels' at once were a unicode
                    # array of 72 bytes a label, 144 MB at 2M labels)
                    for a in range(0, len(self), _CSV_BLOCK):      # bounded memory: strings per block
                        b = a + _CSV_BLOCK
                        cols = [self.status_names(a, b).tolist() if k == "status" else [str(x) for x in (
                            v[a:b].astype(np.int64) if k in _INT_FIELDS else v[a:b].astype(np.float64)).tolist()]
                            for k, v in self.columns.items()]
                        fh.write("\r\n".join(map(",".join, zip(*cols))))
                        fh.write("\r\n")
                return
            if fmt == "json":
                fh.write("[")
            block: list[str] = []
            for i, row in self._rows():
                if iterations:
                    # under a key of their own: "cg_steps" and "seconds" are per-label
                    # columns too, which same-named trajectories replaced (helper-52)
                    row["trajectory"] = {f: [float(x) for x in self.trajectory(i, f)] for f in ITER_FIELDS}
                block.append(("" if fmt == "jsonl" or i == 0 else ",\n") + json.dumps(row)
                             + ("\n" if fmt == "jsonl" else ""))
                if len(block) >= _JSON_BLOCK:
                    fh.write("".join(block))
                    block.clear()
            fh.write("".join(block))
            if fmt == "json":
                fh.write("]\n")


def _add_missing_columns(cols: dict) -> None:
    """Columns added since a version whose statistics a resume or merge may meet, with
    the value they would have had."""
    n = cols["label"].size
    # (not setdefault: its default would be allocated for every TrainingStats, a transient
    # int64 per label at the peak of concatenating 2M labels' statistics)
    if "zero_start" not in cols:
        cols["zero_start"] = np.zeros(n)
    if SHARED not in cols:
        cols[SHARED] = np.full(n, -1, dtype=np.int64)


# --------------------------------------------------------------------------- statistics files
# A model directory keeps the statistics of each shard beside it (stats/labels-A-B.npz,
# no pickles), so that a resumed or merged run still has the statistics of every label
# (the folder's name, STATS_DIR, is the model format's: headstart.model.manifest).


def stats_file_name(first_label: int, num_labels: int) -> str:
    return f"{STATS_DIR}/labels-{first_label:07d}-{first_label + num_labels - 1:07d}.npz"


def write_stats_file(model_dir: str | os.PathLike, stats: TrainingStats) -> Path | None:
    """Save the statistics of one contiguous run of labels (atomically)."""
    if len(stats) == 0:
        return None
    labels = stats["label"]
    first = int(labels[0])
    path = Path(model_dir) / stats_file_name(first, len(stats))
    path.parent.mkdir(exist_ok=True)
    arrays = {f"col_{k}": np.ascontiguousarray(v) for k, v in stats.columns.items()}
    arrays["iter_offsets"] = stats.iter_offsets.astype(np.int64)
    arrays.update({f"iter_{k}": np.asarray(v, dtype=np.float64) for k, v in stats.iterations.items()})
    meta = {k: v for k, v in stats.meta.items() if isinstance(v, (int, float, str, bool))}
    arrays["meta_json"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    # deflated (zlib level 1): labels that took another's solve, and the integer columns,
    # repeat themselves -- 2M labels, 20K of them with positives: 368 MB stored, ~1/13 of
    # that deflated (helper-65)
    write_npz(path, arrays, compress=True)
    return path


def load_stats_file(path: str | os.PathLike) -> TrainingStats:
    """Read a statistics file written by :func:`write_stats_file` (no pickles)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise ModelFormatError(f"{path}: unreadable statistics file: {e}") from None
    cols = {k[4:]: v for k, v in arrays.items() if k.startswith("col_")}
    iters = {k[5:]: v for k, v in arrays.items() if k.startswith("iter_") and k != "iter_offsets"}
    if "label" not in cols or "iter_offsets" not in arrays or set(iters) != set(ITER_FIELDS):
        raise ModelFormatError(f"{path}: not a headstart statistics file")
    meta = json.loads(bytes(arrays.get("meta_json", np.zeros(0, np.uint8))).decode("utf-8") or "{}")
    return TrainingStats(cols, arrays["iter_offsets"], iters, meta)


def clean_stats(model_dir: str | os.PathLike, manifest: dict[str, Any]) -> list[Path]:
    """Delete statistics files (and temporaries) whose shard is not listed in the manifest."""
    d = Path(model_dir) / STATS_DIR
    if not d.is_dir():
        return []
    listed = {Path(stats_file_name(s["first_label"], s["num_labels"])).name for s in manifest["shards"]}
    removed = []
    for f in d.iterdir():
        if f.is_file() and f.name not in listed:
            f.unlink()
            removed.append(f)
    return removed


def read_stats(model_dir: str | os.PathLike, first_label: int = 0, num_labels: int | None = None
               ) -> tuple[TrainingStats, list[tuple[int, int]]]:
    """Statistics of the finished labels in ``[first_label, first_label + num_labels)``.

    Returns ``(stats, without)``: ``without`` lists the finished label ranges that have no
    statistics file (shards written by ``save_model`` or copied without their stats), or
    a damaged one -- said in a warning: the statistics are a record of the training, not
    the model, so a truncated file must not stop a resume of a sound model.
    """
    model_dir = Path(model_dir)
    m = read_manifest(model_dir)
    stop = m["label_space"] if num_labels is None else first_label + num_labels
    parts, without = [], []
    for s in sorted(m["shards"], key=lambda e: e["first_label"]):
        a, b = s["first_label"], s["first_label"] + s["num_labels"]
        if b <= first_label or a >= stop:
            continue
        f = model_dir / stats_file_name(a, b - a)
        if not f.is_file():
            without.append((max(a, first_label), min(b, stop)))
            continue
        try:
            st = load_stats_file(f)
            lab = st["label"]
            if lab.size != b - a or lab[0] != a or lab[-1] != b - 1:
                raise ModelFormatError(f"{f}: statistics do not match the shard of labels [{a}, {b})")
        except ModelFormatError as e:
            log.warning("%s: the statistics of these labels are left out (the model's shard is not affected)", e)
            without.append((max(a, first_label), min(b, stop)))
            continue
        if a < first_label or b > stop:
            st = st.take(np.flatnonzero((lab >= first_label) & (lab < stop)))
        parts.append(st)
    return TrainingStats.concat(parts, consume=True), without
