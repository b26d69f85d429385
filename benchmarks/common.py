"""Shared helpers of the benchmark harness: data sets, label ranges, machine facts.

Everything here is used both by the orchestrator (``compare.py``) and by the worker
processes (``worker.py``) so that every method sees exactly the same data.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: Where a data set given by name is looked for, in this order.
def data_roots() -> list[Path]:
    roots = []
    if os.environ.get("HEADSTART_DATA"):
        roots.append(Path(os.environ["HEADSTART_DATA"]))
    roots += [REPO / "data", REPO.parent / "shared" / "data", Path("/work/shared/data")]
    return roots


#: how the harness defines P@k over a label range (printed with every result)
PK_DEFINITION = (
    "P@k for a label range [A, B): every method ranks only the labels it trained (A..B-1); the top k of "
    "each test row are compared with that row's test labels restricted to [A, B); the hits are divided by "
    "k and averaged over ALL test rows (rows without a label in the range count as 0, as pyxclib does). "
    "Over all labels this is the usual P@k. Computed by headstart.metrics.evaluate for every method.")


def resolve_dataset(name_or_dir: str) -> Path:
    """A directory holding ``train.txt.gz`` and ``test.txt.gz`` (XMC format)."""
    p = Path(name_or_dir)
    if (p / "train.txt.gz").is_file():
        return p.resolve()
    for root in data_roots():
        if (root / name_or_dir / "train.txt.gz").is_file():
            return (root / name_or_dir).resolve()
    raise SystemExit(f"data set {name_or_dir!r} not found: looked for {name_or_dir}/train.txt.gz and in "
                     + ", ".join(str(r) for r in data_roots()))


def synth_cache_dir() -> Path:
    """Where generated synthetic sets are kept: $HEADSTART_SYNTH_CACHE or build/synth."""
    return Path(os.environ.get("HEADSTART_SYNTH_CACHE") or REPO / "build" / "synth")


def is_preset(name: str) -> bool:
    from synth import PRESETS

    return name in PRESETS and not Path(name).exists()


def dataset_for(name: str, scale: float = 1.0, data_seed: int = 0, cache_dir: str | Path | None = None,
                generate: bool = True, log=print) -> Path:
    """A data folder: a synthetic preset (benchmarks/synth.py) is generated into the cache
    folder when missing; any other name goes to :func:`resolve_dataset`."""
    if is_preset(name):
        import synth

        cache = Path(cache_dir) if cache_dir else synth_cache_dir()
        if not generate:
            return cache / synth.dataset_name(name, scale, data_seed)
        return synth.ensure(name, scale, data_seed, cache, log=log).resolve()
    if scale != 1.0 or data_seed != 0:
        raise SystemExit(f"--scale and --data-seed apply to the synthetic presets only, not to {name!r}")
    return resolve_dataset(name)


def add_peer_arguments(ap, default_peer: str) -> None:
    """--data and --peer-python of the benchmarks that run LibMultiLabel from its own venv
    (tree.py, thresholds.py)."""
    ap.add_argument("--data", nargs="+", default=["bibtex"], metavar="NAME",
                    help="data sets: data/NAME, /work/shared/data/NAME, or a folder (default: bibtex)")
    ap.add_argument("--peer-python", action="append", metavar="PATH",
                    help=f"python of a venv with libmultilabel installed (repeatable; default {default_peer})")


def sample_labels(num_labels: int, n: int, seed: int) -> list[int]:
    """``n`` distinct label ids drawn uniformly from ``[0, num_labels)``, ascending."""
    if not 1 <= n <= num_labels:
        raise SystemExit(f"--sample-labels must be in [1, {num_labels}] (the number of labels), got {n}")
    rng = np.random.default_rng(seed)
    return sorted(int(j) for j in rng.choice(num_labels, size=n, replace=False))


def parse_label_range(text: str | None, num_labels: int) -> tuple[int, int]:
    """``"A:B"`` (either side may be empty) -> ``(A, B)`` clipped to the label space."""
    if not text or text in (":", "all"):
        return 0, num_labels
    m = re.fullmatch(r"\s*(\d*)\s*:\s*(\d*)\s*", text)
    if not m:
        raise SystemExit(f"--labels must look like A:B (e.g. 0:1000), got {text!r}")
    a = int(m.group(1)) if m.group(1) else 0
    b = int(m.group(2)) if m.group(2) else num_labels
    b = min(b, num_labels)
    if not 0 <= a < b:
        raise SystemExit(f"--labels {text}: empty or invalid range for {num_labels} labels")
    return a, b


def read_header(path: Path) -> tuple[int, int, int]:
    with gzip.open(path, "rt") as fh:
        n, d, L = (int(v) for v in fh.readline().split())
    return n, d, L


def load_split(path: Path) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(X float32 CSR, Y CSR) of one XMC file, with the library's reader."""
    from headstart.io.xmc import read_xmc

    return read_xmc(str(path))


def label_columns(Y: sp.csr_matrix, labels: list[int]) -> sp.csr_matrix:
    """Y restricted to the given label ids: column j is label ``labels[j]``."""
    return sp.csr_matrix(Y[:, np.asarray(labels, dtype=np.int64)])


def label_slice(Y: sp.csr_matrix, a: int, b: int) -> sp.csr_matrix:
    """Columns [a, b) of Y as canonical CSR 0/1 float32 (column j = label a + j)."""
    Ys = sp.csr_matrix(Y[:, a:b], dtype=np.float32)
    Ys.sum_duplicates()
    Ys.data[:] = 1.0
    return Ys


def csr_bytes(M) -> int:
    if M is None:
        return 0
    if sp.issparse(M):
        M = sp.csr_matrix(M)
        return int(M.data.nbytes + M.indices.nbytes + M.indptr.nbytes)
    return int(np.asarray(M).nbytes)


# --------------------------------------------------------------------------- machine facts
def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def mem_total_gib() -> float | None:
    m = re.search(r"MemTotal:\s+(\d+) kB", _read("/proc/meminfo"))
    return round(int(m.group(1)) / 2**20, 1) if m else None


def package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


#: distribution name of every package a method may use
PACKAGES = ("headstart", "numpy", "scipy", "numba", "liblinear-official", "liblinear-multicore", "napkinxc",
            "omikuji", "libpecos", "libmultilabel", "scikit-learn", "psutil")


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        head = out.stdout.strip() or None
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return f"{head}{' (+ uncommitted changes)' if dirty else ''}" if head else None
    except (OSError, subprocess.SubprocessError):
        return None


def machine_info() -> dict:
    return {
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "mem_total_gib": mem_total_gib(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "packages": {p: package_version(p) for p in PACKAGES},
        "git_commit": git_commit(),
    }


# --------------------------------------------------------------------------- machine load
def cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine from /proc/stat (None off Linux)."""
    line = _read("/proc/stat").split("\n", 1)[0]
    if not line.startswith("cpu "):
        return None
    v = [int(x) for x in line.split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)           # idle + iowait
    total = sum(v[:8])                                  # guest time is already in user
    return total - idle, total


CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class LoadProbe:
    """Machine load around one run: ``os.getloadavg()`` before and after, and the CPU
    seconds spent by *other* processes (machine busy time from /proc/stat minus the CPU
    time of the measured process tree), i.e. how many cores something else was using."""

    def __init__(self) -> None:
        self.load_before = list(os.getloadavg())
        self.j0 = cpu_jiffies()
        self.t0 = time.perf_counter()

    def finish(self, own_cpu_s: float | None) -> dict:
        wall = time.perf_counter() - self.t0
        out = {"loadavg_before": [round(x, 2) for x in self.load_before],
               "loadavg_after": [round(x, 2) for x in os.getloadavg()],
               "interval_s": round(wall, 3)}
        j1 = cpu_jiffies()
        if self.j0 and j1:
            busy = (j1[0] - self.j0[0]) / CLK_TCK
            out["machine_busy_cpu_s"] = round(busy, 3)
            if own_cpu_s is not None and wall > 0:
                foreign = max(0.0, busy - own_cpu_s)
                out["foreign_cpu_s"] = round(foreign, 3)
                out["foreign_cores"] = round(foreign / wall, 3)
        return out


def quiet_check(seconds: float = 3.0) -> dict:
    """How busy the machine is while we do nothing (cores in use on average)."""
    p = LoadProbe()
    time.sleep(seconds)
    r = p.finish(0.0)
    return {"loadavg": r["loadavg_before"], "idle_probe_s": seconds,
            "busy_cores": round(r.get("machine_busy_cpu_s", 0.0) / r["interval_s"], 3)}
