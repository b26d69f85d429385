"""The first run's helper process that compiles part of the training kernels
(headstart.cli.precompile): it compiles exactly what train_chunk then loads, never
leaves anything behind, and starts only on a cold cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from headstart.cli import precompile
from headstart.params import TrainParams

REPO = Path(__file__).resolve().parents[1]

# A listener on numba's compile events for the scripts below: records, under share[0],
# the kernels the process compiles (not those loaded from the cache), and only those
# numba caches on disk (the race of precompile's 'One function, one process' is about
# cache files; numba's overload implementations, the strategies' included, have none).
_RECORD_COMPILES = r"""
from numba.core import event

seen = {}
share = ["command"]
class L(event.Listener):
    def on_start(self, ev):
        d = ev.data["dispatcher"]
        if type(getattr(d, "_cache", None)).__name__ in ("NullCache", "NoneType"):   # not cached on disk
            return
        f = d.py_func   # a kernel's variant for compiled callers counts as the kernel
        seen.setdefault(share[0], []).append(f"{f.__module__}.{f.__qualname__}".removesuffix(".nested"))
    def on_end(self, ev):
        pass
event.register("numba:compile", L())
"""

# Runs the command in-process and prints the kernels it compiled, one per line.
_COMPILED_BY_COMMAND = _RECORD_COMPILES + r"""
import sys
from headstart.cli.main import main
rc = main(sys.argv[1:])
print("\n".join(["RC %d" % rc] + seen.get("command", [])))
"""


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}, **extra)
    return env


def _data(tmp_path: Path) -> Path:
    p = tmp_path / "train.txt"
    rows = ["0,1 0:1 2:0.5", "1 1:2", "2 0:1 3:1", "0 2:1 3:0.25", "1,2 1:1 2:1", "0 0:0.5 1:1"]
    p.write_text(f"{len(rows)} 4 3\n" + "\n".join(rows) + "\n")
    return p


def _tmp_files(cache: Path) -> list[str]:
    return [str(p) for p in cache.rglob("*") if ".tmp." in p.name]


# Compiles the command's and the helper's shares in the order the command would, and
# prints, per share, the kernels compiled while it ran (one JSON object).
_SHARES = _RECORD_COMPILES + r"""
import json, sys
from headstart.params import TrainParams
from headstart.cli import precompile as p

params = TrainParams.from_dict(json.loads(sys.stdin.read()))
share[0] = "command"
p.compile_kernels(params, p.COMMAND_SHARE)
share[0] = "helper before the go"
p.compile_in_helper(params, lambda: False)
share[0] = "helper after the go"
p.compile_kernels(params, p.HELPER_AFTER_GO)
print(json.dumps(seen))
"""


def test_precompiled_kernels_are_exactly_the_specialisations_the_command_loads(tmp_path):
    """After the command's and the helper's shares ran on an empty cache, the command
    (helper switched off) loads the solver phases, the reader and the packing kernels
    from the cache and compiles the rest: if the kernels' signatures change and the
    precompiled types do not follow, this fails.  And what the helper compiles while
    the command compiles shares no function with it (precompile's 'One function, one
    process'): before the go nothing with the command's share, and nothing at all with
    the rest of train_chunk."""
    cache = tmp_path / "cache"
    r = subprocess.run([sys.executable, "-c", _SHARES], input=TrainParams(normalize=True).to_json().encode(),
                       env=_env(cache), capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    shares = {k: set(v) for k, v in json.loads(r.stdout.decode().strip().splitlines()[-1]).items()}
    out = subprocess.run([sys.executable, "-c", _COMPILED_BY_COMMAND, "train", str(_data(tmp_path)),
                          "-o", str(tmp_path / "model"), "--normalize", "-q"],
                         env=_env(cache, HEADSTART_PRECOMPILE="0"), capture_output=True, text=True, timeout=600)
    lines = out.stdout.split("\n")
    assert lines[0] == "RC 0", out.stderr[-2000:]
    compiled = {x for x in lines[1:] if x}
    assert "headstart.training.kernel.train_chunk" in compiled          # the cache was cold for it
    ahead = precompile.COMMAND_SHARE + precompile.HELPER_BEFORE_GO + precompile.HELPER_AFTER_GO
    for name in [f"{k.__module__}.{k.__name__}" for k, _ in precompile._kernel_args(TrainParams()).values()] + [
            "headstart.io._kernels.parse_sparse", "headstart.io._kernels.count_bytes",
            "headstart.training.packed._encode", "headstart.training.packed._decode",
            "headstart.training.packed._pack_values", "headstart.training.packed._unpack_values"]:
        assert name not in compiled, f"{name} was compiled again: it was precompiled for other types"
    assert set(precompile._kernel_args(TrainParams())) == set(ahead)    # every kernel has its turn
    ours = lambda names: {n for n in names if n.startswith("headstart.")}  # noqa: E731
    # before the go the helper runs beside the command's share; after it, beside the
    # rest of train_chunk, i.e. what the second command compiled
    assert not ours(shares["helper before the go"]) & ours(shares["command"])
    assert not ours(shares["helper before the go"] | shares["helper after the go"]) & ours(compiled)
    assert not _tmp_files(cache)


def test_helper_compiles_nothing_after_the_go_without_it(tmp_path):
    """Told to stop (the command's own share failed) or left without a word (the
    command died), the helper compiles only what it compiles before the go."""
    for tail in (precompile.STOP + "\n", ""):
        cache = tmp_path / f"cache{len(tail)}"
        proc = subprocess.run([sys.executable, "-m", "headstart.cli.precompile"],
                              input=(json.dumps(TrainParams().to_dict()) + "\n" + tail).encode(),
                              env=_env(cache), capture_output=True, timeout=600)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        saved = {p.name.split("-")[0].removesuffix(".nested")
                 for p in cache.rglob("*.nbi")}      # e.g. "_kernels.parse_sparse", "newton.direction.nested"
        assert {"_kernels.parse_sparse", "packed._encode", "newton.direction", "erm.project"} <= saved, saved
        assert not {"newton.advance", "kernel._touch", "kernel.lanes_scores_rows", "erm.unproject"} & saved, saved


def test_command_with_helper_on_cold_cache_leaves_nothing_behind(tmp_path):
    """The real first run: the command starts the helper, trains, stops it, leaves no
    temporary file in the cache, and writes byte for byte the model that a run without
    the helper writes (that one on the test session's own cache: whether its kernels
    were compiled or loaded changes no byte, and a second cold compile cost ~40 s)."""
    data = _data(tmp_path)
    runs = {}
    for name, switch in (("with", "1"), ("without", "0")):
        cache = tmp_path / f"cache-{name}"
        env = _env(cache, HEADSTART_PRECOMPILE=switch)
        if switch == "0":
            env.pop("NUMBA_CACHE_DIR")
            if os.environ.get("NUMBA_CACHE_DIR"):
                env["NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"]
        r = subprocess.run([sys.executable, "-m", "headstart", "train", str(data), "-o", str(tmp_path / name), "-vv"],
                           env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        assert ("pre-compiling helper ended" in r.stderr) == (switch == "1")
        if switch == "1":
            assert not _tmp_files(cache)
        runs[name] = {p.relative_to(tmp_path / name): p.read_bytes() for p in (tmp_path / name).rglob("*")
                      if p.is_file()}
    assert runs["with"] == runs["without"]


def test_helper_stops_promptly_mid_compile_without_temporary_files(tmp_path):
    """Stopped while it compiles the reader on its tiny scratch file: it ends within the
    timeout and leaves neither a temporary cache file nor its scratch folder (os._exit
    skips the folder's cleanup unless the SIGTERM handler does it; it once did not)."""
    cache, scratch = tmp_path / "cache", tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "headstart.cli.precompile"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=_env(cache, TMPDIR=str(scratch)))
    proc.stdin.write(json.dumps(TrainParams().to_dict()).encode() + b"\n" + precompile.GO.encode() + b"\n")
    proc.stdin.close()
    deadline = time.perf_counter() + 120
    while not any(scratch.iterdir()) and proc.poll() is None and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert any(scratch.iterdir()), "the helper never made its scratch folder"
    time.sleep(0.5)      # compiling the reader's kernels (seconds on a cold cache)
    t0 = time.perf_counter()
    precompile.Helper(proc).stop()
    assert time.perf_counter() - t0 < precompile.STOP_TIMEOUT
    assert proc.returncode is not None
    assert not _tmp_files(cache)
    assert not list(scratch.iterdir())


def test_started_only_on_a_cold_writable_cache(tmp_path, monkeypatch):
    from headstart.training.kernel import train_chunk

    monkeypatch.setenv(precompile.ENV_SWITCH, "0")
    assert not precompile.wanted()
    monkeypatch.delenv(precompile.ENV_SWITCH)
    index = Path(train_chunk._cache._cache_file._index_path)
    monkeypatch.setattr(train_chunk._cache, "_cache_path", str(tmp_path / "a" / "b"))
    monkeypatch.setattr(train_chunk._cache._cache_file, "_index_path", str(tmp_path / "a" / "b" / index.name))
    assert precompile.cache_is_cold()                    # nothing cached, folder can be made
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / index.name).write_bytes(b"")
    assert not precompile.cache_is_cold()                # train_chunk cached (for some types)
    (tmp_path / "a" / "b" / index.name).unlink()
    if os.geteuid() != 0:                                # root may write anywhere
        (tmp_path / "a" / "b").chmod(0o500)
        try:
            assert not precompile.cache_is_cold()
        finally:
            (tmp_path / "a" / "b").chmod(0o700)


def test_not_started_for_dask_training(tmp_path, monkeypatch):
    """Dask workers compile in their own processes: no helper for --scheduler / --dask-workers."""
    from headstart.cli import train
    from headstart.cli.main import main

    started = []
    monkeypatch.setattr(precompile, "start", lambda params: started.append(params))   # returns None: no helper
    monkeypatch.setattr(train, "_train", lambda args, params, ahead=0.0: 0)
    data = str(_data(tmp_path))
    assert main(["train", data, "-o", str(tmp_path / "m"), "--scheduler", "tcp://127.0.0.1:1", "-q"]) == 0
    assert main(["train", data, "-o", str(tmp_path / "m"), "--dask-workers", "2", "-q"]) == 0
    assert started == []
    assert main(["train", data, "-o", str(tmp_path / "m"), "-q"]) == 0
    assert len(started) == 1


def test_params_round_trip_through_the_helper_input():
    p = TrainParams(loss="logistic", C=2.5, normalize=True)
    assert TrainParams.from_dict(json.loads(p.to_json())) == p


def test_compile_command_leaves_nothing_for_the_demo_to_compile(tmp_path, bibtex_dir):
    """`headstart compile` with the demo's options (what `make venv` runs), on an empty
    cache: afterwards the demo's train, predict and evaluate on bibtex compile none of
    headstart's cached kernels -- the tiny generated data set gives them the same types."""
    cache = tmp_path / "cache"
    r = subprocess.run([sys.executable, "-m", "headstart", "compile", "--init", "aop", "--normalize"],
                       env=_env(cache), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "compiled headstart's kernels" in r.stdout
    assert "WARNING" not in r.stderr, r.stderr   # the tiny set's warnings are not the user's
    assert not _tmp_files(cache)
    model, pred = str(tmp_path / "model"), str(tmp_path / "pred.txt")
    train, test = str(bibtex_dir / "train.txt.gz"), str(bibtex_dir / "test.txt.gz")
    for argv in (["train", train, "-o", model, "--init", "aop", "--normalize", "--stats", str(tmp_path / "s.csv")],
                 ["predict", model, test, "-o", pred, "-k", "5"],
                 ["evaluate", "--predictions", pred, test, "--train", train]):
        out = subprocess.run([sys.executable, "-c", _COMPILED_BY_COMMAND, *argv, "-q"], env=_env(cache),
                             capture_output=True, text=True, timeout=600)
        lines = out.stdout.split("\n")
        assert "RC 0" in lines, out.stderr[-2000:]
        compiled = {x for x in lines[lines.index("RC 0") + 1:] if x.startswith("headstart.")}
        assert not compiled, f"'headstart {argv[0]}' compiled {sorted(compiled)} after 'headstart compile'"


def test_a_kernels_wrapperless_variant_refuses_calls_from_python():
    """Compiled callers get a kernel's variant without numba's Python wrapper
    (headstart._compile); called from Python it would crash the process, so it refuses."""
    import numpy as np

    from headstart.objective import erm

    with pytest.raises(TypeError, match="compiled code only"):
        erm.scores.nested(None, np.zeros(1), np.zeros(1))


def test_ctrl_c_while_the_command_compiles_stops_the_run(bibtex_dir, tmp_path):
    """A real Ctrl-C on a first run (cold cache), sent to the whole process group as a
    terminal does, while the command compiles the training kernels and its helper compiles
    its share: exit 130 'interrupted', no model directory, the helper gone with the
    command, neither a temporary cache file nor a scratch folder left.  Whether the
    KeyboardInterrupt lands in one of llvmlite's callbacks (which swallow it) is a matter
    of timing: test_cli's swallowed-interrupt test covers that case by simulation; this
    one is the path as a user takes it.  (A shell script's background job inherits
    SIGINT ignored, so a reproduction that way shows a run that 'ignores' Ctrl-C, as any
    program would -- stop 64 took that for a bug; the child here restores the default.)"""
    import signal

    import queue
    import threading

    cache, scratch, out = tmp_path / "cache", tmp_path / "tmp", tmp_path / "m"
    scratch.mkdir()
    # Python's own Ctrl-C handler in the child even where this test inherited SIGINT
    # ignored (a background job), set in the child itself rather than by a preexec_fn
    # in this multi-threaded process
    runner = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
              "sys.argv = ['headstart', *sys.argv[1:]]; runpy.run_module('headstart', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", runner, "-v", "train", str(bibtex_dir / "train.txt.gz"),
                             "-o", str(out), "--threads", "1", "--num-labels", "8"], env=_env(cache, TMPDIR=str(scratch)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in iter(proc.stderr.readline, "")] and None,
                              daemon=True)
    reader.start()
    seen = []
    try:
        deadline = time.perf_counter() + 300
        while not seen or "compiling headstart's training kernels" not in seen[-1]:
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                if not reader.is_alive() or time.perf_counter() > deadline:
                    pytest.fail("no 'compiling headstart's training kernels' from the run:\n" + "".join(seen)[-2000:])
        time.sleep(1.0)     # inside numba's compiler (seconds of work left on a cold cache)
        assert proc.poll() is None, "the run ended before the Ctrl-C:\n" + "".join(seen)[-2000:]
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    while not lines.empty():
        seen.append(lines.get())
    err = "".join(seen)
    assert proc.returncode == 130 and "interrupted" in err, err[-2000:]
    assert not out.exists()
    with pytest.raises(ProcessLookupError):     # nothing of the run's group is left running
        os.killpg(proc.pid, 0)
    assert not _tmp_files(cache)
    assert not list(scratch.iterdir())
