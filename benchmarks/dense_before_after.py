"""Old code against new code on dense features (an embedding), one process per tree:

    python benchmarks/dense_before_after.py TREE DATA.npz ROWS LABELS REPS PATH...

TREE is a headstart checkout (e.g. a git worktree of the old commit, or this one), DATA a
file of ``dense_paths.py make`` (Xtr float32, Ytr CSR arrays), PATH ``loss:init`` (e.g.
``squared-hinge:zero``).  Trains the ROWS first rows on LABELS labels -- the LABELS/2 most
frequent and LABELS/2 random others (seed 0) -- one thread, bias regularised, no pruning,
after an untimed run on 200 rows (numba's cache), REPS times; prints one JSON line per
path: the best fit seconds, the kernels' seconds summed over the labels (``label_s``),
the Newton iterations, and a digest of the weights and intercepts (float32 bytes), so
that two trees can be compared bit for bit.  Run it once per tree, alternating, e.g.

    for r in 1 2; do for t in /path/to/old /path/to/new; do
        python benchmarks/dense_before_after.py $t synth.npz 20000 20 2 squared-hinge:zero; done; done

(each tree imports its own headstart: the script asserts it.)  Written for the full-row
kernels of stop 62 (docs/benchmarks.md, "Dense features").
"""
import hashlib
import json
import sys
import time

tree = sys.argv[1]
sys.path.insert(0, tree)
import headstart  # noqa: E402

assert headstart.__file__.startswith(tree), headstart.__file__
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

from headstart import OvAClassifier  # noqa: E402


def main() -> None:
    z = np.load(sys.argv[2])
    rows, nl, reps = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    X = np.ascontiguousarray(z["Xtr"][:rows], dtype=np.float32)
    Y = sp.csr_matrix((z["Ytr_data"], z["Ytr_indices"], z["Ytr_indptr"]), shape=tuple(z["Ytr_shape"]))[:rows]
    order = np.argsort(-np.asarray(Y.sum(0)).ravel(), kind="stable")
    rng = np.random.default_rng(0)
    labels = np.sort(np.concatenate([order[: nl // 2], rng.choice(order[nl // 2:], nl - nl // 2, replace=False)]))
    Ys = Y[:, labels]
    for path in sys.argv[6:]:
        loss, init = path.split(":")
        kw = dict(loss=loss, init=init, bias=1.0, regularize_bias=True, prune=0.0, threads=1)
        OvAClassifier(**kw).fit(X[:200], Ys[:200])
        best = float("inf")
        for _ in range(reps):
            clf = OvAClassifier(**kw)
            t = time.perf_counter()
            clf.fit(X, Ys)
            best = min(best, time.perf_counter() - t)
        W = clf.coef_.toarray().astype(np.float32)
        b = np.asarray(clf.intercept_, np.float32)
        st = clf.stats_
        print(json.dumps({"tree": tree, "path": path, "rows": rows, "labels": nl, "best_s": round(best, 4),
                          "label_s": round(float(np.sum(st["seconds"])), 3), "iters": int(np.sum(st["iterations"])),
                          "digest": hashlib.sha1(W.tobytes() + b.tobytes()).hexdigest()[:12]}), flush=True)


if __name__ == "__main__":
    main()
