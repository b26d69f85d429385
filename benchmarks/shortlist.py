"""Shortlisted training against full one-vs-all, and dense + sparse against sparse only.

    python benchmarks/shortlist.py debian-deps --threads 2 [--full all] [--write-docs]
    python benchmarks/shortlist.py dense bibtex --threads 2 [--write-docs]

``debian-deps`` mode, all in one process, side by side (kernels compiled first, on a
few labels, so no run pays for compilation):

1. the first stage: every training instance's K candidate labels (leave-one-out
   neighbours by default) and the test instances' candidates, timed; the recall of both;
2. full one-vs-all headstart (:func:`headstart.training.trainer.train_labels`) on a
   random sample of labels (``--sample``, seed 0), its time extrapolated to all labels
   (sample time x labels / sample size: an extrapolation, reported as one); with
   ``--full all`` also on all labels (measured, and its P@k);
3. shortlisted training of all labels (:func:`headstart.shortlist.train_shortlisted`);
4. prediction through the candidates, P@1/3/5; the full model's P@1/3/5 with
   :func:`headstart.prediction.topk.predict_topk` (``--full all``).

``dense`` mode: a truncated-SVD embedding of the tf-idf / bag-of-words matrix (fitted on
the training rows, ``scipy.sparse.linalg.svds``) appended as dense features; every
instance shortlisted (so the models are exact one-vs-all) and all labels scored; the
sparse-only model against dense + sparse for each dense regularisation scale of the grid
(all results are reported, none picked).

Results go to ``benchmarks/results/shortlist-*.json``; ``--write-docs`` puts the tables
in docs/shortlist.md (between markers) and the targets in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import LoadProbe, machine_info, quiet_check, resolve_dataset  # noqa: E402

from headstart.estimator import prepare_data  # noqa: E402
from headstart.io import read_xmc  # noqa: E402
from headstart.metrics import precision_at_k  # noqa: E402
from headstart.params import TrainParams  # noqa: E402
from headstart.prediction.topk import predict_topk  # noqa: E402
from headstart.shortlist import (DenseSparseParams, FirstStageParams, build_shortlist, fit_shortlisted,  # noqa: E402
                                 predict_candidates, predict_model, recall, svd_embedding, train_shortlisted)
from headstart.training.trainer import train_labels  # noqa: E402

RESULTS = HERE / "results"
DOCS = HERE.parent / "docs"


def pk(Y, labels):
    return [round(100 * precision_at_k(Y, labels, k), 2) for k in (1, 3, 5)]


def timed(fn, *a, **kw):
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t0


def timed_cpu(fn, *a, **kw):
    """(result, wall seconds, CPU seconds of this process): the CPU time of the threads
    does not grow when other jobs take the cores, so its ratios are the steadier ones on a
    shared machine (it does include the memory stalls other jobs cause)."""
    c0 = time.process_time()
    out, wall = timed(fn, *a, **kw)
    return out, wall, time.process_time() - c0


def read_train_test(dataset: str):
    """(X, Y, Xt, Yt): the training and test files of a data set (name or folder)."""
    d = resolve_dataset(dataset)
    X, Y = read_xmc(d / "train.txt.gz")
    Xt, Yt = read_xmc(d / "test.txt.gz")
    return X, Y, Xt, Yt


def prepared(dataset: str, threads: int):
    """(X, Y, Xt, Yt, params, prepared training data) with default parameters."""
    X, Y, Xt, Yt = read_train_test(dataset)
    p = TrainParams(threads=threads)
    return X, Y, Xt, Yt, p, prepare_data(X, Y, p)


def run_debian(args) -> dict:
    X, Y, Xt, Yt, p, data = prepared(args.dataset, args.threads)
    L = data.label_space
    out = {"dataset": args.dataset, "threads": args.threads, "K": args.K, "neighbours": args.neighbours,
           "method": args.method, "backend": args.backend, "fill": not args.no_fill,
           "train_K": args.train_K or args.K, "random_negatives": args.random_negatives, "machine": machine_info(),
           "quiet_before": quiet_check(), "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    # --- warm-up: compile every kernel on a little data
    small = build_shortlist(X[:500], Y[:500], FirstStageParams(K=10, backend=args.backend), threads=args.threads)
    small.first_stage.candidates(Xt[:50])
    train_labels(data.X, data.Y, p, np.arange(16))
    dsmall = prepare_data(X[:500], Y[:500], p)
    train_shortlisted(dsmall.X, dsmall.Y, small.shortlist, p, np.arange(40))
    # --- 1. first stage
    fsp = FirstStageParams(method=args.method, K=args.K, neighbours=args.neighbours, backend=args.backend,
                           fill=not args.no_fill, train_K=args.train_K, random_negatives=args.random_negatives)
    probe = LoadProbe()
    r, t_build = timed(build_shortlist, X, Y, fsp, threads=args.threads)
    (cand, _), t_cand = timed(r.first_stage.candidates, Xt)
    out["first_stage"] = {"train_seconds": round(t_build, 3), "test_candidates_seconds": round(t_cand, 3),
                          "index_seconds": round(r.first_stage.info.get("index_seconds", 0.0), 3),
                          "train_recall": round(r.train_recall, 4), "test_recall": round(recall(cand, Yt), 4),
                          "shortlist_pairs": int(r.shortlist.nnz), "load": probe.finish(None)}
    print(f"first stage: {t_build:.1f} s (train), {t_cand:.1f} s (test), recall {r.train_recall:.4f} / "
          f"{out['first_stage']['test_recall']:.4f}", flush=True)
    # --- 2. full one-vs-all on a label sample (extrapolated) and, optionally, on all labels
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(L, size=min(args.sample, L), replace=False))
    probe = LoadProbe()
    _, t_sample, c_sample = timed_cpu(train_labels, data.X, data.Y, p, sample)
    out["full_sample"] = {"labels": int(sample.size), "seconds": round(t_sample, 3), "cpu_seconds": round(c_sample, 3),
                          "extrapolated_all_seconds": round(t_sample * L / sample.size, 2),
                          "extrapolated_all_cpu_seconds": round(c_sample * L / sample.size, 2),
                          "load": probe.finish(None)}
    print(f"full OvA, {sample.size} random labels: {t_sample:.1f} s -> {t_sample * L / sample.size:.1f} s "
          "for all (extrapolated)", flush=True)
    # --- 3. shortlisted, all labels
    probe = LoadProbe()
    (W, b, st), t_sl, c_sl = timed_cpu(train_shortlisted, data.X, data.Y, r.shortlist, p, np.arange(L))
    # same sample, shortlisted, for a like-for-like ratio on the sample
    _, t_sl_sample, c_sl_sample = timed_cpu(train_shortlisted, data.X, data.Y, r.shortlist, p, sample)
    # --repeat: the sample again, full and shortlisted alternating, so that both meet the
    # same load; the medians give ratio_sample_median
    reps = [(t_sample, c_sample, t_sl_sample, c_sl_sample)]
    for _ in range(args.repeat - 1):
        _, tf, cf = timed_cpu(train_labels, data.X, data.Y, p, sample)
        _, ts, cs = timed_cpu(train_shortlisted, data.X, data.Y, r.shortlist, p, sample)
        reps.append((tf, cf, ts, cs))
    out["sample_repeats"] = [[round(x, 3) for x in rep] for rep in reps]
    out["shortlisted"] = {"seconds": round(t_sl, 3), "sample_seconds": round(t_sl_sample, 3),
                          "cpu_seconds": round(c_sl, 3), "sample_cpu_seconds": round(c_sl_sample, 3),
                          "rows_mean": round(float(st["rows"].mean()), 1), "rows_max": int(st["rows"].max()),
                          "features_mean": round(float(st["features"].mean()), 1),
                          "newton_iterations_mean": round(float(st["iterations"].mean()), 2),
                          "not_converged": int(np.sum(st["status"] != 0)), "nnz": int(W.nnz),
                          "load": probe.finish(None)}
    print(f"shortlisted, all labels: {t_sl:.1f} s; sample {t_sl_sample:.1f} s", flush=True)
    (lab, _), t_pred = timed(predict_candidates, W, b, Xt, cand, 5, threads=args.threads)
    out["shortlisted"]["predict_seconds"] = round(t_pred, 3)
    out["shortlisted"]["P@1,3,5"] = pk(Yt, lab)
    if args.full == "all":
        probe = LoadProbe()
        (Wf, bf, _), t_full, c_full = timed_cpu(train_labels, data.X, data.Y, p, np.arange(L))
        (labf, _), t_predf = timed(predict_topk, (Wf, bf), Xt, 5, threads=args.threads)
        out["full_all"] = {"seconds": round(t_full, 3), "cpu_seconds": round(c_full, 3),
                           "predict_seconds": round(t_predf, 3), "nnz": int(Wf.nnz),
                           "P@1,3,5": pk(Yt, labf), "load": probe.finish(None)}
        print(f"full OvA, all labels: {t_full:.1f} s, P@k {out['full_all']['P@1,3,5']}", flush=True)
    if "full_all" in out and args.repeat_all > 1:
        # --repeat-all: both all-label runs again, alternating, so that both meet the same
        # load; the medians give ratio_all_median (a shortlisted run of ~2 s moves by 20%
        # between runs on this machine, the 40 s full run much less)
        runs = [(out["full_all"]["seconds"], out["full_all"]["cpu_seconds"], t_sl, c_sl)]
        for _ in range(args.repeat_all - 1):
            _, tf, cf = timed_cpu(train_labels, data.X, data.Y, p, np.arange(L))
            _, ts, cs = timed_cpu(train_shortlisted, data.X, data.Y, r.shortlist, p, np.arange(L))
            runs.append((tf, cf, ts, cs))
        out["all_repeats"] = [[round(x, 3) for x in run] for run in runs]
        med = np.median(np.asarray(runs), axis=0)
        out["ratio_all_median"] = round(float(med[0] / med[2]), 2)
        out["cpu_ratio_all_median"] = round(float(med[1] / med[3]), 2)
    out["ratio_extrapolated"] = round(out["full_sample"]["extrapolated_all_seconds"] / t_sl, 2)
    out["ratio_sample"] = round(t_sample / t_sl_sample, 2)
    out["cpu_ratio_extrapolated"] = round(out["full_sample"]["extrapolated_all_cpu_seconds"] / c_sl, 2)
    out["ratio_sample_median"] = round(float(np.median([a / c for a, _, c, _ in reps])), 2)
    out["cpu_ratio_sample_median"] = round(float(np.median([b / d for _, b, _, d in reps])), 2)
    if "full_all" in out:
        out["ratio_all"] = round(out["full_all"]["seconds"] / t_sl, 2)
        out["cpu_ratio_all"] = round(out["full_all"]["cpu_seconds"] / c_sl, 2)
    print(f"shortlisted P@k {out['shortlisted']['P@1,3,5']}; speed-up {out['ratio_extrapolated']}x "
          f"(extrapolated), {out['ratio_sample']}x (sample)" + (f", {out['ratio_all']}x (all)" if "ratio_all" in out
                                                                 else ""), flush=True)
    return out


def run_dense(args) -> dict:
    X, Y, Xt, Yt = read_train_test(args.dataset)
    n, L = Y.shape
    p = TrainParams(threads=args.threads)
    every = np.ones((n, L), dtype=np.float32)
    cand = np.tile(np.arange(L), (Xt.shape[0], 1))
    out = {"dataset": args.dataset, "threads": args.threads, "dim": args.dim, "machine": machine_info(),
           "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "runs": []}
    # warm-up: compile the kernels on a little data first
    fit_shortlisted(X[:300], Y[:300], p, every[:300], dense=np.ones((300, 2), dtype=np.float32))
    (E, Et), t_svd = timed(svd_embedding, X, args.dim, X_other=Xt)
    out["svd_seconds"] = round(t_svd, 3)

    def one(name, dense=None, dp=None):
        (model, st), t = timed(fit_shortlisted, X, Y, p, every, dense=dense, dense_params=dp)
        lab, _ = predict_model(model, Xt, None, 5, dense=None if dense is None else Et, candidates=cand,
                               threads=args.threads)
        row = {"model": name, "train_seconds": round(t, 3), "P@1,3,5": pk(Yt, lab), "nnz": int(model.weights.nnz)}
        out["runs"].append(row)
        print(row, flush=True)

    one("sparse only")
    for reg in args.dense_regs:
        one(f"dense+sparse, dense_reg {reg:g}, dense normalised", E,
            DenseSparseParams(dense_reg=reg, normalize_dense=True))
    return out


# --------------------------------------------------------------------------- docs
def _replace_block(path: Path, name: str, text: str) -> None:
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    doc = path.read_text()
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in doc:
        doc = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, doc, flags=re.S)
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    path.write_text(doc)


SECTION_TITLE = "### Shortlisted training and dense + sparse features"


def shortlist_section(results_dir: Path) -> list[str]:
    """The issue-14 section of docs/benchmarks.md (benchmarks/docs.py renders it after the targets)."""
    return ["", SECTION_TITLE, ""] + targets_lines(results_dir)


def _insert_targets(path: Path) -> None:
    """Put the issue-14 section into docs/benchmarks.md where benchmarks/docs.py renders it
    (after the targets), without regenerating the rest (the peers' results there were
    measured with packages this environment may not have)."""
    doc = path.read_text()
    title = f"\n{SECTION_TITLE}\n"
    if title in doc:
        a = doc.index(title)
        doc = doc[:a] + doc[doc.index("\n## ", a + 1):]
    i = doc.index("\n## Machine")
    path.write_text(doc[:i].rstrip("\n") + "\n" + "\n".join(shortlist_section(RESULTS)) + "\n" + doc[i:])


def _variant(r: dict) -> list[tuple[str, str, str]]:
    """(file / block name suffix, command-line option, words) of each first-stage setting
    of a run that is not the default; an empty part where that form does not name it
    (the method is an option of its own, the neighbours' k is printed apart)."""
    t, R, k = r.get("train_K", r["K"]), r.get("random_negatives", 0), r.get("neighbours", 30)
    settings = [(r.get("method", "neighbours") != "neighbours", f"-{r.get('method')}", "", ""),
                (not r.get("fill", True), "-nofill", " --no-fill", ", no fill"),
                (t != r["K"], f"-train{t}", f" --train-K {t}", f", training shortlist K = {t}"),
                (bool(R), f"-rand{R}", f" --random-negatives {R}", f", {R} random negatives per label"),
                (k != 30, f"-k{k}", f" --neighbours {k}", "")]
    return [parts for differs, *parts in settings if differs]


def variant_tag(r: dict) -> str:
    return "".join(tag for tag, _, _ in _variant(r))


def variant_options(r: dict) -> str:
    return "".join(option for _, option, _ in _variant(r))


def variant_words(r: dict) -> str:
    return "".join(words for _, _, words in _variant(r))


def debian_table(r: dict) -> str:
    fs, sl, fsm = r["first_stage"], r["shortlisted"], r["full_sample"]
    lines = [f"Measured {r['started']} on this machine, {r['threads']} threads, in one process "
             f"(`python benchmarks/shortlist.py {r['dataset']} --threads {r['threads']} --K {r['K']}"
             + variant_options(r)
             + (f" --repeat {len(r['sample_repeats'])}" if len(r.get("sample_repeats", [])) > 1 else "")
             + (" --full all" if "full_all" in r else "")
             + (f" --repeat-all {len(r['all_repeats'])}" if "all_repeats" in r else "") + "`); load average before "
             f"{r['quiet_before']['loadavg']} (busy cores while idle: {r['quiet_before']['busy_cores']}).", "",
             "| step | seconds | CPU seconds | notes |", "|---|---:|---:|---|",
             f"| first stage, training shortlist ({r['method']}, K={r['K']}, k={r['neighbours']}, {r['backend']}"
             + variant_words(r) + f") | "
             f"{fs['train_seconds']} | | recall {100 * fs['train_recall']:.2f}% (leave-one-out), "
             f"{fs['shortlist_pairs']} pairs |",
             f"| first stage, test candidates | {fs['test_candidates_seconds']} | | recall "
             f"{100 * fs['test_recall']:.2f}% of the test positives |",
             f"| full one-vs-all, {fsm['labels']} random labels | {fsm['seconds']} | {fsm.get('cpu_seconds', '')} | "
             f"extrapolated to all labels: {fsm['extrapolated_all_seconds']} s"
             + (f" ({fsm['extrapolated_all_cpu_seconds']} CPU s)" if "extrapolated_all_cpu_seconds" in fsm else "")
             + " |"]
    if "full_all" in r:
        fa = r["full_all"]
        lines.append(f"| full one-vs-all, all labels (measured) | {fa['seconds']} | {fa.get('cpu_seconds', '')} | "
                     f"P@1/3/5 {'/'.join(str(x) for x in fa['P@1,3,5'])}, predict {fa['predict_seconds']} s |")
    lines += [f"| shortlisted, same {fsm['labels']} labels | {sl['sample_seconds']} | {sl.get('sample_cpu_seconds', '')} "
              f"| |",
              f"| shortlisted, all labels | {sl['seconds']} | {sl.get('cpu_seconds', '')} | P@1/3/5 "
              f"{'/'.join(str(x) for x in sl['P@1,3,5'])}, "
              f"predict {sl['predict_seconds']} s; rows per label mean {sl['rows_mean']} (max {sl['rows_max']}), "
              f"columns mean {sl['features_mean']}, {sl['newton_iterations_mean']} Newton iterations, "
              f"{sl['not_converged']} not converged |", "",
              f"Speed-up of shortlisted training over full one-vs-all: **{r['ratio_extrapolated']}x** against the "
              f"extrapolated all-label time, {r['ratio_sample']}x on the same label sample"
              + (f", **{r['ratio_all']}x** against the measured all-label run" if "ratio_all" in r else "")
              + (f"; in CPU time {r['cpu_ratio_extrapolated']}x (extrapolated)"
                 + (f", {r['cpu_ratio_all']}x (all labels)" if "cpu_ratio_all" in r else "")
                 if "cpu_ratio_extrapolated" in r else "")
              + (f"; sample run {len(r['sample_repeats'])} times alternating, median ratio "
                 f"{r['ratio_sample_median']}x wall, {r['cpu_ratio_sample_median']}x CPU"
                 if len(r.get("sample_repeats", [])) > 1 else "")
              + (f"; all labels {len(r['all_repeats'])} times alternating, median times "
                 f"{np.median([x[0] for x in r['all_repeats']]):.2f} s (full) and "
                 f"{np.median([x[2] for x in r['all_repeats']]):.3f} s (shortlisted): **{r['ratio_all_median']}x** "
                 f"wall, {r['cpu_ratio_all_median']}x CPU (runs: "
                 + ", ".join(f"{x[0]:.1f} / {x[2]:.2f} s" for x in r["all_repeats"]) + ")"
                 if "all_repeats" in r else "") + "."]
    return "\n".join(lines)


def dense_table(r: dict) -> str:
    lines = [f"Measured {r['started']}, {r['threads']} threads (`python benchmarks/shortlist.py dense {r['dataset']} "
             f"--threads {r['threads']} --dim {r['dim']}`): truncated SVD of the training matrix, {r['dim']} "
             f"dimensions ({r['svd_seconds']} s), every instance shortlisted (exact one-vs-all), all labels scored.",
             "", "| model | train s | P@1 | P@3 | P@5 | nonzero weights |", "|---|---:|---:|---:|---:|---:|"]
    for x in r["runs"]:
        p1, p3, p5 = x["P@1,3,5"]
        lines.append(f"| {x['model']} | {x['train_seconds']} | {p1} | {p3} | {p5} | {x['nnz']} |")
    return "\n".join(lines)


def targets_lines(results_dir: Path = RESULTS) -> list[str]:
    """The issue-14 targets, from the stored results (docs/benchmarks.md, via benchmarks/docs.py)."""
    nym = "**not yet measured**"
    lines = ["Measured by `python benchmarks/shortlist.py` (details and the first stage in docs/shortlist.md). "
             "Side by side in one process on this 2-core machine; these runs were made while other jobs loaded "
             "it (load averages in the JSON results), which slows both sides -- the ratios are the result.", "",
             "| target (issue 14) | required | measured | met |", "|---|---|---|---|"]
    found = sorted((f for f in results_dir.glob("shortlist-*-K*.json")
                    if not f.name.startswith(("shortlist-dense-", "shortlist-scale-"))),
                   key=lambda f: (f.name.rsplit("-K", 1)[0], -int(f.stem.rsplit("-K", 1)[1])))
    for f in found:
        r = json.loads(f.read_text())
        sl = r["shortlisted"]
        name = Path(r["dataset"]).name
        kk = (f"{name}, {r.get('method', 'neighbours')}, K = {r['K']}" + variant_words(r)
              + ("" if r.get("neighbours", 30) == 30 else f", k = {r['neighbours']}"))
        if "ratio_all_median" in r:
            lines.append(f"| shortlisted ({kk}) vs full one-vs-all training, all labels, {r['threads']} threads, "
                         f"median of {len(r['all_repeats'])} alternating runs each | >= 20x | "
                         f"{r['ratio_all_median']}x ({r['cpu_ratio_all_median']}x in CPU time) | "
                         f"{'yes' if r['ratio_all_median'] >= 20 else 'no'} |")
        if "full_all" in r:
            lines.append(f"| shortlisted ({kk}) vs full one-vs-all training, all labels, "
                         f"{r['threads']} threads (full measured on all labels) | >= 20x | {r['ratio_all']}x ({r['full_all']['seconds']} s "
                         f"vs {sl['seconds']} s) | {'yes' if r['ratio_all'] >= 20 else 'no'} |")
        lines.append(f"| same ({kk}), full one-vs-all extrapolated from {r['full_sample']['labels']} random labels | >= 20x | "
                     f"{r['ratio_extrapolated']}x ({r['full_sample']['extrapolated_all_seconds']} s vs "
                     f"{sl['seconds']} s) | {'yes' if r['ratio_extrapolated'] >= 20 else 'no'} |")
        if "cpu_ratio_all" in r or "cpu_ratio_extrapolated" in r:
            c = r.get("cpu_ratio_all", r.get("cpu_ratio_extrapolated"))
            how = "all labels" if "cpu_ratio_all" in r else "extrapolated"
            lines.append(f"| same ({kk}) in CPU seconds of the process ({how}; steadier under load) | >= 20x | "
                         f"{c}x | {'yes' if c >= 20 else 'no'} |")
        if "full_all" in r:
            for i, k in enumerate((1, 3, 5)):
                dd = sl["P@1,3,5"][i] - r["full_all"]["P@1,3,5"][i]
                lines.append(f"| P@{k} of shortlisted ({kk}) vs full one-vs-all | within 1 point | {dd:+.2f} "
                             f"({sl['P@1,3,5'][i]} vs {r['full_all']['P@1,3,5'][i]}) | "
                             f"{'yes' if abs(dd) <= 1 else 'no'} |")
        lines.append(f"| first stage, {kk} (not part of the training time above) | -- | "
                     f"{r['first_stage']['train_seconds']} s for the training shortlist, "
                     f"{r['first_stage']['test_candidates_seconds']} s for the test candidates "
                     f"({r['backend']} search) | -- |")
    if not found:
        lines.append(f"| shortlisted vs full one-vs-all, debian-deps | >= 20x, P@1/3/5 within 1 point | {nym} | -- |")
    scale = sorted(results_dir.glob("shortlist-scale-*.json"))
    for f in scale:   # benchmarks/shortlist_scale.py: the full-scale pipeline and the label sample
        r = json.loads(f.read_text())
        what = f"{Path(r['data']).name} (synthetic), {r['method']}, {r['backend']} first stage, K = {r['K']}"
        s = r.get("sample")
        if s:
            lines.append(f"| shortlisted vs full one-vs-all training ({what}), the same {s['labels']} random labels "
                         f"side by side, full scale | >= 20x | {s['ratio_median']}x (median of {len(s['runs'])}) | "
                         f"{'yes' if s['ratio_median'] >= 20 else 'no'} |")
        hours, gib = r["total_seconds"] / 3600, r["peak_rss_mb"] / 1024
        complete = all(r["steps"].get(k, {}).get("seconds") for k in ("shortlist", "train", "predict"))
        lines.append(f"| all labels of {what}: `shortlist`, `shortlist-train`, `shortlist-predict --evaluate`, "
                     f"{r['threads']} threads | < 2 h, < 24 GB | {r['total_seconds'] / 60:.1f} min, peak RSS "
                     f"{gib:.1f} GiB (P@1/3/5 {'/'.join(map(str, r['steps']['predict'].get('P@1,3,5', [])))}) | "
                     f"{'yes' if complete and hours < 2 and gib < 24 else 'no'} |")
    if not scale:
        lines.append(f"| shortlisted vs full one-vs-all, Amazon-670K-shaped synthetic set at full scale | >= 20x | "
                     f"{nym} | -- |")
        lines.append(f"| all 670K labels of the Amazon-670K-shaped set trained, predicted, evaluated | < 2 h, "
                     f"< 24 GB | {nym} | -- |")
    for name in ("bibtex", "delicious"):
        f = results_dir / f"shortlist-dense-{name}.json"
        if not f.is_file():
            continue
        r = json.loads(f.read_text())
        base = r["runs"][0]
        best = max(r["runs"][1:], key=lambda x: x["P@1,3,5"][0])
        lines.append(f"| dense + sparse vs sparse only, {name}, {r['dim']}-d SVD embedding | shown | sparse only "
                     f"P@1/3/5 {'/'.join(map(str, base['P@1,3,5']))}; dense + sparse (dense_reg "
                     f"{', '.join(x['model'].split('dense_reg ')[1].split(',')[0] for x in r['runs'][1:])}): "
                     + "; ".join('/'.join(map(str, x['P@1,3,5'])) for x in r['runs'][1:])
                     + f" (best P@1: {best['model']}) | shown |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode_or_dataset", help="a data set name for the shortlist comparison, or 'dense'")
    ap.add_argument("dataset_for_dense", nargs="?", default="bibtex")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--K", type=int, default=100)
    ap.add_argument("--neighbours", type=int, default=30)
    ap.add_argument("--method", default="neighbours")
    ap.add_argument("--backend", default="exact")
    ap.add_argument("--sample", type=int, default=2000, help="labels of the full one-vs-all sample")
    ap.add_argument("--full", choices=("sample", "all"), default="sample")
    ap.add_argument("--no-fill", action="store_true", help="first stage without filling empty candidate slots")
    ap.add_argument("--train-K", type=int, default=0, help="candidates per training instance (default: K)")
    ap.add_argument("--random-negatives", type=int, default=0, help="random instances added to every label")
    ap.add_argument("--repeat-all", type=int, default=1,
                    help="with --full all: both all-label runs this many times, alternating (medians)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the label sample this many times, full and shortlisted alternating (median ratios)")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--dense-regs", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--docs-only", action="store_true", help="rewrite the docs from the stored results, run nothing")
    args = ap.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    if args.docs_only:
        for f in sorted(RESULTS.glob("shortlist-*.json")):
            if f.name.startswith("shortlist-scale-"):   # benchmarks/shortlist_scale.py writes its own block
                continue
            r = json.loads(f.read_text())
            dense = f.name.startswith("shortlist-dense-")
            tag = variant_tag(r)
            _replace_block(DOCS / "shortlist.md", f"dense-{r['dataset']}" if dense
                           else f"shortlist-{Path(r['dataset']).name}{tag}-K{r['K']}",
                           dense_table(r) if dense else debian_table(r))
        _insert_targets(DOCS / "benchmarks.md")
        return 0
    if args.mode_or_dataset == "dense":
        args.dataset = args.dataset_for_dense
        r = run_dense(args)
        path = RESULTS / f"shortlist-dense-{args.dataset}.json"
        table, block = dense_table(r), f"dense-{args.dataset}"
    else:
        args.dataset = args.mode_or_dataset
        r = run_debian(args)
        name = Path(args.dataset).name + variant_tag(r)
        path = RESULTS / f"shortlist-{name}-K{args.K}.json"
        table, block = debian_table(r), f"shortlist-{name}-K{args.K}"
    path.write_text(json.dumps(r, indent=1) + "\n")
    print(table)
    if args.write_docs:
        _replace_block(DOCS / "shortlist.md", block, table)
        _insert_targets(DOCS / "benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
