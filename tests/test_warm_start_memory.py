"""Warm starts from weights in memory (``pretrained=`` a fitted estimator, a model or
``(coef, intercept)``; ``cross_validate(Cs="auto")``'s search over C): the same
``pretrained`` strategy as a saved model directory, bit for bit, with the same checks,
and without writing the model to disk."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse as sp

from headstart import ModelFormatError, OvAClassifier, TrainParams
from headstart.errors import ParameterError
from headstart.init.pretrained import IN_MEMORY, InMemoryWeights
from headstart.model.model import OvAModel
from headstart.model.writer import save_model

import _reference as ref


@pytest.fixture(scope="module")
def medical():
    X, Y = ref.checked_dataset("medical")
    return sp.csr_matrix(X), sp.csr_matrix(Y)


def _same_fit(a: OvAClassifier, b: OvAClassifier) -> None:
    for key in ("iterations", "f_init", "f_final"):
        np.testing.assert_array_equal(a.stats_[key], b.stats_[key])
    assert (a.coef_ != b.coef_).nnz == 0
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


def _fit(X, Y, pretrained, **kw):
    return OvAClassifier(init="pretrained", pretrained=pretrained, threads=1, **kw).fit(X, Y)


def test_in_memory_start_is_the_directory_start_bit_for_bit(medical, tmp_path):
    """Every in-memory form starts each label where the saved model does: same start
    (f_init), same iterations, same weights -- also from a label-range model, whose
    coef_ / intercept_ hold empty rows at -inf for the labels it did not train."""
    X, Y = medical
    base = OvAClassifier(init="aop", C=0.5, threads=1).fit(X, Y)
    base.save(str(tmp_path / "m"))
    disk = _fit(X, Y, str(tmp_path / "m"), C=2.0)
    for src in (base, base.model_, (base.coef_, base.intercept_), InMemoryWeights.of_model(base.model_)):
        _same_fit(_fit(X, Y, src, C=2.0), disk)
    assert np.any(disk.stats_["iterations"] > 0)

    part = OvAClassifier(init="aop", C=0.5, threads=1).fit(X, Y, first_label=10, num_labels=12)
    part.save(str(tmp_path / "r"))
    disk = _fit(X, Y, str(tmp_path / "r"), C=2.0)
    for src in (part, part.model_, (part.coef_, part.intercept_)):
        _same_fit(_fit(X, Y, src, C=2.0), disk)


def test_in_memory_weights_are_rounded_as_a_saved_model_stores_them(medical, tmp_path):
    """Weights in float64 (a model made by hand, (coef, intercept) of another library):
    a saved model holds them in float32, and so does the in-memory start, so that both
    are the same start -- without the rounding they differ in the last bits."""
    X, Y = medical
    base = OvAClassifier(init="aop", C=0.5, threads=1).fit(X, Y)
    W = base.model_.weights.astype(np.float64) * (1 + 1e-7)
    b = base.model_.intercept.astype(np.float64) * (1 + 1e-7)
    assert np.any(W.data.astype(np.float32) != W.data)
    model = OvAModel(weights=W, intercept=b, n_features=X.shape[1], label_space=Y.shape[1])
    save_model(model, str(tmp_path / "m"))
    disk = _fit(X, Y, str(tmp_path / "m"))
    _same_fit(_fit(X, Y, model), disk)
    _same_fit(_fit(X, Y, (W, b)), disk)
    _same_fit(_fit(X, Y, (W.toarray(), b)), disk)      # dense coef, as scikit-learn's


def test_the_estimator_continues_from_its_own_weights(medical, tmp_path):
    """scikit-learn's warm_start: ``pretrained=clf`` is the estimator's model_ when fit
    starts; the model then records the start as in memory, not its arrays."""
    X, Y = medical
    clf = OvAClassifier(C=0.5, threads=1).fit(X, Y)
    clf.save(str(tmp_path / "m"))
    with pytest.warns(UserWarning, match="init='pretrained' is used, implied by pretrained"):
        clf.set_params(C=2.0, pretrained=clf).fit(X, Y)
    _same_fit(clf, _fit(X, Y, str(tmp_path / "m"), C=2.0))
    assert clf.model_.params.pretrained == IN_MEMORY and clf.model_.params.init == "pretrained"
    assert repr(clf) == f"OvAClassifier(C=2.0, pretrained=<OvAClassifier of {Y.shape[1]} labels x {X.shape[1]} " \
                        "features>, threads=1)"
    # the recorded parameters cannot start a training: the weights were not saved
    with pytest.raises(ParameterError, match="started from weights in memory, which were not saved"):
        OvAClassifier(**clf.model_.params.to_dict()).fit(X, Y)


def test_in_memory_start_is_checked_as_a_directory_is(medical, caplog):
    X, Y = medical
    n, d = X.shape
    L = Y.shape[1]
    base = OvAClassifier(init="aop", C=0.5, threads=1).fit(X, Y)
    # fewer features or labels than the model: other data (as from a directory)
    with pytest.raises(ModelFormatError, match=f"has {d} features, the training data only {d - 1}"):
        _fit(X[:, :d - 1], Y, base)
    with pytest.raises(ModelFormatError, match=f"label space of {L}, the training data only {L - 1}"):
        _fit(X, Y[:, :L - 1], base.model_)
    # more: a warning, the new ones start from 0
    X2 = sp.hstack([X, sp.csr_matrix((n, 2), dtype=np.float32)], format="csr")
    with caplog.at_level(logging.WARNING, logger="headstart"):
        _fit(X2, Y, (base.coef_, base.intercept_))
    assert f"has {d} features and {L} labels, the training data {d + 2} and {L}" in caplog.text
    # what is not weights, by name
    with pytest.raises(ParameterError, match="is an unfitted OvAClassifier: fit it first"):
        _fit(X, Y, OvAClassifier())
    with pytest.raises(ParameterError, match="must be a model directory .* got a csr_matrix"):
        _fit(X, Y, base.coef_)
    with pytest.raises(ParameterError, match=r"intercept has shape \(3,\), expected \(45,\)"):
        _fit(X, Y, (base.coef_, np.zeros(3)))
    bad = base.coef_.copy()
    bad.data[0] = np.nan
    with pytest.raises(ParameterError, match="NaN or infinite"):
        _fit(X, Y, (bad, base.intercept_))
    # a label tree's rows are nodes
    tree = OvAModel(weights=base.model_.weights, intercept=base.model_.intercept, n_features=d, label_space=L,
                    extensions={"tree": {}})
    with pytest.raises(ModelFormatError, match="label-tree model"):
        _fit(X, Y, tree)
    # given while another init is asked for: nothing would read it (as a directory)
    with pytest.raises(ParameterError, match="pretrained is read only with init pretrained"):
        OvAClassifier(init="zero", pretrained=base, threads=1).fit(X, Y)


def test_sharded_training_starts_from_memory_and_dask_refuses_it(medical, tmp_path):
    """Local sharded training runs in this process: the start works there (the manifest
    records it as in memory).  Dask's tasks would need the rows shipped through the
    scheduler: refused, before anything is prepared or written."""
    from headstart.distributed import train_sharded
    from headstart.distributed.dask_backend import train_dask
    from headstart.model.manifest import read_manifest
    from headstart.model.reader import load_model

    X, Y = medical
    base = OvAClassifier(init="aop", C=0.5, threads=1).fit(X, Y)
    base.save(str(tmp_path / "m"))
    p = TrainParams(init="pretrained", pretrained=base, C=2.0, threads=1)
    train_sharded(X, Y, p, str(tmp_path / "s"), shard_size=20)
    assert read_manifest(str(tmp_path / "s"))["params"]["pretrained"] == IN_MEMORY
    disk = _fit(X, Y, str(tmp_path / "m"), C=2.0)
    assert (load_model(str(tmp_path / "s")).weights != disk.model_.weights).nnz == 0
    with pytest.raises(ParameterError, match="weights in memory cannot start Dask training"):
        train_dask(X, Y, p, str(tmp_path / "d"), n_workers=1)
    assert not (tmp_path / "d").exists()


def test_cv_auto_is_the_saved_model_search_without_saving(monkeypatch, tmp_path):
    """cross_validate(Cs="auto") warm-starts each fold from its weights at the C before
    in memory: the same candidates, metrics and best C as the saved-model start it
    replaced (each fold's model written to a directory and read back, rebuilt here by
    patching the start), and no model is written."""
    from headstart.tuning import cross_validate
    from headstart.tuning import cv as cv_module

    X, Y = ref.checked_dataset("bibtex")
    X, Y = X[:600], sp.csr_matrix(Y[:600, :12])
    p = TrainParams(threads=1)

    def no_saving(*a, **k):
        raise AssertionError("the search saved a model")

    monkeypatch.setattr("headstart.model.writer.save_model", no_saving)
    mem = cross_validate(X, Y, p, folds=2, Cs="auto", k=3, first_C=2.0 ** -3, max_C=64.0)
    monkeypatch.undo()

    saved = iter(range(10 ** 6))

    def to_directory(model, what=""):       # the search before: save, start from the directory
        path = str(tmp_path / f"m{next(saved)}")
        save_model(model, path)
        return path

    monkeypatch.setattr(cv_module.InMemoryWeights, "of_model", staticmethod(to_directory))
    disk = cross_validate(X, Y, p, folds=2, Cs="auto", k=3, first_C=2.0 ** -3, max_C=64.0)
    assert next(saved) == 2 * len(disk.candidates)          # each fold at each C was saved
    assert list(mem.candidates) == list(disk.candidates) and len(mem.candidates) > 3
    assert mem.metrics == disk.metrics and mem.best == disk.best and mem.stop == disk.stop
