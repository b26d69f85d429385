"""Plain-text rendering of metric dictionaries (shared by ``evaluate`` and ``experiment``)."""

from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

#: row order of the metrics table (names as in :func:`headstart.metrics.evaluate`)
METRIC_ORDER = ("P", "nDCG", "PSP", "PSnDCG", "R", "RP", "cov")
METRIC_TITLES = {"P": "P@k", "nDCG": "nDCG@k", "PSP": "PSP@k", "PSnDCG": "PSnDCG@k",
                 "R": "recall@k", "RP": "RP@k", "cov": "coverage@k"}
_KEY = re.compile(r"^(.+)@(\d+)$")


def split_metric_keys(metrics: Mapping[str, float]) -> tuple[list[str], list[int]]:
    """Metric names (in METRIC_ORDER, unknown ones after) and the ks present, ascending."""
    names: list[str] = []
    ks: set[int] = set()
    for key in metrics:
        m = _KEY.match(key)
        if not m:
            continue
        if m.group(1) not in names:
            names.append(m.group(1))
        ks.add(int(m.group(2)))
    order = {n: i for i, n in enumerate(METRIC_ORDER)}
    names.sort(key=lambda n: (order.get(n, len(order)), n))
    return names, sorted(ks)


def _cell(value: float | None, percent: bool) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{100 * value:.2f}" if percent else f"{value:.4f}"


def format_metrics_table(metrics: Mapping[str, float], percent: bool = True,
                         columns: Sequence[int] | None = None) -> str:
    """A metrics dict ``{"P@1": 0.63, ...}`` as an aligned text table, one row per metric,
    one column per k.  Values are shown in percent (two decimals) unless ``percent=False``.
    """
    names, ks = split_metric_keys(metrics)
    if columns is not None:
        ks = list(columns)
    head = ["metric" + (" (%)" if percent else "")] + [f"k={k}" for k in ks]
    rows = [[METRIC_TITLES.get(n, n + "@k")] + [_cell(metrics.get(f"{n}@{k}"), percent) for k in ks]
            for n in names]
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "  ".join([cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])])

    return "\n".join([line(head)] + [line(r) for r in rows])
