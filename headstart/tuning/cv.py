"""Cross-validated ranking metrics of one-vs-all models, for each of several C: what
LIBLINEAR's ``-v n`` (cross-validation) and ``-C`` (its search for C) give a binary
problem, for the metrics of extreme classification (P@k, nDCG@k, ...).

Every instance is held out exactly once: fold f's model, trained on the other folds,
ranks the labels of fold f's instances, and the metrics are computed once over all
instances' rankings (so they are averages over instances, as on a test set).  The folds
are the same for every C (one random split, ``seed``), so the candidates are compared on
the same data.  Preprocessing is fitted once on all of it (:class:`.folds.FoldRunner`).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import ParameterError
from ..metrics import F1_NAMES
from ..params import TrainParams
from .folds import FoldRunner, check_cv, split

log = logging.getLogger(__name__)

#: metrics a candidate may be chosen by (their @k with k up to the run's k)
CHOOSE_BY = ("P", "nDCG", "R", "RP")
# and without a k: F1_NAMES, LibMultiLabel's F1 scores of the decisions score > 0 (metrics.f1_scores)


@dataclass
class CrossValidation:
    """``metrics[c]``: the metrics of ``candidates[c]`` (the C values, in the order
    given); ``best``: the candidate with the highest ``metric`` (the first of equals)."""

    candidates: np.ndarray
    metrics: list[dict]
    metric: str
    best: float
    trainings: int


def check_metric(metric: str, k: Any) -> list[int]:
    """The ks the metrics are computed at (1, 3, 5 up to ``k``, and the metric's own,
    e.g. 2 for nDCG@2), after checking ``k`` and that ``metric`` is one of P, nDCG, R, RP
    at some j <= k, or an F1 score of :data:`F1_NAMES` (also before the data is read:
    the command line)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"parameter k must be an integer >= 1, got {k!r}")
    ks = {j for j in (1, 3, 5, int(k)) if j <= k}
    if isinstance(metric, str) and metric in F1_NAMES:
        return sorted(ks)
    name, _, at = metric.partition("@") if isinstance(metric, str) else ("", "", "")
    # ASCII digits without a leading zero ('P@²' and 'P@01' are no metric names)
    plain = at.isascii() and at.isdigit() and str(int(at)) == at
    if name not in CHOOSE_BY or not plain or not 1 <= int(at) <= int(k):
        raise ParameterError(f"parameter metric must be {', '.join(f'{m}@j' for m in CHOOSE_BY)} with "
                             f"1 <= j <= k = {int(k)} (e.g. {CHOOSE_BY[0]}@1), or {', '.join(F1_NAMES)}; "
                             f"got {metric!r}")
    return sorted(ks | {int(at)})


def cross_validate(X: Any, Y: Any, params: TrainParams | None = None, *, folds: int = 3, Cs: Any = None,
                   k: int = 5, metric: str = "P@1", seed: int = 0,
                   progress: Callable[[int], None] | None = None) -> CrossValidation:
    """Cross-validated P@k, nDCG@k, R@k, RP@k and coverage@k (k = 1, 3, 5 up to ``k``),
    and the Micro-, Macro- and Another-Macro-F1 of the decisions score > 0 (what
    LibMultiLabel's one-vs-all search may choose by), of one-vs-all models trained with
    ``params`` and each C in ``Cs`` (default: only ``params.C``); the best C by ``metric``."""
    from ..metrics import decision_counts, evaluate, f1_from_counts
    from ..prediction.topk import predict_above, predict_topk

    params = TrainParams() if params is None else params
    check_cv(params, folds, seed)
    cand = np.asarray([params.C] if Cs is None else Cs, dtype=np.float64).reshape(-1)
    if cand.size == 0 or not np.all(np.isfinite(cand)) or np.any(cand <= 0):
        raise ParameterError(f"parameter Cs must be positive numbers, got {cand.tolist()!r}")
    ks = check_metric(metric, k)
    run = FoldRunner(X, Y, params, progress, min_rows=folds, what=f"{folds} folds")
    n = run.n
    if run.L == 0:
        raise ParameterError("the data has no labels: nothing to rank")
    parts = split(np.random.default_rng(seed).permutation(n), folds)
    width = max(1, min(int(k), run.L))
    if width < int(k):
        # as evaluate / predict: k cut to the labels there are, said, and reported at it
        log.warning("k = %d is more than the data's %d label(s): metrics up to k = %d", int(k), run.L, width)
        ks = sorted({j for j in ks if j <= width} | {width})
    if metric not in {f"{m}@{j}" for m in CHOOSE_BY for j in ks} | set(F1_NAMES):
        # before any training (it was found out after every fold and C)
        raise ParameterError(f"parameter metric {metric!r} needs k <= {width}: the data has {run.L} labels")
    results = []
    for C in cand:
        p = dataclasses.replace(run.params, C=float(C))
        top = np.zeros((n, width), dtype=np.int64)
        counts = np.zeros((3, run.L), dtype=np.int64)    # per label: TP, predicted, relevant
        for val in parts:
            W, b = run.train(np.setdiff1d(np.arange(n), val, assume_unique=True), p)
            Xv = run.X[val]
            top[val] = predict_topk((W, b), Xv, width, threads=p.threads, preprocess=False)[0]
            # the folds' counts add up to those of all instances (metrics.decision_counts)
            decided = predict_above((W, b), Xv, 0.0, n_columns=run.L, threads=p.threads, preprocess=False)
            counts += np.stack(decision_counts(run.Y[val], decided))
        results.append({**evaluate(run.Y, top, ks=ks), **f1_from_counts(*counts)})
    if metric not in results[0]:
        raise ParameterError(f"parameter metric {metric!r} needs k <= {width}: the data has {run.L} labels")
    scores = [r[metric] for r in results]
    best = float(cand[int(np.nanargmax(scores))]) if not all(np.isnan(scores)) else float(cand[0])
    return CrossValidation(candidates=cand, metrics=results, metric=metric, best=best, trainings=run.trainings)
