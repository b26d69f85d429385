"""The spooled model writer (headstart.model.spool): a model written while it is trained,
chunk by chunk from several threads, is the model save_model writes for the same
weights; gaps become separate shards; a failure leaves nothing behind."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp

from headstart.errors import ModelFormatError
from headstart.model import spool as spool_mod
from headstart.model.manifest import read_manifest
from headstart.model.model import OvAModel, Preprocessing
from headstart.model.reader import load_model
from headstart.model.spool import spooled_model
from headstart.model.writer import save_model
from headstart.params import TrainParams
from headstart.training.chunks import ChunkResult

D = 57


def _weights(rows: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    W = sp.random(rows, D, density=0.2, random_state=rng, format="csr", dtype=np.float32)
    W.data -= 0.5
    W.sort_indices()
    return W


def _chunks(first: int, sizes: list[int], seed: int = 0) -> list[ChunkResult]:
    out = []
    a = first
    for i, k in enumerate(sizes):
        W = _weights(k, seed + i)
        b = np.random.default_rng(seed + 100 + i).standard_normal(k).astype(np.float32)
        out.append(ChunkResult(np.arange(a, a + k), W, b, None))
        a += k
    return out


def _finish(spool, label_space: int, n_train: int = 11):
    return spool.finish(D, label_space, n_train, TrainParams(), Preprocessing(normalize=True),
                        np.arange(label_space, dtype=np.int64))


def test_spooled_model_is_the_saved_model(tmp_path, monkeypatch):
    # small blocks: the copy into the shard file crosses chunk and block boundaries
    monkeypatch.setattr(spool_mod, "BLOCK_BYTES", 64)
    chunks = _chunks(3, [5, 1, 17, 9, 4, 30])
    order = [4, 0, 5, 2, 1, 3]             # chunks arrive in any order, from several threads
    with spooled_model(tmp_path / "spooled") as spool:
        threads = [threading.Thread(target=spool.add, args=(chunks[i],)) for i in order]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert spool.nnz == sum(c.weights.nnz for c in chunks)
        entries = _finish(spool, 80)
        assert not (tmp_path / "spooled").exists()     # appears only at the end of the block
    assert len(entries) == 1
    W = sp.vstack([c.weights for c in chunks], format="csr")
    b = np.concatenate([c.intercept for c in chunks])
    save_model(OvAModel(W, b, D, 80, first_label=3, params=TrainParams(), preprocessing=Preprocessing(normalize=True),
                        label_counts=np.arange(80, dtype=np.int64), n_train=11), tmp_path / "saved")
    a, s = load_model(tmp_path / "spooled", allow_gaps=True), load_model(tmp_path / "saved", allow_gaps=True)
    assert a.first_label == s.first_label == 3 and a.num_labels == s.num_labels == 66
    assert (a.weights != s.weights).nnz == 0 and a.weights.has_canonical_format
    np.testing.assert_array_equal(a.intercept, s.intercept)
    np.testing.assert_array_equal(a.label_counts, s.label_counts)
    assert a.preprocessing == s.preprocessing and a.n_train == s.n_train == 11
    ma, ms = read_manifest(tmp_path / "spooled"), read_manifest(tmp_path / "saved")
    assert [(e["file"], e["first_label"], e["num_labels"], e["nnz"]) for e in ma["shards"]] == \
        [(e["file"], e["first_label"], e["num_labels"], e["nnz"]) for e in ms["shards"]]
    # the same arrays in the same member order: the files differ only in zip timestamps
    assert (tmp_path / "spooled" / ma["shards"][0]["file"]).stat().st_size == \
        (tmp_path / "saved" / ms["shards"][0]["file"]).stat().st_size
    assert not list((tmp_path / "spooled").rglob("*.spool")) and not list(tmp_path.glob(".*"))


def test_labels_left_untrained_become_gaps(tmp_path):
    """A time budget can stop chunks early: each contiguous run of trained labels is a
    shard, the rest are gaps (what --resume fills)."""
    c = _chunks(0, [6, 6, 6, 6])
    c[1] = ChunkResult(c[1].labels[:2], c[1].weights[:2], c[1].intercept[:2], None)   # cut inside the chunk
    del c[3]                                                                      # never started
    with spooled_model(tmp_path / "m") as spool:
        for ch in (c[2], c[0], c[1]):
            spool.add(ch)
        entries = _finish(spool, 24)
    assert [(e["first_label"], e["num_labels"]) for e in entries] == [(0, 8), (12, 6)]
    m = load_model(tmp_path / "m", allow_gaps=True)
    assert m.missing_ranges == [(8, 12), (18, 24)]
    W = m.weights.tocsr()
    np.testing.assert_array_equal(W[12:18].toarray(), c[2].weights.toarray())
    np.testing.assert_array_equal(W[6:8].toarray(), c[1].weights.toarray())
    with pytest.raises(ModelFormatError):
        load_model(tmp_path / "m")


def test_failure_leaves_nothing(tmp_path):
    target = tmp_path / "m"
    with pytest.raises(RuntimeError, match="boom"):
        with spooled_model(target) as spool:
            spool.add(_chunks(0, [4])[0])
            raise RuntimeError("boom")
    assert not target.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(ModelFormatError, match="not finished"):
        with spooled_model(target) as spool:
            spool.add(_chunks(0, [4])[0])
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_reported_with_the_file(tmp_path, monkeypatch):
    """"No space left on device" said which file (helper-46: the spool's and the atomic
    writes' errors had no file name); nothing is left behind."""
    import errno
    import os

    from headstart.io.atomic import atomic_write

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    target = tmp_path / "m"
    with monkeypatch.context() as mp:
        mp.setattr(spool_mod.os, "pwrite", full)
        with pytest.raises(OSError, match="No space left on device") as e:
            with spooled_model(target) as spool:
                spool.add(_chunks(0, [4])[0])
    assert e.value.errno == errno.ENOSPC and "/.m.tmp-" in e.value.filename   # the spool beside m
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError) as e:
        with atomic_write(tmp_path / "f.npz") as fh:
            full(fh)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "f.npz")
    assert list(tmp_path.iterdir()) == []


def test_bad_chunks_are_refused(tmp_path):
    with pytest.raises(ModelFormatError, match="NaN or infinite"):
        with spooled_model(tmp_path / "m") as spool:
            c = _chunks(0, [3])[0]
            c.weights.data[0] = np.nan
            spool.add(c)
    with pytest.raises(ModelFormatError, match="features"):
        with spooled_model(tmp_path / "m") as spool:
            spool.add(_chunks(0, [3])[0])
            spool.add(ChunkResult(np.arange(3, 5), sp.csr_matrix((2, D + 1), dtype=np.float32),
                                  np.zeros(2, np.float32), None))
    assert list(tmp_path.iterdir()) == []


def test_an_existing_other_directory_is_refused_before_training(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "notes.txt").write_text("mine")
    with pytest.raises(ModelFormatError, match="not a headstart model"):
        with spooled_model(tmp_path / "m"):
            pytest.fail("must not get here")
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine"
