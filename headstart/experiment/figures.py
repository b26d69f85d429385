"""The paper's figures, drawn from training statistics (PNG, matplotlib's Agg canvas).

Two kinds of aggregation over labels:

* per Newton iteration k: over the labels that performed iteration k (the paper's
  convention -- easy labels stop early, so a mean can rise at late iterations).  The
  x axis ends where fewer than 1 % of the labels (at least :data:`MIN_LABELS`) are
  still running, so the tails of a few slow labels do not dominate the picture.
* per number of training positives: labels are binned (one bin per count up to 10, then
  8 bins per decade) and the mean and the 5-95 % quantile band of each bin with at
  least :data:`MIN_LABELS` labels are drawn against the mean count of the bin, on a log
  x axis.  Labels without training positives cannot be placed on it and are left out
  (their number is given in the axis title).

Every figure function takes ``[(name, TrainingStats), ...]`` and a path, and returns
the path.  :data:`FIGURES` lists the files with their one-line captions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

MIN_LABELS = 5
TAIL_SHARE = 0.01
QUANTILES = (0.05, 0.95)

#: fixed colours for the usual runs, so that they match across reports
_COLOURS = {"zero": "#1f77b4", "bias -1": "#d62728", "bias -0.9": "#ff7f0e", "bias -2": "#8c564b",
            "ovap": "#9467bd", "ovap-strict": "#e377c2", "aop": "#2ca02c", "aop t=-3": "#17becf"}
_SPARE = ["#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
          "#3182bd", "#e6550d", "#31a354", "#756bb1"]


def colours(names: list[str]) -> dict[str, str]:
    out, spare = {}, [c for c in _SPARE]
    for n in names:
        if n in _COLOURS:
            out[n] = _COLOURS[n]
    for n in names:
        if n not in out:
            c = next((c for c in spare if c not in out.values()), spare[len(out) % len(spare)])
            out[n] = c
            if c in spare:
                spare.remove(c)
    return out


def require_matplotlib():
    """matplotlib's Figure class, or a :class:`~headstart.errors.MissingExtraError` naming
    the ``plot`` extra (matplotlib is needed for the figures only, so it is not a core
    dependency)."""
    from ..errors import import_extra

    return import_extra("matplotlib.figure", "plot", "drawing the experiment figures").Figure


def _figure(ncols: int = 1, width: float = 6.4, height: float = 4.2):
    Figure = require_matplotlib()
    fig = Figure(figsize=(width * ncols, height), dpi=110, layout="constrained")
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


def _save(fig, path) -> Path:
    """Write the PNG atomically: a crash while drawing never leaves a truncated figure
    next to a report that refers to it (the previous file, if any, stays whole)."""
    from ..io.atomic import atomic_write

    path = Path(path)
    with atomic_write(str(path), "wb") as fh:
        fig.savefig(fh, format="png")
    return path


# --------------------------------------------------------------------------- aggregation
def iteration_cutoff(stats, share: float = TAIL_SHARE, min_labels: int = MIN_LABELS) -> int:
    """The last iteration that at least max(share * labels, min_labels) labels reach."""
    iters = np.asarray(stats["iterations"])
    if iters.size == 0:
        return 0
    need = max(share * iters.size, min(min_labels, iters.size))
    counts = np.sort(iters)[::-1]                # counts[m] = (m+1)-th largest
    m = int(np.ceil(need)) - 1
    return int(counts[min(m, counts.size - 1)])


def per_iteration(stats, name: str, first: int, last: int, hold_final: bool = False, normalise: bool = False):
    """Per iteration k in [first, last]: (k, values over labels) for the recorded
    trajectory ``name``.  With ``hold_final`` labels that stopped before k contribute
    their final value; ``normalise`` divides objective values by each label's f_final."""
    off = stats.iter_offsets
    lengths = np.diff(off)
    flat = stats.iterations[name]
    final = np.asarray(stats["f_final"], dtype=np.float64)
    out = []
    for k in range(first, last + 1):
        running = lengths > k
        vals = flat[off[:-1][running] + k].astype(np.float64)
        if normalise:
            vals = vals / final[running]
        if hold_final:
            done = ~running
            held = np.ones(int(done.sum())) if normalise else final[done]
            vals = np.concatenate([vals, held])
        out.append((k, vals))
    return out


def _summaries(series, kind: str = "quantile"):
    ks, mean, lo, hi = [], [], [], []
    for k, v in series:
        if v.size == 0:
            continue
        ks.append(k)
        m = float(np.mean(v))
        mean.append(m)
        if kind == "std":
            s = float(np.std(v))
            lo.append(m - s)
            hi.append(m + s)
        else:
            q = np.quantile(v, QUANTILES)
            lo.append(float(q[0]))
            hi.append(float(q[1]))
    return np.array(ks), np.array(mean), np.array(lo), np.array(hi)


def positive_bins(max_pos: int) -> np.ndarray:
    """Bin edges over positive counts: [1, 2), ..., [10, 11), then 8 per decade."""
    small = np.arange(1, 12, dtype=np.float64)
    if max_pos <= 10:
        return small[: max(int(max_pos), 1) + 1]
    decades = np.log10(max_pos + 1) - np.log10(11)
    nb = max(1, int(np.ceil(8 * decades)))
    big = np.unique(np.round(np.geomspace(11, max_pos + 1, nb + 1)))
    edges = np.unique(np.concatenate([small, big]))
    if edges[-1] <= max_pos:
        edges = np.append(edges, max_pos + 1)
    return edges


def binned(npos: np.ndarray, values: np.ndarray, edges: np.ndarray, min_labels: int = MIN_LABELS):
    """(x = mean count, mean, q05, q95, labels) per bin with at least ``min_labels`` labels."""
    npos = np.asarray(npos)
    values = np.asarray(values, dtype=np.float64)
    which = np.searchsorted(edges, npos, side="right") - 1
    xs, mean, lo, hi, cnt = [], [], [], [], []
    for b in range(edges.size - 1):
        m = (which == b) & (npos > 0)
        n = int(m.sum())
        if n < min(min_labels, max(1, npos.size)):
            continue
        v = values[m]
        q = np.quantile(v, QUANTILES)
        xs.append(float(np.mean(npos[m])))
        mean.append(float(np.mean(v)))
        lo.append(float(q[0]))
        hi.append(float(q[1]))
        cnt.append(n)
    return np.array(xs), np.array(mean), np.array(lo), np.array(hi), np.array(cnt)


# --------------------------------------------------------------------------- series
# A series function maps one run's statistics to (x, mean, lo, hi) arrays.
def objective_series(st):
    """f(w_k) / f(w_final) per label, finished labels held at 1; mean, 5-95 %.  Labels
    without training positives are left out: their optimum is ~0 (every instance beyond
    the margin), so the ratio says nothing but can reach 1e13 and swamp the mean."""
    keep = np.flatnonzero((np.asarray(st["n_pos"]) > 0) & (np.asarray(st["f_final"]) > 0))
    if keep.size < len(st):
        st = st.take(keep)
    K = iteration_cutoff(st)
    return _summaries(per_iteration(st, "objective", 0, K, hold_final=True, normalise=True))


def raw_objective_series(st):
    """f(w_k) over the labels still running (the paper's convention); mean, 5-95 %."""
    return _summaries(per_iteration(st, "objective", 0, iteration_cutoff(st)))


def active_series(st):
    """% of instances in the Hessian of iteration k (record k >= 1 holds the active set
    that iteration's Hessian products used; record 0 repeats it for the start)."""
    x, m, lo, hi = _summaries(per_iteration(st, "active_fraction", 1, iteration_cutoff(st)))
    return x, 100 * m, 100 * lo, 100 * hi


def duration_series(st):
    x, m, lo, hi = _summaries(per_iteration(st, "seconds", 0, iteration_cutoff(st)))
    return x, 1e3 * m, 1e3 * lo, 1e3 * hi


def step_series(st):
    x, m, lo, hi = _summaries(per_iteration(st, "step", 1, iteration_cutoff(st)), kind="std")
    return x, m, np.clip(lo, 0, 1), np.clip(hi, 0, 1)


def positives_series(column: str, edges: np.ndarray, scale: float = 1.0):
    def series(st):
        x, m, lo, hi, _ = binned(st["n_pos"], np.asarray(st[column], dtype=np.float64) * scale, edges)
        return x, m, lo, hi
    return series


# --------------------------------------------------------------------------- drawing
def _grid(n_panels: int, ncols: int = 4):
    Figure = require_matplotlib()
    ncols = max(1, min(ncols, n_panels))
    nrows = -(-n_panels // ncols)
    fig = Figure(figsize=(3.7 * ncols, 3.1 * nrows + 0.6), dpi=100, layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes[:n_panels])


def _reference(runs):
    """The run every panel repeats as a grey dashed line: zero, when it was trained."""
    return next(((n, st) for n, st in runs if n == "zero"), None)


def small_multiples(runs, series, path, *, title: str, xlabel: str, ylabel: str, logx: bool = False,
                    logy: bool = False, ylim=None, band: str = "5-95 % band"):
    """One panel with every run's mean, then one panel per run with its mean, its band
    and zero's mean (grey, dashed) for reference.  Returns the path."""
    names = [n for n, _ in runs]
    col = colours(names)
    data = {n: series(st) for n, st in runs}
    overlay = len(runs) > 1
    fig, axes = _grid(len(runs) + overlay)
    ref = _reference(runs)
    if overlay:
        ax = axes[0]
        for n in names:
            x, m, _, _ = data[n]
            ax.plot(x, m, color=col[n], lw=1.6, label=n)
        ax.set_title("means of all runs", fontsize=10)
        ax.legend(fontsize=7, ncol=1 if len(names) <= 5 else 2, framealpha=0.8)
    for ax, n in zip(axes[overlay:], names):
        x, m, lo, hi = data[n]
        if ref is not None and n != ref[0]:
            rx, rm, _, _ = data[ref[0]]
            ax.plot(rx, rm, color="0.45", lw=1.2, ls="--", label=f"{ref[0]} (mean)")
        ax.fill_between(x, lo, hi, color=col[n], alpha=0.25, lw=0, label=band)
        ax.plot(x, m, color=col[n], lw=1.8, label=f"{n} (mean)")
        ax.set_title(n, fontsize=10, color=col[n])
        ax.legend(fontsize=7, framealpha=0.8)
    drawn = any(len(data[n][0]) for n in names)
    for ax in axes:
        _axes_scales(ax, drawn, logx, logy, runs)
        if ylim is not None:
            ax.set_ylim(*ylim)
    fig.suptitle(title, fontsize=12)
    fig.supxlabel(xlabel, fontsize=10)
    fig.supylabel(ylabel, fontsize=10)
    return _save(fig, path)


def _axes_scales(ax, drawn: bool, logx: bool, logy: bool, runs=()) -> None:
    """Log scales where asked -- but a run of few labels may have no bin of positives with
    enough labels to draw: its panel says so and stays linear (a log axis without data
    cannot be drawn; helper-48: the aop grid's figure failed there, after all training).
    Where no label of the runs has a training positive, the panel says that instead
    (helper-57: the objective figure, which has no bins, spoke of bins)."""
    if not drawn:
        none = bool(runs) and all(np.all(st["n_pos"] == 0) for _, st in runs if len(st))
        text = ("no label of this range has\ntraining positives: nothing to draw" if none
                else "no bin of positives holds\nenough labels to draw")
        ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="0.4")
    if logx and drawn:
        ax.set_xscale("log")
    if logy and drawn:
        ax.set_yscale("log", nonpositive="clip")
    ax.grid(True, alpha=0.3)


def _positives_note(runs) -> str:
    if not runs:
        return ""
    zero = int(np.sum(runs[0][1]["n_pos"] == 0))
    return f" ({zero} labels without training positives not shown)" if zero else ""


def _edges(runs) -> np.ndarray:
    max_pos = max((int(np.max(st["n_pos"])) for _, st in runs if len(st)), default=1)
    return positive_bins(max(max_pos, 1))


# --------------------------------------------------------------------------- figures
def objective_figure(runs, path):
    return small_multiples(runs, objective_series, path, logy=True, xlabel="Newton iteration k",
                           ylabel="f(w_k) / f(w_final) of the label",
                           title="Objective per Newton iteration, normalised per label (finished labels count as 1)"
                           + _positives_note(runs))


def active_fraction_figure(runs, path):
    return small_multiples(runs, active_series, path, logy=True, xlabel="Newton iteration k",
                           ylabel="training instances in the Hessian (%)",
                           title="Sparsity of the Hessian computation: active set (margin < 1) of iteration k")


def iteration_duration_figure(runs, path):
    return small_multiples(runs, duration_series, path, logy=True,
                           xlabel="Newton iteration k (0 = evaluating the start)", ylabel="duration (ms)",
                           title="Duration of one Newton iteration")


def time_vs_positives_figure(runs, path):
    return small_multiples(runs, positives_series("seconds", _edges(runs), 1e3), path, logx=True, logy=True,
                           xlabel="training positives of the label", ylabel="training time of the label (ms)",
                           title="Training time per label" + _positives_note(runs))


def iterations_vs_positives_figure(runs, path):
    return small_multiples(runs, positives_series("iterations", _edges(runs)), path, logx=True,
                           xlabel="training positives of the label", ylabel="Newton iterations",
                           title="Newton iterations per label" + _positives_note(runs))


def line_search_figure(runs, path):
    return small_multiples(runs, step_series, path, ylim=(0, 1.05), band="± 1 sd",
                           xlabel="Newton iteration k", ylabel="step multiplier",
                           title="Step multiplier accepted by the line search (mean ± 1 standard deviation)")


def initial_loss_figure(runs, path):
    return small_multiples(runs, positives_series("f_init", _edges(runs)), path, logx=True, logy=True,
                           xlabel="training positives of the label", ylabel="objective at the initial vector f(w0)",
                           title="Initial objective per label" + _positives_note(runs))


def distance_figure(runs, path):
    return small_multiples(runs, positives_series("distance", _edges(runs)), path, logx=True, logy=True,
                           xlabel="training positives of the label", ylabel="||w_final - w0||",
                           title="Distance from the initial to the final vector" + _positives_note(runs))


def iterations_histogram_figure(runs, path):
    names = [n for n, _ in runs]
    col = colours(names)
    top = max((int(np.max(st["iterations"])) for _, st in runs if len(st)), default=1)
    cap = max((iteration_cutoff(st, share=0.002, min_labels=1) for _, st in runs), default=1) + 1
    cap = min(cap, top)
    bins = np.arange(0, cap + 2) - 0.5
    overlay = len(runs) > 1
    fig, axes = _grid(len(runs) + overlay)
    clipped = {n: np.minimum(np.asarray(st["iterations"]), cap) for n, st in runs}
    if overlay:
        for n in names:
            axes[0].hist(clipped[n], bins=bins, histtype="step", color=col[n], lw=1.4, label=n)
        axes[0].set_title("all runs", fontsize=10)
        axes[0].legend(fontsize=7, ncol=1 if len(names) <= 5 else 2)
    ref = _reference(runs)
    for ax, n in zip(axes[overlay:], names):
        ax.hist(clipped[n], bins=bins, color=col[n], alpha=0.6, label=n)
        if ref is not None and n != ref[0]:
            ax.hist(clipped[ref[0]], bins=bins, histtype="step", color="0.35", ls="--", lw=1.2, label=ref[0])
        ax.set_title(n, fontsize=10, color=col[n])
        ax.legend(fontsize=7)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    more = f" (labels with more than {cap} iterations are counted at {cap})" if cap < top else ""
    fig.suptitle("Newton iterations per label" + more, fontsize=12)
    fig.supxlabel("Newton iterations of a label", fontsize=10)
    fig.supylabel("labels", fontsize=10)
    return _save(fig, path)


def aop_grid_figure(points, path):
    """points: [(name, stats)] of the aop (s, t) grid: the supplementary's four panels
    (means only; the bands are in the per-initialisation figures)."""
    Figure = require_matplotlib()
    fig = Figure(figsize=(12.8, 8.4), dpi=100, layout="constrained")
    axs = [fig.add_subplot(2, 2, i + 1) for i in range(4)]
    col = colours([n for n, _ in points])
    edges = _edges(points)
    panels = ((duration_series, "Newton iteration k", "duration of one iteration (ms)", False, True),
              (positives_series("iterations", edges), "training positives", "Newton iterations", True, False),
              (raw_objective_series, "Newton iteration k", "objective, labels still running", False, True),
              (positives_series("distance", edges), "training positives", "||w_final - w0||", True, True))
    for ax, (series, xl, yl, logx, logy) in zip(axs, panels):
        drawn = False
        for name, st in points:
            x, m, _, _ = series(st)
            ax.plot(x, m, color=col[name], lw=1.6, label=name, marker="." if x.size <= 12 else None)
            drawn = drawn or bool(np.size(x))
        ax.set(xlabel=xl, ylabel=yl)
        _axes_scales(ax, drawn, logx, logy, points)
    axs[0].legend(fontsize=8, ncol=2)
    fig.suptitle("aop hyperparameters s, t (means over labels)" + _positives_note(points), fontsize=12)
    return _save(fig, path)


_BAND = "mean and 5-95 % band over labels"
#: (file, function, one-line caption) of the per-initialisation figures, in report order
FIGURES = (
    ("objective.png", objective_figure,
     "Objective per Newton iteration (paper Fig. 2), " + _BAND + ". Each label's objective is divided by its "
     "final value and a finished label counts as 1 from then on: raw objectives differ by orders of magnitude "
     "between head and tail labels, and averaging only the labels still running (as the paper does) makes "
     "curves rise when easy labels stop. Labels without training positives (optimum ~0) are left out."),
    ("active_fraction.png", active_fraction_figure,
     "Share of training instances with margin < 1, i.e. in the Hessian products, in Newton iteration k "
     "(paper Fig. 4 left, 'sparsity of the Hessian calculation'); " + _BAND + " still running."),
    ("iteration_duration.png", iteration_duration_figure,
     "Duration of one Newton iteration (supplementary), " + _BAND + " still running. Iteration 0 is the "
     "evaluation of the start (with X w0 for aop); iteration k >= 1 holds its Newton direction (CG), its share "
     "of the pass over X and its line search, for every initialisation."),
    ("time_vs_positives.png", time_vs_positives_figure,
     "Training time of a label against its number of training positives (paper Fig. 4 right): " + _BAND +
     " in each bin of positive counts."),
    ("iterations_vs_positives.png", iterations_vs_positives_figure,
     "Newton iterations of a label against its training positives (supplementary): " + _BAND + " per bin."),
    ("line_search_step.png", line_search_figure,
     "Step multiplier accepted by the backtracking line search in iteration k (supplementary): mean ± one "
     "standard deviation over labels still running, as the paper plots it; below 1 the quadratic model was "
     "too optimistic."),
    ("initial_loss.png", initial_loss_figure,
     "Objective at the initial vector against training positives (supplementary, left panel): " + _BAND +
     " per bin."),
    ("distance.png", distance_figure,
     "Distance ||w_final - w0|| the solver travels against training positives (supplementary, right panel): "
     + _BAND + " per bin."),
    ("iterations_histogram.png", iterations_histogram_figure,
     "Histogram of the number of Newton iterations per label (supplementary); dashed: zero."),
)
GRID_FIGURE = ("aop_grid.png", aop_grid_figure,
               "aop hyperparameters s, t (supplementary): duration of one iteration, iterations against "
               "positives, objective per iteration (labels still running, as the paper plots it), distance "
               "||w_final - w0||; means over labels.")


def draw_all(exp, out_dir) -> list[tuple[str, str]]:
    """Draw every figure of an experiment into ``out_dir``: [(file, caption)]."""
    require_matplotlib()
    out = Path(out_dir)
    runs = [(r.spec.name, r.stats) for r in exp.init_runs]
    drawn = []
    if runs:
        for fname, fn, caption in FIGURES:
            fn(runs, out / fname)
            drawn.append((fname, caption))
    points = [(name, r.stats) for name, r in exp.grid_runs()]
    if points:
        fname, fn, caption = GRID_FIGURE
        fn(points, out / fname)
        drawn.append((fname, caption))
    return drawn
