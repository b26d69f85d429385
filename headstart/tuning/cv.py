"""Cross-validated ranking metrics of one-vs-all models, for each of several C: what
LIBLINEAR's ``-v n`` (cross-validation) and ``-C`` (its search for C) give a binary
problem, for the metrics of extreme classification (P@k, nDCG@k, ...).

Every instance is held out exactly once: fold f's model, trained on the other folds,
ranks the labels of fold f's instances, and the metrics are computed once over all
instances' rankings (so they are averages over instances, as on a test set).  The folds
are the same for every C (one random split, ``seed``), so the candidates are compared on
the same data.  Preprocessing is fitted once on all of it (:class:`.folds.FoldRunner`).

``Cs="auto"`` is LIBLINEAR's ``-C`` (``find_parameters`` / ``find_parameter_C`` of its
linear.cpp, 2.50; the facts, not its code): C starts at :func:`start_C`, the largest power
of 2 not above 1 / (l max_i ||x_i||^2) for the logistic loss (``-s 0``) and
1 / (2 l max_i ||x_i||^2) for the squared hinge (``-s 2``) -- l the instances of all the
data, x_i with its bias feature --, never above :data:`MAX_C` = 1024; C doubles
(:data:`RATIO`) while C <= 1024; each fold's training at a C starts from the same fold's
weights at the C before (LIBLINEAR's warm start; ``init="pretrained"`` from the fold's
model in memory, :class:`headstart.init.pretrained.InMemoryWeights` -- the start from the
same model saved, bit for bit, without writing it), and the search stops early once the
weights of every fold stopped moving (LIBLINEAR: at :data:`UNCHANGED_STOP` C's in a row,
the first C counting as one; here "not moved" is every label's solver taking no Newton
step, which is when LIBLINEAR's ||w - w_prev|| <= 1e-15 holds).  The best C is the
first with the highest score, as LIBLINEAR keeps the first of equal accuracies.  What
differs: the score is ``metric`` over all labels (P@1 by default) instead of a binary
problem's accuracy; ``patience`` (not LIBLINEAR's) may also stop the search once that
many C's in a row have scored below the best (counted once a C has beaten the first C) -- one-vs-all weights of many labels
rarely all stop moving, so LIBLINEAR's rule alone usually runs to C = 1024.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import ParameterError
from ..init.pretrained import InMemoryWeights
from ..liblinear import one_class_per_row
from ..metrics import F1_NAMES
from ..params import TrainParams
from .folds import FoldRunner, check_cv, split

log = logging.getLogger(__name__)

#: metrics a candidate may be chosen by (their @k with k up to the run's k)
CHOOSE_BY = ("P", "nDCG", "R", "RP")
# and without a k: F1_NAMES, LibMultiLabel's F1 scores of the decisions score > 0 (metrics.f1_scores)
#: and LIBLINEAR's own (-v's "Cross Validation Accuracy"), for data LIBLINEAR reads: one
#: label (a +1/-1 file: the share of rows whose sign is right) or one class per row (the
#: share whose best-scoring label is their class, LIBLINEAR's one-vs-rest prediction)
ACCURACY = "Accuracy"


#: LIBLINEAR -C's grid: successive C's differ by this factor, up to MAX_C
RATIO = 2.0
MAX_C = 1024.0
#: LIBLINEAR -C stops when every fold's weights have not moved at this many C's in a row
UNCHANGED_STOP = 5
#: losses LIBLINEAR's -C searches (-s 0, -s 2) -> the factor of its starting C's denominator
_START_FACTOR = {"logistic": 1.0, "squared-hinge": 2.0}

#: why an automatic search ended (CrossValidation.stop)
STOPS = {
    "unchanged": f"every fold's weights stopped moving ({UNCHANGED_STOP} C's in a row, LIBLINEAR's rule)",
    "patience": "a score below the best at {patience} C's in a row (--patience), after the score rose",
    "max_C": "the maximum C was reached",
}


@dataclass
class CrossValidation:
    """``metrics[c]``: the metrics of ``candidates[c]`` (the C values, in the order
    given, or of the automatic search); ``best``: the candidate with the highest
    ``metric`` (the first of equals).  ``stop``: why an automatic search ended (a key
    of :data:`STOPS`), "" for a given list."""

    candidates: np.ndarray
    metrics: list[dict]
    metric: str
    best: float
    trainings: int
    stop: str = ""


def check_auto(params: TrainParams) -> None:
    """Refuse an automatic search for the objectives LIBLINEAR's -C does not search (its
    -s 0 and -s 2 only: the primal Newton method, L2, logistic or squared hinge), whose
    starting C has no rule and whose solver has no warm start."""
    if params.regularizer != "l2" or params.l2_solver != "newton" or params.loss not in _START_FACTOR:
        raise ParameterError(
            "parameter Cs 'auto' (LIBLINEAR's -C) searches the objectives of LIBLINEAR -s 0 and -s 2 only: "
            f"regularizer 'l2', l2_solver 'newton', loss {' or '.join(map(repr, _START_FACTOR))}; got regularizer "
            f"{params.regularizer!r}, l2_solver {params.l2_solver!r}, loss {params.loss!r} (give a list of Cs)")


def start_C(X: Any, params: TrainParams, max_C: float = MAX_C) -> float:
    """LIBLINEAR -C's first C for the data X (as trained: preprocessed, without the bias
    column) and ``params``: the largest power of 2 not above 1 / (f l max_i ||x_i||^2),
    f = 1 for the logistic loss and 2 for the squared hinge, l the rows of X, x_i with
    the bias feature (its value ``params.bias`` when > 0); never above ``max_C``.  Class
    weights do not enter (nor do they in LIBLINEAR); a ``reg_scale`` other than 1 scales
    it (headstart's C / reg_scale is LIBLINEAR's C)."""
    import scipy.sparse as sp

    check_auto(params)
    X = sp.csr_matrix(X)
    sq = np.zeros(X.shape[0])
    if X.nnz:
        sq = np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).reshape(-1)
    max_sq = (float(sq.max()) if sq.size else 0.0) + (params.bias ** 2 if params.bias > 0 else 0.0)
    if max_sq == 0 or X.shape[0] == 0:
        return float(max_C)          # LIBLINEAR's 1 / 0: infinity, cut to the maximum
    lowest = 1.0 / (_START_FACTOR[params.loss] * X.shape[0] * max_sq)
    # the exponent by frexp, exact even where log(x) / log(2) rounds across an integer
    mantissa, exponent = math.frexp(lowest)
    return float(min(math.ldexp(1.0, exponent - 1) * params.reg_scale, max_C))


def auto_grid(first: float, max_C: float = MAX_C) -> np.ndarray:
    """The C's an automatic search may try: ``first`` doubled while <= ``max_C``."""
    out = []
    C = float(first)
    while C <= max_C:
        out.append(C)
        C *= RATIO
    return np.asarray(out, dtype=np.float64)


def check_metric(metric: str, k: Any) -> list[int]:
    """The ks the metrics are computed at (1, 3, 5 up to ``k``, and the metric's own,
    e.g. 2 for nDCG@2), after checking ``k`` and that ``metric`` is one of P, nDCG, R, RP
    at some j <= k, an F1 score of :data:`F1_NAMES` or :data:`ACCURACY` (also before the
    data is read: the command line)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"parameter k must be an integer >= 1, got {k!r}")
    ks = {j for j in (1, 3, 5, int(k)) if j <= k}
    if isinstance(metric, str) and (metric in F1_NAMES or metric == ACCURACY):
        return sorted(ks)
    name, _, at = metric.partition("@") if isinstance(metric, str) else ("", "", "")
    # ASCII digits without a leading zero ('P@²' and 'P@01' are no metric names)
    plain = at.isascii() and at.isdigit() and str(int(at)) == at
    if name not in CHOOSE_BY or not plain or not 1 <= int(at) <= int(k):
        raise ParameterError(f"parameter metric must be {', '.join(f'{m}@j' for m in CHOOSE_BY)} with "
                             f"1 <= j <= k = {int(k)} (e.g. {CHOOSE_BY[0]}@1), or {', '.join(F1_NAMES)}, {ACCURACY}; "
                             f"got {metric!r}")
    return sorted(ks | {int(at)})


def cross_validate(X: Any, Y: Any, params: TrainParams | None = None, *, folds: int = 3, Cs: Any = None,
                   k: int = 5, metric: str | None = None, seed: int = 0,
                   progress: Callable[[int], None] | None = None, first_C: float | None = None,
                   max_C: float = MAX_C, patience: int | None = None, warm_start: bool = True) -> CrossValidation:
    """Cross-validated P@k, nDCG@k, R@k, RP@k and coverage@k (k = 1, 3, 5 up to ``k``),
    and the Micro-, Macro- and Another-Macro-F1 of the decisions score > 0 (what
    LibMultiLabel's one-vs-all search may choose by), of one-vs-all models trained with
    ``params`` and each C in ``Cs`` (default: only ``params.C``); the best C by ``metric``
    (default: P@1, or :data:`ACCURACY` on data of one label, where P@1 is the share of
    positive rows whatever C).  On data of one label or of one class per row also
    LIBLINEAR's accuracy (:data:`ACCURACY`; see :func:`single_label`).

    ``Cs="auto"``: LIBLINEAR's -C search (see the module's description): from
    ``first_C`` (default: :func:`start_C` of the data; LIBLINEAR's ``-c`` with ``-C``)
    doubling up to ``max_C``, each fold warm-started from its weights at the C before
    (``warm_start``), stopped when the weights stop moving or, with ``patience``, when
    that many C's in a row have scored below the best."""
    from ..metrics import decision_counts, evaluate, f1_from_counts
    from ..prediction.topk import predict_above, predict_topk

    params = TrainParams() if params is None else params
    check_cv(params, folds, seed)
    auto = isinstance(Cs, str)
    if auto:
        if Cs != "auto":
            raise ParameterError(f"parameter Cs must be positive numbers or 'auto', got {Cs!r}")
        check_auto(params)
        for name, v in (("first_C", first_C), ("max_C", max_C)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.number))
                                  or not (math.isfinite(v) and v > 0)):
                raise ParameterError(f"parameter {name} must be a finite number > 0, got {v!r}")
        if patience is not None and (isinstance(patience, bool) or not isinstance(patience, (int, np.integer))
                                     or patience < 1):
            raise ParameterError(f"parameter patience must be an integer >= 1 (or None), got {patience!r}")
        cand = np.zeros(0)
    else:
        if first_C is not None or patience is not None:
            raise ParameterError("parameters first_C and patience are for Cs='auto' (a given list is tried whole)")
        cand = np.asarray([params.C] if Cs is None else Cs, dtype=np.float64).reshape(-1)
        if cand.size == 0 or not np.all(np.isfinite(cand)) or np.any(cand <= 0):
            raise ParameterError(f"parameter Cs must be positive numbers, got {cand.tolist()!r}")
    ks = check_metric("P@1" if metric is None else metric, k)
    run = FoldRunner(X, Y, params, progress, min_rows=folds, what=f"{folds} folds")
    n = run.n
    if run.L == 0:
        raise ParameterError("the data has no labels: nothing to rank")
    if metric is None:
        # one label (a +1/-1 file): every C ranks it first, P@1 would tie at every C and
        # choose the first; LIBLINEAR's train -C chooses by accuracy
        metric = ACCURACY if run.L == 1 else "P@1"
    parts = split(np.random.default_rng(seed).permutation(n), folds)
    width = max(1, min(int(k), run.L))
    if width < int(k):
        # as evaluate / predict: k cut to the labels there are, said, and reported at it
        log.warning("k = %d is more than the data's %d label(s): metrics up to k = %d", int(k), run.L, width)
        ks = sorted({j for j in ks if j <= width} | {width})
    accuracy = single_label(run.Y)
    if metric == ACCURACY and not accuracy:
        raise ParameterError(f"parameter metric {ACCURACY!r} (LIBLINEAR's) is for data of one label (a +1/-1 "
                             "file) or of exactly one label per row (one class each); this data has "
                             f"{run.L} labels and rows with {'none' if np.any(np.diff(run.Y.indptr) == 0) else 'several'}")
    if metric not in {f"{m}@{j}" for m in CHOOSE_BY for j in ks} | set(F1_NAMES) | {ACCURACY}:
        # before any training (it was found out after every fold and C)
        raise ParameterError(f"parameter metric {metric!r} needs k <= {width}: the data has {run.L} labels")
    if auto:
        # LIBLINEAR: the start from all of the data (not a fold), cut to the maximum C
        cand = auto_grid(min(float(first_C), float(max_C)) if first_C is not None
                         else start_C(run.X, run.params, max_C), max_C)

    def one_C(C: float, starts: list, warm: bool) -> tuple[dict, int]:
        """The metrics at C, and how many of the folds' labels moved (took a Newton step;
        all of them without a warm start).  ``warm``: each fold's model replaces
        ``starts[f]`` as soon as it is trained, to start the same fold at the next C."""
        p = dataclasses.replace(run.params, C=float(C))
        top = np.zeros((n, width), dtype=np.int64)
        counts = np.zeros((3, run.L), dtype=np.int64)    # per label: TP, predicted, relevant
        moved = 0
        for f, val in enumerate(parts):
            pf = p if starts[f] is None else dataclasses.replace(p, init="pretrained", pretrained=starts[f])
            model, stats = run.fit(np.setdiff1d(np.arange(n), val, assume_unique=True), pf)
            del pf
            steps = np.asarray(stats["iterations"])
            moved += steps.size if starts[f] is None else int(np.count_nonzero(steps > 0))
            # released before the next fold trains: held, the fold's statistics came on top
            # of the next fold's peak (per label of the label space: 2M labels, 1.34 GB
            # against 0.81 GB for headstart train)
            del stats, steps
            if warm:
                # LIBLINEAR's warm start, in memory: the fold's weights as the model
                # directory saved them would hold them (float32, canonical -- the model's
                # own arrays, no copy), so the search is the one of the saved-model start
                # it replaced, bit for bit, without writing and reading every fold's model
                # at every C.  Memory: one model per fold, the previous one released here.
                starts[f] = InMemoryWeights.of_model(model, f"fold {f}'s model at C = {C:g}")
            W, b = model.weights, model.intercept
            del model
            Xv = run.X[val]
            top[val] = predict_topk((W, b), Xv, width, threads=p.threads, preprocess=False)[0]
            # the folds' counts add up to those of all instances (metrics.decision_counts)
            decided = predict_above((W, b), Xv, 0.0, n_columns=run.L, threads=p.threads, preprocess=False)
            counts += np.stack(decision_counts(run.Y[val], decided))
            del W, b
        out = {**evaluate(run.Y, top, ks=ks), **f1_from_counts(*counts)}
        if accuracy:
            if run.L == 1:     # right: predicted and relevant, or neither (TP + TN)
                tp, predicted, relevant = counts[:, 0]
                right = n - predicted - relevant + 2 * tp
            else:              # the best label is the row's one class
                right = int(np.count_nonzero(np.asarray(run.Y[np.arange(n), top[:, 0]]).ravel()))
            out[ACCURACY] = float(right) / n
        return out, moved

    results: list[dict] = []
    stop = ""
    if not auto:
        for C in cand:
            results.append(one_C(C, [None] * folds, False)[0])
    else:
        starts: list = [None] * folds
        unchanged = 0            # LIBLINEAR's count: the first C counts as unchanged
        best_score, since_best, rose = -math.inf, 0, False
        for j, C in enumerate(cand):
            r, moved = one_C(C, starts, warm_start)
            results.append(r)
            score = r[metric]
            log.info("C = %g: %s = %.4f; %d of %d fold trainings of a label moved", C, metric, score, moved,
                     folds * run.L)
            # patience counts the C's in a row scoring below the best, from the first
            # C that beat the first C's score on: the first, tiny C's models have
            # learnt next to nothing, and their scores wander (bibtex: down, then up
            # by a factor of 8) before the search reaches the C's that matter
            if score > best_score:
                rose = rose or j > 0
                best_score, since_best = score, 0
            elif score < best_score and rose:
                since_best += 1
            else:
                since_best = 0
            unchanged = unchanged + 1 if (j == 0 or moved == 0) else 0
            if warm_start and unchanged >= UNCHANGED_STOP:
                stop = "unchanged"
                break
            if patience is not None and since_best >= patience:
                stop = "patience"
                break
        else:
            stop = "max_C"
        del starts
        cand = cand[:len(results)]
    if metric not in results[0]:
        raise ParameterError(f"parameter metric {metric!r} needs k <= {width}: the data has {run.L} labels")
    scores = [r[metric] for r in results]
    best = float(cand[int(np.nanargmax(scores))]) if not all(np.isnan(scores)) else float(cand[0])
    return CrossValidation(candidates=cand, metrics=results, metric=metric, best=best, trainings=run.trainings,
                           stop=stop)


def single_label(Y) -> bool:
    """Whether the label matrix Y is data LIBLINEAR classifies: one label (a binary
    file's: its rows with and without it are the two classes) or at least two labels
    with exactly one per row (a multi-class file, one class per row)."""
    return Y.shape[1] == 1 or one_class_per_row(Y)
