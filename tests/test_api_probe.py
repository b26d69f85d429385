"""The Python API as a library user meets it (helper-83's outsider probe): inputs of
every kind, shapes the shared data sets lack, and what bad inputs give."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import headstart
from headstart.errors import DataFormatError, ModelFormatError, ParameterError
from headstart.metrics import binary_precision_recall, evaluate, topk_from_scores


def _data(n=30, d=10, L=4, seed=1):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr", dtype=np.float32)
    Y = sp.csr_matrix((rng.random((n, L)) < 0.3).astype(np.float32))
    return X, Y


def _broken(A: sp.spmatrix, how: str) -> sp.spmatrix:
    """A copy of the compressed matrix A with one index outside its shape, or an index
    pointer that decreases: what scipy builds without a word from (data, indices,
    indptr) and a shape too small."""
    B = A.copy()
    if how == "beyond":
        B.indices[3] = A.shape[1 if A.format == "csr" else 0]
    elif how == "negative":
        B.indices[3] = -1
    else:
        B.indptr[5] = B.indptr[6] + 3
    return B


@pytest.fixture(scope="module")
def fitted():
    X, Y = _data()
    return headstart.OvAClassifier(threads=1).fit(X, Y), X, Y


@pytest.mark.parametrize("how", ["beyond", "negative", "indptr"])
def test_features_whose_indices_leave_the_shape_are_refused_by_fit_and_prediction(fitted, how):
    """A CSR matrix whose column ids reach beyond its declared width crashed fit and every
    prediction method with a segmentation fault (the kernels and scipy's conversions
    trust the indices); a negative id trained silently on the column it wrapped to."""
    clf, X, Y = fitted
    B = _broken(X, how)
    kept = (B.data.copy(), B.indices.copy(), B.indptr.copy())
    where = "row 0 holds the column index" if how != "indptr" else "indptr) gives row 5 a negative length"
    with pytest.raises(DataFormatError, match=r"X is not a valid CSR matrix of shape \(30, 10\)") as e:
        headstart.OvAClassifier(threads=1).fit(B, Y)
    assert where in str(e.value)
    for call in (clf.predict, clf.decision_function, lambda Z: clf.predict_topk(Z, 2), lambda Z: clf.score(Z, Y)):
        with pytest.raises(DataFormatError, match=where.replace("(", r"\(").replace(")", r"\)")):
            call(B)
    # the caller's arrays are left as they were
    assert all(np.array_equal(a, b) for a, b in zip(kept, (B.data, B.indices, B.indptr)))


def test_other_sparse_formats_with_indices_outside_the_shape_are_refused(fitted):
    clf, X, Y = fitted
    C = _broken(sp.csc_matrix(X), "beyond")
    with pytest.raises(DataFormatError, match=r"column \d+ holds the row index 30, outside \[0, 30\)"):
        headstart.OvAClassifier(threads=1).fit(C, Y)
    O = X.tocoo(copy=True)       # (without a copy its column ids are X's indices)
    O.col[2] = 10
    with pytest.raises(DataFormatError, match=r"entry 2 has column id 10, outside \[0, 10\)"):
        clf.predict_topk(O, 2)


@pytest.mark.parametrize("how", ["beyond", "negative"])
def test_label_matrices_whose_indices_leave_the_shape_are_refused(fitted, how):
    """fit crashed (a label id beyond the label count) or trained a wrapped label; score
    and the metrics answered silently with a wrong value (or numpy's bincount error)."""
    clf, X, Y = fitted
    B = _broken(Y, how)
    with pytest.raises(DataFormatError, match=r"Y is not a valid CSR matrix .* row 4 holds the column index"):
        headstart.OvAClassifier(threads=1).fit(X, B)
    with pytest.raises(DataFormatError, match=r"y is not a valid CSR matrix"):
        clf.score(X, B)
    labels, _ = clf.predict_topk(X, 3)
    with pytest.raises(DataFormatError, match=r"Y_true is not a valid CSR matrix"):
        evaluate(B, labels, ks=(1, 3))
    with pytest.raises(DataFormatError, match=r"Y_pred is not a valid CSR matrix"):
        binary_precision_recall(Y, B)
    with pytest.raises(DataFormatError, match=r"score matrix is not a valid CSR matrix"):
        topk_from_scores(B, 2)


def test_weights_whose_indices_leave_the_shape_are_refused(fitted):
    """Weights in memory (a warm start, or scoring a (W, b) pair directly) go through
    scipy's conversions too."""
    from headstart.prediction.topk import predict_topk

    clf, X, Y = fitted
    W = _broken(clf.coef_.tocsr(), "beyond")
    with pytest.raises(ModelFormatError, match=r"the weights is not a valid CSR matrix|not a valid CSR matrix"):
        predict_topk((W, clf.intercept_), X, 2, threads=1)
    with pytest.raises(ParameterError, match=r"pretrained.*not a valid CSR matrix"):
        headstart.OvAClassifier(threads=1, pretrained=(W, clf.intercept_)).fit(X, Y)


@pytest.mark.parametrize("y, message", [
    ([[0, 3], [1, 2], [0, 2], [1, 3]], r"found the value 3 at row 0, column 1 \(lists of label ids per instance are "
                                       r"not an indicator matrix: convert them with sklearn.preprocessing."
                                       r"MultiLabelBinarizer\)"),
    ([[0], [3], [2], [1]], r"found the value 3 at row 1, column 0 \(lists of label ids"),
    ([{0}, {1}, {0, 1}, set()], r"y holds collections \(label sets or lists per instance\?\).*MultiLabelBinarizer"),
    ([(0, 1), (1,), (2, 3), ()], r"lists of label ids per instance \(rows of different lengths\).*MultiLabelBinarizer"),
])
def test_label_ids_per_instance_are_refused_with_the_way_to_convert_them(y, message):
    """Label lists of equal length became a 2-D array of ids, refused only as "the value
    3", and label sets as "classes of mixed types (set)"."""
    with pytest.raises(DataFormatError, match=message):
        headstart.OvAClassifier(threads=1).fit(np.eye(4, dtype=np.float32), y)
    # an array of the same values is a matrix the user built: no guess about lists
    with pytest.raises(DataFormatError) as e:
        headstart.OvAClassifier(threads=1).fit(np.eye(2, dtype=np.float32), np.array([[0, 2], [1, 0]]))
    assert "MultiLabelBinarizer" not in str(e.value)
    with pytest.raises(DataFormatError, match=r"found the value inf at row 0, column 0$"):
        headstart.OvAClassifier(threads=1).fit(np.eye(2, dtype=np.float32), [[float("inf")], [0.0]])


def test_sparse_arrays_of_other_dimensions_are_refused_by_their_shape(fitted):
    """scipy's coo_array / dok_array may be 1-D or 3-D: an IndexError (tuple index out of
    range) came out of fit, prediction and score."""
    clf, X, Y = fitted
    row = sp.coo_array(X.toarray()[0])
    for call in (clf.predict, clf.decision_function, lambda Z: clf.predict_topk(Z, 2),
                 lambda Z: headstart.OvAClassifier(threads=1).fit(Z, Y[:1])):
        with pytest.raises(DataFormatError, match=r"X must be a 2-D \(rows x columns\) matrix, got a 1-D sparse "
                                                  r"array of shape \(10,\) \(one row: reshape\(1, -1\)"):
            call(row)
    with pytest.raises(DataFormatError, match=r"X must be a 2-D .* got a 3-D sparse array of shape \(2, 2, 10\)$"):
        clf.predict(sp.coo_array(np.zeros((2, 2, 10))))
    column = sp.coo_array(Y.toarray()[:, 0])
    with pytest.raises(DataFormatError, match=r"^Y must be a 2-D .* 1-D sparse array of shape \(30,\)"):
        headstart.OvAClassifier(threads=1).fit(X, column)
    with pytest.raises(DataFormatError, match=r"^y must be a 2-D .* 1-D sparse array"):
        clf.score(X, sp.dok_array(Y.toarray()[:, 0]))


def test_other_shapes_of_x_are_named_at_fit_and_prediction(fitted):
    """Ragged rows of X came out as numpy's "inhomogeneous shape" ValueError, an empty fit
    as "y holds 0 classes", None at prediction as "got 0 dimension(s)"."""
    clf, X, Y = fitted
    with pytest.raises(DataFormatError, match=r"^X must be a 2-D numeric array .* its rows have different lengths"):
        headstart.OvAClassifier(threads=1).fit([[1.0, 2.0], [3.0]], [[1], [0]])
    with pytest.raises(DataFormatError, match=r"its rows have different lengths"):
        clf.predict_topk([[1.0] * 10, [3.0]], 2)
    with pytest.raises(DataFormatError, match=r"its rows have different lengths"):
        clf.score([[1.0] * 10, [3.0]], Y[:2])
    with pytest.raises(DataFormatError, match=r"^X must be a 2-D numeric array .* got shape \(0,\) dtype float64$"):
        headstart.OvAClassifier(threads=1).fit([], [])
    for call in (clf.predict, clf.decision_function, lambda Z: clf.score(Z, Y), lambda Z: headstart.OvAClassifier().fit(Z, Y)):
        with pytest.raises(DataFormatError, match=r"^X is None"):
            call(None)
    with pytest.raises(DataFormatError, match=r"got shape \(10,\) dtype float32\. Reshape your data, e\.g\. "
                                              r"X\.reshape\(1, -1\) for a single instance"):
        clf.predict(X.toarray()[0])


@pytest.mark.parametrize("writer", ["write_xmc", "write_libsvm"])
def test_writers_refuse_matrices_whose_indices_leave_the_shape(tmp_path, writer):
    """write_xmc wrote a column id beyond the header's feature count (or "-1:") into a file
    that read_xmc then refused; now the writer refuses and writes nothing."""
    from headstart import io

    X, Y = _data()
    out = tmp_path / "data.txt"
    with pytest.raises(DataFormatError, match=r"X is not a valid CSR matrix .* row 0 holds the column index 10"):
        getattr(io, writer)(out, _broken(X, "beyond"), Y)
    with pytest.raises(DataFormatError, match=r"Y is not a valid CSR matrix .* row 4 holds the column index -1"):
        getattr(io, writer)(out, X, _broken(Y, "negative"))
    assert list(tmp_path.iterdir()) == []
