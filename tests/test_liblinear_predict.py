"""``headstart predict --liblinear [OPTIONS]``: LIBLINEAR predict's output file for
people switching from LIBLINEAR on binary and multi-class (one class per line) libsvm
files; ``cv --liblinear="-v N"``: its cross-validation accuracy.  Compared line by line with liblinear-official's own predict on the same data and
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


def test_binary_test_file_of_positives_only_is_the_models_one_label(tmp_path, capsys):
    """A binary (+1/-1) model's test file whose lines are all '1' (no '-1' marks it
    binary) is LIBLINEAR's +1 class, the model's one label -- not a label id 1 beyond
    the model, which made every positive a miss (evaluate: F1 0, P@1 0)."""
    train, test = make_split(tmp_path, [-1, 1])
    assert run(capsys, "train", train, "-o", tmp_path / "m", "--threads", "1", "-q")[0] == 0
    lines = [line for line in test.read_text().splitlines() if line.startswith("1 ")]
    positives = tmp_path / "pos.svm"
    positives.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "predict", tmp_path / "m", positives, "-o", tmp_path / "p.txt", "--liblinear")
    assert code == 0, err
    hits = sum(line == "1" for line in (tmp_path / "p.txt").read_text().splitlines())
    assert hits > 0 and out.strip() == "Accuracy = %g%% (%d/%d)" % (100 * hits / len(lines), hits,
                                                                                 len(lines))
    code, out, err = run(capsys, "evaluate", tmp_path / "m", positives, "--threshold", "0", "--json", "-k", "1")
    assert code == 0 and "beyond the model" not in err, err
    import json
    metrics = json.loads(out)
    assert metrics["Micro-F1"] == pytest.approx(2 * hits / (hits + len(lines)))
    # the same from a predictions file of the model's one label
    assert run(capsys, "predict", tmp_path / "m", positives, "-o", tmp_path / "top.txt", "-k", "1", "-q")[0] == 0
    code, out, err = run(capsys, "evaluate", "--predictions", tmp_path / "top.txt", positives, "--json")
    assert code == 0 and "beyond the model" not in err and json.loads(out)["P@1"] == pytest.approx(1.0)
    # a '0' line (label id 0) next to '1' lines is the multi-label reading: 1 stays a label beyond
    (tmp_path / "mixed.svm").write_text(lines[0].replace("1 ", "0 ", 1) + "\n" + "\n".join(lines[1:]) + "\n")
    code, _, err = run(capsys, "evaluate", tmp_path / "m", tmp_path / "mixed.svm", "--threshold", "0")
    assert code == 0 and "beyond the model's 1 labels" in err


# --------------------------------------------------------------------------- cv -v: LIBLINEAR's accuracy
@pytest.mark.parametrize("names", [[-1, 1], [3, 7, 42]])
def test_cv_gives_liblinears_cross_validation_accuracy(tmp_path, capsys, names):
    """cv --liblinear="-v 5" printed only ranking metrics and F1s: on a +1/-1 file P@1 is the
    share of positive rows, nothing like LIBLINEAR's 'Cross Validation Accuracy'.  Now the
    accuracy of the held-out predictions (sign for one label, best label for one class per
    row), checked against the same folds trained here, and LIBLINEAR's line."""
    import scipy.sparse as sp

    from headstart import OvAClassifier, TrainParams
    from headstart.io import read_libsvm
    from headstart.tuning import cross_validate
    from headstart.tuning.folds import split

    train, _ = make_split(tmp_path, names)
    X, Y = read_libsvm(str(train))
    params = TrainParams.from_liblinear("-s 2 -B 1", threads=1)
    r = cross_validate(X, Y, params, folds=5, k=1, metric="Accuracy")
    n = X.shape[0]
    right = 0
    for val in split(np.random.default_rng(0).permutation(n), 5):
        rest = np.setdiff1d(np.arange(n), val)
        clf = OvAClassifier(**params.to_dict()).fit(X[rest], Y[rest])
        S = clf.decision_function(X[val])
        truth = sp.csr_matrix(Y)[val].toarray()
        right += int(np.sum((S[:, 0] > 0) == (truth[:, 0] > 0)) if Y.shape[1] == 1
                     else np.sum(truth[np.arange(val.size), np.argmax(S, axis=1)] > 0))
    assert r.metrics[0]["Accuracy"] == pytest.approx(right / n)
    code, out, err = run(capsys, "cv", train, "--liblinear=-s 2 -B 1 -v 5", "--threads", "1")
    assert code == 0, err
    assert out.splitlines()[-1] == "Cross Validation Accuracy = %g%%" % (100 * right / n)


def test_accuracy_is_refused_for_multi_label_data():
    import scipy.sparse as sp

    from headstart import TrainParams
    from headstart.errors import ParameterError
    from headstart.tuning import cross_validate

    rng = np.random.default_rng(0)
    X = sp.random(60, 10, density=0.5, format="csr", random_state=0)
    Y = sp.csr_matrix((rng.random((60, 4)) < 0.4).astype(np.float32))
    with pytest.raises(ParameterError, match="'Accuracy' .* one label per row"):
        cross_validate(X, Y, TrainParams(threads=1), folds=2, k=1, metric="Accuracy")


def test_predict_liblinear_says_what_its_accuracy_is_on_multi_label_data(tmp_path, capsys):
    """LIBLINEAR's files hold one class per line; on rows of several labels the accuracy
    line is P@1 (the predicted class among the row's labels): said, as cv refuses it."""
    train, test = make_split(tmp_path, [1, 2, 3])
    assert run(capsys, "train", train, "-o", tmp_path / "m", "--threads", "1", "-q")[0] == 0
    code, _, err = run(capsys, "predict", tmp_path / "m", test, "-o", tmp_path / "p.txt", "--liblinear")
    assert code == 0 and "more than one label" not in err
    lines = test.read_text().splitlines()
    (tmp_path / "multi.svm").write_text("\n".join(["1,2" + lines[0][1:]] + lines[1:]) + "\n")
    code, out, err = run(capsys, "predict", tmp_path / "m", tmp_path / "multi.svm", "-o", tmp_path / "p.txt",
                         "--liblinear")
    assert code == 0 and f"1 of {len(lines)} instances have more than one label" in err, err
    assert out.startswith("Accuracy = ")


# --------------------------------------------------------------------------- -wi on one class per row
def test_class_weights_on_multiclass_data_are_said_and_pointed_to(tmp_path, capsys):
    """LIBLINEAR's -w1 W on a multi-class file multiplies C for class 1's positives only;
    --liblinear's -w1 weights every label's positives (each label's +1), LibMultiLabel's
    meaning -- silently another problem (2.5% of the predicted classes differed from LIBLINEAR's
    on a 4-class set).  Now a warning says so and how to get LIBLINEAR's: --weights-pos-file
    with W at label id i, which gives its probabilities (checked against liblinear-official)."""
    train, test = make_split(tmp_path, [1, 2, 3, 4])
    options = "-s 0 -B 1 -e 1e-6"
    code, _, err = run(capsys, "train", train, "-o", tmp_path / "m1", f"--liblinear={options} -w1 2", "--threads", "1",
                       "-q")
    assert code == 0 and "LIBLINEAR's multi-class -wi W multiplies C for class i's positives only" in err
    # a +1/-1 file is one label: -w1 / -w-1 are LIBLINEAR's there, nothing to say
    binary = tmp_path / "b"
    binary.mkdir()
    btrain, _ = make_split(binary, [-1, 1])
    code, _, err = run(capsys, "train", btrain, "-o", binary / "m", f"--liblinear={options} -w1 2", "--threads", "1",
                       "-q")
    assert code == 0 and "multi-class -wi" not in err
    # -w3 is refused with the way to LIBLINEAR's meaning, which then gives its model
    code, _, err = run(capsys, "train", train, "-o", tmp_path / "m3", f"--liblinear={options} -w3 5")
    assert code == 2 and "LIBLINEAR's multi-class -w3 W is W on line 4 of FILE" in err
    (tmp_path / "w.txt").write_text("1\n1\n1\n5\n1\n")
    assert run(capsys, "train", train, "-o", tmp_path / "m3", f"--liblinear={options}", "--init", "zero",
               "--weights-pos-file", tmp_path / "w.txt", "--threads", "1", "-q")[0] == 0
    assert run(capsys, "predict", tmp_path / "m3", test, "-o", tmp_path / "p.txt", "--liblinear=-b 1 -q")[0] == 0
    theirs, labels, vals, _ = liblinear_reference(train, test, options + " -w3 5", True)
    lines = (tmp_path / "p.txt").read_text().splitlines()
    order = [lines[0].split()[1:].index(str(c)) for c in theirs]
    P = np.array([[float(t) for t in line.split()[1:]] for line in lines[1:]])
    np.testing.assert_allclose(P[:, order], vals, atol=2e-6)
    np.testing.assert_array_equal([int(line.split()[0]) for line in lines[1:]], labels.astype(int))
