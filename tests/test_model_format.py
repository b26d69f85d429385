"""The sharded model format: round trips, atomicity, tampering, merging, resuming."""

from __future__ import annotations

import json
import os
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from headstart.errors import ModelFormatError
from headstart.model import (ModelWriter, OvAModel, Preprocessing, iter_shards, load_model, merge_models,
                             read_manifest, save_model)
from headstart.io.atomic import atomic_directory
from headstart.model import archive, shards, writer
from headstart.model.manifest import shard_file_name
from headstart.params import TrainParams


def random_model(seed=0, num_labels=37, n_features=23, label_space=None, first_label=0, density=0.3,
                 tfidf=False, normalize=False, params=None):
    rng = np.random.default_rng(seed)
    label_space = label_space or first_label + num_labels
    w = sp.random(num_labels, n_features, density=density, format="csr", dtype=np.float32, random_state=rng)
    w.data = (w.data - 0.5).astype(np.float32)
    idf = rng.random(n_features).astype(np.float32) if tfidf else None
    return OvAModel(weights=w, intercept=rng.normal(size=num_labels).astype(np.float32),
                    n_features=n_features, label_space=label_space, first_label=first_label,
                    params=params or TrainParams(C=2.0, tfidf=tfidf, normalize=normalize),
                    preprocessing=Preprocessing(normalize=normalize, idf=idf),
                    label_counts=rng.integers(0, 50, size=label_space), n_train=123)


def assert_same_model(a: OvAModel, b: OvAModel, ignore_threads: bool = False) -> None:
    assert a.weights.shape == b.weights.shape
    assert (a.weights != b.weights).nnz == 0
    assert np.array_equal(a.intercept, b.intercept)
    assert b.intercept.dtype == np.float32 and b.weights.dtype == np.float32
    assert (a.n_features, a.label_space, a.first_label, a.n_train) == (b.n_features, b.label_space,
                                                                        b.first_label, b.n_train)
    assert a.params.replace(threads=0) == b.params.replace(threads=0) if ignore_threads else a.params == b.params
    assert a.preprocessing.normalize == b.preprocessing.normalize
    assert (a.preprocessing.idf is None) == (b.preprocessing.idf is None)
    if a.preprocessing.idf is not None:
        assert np.array_equal(a.preprocessing.idf, b.preprocessing.idf)
    assert np.array_equal(a.label_counts, b.label_counts)


def rewrite_manifest(path: Path, change) -> None:
    m = json.loads((path / "manifest.json").read_text())
    change(m)
    (path / "manifest.json").write_text(json.dumps(m))


def sha(path: Path) -> str:
    return archive.sha256_file(path)


# --------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("shard_size", [None, 1, 5, 16, 37, 1000])
@pytest.mark.parametrize("pre", [(False, False), (True, True)])
def test_round_trip(tmp_path, shard_size, pre):
    model = random_model(num_labels=37, tfidf=pre[0], normalize=pre[1])
    save_model(model, tmp_path / "m", shard_size=shard_size)
    m = read_manifest(tmp_path / "m")
    expected = 1 if shard_size is None else -(-37 // shard_size)
    assert len(m["shards"]) == expected
    assert m["format"] == "headstart-model" and m["version"] == 1
    assert m["params"] == model.params.to_dict()
    assert_same_model(model, load_model(tmp_path / "m"))


@settings(max_examples=25, deadline=None)
@given(num_labels=st.integers(1, 40), n_features=st.integers(1, 30), density=st.floats(0, 1),
       shard_size=st.one_of(st.none(), st.integers(1, 50)), first_label=st.integers(0, 5),
       seed=st.integers(0, 2**31))
def test_round_trip_property(tmp_path_factory, num_labels, n_features, density, shard_size, first_label, seed):
    d = tmp_path_factory.mktemp("prop") / "m"
    model = random_model(seed, num_labels, n_features, first_label=first_label, density=density,
                         label_space=first_label + num_labels + 3)
    save_model(model, d, shard_size=shard_size)
    back = load_model(d, allow_gaps=True)
    assert_same_model(model, back)
    pieces = list(iter_shards(d))
    assert [p[0] for p in pieces] == sorted(p[0] for p in pieces)
    assert sp.vstack([p[1] for p in pieces]).shape == model.weights.shape


def test_label_counts_optional_and_shard_contents(tmp_path):
    model = random_model()
    model.label_counts = None
    save_model(model, tmp_path / "m", shard_size=10)
    assert load_model(tmp_path / "m").label_counts is None
    npz = np.load(tmp_path / "m" / "shards" / "labels-0000010-0000019.npz", allow_pickle=False)
    assert npz["indptr"].dtype == np.int64 and npz["indices"].dtype == np.int32
    assert npz["data"].dtype == np.float32 and npz["intercept"].dtype == np.float32
    assert list(npz["shape"]) == [10, 23] and int(npz["first_label"]) == 10


def test_unsorted_duplicate_weights_are_canonicalised(tmp_path):
    w = sp.csr_matrix((np.array([1, 2, 3], np.float32), np.array([2, 0, 2]), np.array([0, 3])), shape=(1, 4))
    model = OvAModel(weights=w, intercept=np.zeros(1, np.float32), n_features=4, label_space=1)
    save_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.weights.toarray().tolist() == [[2, 0, 4, 0]]


def test_empty_model(tmp_path):
    model = OvAModel(weights=sp.csr_matrix((0, 5), dtype=np.float32), intercept=np.zeros(0, np.float32),
                     n_features=5, label_space=0)
    save_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.num_labels == 0 and back.n_features == 5


# --------------------------------------------------------------------------- atomicity
def test_crash_during_save_leaves_nothing(tmp_path, monkeypatch):
    calls = {"n": 0}
    real = writer.write_shard_file

    def crashing(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated crash")
        return real(*a, **kw)

    monkeypatch.setattr(writer, "write_shard_file", crashing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        save_model(random_model(), tmp_path / "m", shard_size=5)
    assert list(tmp_path.iterdir()) == []


def test_crash_during_save_keeps_old_model(tmp_path, monkeypatch):
    old = random_model(seed=1)
    save_model(old, tmp_path / "m", shard_size=7)

    def crash(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(writer, "write_manifest", crash)
    with pytest.raises(KeyboardInterrupt):
        save_model(random_model(seed=2), tmp_path / "m")
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["m"]
    assert_same_model(old, load_model(tmp_path / "m"))


def test_crash_while_installing_keeps_old_model(tmp_path, monkeypatch):
    old = random_model(seed=1)
    save_model(old, tmp_path / "m")
    real = os.replace
    state = {"n": 0}

    def flaky(src, dst):
        if Path(src).name.startswith(".m.tmp-"):
            state["n"] += 1
            raise OSError("simulated rename failure")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError, match="simulated"):
        save_model(random_model(seed=2), tmp_path / "m")
    monkeypatch.undo()
    assert state["n"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["m"]
    assert_same_model(old, load_model(tmp_path / "m"))


def test_save_replaces_model_but_refuses_other_directories(tmp_path):
    save_model(random_model(seed=1), tmp_path / "m", shard_size=3)
    new = random_model(seed=2, num_labels=5)
    save_model(new, tmp_path / "m")
    assert_same_model(new, load_model(tmp_path / "m"))
    assert len(list((tmp_path / "m" / "shards").iterdir())) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["m"]

    (tmp_path / "empty").mkdir()
    save_model(new, tmp_path / "empty")
    assert_same_model(new, load_model(tmp_path / "empty"))

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("keep me")
    with pytest.raises(ModelFormatError, match="not a headstart model"):
        save_model(new, tmp_path / "data")
    assert (tmp_path / "data" / "precious.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelFormatError, match="not a directory"):
        save_model(new, tmp_path / "file")


def test_save_through_a_symbolic_link_replaces_its_target(tmp_path):
    """`current -> run1`: saving to `current` keeps the link and puts the new model in
    run1, which everything following the link reads (helper-109: the link was replaced by
    a directory and run1 kept the old model); a link to a user's directory is refused."""
    save_model(random_model(seed=1), tmp_path / "run1")
    os.symlink("run1", tmp_path / "current")
    new = random_model(seed=2, num_labels=5)
    save_model(new, tmp_path / "current")
    assert os.path.islink(tmp_path / "current")
    assert_same_model(new, load_model(tmp_path / "run1"))
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["current", "run1"]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("keep me")
    os.symlink("data", tmp_path / "to_data")
    with pytest.raises(ModelFormatError, match="not a headstart model"):
        save_model(new, tmp_path / "to_data")
    assert (tmp_path / "data" / "precious.txt").read_text() == "keep me" and os.path.islink(tmp_path / "to_data")


def test_a_model_holding_a_users_file_is_not_replaced(tmp_path):
    """Replacing a model deletes its directory whole: one that also holds a file headstart
    did not write is refused by every writer (save_model, ModelWriter.create with
    overwrite), naming the file, which is still there afterwards; headstart's own entries
    (statistics, a killed write's temporary) do not stop a replacement."""
    from headstart.training.stats import STATS_DIR

    assert set(writer.MODEL_ENTRIES) == {"manifest.json", "shards", STATS_DIR, "preprocessing.npz",
                                         "label_counts.npz"}
    m = tmp_path / "m"
    save_model(random_model(seed=1), m)
    before = read_manifest(m)
    (m / "notes.txt").write_text("my notes")
    new = random_model(seed=2, num_labels=5)
    for write in (lambda: save_model(new, m),
                  lambda: ModelWriter.create(m, 23, 5, new.params, overwrite=True)):
        with pytest.raises(ModelFormatError, match=r"m: is a headstart model but also holds notes.txt, which "
                                                   "headstart did not write; refusing to replace it"):
            write()
        assert (m / "notes.txt").read_text() == "my notes"
        assert read_manifest(m) == before
    with pytest.raises(ModelFormatError, match="notes.txt"):
        writer.refuse_foreign(m)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]

    (m / "notes.txt").unlink()
    (m / STATS_DIR).mkdir()
    (m / ".manifest.json.0123456789ab.tmp").write_text("{")
    save_model(new, m)
    assert_same_model(new, load_model(m))
    assert sorted(p.name for p in m.iterdir()) == ["label_counts.npz", "manifest.json", "preprocessing.npz",
                                                    "shards"]
    # a directory without a manifest names what it holds
    (tmp_path / "d").mkdir()
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (tmp_path / "d" / name).write_text(name)
    with pytest.raises(ModelFormatError, match=r"is not a headstart model \(no manifest.json; it holds a.txt, "
                                               r"b.txt, c.txt and 1 more\)"):
        save_model(new, tmp_path / "d")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["a.txt", "b.txt", "c.txt", "d.txt"]


# --------------------------------------------------------------------------- tampering
@pytest.fixture
def saved(tmp_path):
    model = random_model()
    save_model(model, tmp_path / "m", shard_size=10)
    return tmp_path / "m"


def test_missing_manifest(saved):
    (saved / "manifest.json").unlink()
    with pytest.raises(ModelFormatError, match="missing manifest"):
        load_model(saved)
    with pytest.raises(ModelFormatError, match="does not exist"):
        load_model(saved.parent / "nowhere")


def test_bad_json_reports_line_and_column(saved):
    (saved / "manifest.json").write_text('{\n  "format": "headstart-model",\n  "version": 1,,\n}')
    with pytest.raises(ModelFormatError, match=r"manifest\.json:3:\d+: manifest is not valid JSON"):
        load_model(saved)


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(format="other"), "unknown format"),
    (lambda m: m.update(version=2), "unsupported format version 2"),
    (lambda m: m.pop("n_features"), "missing field"),
    (lambda m: m.update(surprise=1), "unknown field"),
    (lambda m: m["params"].update(C=-1), "invalid params"),
    (lambda m: m["params"].update(bogus=1), "invalid params"),
    (lambda m: m["shards"][0].update(file="../../etc/passwd"), "expected 'shards/labels-0000000-0000009.npz'"),
    (lambda m: m["shards"][1].update(first_label=5, file="shards/labels-0000005-0000014.npz"), "overlap"),
    (lambda m: m["shards"][0].update(num_labels=100), "outside the label space"),
    (lambda m: m["shards"][0].update(sha256="zz"), "not a sha256"),
    (lambda m: m.update(preprocessing={"normalize": 1, "tfidf": False}), "preprocessing"),
])
def test_invalid_manifest(saved, change, message):
    rewrite_manifest(saved, change)
    with pytest.raises(ModelFormatError, match=message):
        load_model(saved)


def test_checksum_mismatch(saved):
    shard = saved / "shards" / "labels-0000010-0000019.npz"
    raw = bytearray(shard.read_bytes())
    raw[-30] ^= 0xFF
    shard.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match="labels-0000010-0000019.npz: checksum mismatch"):
        load_model(saved)
    rewrite_manifest(saved, lambda m: m["shards"][0].update(sha256="0" * 64))
    with pytest.raises(ModelFormatError, match="labels-0000000-0000009.npz: checksum mismatch"):
        load_model(saved)


def test_tampered_extra_file(saved):
    (saved / "label_counts.npz").write_bytes(b"garbage")
    with pytest.raises(ModelFormatError, match="label_counts.npz: checksum mismatch"):
        load_model(saved)


def test_missing_shard_file(saved):
    (saved / "shards" / "labels-0000020-0000029.npz").unlink()
    with pytest.raises(ModelFormatError, match="labels-0000020-0000029.npz: file listed in the manifest is missing"):
        load_model(saved)


def _replace_shard(path: Path, index: int, payload: bytes) -> None:
    m = json.loads((path / "manifest.json").read_text())
    f = path / m["shards"][index]["file"]
    f.write_bytes(payload)
    m["shards"][index]["sha256"] = sha(f)
    (path / "manifest.json").write_text(json.dumps(m))


def _npz_bytes(tmp_path: Path, allow_pickle=False, **arrays) -> bytes:
    f = tmp_path / "scratch.npz"
    np.savez(f, allow_pickle=allow_pickle, **arrays)
    return f.read_bytes()


def _good_arrays(path: Path, index: int = 0) -> dict:
    m = read_manifest(path)
    with np.load(path / m["shards"][index]["file"], allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def test_truncated_npz(saved):
    raw = (saved / "shards" / "labels-0000000-0000009.npz").read_bytes()
    # the checksum catches it first ...
    (saved / "shards" / "labels-0000000-0000009.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelFormatError, match="checksum mismatch"):
        load_model(saved)
    # ... and with a matching checksum the parser still refuses it
    for cut in (len(raw) // 2, 40, 0):
        _replace_shard(saved, 0, raw[:cut])
        with pytest.raises(ModelFormatError, match="truncated or corrupt"):
            load_model(saved)


def test_model_files_are_stored_and_statistics_deflated(saved, tmp_path):
    """Every file of a model is a stored (uncompressed) zip: every earlier reader refuses a
    member claiming more bytes than its file holds, as a deflated one may (helper-66);
    the statistics beside it are deflated (numpy reads either)."""
    import zipfile

    from headstart.training.stats import TrainingStats, load_stats_file, write_stats_file

    files = sorted(saved.rglob("*.npz"))
    assert any(f.name == "label_counts.npz" for f in files) and any("shards" in f.parts for f in files)
    for f in files:
        with zipfile.ZipFile(f) as z:
            assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}, f
    st = TrainingStats.from_chunks([])
    st = TrainingStats({"label": np.arange(5, 9), **{k: np.zeros(4) for k in st.columns if k != "label"}},
                       np.zeros(5, dtype=np.int64), {k: np.zeros(0) for k in st.iterations})
    path = write_stats_file(tmp_path, st)
    with zipfile.ZipFile(path) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    assert np.array_equal(load_stats_file(path)["label"], np.arange(5, 9))


def test_object_array_refused(saved, tmp_path):
    arrs = _good_arrays(saved)
    arrs["data"] = np.array([{"evil": 1}, "x"] + [None] * (arrs["data"].shape[0] - 2), dtype=object)
    _replace_shard(saved, 0, _npz_bytes(tmp_path, allow_pickle=True, **arrs))
    with pytest.raises(ModelFormatError, match="object \\(pickled\\) array"):
        load_model(saved)
    # a bare pickled .npy where an .npz is expected
    f = tmp_path / "obj.npy"
    np.save(f, np.array([object()], dtype=object), allow_pickle=True)
    _replace_shard(saved, 0, f.read_bytes())
    with pytest.raises(ModelFormatError):
        load_model(saved)


@pytest.mark.parametrize("mutate, message", [
    (lambda a: a.update(data=a["data"].astype(np.float64)), "dtype float64, expected float32"),
    (lambda a: a.update(indices=a["indices"].astype(np.int64)), "dtype int64, expected int32"),
    (lambda a: a.update(intercept=a["intercept"][:-1]), "intercept.*shape"),
    (lambda a: a.update(shape=np.array([10, 99], np.int64)), "shape mismatch"),
    (lambda a: a.update(indptr=a["indptr"][::-1].copy()), "indptr"),
    (lambda a: a.update(indices=np.full_like(a["indices"], 23)), "out of range"),
    (lambda a: a.update(data=np.full_like(a["data"], np.nan)), "NaN"),
    (lambda a: a.update(first_label=np.array(3, np.int64)), "first_label"),
    (lambda a: a.pop("intercept"), "missing array"),
    (lambda a: a.update(extra=np.zeros(1)), "unexpected array"),
    (lambda a: a.update(indices=a["indices"][:-1]), "indices but"),
])
def test_bad_shard_arrays(saved, tmp_path, mutate, message):
    arrs = _good_arrays(saved)
    mutate(arrs)
    _replace_shard(saved, 0, _npz_bytes(tmp_path, **arrs))
    with pytest.raises(ModelFormatError, match=message):
        load_model(saved)


def test_unsorted_indices_refused(saved, tmp_path):
    arrs = _good_arrays(saved)
    ip, ind = arrs["indptr"], arrs["indices"]
    row = int(np.argmax(np.diff(ip) >= 2))
    a = ip[row]
    ind[a], ind[a + 1] = ind[a + 1], ind[a]
    _replace_shard(saved, 0, _npz_bytes(tmp_path, **arrs))
    with pytest.raises(ModelFormatError, match="not sorted and unique"):
        load_model(saved)


# --------------------------------------------------------------------------- gaps
def test_gaps(tmp_path):
    model = random_model(num_labels=30, label_space=30)
    w = ModelWriter.create(tmp_path / "m", 23, 30, model.params, model.preprocessing, model.label_counts, 123)
    w.add_shard(0, model.weights[0:10], model.intercept[0:10])
    w.add_shard(20, model.weights[20:25], model.intercept[20:25])
    with pytest.raises(ModelFormatError, match=r"missing \[10, 20\), \[25, 30\)"):
        load_model(tmp_path / "m")
    got = load_model(tmp_path / "m", allow_gaps=True)
    assert got.first_label == 0 and got.num_labels == 25
    assert got.missing_ranges == [(10, 20), (25, 30)]
    assert got.weights[10:20].nnz == 0 and not got.intercept[10:20].any()
    assert (got.weights[20:25] != model.weights[20:25]).nnz == 0
    # saving a gappy model keeps the gaps (the holes are not written as trained labels)
    save_model(got, tmp_path / "again")
    assert load_model(tmp_path / "again", allow_gaps=True).missing_ranges == [(10, 20), (25, 30)]


# --------------------------------------------------------------------------- writer / resume
def test_writer_resume(tmp_path):
    model = random_model(num_labels=40, label_space=40)
    p = model.params
    w = ModelWriter.create(tmp_path / "m", 23, 40, p, model.preprocessing, model.label_counts, 123)
    assert w.missing_ranges() == [(0, 40)] and w.finished_ranges() == []
    w.add_shard(10, model.weights[10:20], model.intercept[10:20])
    w.add_shard(0, model.weights[0:10], model.intercept[0:10])
    w.add_shard(30, model.weights[30:40], model.intercept[30:40])
    assert w.finished_ranges() == [(0, 20), (30, 40)]
    assert w.missing_ranges() == [(20, 30)]
    assert w.missing_ranges(15, 20) == [(20, 30)]
    assert w.missing_ranges(0, 20) == []

    with pytest.raises(ModelFormatError, match=r"overlaps the finished shard labels \[10, 20\)"):
        w.add_shard(15, model.weights[15:25], model.intercept[15:25])
    with pytest.raises(ModelFormatError, match="outside the label space"):
        w.add_shard(35, model.weights[0:10], model.intercept[0:10])
    with pytest.raises(ModelFormatError, match="columns"):
        w.add_shard(20, model.weights[20:30, :5], model.intercept[20:30])

    # a crash between shard file and manifest: an unlisted file, ignored and cleaned
    orphan = tmp_path / "m" / shard_file_name(20, 10)
    shards.write_shard_file(tmp_path / "m", 20, model.weights[20:30], model.intercept[20:30])
    (tmp_path / "m" / "shards" / (".x.tmp-" + "a" * 32)).write_bytes(b"half")
    (tmp_path / "m" / ".manifest.json.0123456789ab.tmp").write_bytes(b"half")  # headstart.io.atomic style
    (tmp_path / "m" / "shards" / "notes.txt").write_text("not ours")
    assert orphan.exists()
    with pytest.raises(ModelFormatError, match="incomplete"):
        load_model(tmp_path / "m")

    with pytest.raises(ModelFormatError, match=r"parameter C is 2\.0 in the model but 3\.0 now"):
        ModelWriter.open(tmp_path / "m", TrainParams(C=3.0))
    with pytest.raises(ModelFormatError, match="n_features=23 but the data has n_features=24"):
        ModelWriter.open(tmp_path / "m", p, n_features=24)
    w2 = ModelWriter.open(tmp_path / "m", p.replace(threads=3), n_features=23, label_space=40)
    assert not orphan.exists()
    assert sorted(f.name for f in (tmp_path / "m" / "shards").iterdir()) == [
        "labels-0000000-0000009.npz", "labels-0000010-0000019.npz", "labels-0000030-0000039.npz", "notes.txt"]
    assert sorted(f.name for f in (tmp_path / "m").iterdir()) == [
        "label_counts.npz", "manifest.json", "preprocessing.npz", "shards"]
    assert w2.missing_ranges() == [(20, 30)]
    w2.add_shard(20, model.weights[20:30], model.intercept[20:30])
    assert w2.is_complete()
    assert_same_model(model, load_model(tmp_path / "m"))


def test_writer_create_refuses_existing(tmp_path):
    model = random_model()
    save_model(model, tmp_path / "m")
    with pytest.raises(ModelFormatError, match="already exists"):
        ModelWriter.create(tmp_path / "m", 23, 37, model.params)
    w = ModelWriter.create(tmp_path / "m", 23, 37, model.params, overwrite=True)
    assert w.missing_ranges() == [(0, 37)]


def test_writer_crash_in_manifest_keeps_previous_state(tmp_path, monkeypatch):
    model = random_model(num_labels=20, label_space=20)
    w = ModelWriter.create(tmp_path / "m", 23, 20, model.params)
    w.add_shard(0, model.weights[:10], model.intercept[:10])
    monkeypatch.setattr(writer, "write_manifest", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        w.add_shard(10, model.weights[10:], model.intercept[10:])
    monkeypatch.undo()
    assert w.finished_ranges() == [(0, 10)]
    assert ModelWriter.open(tmp_path / "m").finished_ranges() == [(0, 10)]
    w.add_shard(10, model.weights[10:], model.intercept[10:])  # the range was released


def test_writer_with_a_manifest_lag_lists_in_memory_and_flushes(tmp_path):
    """The trainers' writer (manifest_lag > 0) rewrites the manifest only after a lag:
    the shards in between are listed in memory (queries see them), their files are
    complete, and flush -- or leaving a ``with`` block, also by an exception -- lists
    them on disk.  A reopened writer deletes the files of shards never listed."""
    model = random_model(num_labels=40, label_space=40)
    w = ModelWriter.create(tmp_path / "m", 23, 40, model.params)
    w.manifest_lag = 1e9
    w.add_shard(0, model.weights[:10], model.intercept[:10])      # the first is written at once
    w.add_shard(20, model.weights[20:30], model.intercept[20:30])
    w.add_shard(10, model.weights[10:20], model.intercept[10:20])
    assert w.finished_ranges() == [(0, 30)]
    assert [s["first_label"] for s in read_manifest(tmp_path / "m")["shards"]] == [0]
    with pytest.raises(ModelFormatError, match="overlaps the finished shard"):
        w.add_shard(25, model.weights[25:35], model.intercept[25:35])   # overlaps a shard not yet on disk
    with pytest.raises(RuntimeError, match="boom"):
        with w:
            w.add_shard(30, model.weights[30:], model.intercept[30:])
            raise RuntimeError("boom")
    assert [s["first_label"] for s in read_manifest(tmp_path / "m")["shards"]] == [0, 10, 20, 30]
    assert (load_model(tmp_path / "m").weights != model.weights).nnz == 0
    # a kill before the flush: the unlisted shard is deleted when the model is reopened
    w2 = ModelWriter.create(tmp_path / "k", 23, 40, model.params)
    w2.manifest_lag = 1e9
    w2.add_shard(0, model.weights[:10], model.intercept[:10])
    w2.add_shard(10, model.weights[10:20], model.intercept[10:20])
    assert len(list((tmp_path / "k" / "shards").iterdir())) == 2
    again = ModelWriter.open(tmp_path / "k")
    assert again.finished_ranges() == [(0, 10)] and len(list((tmp_path / "k" / "shards").iterdir())) == 1


def test_writer_flush_failing_after_an_error_keeps_that_error(tmp_path, monkeypatch, caplog):
    model = random_model(num_labels=20, label_space=20)
    w = ModelWriter.create(tmp_path / "m", 23, 20, model.params)
    w.manifest_lag = 1e9
    w.add_shard(0, model.weights[:10], model.intercept[:10])
    w.add_shard(10, model.weights[10:], model.intercept[10:])
    monkeypatch.setattr(writer, "write_manifest", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(KeyboardInterrupt):
        with w:
            raise KeyboardInterrupt
    assert "could not list the finished shards in the manifest: OSError: disk full" in caplog.text
    with pytest.raises(OSError, match="disk full"):   # without an error of its own, the flush's
        with w:
            pass


def test_writer_threads(tmp_path):
    model = random_model(num_labels=200, label_space=200, density=0.1)
    w = ModelWriter.create(tmp_path / "m", 23, 200, model.params, model.preprocessing, model.label_counts, 123)
    errors = []

    def work(starts):
        try:
            for s in starts:
                w.add_shard(s, model.weights[s:s + 5], model.intercept[s:s + 5])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(range(t * 5, 200, 40),)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(read_manifest(tmp_path / "m")["shards"]) == 40
    assert_same_model(model, load_model(tmp_path / "m"))


def test_writer_concurrent_overlap_refused(tmp_path, monkeypatch):
    model = random_model(num_labels=20, label_space=20)
    w = ModelWriter.create(tmp_path / "m", 23, 20, model.params)
    gate, release = threading.Event(), threading.Event()
    real = writer.write_shard_file

    def slow(*a, **kw):
        gate.set()
        release.wait(10)
        return real(*a, **kw)

    monkeypatch.setattr(writer, "write_shard_file", slow)
    t = threading.Thread(target=w.add_shard, args=(0, model.weights[:10], model.intercept[:10]))
    t.start()
    gate.wait(10)
    with pytest.raises(ModelFormatError, match="in-progress"):
        w.add_shard(5, model.weights[5:15], model.intercept[5:15])
    release.set()
    t.join()
    assert w.finished_ranges() == [(0, 10)]


# --------------------------------------------------------------------------- merge
def _pieces(tmp_path, model, bounds, params=None):
    dirs = []
    for i, (a, z) in enumerate(bounds):
        piece = OvAModel(weights=model.weights[a:z], intercept=model.intercept[a:z], n_features=model.n_features,
                         label_space=model.label_space, first_label=a,
                         params=(params or {}).get(i, model.params.replace(threads=i + 1)),
                         preprocessing=model.preprocessing, label_counts=model.label_counts,
                         n_train=model.n_train)
        save_model(piece, tmp_path / f"piece{i}", shard_size=4)
        dirs.append(tmp_path / f"piece{i}")
    return dirs


def test_merge(tmp_path):
    model = random_model(num_labels=30, tfidf=True)
    dirs = _pieces(tmp_path, model, [(20, 30), (0, 9), (9, 20)])
    merge_models(tmp_path / "merged", dirs)
    merged = load_model(tmp_path / "merged")
    assert_same_model(model, merged, ignore_threads=True)
    assert merged.params.threads == 1  # the first directory's
    assert len(read_manifest(tmp_path / "merged")["shards"]) == 3 + 3 + 3


def test_merge_overlap(tmp_path):
    model = random_model(num_labels=30)
    dirs = _pieces(tmp_path, model, [(0, 12), (10, 30)])
    with pytest.raises(ModelFormatError, match=r"labels \[8, 12\) of .*piece0 overlaps labels \[10, 14\) of "
                                               r".*piece1"):
        merge_models(tmp_path / "merged", dirs)
    assert not (tmp_path / "merged").exists()


def test_merge_gap(tmp_path):
    model = random_model(num_labels=30)
    dirs = _pieces(tmp_path, model, [(0, 10), (15, 25)])
    with pytest.raises(ModelFormatError, match=r"miss \[10, 15\), \[25, 30\)"):
        merge_models(tmp_path / "merged", dirs)
    merge_models(tmp_path / "merged", dirs, allow_gaps=True)
    assert load_model(tmp_path / "merged", allow_gaps=True).missing_ranges == [(10, 15), (25, 30)]


def test_merge_param_mismatch(tmp_path):
    model = random_model(num_labels=30)
    dirs = _pieces(tmp_path, model, [(0, 15), (15, 30)], params={1: model.params.replace(epsilon=0.5)})
    with pytest.raises(ModelFormatError, match=r"parameter epsilon is 0\.01 in .*piece0 but 0\.5 in .*piece1"):
        merge_models(tmp_path / "merged", dirs)


def test_merge_shape_and_preprocessing_mismatch(tmp_path):
    a = random_model(num_labels=10, label_space=20, n_features=23)
    save_model(a, tmp_path / "a")
    b = random_model(num_labels=10, label_space=20, n_features=24, first_label=10)
    b.label_counts = a.label_counts
    save_model(b, tmp_path / "b")
    with pytest.raises(ModelFormatError, match="n_features is 23 in .*a but 24 in .*b"):
        merge_models(tmp_path / "m", [tmp_path / "a", tmp_path / "b"])
    c = random_model(num_labels=10, label_space=20, first_label=10, tfidf=True)
    c.label_counts, c.params = a.label_counts, a.params
    save_model(c, tmp_path / "c")
    with pytest.raises(ModelFormatError, match="preprocessing is"):
        merge_models(tmp_path / "m", [tmp_path / "a", tmp_path / "c"])


def test_merge_verifies_inputs(tmp_path):
    model = random_model(num_labels=20)
    dirs = _pieces(tmp_path, model, [(0, 10), (10, 20)])
    shard = dirs[1] / "shards" / "labels-0000010-0000013.npz"
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(ModelFormatError, match="checksum mismatch"):
        merge_models(tmp_path / "merged", dirs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["piece0", "piece1"]


def test_npz_reader_never_unpickles(tmp_path, monkeypatch):
    import pickle

    def boom(*a, **kw):  # pragma: no cover - must not be called
        raise AssertionError("unpickling attempted")

    monkeypatch.setattr(pickle, "loads", boom)
    monkeypatch.setattr(pickle, "load", boom)
    save_model(random_model(), tmp_path / "m", shard_size=9)
    load_model(tmp_path / "m")
    assert zipfile.is_zipfile(tmp_path / "m" / "shards" / "labels-0000000-0000008.npz")


def test_atomic_directory(tmp_path):
    target = tmp_path / "d"
    target.mkdir()
    (target / "old").write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as tmp:
            (tmp / "new").write_bytes(b"new but unfinished")
            raise RuntimeError("crash")
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and [p.name for p in target.iterdir()] == ["old"]
    with atomic_directory(target) as tmp:
        (tmp / "new").write_bytes(b"new")
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and [p.name for p in target.iterdir()] == ["new"]


def test_relative_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = random_model()
    save_model(model, "m")
    save_model(model, "m/")
    assert_same_model(model, load_model("m"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_idf_of_a_wide_feature_space_is_stored_by_its_nonzeros(tmp_path):
    """A feature without a training document has idf 0: with most features so (a wide or
    hashed space) the file keeps the nonzeros, 12 bytes each, and loads the same vector
    (helper-54: 10M features, 2,000 used, made a 39 MB model); a dense idf stays dense;
    a damaged sparse form is refused."""
    model = random_model(num_labels=6, tfidf=True)
    d = model.preprocessing.idf.size
    sparse_idf = np.zeros(d, dtype=np.float32)
    sparse_idf[[1, 7, d - 1]] = [0.5, 2.0, 3.25]
    for idf, stored in ((model.preprocessing.idf, {"normalize", "idf"}),
                        (sparse_idf, {"normalize", "idf_ids", "idf_values"})):
        model.preprocessing.idf = idf
        out = tmp_path / f"m{len(stored)}"
        save_model(model, out)
        with zipfile.ZipFile(out / "preprocessing.npz") as z:
            assert {n[:-4] for n in z.namelist()} == stored
        back = load_model(out)
        assert back.preprocessing.idf.dtype == np.float32 and np.array_equal(back.preprocessing.idf, idf)
    from headstart.model.extras import _dense_idf

    for ids, vals, words in ((np.array([3, 2]), np.ones(2, np.float32), "increasing feature ids"),
                             (np.array([0, d]), np.ones(2, np.float32), "increasing feature ids"),
                             (np.array([1]), np.ones(2, np.float32), "shape"),
                             (np.array([1]), None, "go together")):
        with pytest.raises(ModelFormatError, match=words):
            _dense_idf(tmp_path / "p.npz", ids.astype(np.int64), vals, d)
