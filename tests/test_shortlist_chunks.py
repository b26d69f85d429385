"""Shortlisted training runs on the core's chunk orchestration (training.chunks.run_chunks):
what the full trainer's loop does around its kernel -- memory trimmed after every chunk,
a Ctrl-C swallowed while compiling raised before training starts, the statistics' meta --
the shortlisted trainer does too, through the same code."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from headstart.params import TrainParams


def _problem(seed: int = 0, n: int = 120, d: int = 30, L: int = 40):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, random_state=rng, format="csr", dtype=np.float32)
    X.data[:] = rng.random(X.nnz).astype(np.float32) + 0.1
    Y = sp.csc_matrix((rng.random((n, L)) < 0.1).astype(np.float32))
    Y.sort_indices()
    S = sp.csc_matrix((rng.random((n, L)) < 0.3).astype(np.float32))
    S.sort_indices()
    return X, Y, S


def test_shortlisted_training_trims_memory_after_every_chunk(monkeypatch):
    """The full trainer returns malloc's free pages after every chunk (chunks.TRIM_MALLOC);
    the shortlisted trainer's own loop did so once, at the end."""
    from headstart.shortlist.training import train_shortlisted
    from headstart.training import pages

    X, Y, S = _problem()
    calls = []
    real = pages.release_free_memory
    monkeypatch.setattr(pages, "release_free_memory", lambda: (calls.append(1), real())[1])
    W, b, st = train_shortlisted(X, Y, S, TrainParams(threads=1), np.arange(40), chunk_size=8)
    assert len(st) == 40 and W.shape == (40, 30)
    assert len(calls) >= 40 // 8 + 1      # after the set-up and after each of the 5 chunks


def test_shortlisted_ctrl_c_swallowed_while_compiling_stops_before_training(monkeypatch):
    """llvmlite swallows a Ctrl-C raised while numba compiles; the command line remembers
    it (_threads.INTERRUPTS) and the full trainer raises it once its kernels are compiled.
    The shortlisted trainer compiled its kernel without that check and trained every label."""
    from headstart._threads import INTERRUPTS
    from headstart.shortlist import training

    X, Y, S = _problem(1)
    real = training.train_chunk

    def compile_swallows_ctrl_c(*args):
        out = real(*args)
        if args[9].size == 0:       # the compiling call, with no label
            INTERRUPTS.seen = True
        return out

    monkeypatch.setattr(training, "train_chunk", compile_swallows_ctrl_c)
    done = []
    try:
        with pytest.raises(KeyboardInterrupt):
            training.train_shortlisted(X, Y, S, TrainParams(threads=1), np.arange(40), progress=done.append)
    finally:
        INTERRUPTS.seen = False
    assert done == []


def test_shortlisted_statistics_as_the_full_trainers(monkeypatch):
    """The same meta as the full trainer (train_seconds), the sub-problem's columns kept
    also when no label is trained, and the chunks' threads named as before."""
    import threading

    from headstart.shortlist.training import stat_fields, train_shortlisted

    X, Y, S = _problem(2)
    names = set()
    from headstart.training import chunks

    real = chunks.chunk_stats

    def noting(*a, **kw):
        names.add(threading.current_thread().name.rsplit("_", 1)[0])
        return real(*a, **kw)

    monkeypatch.setattr(chunks, "chunk_stats", noting)
    _, _, st = train_shortlisted(X, Y, S, TrainParams(threads=2), np.arange(40), chunk_size=8)
    assert {"train_seconds", "wall_seconds", "compile_seconds"} <= set(st.meta)
    assert names == {"headstart-sl"}
    _, _, none = train_shortlisted(X, Y, S, TrainParams(threads=1), np.zeros(0, dtype=np.int64))
    assert len(none) == 0 and set(stat_fields()) <= set(none.columns)
