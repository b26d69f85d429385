"""Raw text in LibMultiLabel's format (headstart/io/text.py, ``convert --fit-vectorizer`` /
``--vectorizer``): features checked against scikit-learn's TfidfVectorizer fitted here
directly, label ids against sorted names, and a text corpus trained, predicted and
evaluated end to end through the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn")

from headstart.errors import DataFormatError
from headstart.io import read_xmc
from headstart.io.text import TextVectorizer, read_text

FILLER = ("the a of and to in is it that on for with as was at by an be this from or are".split()
          + [f"w{i}" for i in range(200)])


def corpus(n, rng, names, ids=False):
    """Instances whose labels are 1-3 of ``names``, each label saying its own two signal
    words among filler words; with ``ids``, an id as the first column."""
    lines, truth = [], []
    for i in range(n):
        labels = sorted(rng.choice(len(names), size=rng.integers(1, 4), replace=False).tolist())
        words = list(rng.choice(FILLER, size=25))
        for j in labels:
            words += [f"sig{j}a", f"sig{j}b"] * 2
        rng.shuffle(words)
        text = " ".join(words)
        row = " ".join(names[j] for j in labels)
        lines.append(f"{i}\t{row}\t{text}" if ids else f"{row}\t{text}")
        truth.append(labels)
    return "\n".join(lines) + "\n", truth


def cli(*args):
    return subprocess.run([sys.executable, "-m", "headstart", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def test_features_and_labels_are_scikit_learns_and_sorted_names(tmp_path):
    from sklearn.feature_extraction.text import TfidfVectorizer

    rng = np.random.default_rng(0)
    names = ["zeta", "alpha", "Mid", "beta-2"]
    train, _ = corpus(60, rng, names)
    test, _ = corpus(20, rng, names, ids=True)
    test += "7\tunseen alpha\tsig1a and a new word\n"
    (tmp_path / "tr.txt").write_text(train)
    (tmp_path / "te.txt").write_text(test)
    vec = TextVectorizer.fit(read_text(tmp_path / "tr.txt"), ngram_range=(1, 2), sublinear_tf=True)
    vec.save(tmp_path / "vec")
    loaded = TextVectorizer.load(tmp_path / "vec")
    X, Y, dropped = loaded.transform(read_text(tmp_path / "te.txt"))
    texts = [ln.split("\t")[-1] for ln in test.splitlines()]
    ref = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit([ln.split("\t")[-1] for ln in train.splitlines()])
    np.testing.assert_allclose(X.toarray(), ref.transform(texts).toarray(), rtol=1e-6, atol=1e-7)
    assert loaded.vocabulary == ref.get_feature_names_out().tolist()
    assert loaded.label_names == sorted(names)
    rows = [ln.split("\t")[-2].split() for ln in test.splitlines()]
    want = [sorted(sorted(names).index(x) for x in r if x in names) for r in rows]
    assert [Y.indices[Y.indptr[i]:Y.indptr[i + 1]].tolist() for i in range(Y.shape[0])] == want
    assert dropped == 1
    assert (tmp_path / "vec" / "labels.txt").read_text().splitlines() == sorted(names)


def test_text_corpus_end_to_end_through_the_command_line(tmp_path):
    rng = np.random.default_rng(1)
    names = [f"topic-{c}" for c in "abcdefghij"]
    train, _ = corpus(400, rng, names)
    test, truth = corpus(100, rng, names)
    (tmp_path / "tr.txt").write_text(train)
    (tmp_path / "te.txt").write_text(test)
    out = cli("convert", tmp_path / "tr.txt", tmp_path / "tr.xmc.gz", "--fit-vectorizer", tmp_path / "vec")
    assert out.returncode == 0, out.stderr
    out = cli("convert", tmp_path / "te.txt", tmp_path / "te.xmc.gz", "--vectorizer", tmp_path / "vec")
    assert out.returncode == 0, out.stderr
    X, Y = read_xmc(str(tmp_path / "te.xmc.gz"))[:2]
    assert Y.shape == (100, 10) and [sorted(Y[i].indices.tolist()) for i in range(100)] == truth
    assert cli("train", tmp_path / "tr.xmc.gz", "-o", tmp_path / "m", "-q").returncode == 0
    out = cli("evaluate", tmp_path / "m", tmp_path / "te.xmc.gz", "--json", "-k", 1)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["P@1"] > 0.95        # every label has its own signal words


@pytest.mark.parametrize("content,line,words", [
    ("a\tsome text\nonly one field\n", 2, "1 tab-separated fields"),
    ("a\tb\tc\td\n", 1, "4 tab-separated fields"),
    # a tab inside a text (helper-51: the labels became an id, the first words labels)
    ("a b\thello world\nb c\tgood morning\tworld\n", 2, "3 tab-separated fields where line 1 has 2"),
    ("1\ta\tone\nb\ttwo\n", 2, "2 tab-separated fields where line 1 has 3"),
    ("", None, "no instances"),
])
def test_malformed_text_is_refused_with_its_line(tmp_path, content, line, words):
    """(Empty lines are skipped, as LibMultiLabel's reader does: test below.)"""
    p = tmp_path / "x.txt"
    p.write_text(content)
    with pytest.raises(DataFormatError, match=words) as e:
        read_text(p)
    assert e.value.line == line


def test_empty_lines_are_skipped(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("a\tone\n\nb c\ttwo\n\n")
    d = read_text(p)
    assert d.labels == [["a"], ["b", "c"]] and d.texts == ["one", "two"]
    # a byte-order mark is no part of the first label (helper-51: label '\ufeffa')
    p.write_bytes("\ufeffa b\tone\nb\ttwo\n".encode("utf-8"))
    assert read_text(p).labels == [["a", "b"], ["b"]]


def test_bad_input_leaves_no_output(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"a\ttext\nb\t\xff\xfe broken\n")
    out = cli("convert", tmp_path / "bad.txt", tmp_path / "o.xmc", "--fit-vectorizer", tmp_path / "vec")
    assert out.returncode != 0 and "bad.txt:2" in out.stderr and "not UTF-8" in out.stderr
    assert not (tmp_path / "o.xmc").exists() and not (tmp_path / "vec").exists()
    (tmp_path / "ok.txt").write_text("a\tsome words here\n")
    (tmp_path / "vec").mkdir()
    out = cli("convert", tmp_path / "ok.txt", tmp_path / "o.xmc", "--fit-vectorizer", tmp_path / "vec")
    assert out.returncode == 2 and "exists" in out.stderr and not (tmp_path / "o.xmc").exists()
    # a directory that takes no new files (/proc here; a read-only mount alike) or a missing
    # parent: refused before the work, exit 2 (helper-89: a read-only one failed at the end)
    for where, words in (("/proc/headstart-vec", "cannot write the vectorizer directory"),
                         (tmp_path / "nope" / "vec", "does not exist")):
        out = cli("convert", tmp_path / "ok.txt", tmp_path / "o.xmc", "--fit-vectorizer", where)
        assert out.returncode == 2 and words in out.stderr, out.stderr
        assert not (tmp_path / "o.xmc").exists()
    out = cli("convert", tmp_path / "ok.txt", tmp_path / "o.xmc", "--vectorizer", tmp_path / "vec")
    assert out.returncode != 0 and "vectorizer.json is missing" in out.stderr and not (tmp_path / "o.xmc").exists()
    out = cli("convert", tmp_path / "ok.txt", tmp_path / "o.xmc", "--vectorizer", tmp_path / "nothere")
    assert out.returncode == 2 and "no such text vectorizer directory" in out.stderr     # helper-51
    # a fitting option with --vectorizer is refused, not ignored
    out = cli("convert", tmp_path / "ok.txt", tmp_path / "o.xmc", "--vectorizer", tmp_path / "vec", "--ngram-max", "2")
    assert out.returncode == 2 and "--ngram-max is for --fit-vectorizer" in out.stderr
    assert not (tmp_path / "o.xmc").exists()
    # and on numeric data (helper-51: ignored)
    (tmp_path / "num.txt").write_text("1 2 2\n0 0:1 1:2\n")
    out = cli("convert", tmp_path / "num.txt", tmp_path / "o.xmc", "--sublinear-tf")
    assert out.returncode == 2 and "--sublinear-tf is for LibMultiLabel text" in out.stderr
    assert not (tmp_path / "o.xmc").exists()
    out = cli("convert", tmp_path / "ok.txt", tmp_path / "o.xmc", "--fit-vectorizer", tmp_path / "v2", "--one-based")
    assert out.returncode == 2 and "--one-based is for numeric data" in out.stderr and not (tmp_path / "v2").exists()
    # the data file cannot be written: no vectorizer directory either
    out = cli("convert", tmp_path / "ok.txt", tmp_path / "no" / "o.xmc", "--fit-vectorizer", tmp_path / "v3")
    assert out.returncode != 0 and not (tmp_path / "v3").exists()


def test_info_describes_a_vectorizer_directory(tmp_path):
    """info on a vectorizer directory: what it is, its features and labels and settings,
    the command that applies it (helper-80: "missing manifest", as if a broken model);
    on one of its files: the directory to describe instead."""
    rng = np.random.default_rng(2)
    train, _ = corpus(30, rng, ["b", "a", "c"])
    (tmp_path / "tr.txt").write_text(train)
    TextVectorizer.fit(read_text(tmp_path / "tr.txt"), ngram_range=(1, 2)).save(tmp_path / "vec")
    vec = TextVectorizer.load(tmp_path / "vec")
    out = cli("info", tmp_path / "vec", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert (info["kind"], info["features"], info["labels"]) == ("vectorizer", len(vec.vocabulary), 3)
    assert info["idf"]["shape"] == [len(vec.vocabulary)] and info["settings"]["ngram_range"] == [1, 2]
    assert info["first_labels"] == "a, b, c" and "--vectorizer DIR" in info["made_by"]
    out = cli("info", tmp_path / "vec")
    assert out.returncode == 0 and out.stdout.startswith(f"{tmp_path / 'vec'}: text vectorizer directory\n")
    assert f"  features: {len(vec.vocabulary)}\n" in out.stdout and "    ngram range: [1, 2]\n" in out.stdout
    out = cli("info", tmp_path / "vec" / "idf.npy")
    assert out.returncode == 2 and "part of the text vectorizer directory" in out.stderr


def test_save_replaces_only_a_vectorizer_directory(tmp_path):
    """Saving replaces the target directory whole: a vectorizer headstart wrote (or an
    empty directory) may go, a directory holding a user's file is refused and kept."""
    from headstart.errors import ParameterError

    rng = np.random.default_rng(3)
    (tmp_path / "tr.txt").write_text(corpus(30, rng, ["a", "b", "c"])[0])
    vec = TextVectorizer.fit(read_text(tmp_path / "tr.txt"))
    small = TextVectorizer.fit(read_text(tmp_path / "tr.txt"), max_features=5)
    vec.save(tmp_path / "vec")
    small.save(tmp_path / "vec")       # its own directory: replaced
    assert len(TextVectorizer.load(tmp_path / "vec").vocabulary) == 5
    (tmp_path / "empty").mkdir()
    vec.save(tmp_path / "empty")
    assert TextVectorizer.load(tmp_path / "empty").vocabulary == vec.vocabulary

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("years of work")
    (tmp_path / "vec" / "notes.txt").write_text("mine too")
    for target, words in (("mine", ["mine", "is not a headstart text vectorizer", "thesis.tex"]),
                          ("vec", ["vec", "notes.txt", "headstart did not write"])):
        with pytest.raises(ParameterError) as e:
            vec.save(tmp_path / target)
        assert all(w in str(e.value) for w in words), str(e.value)
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "years of work"
    assert (tmp_path / "vec" / "notes.txt").read_text() == "mine too"
    assert len(TextVectorizer.load(tmp_path / "vec").vocabulary) == 5
    (tmp_path / "file").write_text("x")
    with pytest.raises(ParameterError, match="not a directory"):
        vec.save(tmp_path / "file")
    assert (tmp_path / "file").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "file", "mine", "tr.txt", "vec"]
