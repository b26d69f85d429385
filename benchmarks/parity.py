#!/usr/bin/env python
"""Does headstart solve the same problem and stop by the same rule as LIBLINEAR?

    python benchmarks/parity.py [DATASET] [--labels 0:10] [--init zero] [--json out.json]

For each label of the range: LIBLINEAR ``-s 2 -e 0.01 -c 1 -B 1`` (its log parsed for the
Newton iterations) and headstart with ``regularize_bias=True`` (exactly LIBLINEAR's
objective), both unpruned; then, in float64 on the same data: the objective
``0.5||w||^2 + C sum max(0, 1 - y w.x)^2`` of each solution, ``||grad f(w)|| / ||grad f(0)||``
and LIBLINEAR's stopping threshold ``eps * max(min(#pos, #neg), 1) / n``.  With the same
initialisation (zero) and the same rule the two should stop near the same point.
Single-threaded and small: a diagnostic, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

from common import dataset_for, label_slice, load_split, parse_label_range  # noqa: E402


def liblinear_solve(X, y, eps: float, C: float):
    """(w with bias last, Newton iterations) from liblinear-official, log captured."""
    from liblinear import liblinear as ll
    from liblinear.liblinearutil import parameter, problem, train

    lines: list[str] = []
    cb = ll.PRINT_STRING_FUN(lambda s: lines.append(s.decode(errors="replace")))
    param = parameter(f"-s 2 -e {eps} -c {C} -B 1")
    param.print_func = cb                      # train() installs param.print_func
    ll.liblinear.set_print_string_function(cb)
    try:
        m = train(problem(y, X), param)
    finally:
        ll.liblinear.set_print_string_function(ll.ctypes_print_null)
    w = np.ctypeslib.as_array(m.w, (X.shape[1] + 1,)).astype(np.float64).copy()
    if m.get_labels()[0] != 1:
        w = -w
    iters = len(re.findall(r"^iter\s+\d+", "".join(lines), flags=re.M))
    return w, iters


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", nargs="?", default="bibtex")
    p.add_argument("--labels", default="0:10")
    p.add_argument("--init", default="zero", help="headstart initialisation (zero reproduces LIBLINEAR's start)")
    p.add_argument("--epsilon", type=float, default=0.01)
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from headstart import OvAClassifier

    ddir = dataset_for(args.dataset)
    X, Y = load_split(ddir / "train.txt.gz")
    a, b = parse_label_range(args.labels, Y.shape[1])
    Ys = label_slice(Y, a, b).tocsc()
    clf = OvAClassifier(init=args.init, threads=1, regularize_bias=True, prune=0.0, epsilon=args.epsilon,
                        C=args.C).fit(X, Y, first_label=a, num_labels=b - a)
    Xb = sp.hstack([X.astype(np.float64), np.ones((X.shape[0], 1))]).tocsr()
    n = X.shape[0]

    def f_and_g(w, y):
        m = 1.0 - y * (Xb @ w)
        act = m > 0
        f = 0.5 * w @ w + args.C * np.sum(m[act] ** 2)
        g = w - 2.0 * args.C * (Xb[act].T @ (y[act] * m[act]))
        return f, np.linalg.norm(g)

    rows = []
    hdr = (f"{'label':>6} {'#pos':>5} {'LL it':>5} {'HS it':>5} {'f LL':>11} {'f HS':>11} "
           f"{'|g|/|g0| LL':>11} {'|g|/|g0| HS':>11} {'rule':>9} {'|dw|/|w|':>8}")
    print(hdr)
    for j in range(b - a):
        y = -np.ones(n)
        y[Ys.indices[Ys.indptr[j]:Ys.indptr[j + 1]]] = 1.0
        npos = int((y > 0).sum())
        w_ll, it_ll = liblinear_solve(X, y, args.epsilon, args.C)
        w_hs = np.r_[clf.coef_[j].toarray().ravel(), clf.intercept_[j]].astype(np.float64)
        _, g0 = f_and_g(np.zeros_like(w_ll), y)
        f_ll, g_ll = f_and_g(w_ll, y)
        f_hs, g_hs = f_and_g(w_hs, y)
        rule = args.epsilon * max(min(npos, n - npos), 1) / n
        it_hs = int(clf.stats_["iterations"][j])
        dw = float(np.linalg.norm(w_ll - w_hs) / max(np.linalg.norm(w_ll), 1e-300))
        rows.append({"label": a + j, "n_pos": npos, "iters_liblinear": it_ll, "iters_headstart": it_hs,
                     "f_liblinear": f_ll, "f_headstart": f_hs, "grad_ratio_liblinear": g_ll / g0,
                     "grad_ratio_headstart": g_hs / g0, "rule": rule, "rel_w_diff": dw})
        print(f"{a + j:>6} {npos:>5} {it_ll:>5} {it_hs:>5} {f_ll:>11.4f} {f_hs:>11.4f} {g_ll / g0:>11.2e} "
              f"{g_hs / g0:>11.2e} {rule:>9.2e} {dw:>8.3f}")
    tot_ll = sum(r["iters_liblinear"] for r in rows)
    tot_hs = sum(r["iters_headstart"] for r in rows)
    print(f"Newton iterations: LIBLINEAR {tot_ll}, headstart ({args.init}) {tot_hs}; both stop when "
          f"|g|/|g0| <= rule")
    if args.json:
        Path(args.json).write_text(json.dumps({"dataset": ddir.name, "labels": [a, b], "init": args.init,
                                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
