"""Tests of headstart.metrics: hand-computed examples and a slow reference implementation."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from headstart.errors import DataFormatError, ParameterError
from headstart import metrics as M


def csr(rows, L):
    """CSR matrix with a 1 at every (i, l) for l in rows[i]."""
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.array([l for r in rows for l in r], dtype=np.int32)
    return sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(rows), L))


LOG3 = math.log2(3)  # 1/log2(3) is the discount of rank 2; rank 3 has 1/log2(4) = 1/2
D1 = 1.0
D2 = 1.0 + 1.0 / LOG3
D3 = 1.0 + 1.0 / LOG3 + 0.5

# ----------------------------------------------------------------------------- example
# L = 6 labels, n = 4 instances
#   row 0: relevant {0, 2}        predicted [2, 1, 0]   hits [1, 0, 1]
#   row 1: relevant {1}           predicted [1, -1, -1] hits [1, 0, 0]   (-1 padding)
#   row 2: relevant {} (empty)    predicted [0, 1, 2]   hits [0, 0, 0]
#   row 3: relevant {0, 3, 4, 5}  predicted [5, 2, -1]  hits [1, 0, 0]
Y = csr([[0, 2], [1], [], [0, 3, 4, 5]], 6)
LAB = np.array([[2, 1, 0], [1, -1, -1], [0, 1, 2], [5, 2, -1]])
# propensities p_l and weights w_l = 1/p_l
P = np.array([0.5, 0.25, 1.0, 0.5, 0.2, 0.1])  # w = [2, 4, 1, 2, 5, 10]


def test_precision_hand():
    # P@1 = (1 + 1 + 0 + 1) / 4
    assert M.precision_at_k(Y, LAB, 1) == pytest.approx(0.75)
    # P@3 = (2/3 + 1/3 + 0 + 1/3) / 4 = 1/3   (empty row in the denominator)
    assert M.precision_at_k(Y, LAB, 3) == pytest.approx(1 / 3)
    # k = 5 > 3 prediction columns: missing slots are misses, divisor stays 5
    # P@5 = (2 + 1 + 0 + 1) / (4 * 5) = 0.2
    assert M.precision_at_k(Y, LAB, 5) == pytest.approx(0.2)
    # k = 2: row 0 has hits [1, 0] -> 1/2; row 1 -> 1/2; row 3 -> 1/2; P@2 = 1.5/4
    assert M.precision_at_k(Y, LAB, 2) == pytest.approx(0.375)


def test_ndcg_hand():
    # nDCG@1: every row with a hit at rank 1 gets 1/D(1) = 1: (1 + 1 + 0 + 1)/4
    assert M.ndcg_at_k(Y, LAB, 1) == pytest.approx(0.75)
    # nDCG@3:
    #   row 0: DCG = 1 + 1/log2(4) = 1.5, |y| = 2 -> / D(2)
    #   row 1: DCG = 1, |y| = 1 (k > |y|) -> / D(1) = 1
    #   row 2: no labels -> 0 (kept in the mean)
    #   row 3: DCG = 1, |y| = 4 -> / D(3)
    expected = (1.5 / D2 + 1.0 + 0.0 + 1.0 / D3) / 4  # = 0.59725...
    assert M.ndcg_at_k(Y, LAB, 3) == pytest.approx(expected)
    assert expected == pytest.approx(0.597249, abs=1e-6)
    # nDCG@5: DCGs unchanged; row 3 now normalised by D(4) = D(3) + 1/log2(5)
    D4 = D3 + 1 / math.log2(5)
    assert M.ndcg_at_k(Y, LAB, 5) == pytest.approx((1.5 / D2 + 1.0 + 1.0 / D4) / 4)


def test_recall_hand():
    # R@1 = (1/2 + 1/1 + 0 + 1/4) / 4 = 0.4375   (empty row: divisor max(0,1) = 1, value 0)
    assert M.recall_at_k(Y, LAB, 1) == pytest.approx(0.4375)
    # R@3 = (2/2 + 1 + 0 + 1/4) / 4 = 0.5625
    assert M.recall_at_k(Y, LAB, 3) == pytest.approx(0.5625)


def test_rprecision_hand():
    # RP@1 = (1/1 + 1/1 + 0 + 1/1) / 4   (min(k, |y_i|) = 1; the empty row counts 0)
    assert M.rprecision_at_k(Y, LAB, 1) == pytest.approx(0.75)
    # RP@3 = (2/min(3,2) + 1/min(3,1) + 0 + 1/min(3,4)) / 4 = (1 + 1 + 0 + 1/3) / 4
    assert M.rprecision_at_k(Y, LAB, 3) == pytest.approx((1 + 1 + 1 / 3) / 4)


def test_f1_scores_hand():
    # 3 instances, 4 labels; decisions score > 0
    #   truth:     row 0 {0, 1}, row 1 {1}, row 2 {} ; label 3 relevant nowhere
    #   decisions: row 0 {0, 2}, row 1 {1}, row 2 {1}
    # per label (TP, FP, FN): 0 (1, 0, 0), 1 (1, 1, 1), 2 (0, 1, 0), 3 (0, 0, 0)
    Yt = csr([[0, 1], [1], []], 4)
    S = np.array([[0.5, -1.0, 2.0, -3.0], [-0.2, 0.1, -1.0, -1.0], [-1.0, 0.3, -0.5, -2.0]])
    r = M.f1_scores(Yt, S)
    # Micro-F1 = 2 * 2 / (2 * 2 + 2 + 1) = 4/7
    assert r["Micro-F1"] == pytest.approx(4 / 7)
    # Macro-F1 = (2/2 + 2/4 + 0/1 + [0/0 -> 0]) / 4 = 1.5 / 4
    assert r["Macro-F1"] == pytest.approx(1.5 / 4)
    # macro P = (1 + 1/2 + 0 + 0) / 4 = 3/8, macro R = (1 + 1/2 + [0/0] + [0/0]) / 4 = 3/8 -> 3/8
    assert r["Another-Macro-F1"] == pytest.approx(3 / 8)
    # the same from a sparse matrix of the positive scores, and from counts of two blocks
    assert M.f1_scores(Yt, sp.csr_matrix(np.where(S > 0, S, 0))) == pytest.approx(r)
    c1 = M.decision_counts(Yt[:2], S[:2])
    c2 = M.decision_counts(Yt[2:], S[2:])
    assert M.f1_from_counts(*(a + b for a, b in zip(c1, c2))) == pytest.approx(r)
    # a threshold moves the decisions: score > 0.4 keeps row 0's {0, 2} only
    r = M.f1_scores(Yt, S, threshold=0.4)
    assert r["Micro-F1"] == pytest.approx(2 * 1 / (2 * 1 + 1 + 2))


def test_macro_f1_over_test_labels_hand():
    """Macro-F1 averages over every declared label (0/0 counting 0, LibMultiLabel's); the
    test labels' Macro-F1 over those with a relevant test instance only.  The example of
    test_f1_scores_hand on a label space of 10 (labels 4-9 declared, never relevant, never
    decided): Macro-F1 = (2/2 + 2/4 + 0/1 + 0 ... 0) / 10; labels 0 and 1 are relevant:
    (2/2 + 2/4) / 2 = 3/4 -- label 2, decided once where it is not relevant, and the
    unused labels are left out, whatever the label space."""
    Yt = csr([[0, 1], [1], []], 10)
    S = np.full((3, 10), -1.0)
    S[0, [0, 2]] = (0.5, 2.0)
    S[1, 1] = S[2, 1] = 0.1
    counts = M.decision_counts(Yt, S)
    assert M.f1_from_counts(*counts)["Macro-F1"] == pytest.approx(1.5 / 10)
    assert M.macro_f1_over_test_labels(*counts) == pytest.approx(3 / 4)
    small = M.decision_counts(csr([[0, 1], [1], []], 4), S[:, :4])
    assert M.macro_f1_over_test_labels(*small) == pytest.approx(3 / 4)
    # no relevant label at all: no mean
    assert np.isnan(M.macro_f1_over_test_labels(*M.decision_counts(csr([[], [], []], 10), S)))


def test_coverage_hand():
    # labels relevant somewhere in the test set: {0,1,2,3,4,5} -> 6
    # cov@1: correct top-1 labels {2, 1, 5} -> 3/6
    assert M.coverage_at_k(Y, LAB, 1) == pytest.approx(0.5)
    # cov@3: correct labels {2, 0} + {1} + {5} -> 4/6 (row 2 predicts 0,1,2 but has no labels)
    assert M.coverage_at_k(Y, LAB, 3) == pytest.approx(4 / 6)


def test_coverage_denominator_ignores_labels_absent_from_test():
    # L = 5, only labels 0 and 1 occur in the test set; 0 is found -> 1/2 (not 1/5)
    Yc = csr([[0], [1]], 5)
    assert M.coverage_at_k(Yc, np.array([[0], [3]]), 1) == pytest.approx(0.5)


def test_psprecision_hand():
    # w = [2, 4, 1, 2, 5, 10]
    # PSP@1 numerator: hits at rank 1: row0 label 2 (w 1), row1 label 1 (w 4), row3 label 5 (w 10) = 15
    #       denominator (best rank-1 weight per row): row0 max(2,1)=2, row1 4, row2 0, row3 10 = 16
    assert M.psprecision_at_k(Y, LAB, 1, P) == pytest.approx(15 / 16)
    # PSP@3 numerator: row0 labels 2,0 -> 1 + 2 = 3; row1 4; row3 10; total 17
    #       denominator: row0 2 + 1 = 3; row1 4; row3 top-3 of {2,2,5,10} = 17; total 24
    assert M.psprecision_at_k(Y, LAB, 3, P) == pytest.approx(17 / 24)
    # a mean of per-row ratios would be (3/3 + 4/4 + 10/17) / 3 (or /4) -- not what pyxclib does
    assert 17 / 24 != pytest.approx((1 + 1 + 10 / 17) / 3)


def test_psndcg_hand():
    # PSnDCG@1: all D_i = D(1) = 1 -> same as PSP@1 = 15/16
    assert M.psndcg_at_k(Y, LAB, 1, P) == pytest.approx(15 / 16)
    # PSnDCG@3:
    #   weighted DCG: row0 = 1*1 (label 2, rank 1) + 2/log2(4) (label 0, rank 3) = 2;  / D(2)
    #                 row1 = 4;                                                        / D(1)
    #                 row3 = 10;                                                       / D(3)
    #   best DCG:     row0 = 2 + 1/log2(3)   (weights 2, 1)                            / D(2)
    #                 row1 = 4                                                         / D(1)
    #                 row3 = 10 + 5/log2(3) + 2/2  (weights 10, 5, 2)                  / D(3)
    num = 2 / D2 + 4 / D1 + 10 / D3
    den = (2 + 1 / LOG3) / D2 + 4 / D1 + (11 + 5 / LOG3) / D3
    assert M.psndcg_at_k(Y, LAB, 3, P) == pytest.approx(num / den)


def test_perfect_prediction_gives_one():
    Yp = csr([[0, 2], [1], [0, 3, 4, 5]], 6)
    w = 1 / P
    # rank relevant labels by decreasing weight (the best PS ranking) -> PSP = PSnDCG = 1
    lab = np.array([sorted(r, key=lambda l: -w[l])[:3] + [-1] * (3 - min(3, len(r)))
                    for r in ([0, 2], [1], [0, 3, 4, 5])])
    res = M.evaluate(Yp, lab, ks=(1, 3), propensities=P)
    for key in ("nDCG@1", "nDCG@3", "PSP@1", "PSP@3", "PSnDCG@1", "PSnDCG@3", "P@1"):
        assert res[key] == pytest.approx(1.0), key


def test_evaluate_keys_and_values():
    res = M.evaluate(Y, LAB, ks=(1, 3, 5), propensities=P)
    assert list(res) == [f"{m}@{k}" for k in (1, 3, 5)
                         for m in ("P", "nDCG", "PSP", "PSnDCG", "R", "RP", "cov")]
    assert res["P@3"] == pytest.approx(1 / 3)
    assert res["PSP@3"] == pytest.approx(17 / 24)
    assert res["cov@3"] == pytest.approx(4 / 6)
    assert all(isinstance(v, float) for v in res.values())
    res = M.evaluate(Y, LAB, ks=(3, 1))
    assert list(res) == ["P@3", "nDCG@3", "R@3", "RP@3", "cov@3", "P@1", "nDCG@1", "R@1", "RP@1", "cov@1"]


def test_all_rows_empty():
    Ye = csr([[], []], 3)
    lab = np.array([[0, 1], [2, -1]])
    res = M.evaluate(Ye, lab, ks=(1, 2), propensities=np.full(3, 0.5))
    assert res["P@2"] == 0.0 and res["nDCG@2"] == 0.0 and res["R@2"] == 0.0
    assert math.isnan(res["PSP@2"]) and math.isnan(res["PSnDCG@2"]) and math.isnan(res["cov@2"])


def test_empty_prediction_columns_and_all_padding():
    lab = np.full((4, 0), -1, dtype=np.int64)  # no predictions at all
    assert M.precision_at_k(Y, lab, 3) == 0.0
    assert M.psprecision_at_k(Y, -np.ones((4, 2), dtype=int), 2, P) == 0.0


def test_padding_in_the_middle_keeps_rank():
    # row 0 relevant {0, 2}; prediction [-1, 2]: the hit sits at rank 2
    Ys = csr([[0, 2]], 3)
    assert M.ndcg_at_k(Ys, np.array([[-1, 2]]), 2) == pytest.approx((1 / LOG3) / D2)


def test_input_normalisation():
    # duplicates and explicit zeros in Y_true; a non-CSR format; a dense array
    Yd = sp.csr_matrix((np.array([1.0, 1.0, 0.0, 1.0]), np.array([0, 0, 1, 2]), np.array([0, 3, 4])),
                       shape=(2, 3))
    before = (Yd.data.copy(), Yd.indices.copy(), Yd.indptr.copy())
    lab = np.array([[1, 0], [2, -1]])
    # row 0 relevant {0} (label 1 is an explicit zero), row 1 relevant {2}
    assert M.precision_at_k(Yd, lab, 2) == pytest.approx((1 + 1) / 4)
    assert M.precision_at_k(Yd.tocoo(), lab, 2) == pytest.approx(0.5)
    assert M.precision_at_k(np.array([[1, 0, 0], [0, 0, 1]]), lab, 2) == pytest.approx(0.5)
    assert all(np.array_equal(a, b) for a, b in zip(before, (Yd.data, Yd.indices, Yd.indptr)))


def test_label_validation():
    with pytest.raises(DataFormatError, match="twice"):
        M.precision_at_k(Y, np.array([[2, 2, 0], [1, -1, -1], [0, 1, 2], [5, 2, -1]]), 3)
    with pytest.raises(DataFormatError, match="label ids"):
        M.precision_at_k(Y, np.array([[6], [1], [0], [5]]), 1)
    with pytest.raises(DataFormatError, match="label ids"):
        M.precision_at_k(Y, np.array([[-2], [1], [0], [5]]), 1)
    with pytest.raises(DataFormatError, match="rows"):
        M.precision_at_k(Y, LAB[:3], 1)
    with pytest.raises(DataFormatError, match="integer"):
        M.precision_at_k(Y, LAB.astype(float), 1)
    with pytest.raises(ParameterError):
        M.precision_at_k(Y, LAB, 0)
    with pytest.raises(ParameterError):
        M.evaluate(Y, LAB, ks=(1, 1))
    with pytest.raises(ParameterError, match="per label"):
        M.psprecision_at_k(Y, LAB, 1, P[:5])
    with pytest.raises(ParameterError, match="> 0"):
        M.psprecision_at_k(Y, LAB, 1, np.zeros(6))
    # duplicates only beyond k are not looked at (only the first k columns are used)
    assert M.precision_at_k(Y, np.array([[2, 1, 1], [1, -1, -1], [0, 1, 2], [5, 2, -1]]), 2) \
        == pytest.approx(0.375)


# ----------------------------------------------------------------------------- propensities
def test_propensities_hand():
    # N = 1000, A = 0.55, B = 1.5:
    #   C = (ln 1000 - 1) * 2.5^0.55 = 5.907755 * 1.655285 = 9.778889
    #   N_l = 0:   1/p = 1 + C * 1.5^-0.55   = 1 + 9.778889 * 0.800110 = 8.824189 -> p = 0.113325
    #   N_l = 1:   1/p = 1 + C * 2.5^-0.55   = 1 + (ln 1000 - 1) = ln 1000      -> p = 1/ln(1000) exactly
    #   N_l = 10:  1/p = 1 + C * 11.5^-0.55  = 1 + 9.778889 * 0.260985 = 3.552147 -> p = 0.281520
    #   N_l = 100: 1/p = 1 + C * 101.5^-0.55 = 1 + 9.778889 * 0.078785 = 1.770430 -> p = 0.564835
    p = M.propensities(np.array([0, 1, 10, 100]), 1000)
    assert p[0] == pytest.approx(0.113325, abs=2e-6)
    assert p[1] == pytest.approx(1 / math.log(1000), rel=1e-12)
    assert p[2] == pytest.approx(0.281520, abs=2e-6)
    assert p[3] == pytest.approx(0.564835, abs=2e-6)
    assert np.all(np.diff(p) > 0)
    # other constants: N = 100, A = 0.5, B = 0.4, N_l = 3
    #   C = (ln 100 - 1) * 1.4^0.5 = 3.605170 * 1.183216 = 4.265700;  3.4^-0.5 = 0.542326
    #   1/p = 1 + 4.265700 * 0.542326 = 3.313403 -> p = 0.301804
    assert M.propensities([3], 100, A=0.5, B=0.4)[0] == pytest.approx(0.301804, abs=2e-6)


def test_propensities_from_matrix_and_errors():
    Ytr = csr([[0, 1], [1], [], [1, 2]], 4)
    assert list(M.label_counts(Ytr)) == [1, 3, 1, 0]
    p = M.propensities(M.label_counts(Ytr), Ytr.shape[0])
    C = (math.log(4) - 1) * 2.5 ** 0.55
    assert p[1] == pytest.approx(1 / (1 + C * 4.5 ** -0.55))
    with pytest.raises(ParameterError):
        M.propensities([1, 2], 0)
    with pytest.raises(ParameterError):
        M.propensities([5], 3)
    with pytest.raises(ParameterError):
        M.propensities([-1], 3)


# ----------------------------------------------------------------------------- top-k
def test_topk_from_dense_scores():
    S = np.array([[0.1, 0.9, 0.5, 0.5],
                  [-1.0, -2.0, -0.5, -3.0]])
    lab, sc = M.topk_from_scores(S, 3)
    # row 0: 0.9 (label 1), then a tie 0.5 between labels 2 and 3 -> smaller id first
    assert lab.tolist() == [[1, 2, 3], [2, 0, 1]]
    assert sc.tolist() == [[0.9, 0.5, 0.5], [-0.5, -1.0, -2.0]]
    # k > L pads with -1 / -inf
    lab, sc = M.topk_from_scores(S, 6)
    assert lab[0].tolist() == [1, 2, 3, 0, -1, -1]
    assert np.isneginf(sc[:, 4:]).all()


def test_topk_from_sparse_scores():
    S = sp.csr_matrix(np.array([[0.0, 0.3, 0.0, -0.2],
                                [0.0, 0.0, 0.0, 0.0],
                                [0.7, 0.1, 0.4, 0.0]]))
    lab, sc = M.topk_from_scores(S, 2)
    # row 0: stored entries 0.3 (label 1) and -0.2 (label 3); row 1: nothing stored
    assert lab.tolist() == [[1, 3], [-1, -1], [0, 2]]
    assert sc[0].tolist() == [0.3, -0.2] and np.isneginf(sc[1]).all()
    with pytest.raises(DataFormatError, match="NaN"):
        M.topk_from_scores(np.array([[np.nan, 1.0]]), 1)


def test_topk_dense_in_several_chunks(monkeypatch):
    monkeypatch.setattr(M, "_CHUNK_ENTRIES", 7)  # 7 // 3 = 2 rows per block
    rng = np.random.default_rng(0)
    S = rng.standard_normal((9, 3))
    lab, sc = M.topk_from_scores(S, 2)
    assert np.array_equal(lab, np.argsort(-S, axis=1)[:, :2])
    assert np.allclose(sc, -np.sort(-S, axis=1)[:, :2])


# ----------------------------------------------------------------------------- binary
# L = 4, n = 3;  relevant: row0 {0, 1}, row1 {1}, row2 {}
# decision scores (positive iff > 0):
#   row0 [ 0.5, -1.0,  0.2, -0.3] -> predicts {0, 2}
#   row1 [-0.1,  0.7, -2.0, -1.0] -> predicts {1}
#   row2 [ 0.3, -0.5, -1.0,  0.0] -> predicts {0}   (0.0 is not > 0)
# per label:  l0: TP 1 FP 1 FN 0 -> prec 1/2, rec 1
#             l1: TP 1 FP 0 FN 1 -> prec 1,   rec 1/2
#             l2: TP 0 FP 1 FN 0 -> prec 0,   rec 0/0
#             l3: TP 0 FP 0 FN 0 -> prec 0/0, rec 0/0
YB = csr([[0, 1], [1], []], 4)
SB = np.array([[0.5, -1.0, 0.2, -0.3], [-0.1, 0.7, -2.0, -1.0], [0.3, -0.5, -1.0, 0.0]])


def test_binary_precision_recall_hand():
    r = M.binary_precision_recall(YB, SB)
    # exclude: precision over l0,l1,l2 = (1/2 + 1 + 0)/3 ; recall over l0,l1 = (1 + 1/2)/2
    assert r == pytest.approx({"precision": 0.5, "recall": 0.75,
                               "n_labels_precision": 3, "n_labels_recall": 2})
    # zero_division = 0: (1/2 + 1 + 0 + 0)/4 and (1 + 1/2 + 0 + 0)/4
    r0 = M.binary_precision_recall(YB, SB, zero_division=0)
    assert (r0["precision"], r0["recall"]) == pytest.approx((0.375, 0.375))
    # zero_division = 1: (1/2 + 1 + 0 + 1)/4 and (1 + 1/2 + 1 + 1)/4
    r1 = M.binary_precision_recall(YB, SB, zero_division=1)
    assert (r1["precision"], r1["recall"]) == pytest.approx((0.625, 0.875))


def test_binary_precision_recall_sparse_and_binary_inputs():
    expected = M.binary_precision_recall(YB, SB)
    S_pos = sp.csr_matrix(np.where(SB > 0, SB, 0.0))  # only score>0 entries stored
    assert M.binary_precision_recall(YB, S_pos) == pytest.approx(expected)
    assert M.binary_precision_recall(YB, sp.csr_matrix((SB > 0).astype(np.int8))) == pytest.approx(expected)
    assert M.binary_precision_recall(YB, SB > 0) == pytest.approx(expected)
    # a sparse matrix with negative stored scores: those are not positives
    assert M.binary_precision_recall(YB, sp.csr_matrix(SB)) == pytest.approx(expected)
    # threshold: > 0.4 keeps row0 l0 (0.5) and row1 l1 (0.7):
    #   precision over {l0, l1} = (1 + 1)/2, recall over {l0, l1} = (1 + 1/2)/2
    r = M.binary_precision_recall(YB, SB, threshold=0.4)
    assert (r["precision"], r["recall"]) == pytest.approx((1.0, 0.75))
    with pytest.raises(ParameterError):
        M.binary_precision_recall(YB, sp.csr_matrix(SB), threshold=-1.0)
    with pytest.raises(DataFormatError):
        M.binary_precision_recall(YB, SB[:, :3])
    with pytest.raises(ParameterError):
        M.binary_precision_recall(YB, SB, zero_division="skip")


# ----------------------------------------------------------------------------- reference
def reference(Y, lab, ks, p):
    """Straightforward per-instance implementation of the documented definitions."""
    Y = Y.tocsr()
    n, L = Y.shape
    rel = [set(Y.indices[Y.indptr[i]:Y.indptr[i + 1]].tolist()) for i in range(n)]
    w = 1.0 / p
    out = {}
    for k in ks:
        preds = [[int(l) for l in lab[i][:k]] + [-1] * max(0, k - lab.shape[1]) for i in range(n)]
        prec = ndcg = rec = rp = 0.0
        ps_num = ps_den = psn_num = psn_den = 0.0
        covered = set()
        for i in range(n):
            hits = [1 if l in rel[i] else 0 for l in preds[i]]
            prec += sum(hits) / k
            dcg = sum(h / math.log2(j + 2) for j, h in enumerate(hits))
            m = min(k, len(rel[i])) or k
            idcg = sum(1 / math.log2(j + 2) for j in range(m))
            ndcg += dcg / idcg
            rec += sum(hits) / max(len(rel[i]), 1)
            rp += sum(hits) / min(k, len(rel[i])) if rel[i] else 0.0
            gains = [w[l] if h else 0.0 for l, h in zip(preds[i], hits)]
            best = sorted((w[l] for l in rel[i]), reverse=True)[:k]
            ps_num += sum(gains)
            ps_den += sum(best)
            psn_num += sum(g / math.log2(j + 2) for j, g in enumerate(gains)) / idcg
            psn_den += sum(b / math.log2(j + 2) for j, b in enumerate(best)) / idcg
            covered |= {l for l, h in zip(preds[i], hits) if h}
        relevant = set().union(*rel)
        out[f"P@{k}"] = prec / n
        out[f"nDCG@{k}"] = ndcg / n
        out[f"PSP@{k}"] = ps_num / ps_den
        out[f"PSnDCG@{k}"] = psn_num / psn_den
        out[f"R@{k}"] = rec / n
        out[f"RP@{k}"] = rp / n
        out[f"cov@{k}"] = len(covered) / len(relevant)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_against_reference_on_random_data(seed):
    rng = np.random.default_rng(seed)
    n, L, width = 60, 25, 5
    rows = []
    for i in range(n):
        size = rng.choice([0, 1, 2, 3, 8], p=[0.15, 0.3, 0.25, 0.2, 0.1])
        rows.append(sorted(rng.choice(L, size=size, replace=False).tolist()))
    Yr = csr(rows, L)
    # scores that favour relevant labels a bit, some entries dropped -> -1 padding
    S = rng.standard_normal((n, L)) + 1.5 * Yr.toarray()
    lab, _ = M.topk_from_scores(S, width)
    drop = rng.random(lab.shape) < 0.15
    lab[drop] = -1
    p = M.propensities(rng.integers(0, 50, size=L), 200)
    ks = (1, 2, 3, 5, 7)  # 7 > width: the last two slots are empty
    got = M.evaluate(Yr, lab, ks=ks, propensities=p)
    want = reference(Yr, lab, ks, p)
    assert list(got) == list(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-12), key
    # single-metric functions agree with evaluate
    assert M.precision_at_k(Yr, lab, 3) == pytest.approx(got["P@3"])
    assert M.ndcg_at_k(Yr, lab, 3) == pytest.approx(got["nDCG@3"])
    assert M.psprecision_at_k(Yr, lab, 3, p) == pytest.approx(got["PSP@3"])
    assert M.psndcg_at_k(Yr, lab, 3, p) == pytest.approx(got["PSnDCG@3"])
    assert M.recall_at_k(Yr, lab, 3) == pytest.approx(got["R@3"])
    assert M.coverage_at_k(Yr, lab, 3) == pytest.approx(got["cov@3"])
    assert M.rprecision_at_k(Yr, lab, 3) == pytest.approx(got["RP@3"])


def test_binary_against_reference_on_random_data():
    rng = np.random.default_rng(5)
    n, L = 80, 30
    Yd = (rng.random((n, L)) < 0.08).astype(float)
    Yd[:, :4] = 0  # labels without test positives
    S = rng.standard_normal((n, L)) - 1.2 + 2 * Yd
    S[:, 4:7] = -5  # labels never predicted
    tp = ((S > 0) & (Yd > 0)).sum(0)
    pp = (S > 0).sum(0)
    ap = (Yd > 0).sum(0)
    want_p = np.mean([t / q for t, q in zip(tp, pp) if q > 0])
    want_r = np.mean([t / q for t, q in zip(tp, ap) if q > 0])
    r = M.binary_precision_recall(sp.csr_matrix(Yd), sp.csr_matrix(np.where(S > 0, S, 0)))
    assert (r["precision"], r["recall"]) == pytest.approx((want_p, want_r))
    assert r["n_labels_precision"] == int((pp > 0).sum()) and r["n_labels_recall"] == int((ap > 0).sum())
    # LibMultiLabel's F1 scores, computed here from the dense decisions
    fp, fn = pp - tp, ap - tp
    with np.errstate(divide="ignore", invalid="ignore"):
        macro = np.nansum(2 * tp / (2 * tp + fp + fn)) / L
        mp, mr = np.nansum(tp / (tp + fp)) / L, np.nansum(tp / (tp + fn)) / L
    f = M.f1_scores(sp.csr_matrix(Yd), S)
    assert f["Micro-F1"] == pytest.approx(2 * tp.sum() / (2 * tp + fp + fn).sum())
    assert f["Macro-F1"] == pytest.approx(macro)
    assert f["Another-Macro-F1"] == pytest.approx(2 * mp * mr / (mp + mr))


def test_scale_without_dense_matrices():
    # n = 1e5, L = 1e6: would be 10^11 entries dense; must run in O(nnz + n k + L)
    rng = np.random.default_rng(3)
    n, L, per = 100_000, 1_000_000, 3
    cols = rng.integers(0, L, size=(n, per))  # may repeat inside a row: merged as duplicates
    Ybig = sp.csr_matrix((np.ones(n * per), cols.ravel(), np.arange(0, n * per + 1, per)), shape=(n, L))
    # rank 1: a relevant label; ranks 2..5: distinct shifts of it (duplicate-free rows)
    lab = (cols[:, :1] + np.arange(5) * 7919) % L
    p = M.propensities(M.label_counts(Ybig), n)
    res = M.evaluate(Ybig, lab, ks=(1, 3, 5), propensities=p)
    assert res["P@1"] == pytest.approx(1.0)
    assert res["nDCG@1"] == pytest.approx(1.0)
    assert 0 < res["cov@5"] <= 1
    r = M.binary_precision_recall(Ybig, Ybig)
    assert (r["precision"], r["recall"]) == pytest.approx((1.0, 1.0))


# ----------------------------------------------------------------------------- DiSMEC++'s set
# The example above at k = 1: top-1 labels 2 (hit), 1 (hit), 0 (miss, row without labels), 5 (hit).
#   per label 0..5: TP [0 1 1 0 0 1], FP [1 0 0 0 0 0], FN [2 0 0 1 1 0], TN = 4 - the rest
# at k = 3: TP [1 1 1 0 0 1], FP [1 2 2 0 0 0], FN [1 0 0 1 1 0]

def test_abandonment_hand():
    assert M.abandonment_at_k(Y, LAB, 1) == pytest.approx(3 / 4)   # rows 0, 1, 3 hit at rank 1
    assert M.abandonment_at_k(Y, LAB, 3) == pytest.approx(3 / 4)   # row 2 has nothing to hit
    late = np.array([[1, 0], [0, 1], [0, 1], [1, 2]])          # hits only at rank 2, rows 0 and 1
    assert M.abandonment_at_k(Y, late, 1) == 0.0
    assert M.abandonment_at_k(Y, late, 2) == pytest.approx(2 / 4)


def test_topk_confusion_hand():
    tp, fp, fn, tn = M.topk_confusion(Y, LAB, 1)
    assert tp.tolist() == [0, 1, 1, 0, 0, 1] and fp.tolist() == [1, 0, 0, 0, 0, 0]
    assert fn.tolist() == [2, 0, 0, 1, 1, 0] and tn.tolist() == [1, 3, 3, 3, 3, 3]
    tp, fp, fn, tn = M.topk_confusion(Y, LAB, 3)             # empty slots decide nothing
    assert tp.tolist() == [1, 1, 1, 0, 0, 1] and fp.tolist() == [1, 2, 2, 0, 0, 0]
    assert fn.tolist() == [1, 0, 0, 1, 1, 0] and tn.tolist() == [1, 1, 1, 3, 3, 3]


def test_confusion_metrics_hand():
    m = M.confusion_metrics(*M.topk_confusion(Y, LAB, 1), 1)
    # micro: TP 3, FP 1, FN 4, TN 16 of n L = 24
    TP, FP, FN, TN = 3, 1, 4, 16
    assert m["MicroTP@1"] == pytest.approx(3 / 24) and m["MicroTN@1"] == pytest.approx(16 / 24)
    assert m["MicroP@1"] == pytest.approx(3 / 4) and m["MicroR@1"] == pytest.approx(3 / 7)
    assert m["MicroF1@1"] == pytest.approx(6 / 11) and m["MicroACC@1"] == pytest.approx(19 / 24)
    assert m["MicroSPC@1"] == pytest.approx(16 / 17) and m["MicroNPV@1"] == pytest.approx(16 / 20)
    assert m["MicroBA@1"] == pytest.approx((3 / 7 + 16 / 17) / 2)
    assert m["MicroBM@1"] == pytest.approx(3 / 7 + 16 / 17 - 1) and m["MicroMK@1"] == pytest.approx(0.55)
    assert m["MicroFM@1"] == pytest.approx(math.sqrt(3 / 4 * 3 / 7))
    assert m["MicroLR+@1"] == pytest.approx(51 / 7) and m["MicroLR-@1"] == pytest.approx(17 / 28)
    assert m["MicroDOR@1"] == pytest.approx(TP * TN / (FP * FN))           # = 12
    mcc = (TP * TN - FP * FN) / math.sqrt((TP + FP) * (TP + FN) * (TN + FP) * (TN + FN))
    assert m["MicroMCC@1"] == pytest.approx(mcc)
    # macro, over all 6 labels, 0/0 = 0: precision of labels 0..5 = 0, 1, 1, 0 (0/0), 0 (0/0), 1
    assert m["MacroP@1"] == pytest.approx(0.5) and m["MacroR@1"] == pytest.approx(0.5)
    assert m["MacroF1@1"] == pytest.approx(0.5) and m["Cov@1"] == pytest.approx(0.5)
    # MCC of label 0 (TP 0, FP 1, FN 2, TN 1) is -2/sqrt(12); labels 1, 2, 5 are perfect;
    # labels 3 and 4 never predicted: 0
    assert m["MacroMCC@1"] == pytest.approx((3 - 2 / math.sqrt(12)) / 6)
    # a perfect label has no false positive: its LR+ is 1/0, and the macro mean inf
    assert m["MacroLR+@1"] == math.inf and m["MacroDOR@1"] == math.inf
    assert set(m) == {f"{a}{x}@1" for a in ("Macro", "Micro") for x in M.CONFUSION_METRICS} | {
        "Cov@1", "MicroTP@1", "MicroFP@1", "MicroFN@1", "MicroTN@1"}


def test_dismec_metrics_dcg_uses_the_natural_log():
    m = M.dismec_metrics(Y, LAB, (1, 3))
    # rank-1 hits in rows 0, 1, 3; row 0 also hits at rank 3: 1/ln 2 and 1/ln 4
    assert m["InstanceDCG@1"] == pytest.approx(3 / math.log(2) / 4)
    assert m["InstanceDCG@3"] == pytest.approx((3 / math.log(2) + 1 / math.log(4)) / 4)
    assert m["InstancenDCG@3"] == M.ndcg_at_k(Y, LAB, 3) and m["InstanceP@3"] == M.precision_at_k(Y, LAB, 3)
    assert m["Abd@1"] == pytest.approx(3 / 4) and m["MacroP@3"] == M.confusion_metrics(
        *M.topk_confusion(Y, LAB, 3), 3)["MacroP@3"]
