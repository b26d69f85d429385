"""Shortlisted training at full scale: every label of an Amazon-670K-sized set, trained,
predicted and evaluated with the command line, and full one-vs-all against shortlisted
training on the same label sample.

    python benchmarks/shortlist_scale.py pipeline DATA_DIR WORK_DIR [--backend exact|pruned] [-K 100]
    python benchmarks/shortlist_scale.py sample DATA_DIR WORK_DIR [--sample 2000] [--repeat 2]
    python benchmarks/shortlist_scale.py report WORK_DIR [--write-docs]

``pipeline`` runs the three commands a user runs, one after the other, each in its own
process under ``/usr/bin/time`` (wall seconds and peak RSS per step; the logs stay in
WORK_DIR):

1. ``headstart shortlist TRAIN -o WORK/sl.txt.gz --test TEST --save-first-stage WORK/fs``
2. ``headstart shortlist-train TRAIN --shortlist WORK/sl.txt.gz -o WORK/model``
3. ``headstart shortlist-predict WORK/model TEST --first-stage WORK/fs --evaluate``

``sample`` times, in one process and side by side, full one-vs-all headstart
(:func:`headstart.training.trainer.train_labels`) and shortlisted training
(:func:`headstart.shortlist.train_shortlisted`, the pipeline's shortlist) on the same
random label sample (seed 0), alternating ``--repeat`` times; the full one-vs-all time is
extrapolated to all labels (sample time x labels / sample size: an extrapolation, and
reported as one).  Kernels are compiled first, on a few labels.

``report`` collects both into ``benchmarks/results/shortlist-scale-NAME.json`` and, with
``--write-docs``, the table in docs/shortlist.md (between markers).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import machine_info, quiet_check  # noqa: E402

RESULTS = HERE / "results"
DOCS = HERE.parent / "docs"
STEPS = ("shortlist", "train", "predict")
TIME_FORMAT = "STEP-TIME %e s %M KB"


def _commands(data: Path, work: Path, args) -> dict[str, list[str]]:
    hs = [sys.executable, "-m", "headstart"]
    first = ["--method", args.method, "--backend", args.backend, "-K", str(args.K), "--threads", str(args.threads)]
    if args.backend == "pruned":
        first += ["--keep", str(args.keep)]
    return {
        "shortlist": hs + ["shortlist", str(data / "train.txt.gz"), "-o", str(work / "sl.txt.gz"), "--test",
                           str(data / "test.txt.gz"), "--save-first-stage", str(work / "fs")] + first,
        "train": hs + ["shortlist-train", str(data / "train.txt.gz"), "--shortlist", str(work / "sl.txt.gz"),
                       "-o", str(work / "model"), "--threads", str(args.threads), "--stats", str(work / "stats.csv")],
        "predict": hs + ["shortlist-predict", str(work / "model"), str(data / "test.txt.gz"), "--first-stage",
                         str(work / "fs"), "--evaluate", "-o", str(work / "pred.txt"), "--threads", str(args.threads)],
    }


def run_pipeline(args) -> None:
    data, work = Path(args.data), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    cmds = _commands(data, work, args)
    meta = {"runner": "benchmarks/shortlist_scale.py pipeline", "data": str(data), "K": args.K, "method": args.method, "backend": args.backend, "keep": args.keep,
            "threads": args.threads, "machine": machine_info(), "quiet_before": quiet_check(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "commands": {s: shlex.join(c) for s, c in cmds.items()}}
    (work / "pipeline.json").write_text(json.dumps(meta, indent=1) + "\n")
    for step in STEPS:
        if step == "train":   # a model of an earlier run: shortlist-train does not replace it
            shutil.rmtree(work / "model", ignore_errors=True)
        with open(work / f"{step}.log", "w") as log:
            rc = subprocess.call(["/usr/bin/time", "-f", TIME_FORMAT] + cmds[step], stdout=log, stderr=log)
        print(f"{step}: exit {rc}; {_parse_time(work / f'{step}.log')}", flush=True)
        if rc != 0:
            raise SystemExit(f"{step} failed, see {work / f'{step}.log'}")


def _parse_time(log: Path) -> dict:
    # TIME_FORMAT's line (or one that names the step instead of STEP-TIME)
    m = re.search(r"(?:STEP-TIME|shortlist|train|predict) ([\d.]+) s (\d+) KB", log.read_text(errors="replace"))
    if not m:
        return {}
    # /usr/bin/time's %M is in KiB: the figure is MiB
    return {"seconds": float(m.group(1)), "peak_rss_mb": round(int(m.group(2)) / 1024, 1)}


def run_sample(args) -> None:
    """Full one-vs-all and shortlisted training on the same random labels, alternating."""
    from headstart.estimator import prepare_data
    from headstart.io import read_xmc
    from headstart.params import TrainParams
    from headstart.shortlist import read_shortlist, train_shortlisted
    from headstart.training.trainer import train_labels

    data, work = Path(args.data), Path(args.work)
    X, Y = read_xmc(data / "train.txt.gz")
    S = read_shortlist(work / "sl.txt.gz", n_instances=X.shape[0], n_labels=Y.shape[1])
    p = TrainParams(threads=args.threads)
    d = prepare_data(X, Y, p)
    L = d.label_space
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(L, size=min(args.sample, L), replace=False))
    # compile both paths first, on labels outside the sample's timing
    train_labels(d.X, d.Y, p, sample[:4])
    train_shortlisted(d.X, d.Y, S, p, sample[:40])
    out = {"labels": int(sample.size), "label_space": int(L), "threads": args.threads,
           "quiet_before": quiet_check(), "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "runs": []}
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        train_labels(d.X, d.Y, p, sample)
        t_full = time.perf_counter() - t0
        t0 = time.perf_counter()
        _, _, st = train_shortlisted(d.X, d.Y, S, p, sample)
        t_sl = time.perf_counter() - t0
        out["runs"].append({"full_seconds": round(t_full, 3), "shortlisted_seconds": round(t_sl, 3),
                            "ratio": round(t_full / t_sl, 2)})
        print(f"full {t_full:.1f} s, shortlisted {t_sl:.2f} s: {t_full / t_sl:.1f}x", flush=True)
    full = float(np.median([r["full_seconds"] for r in out["runs"]]))
    out["full_extrapolated_all_seconds"] = round(full * L / sample.size, 1)
    out["ratio_median"] = round(float(np.median([r["ratio"] for r in out["runs"]])), 2)
    (work / "sample.json").write_text(json.dumps(out, indent=1) + "\n")


def report(args) -> dict:
    work = Path(args.work)
    r = json.loads((work / "pipeline.json").read_text())
    r["steps"] = {s: _parse_time(work / f"{s}.log") for s in STEPS}
    logs = {s: (work / f"{s}.log").read_text(errors="replace") for s in STEPS}
    m = re.search(r"in ([\d.]+) s: recall ([\d.]+)% of the training", logs["shortlist"])
    if m:
        r["steps"]["shortlist"].update(search_seconds=float(m.group(1)), train_recall=float(m.group(2)))
    m = re.search(r"recall on .*?: ([\d.]+)% of the test positives", logs["shortlist"])
    if m:
        r["steps"]["shortlist"]["test_recall"] = float(m.group(1))
    m = re.search(r"trained (\d+) labels .*?\((\d+) shortlisted pairs\) in ([\d.]+) s(?: \(\+ [^)]*\))?: (\d+) Newton iterations, "
                  r"(\d+) nonzero weights", logs["train"])
    if m:
        r["steps"]["train"].update(labels=int(m.group(1)), pairs=int(m.group(2)), train_seconds=float(m.group(3)),
                                   newton_iterations=int(m.group(4)), nonzero_weights=int(m.group(5)))
    m = re.search(r"P@1 ([\d.]+) P@2 [\d.]+ P@3 ([\d.]+) P@4 [\d.]+ P@5 ([\d.]+); candidates' recall ([\d.]+)%",
                  logs["predict"])
    if m:
        r["steps"]["predict"].update(**{"P@1,3,5": [float(m.group(i)) for i in (1, 2, 3)],
                                        "candidates_recall": float(m.group(4))})
    r["total_seconds"] = round(sum(s.get("seconds", 0.0) for s in r["steps"].values()), 1)
    r["peak_rss_mb"] = max(s.get("peak_rss_mb", 0.0) for s in r["steps"].values())
    if (work / "sample.json").exists():
        r["sample"] = json.loads((work / "sample.json").read_text())
    name = f"{Path(r['data']).name}-{r['backend']}-K{r['K']}"
    results = Path(args.results)
    results.mkdir(exist_ok=True)
    (results / f"shortlist-scale-{name}.json").write_text(json.dumps(r, indent=1) + "\n")
    table = scale_table(r)
    print(table)
    if args.write_docs:
        from shortlist import _replace_block

        _replace_block(DOCS / "shortlist.md", f"shortlist-scale-{name}", table)
    return r


def scale_table(r: dict) -> str:
    st = r["steps"]
    sl, tr, pr = st["shortlist"], st["train"], st["predict"]
    how = (f"`python benchmarks/shortlist_scale.py pipeline {r['data']} ... --backend {r['backend']} -K {r['K']}`"
           if r.get("runner") else "started by hand, the commands in the JSON")
    lines = [f"Measured {r['started']} on this machine, {r['threads']} threads, each step a command in its own "
             f"process ({how}); load average before {r['quiet_before']['loadavg']}."
             + (f"  {r['quiet_before']['note']}." if r["quiet_before"].get("note") else ""), "",
             "| step | wall s | peak RSS (MiB) | notes |", "|---|---:|---:|---|",
             f"| `headstart shortlist` (read, first stage on the training rows, write the shortlist, test "
             f"candidates for the recall) | {sl.get('seconds')} | {sl.get('peak_rss_mb')} | {r['method']}, "
             f"{r['backend']}, K={r['K']}; training shortlist {sl.get('search_seconds')} s, recall "
             f"{sl.get('train_recall')}% (leave-one-out), test recall {sl.get('test_recall')}% |",
             f"| `headstart shortlist-train`, all labels | {tr.get('seconds')} | {tr.get('peak_rss_mb')} | "
             f"{tr.get('labels')} labels, {tr.get('pairs')} shortlisted pairs, training {tr.get('train_seconds')} s, "
             f"{tr.get('newton_iterations')} Newton iterations, {tr.get('nonzero_weights')} nonzero weights |",
             f"| `headstart shortlist-predict --evaluate` (test candidates again, scoring shard by shard) | "
             f"{pr.get('seconds')} | {pr.get('peak_rss_mb')} | P@1/3/5 "
             f"{'/'.join(str(v) for v in pr.get('P@1,3,5', []))}, candidates' recall {pr.get('candidates_recall')}% |",
             f"| **all three** | **{r['total_seconds']}** ({r['total_seconds'] / 60:.1f} min) | "
             f"**{r['peak_rss_mb']}** | |"]
    if "sample" in r:
        s = r["sample"]
        runs = "; ".join(f"{x['full_seconds']} s against {x['shortlisted_seconds']} s ({x['ratio']}x)"
                         for x in s["runs"])
        lines += ["", f"Full one-vs-all against shortlisted training on the same {s['labels']} random labels, "
                      f"in one process, alternating (`sample` mode, load average before "
                      f"{s['quiet_before']['loadavg']}): {runs}; median **{s['ratio_median']}x**.  Full one-vs-all "
                      f"of all {s['label_space']} labels, extrapolated from the sample: "
                      f"{s['full_extrapolated_all_seconds']} s ({s['full_extrapolated_all_seconds'] / 3600:.1f} h), "
                      + (f"{s['full_extrapolated_all_seconds'] / tr['train_seconds']:.0f}x the measured shortlisted "
                         f"training of all labels ({tr['train_seconds']} s; the `shortlist` step, "
                         f"{sl.get('seconds')} s, comes on top)." if tr.get("train_seconds") else "")]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("pipeline", "sample", "report"))
    ap.add_argument("paths", nargs="+", help="DATA_DIR WORK_DIR (pipeline, sample) or WORK_DIR (report)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-K", type=int, default=100)
    ap.add_argument("--method", default="neighbours")
    ap.add_argument("--backend", default="exact")
    ap.add_argument("--keep", type=int, default=32)
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--results", default=str(RESULTS), help="where report writes its JSON")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args(argv)
    if args.mode == "report":
        args.work = args.paths[-1]
        report(args)
        return 0
    if len(args.paths) != 2:
        ap.error(f"{args.mode} needs DATA_DIR WORK_DIR")
    args.data, args.work = args.paths
    (run_pipeline if args.mode == "pipeline" else run_sample)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
