"""What the objective's options do to a model: sparsity of the regularisers at a given
P@k, and the effect of propensity weighting on PSP@k (issue 11).

Each configuration is one ``headstart train`` + ``predict`` + ``evaluate`` (in a
subprocess of this checkout); the table reports P@1/3/5, PSP@1/3/5, the model's nonzero
weights and the training time (2 threads; times are only comparable within one run).

    python benchmarks/objective_options.py sparsity debian-deps --labels 0:4000
    python benchmarks/objective_options.py weighting delicious
    python benchmarks/objective_options.py weighting debian-deps --markdown docs/results.md

Configurations: ``sparsity`` -- L2 with pruning thresholds 0.01 / 0.05 / 0.1, L2 with
feedback sparsification (1%), and the L1-like regularisers (l1, l1-relaxed,
elastic-50-50, elastic-90-10) with the default pruning; ``weighting`` -- none, 2pm1,
p2mp.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from before_after import dataset_files  # noqa: E402

CONFIGS = {
    "sparsity": [
        ("l2, prune 0.01", ["--regularizer", "l2"]),
        ("l2, prune 0.05", ["--regularizer", "l2", "--prune", "0.05"]),
        ("l2, prune 0.1", ["--regularizer", "l2", "--prune", "0.1"]),
        ("l2, sparsify 1%", ["--regularizer", "l2", "--sparsify", "1"]),
        ("l1 (Huber 0.01)", ["--regularizer", "l1"]),
        ("l1-relaxed (Huber 0.1)", ["--regularizer", "l1-relaxed"]),
        ("elastic-50-50", ["--regularizer", "elastic-50-50"]),
        ("elastic-90-10", ["--regularizer", "elastic-90-10"]),
    ],
    "weighting": [
        ("none", ["--weighting", "none"]),
        ("2pm1 (positives 2/p - 1)", ["--weighting", "2pm1"]),
        ("p2mp (negatives p/(2 - p))", ["--weighting", "p2mp"]),
    ],
}


def run(args: list[str]) -> str:
    r = subprocess.run([sys.executable, "-m", "headstart", *args], capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        raise SystemExit(f"headstart {' '.join(args)} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def measure(train: Path, test: Path, opts: list[str], labels: str | None, threads: int, tmp: Path, k: int) -> dict:
    model = tmp / f"m{k}"
    cmd = ["train", str(train), "-o", str(model), "--threads", str(threads), "--no-memory-check", *opts]
    if labels:
        a, b = labels.split(":")
        cmd += ["--first-label", a, "--num-labels", str(int(b) - int(a))]
    out = run(cmd)
    m = re.search(r"in ([0-9.]+) s: (\d+) Newton iterations, (\d+) CG steps, (\d+) nonzero", out)
    pred = tmp / f"p{k}.txt"
    run(["predict", str(model), str(test), "-o", str(pred), "-k", "5", "--threads", str(threads)]
        + (["--allow-gaps"] if labels else []))
    met = json.loads(run(["evaluate", "--predictions", str(pred), str(test), "--train", str(train), "--json"]))
    met = met.get("metrics", met)
    return {"train_seconds": float(m.group(1)), "iterations": int(m.group(2)), "nnz": int(m.group(4)),
            **{key: met[key] for key in ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")}}


def table(rows: list[dict]) -> str:
    out = ["| configuration | P@1 | P@3 | P@5 | PSP@1 | PSP@3 | PSP@5 | nonzero weights | train s |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['name']} | " + " | ".join(f"{100 * r[k]:.2f}" for k in
                                                   ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5"))
                   + f" | {r['nnz']:,} | {r['train_seconds']:.1f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("study", choices=sorted(CONFIGS))
    ap.add_argument("dataset")
    ap.add_argument("--labels", default=None, help="label range A:B (default: all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    train, test = dataset_files(args.dataset)
    rows = []
    with tempfile.TemporaryDirectory(prefix="objective-options-") as tmp:
        for k, (name, opts) in enumerate(CONFIGS[args.study]):
            r = {"name": name, "options": opts, **measure(train, test, opts, args.labels, args.threads, Path(tmp), k)}
            rows.append(r)
            print(f"  {name}: P@1 {100 * r['P@1']:.2f}, PSP@1 {100 * r['PSP@1']:.2f}, nnz {r['nnz']:,}", flush=True)
    head = (f"{args.study} on {args.dataset}, labels {args.labels or 'all'}, {args.threads} threads, "
            f"{time.strftime('%Y-%m-%d')} (benchmarks/objective_options.py)")
    print(head)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"study": args.study, "dataset": args.dataset, "labels": args.labels,
                                               "threads": args.threads, "date": time.strftime("%Y-%m-%d %H:%M"),
                                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
