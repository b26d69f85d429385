"""Coverage-guided fuzzing of every headstart reader with atheris (libFuzzer for Python).

One harness, six targets; the first byte of an input picks the target, the rest is the
file content:

    0 read_xmc            3 read_predictions
    1 read_libsvm         4 read_dense_features (.npy)
    2 read_label_file     5 read_manifest + load_model (manifest.json of a small model)
    6 iter_xmc_chunks with 1-row chunks and tiny read blocks, compared with read_xmc
    7 load_model with a forged shard archive (its sha256 written into the manifest, so the
      archive parser and the array checks are reached, not only the checksum)

Every input must either be read or raise DataFormatError / ModelFormatError naming
the file; anything else (and a disagreement between iter_xmc_chunks and read_xmc) is a
crash that libFuzzer saves as ``crash-<sha1>``.

Run it with the numba kernels interpreted so that atheris sees their branches
(``NUMBA_DISABLE_JIT=1``); fuzz/run.sh does that::

    fuzz/run.sh 60          # one minute
    fuzz/run.sh 3600 -jobs=2  # the long run of docs/robustness.md

Any libFuzzer flag can follow (``-runs=N``, ``-max_len=N``, ``-seed=N``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import atheris

# numba cannot compile instrumented byte code: instrument only when the kernels are interpreted
_JIT_OFF = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")
with atheris.instrument_imports(include=["headstart"]) if _JIT_OFF else contextlib.nullcontext():
    import numpy as np
    import scipy.sparse as sp

    from headstart.errors import DataFormatError, ModelFormatError
    from headstart.io import (iter_xmc_chunks, read_dense_features, read_label_file, read_libsvm,
                              read_predictions, read_xmc)
    from headstart.model.format import load_model, read_manifest

_TMP = Path("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
WORK = _TMP / f"headstart-atheris-{os.getpid()}"


def _remove_stale_work_dirs() -> None:
    """libFuzzer ends the process without Python's clean-up: remove the scratch
    directories of earlier runs whose process is gone."""
    for d in _TMP.glob("headstart-atheris-*"):
        try:
            os.kill(int(d.name.rsplit("-", 1)[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, PermissionError):
            pass
MODEL = WORK / "model"
FILE = WORK / "input"


def _make_model() -> None:
    """A copy of fuzz/seed_model (4 labels, 2 shards) whose manifest target 5 replaces;
    fuzz/corpus/manifest holds its manifest, so the checksums in the seed match."""
    shutil.copytree(Path(__file__).resolve().parent / "seed_model", MODEL)


def _check_csr(M, shape) -> None:
    assert isinstance(M, sp.csr_matrix) and M.shape == shape, (type(M), M.shape, shape)
    M.check_format(full_check=True)
    assert M.has_canonical_format
    assert np.all(np.isfinite(M.data)) and np.all(M.data != 0)


def _located(e: Exception, path: Path) -> None:
    assert str(path) in str(e), f"error does not name the file: {e}"


def one_input(data: bytes) -> None:
    if not data:
        return
    target, body = data[0] % 8, data[1:]
    path = FILE
    try:
        if target == 5:
            path = MODEL / "manifest.json"
            saved = path.read_bytes()
            path.write_bytes(body)
            try:
                read_manifest(MODEL)
                m = load_model(MODEL, allow_gaps=bool(data[0] & 0x80))
                assert np.all(np.isfinite(m.weights.data)) and m.weights.shape[1] == m.n_features
            finally:
                path.write_bytes(saved)
            return
        if target == 7:
            path = MODEL / "shards" / "labels-0000000-0000001.npz"
            saved = path.read_bytes(), (MODEL / "manifest.json").read_bytes()
            path.write_bytes(body)
            m = json.loads(saved[1])
            m["shards"][0]["sha256"] = hashlib.sha256(body).hexdigest()
            (MODEL / "manifest.json").write_text(json.dumps(m))
            try:
                model = load_model(MODEL)
                assert np.all(np.isfinite(model.weights.data)) and model.weights.shape == (4, 3)
            finally:
                path.write_bytes(saved[0])
                (MODEL / "manifest.json").write_bytes(saved[1])
            return
        path.write_bytes(body)
        if target == 0:
            X, Y = read_xmc(path)
            _check_csr(X, X.shape)
            _check_csr(Y, Y.shape)
        elif target == 1:
            X, Y = read_libsvm(path, zero_based=bool(data[0] & 0x80))
            _check_csr(X, X.shape)
            _check_csr(Y, (X.shape[0], Y.shape[1]))
        elif target == 2:
            Y = read_label_file(path)
            _check_csr(Y, Y.shape)
        elif target == 3:
            labels, scores = read_predictions(path)
            assert labels.shape == scores.shape and np.all(np.isfinite(scores))
        elif target == 4:
            X = read_dense_features(path)
            assert X.ndim == 2 and X.dtype == np.float32 and X.flags.c_contiguous
            assert np.all(np.isfinite(X))
        else:
            try:
                whole = read_xmc(path)
            except DataFormatError as e:
                whole = e
            try:
                chunks = list(iter_xmc_chunks(path, chunk_rows=1, block_bytes=1))
            except DataFormatError as e:
                assert isinstance(whole, DataFormatError), f"only iter_xmc_chunks fails: {e}"
                assert e.line == whole.line, (e.line, whole.line)
                raise
            assert not isinstance(whole, DataFormatError), f"only read_xmc fails: {whole}"
            if chunks:
                assert (sp.vstack([c[0] for c in chunks]) != whole[0]).nnz == 0
    except DataFormatError as e:
        _located(e, path)
    except ModelFormatError as e:
        _located(e, MODEL)


def main() -> None:
    _remove_stale_work_dirs()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    _make_model()
    try:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
