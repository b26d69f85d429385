"""The paper's Table 1 and supplementary table for one data set, plus three small tables
that put numbers on the claims the figures show.

Every number is computed here from a run's statistics and metrics -- nothing is
measured twice -- and :func:`write_tables` writes the same rows as ``table.md`` (rounded
for reading) and ``table.json`` (full precision, with everything needed to redraw the
report).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .run import FORMAT_VERSION, KS, Experiment, RunResult, _plain, capped_ks_note, run_record

#: positive-count buckets of the per-frequency table: (title, lowest, highest)
BUCKETS = (("0", 0, 0), ("1-5", 1, 5), ("6-50", 6, 50), (">50", 51, None))


def _zero(exp: Experiment) -> RunResult | None:
    return next((r for r in exp.init_runs if r.spec.init == "zero"), None)


def main_row(r: RunResult, zero: RunResult | None) -> dict:
    """The paper's columns for one run: time, time relative to zero, P@k, binary
    precision / recall, total Newton iterations and CG steps."""
    s = r.stats.summary()
    t = r.train_seconds
    tz = zero.train_seconds if zero is not None else None
    c = r.timing.get("cpu_seconds")
    cz = zero.timing.get("cpu_seconds") if zero is not None else None
    row = {
        "run": r.spec.name,
        "seconds": t,
        "time_over_zero": (t / tz) if tz else None,
        "speedup": (tz / t) if tz and t > 0 else None,
        "cpu_seconds": c,
        "cpu_speedup": (cz / c) if cz and c else None,
    }
    for k in KS:
        row[f"P@{k}"] = r.metrics[f"P@{k}"]
    row["precision"] = r.metrics["precision"]
    row["recall"] = r.metrics["recall"]
    row["newton_iterations"] = int(s["newton_iterations"])
    row["cg_steps"] = int(s["cg_steps"])
    return row


def detail_row(r: RunResult) -> dict:
    s = r.stats.summary()
    return {
        "run": r.spec.name,
        "init_prepare_seconds": float(r.timing.get("init_prepare_seconds", 0.0)),
        "label_seconds": float(s["label_seconds"]),
        "labels": int(s["labels"]),
        "not_converged": int(sum(s["not_converged"].values())),
        "mean_iterations": float(np.mean(r.stats["iterations"])) if len(r.stats) else math.nan,
        "model_nnz": int(r.model_nnz),
        "eval_seconds": float(r.timing.get("eval_seconds", math.nan)),
        "loadavg_before": r.load.get("before", []),
        "loadavg_after": r.load.get("after", []),
    }


def _first_iteration(r: RunResult) -> dict:
    """How much the first Newton iteration achieves, over labels that take one."""
    st = r.stats
    lengths = np.diff(st.iter_offsets)
    idx = np.flatnonzero(lengths >= 2)
    if idx.size == 0:
        return {"run": r.spec.name, "labels": 0, "median_f1_over_f0": None, "mean_step_1": None,
                "mean_active_1": None, "mean_active_2": None}
    off = st.iter_offsets[idx]
    f = st.iterations["objective"]
    ratio = f[off + 1] / f[off]
    step1 = st.iterations["step"][off + 1]
    act1 = st.iterations["active_fraction"][off + 1]
    idx2 = np.flatnonzero(lengths >= 3)
    act2 = st.iterations["active_fraction"][st.iter_offsets[idx2] + 2] if idx2.size else np.zeros(0)
    return {"run": r.spec.name, "labels": int(idx.size),
            "median_f1_over_f0": float(np.median(ratio)),
            "mean_step_1": float(np.mean(step1)),
            "mean_active_1": float(np.mean(act1)),
            "mean_active_2": float(np.mean(act2)) if act2.size else None}


def _by_frequency(r: RunResult) -> dict:
    """Mean Newton iterations and per-label milliseconds in buckets of positive counts."""
    st = r.stats
    npos = st["n_pos"]
    out = {"run": r.spec.name}
    for title, lo, hi in BUCKETS:
        m = (npos >= lo) & ((npos <= hi) if hi is not None else True)
        n = int(np.sum(m))
        out[title] = {"labels": n,
                      "mean_iterations": float(np.mean(st["iterations"][m])) if n else None,
                      "mean_ms": float(1e3 * np.mean(st["seconds"][m])) if n else None,
                      "total_seconds": float(np.sum(st["seconds"][m]))}
    return out


def grid_row(point: str, r: RunResult, zero: RunResult | None) -> dict:
    row = main_row(r, zero)
    row["point"] = point
    row["s"] = r.spec.params.aop_s
    row["t"] = r.spec.params.aop_t
    st = r.stats
    row["median_f_init"] = float(np.median(st["f_init"])) if len(st) else None
    row["median_distance"] = float(np.median(st["distance"])) if len(st) else None
    return row


def contended_runs(exp: Experiment) -> list[dict]:
    """Runs during which other processes competed for the cores: the 1-minute load average
    before or after the run exceeded the run's own threads by at least 1 (the load
    average counts our threads too).  Their wall-clock times include waiting for a core,
    and under contention even CPU time grows (shared caches and memory bandwidth)."""
    threads = int(exp.settings.get("threads") or exp.environment.get("cpu_count") or 1)
    out = []
    for r in exp.runs:
        loads = [v[0] for v in (r.load.get("before"), r.load.get("after")) if v]
        if loads and max(loads) - threads >= 1.0:
            out.append({"run": r.spec.name, "max_load_1min": max(loads)})
    return out


def build_tables(exp: Experiment) -> dict:
    zero = _zero(exp)
    return {
        "contended": contended_runs(exp),
        "main": [main_row(r, zero) for r in exp.init_runs],
        "details": [detail_row(r) for r in exp.runs],
        "first_iteration": [_first_iteration(r) for r in exp.init_runs],
        "by_positives": [_by_frequency(r) for r in exp.init_runs],
        "aop_grid": [grid_row(p, r, zero) for p, r in exp.grid_runs()],
    }


# --------------------------------------------------------------------------- markdown
def contention_note(exp: Experiment, contended: list[dict]) -> str:
    names = ", ".join(f"{c['run']} (1-min load {c['max_load_1min']:.1f})" for c in contended)
    return (f"**Timing caveat:** other processes competed for the {exp.environment.get('cpu_count')} cores during "
            f"{names}; their times are inflated by an unknown amount and ratios involving them are unreliable "
            "(load averages of every run under Run details).")


def used_buckets(rows: list[dict]) -> list[str]:
    """Bucket titles with at least one label."""
    return [b[0] for b in BUCKETS if any(r[b[0]]["labels"] for r in rows)]


def bucket_cell(b: dict) -> str:
    return f"{b['labels']} / {fmt(b['mean_iterations'], 'float1')} / {fmt(b['mean_ms'], 'ms')}"

def fmt(value, kind: str) -> str:
    """The table.md spelling of a value: kind in seconds, ratio, percent, int, float, ms."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if kind == "seconds":
        return f"{value:.2f}"
    if kind == "ratio":
        return f"{value:.2f}"
    if kind == "percent":
        return f"{100 * value:.2f}"
    if kind == "int":
        return str(int(value))
    if kind == "ms":
        return f"{value:.2f}"
    if kind == "float1":
        return f"{value:.1f}"
    if kind == "float3":
        return f"{value:.3g}"
    return f"{value:.3f}"


#: (column title, row key, kind) of the main table
MAIN_COLUMNS = (
    ("init", "run", "str"), ("time (s)", "seconds", "seconds"), ("time / zero", "time_over_zero", "ratio"),
    ("speed-up (zero / time)", "speedup", "ratio"), ("CPU time (s)", "cpu_seconds", "seconds"),
    ("CPU speed-up", "cpu_speedup", "ratio"), ("P@1", "P@1", "percent"), ("P@3", "P@3", "percent"),
    ("P@5", "P@5", "percent"), ("precision", "precision", "percent"), ("recall", "recall", "percent"),
    ("Newton iterations", "newton_iterations", "int"), ("CG steps", "cg_steps", "int"),
)
DETAIL_COLUMNS = (
    ("init", "run", "str"), ("init preparation (s)", "init_prepare_seconds", "seconds"),
    ("sum of label times (s)", "label_seconds", "seconds"), ("labels", "labels", "int"),
    ("not converged", "not_converged", "int"), ("mean iterations / label", "mean_iterations", "float1"),
    ("weights kept", "model_nnz", "int"), ("evaluation (s)", "eval_seconds", "seconds"),
)
FIRST_COLUMNS = (
    ("init", "run", "str"), ("median f(w1) / f(w0)", "median_f1_over_f0", "float"),
    ("mean step multiplier, iteration 1", "mean_step_1", "float"),
    ("mean active fraction, iteration 1 (%)", "mean_active_1", "percent"),
    ("mean active fraction, iteration 2 (%)", "mean_active_2", "percent"),
)
GRID_COLUMNS = (
    ("s", "s", "float3"), ("t", "t", "float3"), ("time (s)", "seconds", "seconds"),
    ("speed-up (zero / time)", "speedup", "ratio"), ("Newton iterations", "newton_iterations", "int"),
    ("CG steps", "cg_steps", "int"), ("median initial objective", "median_f_init", "float3"),
    ("median distance w0 to w_final", "median_distance", "float3"), ("P@1", "P@1", "percent"),
)


def _md_table(rows: list[dict], columns) -> list[str]:
    head = [c[0] for c in columns]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if c[2] == "str" else "---:" for c in columns) + "|"]
    for row in rows:
        cells = [str(row[key]) if kind == "str" else fmt(row[key], kind) for _, key, kind in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _loads(rows: list[dict]) -> str:
    return "; ".join(f"{r['run']}: {_la(r['loadavg_before'])} -> {_la(r['loadavg_after'])}" for r in rows)


def _la(values) -> str:
    return "/".join(f"{v:.1f}" for v in values) if values else "?"


def describe_settings(exp: Experiment) -> str:
    d, s = exp.data, exp.settings
    p = s.get("base_params", {})
    rng = f"labels {d['first_label']}..{d['first_label'] + d['num_labels'] - 1} of {d['n_labels']}"
    return (f"{d['name']}: {d['n_train']} training / {d['n_test']} test instances, {d['n_features']} features, "
            f"{rng} ({d['labels_with_at_most_5_positives']} with at most 5 training positives, "
            f"{d['labels_without_positives']} with none); loss {p.get('loss')}, C={p.get('C')}, "
            f"epsilon={p.get('epsilon')}, aop s={p.get('aop_s')} t={p.get('aop_t')}, "
            f"normalize={p.get('normalize')}, prune={p.get('prune')}, threads={s.get('threads')}")


def table_markdown(exp: Experiment, tables: dict | None = None) -> str:
    t = tables or build_tables(exp)
    env = exp.environment
    lines = [f"# Initialisation experiment: {exp.data['name']}", "", describe_settings(exp) + ".", ""]
    lines += ["## Training time, accuracy, work (the paper's Table 1 and supplementary table)", ""]
    lines += _md_table(t["main"], MAIN_COLUMNS)
    lines += ["", "Time: wall-clock seconds of training (initialiser preparation included, data reading "
              "excluded); CPU time: process CPU seconds of training, all threads. P@k, precision and recall in percent; precision and recall are the label-averaged "
              "binary ones of the decisions score > 0 (the paper's Prec / Rec): precision averaged over the labels "
              "predicted at least once, recall over those with a test positive (a 0/0 is left out, "
              "metrics.binary_precision_recall; DiSMEC++ counts it as 0).", ""]
    if capped_ks_note(exp.data["num_labels"]):
        lines += [capped_ks_note(exp.data["num_labels"]) + ".", ""]
    if t["contended"]:
        lines += [contention_note(exp, t["contended"]), ""]
    lines += ["## First Newton iteration", ""]
    lines += _md_table(t["first_iteration"], FIRST_COLUMNS)
    lines += ["", "Over labels that take at least one iteration. f(w1)/f(w0) near 1 is the \"useless first "
              "iteration\"; the active fraction of iteration k is the share of training instances in the "
              "Hessian of iteration k.", ""]
    lines += ["## By number of training positives", ""]
    buckets = used_buckets(t["by_positives"])
    head = ["init"] + [f"{b} positives: labels / mean iterations / mean ms per label" for b in buckets]
    lines += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(buckets)]
    for row in t["by_positives"]:
        cells = [row["run"]] + [bucket_cell(row[b]) for b in buckets]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Mean ms per label: the label's own training time (per-label times of concurrent threads "
              "overlap, so they add up to more than the wall-clock time).", ""]
    if t["aop_grid"]:
        lines += ["## aop hyperparameters s, t", ""]
        lines += _md_table(t["aop_grid"], GRID_COLUMNS)
        lines.append("")
    lines += ["## Run details", ""]
    lines += _md_table(t["details"], DETAIL_COLUMNS)
    lines += ["", f"Load average (1/5/15 min) before -> after each run: {_loads(t['details'])}.",
              f"Machine: {env.get('cpu_count')} cores, {env.get('platform')}; headstart {env.get('headstart')}, "
              f"numba {env.get('numba')}; source {env.get('git_commit') or 'unknown'}; started {env.get('started')}.",
              ""]
    return "\n".join(lines)


def table_document(exp: Experiment, tables: dict | None = None) -> dict:
    t = tables or build_tables(exp)
    return _plain({
        "format_version": FORMAT_VERSION,
        "data": exp.data,
        "settings": exp.settings,
        "environment": exp.environment,
        "tables": t,
        "runs": [run_record(r) for r in exp.runs],
    })


def write_tables(exp: Experiment, out_dir: str | Path, tables: dict | None = None) -> dict:
    from ..io.atomic import atomic_write

    out = Path(out_dir)
    t = tables or build_tables(exp)
    with atomic_write(str(out / "table.md"), "w") as fh:
        fh.write(table_markdown(exp, t))
    with atomic_write(str(out / "table.json"), "w") as fh:
        # NaN (a precision no label defines) as null: NaN is not JSON (helper-57)
        fh.write(json.dumps(table_document(exp, t), indent=1, allow_nan=False) + "\n")
    return t
