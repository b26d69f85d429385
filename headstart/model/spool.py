"""A whole model written while it is trained, without its weights ever in memory.

``headstart train`` without ``--shard-size`` writes one shard file for all labels.
Keeping every finished chunk until the end to write it made the weights part of the
peak memory twice over: the chunks during training (packed, ~54 MB on debian-deps) and
the assembled model (94.5 MB) while it was written.  Instead, :class:`ModelSpool` is
the trainer's sink: each finished chunk's column indices and values are appended to a
spool file inside the model's temporary directory as the chunk arrives (chunks come
from several threads, in any order), and only 12 bytes per label (row length and
intercept) stay in memory.  When training ends, :meth:`ModelSpool.finish` writes the
shard file member by member (:func:`.archive.write_npz_stream`), copying the spool in
label order a few MiB at a time; then the spool is deleted and the manifest written.
The file is the one :func:`.writer.save_model` writes for the same weights, member for
member.

Labels that a time budget (``--timeout``) left untrained can split the range: one shard
is written per contiguous run of trained labels and the rest are gaps, which
``--resume`` fills.  The whole model directory is built under a temporary name and
renamed into place on success (:func:`spooled_model`), as every model is: a crash
leaves no half-written model, and the spool goes with the temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import ModelFormatError
from .archive import write_npz_stream
from .extras import write_extras
from .manifest import base_manifest, shard_file_name, write_manifest
from .ranges import contiguous_runs
from .shards import canonical_intercept, canonical_weights
from .writer import new_model_dir

SPOOL_NAME = "weights.spool"
#: bytes copied from the spool per write when the shard file is assembled
BLOCK_BYTES = 1 << 22


@contextlib.contextmanager
def spooled_model(path: str | os.PathLike) -> Iterator["ModelSpool"]:
    """A :class:`ModelSpool` for a new model at ``path`` (replacing only an existing
    headstart model that is complete, or an empty directory: an unfinished model, cut by
    a time budget, is never thrown away silently, as in sharded training).  The
    directory appears when the block ends after :meth:`ModelSpool.finish`; on an
    exception, or without ``finish``, nothing is left behind."""
    path = Path(os.path.abspath(path))
    # the lock held for the whole training: see writer.new_model_dir
    with new_model_dir(path, overwrite="complete", unknown_range_unfinished=False) as tmp:
        spool = ModelSpool(tmp)
        try:
            yield spool
        finally:
            spool.close()
        if not spool.finished:
            raise ModelFormatError(f"{path}: the spooled model was not finished; nothing written")


class ModelSpool:
    """The trainer's sink for a model written at the end (see the module docstring).
    :meth:`add` is thread safe."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._path = self.directory / SPOOL_NAME
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        self._lock = threading.Lock()
        self._end = 0
        self._n_features: int | None = None
        # per chunk: (labels, row lengths, intercept, offset of its indices in the spool, nnz)
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]] = []
        self.finished = False

    # ---- during training
    def add(self, chunk: Any) -> None:
        """Spool a finished :class:`~headstart.training.chunks.ChunkResult`."""
        labels = np.asarray(chunk.labels, dtype=np.int64)
        what = f"{self.directory}: chunk of labels [{labels[0] if labels.size else 0}, ...)"
        if labels.size == 0:
            return
        if labels.size > 1 and not np.all(np.diff(labels) > 0):
            raise ModelFormatError(f"{what}: labels are not ascending")
        W = chunk.weights
        d = int(W.shape[1])
        W = canonical_weights(W, d, what)   # no copy: the trainer's chunks are canonical
        b = canonical_intercept(chunk.intercept, W.shape[0], what)
        if W.shape[0] != labels.size:
            raise ModelFormatError(f"{what}: {W.shape[0]} weight rows for {labels.size} labels")
        lengths = np.diff(W.indptr).astype(np.int64)
        nnz = int(W.nnz)
        with self._lock:
            if self._n_features is None:
                self._n_features = d
            elif d != self._n_features:
                raise ModelFormatError(f"{what}: {d} features, earlier chunks had {self._n_features}")
            off = self._end
            _pwrite_all(self._fd, W.indices.astype(np.int32, copy=False), off, self._path)
            _pwrite_all(self._fd, W.data.astype(np.float32, copy=False), off + 4 * nnz, self._path)
            self._end = off + 8 * nnz
            self._chunks.append((labels.copy(), lengths, b.copy(), off, nnz))

    @property
    def nnz(self) -> int:
        with self._lock:
            return int(sum(c[4] for c in self._chunks))

    # ---- at the end
    def finish(self, n_features: int, label_space: int, n_train: int, params: Any, preprocessing: Any,
               label_counts: Any = None, extensions: dict[str, Any] | None = None,
               data_sha256: str | None = None, label_range: tuple[int, int] | None = None) -> list[dict[str, Any]]:
        """Write the extras, one shard per contiguous run of trained labels (copied from
        the spool), and the manifest; delete the spool.  Returns the shard entries."""
        if self._n_features is not None and self._n_features != int(n_features):
            raise ModelFormatError(f"{self.directory}: the chunks have {self._n_features} features, the model "
                                   f"{n_features}")
        manifest = base_manifest(n_features, label_space, n_train, params, preprocessing, extensions, data_sha256,
                                 label_range)
        write_extras(self.directory, manifest, preprocessing, label_counts)
        for run in _runs(sorted(self._chunks, key=lambda c: int(c[0][0]))):
            manifest["shards"].append(self._write_shard(run, int(n_features)))
        if manifest["shards"] and manifest["shards"][-1]["first_label"] + manifest["shards"][-1]["num_labels"] \
                > label_space:
            raise ModelFormatError(f"{self.directory}: trained labels beyond the label space [0, {label_space})")
        self.close()
        write_manifest(self.directory, manifest)
        self.finished = True
        return manifest["shards"]

    def _write_shard(self, run: list[tuple], n_features: int) -> dict[str, Any]:
        first = int(run[0][0][0])
        rows = int(sum(c[0].size for c in run))
        nnz = int(sum(c[5] for c in run))
        indptr = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(np.concatenate([c[1] for c in run]), out=indptr[1:])
        intercept = np.concatenate([c[2] for c in run]).astype(np.float32, copy=False)
        name = shard_file_name(first, rows)
        members = [
            ("indptr", np.int64, (rows + 1,), (indptr,)),
            ("indices", np.int32, (nnz,), self._pieces(run, 0)),
            ("data", np.float32, (nnz,), self._pieces(run, 1)),
            ("intercept", np.float32, (rows,), (intercept,)),
            ("shape", np.int64, (2,), (np.asarray([rows, n_features], dtype=np.int64),)),
            ("first_label", np.int64, (), (np.asarray(first, dtype=np.int64),)),
        ]
        digest = write_npz_stream(self.directory / name, members)
        return {"file": name, "first_label": first, "num_labels": rows, "nnz": nnz, "sha256": digest}

    def _pieces(self, run, which: int) -> Iterator[bytes]:
        """The spooled indices (``which`` 0) or values (1) of the run's pieces, in order,
        in blocks of at most :data:`BLOCK_BYTES`."""
        for piece in run:
            pos = piece[3 + which]
            end = pos + 4 * piece[5]
            while pos < end:
                block = os.pread(self._fd, min(BLOCK_BYTES, end - pos), pos)
                if not block:
                    raise ModelFormatError(f"{self._path}: spool file ends early")
                pos += len(block)
                yield block

    def close(self) -> None:
        """Close and delete the spool (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            with contextlib.suppress(FileNotFoundError):
                self._path.unlink()


def _pwrite_all(fd: int, a: np.ndarray, offset: int, path: Path) -> None:
    view = memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    while view.nbytes:
        try:
            n = os.pwrite(fd, view, offset)
        except OSError as e:   # a full disk: say which file (the spool of the model being trained)
            raise type(e)(e.errno, e.strerror, os.fspath(path)) from None
        view = view[n:]
        offset += n


def _runs(chunks):
    """Pieces of the chunks (sorted by first label) grouped into runs of consecutive
    labels.  A piece is (labels, row lengths, intercept, offset of its indices, offset of
    its values, nnz); a chunk whose own labels have gaps (the trainer's never do) is
    split at them."""
    runs: list[list] = []
    prev = None
    for labels, lengths, b, off, nnz in chunks:
        pos = 0
        for a, z in contiguous_runs(labels):
            k = int(lengths[a:z].sum())
            piece = (labels[a:z], lengths[a:z], b[a:z], off + 4 * pos, off + 4 * (nnz + pos), k)
            pos += k
            if prev is not None and int(piece[0][0]) == prev + 1:
                runs[-1].append(piece)
            else:
                runs.append([piece])
            prev = int(piece[0][-1])
    return runs
