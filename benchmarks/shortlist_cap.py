"""Capping each label's shortlisted negatives: training time and P@k (issue 14, a
measured dead end, docs/shortlist.md "Not done").

    python benchmarks/shortlist_cap.py debian-deps --K 100 rank,10,1000 score,10,1000 rank,5,500

The first stage's training candidates (K per instance, leave-one-out neighbours) are
made once.  Then, for each ``BY,C,M`` given, every label keeps at most
max(C x its positives, M) of its shortlisted negatives -- those where it ranks best
among the instance's candidates (``rank``) or with the highest first-stage score
(``score``) -- and all labels are trained shortlisted and predicted through the test
instances' K candidates.  The uncapped shortlist runs first, as the reference.  One
process, one run each: compare the times within one invocation only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from shortlist import prepared  # noqa: E402

from headstart.metrics import precision_at_k  # noqa: E402
from headstart.shortlist import (FirstStage, FirstStageParams, candidates_to_shortlist,  # noqa: E402
                                 predict_candidates, train_shortlisted)


def capped_shortlist(labels: np.ndarray, scores: np.ndarray, Y: sp.spmatrix, budget: np.ndarray,
                     by: str = "rank") -> sp.csc_matrix:
    """Instances x labels shortlist of the (n, K) candidates without each label's
    positives, at most budget[label] instances per label, the best ranked (or scored)
    first."""
    n, K = labels.shape
    L = budget.size
    rows = np.repeat(np.arange(n), K)
    cols = labels.ravel()
    rank = np.tile(np.arange(K), n)
    score = scores.ravel()
    ok = cols >= 0
    rows, cols, rank, score = rows[ok], cols[ok], rank[ok], score[ok]
    positive = np.asarray(sp.csr_matrix(Y)[rows, cols]).ravel() > 0
    rows, cols, rank, score = rows[~positive], cols[~positive], rank[~positive], score[~positive]
    order = np.lexsort((rows, rank if by == "rank" else -score, cols))
    sorted_cols = cols[order]
    place = np.arange(sorted_cols.size) - np.searchsorted(sorted_cols, np.arange(L))[sorted_cols]
    keep = order[place < budget[sorted_cols]]
    M = sp.csc_matrix((np.ones(keep.size, np.float32), (rows[keep], cols[keep])), shape=(n, L))
    M.sort_indices()
    return M


def parse_cap(spec: str) -> tuple[str, float, float]:
    """'BY,C,M' -> (BY, C, M), or an argparse error naming the spec."""
    parts = spec.split(",")
    try:
        by, c, m = parts[0], float(parts[1]), float(parts[2])
        if len(parts) != 3 or by not in ("rank", "score") or c < 0 or m < 0:
            raise ValueError
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"{spec!r} is not BY,C,M (BY rank or score, C and M numbers >= 0)") from None
    return by, c, m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("caps", nargs="*", type=parse_cap, help="BY,C,M: BY rank|score, at most max(C x positives, M) negatives")
    ap.add_argument("--K", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_intermixed_args()   # caps may come after the options
    X, Y, Xt, Yt, p, data = prepared(args.dataset, args.threads)
    L = data.label_space
    fs = FirstStage.fit(X, Y, FirstStageParams(K=args.K), threads=args.threads)
    labels, scores = fs.candidates(X, training=True)
    cand, _ = fs.candidates(Xt)
    positives = np.diff(sp.csc_matrix(Y).indptr)
    # compile the kernels on a few labels first
    train_shortlisted(data.X, data.Y, candidates_to_shortlist(labels[:2000], L), p, np.arange(50))

    def run(M: sp.csc_matrix, name: str) -> None:
        t0 = time.perf_counter()
        W, b, st = train_shortlisted(data.X, data.Y, M, p, np.arange(L))
        t = time.perf_counter() - t0
        top, _ = predict_candidates(W, b, Xt, cand, 5, threads=args.threads)
        pk = " / ".join(f"{100 * precision_at_k(Yt, top, k):.2f}" for k in (1, 3, 5))
        print(f"{name}: pairs {M.nnz}, rows per label {st['rows'].mean():.1f} (max {int(st['rows'].max())}), "
              f"train {t:.2f} s, P@1/3/5 {pk}", flush=True)

    run(candidates_to_shortlist(labels, L), "no cap")
    for by, c, m in args.caps:
        budget = np.maximum(c * positives, m).astype(np.int64)
        run(capped_shortlist(labels, scores, Y, budget, by), f"cap {by}, {c:g} x positives, at least {m:g}")


if __name__ == "__main__":
    main()
