"""Label ranges ``(start, stop)``: which labels a model's shards cover, and the gaps."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

Range = tuple[int, int]


def contiguous_runs(labels: np.ndarray) -> list[Range]:
    """Positions ``[i, j)`` of the maximal runs of consecutive ids in sorted ``labels``."""
    if labels.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(labels) != 1) + 1
    edges = np.concatenate([[0], breaks, [labels.size]])
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def fmt_range(r: Range) -> str:
    return f"labels [{r[0]}, {r[1]})"


def ranges_text(ranges: Sequence[Range], limit: int = 20) -> str:
    """``[a, b), [c, d), ... (N more)`` for messages."""
    parts = [f"[{a}, {b})" for a, b in ranges[:limit]]
    if len(ranges) > limit:
        parts.append(f"... ({len(ranges) - limit} more)")
    return ", ".join(parts)


def merge_ranges(ranges: Sequence[Range]) -> list[Range]:
    """Sorted union of ``ranges`` with touching and overlapping ranges joined; empty ones dropped."""
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def uncovered(covered: Sequence[Range], start: int, stop: int) -> list[Range]:
    """The parts of ``[start, stop)`` that no range of ``covered`` contains, in order."""
    out = []
    pos = start
    for a, b in merge_ranges(covered):
        if b <= pos:
            continue
        if a >= stop:
            break
        if a > pos:
            out.append((pos, min(a, stop)))
        pos = max(pos, b)
        if pos >= stop:
            break
    if pos < stop:
        out.append((pos, stop))
    return out


def finished_ranges_of(manifest: dict[str, Any]) -> list[Range]:
    """Merged, sorted ``(start, stop)`` label ranges covered by the manifest's shards."""
    return merge_ranges([(s["first_label"], s["first_label"] + s["num_labels"]) for s in manifest["shards"]])


def unfinished_ranges_of(manifest: dict[str, Any], whole_space: bool = True) -> list[Range]:
    """Labels the run that made the model was asked to train and did not (a time budget
    ran out, or the run was killed between shards): missing ranges within the manifest's
    ``label_range``.  Without that field (models of earlier versions, merged models) the
    range is not known: the missing ranges of the label space (``whole_space``), or none."""
    r = manifest.get("label_range")
    if r is None:
        return missing_ranges_of(manifest) if whole_space else []
    return missing_ranges_of(manifest, int(r[0]), int(r[1]) - int(r[0]))


def missing_ranges_of(manifest: dict[str, Any], first: int = 0, count: int | None = None) -> list[Range]:
    """Label ranges in ``[first, first+count)`` (default: the label space) not covered."""
    stop = manifest["label_space"] if count is None else first + count
    return uncovered(finished_ranges_of(manifest), first, stop)
