"""What an experiment trains: one :class:`RunSpec` per initialisation (and per point of
the aop (s, t) grid), parsed from the command-line spellings.

Initialisation spellings (``--inits``, comma separated)::

    zero            all-zero start
    bias            bias weight -1, every other weight 0 (the paper's w_b)
    bias:V          bias weight V, e.g. bias:-0.9, bias:-2 (the paper's 0.9 w_b, 2 w_b)
    ovap            OvA-primal, all-negative problem solved loosely (paper section 3)
    ovap-strict     OvA-primal solved with the labels' own stopping rule
    aop             average of positives with the experiment's s and t
    aop:T           average of positives with t = T (e.g. aop:-3, the paper's "aop*")

The aop grid (``--aop-grid 1,2:-1,-2,-3``) is the product of the s values and the t
values, pairs with t >= s left out (aop needs the mean negative to score below the mean
positive).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import ParameterError
from ..params import TrainParams

#: the default of ``--inits``: every initialisation the paper compares
DEFAULT_INITS = "zero,bias,bias:-0.9,bias:-2,ovap,ovap-strict,aop"

#: the paper's aop hyperparameters (supplementary, "Choice of hyperparameters for aop")
PAPER_S, PAPER_T = 1.0, -2.0

INIT_GROUP, GRID_GROUP = "inits", "aop-grid"


@dataclass(frozen=True)
class RunSpec:
    """One training run of an experiment."""

    name: str             # shown in tables and legends, e.g. "bias -0.9"
    key: str              # file-name safe, e.g. "bias_-0.9"
    params: TrainParams
    group: str = INIT_GROUP

    @property
    def init(self) -> str:
        return self.params.init


def _num(x: float) -> str:
    """Shortest spelling of a number: 1.0 -> '1', -0.9 -> '-0.9'."""
    return f"{x:g}"


def _float(text: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ParameterError(f"{what}: expected a number, got {text!r}") from None
    if not math.isfinite(v):
        raise ParameterError(f"{what}: expected a finite number, got {text!r}")
    return v


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=+-]+", "_", name).strip("_")


def aop_name(s: float, t: float) -> str:
    """'aop' for the paper's s=1, t=-2, else 'aop s=.. t=..' (t only when s is the paper's)."""
    if (s, t) == (PAPER_S, PAPER_T):
        return "aop"
    if s == PAPER_S:
        return f"aop t={_num(t)}"
    return f"aop s={_num(s)} t={_num(t)}"


def make_spec(init: str, base: TrainParams, value: float | None = None) -> RunSpec:
    """The run of initialisation ``init`` (``value``: bias weight or aop t) on ``base``."""
    if init == "bias":
        # --bias-init gives plain 'bias' its weight, as --aop-t gives plain 'aop' its t
        # (helper-57: it was -1 whatever --bias-init said)
        v = base.bias_init if value is None else value
        p = base.replace(init="bias", bias_init=v)
        return RunSpec(f"bias {_num(v)}", _key(f"bias {_num(v)}"), p)
    if init == "aop":
        t = base.aop_t if value is None else value
        p = base.replace(init="aop", aop_t=t)
        name = aop_name(p.aop_s, p.aop_t)
        return RunSpec(name, _key(name), p)
    if value is not None:
        raise ParameterError(f"initialisation {init!r} takes no value (only bias:V and aop:T do)")
    return RunSpec(init, _key(init), base.replace(init=init))


def parse_inits(text: str, base: TrainParams) -> list[RunSpec]:
    """``"zero,bias:-2,aop"`` -> run specifications, in the order given, duplicates removed."""
    from ..params import init_names

    # every registered initialiser but the one that needs a model directory
    known = tuple(n for n in init_names() if n != "pretrained")
    out: list[RunSpec] = []
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise ParameterError(f"--inits: expected a comma-separated list such as {DEFAULT_INITS!r}, got {text!r}")
    for item in items:
        init, sep, val = item.partition(":")
        if init not in known:
            raise ParameterError(f"--inits: unknown initialisation {init!r}; known: {', '.join(known)} "
                                 "(bias:V sets the bias weight, aop:T the aop target t)")
        value = _float(val, f"--inits {item!r}") if sep else None
        if sep and init not in ("bias", "aop"):
            raise ParameterError(f"--inits {item!r}: only bias:V and aop:T take a value")
        try:
            spec = make_spec(init, base, value)
        except ParameterError as e:
            raise ParameterError(f"--inits {item!r}: {e}") from None
        if all(spec.params != o.params for o in out):
            out.append(spec)
    return out


def parse_grid(text: str, base: TrainParams) -> list[RunSpec]:
    """``"1,2:-1,-2,-3"`` -> one aop run per (s, t) with t < s, in s-major order."""
    s_text, sep, t_text = text.partition(":")
    if not sep or not s_text.strip() or not t_text.strip():
        raise ParameterError(f"--aop-grid: expected S1,S2,...:T1,T2,..., e.g. '1:-1,-2,-3', got {text!r}")
    ss = [_float(x.strip(), "--aop-grid s") for x in s_text.split(",")]
    ts = [_float(x.strip(), "--aop-grid t") for x in t_text.split(",")]
    out: list[RunSpec] = []
    for s in ss:
        for t in ts:
            if t >= s:
                continue
            p = base.replace(init="aop", aop_s=s, aop_t=t)
            name = f"s={_num(s)} t={_num(t)}"
            spec = RunSpec(name, _key("aop " + name), p, GRID_GROUP)
            if all(spec.params != o.params for o in out):
                out.append(spec)
    if not out:
        raise ParameterError(f"--aop-grid {text!r}: no pair with t < s")
    return out


def parse_label_range(text: str) -> tuple[int, int]:
    """``"A:B"`` -> (A, B): labels A..B-1; ``":B"`` = 0:B; ``"A:"`` = A to the end (B = -1)."""
    a, sep, b = text.partition(":")
    if not sep:
        raise ParameterError(f"--labels: expected A:B (labels A..B-1), got {text!r}")
    try:
        first = int(a) if a.strip() else 0
        stop = int(b) if b.strip() else -1
    except ValueError:
        raise ParameterError(f"--labels: expected integers A:B, got {text!r}") from None
    if first < 0 or (stop != -1 and stop <= first):
        raise ParameterError(f"--labels {text!r}: need 0 <= A < B")
    return first, stop


def plan_runs(inits: list[RunSpec], grid: list[RunSpec]) -> tuple[list[RunSpec], list[dict]]:
    """The runs to train (initialisations first, then the grid points not already among
    them) and the grid points as ``{"name", "s", "t", "run"}`` naming the run that serves each."""
    runs = list(inits)
    points = []
    for g in grid:
        same = next((r for r in runs if r.params == g.params), None)
        if same is None:
            runs.append(g)
            same = g
        points.append({"name": g.name, "s": g.params.aop_s, "t": g.params.aop_t, "run": same.name})
    return runs, points
