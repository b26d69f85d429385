"""Labels whose solve never leaves its start are solved again from zero (training.trainer.
Restart, and the shortlisted trainer alike).

A start far worse than zero with the logistic loss and an unregularised bias: every
score at -20 (``init bias``, ``bias_init=-20``) saturates the loss, the Hessian along the
bias is nearly 0, the first Newton step is so long that 20 halvings of the line search
never decrease f, and the label was left at its start (found by a probing helper: with
``init mean`` on scene every label, P@1 16.7 instead of 75).  Labels whose start is above
f(0) -- here those with more than ~3.5% positives -- now start from zero at once
(solver/newton.py, zero_if_worse); the restart catches the others that stay stuck.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import headstart
from headstart.estimator import prepare_data
from headstart.params import TrainParams
from headstart.shortlist import train_shortlisted
from headstart.solver.newton import LINE_SEARCH_FAILED
from headstart.training.trainer import train_labels

LABELS = np.arange(0, 64)


@pytest.fixture(scope="module")
def bib(bibtex_dir):
    X, Y = headstart.read_xmc(bibtex_dir / "train.txt.gz")
    p = TrainParams(threads=2, loss="logistic", init="bias", bias_init=-20.0)
    return prepare_data(X, Y, p), p


def _rows(W, idx):
    return W.tocsr()[idx].toarray()


def test_labels_stuck_at_their_start_are_solved_from_zero(bib):
    data, p = bib
    W, b, st = train_labels(data.X, data.Y, p, LABELS)
    Wz, bz, sz = train_labels(data.X, data.Y, p.replace(init="zero"), LABELS)
    redone = st.meta["restarted_from_zero"]
    assert redone > 0
    # none is left at its start; the restarted ones are exactly the zero start's solves
    stuck = (st["status"] == LINE_SEARCH_FAILED) & (st["iterations"] <= 1)
    assert not stuck.any()
    same = np.flatnonzero(st["f_init"] == sz["f_init"])       # f(0): their new start
    assert same.size > redone        # the restarted ones and those started from 0 at once
    np.testing.assert_array_equal(_rows(W, same), _rows(Wz, same))
    np.testing.assert_array_equal(b[same], bz[same])
    np.testing.assert_array_equal(st["iterations"][same], sz["iterations"][same])
    # the others solved from the asked start reach the same minimiser (a convex problem)
    # (to the stopping rule, ||g|| <= eps ||g(0)|| with eps = 0.01: f within ~1%)
    np.testing.assert_allclose(st["f_final"], sz["f_final"], rtol=1e-2)
    # one thread, small chunks, sharded through a sink: the same model
    W1, b1, s1 = train_labels(data.X, data.Y, p.replace(threads=1), LABELS, chunk_size=5)
    assert (W1 != W).nnz == 0 and np.array_equal(b1, b) and s1.meta["restarted_from_zero"] == redone


def test_a_run_without_stuck_labels_restarts_nothing(bib):
    data, p = bib
    _, _, st = train_labels(data.X, data.Y, p.replace(bias_init=-1.0), LABELS)
    assert st.meta["restarted_from_zero"] == 0


def test_shortlisted_training_restarts_alike(bib):
    data, p = bib
    every = sp.csc_matrix(np.ones(data.Y.shape, dtype=np.float32))
    W, b, st = train_shortlisted(data.X, data.Y, every, p, LABELS)
    Wz, bz, sz = train_shortlisted(data.X, data.Y, every, p.replace(init="zero"), LABELS)
    redone = st.meta["restarted_from_zero"]
    assert redone > 0 and not ((st["status"] == LINE_SEARCH_FAILED) & (st["iterations"] <= 1)).any()
    same = np.flatnonzero(st["f_init"] == sz["f_init"])
    assert same.size > redone
    np.testing.assert_array_equal(_rows(W, same), _rows(Wz, same))
    np.testing.assert_array_equal(b[same], bz[same])


def test_replace_rows_equals_stacking_and_picking():
    # the chunk's rows with the restarted ones put back, against scipy's vstack and row
    # picking (what replace_rows did before copying by runs): first, last, adjacent and
    # unsorted positions, empty rows on either side
    from headstart.training.chunks import replace_rows
    rng = np.random.default_rng(5)
    k, nv = 12, 30
    old = sp.random(k, nv, density=0.3, format="csr", random_state=rng, dtype=np.float32)
    old = sp.diags((np.arange(k) != 3).astype(np.float32)) @ old      # row 3 empty
    old = sp.csr_matrix(old)
    old.eliminate_zeros()
    for idx in ([0], [k - 1], [4, 5, 6], [9, 0, 3], list(range(k)), []):
        idx = np.array(idx, dtype=np.int64)
        new = sp.random(idx.size, nv, density=0.4, format="csr", random_state=rng, dtype=np.float32)
        if idx.size > 1:                                                  # an empty new row
            new = sp.csr_matrix(sp.diags((np.arange(idx.size) != 1).astype(np.float32)) @ new)
            new.eliminate_zeros()
        b_old, b_new = rng.normal(size=k), rng.normal(size=idx.size)
        got = replace_rows((old.indptr.astype(np.int64), old.indices, old.data, b_old), idx,
                           (new.indptr.astype(np.int64), new.indices, new.data, b_new))
        pick = np.arange(k)
        pick[idx] = k + np.arange(idx.size)
        want = sp.vstack([old, new], format="csr")[pick]
        assert np.array_equal(got[0], want.indptr) and np.array_equal(got[1], want.indices)
        assert np.array_equal(got[2], want.data) and got[1].dtype == old.indices.dtype
        b_want = b_old.copy()
        b_want[idx] = b_new
        assert np.array_equal(got[3], b_want)
        assert got[3] is not b_old
