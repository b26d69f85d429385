"""Where the compiled kernels spend their time: ``perf`` with numba's functions named.

    python benchmarks/perf_profile.py medical --init zero --loss squared-hinge --seconds 12
    python benchmarks/perf_profile.py debian-deps --labels 0:300 --threads 1 --top 40

``perf`` names a JIT function only through ``/tmp/perf-PID.map``, and numba can list
its functions' addresses only for code compiled in this process (a library loaded from
numba's cache keeps no module to read the names from).  So this script points numba at
a fresh, temporary cache directory (set before numba is imported), trains once (the
compile), writes the map from every headstart dispatcher's compiled libraries (each
function's address; its size is the gap to the next one), then attaches
``perf record`` to itself while it trains the same labels over and over for
``--seconds``, and prints ``perf report`` by symbol.  The mangled names are shortened to
module.function.  Requires ``perf`` (linux-perf) and permission to profile the process.

``--shortlist FILE`` profiles shortlisted training (docs/shortlist.md) instead.

Written for stop 63 (2026-12-02): on medical it showed CG's step at 27% and the
object-mode clock at 8% of a zero start (docs/benchmarks.md, "Small problems").
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write_perf_map() -> int:
    """/tmp/perf-PID.map for every compiled function of headstart's dispatchers."""
    from numba.core.registry import CPUDispatcher

    libs = {}
    for mod in list(sys.modules.values()):
        if mod is None or not getattr(mod, "__name__", "").startswith("headstart"):
            continue
        for obj in list(vars(mod).values()):
            if isinstance(obj, CPUDispatcher):
                for disp in (obj, obj.__dict__.get("_nested")):
                    for cres in getattr(disp, "overloads", {}).values():
                        libs[id(cres.library)] = cres.library
    where = {}
    for lib in libs.values():
        try:
            functions = list(lib._final_module.functions)
        except Exception:   # noqa: BLE001 - loaded from a cache: no names (see above)
            continue
        for f in functions:
            if f.is_declaration:
                continue
            try:
                address = lib.get_pointer_to_function(f.name)
            except Exception:   # noqa: BLE001
                address = 0
            if address:
                where[address] = f.name
    addresses = sorted(where)
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as fh:
        for i, a in enumerate(addresses):
            size = min((addresses[i + 1] - a) if i + 1 < len(addresses) else 4096, 1 << 20)
            fh.write(f"{a:x} {size:x} {where[a]}\n")
    return len(addresses)


def short(symbol: str) -> str:
    """'_ZN9headstart6solver2cg8pcg_step6nestedB4v1...' -> 'solver.cg.pcg_step'."""
    m = re.match(r"_ZN\d+headstart((?:\d+[A-Za-z_]\w*?)+?)(?:\d+nested|B\d+v\d+|E)", symbol)
    if not m:
        return symbol[:100]
    parts, rest = [], m.group(1)
    while rest:
        k = re.match(r"(\d+)", rest)
        n = int(k.group(1))
        parts.append(rest[len(k.group(1)):len(k.group(1)) + n])
        rest = rest[len(k.group(1)) + n:]
    return ".".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--labels", default="", help="FIRST:STOP (default: all)")
    ap.add_argument("--init", default="aop")
    ap.add_argument("--loss", default="squared-hinge")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out", default="", help="perf.data path (default: a temporary file)")
    ap.add_argument("--shortlist", default="", help="profile shortlisted training on this shortlist "
                    "(instances x labels, scipy.sparse.save_npz)")
    a = ap.parse_args(argv)

    cache = tempfile.mkdtemp(prefix="hs-perf-numba-")
    os.environ["NUMBA_CACHE_DIR"] = cache          # before numba is imported
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(HERE))
    import numpy as np
    import scipy.sparse as sp

    from common import resolve_dataset
    from headstart.io import read_xmc
    from headstart.params import TrainParams
    from headstart.training.trainer import train_labels

    X, Y = read_xmc(resolve_dataset(a.data) / "train.txt.gz")
    X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y)
    first, stop = (map(int, a.labels.split(":")) if a.labels else (0, Y.shape[1]))
    labels = np.arange(first, min(stop, Y.shape[1]))
    p = TrainParams(init=a.init, loss=a.loss, threads=a.threads)
    train = train_labels
    if a.shortlist:
        from headstart.shortlist import train_shortlisted

        S = sp.csc_matrix(sp.load_npz(a.shortlist))
        S.sort_indices()
        Yc = sp.csc_matrix(Y)
        Yc.sort_indices()

        def shortlisted(X, Y, p, labels):
            return train_shortlisted(X, Yc, S, p, labels)
        train = shortlisted
    train(X, Y, p, labels)        # compiles, in this process
    print(f"{write_perf_map()} functions mapped", file=sys.stderr)
    out = a.out or os.path.join(cache, "perf.data")
    rec = subprocess.Popen(["perf", "record", "-F", "4000", "-p", str(os.getpid()), "-o", out, "--",
                            "sleep", str(a.seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0, runs = time.perf_counter(), 0
    while rec.poll() is None:
        train(X, Y, p, labels)
        runs += 1
    print(f"{runs} runs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    report = subprocess.run(["perf", "report", "-i", out, "--no-children", "--sort", "sym"],
                            capture_output=True, text=True).stdout
    shown = 0
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(\S+)", line)
        if m:
            print(f"{m.group(1):>7}%  [{m.group(2)}] {short(m.group(3))}")
            shown += 1
            if shown >= a.top:
                break
    import shutil

    shutil.rmtree(cache, ignore_errors=True)     # the temporary numba cache (and perf.data unless --out)
    os.unlink(f"/tmp/perf-{os.getpid()}.map")
    return 0


if __name__ == "__main__":
    sys.exit(main())
