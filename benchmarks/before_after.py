"""Old code against new code, side by side in one run: ``headstart train`` of a base commit
(checked out into a git worktree) and of this checkout, on the same data, options and
threads, runs interleaved (old, new, old, new, ...) so that both see the same machine.

Reports per version the median training time ("in X s" of the CLI: data reading
excluded), the peak RSS of the process, the Newton iterations, P@1/3/5 on the test set,
and the ratios old / new.  Each version first runs once untimed, so numba's cache is
warm for both (compilation is not training).

    python benchmarks/before_after.py debian-deps --base 647a10d --repeat 3
    python benchmarks/before_after.py debian-deps --base 647a10d --labels 0:1000 -- --init zero
    python benchmarks/before_after.py debian-deps --json out.json -- --loss logistic

Options after ``--`` go to both ``headstart train`` commands.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"

# runs one command and prints its peak RSS (KiB) on the last line of stderr
_RSS_WRAPPER = ("import resource, subprocess, sys\n"
                "r = subprocess.run(sys.argv[1:])\n"
                "sys.stderr.write('\\nMAXRSS_KB %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
                "sys.exit(r.returncode)\n")


def dataset_files(name: str) -> tuple[Path, Path]:
    for base in (Path(name), REPO / "data" / name, SHARED / name):
        if (base / "train.txt.gz").is_file():
            return base / "train.txt.gz", base / "test.txt.gz"
    raise SystemExit(f"data set {name!r} not found (a folder with train.txt.gz / test.txt.gz)")


def worktree(commit: str) -> Path:
    """A checkout of ``commit`` under build/ (made once, reused)."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", commit], capture_output=True, text=True,
                         check=True).stdout.strip()
    path = REPO / "build" / f"base-{sha[:10]}"
    if not (path / "headstart").is_dir():
        path.parent.mkdir(exist_ok=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), sha], check=True,
                       capture_output=True)
    return path


def run_train(src: Path, train: Path, out: Path, labels: str | None, threads: int, extra: list[str]) -> dict:
    cmd = [sys.executable, "-c", _RSS_WRAPPER, sys.executable, "-m", "headstart", "train", str(train), "-o", str(out),
           "--threads", str(threads), "--no-memory-check"]
    if labels:
        a, b = labels.split(":")
        cmd += ["--first-label", a, "--num-labels", str(int(b) - int(a))]
    cmd += extra
    env = {**os.environ, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=src)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{src}: headstart train failed:\n{r.stderr[-3000:]}")
    # "N Newton iterations, M CG steps" -- or the coordinate solvers' "N dual cycles, M
    # coordinate steps" (reported in the same two columns)
    m = re.search(r"in ([0-9.]+) s(?: \([^)]*\))?: (\d+) [A-Za-z ]+, (\d+) [A-Za-z ]+, (\d+) nonzero", r.stdout)
    rss = int(re.search(r"MAXRSS_KB (\d+)", r.stderr).group(1))
    return {"train_seconds": float(m.group(1)), "iterations": int(m.group(2)), "cg_steps": int(m.group(3)),
            "nnz": int(m.group(4)), "peak_rss_mb": rss / 1024.0, "process_seconds": wall}


def evaluate(src: Path, model: Path, test: Path, train: Path, threads: int, partial: bool = False) -> dict:
    """P@k and PSP@k of a model, predicted and evaluated by the code in ``src`` (this
    checkout for both versions: training is what is compared, and the models' format is
    the same)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    pred = model.parent / (model.name + ".pred.txt")
    r = subprocess.run([sys.executable, "-m", "headstart", "predict", str(model), str(test), "-o", str(pred), "-k",
                        "5", "--threads", str(threads)] + (["--allow-gaps"] if partial else []),
                       capture_output=True, text=True, env=env, cwd=src)
    if r.returncode != 0:
        print(f"  ({src.name}: predict failed, no P@k: {r.stderr.strip().splitlines()[-1:]})", flush=True)
        return {}
    r = subprocess.run([sys.executable, "-m", "headstart", "evaluate", "--predictions", str(pred), str(test),
                        "--train", str(train), "--json"], check=True, capture_output=True, text=True, env=env, cwd=src)
    m = json.loads(r.stdout)
    flat = m.get("metrics", m)
    return {k: flat[k] for k in ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5") if k in flat}


def this_commit() -> str:
    """HEAD of this checkout, with '+changes' when headstart/ differs from it."""
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "headstart"],
                           capture_output=True, text=True).stdout.strip()
    return head + ("+changes" if dirty else "")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--base", default="647a10d", help="commit to compare against (default: 647a10d)")
    ap.add_argument("--labels", default=None, help="label range A:B (default: all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warm-labels", default=None,
                    help="label range of the untimed warm-up runs (default: --labels); compilation depends "
                         "on the types of a run, not on its labels, so a few labels warm the cache")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    train, test = dataset_files(args.dataset)
    versions = {"old": worktree(args.base), "new": REPO}
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="before-after-") as tmp:
        tmp = Path(tmp)
        for name, src in versions.items():   # warm numba's cache of each version (untimed)
            run_train(src, train, tmp / f"warm-{name}", args.warm_labels or args.labels, args.threads, extra)
        for rep in range(args.repeat):
            for name, src in versions.items():
                r = run_train(src, train, tmp / f"{name}-{rep}", args.labels, args.threads, extra)
                runs[name].append(r)
                print(f"  {name} #{rep + 1}: {r['train_seconds']:.2f} s, peak RSS {r['peak_rss_mb']:.0f} MB, "
                      f"{r['iterations']} iterations", flush=True)
        metrics = {name: evaluate(REPO, tmp / f"{name}-0", test, train, args.threads, partial=bool(args.labels)) for name, src in versions.items()}
    summary = {}
    for name in versions:
        rs = runs[name]
        summary[name] = {"train_seconds": statistics.median(r["train_seconds"] for r in rs),
                         "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in rs),
                         "iterations": rs[0]["iterations"], "cg_steps": rs[0]["cg_steps"], "nnz": rs[0]["nnz"],
                         **metrics[name]}
    o, n = summary["old"], summary["new"]
    synth = train.parent / "synth.json"    # a preset of benchmarks/synth.py, whatever the folder's name
    preset = json.loads(synth.read_text()).get("preset") if synth.is_file() else None
    result = {"dataset": args.dataset, "preset": preset, "labels": args.labels or "all", "threads": args.threads,
              "base": args.base, "commit": this_commit(), "options": extra, "repeat": args.repeat, "runs": runs,
              "summary": summary,
              "speedup": o["train_seconds"] / n["train_seconds"], "rss_ratio": n["peak_rss_mb"] / o["peak_rss_mb"],
              "date": time.strftime("%Y-%m-%d %H:%M"), "load_before": os.getloadavg()}
    print(f"{'':6s} {'train s':>9s} {'peak MB':>8s} {'iters':>7s} {'P@1':>6s} {'P@3':>6s} {'P@5':>6s}")
    for name in ("old", "new"):
        s = summary[name]
        print(f"{name:6s} {s['train_seconds']:9.2f} {s['peak_rss_mb']:8.0f} {s['iterations']:7d} "
              + " ".join(f"{100 * s.get(k, float('nan')):6.2f}" for k in ("P@1", "P@3", "P@5")))
    print(f"speed-up old/new {result['speedup']:.3f}x, peak RSS new/old {result['rss_ratio']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
