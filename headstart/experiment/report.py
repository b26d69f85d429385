"""The report directory: statistics, tables, figures and one HTML page that shows them.

Layout of ``REPORT_DIR``::

    report.html        the table and every figure on one page, one-line captions
    table.md           the tables as markdown
    table.json         the same rows at full precision + everything needed to redraw
    *.png              the figures (see headstart.experiment.figures.FIGURES)
    stats/<run>.npz    per-run training statistics (per label and per iteration)
"""

from __future__ import annotations

import html
import os
import shutil
from pathlib import Path

from .figures import FIGURES, GRID_FIGURE, draw_all
from .run import STATS_DIR, Experiment, capped_ks_note, save_stats
from .table import (DETAIL_COLUMNS, FIRST_COLUMNS, GRID_COLUMNS, MAIN_COLUMNS, bucket_cell, build_tables,
                    contention_note, describe_settings, fmt, used_buckets, write_tables)

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1400px; margin: 1.5em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0 0.3em; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; }
figure { display: inline-block; vertical-align: top; margin: 0.8em 1em 0.8em 0; max-width: 100%; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.88em; max-width: 60em; color: #444; }
p.note { font-size: 0.88em; color: #555; max-width: 70em; }
"""


def _html_table(rows, columns) -> str:
    head = "".join(f"<th>{html.escape(c[0])}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for _, key, kind in columns:
            if kind == "str":
                cells.append(f"<td>{html.escape(str(row[key]))}</td>")
            else:
                cells.append(f"<td class=n>{html.escape(fmt(row[key], kind))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _bucket_table(rows) -> str:
    buckets = used_buckets(rows)
    head = "<th>init</th>" + "".join(f"<th>{html.escape(b)} positives<br>labels / mean iterations / mean ms</th>"
                                     for b in buckets)
    body = []
    for row in rows:
        cells = [f"<td>{html.escape(row['run'])}</td>"]
        cells += [f"<td class=n>{html.escape(bucket_cell(row[b]))}</td>" for b in buckets]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def report_html(exp: Experiment, tables: dict, figures: list[tuple[str, str]]) -> str:
    e = html.escape
    name = exp.data["name"]
    env = exp.environment
    parts = [f"<!doctype html><html><head><meta charset=utf-8><title>headstart experiment: {e(name)}</title>"
             f"<style>{_CSS}</style></head><body>",
             f"<h1>Initialisation experiment: {e(name)}</h1>",
             f"<p>{e(describe_settings(exp))}.</p>",
             "<h2>Training time and accuracy</h2>",
             "<p class=note>The paper's Table 1 and supplementary table. Time: wall-clock seconds of training "
             "(initialiser preparation included); CPU time: process CPU seconds of training. P@k, precision and recall in percent; precision and recall "
             "are label-averaged over the binary decisions score &gt; 0.</p>",
             _html_table(tables["main"], MAIN_COLUMNS)]
    if capped_ks_note(exp.data["num_labels"]):
        parts.append(f"<p class=note>{e(capped_ks_note(exp.data['num_labels']))}.</p>")
    if tables["contended"]:
        parts.append(f"<p class=note>{e(contention_note(exp, tables['contended'])).replace('**', '')}</p>")
    parts.append("<h2>Figures</h2>")
    for fname, caption in figures:
        parts.append(f"<figure><img src=\"{e(fname)}\" alt=\"{e(fname)}\"><figcaption>{e(caption)}</figcaption>"
                     "</figure>")
    parts += ["<h2>First Newton iteration</h2>",
              "<p class=note>Median f(w1)/f(w0) near 1 is the paper's useless first iteration.</p>",
              _html_table(tables["first_iteration"], FIRST_COLUMNS),
              "<h2>By number of training positives</h2>", _bucket_table(tables["by_positives"])]
    if tables["aop_grid"]:
        parts += ["<h2>aop hyperparameters</h2>", _html_table(tables["aop_grid"], GRID_COLUMNS)]
    parts += ["<h2>Run details</h2>", _html_table(tables["details"], DETAIL_COLUMNS)]
    loads = "; ".join(f"{r['run']}: {r['loadavg_before']} → {r['loadavg_after']}" for r in tables["details"])
    parts.append(f"<p class=note>Load average before → after each run: {e(loads)}. Machine: "
                 f"{e(str(env.get('cpu_count')))} cores, {e(str(env.get('platform')))}; headstart "
                 f"{e(str(env.get('headstart')))}, numba {e(str(env.get('numba')))}; source "
                 f"{e(str(env.get('git_commit') or 'unknown'))}; started "
                 f"{e(str(env.get('started')))}. Raw numbers: <a href=\"table.json\">table.json</a>, "
                 "<a href=\"table.md\">table.md</a>.</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(exp: Experiment, out_dir: str | Path, save_statistics: bool = True) -> dict:
    """Write statistics (unless ``save_statistics`` is False), tables, figures and
    report.html into ``out_dir``; returns ``{"tables", "figures", "files"}``.

    The whole report is drawn into a temporary directory next to ``out_dir`` and renamed
    into place at the end (:func:`headstart.io.atomic.atomic_directory`), so a failure
    half-way (a figure that cannot be drawn, a full disk, Ctrl-C) leaves ``out_dir`` as it
    was: never a new table beside old figures or statistics.  Files of an earlier report
    that this one does not write -- a user's notes, say -- are carried over (hard links
    where the file system allows); its figures and statistics are not, since they
    belong to another experiment (``--replot`` passes the statistics it loaded back in)."""
    from ..io.atomic import atomic_directory

    out = Path(out_dir)
    ours = {"table.md", "table.json", "report.html", STATS_DIR} | {f[0] for f in FIGURES} | {GRID_FIGURE[0]}
    tables = build_tables(exp)
    files = []
    with atomic_directory(out) as tmp:
        if out.is_dir():
            _carry_over(out, tmp, skip=ours)
        if save_statistics:
            (tmp / STATS_DIR).mkdir()
            for r in exp.runs:
                save_stats(r.stats, tmp / STATS_DIR / f"{r.spec.key}.npz")
                files.append(f"{STATS_DIR}/{r.spec.key}.npz")
        write_tables(exp, tmp, tables)
        figures = draw_all(exp, tmp)
        (tmp / "report.html").write_text(report_html(exp, tables, figures), encoding="utf-8")
    files += ["table.md", "table.json", "report.html"] + [f for f, _ in figures]
    return {"tables": tables, "figures": figures, "files": files}


def _carry_over(src: Path, dst: Path, skip: set[str]) -> None:
    """Link (or copy) every entry of ``src`` except those named in ``skip`` into ``dst``."""
    def link_or_copy(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    for entry in src.iterdir():
        if entry.name in skip:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, dst / entry.name, symlinks=True, copy_function=link_or_copy)
        elif entry.is_symlink():
            os.symlink(os.readlink(entry), dst / entry.name)
        else:
            link_or_copy(entry, dst / entry.name)
