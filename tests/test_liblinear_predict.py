"""``headstart predict --liblinear [OPTIONS]``: LIBLINEAR predict's output file for
people switching from LIBLINEAR on binary and multi-class (one class per line) libsvm
files.  Compared line by line with liblinear-official's own predict on the same data and
options: the same classes, the same probabilities (to their %g digits), the same
'Accuracy = x% (a/b)' line."""

from __future__ import annotations

import numpy as np
import pytest

from headstart.cli import main as cli_main


def run(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = cli_main.main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def write_libsvm(path, y, X) -> None:
    with open(path, "w") as f:
        for yi, xi in zip(y, X):
            f.write(f"{yi} " + " ".join(f"{j + 1}:{v:.5g}" for j, v in enumerate(xi) if v != 0) + "\n")


def make_split(tmp_path, names, seed=0):
    """Train / test libsvm files of len(names) Gaussian classes, class c named names[c]."""
    rng = np.random.default_rng(seed)
    K = len(names)
    centres = rng.normal(scale=1.5, size=(K, 8))
    c = rng.integers(0, K, size=360)
    X = centres[c] + rng.normal(size=(360, 8))
    y = np.array(names)[c]
    write_libsvm(tmp_path / "tr.svm", y[:240], X[:240])
    write_libsvm(tmp_path / "te.svm", y[240:], X[240:])
    return tmp_path / "tr.svm", tmp_path / "te.svm"


def liblinear_reference(train, test, options, b):
    from liblinear.liblinearutil import predict, svm_read_problem
    from liblinear.liblinearutil import train as ll_train

    y, x = svm_read_problem(str(train))
    yt, xt = svm_read_problem(str(test))
    model = ll_train(y, x, options + " -q")
    labels, acc, vals = predict(yt, xt, model, ("-b 1" if b else "") + " -q")
    correct = int(np.sum(np.array(labels) == np.array(yt)))
    return model.get_labels(), np.array(labels), np.array(vals), f"Accuracy = {acc[0]:g}% ({correct}/{len(yt)})"


@pytest.mark.parametrize("names, solver", [
    ([1, 2, 3, 4], 0),            # 1..K (label id 0 has no positive: not a class)
    ([3, 7, 42], 2),              # non-contiguous
    ([-1, 1], 0),                 # LIBLINEAR's binary file: one label, classes 1 and -1
    ([0, 1], 0),                  # 0/1: two labels here, one classifier in LIBLINEAR
    ([7, 3], 2),
])
def test_predict_liblinear_writes_liblinears_file(tmp_path, capsys, names, solver):
    train, test = make_split(tmp_path, names)
    options = f"-s {solver} -B 1 -e 1e-6"
    b = solver == 0
    assert run(capsys, "train", train, "-o", tmp_path / "m", f"--liblinear={options}", "--init", "zero",
               "--threads", "1", "-q")[0] == 0
    code, out, err = run(capsys, "predict", tmp_path / "m", test, "-o", tmp_path / "p.txt",
                         "--liblinear=" + ("-b 1" if b else "-b 0"), "--threads", "1")
    assert code == 0, err
    theirs, labels, vals, accuracy = liblinear_reference(train, test, options, b)
    assert out.strip() == accuracy
    lines = (tmp_path / "p.txt").read_text().splitlines()
    if b:
        head = lines.pop(0).split()
        assert head[0] == "labels" and sorted(map(int, head[1:])) == sorted(theirs)
        # LIBLINEAR lists its classes in the order the training file shows them, here ascending
        order = [head[1:].index(str(c)) for c in theirs]
        P = np.array([[float(t) for t in line.split()[1:]] for line in lines])
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(P[:, order], vals, atol=2e-6)     # %g keeps 6 digits
    assert len(lines) == labels.size
    np.testing.assert_array_equal([int(line.split()[0]) for line in lines], labels.astype(int))


def test_predict_liblinear_options_and_refusals(tmp_path, capsys):
    train, test = make_split(tmp_path, [1, 2, 3])
    assert run(capsys, "train", train, "-o", tmp_path / "m", "--liblinear=-s 2", "--threads", "1", "-q")[0] == 0
    # -q: no accuracy line; a class only in the test file counts as a miss
    lines = test.read_text().splitlines()
    (tmp_path / "te5.svm").write_text("\n".join(["5" + lines[0][1:]] + lines[1:]) + "\n")
    code, out, err = run(capsys, "predict", tmp_path / "m", tmp_path / "te5.svm", "-o", tmp_path / "p.txt",
                         "--liblinear=-q")
    assert code == 0 and out == "" and len((tmp_path / "p.txt").read_text().splitlines()) == len(lines)
    code, out, _ = run(capsys, "predict", tmp_path / "m", tmp_path / "te5.svm", "-o", tmp_path / "p.txt",
                       "--liblinear")
    hits = int(out.split("(")[1].split("/")[0])
    code, out2, _ = run(capsys, "predict", tmp_path / "m", test, "-o", tmp_path / "p2.txt", "--liblinear")
    first_right = (tmp_path / "p2.txt").read_text().splitlines()[0] == lines[0].split()[0]
    assert hits == int(out2.split("(")[1].split("/")[0]) - first_right
    # -b 1 of a squared-hinge model: refused, as LIBLINEAR refuses it
    code, _, err = run(capsys, "predict", tmp_path / "m", test, "-o", tmp_path / "p.txt", "--liblinear=-b 1")
    assert code == 2 and "--loss logistic" in err
    for bad, needle in (("-b 2", "-b needs 0 or 1"), ("-s 0", "'-s' is not an option")):
        code, _, err = run(capsys, "predict", tmp_path / "m", test, "-o", tmp_path / "p.txt", f"--liblinear={bad}")
        assert code == 2 and needle in err, err
    code, _, err = run(capsys, "predict", tmp_path / "m", test, "-o", tmp_path / "p.txt", "--liblinear",
                       "--threshold", "0")
    assert code == 2 and "no place for --threshold" in err
