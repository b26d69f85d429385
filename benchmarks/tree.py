"""Label trees side by side: headstart's ``headstart.tree`` against LibMultiLabel's
``libmultilabel.linear.train_tree`` + ``TreeModel.predict_values``, on the same data and
machine, in one run; headstart's full one-vs-all model on the same data for reference.

    python benchmarks/tree.py --data bibtex [delicious ...] --peer-python /tmp/lml/bin/python \
        [--peer-python OTHER_VENV/bin/python ...] [--threads 2[,1]] [--ova-threads 2] [--timeout 1800] \
        [--scores sigmoid,squared-hinge] [--json 'benchmarks/results/tree-{data}.json']

As in ``thresholds.py`` (whose helpers this reuses): LibMultiLabel runs from its own venv
(``--peer-python``, repeatable: one column per venv; made with e.g. ``python3.11 -m venv
/tmp/lml && /tmp/lml/bin/pip install libmultilabel==0.10.0 scipy==1.13.1``) in a
subprocess that loads the data this script wrote as .npz files; features are
L2-normalised (per row) here once, so neither side normalises inside its timed region.

Same model on both sides: LIBLINEAR ``-s 2 -e 0.01 -c 1 -B 1`` at every node and headstart
``loss=squared-hinge, C=1, epsilon=0.01, bias=1, regularize_bias=True, prune=0, init=aop``;
same tree parameters: K (branching) 100, dmax (max_depth) 10, beam width 10 (the
defaults of both).  Threads T: headstart ``threads=T``; LibMultiLabel's
``train_1vsrest`` (0.8 .. 0.10 at least) strips ``-m`` from the options and trains the
labels of a node on ``psutil.cpu_count(logical=False)`` Python threads, so the subprocess
sets that count to T (``-m T`` is still passed when its liblinear is
liblinear-multicore, as thresholds.py does); OMP/BLAS/GraphBLAS threads are capped at T.

Timed: training (tree building + all nodes) and prediction of the top 5 labels of every
test row, after an untimed warm-up on a small slice on each side (headstart compiles or
loads its Numba kernels; LibMultiLabel loads liblinear/GraphBLAS).  LibMultiLabel's
``predict_values`` returns dense scores (rows x labels) and keeps a dense
rows x outputs matrix inside: the subprocess calls it on chunks of --peer-chunk rows
(default 2000) to bound memory, and takes the top 5 of each chunk (``argpartition``,
inside the timed region).  Both sides are evaluated in this process with
``headstart.metrics.evaluate`` on their top 5.

Beam-search scores (a node output s scores log p(s), summed down the path, ``exp`` at the
leaf labels): LibMultiLabel up to 0.9.0 uses ``-max(0, 1 - s)^2``; 0.10.0 changed it to
``log sigmoid(prob_A * s)`` with prob_A = 3 (its default).  headstart offers both
(``predict_topk(score="sigmoid", sigmoid_a=3.0)``, its default, and
``score="squared-hinge"``).  Training is identical in 0.9.0 and 0.10.0, so each side
trains once and predicts from the same model with every scoring of ``--scores``, each
prediction timed on its own: headstart "sigmoid" (A = 3) against LibMultiLabel's default
(``predict_values(prob_A=3)``), headstart "squared-hinge" against LibMultiLabel with
``TreeModel.sigmoid_A`` replaced by the 0.9.0 link ("hinge" in the JSON).  The first
prediction of a model on either side includes a one-time preparation (headstart builds
its per-node weight index, reported separately as ``index_s``; LibMultiLabel splits the
root's subtrees for pruning when beam < root children); both sides predict in the same
order (sigmoid first).

LibMultiLabel's k-means draws its seeds from the unseeded global ``np.random``: the
subprocess calls ``np.random.seed(--seed)`` first, so a run is repeatable; headstart gets
``seed=--seed``.  The two trees differ anyway (different k-means implementations and
seeding), so P@k may differ a little for that reason alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_peer_arguments  # noqa: E402
from thresholds import HEADSTART, OPTIONS, ROOT, busy_cpu_s, load, other_cores  # noqa: E402

#: the peer's venv: LibMultiLabel 0.10.0 (pip install libmultilabel==0.10.0 scipy==1.13.1)
LML_PYTHON = "/tmp/lml/bin/python"

K, DMAX, BEAM, TOPK = 100, 10, 10, 5
SIGMOID_A = 3.0
#: headstart's beam-search score -> the matching LibMultiLabel prediction ("link" in PEER_CODE)
PEER_LINK = {"sigmoid": "default", "squared-hinge": "hinge"}

# Runs in the peer's venv: argv = workdir, options, seed, threads, K, dmax, beam, chunk,
# links (comma-separated: default,hinge), prob_A.  Writes labels-<link>.npy and prints one JSON
# line (last line of stdout).
PEER_CODE = r"""
import contextlib, json, sys, time
from importlib.metadata import version
work, options, seed, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
K, dmax, beam, chunk, links = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), sys.argv[9]
prob_A = int(sys.argv[10])     # LibMultiLabel types it int; 3 is its default
import psutil
_cpu_count = psutil.cpu_count
psutil.cpu_count = lambda logical=True: threads    # train_1vsrest's label threads
import numpy as np, scipy.sparse as sp
import libmultilabel.linear as lml
from libmultilabel.linear import tree as lml_tree

liblinear = None
for dist in ("liblinear-multicore", "liblinear-official"):
    try:
        liblinear = f"{dist} {version(dist)}"
        break
    except Exception:
        pass
if liblinear and liblinear.startswith("liblinear-multicore"):
    options = f"{options} -m {threads}"
X = sp.csr_matrix(sp.load_npz(f"{work}/X.npz"))
Y = sp.csr_matrix(sp.load_npz(f"{work}/Y.npz"))
Xt = sp.csr_matrix(sp.load_npz(f"{work}/Xt.npz"))
out = {"version": version("libmultilabel"), "liblinear": liblinear, "options": options, "label_threads": threads,
       "K": K, "dmax": dmax, "beam_width": beam, "chunk_rows": chunk,
       "defaults": {"K": lml_tree.DEFAULT_K, "dmax": lml_tree.DEFAULT_DMAX}}
import inspect
out["defaults"]["beam_width"] = inspect.signature(lml_tree.TreeModel.predict_values).parameters["beam_width"].default
has_prob_A = hasattr(lml_tree.TreeModel, "sigmoid_A")
if has_prob_A:
    out["defaults"]["prob_A"] = inspect.signature(lml_tree.TreeModel.predict_values).parameters["prob_A"].default
out["default_link"] = "log sigmoid(prob_A * s)" if has_prob_A else "-max(0, 1 - s)^2"
if has_prob_A:
    out["prob_A"] = prob_A
out["kmeans"] = "sparsekmeans" if hasattr(lml_tree, "LloydKmeans") else "sklearn"

def top(S, k):
    S = np.asarray(S)
    idx = np.argpartition(-S, k - 1, axis=1)[:, :k]
    val = np.take_along_axis(S, idx, axis=1)
    o = np.argsort(-val, axis=1, kind="stable")
    return np.take_along_axis(idx, o, axis=1), np.take_along_axis(val, o, axis=1)

def predict(model, Xp, link):
    saved = None
    if link == "hinge" and has_prob_A:       # LibMultiLabel <= 0.9.0's score
        saved = lml_tree.TreeModel.sigmoid_A
        lml_tree.TreeModel.sigmoid_A = lambda self, x, prob_A: -np.square(np.maximum(0, 1 - x))
    try:
        labs, vals = [], []
        for r0 in range(0, Xp.shape[0], chunk):
            S = (model.predict_values(Xp[r0:r0 + chunk], beam_width=beam, prob_A=prob_A) if has_prob_A
                 else model.predict_values(Xp[r0:r0 + chunk], beam_width=beam))
            a, b = top(S, 5)
            labs.append(a); vals.append(b)
        return np.vstack(labs), np.vstack(vals)
    finally:
        if saved is not None:
            lml_tree.TreeModel.sigmoid_A = saved

with contextlib.redirect_stdout(sys.stderr):         # their size estimate and k-means log
    m = min(X.shape[0], 300)                           # warm-up, not timed
    Lw = min(Y.shape[1], 300)
    np.random.seed(seed)
    t0 = time.perf_counter()
    wm = lml.train_tree(Y[:m, :Lw], X[:m], options=options, K=K, dmax=dmax, verbose=False)
    predict(wm, Xt[:50], "default")
    out["warmup_s"] = time.perf_counter() - t0
    np.random.seed(seed)
    t0, c0 = time.perf_counter(), time.process_time()
    model = lml.train_tree(Y, X, options=options, K=K, dmax=dmax, verbose=False)
    out["wall_s"], out["cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    nodes, leaves, depth, empty = 0, 0, 0, 0
    stack = [(model.root, 0)]
    while stack:
        v, d = stack.pop()
        nodes += 1
        depth = max(depth, d)
        if v.isLeaf():
            leaves += 1
            empty += len(v.label_map) == 0
        stack.extend((c, d + 1) for c in v.children)
    out["tree"] = {"nodes": nodes, "leaves": leaves, "empty_leaves": empty, "depth": depth,
                   "outputs": int(model.node_ptr[-1]), "root_children": len(model.root.children),
                   "weights_nnz": int(model.flat_model.weights.nnz)}
    out["predict"] = {}
    for link in links.split(","):
        if link == "hinge" and not has_prob_A:
            continue                                    # the default is the hinge link already
        t0, c0 = time.perf_counter(), time.process_time()
        labels, scores = predict(model, Xt, link)
        out["predict"][link] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
        np.save(f"{work}/labels-{link}.npy", labels)
        np.save(f"{work}/scores-{link}.npy", scores)
print(json.dumps(out))
"""


def tree_sources() -> dict:
    """sha256 (first 12 hex) and mtime of headstart/tree/*.py: the tree package may be
    uncommitted, which ``git describe --dirty`` does not tell apart."""
    import hashlib

    out = {}
    for f in sorted((ROOT / "headstart" / "tree").glob("*.py")):
        out[f.name] = {"sha256": hashlib.sha256(f.read_bytes()).hexdigest()[:12],
                       "mtime": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(f.stat().st_mtime))}
    return out


def git_state() -> dict:
    """HEAD (short) and whether the working tree differs from it: ``dirty`` for tracked
    files anywhere, ``headstart_dirty`` for anything (untracked too) under headstart/."""
    def git(*a):
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()

    tracked = git("status", "--porcelain", "--untracked-files=no")
    return {"head": git("rev-parse", "--short", "HEAD"), "dirty": bool(tracked),
            "dirty_files": tracked.splitlines()[:50],
            "headstart_dirty": bool(git("status", "--porcelain", "--", "headstart"))}


def pk(Yt, labels) -> dict:
    from headstart.metrics import evaluate

    r = evaluate(Yt, np.asarray(labels, dtype=np.int64), ks=(1, 3, 5))
    return {k: round(100 * r[k], 2) for k in ("P@1", "P@3", "P@5", "nDCG@5")}


def warm_up(X, Y, Xt, threads: int) -> float:
    """Compile (or load) the Numba kernels of fit_tree, beam search, fit_model, predict_topk."""
    from headstart.estimator import fit_model
    from headstart.params import TrainParams
    from headstart.prediction.topk import predict_topk
    from headstart.tree import fit_tree

    t0 = time.perf_counter()
    m, L = min(X.shape[0], 300), min(Y.shape[1], 300)
    params = TrainParams(**HEADSTART, threads=threads)
    tm = fit_tree(X[:m], Y[:m, :L], params, branching=K, max_depth=DMAX, seed=0)
    for score in PEER_LINK:
        tm.predict_topk(Xt[:50], k=TOPK, beam_width=BEAM, score=score, sigmoid_a=SIGMOID_A, threads=threads)
    model, _ = fit_model(X[:m], Y[:m, :L], params)
    predict_topk(model, Xt[:50], TOPK, threads=threads)
    return time.perf_counter() - t0


def timed(fn):
    t0, c0, b0 = time.perf_counter(), time.process_time(), busy_cpu_s()
    out = fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return out, {"wall_s": wall, "cpu_s": cpu, "other_cores": other_cores(b0, cpu, wall)}


def run_headstart_tree(X, Y, Xt, Yt, threads: int, seed: int, scores: list[str]) -> dict:
    """Train once, then predict with every beam-search score of ``scores`` (each timed;
    the first includes building the per-node weight index, also timed alone as index_s)."""
    from headstart.params import TrainParams
    from headstart.tree import fit_tree
    from headstart.tree.search import node_index

    params = TrainParams(**HEADSTART, threads=threads)
    try:
        model, train = timed(lambda: fit_tree(X, Y, params, branching=K, max_depth=DMAX, seed=seed))
        predict = {}
        for score in scores:
            (labels, s), pred = timed(lambda: model.predict_topk(Xt, k=TOPK, beam_width=BEAM, score=score,
                                                                 sigmoid_a=SIGMOID_A, threads=threads))
            predict[score] = {**pred, "pk": pk(Yt, labels), "labels_reached_lt5_rows": int(np.sum(s[:, -1] <= 0)),
                              "zero_score_in_top5": int(np.sum(s <= 0))}
        t0 = time.perf_counter()
        node_index(model.model.weights, model.tree.node_ptr)     # informational: part of the first prediction
        index_s = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 -- reported, not fatal for the other columns
        import traceback

        return {"status": f"error: {type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    t = model.tree
    return {"status": "ok", **train, "build_s": model.build_seconds, "nodes_s": model.train_seconds,
            "predict": predict, "index_s": index_s, "sigmoid_a": SIGMOID_A,
            "tree": {"nodes": int(t.num_nodes), "leaves": int(np.sum(t.leaf)), "depth": int(np.max(t.depth)),
                     "outputs": int(t.num_outputs), "root_children": int(t.node_ptr[1] - t.node_ptr[0]),
                     "weights_nnz": int(model.model.weights.nnz)}}


def run_headstart_ova(X, Y, Xt, Yt, threads: int) -> dict:
    from headstart.estimator import fit_model
    from headstart.params import TrainParams
    from headstart.prediction.topk import predict_topk

    params = TrainParams(**HEADSTART, threads=threads)
    (model, _), train = timed(lambda: fit_model(X, Y, params))
    (labels, _), pred = timed(lambda: predict_topk(model, Xt, TOPK, threads=threads))
    return {"status": "ok", **train, "predict": pred, "pk": pk(Yt, labels), "weights_nnz": int(model.weights.nnz)}


def run_peer(python: str, work: str, Yt, threads: int, seed: int, timeout: float, links: str, chunk: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(threads))
    t0, b0 = time.perf_counter(), busy_cpu_s()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [python, "-c", PEER_CODE, work, OPTIONS, str(seed), str(threads), str(K), str(DMAX), str(BEAM),
           str(chunk), links, str(int(SIGMOID_A))]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout or None, env=env)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {timeout:g} s", "python": python, "threads": threads}
    if p.returncode != 0:
        return {"status": "error: " + (p.stderr.strip().splitlines() or ["?"])[-1], "python": python,
                "threads": threads, "stderr_tail": p.stderr[-3000:]}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime
    out.update(status="ok", python=python, threads=threads, seed=seed, process_s=time.perf_counter() - t0,
               other_cores=other_cores(b0, own, time.perf_counter() - t0))
    for link, r in out["predict"].items():
        labels = np.load(f"{work}/labels-{link}.npy")
        scores = np.load(f"{work}/scores-{link}.npy")
        r["pk"] = pk(Yt, labels)
        r["labels_reached_lt5_rows"] = int(np.sum(scores[:, -1] <= 0))
        r["zero_score_in_top5"] = int(np.sum(scores <= 0))
    return out


SCORE_NAME = {"sigmoid": f"sigmoid A={SIGMOID_A:g}", "squared-hinge": "squared-hinge"}


def rows_of(res: dict) -> list[tuple]:
    """(threads, method, scoring, train entry, predict entry, pk, kind) per row of the
    table: one row per method and beam-search score; kind "sigmoid" or "squared-hinge"
    (the score, to match with LibMultiLabel's), or None."""
    rows = []
    for T, r in res["runs"].items():
        hs = r["headstart_tree"]
        if hs["status"] != "ok":
            rows.append((T, "headstart.tree", "", hs, None, None, None))
        else:
            for score, p in hs["predict"].items():
                rows.append((T, "headstart.tree", SCORE_NAME.get(score, score), hs, p, p["pk"], score))
        for peer in r["peers"]:
            if peer["status"] != "ok":
                rows.append((T, f"LibMultiLabel ({peer['python']})", "", peer, None, None, None))
                continue
            for link, p in peer["predict"].items():
                sigmoid = link == "default" and peer.get("default_link", "").startswith("log")
                score = (f"sigmoid A={peer.get('prob_A', 3)} (its default)" if sigmoid
                         else "squared-hinge (0.9.0 link)" if link == "hinge" else "squared-hinge (its default)")
                rows.append((T, f"LibMultiLabel {peer['version']}", score, peer, p, p["pk"],
                             "sigmoid" if sigmoid else "squared-hinge"))
        if "headstart_ova" in r:
            o = r["headstart_ova"]
            rows.append((T, "headstart one-vs-all (reference)", "decision values", o, o.get("predict"), o.get("pk"),
                         None))
    return rows


def peer_prediction(peer: dict, kind: str) -> dict | None:
    """The peer's prediction entry with beam score ``kind`` ("sigmoid": 0.10's default;
    "squared-hinge": 0.10's "hinge" run, or the default of <= 0.9)."""
    sigmoid_default = peer.get("default_link", "").startswith("log")
    if kind == "sigmoid":
        return peer["predict"].get("default") if sigmoid_default else None
    return peer["predict"].get("hinge") if sigmoid_default else peer["predict"].get("default")


def table(results: list[dict]) -> str:
    """Train / LML: against the first LibMultiLabel column that ran; predict / LML: against
    its prediction with the same beam-search score."""
    out = ["| data set | threads | method | beam score | train wall s | train CPU s | train / LML | predict wall s | "
           "predict / LML (same score) | other cores (train) | P@1 | P@3 | P@5 |",
           "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        for T, r in res["runs"].items():
            peer = next((p for p in r["peers"] if p["status"] == "ok"), None)
            ref_train = peer["wall_s"] if peer else None
            for _, name, score, tr, pr, p, link in rows_of({"runs": {T: r}}):
                if tr.get("status") != "ok":
                    out.append(f"| {res['data']} | {T} | {name} | | {tr['status']} | | | | | | | | |")
                    continue
                ref_pred = peer_prediction(peer, link) if peer and link else None
                ratio = f"{tr['wall_s'] / ref_train:.2f}" if ref_train else "--"
                pratio = f"{pr['wall_s'] / ref_pred['wall_s']:.2f}" if ref_pred and pr else "--"
                other = f"{tr['other_cores']:.2f}" if isinstance(tr.get("other_cores"), float) else "--"
                out.append(f"| {res['data']} | {T} | {name} | {score} | {tr['wall_s']:.2f} | {tr['cpu_s']:.2f} | "
                           f"{ratio} | {pr['wall_s']:.2f} | {pratio} | {other} | {p['P@1']:.2f} | {p['P@3']:.2f} | "
                           f"{p['P@5']:.2f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_peer_arguments(ap, LML_PYTHON)
    ap.add_argument("--threads", default="2", metavar="LIST",
                    help="thread counts, comma-separated, one run of every side each (default 2)")
    ap.add_argument("--seed", type=int, default=0, help="headstart's tree seed and the peer's np.random.seed")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per LibMultiLabel run (0: none)")
    ap.add_argument("--no-normalize", dest="normalize", action="store_false",
                    help="give both sides the rows as read (default: L2-normalised rows on both sides)")
    ap.add_argument("--no-ova", dest="ova", action="store_false", help="skip headstart's one-vs-all reference")
    ap.add_argument("--ova-threads", metavar="LIST",
                    help="thread counts for the one-vs-all reference (default: all of --threads)")
    ap.add_argument("--scores", default="sigmoid,squared-hinge", metavar="LIST",
                    help="headstart beam-search scores to predict with, in this order (sigmoid: A = 3; "
                         "default: sigmoid,squared-hinge)")
    ap.add_argument("--peer-links", metavar="LIST",
                    help="LibMultiLabel beam-search scores to predict with: default (0.10: sigmoid prob_A 3) "
                         "and/or hinge (0.9.0's -max(0,1-s)^2; 0.10.0 only) (default: those matching --scores)")
    ap.add_argument("--peer-chunk", type=int, default=2000, help="test rows per LibMultiLabel predict_values call")
    ap.add_argument("--json", metavar="FILE",
                    help="write the results as JSON; '{data}' in FILE gives one file per data set")
    args = ap.parse_args(argv)
    peers = args.peer_python or [LML_PYTHON]
    threads = [int(t) for t in args.threads.split(",")]
    ova_threads = [int(t) for t in args.ova_threads.split(",")] if args.ova_threads else threads
    scores = args.scores.split(",")
    if bad := [sc for sc in scores if sc not in PEER_LINK]:
        ap.error(f"--scores: unknown {', '.join(bad)} (known: {', '.join(PEER_LINK)})")
    peer_links = args.peer_links or ",".join(PEER_LINK[sc] for sc in scores)
    git = git_state()
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    meta = {"argv": sys.argv, "commit": commit, "git": git, "python": platform.python_version(),
            "cpus": os.cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "options": OPTIONS,
            "headstart": HEADSTART, "K": K, "dmax": DMAX, "beam_width": BEAM, "k": TOPK, "scores": scores,
            "sigmoid_a": SIGMOID_A, "peer_links": peer_links, "ova_threads": ova_threads if args.ova else [],
            "tree_sources": tree_sources()}
    print(f"headstart {git['head']}{' (dirty: tracked files differ from HEAD)' if git['dirty'] else ''}"
          f"{' (headstart/ differs from HEAD)' if git['headstart_dirty'] else ''}", file=sys.stderr, flush=True)

    def write(results):
        if not args.json:
            return
        if "{data}" in args.json:
            for res in results:
                Path(args.json.format(data=res["data"])).write_text(
                    json.dumps({"meta": meta, "results": [res]}, indent=1))
        else:
            Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))

    results = []
    base = ROOT / "build" / "tree-bench"          # gitignored; .npz files of the peer
    base.mkdir(parents=True, exist_ok=True)
    for name in args.data:
        X, Y, Xt, Yt = load(name, args.normalize)
        res = {"data": name, "shape": {"train": list(X.shape), "test": list(Xt.shape), "labels": Y.shape[1]},
               "normalize": args.normalize, "load_before": os.getloadavg(), "runs": {}}
        print(f"{name}: {X.shape[0]} train / {Xt.shape[0]} test rows, {X.shape[1]} features, {Y.shape[1]} labels",
              file=sys.stderr, flush=True)
        res["warmup_s"] = warm_up(X, Y, Xt, threads[0])
        with tempfile.TemporaryDirectory(dir=base) as work:
            for nm, M in (("X", X), ("Y", Y), ("Xt", Xt)):
                sp.save_npz(f"{work}/{nm}.npz", sp.csr_matrix(M, dtype=np.float64))
            for T in threads:
                r = {"load_before": os.getloadavg()}
                r["headstart_tree"] = run_headstart_tree(X, Y, Xt, Yt, T, args.seed, scores)
                hs = r["headstart_tree"]
                print(f"  T={T} headstart.tree: {hs['status']} {hs.get('wall_s', 0):.2f} s "
                      f"{ {k: (round(v['wall_s'], 2), v['pk']) for k, v in hs.get('predict', {}).items()} }",
                      file=sys.stderr, flush=True)
                if args.ova and T in ova_threads:
                    r["headstart_ova"] = run_headstart_ova(X, Y, Xt, Yt, T)
                    print(f"  T={T} headstart OvA: {r['headstart_ova']['wall_s']:.2f} s "
                          f"{r['headstart_ova']['pk']}", file=sys.stderr, flush=True)
                r["peers"] = []
                for py in peers:
                    p = run_peer(py, work, Yt, T, args.seed, args.timeout, peer_links, args.peer_chunk)
                    print(f"  T={T} {py}: {p['status']} {p.get('wall_s', 0):.2f} s "
                          f"{ {k: (round(v['wall_s'], 2), v['pk']) for k, v in p.get('predict', {}).items()} }",
                          file=sys.stderr, flush=True)
                    r["peers"].append(p)
                r["load_after"] = os.getloadavg()
                res["runs"][str(T)] = r
                write(results + [res])
        res["load_after"] = os.getloadavg()
        results.append(res)
        write(results)

    print(table(results))
    print(f"\nheadstart {git['head']}{'-dirty' if git['dirty'] else ''}; beam {BEAM}, K {K}, dmax {DMAX}, "
          f"sigmoid A = {SIGMOID_A:g}")
    for res in results:
        print(f"\n{res['data']}: load average before/after {[round(v, 2) for v in res['load_before']]} / "
              f"{[round(v, 2) for v in res['load_after']]}; rows {'L2-normalised' if res['normalize'] else 'as read'}; "
              f"headstart warm-up {res['warmup_s']:.1f} s (not timed)")
        for T, r in res["runs"].items():
            hs = r["headstart_tree"]
            if hs["status"] == "ok":
                print(f"  T={T} headstart tree {hs['tree']}, build {hs['build_s']:.2f} s + nodes {hs['nodes_s']:.2f} s, "
                      f"weight index {hs['index_s']:.2f} s (in the first prediction); rows with < 5 labels reached "
                      f"{ {k: v['labels_reached_lt5_rows'] for k, v in hs['predict'].items()} }")
            for p in r["peers"]:
                if p["status"] == "ok":
                    print(f"  T={T} LibMultiLabel {p['version']} ({p['liblinear']}, kmeans {p['kmeans']}, "
                          f"options '{p['options']}', defaults {p['defaults']}) tree {p['tree']}; rows with < 5 "
                          f"labels reached { {k: v['labels_reached_lt5_rows'] for k, v in p['predict'].items()} }")
    return 0


if __name__ == "__main__":
    sys.exit(main())
