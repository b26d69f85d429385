#!/usr/bin/env python
"""Side-by-side benchmark of exact one-vs-all linear trainers (issue 4).

    python benchmarks/compare.py DATASET --threads 2 --labels A:B [--methods ...] [--repeat N]
                                 [--json out.json] [--write-docs] [--set METHOD.key=value ...]
    python benchmarks/compare.py PRESET [--scale S] --sample-labels N [--seed S] ...
    python benchmarks/compare.py --write-docs          # only regenerate docs/benchmarks.md

DATASET is a folder with train.txt.gz and test.txt.gz (XMC format) or a name looked up in
$HEADSTART_DATA, data/ and ../shared/data/.  PRESET is a synthetic set shaped like one of the
paper's (amazon-670k, amazoncat-13k, wikilshtc-325k; benchmarks/synth.py), generated into
the cache folder (--cache-dir) the first time.  With --sample-labels N the methods train N
labels drawn at random (--seed) and the all-label time is extrapolated as time x L / N.  Every method runs in its own process, once per
repeat, methods interleaved (m1 m2 ... m1 m2 ...); the table shows medians.  See
docs/benchmarks.md for what is measured and how each method is configured.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (HERE, PK_DEFINITION, REPO, LoadProbe, dataset_for, machine_info, parse_label_range,  # noqa: E402
                    quiet_check, read_header, sample_labels)
from methods import METHODS, apply_overrides, expand_methods  # noqa: E402

RESULTS_DIR = HERE / "results"
DOCS_PATH = REPO / "docs" / "benchmarks.md"
REFERENCE = "liblinear"
HARNESS_VERSION = 1

MEDIAN_FIELDS = ("wall_s", "cpu_s", "peak_rss_mb", "train_peak_rss_mb", "rss_before_train_mb", "warmup_s",
                 "predict_s", "load_train_s")
PK_FIELDS = ("P@1", "P@3", "P@5")


# --------------------------------------------------------------------------- running one worker
def _tree_rss(pid: int) -> int:
    try:
        import psutil

        p = psutil.Process(pid)
        total = p.memory_info().rss
        for c in p.children(recursive=True):
            try:
                total += c.memory_info().rss
            except psutil.Error:
                pass
        return total
    except Exception:  # noqa: BLE001 - psutil missing or process gone
        return 0


def run_worker(spec: dict, timeout: float, mem_limit: float, workdir: Path, python: str) -> dict:
    """Run one worker process; returns its result dict plus the parent's measurements."""
    spec_path = workdir / f"spec-{spec['method']}-{spec['repeat']}.json"
    spec["result_path"] = str(workdir / f"result-{spec['method']}-{spec['repeat']}.json")
    spec_path.write_text(json.dumps(spec))
    err_path = workdir / f"stderr-{spec['method']}-{spec['repeat']}.txt"
    env = dict(os.environ)
    t = str(spec["threads"])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
                "RAYON_NUM_THREADS"):
        env[var] = t
    env["PYTHONUNBUFFERED"] = "1"
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    probe = LoadProbe()
    status_override = None
    peak_tree = 0
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([python, str(HERE / "worker.py"), str(spec_path)], stdout=err, stderr=err,
                                env=env, start_new_session=True)
        t0 = time.perf_counter()
        while True:
            try:
                proc.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                pass
            rss = _tree_rss(proc.pid)
            peak_tree = max(peak_tree, rss)
            if rss > mem_limit:
                status_override = f"killed by the harness: process tree RSS {rss / 2**30:.1f} GiB > limit " \
                                  f"{mem_limit / 2**30:.1f} GiB"
            elif time.perf_counter() - t0 > timeout:
                status_override = f"killed by the harness: still running after {timeout:.0f} s"
            if status_override:
                os.killpg(proc.pid, signal.SIGKILL)     # the group of the process we started
                proc.wait()
                break
    elapsed = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    load = probe.finish(own_cpu)
    res_path = Path(spec["result_path"])
    if status_override:
        res = {"method": spec["method"], "status": "killed", "error": status_override}
    elif res_path.is_file():
        res = json.loads(res_path.read_text())
    else:
        res = {"method": spec["method"], "status": "crashed",
               "error": f"worker exited with code {proc.returncode} without a result"}
    if res.get("status") != "ok":
        tail = err_path.read_text(errors="replace")[-2000:] if err_path.exists() else ""
        if tail.strip():
            res["stderr_tail"] = tail
        if res.get("status") == "crashed" and tail:
            # a native abort: the panic/assertion line says why
            keys = ("panicked", "assertion", "Error", "error", "terminate", "Killed", "what()")
            lines = [ln.strip() for ln in tail.splitlines() if ln.strip() and not ln.startswith("Examples")]
            hits = [ln for ln in lines if any(k in ln for k in keys)]
            res["error"] += ": " + " / ".join((hits or lines[-2:])[:3])[:400]
        e = res.get("error", "")
        if e.startswith("ModuleNotFoundError") or e.startswith("ImportError"):
            res["status"] = "not-installed"
    res["repeat"] = spec["repeat"]
    res["process_s"] = round(elapsed, 3)
    res["process_cpu_s"] = round(own_cpu, 3)
    res["process_tree_peak_rss_mb_sampled"] = round(peak_tree / 2**20, 1)
    res["load"] = load
    return res


# --------------------------------------------------------------------------- summarising
def add_to_stored(old: dict, new: dict) -> dict:
    """The stored result ``old`` with the runs of ``new`` added (methods run in ``new``
    replace their old runs); summary and load recomputed over all runs."""
    if (old.get("dataset"), old.get("labels"), old.get("threads")) != \
            (new.get("dataset"), new.get("labels"), new.get("threads")):
        raise SystemExit("--add-to-stored: the stored result is for another data set, label range or thread count")
    keep = [r for r in old["runs"] if r.get("method") not in new["methods"]]
    methods = [m for m in old["methods"] if m not in new["methods"]] + list(new["methods"])
    out = dict(new)
    out["runs"] = keep + new["runs"]
    out["methods"] = methods
    out["settings"] = {**old.get("settings", {}), **new.get("settings", {})}
    out["summary"] = summarise(out["runs"], methods)
    add_extrapolation(out)
    out["command"] = f"{old.get('command')}  +  {new.get('command')}"
    out["created"] = old.get("created")
    out["added"] = [{"created": new.get("created"), "command": new.get("command"), "methods": new["methods"],
                     "machine_commit": (new.get("machine") or {}).get("git_commit")}] + list(old.get("added", []))
    out["machine"] = old.get("machine")
    fc = [r["load"].get("foreign_cores") for r in out["runs"] if r.get("load", {}).get("foreign_cores") is not None]
    out["max_foreign_cores"] = max(fc) if fc else None
    out["quiet"] = bool(old.get("quiet")) and bool(new.get("quiet"))
    return out


def summarise(runs: list[dict], methods: list[str]) -> dict:
    summary: dict = {}
    for m in methods:
        ok = [r for r in runs if r["method"] == m and r.get("status") == "ok"]
        bad = [r for r in runs if r["method"] == m and r.get("status") != "ok"]
        s: dict = {"runs_ok": len(ok), "runs_failed": len(bad)}
        if not ok:
            s["status"] = bad[0].get("status", "error") if bad else "not-run"
            s["error"] = bad[0].get("error") if bad else None
            summary[m] = s
            continue
        s["status"] = "ok"
        for f in MEDIAN_FIELDS:
            vals = [r[f] for r in ok if r.get(f) is not None]
            if vals:
                s[f] = round(statistics.median(vals), 4)
                if f in ("wall_s", "cpu_s") and len(vals) > 1:
                    s[f + "_min"] = round(min(vals), 4)
                    s[f + "_max"] = round(max(vals), 4)
        for f in PK_FIELDS + ("nDCG@5",):
            vals = [r[f] for r in ok if r.get(f) is not None]
            if vals:
                s[f] = round(statistics.median(vals), 4)
                if max(vals) - min(vals) > 1e-9:
                    s[f + "_spread"] = round(max(vals) - min(vals), 4)
        inc = [r["train_peak_rss_mb"] - r["rss_before_train_mb"] for r in ok
               if r.get("train_peak_rss_mb") is not None and r.get("rss_before_train_mb") is not None]
        if inc:
            s["train_rss_increase_mb"] = round(statistics.median(inc), 2)
        s["nnz"] = ok[0].get("nnz")
        s["model_bytes"] = ok[0].get("model_bytes")
        s["train_data_bytes"] = ok[0].get("train_data_bytes")
        if s.get("wall_s"):
            s["cpu_per_wall"] = round(s["cpu_s"] / s["wall_s"], 3) if s["wall_s"] > 0 else None
        if s.get("peak_rss_mb") and s.get("train_data_bytes"):
            denom = (s["train_data_bytes"] + (s["model_bytes"] or 0)) / 2**20
            s["peak_rss_over_data_plus_model"] = round(s["peak_rss_mb"] / denom, 2) if denom else None
            if denom and "train_rss_increase_mb" in s:
                # memory that training needs: the data (already resident) plus what training added
                s["train_memory_over_data_plus_model"] = round(
                    (s["train_data_bytes"] / 2**20 + max(s["train_rss_increase_mb"], 0.0)) / denom, 2)
        s["foreign_cores_max"] = max((r["load"].get("foreign_cores", 0.0) for r in ok), default=None)
        info = ok[0].get("info") or {}
        if m == REFERENCE:
            s["solver_concurrency"] = info.get("solver_concurrency")
            s["gil_released_by_ctypes_call"] = info.get("gil_released_by_ctypes_call")
        summary[m] = s
    ref = summary.get(REFERENCE)
    if ref and ref.get("status") == "ok":
        for m, s in summary.items():
            if s.get("status") != "ok":
                continue
            s["speedup_vs_liblinear"] = round(ref["wall_s"] / s["wall_s"], 3) if s["wall_s"] else None
            s["cpu_speedup_vs_liblinear"] = round(ref["cpu_s"] / s["cpu_s"], 3) if s["cpu_s"] else None
            s["rss_vs_liblinear"] = round(s["peak_rss_mb"] / ref["peak_rss_mb"], 3)
            for f in PK_FIELDS:
                if f in s and f in ref:
                    s[f"d{f}_vs_liblinear"] = round(s[f] - ref[f], 4)
    z, a = summary.get("headstart-zero"), summary.get("headstart-aop")
    if z and a and z.get("status") == "ok" and a.get("status") == "ok":
        a["speedup_vs_zero"] = round(z["wall_s"] / a["wall_s"], 3)
    return summary


EXTRAPOLATION_NOTE = (
    "EXTRAPOLATED, not measured: the sample's training time x L / N (L labels in all, N sampled at random). "
    "It assumes the sampled labels cost what an average label costs, and counts the run's fixed costs "
    "(e.g. preparing X) L / N times, so it overstates a real all-label run by about that much.")


def add_extrapolation(doc: dict) -> None:
    """For a label sample: every method's wall and CPU time x L / N, marked as extrapolated."""
    sample = doc.get("label_sample")
    if not sample:
        return
    factor = doc["train_shape"][2] / len(sample)
    doc["extrapolation"] = {"factor": round(factor, 4), "all_labels": doc["train_shape"][2],
                            "sampled": len(sample), "note": EXTRAPOLATION_NOTE}
    for s in doc["summary"].values():
        if s.get("status") == "ok":
            s["extrapolated_all_labels_wall_s"] = round(s["wall_s"] * factor, 1)
            s["extrapolated_all_labels_cpu_s"] = round(s["cpu_s"] * factor, 1)


def extrapolation_lines(doc: dict) -> list[str]:
    ex = doc.get("extrapolation")
    if not ex:
        return []
    out = [f"Extrapolated to all {ex['all_labels']} labels (x {ex['factor']:.1f} = {ex['all_labels']} / "
           f"{ex['sampled']}):"]
    for m, s in doc["summary"].items():
        if "extrapolated_all_labels_wall_s" in s:
            w = s["extrapolated_all_labels_wall_s"]
            out.append(f"  {m:<16} {w:12.0f} s wall (= {w / 3600:.2f} h), {s['extrapolated_all_labels_cpu_s']:.0f} "
                       f"s CPU   [extrapolated]")
    out.append(ex["note"])
    return out


def fmt(v, spec: str = ".2f", none: str = "-") -> str:
    if v is None:
        return none
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def table(summary: dict) -> str:
    cols = ["method", "status", "wall s", "cpu s", "cpu/wall", "peak MB", "P@1", "P@3", "P@5", "nnz",
            "x LL wall", "dP@1", "warmup s", "foreign"]
    rows = [cols]
    for m, s in summary.items():
        if s.get("status") != "ok":
            err = (s.get("error") or "")[:70]
            rows.append([m, s.get("status", "?"), err] + [""] * (len(cols) - 3))
            continue
        rows.append([m, "ok", fmt(s.get("wall_s"), ".3f"), fmt(s.get("cpu_s"), ".3f"), fmt(s.get("cpu_per_wall")),
                     fmt(s.get("peak_rss_mb"), ".0f"), fmt(s.get("P@1")), fmt(s.get("P@3")), fmt(s.get("P@5")),
                     fmt(s.get("nnz"), "d"), fmt(s.get("speedup_vs_liblinear")),
                     fmt(s.get("dP@1_vs_liblinear"), "+.2f"), fmt(s.get("warmup_s")),
                     fmt(s.get("foreign_cores_max"))])
    widths = [max(len(str(r[i])) for r in rows if len(r) > i and not (r[1] not in ("ok", "status") and i == 2))
              for i in range(len(cols))]
    lines = []
    for r in rows:
        if r[1] not in ("ok", "status"):
            lines.append(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}")
        else:
            lines.append("  ".join(f"{str(c):<{widths[i]}}" if i < 2 else f"{str(c):>{widths[i]}}"
                                   for i, c in enumerate(r)))
    return "\n".join(lines)


def result_path_for(dataset: str, a: int, b: int, threads: int, sample: int | None = None,
                    seed: int = 0) -> Path:
    if sample is not None:
        return RESULTS_DIR / f"{dataset}_sample{sample}-seed{seed}_t{threads}.json"
    return RESULTS_DIR / f"{dataset}_{a}-{b}_t{threads}.json"


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", nargs="?", help="data set name or folder (train.txt.gz, test.txt.gz)")
    p.add_argument("--threads", type=int, default=2, help="threads for every method (default 2)")
    p.add_argument("--labels", default=None, help="label range A:B (default: all labels)")
    p.add_argument("--sample-labels", type=int, default=None, metavar="N",
                   help="train N labels drawn at random (see --seed) instead of a range, and extrapolate the "
                        "all-label time (time x L / N, reported as extrapolated)")
    p.add_argument("--seed", type=int, default=0, help="seed of the label sample (default 0)")
    s = p.add_argument_group("synthetic presets (benchmarks/synth.py)")
    s.add_argument("--scale", type=float, default=1.0,
                   help="generate the preset with rows, features and labels x S in (0, 1] (default 1)")
    s.add_argument("--data-seed", type=int, default=0, help="seed of the generated data (default 0)")
    s.add_argument("--cache-dir", default=None,
                   help="folder of generated sets (default $HEADSTART_SYNTH_CACHE or build/synth)")
    p.add_argument("--methods", default="all",
                   help="comma-separated methods or groups (all, headstart, peers); known: " + ", ".join(METHODS))
    p.add_argument("--repeat", type=int, default=1, help="runs per method; medians are reported (default 1)")
    p.add_argument("--json", default=None, help="write the full results as JSON here")
    p.add_argument("--write-docs", action="store_true",
                   help="store the results under benchmarks/results/ and regenerate docs/benchmarks.md")
    p.add_argument("--add-to-stored", action="store_true",
                   help="with --write-docs: keep the stored result's runs of the methods not run now and add this "
                        "run's (same data set, label range and threads; both must be quiet), e.g. peers measured "
                        "after the headstart runs; the JSON lists both commands and dates")
    p.add_argument("--docs", default=str(DOCS_PATH), help="path of the generated docs (default docs/benchmarks.md)")
    p.add_argument("--set", action="append", default=[], metavar="METHOD.key=value",
                   help="override a method setting (METHOD may be a group, e.g. headstart.regularize_bias=true)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds before a method is killed")
    p.add_argument("--mem-limit-gb", type=float, default=20.0,
                   help="kill a method whose process tree exceeds this RSS (GiB, default 20)")
    p.add_argument("--max-foreign-cores", type=float, default=0.25,
                   help="a run is 'quiet' when other processes used at most this many cores on average "
                        "(default 0.25); only quiet results are written into the docs")
    p.add_argument("--no-quiet-probe", action="store_true", help="skip the 3 s idle probe before the runs")
    p.add_argument("--python", default=sys.executable, help="interpreter for the worker processes")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.dataset is None:
        if not args.write_docs:
            build_parser().error("give a DATASET, or --write-docs alone to regenerate the docs")
        from docs import write_docs

        print(f"wrote {write_docs(Path(args.docs), RESULTS_DIR, args.max_foreign_cores)}")
        return 0
    if args.threads < 1 or args.repeat < 1:
        raise SystemExit("--threads and --repeat must be >= 1")
    if args.sample_labels is not None and args.labels:
        raise SystemExit("give either --labels A:B or --sample-labels N, not both")
    if not 0 < args.scale <= 1:
        raise SystemExit(f"--scale must be in (0, 1], got {args.scale}")
    ddir = dataset_for(args.dataset, args.scale, args.data_seed, args.cache_dir)
    train_shape = read_header(ddir / "train.txt.gz")
    test_shape = read_header(ddir / "test.txt.gz")
    sample = None
    if args.sample_labels is not None:
        sample = sample_labels(train_shape[2], args.sample_labels, args.seed)
        a, b = 0, len(sample)
    else:
        a, b = parse_label_range(args.labels, train_shape[2])
    methods = expand_methods(args.methods)
    overrides = apply_overrides(args.set)
    settings = {m: {**METHODS[m].settings, **overrides.get(m, {})} for m in methods}

    doc: dict = {
        "harness_version": HARNESS_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/compare.py " + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:])),
        "dataset": ddir.name, "dataset_dir": str(ddir),
        "train_shape": list(train_shape), "test_shape": list(test_shape),
        "labels": [a, b] if sample is None else {"sample": len(sample), "seed": args.seed},
        "label_sample": sample, "threads": args.threads, "repeat": args.repeat, "methods": methods,
        "settings": settings, "overrides": overrides, "pk_definition": PK_DEFINITION,
        "machine": machine_info(),
    }
    if (ddir / "synth.json").is_file():
        doc["synthetic"] = json.loads((ddir / "synth.json").read_text())
    what = f"labels {a}:{b} ({b - a})" if sample is None else \
        f"a random sample of {len(sample)} labels (seed {args.seed})"
    print(f"{ddir.name}: train {train_shape[0]} x {train_shape[1]}, {train_shape[2]} labels; "
          f"{what}; threads {args.threads}; repeat {args.repeat}", flush=True)
    doc["load"] = {"loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    if not args.no_quiet_probe:
        doc["load"]["idle_probe"] = quiet_check(3.0)
        print(f"machine before the runs: load average {doc['load']['idle_probe']['loadavg']}, "
              f"{doc['load']['idle_probe']['busy_cores']:.2f} cores busy while idle", flush=True)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="hsbench-") as tmp:
        work = Path(tmp)
        for rep in range(args.repeat):
            for m in methods:
                spec = {"method": m, "repeat": rep, "dataset_dir": str(ddir), "first": a, "last": b,
                        "threads": args.threads, "settings": settings[m], "tmp_root": tmp,
                        "label_sample": sample}
                res = run_worker(spec, args.timeout, args.mem_limit_gb * 2**30, work, args.python)
                runs.append(res)
                if res.get("status") == "ok":
                    print(f"  [{rep + 1}/{args.repeat}] {m:<16} train {res['wall_s']:9.3f} s  cpu {res['cpu_s']:9.3f} s"
                          f"  peak {res['peak_rss_mb']:8.1f} MB  P@1 {res['P@1']:6.2f}  "
                          f"(warm-up {res['warmup_s']:.2f} s, other load {res['load'].get('foreign_cores', 0):.2f} cores)",
                          flush=True)
                else:
                    print(f"  [{rep + 1}/{args.repeat}] {m:<16} {res.get('status')}: {res.get('error')}", flush=True)
    doc["load"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    doc["runs"] = runs
    doc["summary"] = summarise(runs, methods)
    add_extrapolation(doc)
    fc = [r["load"].get("foreign_cores") for r in runs if r["load"].get("foreign_cores") is not None]
    doc["max_foreign_cores"] = max(fc) if fc else None
    doc["quiet"] = bool(fc) and max(fc) <= args.max_foreign_cores
    print()
    print(table(doc["summary"]))
    print()
    print(f"x LL wall = LIBLINEAR wall time / method wall time (higher is faster); foreign = cores used by other "
          f"processes during the run (max over repeats). Machine {'quiet' if doc['quiet'] else 'LOADED'}: "
          f"max foreign load {fmt(doc['max_foreign_cores'])} cores.")
    for line in extrapolation_lines(doc):
        print(line)
    text = json.dumps(doc, indent=1, default=str)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text)
        print(f"wrote {args.json}")
    if args.write_docs:
        from docs import write_docs

        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        rp = result_path_for(ddir.name, a, b, args.threads, None if sample is None else len(sample), args.seed)
        if args.add_to_stored and rp.is_file():
            text = json.dumps(add_to_stored(json.loads(rp.read_text()), doc), indent=1, default=str)
        rp.write_text(text)
        print(f"wrote {rp}")
        print(f"wrote {write_docs(Path(args.docs), RESULTS_DIR, args.max_foreign_cores)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
