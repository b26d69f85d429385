"""What importing headstart does to the user's process, and what it needs.

Each check runs in a fresh interpreter (``subprocess``): this test process has long
imported everything.  Optional packages are made unimportable there by putting
``None`` into ``sys.modules`` (Python then raises ImportError for them), which is
what a machine without the extra looks like to the importing code.
"""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import headstart

REPO = Path(__file__).resolve().parent.parent
OPTIONAL = ("matplotlib", "dask", "distributed", "sklearn")


def run_python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, cwd=str(REPO), timeout=600)


def all_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(headstart.__path__, "headstart."))


def test_import_headstart_imports_no_optional_package():
    out = run_python(f"""
        import json, sys
        import headstart
        from headstart.cli.main import build_parser
        build_parser()                       # imports every subcommand module
        import headstart.distributed, headstart.experiment
        # and using the estimator (scikit-learn's protocol without scikit-learn)
        import numpy as np
        X = np.eye(6, dtype=np.float32); Y = np.eye(6, 3, dtype=np.int8)
        clf = headstart.OvAClassifier(threads=1).fit(X, Y)
        clf.predict(X), clf.score(X, Y), clf.get_params()
        try:
            headstart.OvAClassifier().predict(X)
        except headstart.errors.NotFittedError:
            pass
        print(json.dumps(sorted(m for m in {OPTIONAL!r} if m in sys.modules)))
    """)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_every_module_imports_without_the_extras():
    """No module of the package needs an extra at import time (they import it where used)."""
    out = run_python(f"""
        import importlib, sys
        for name in {OPTIONAL!r}:
            sys.modules[name] = None          # not installed
        for name in {all_modules()!r}:
            importlib.import_module(name)
        print("ok")
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_core_dependencies_are_only_what_the_core_imports():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {d.split(">")[0].split("[")[0].strip() for d in project["dependencies"]}
    assert core == {"numpy", "scipy", "numba", "rich"}
    extras = project["optional-dependencies"]
    assert any(d.startswith("matplotlib") for d in extras["plot"])
    # the test extra runs every test: it includes the plot extra
    assert any(d.startswith("matplotlib") for d in extras["test"])


def test_experiment_without_matplotlib_stops_at_once_naming_the_extra(bibtex_dir, tmp_path):
    report = tmp_path / "report"
    out = run_python(f"""
        import sys
        sys.modules["matplotlib"] = None      # not installed
        from headstart.cli.main import main
        sys.exit(main(["experiment", {str(bibtex_dir / "train.txt.gz")!r}, {str(bibtex_dir / "test.txt.gz")!r},
                       "-o", {str(report)!r}, "--inits", "zero,aop", "--labels", "0:5"]))
    """)
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("headstart experiment: error: drawing the experiment figures "
                                               "needs matplotlib"), err
    assert "pip install 'headstart[plot]'" in err[0]
    assert "training" not in out.stdout and not report.exists()


def test_write_report_without_matplotlib_raises_the_named_error():
    out = run_python("""
        import sys
        sys.modules["matplotlib"] = None
        from headstart.errors import MissingExtraError
        from headstart.experiment.figures import require_matplotlib
        try:
            require_matplotlib()
        except MissingExtraError as e:
            assert isinstance(e, ImportError)
            print(e)
    """)
    assert out.returncode == 0, out.stderr
    assert "pip install 'headstart[plot]'" in out.stdout



# --------------------------------------------------------------------------- numba settings
# A user's kernel of the shape SLP vectorises: eight independent accumulators fed by
# adjacent loads (like headstart's lane sweep).
USER_KERNEL = """
import numba

@numba.njit
def user_sweep(x, V, out):
    for i in range(x.size):
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
        for k in range(i, x.size):
            row = V[k]
            a0 += x[k] * row[0]
            a1 += x[k] * row[1]
            a2 += x[k] * row[2]
            a3 += x[k] * row[3]
            a4 += x[k] * row[4]
            a5 += x[k] * row[5]
            a6 += x[k] * row[6]
            a7 += x[k] * row[7]
        out[0, i] = a0; out[1, i] = a1; out[2, i] = a2; out[3, i] = a3
        out[4, i] = a4; out[5, i] = a5; out[6, i] = a6; out[7, i] = a7
"""

PACKED = r"""
import re

def packed_ops(dispatcher):
    # packed double multiply/add/fma instructions (SSE or AVX, any vector width)
    asm = "".join(dispatcher.inspect_asm().values())
    return len(re.findall(r"^\s*v?(?:mul|add|fmadd\d*|fmsub\d*)pd\s", asm, re.M))
"""


def _compile_in_fresh_process(tmp_path, body: str, env: dict | None = None) -> dict:
    """Run ``body`` in a new interpreter with an empty Numba cache (so that every kernel
    it calls is compiled there) and return the JSON it prints."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), **(env or {})}
    out = run_python(USER_KERNEL + PACKED + textwrap.dedent(body),
                     env={k: v for k, v in env.items() if v is not None})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _env_without_slp() -> dict:
    return {k: v for k, v in os.environ.items() if k != "NUMBA_SLP_VECTORIZE"}


def test_import_and_compiling_headstart_leave_environ_numba_config_and_warnings_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_SLP_VECTORIZE", raising=False)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)   # (compiled here, not loaded from a cache)
    got = _compile_in_fresh_process(tmp_path, """
        import json, os, sys, warnings
        import numpy as np
        import numba
        import scipy.sparse as sp          # scipy.sparse adds a warning filter of its own at import
        from numba.core import config, event

        def snapshot():
            return {"environ": dict(os.environ),
                    "config": {k: repr(v) for k, v in vars(config).items() if k.isupper()},
                    "filters": [repr(f) for f in warnings.filters]}

        before = snapshot()
        import headstart
        after_import = snapshot()

        # compile two of headstart's kernels here (the cache is empty): the lane sweep,
        # and the clock with its object-mode block, which makes numba warn under nogil
        from headstart.objective import erm, losses, regularizers
        from headstart.params import TrainParams
        defaults = TrainParams()
        problem = lambda X: erm.make_problem(X, 1.0, losses.make(defaults), regularizers.make(defaults), False)
        from headstart.solver.newton import now
        from headstart.training.kernel import lanes_scores
        X = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=0)
        P = problem(X)
        # the sweep's buffer is float32 (its products are exact in float64, see lanes_scores)
        V = np.random.default_rng(0).standard_normal((31, 16)).astype(np.float32)
        out = np.zeros((16, 40))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lanes_scores(P, V, out, True)
            now()
        # vector code, same sums in the same order as scipy's CSR product in float64: bit-identical
        V64 = V.astype(np.float64)
        exact = bool(np.array_equal(out, (X.astype(np.float64) @ V64[:30] + V64[30]).T))
        headstart_notes = [str(w.message) for w in caught if issubclass(w.category, numba.NumbaWarning)]
        after_compile = snapshot()

        # what the user's own kernels see afterwards
        class Seen(event.Listener):
            slp = []
            def on_start(self, ev):
                Seen.slp.append(config.SLP_VECTORIZE)
            def on_end(self, ev):
                pass
        with event.install_listener("numba:compile", Seen()):
            user_sweep(np.ones(50), np.ones((50, 8)), np.zeros((8, 50)))

        @numba.njit(nogil=True)
        def user_clock():
            with numba.objmode(t="f8"):
                t = 1.0
            return t
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            user_clock()
        user_notes = [str(w.message) for w in caught if issubclass(w.category, numba.NumbaWarning)]

        print(json.dumps({
            "import": [k for k in before if before[k] != after_import[k]],
            "compile": [k for k in before if before[k] != after_compile[k]],
            "slp_default": int(config.SLP_VECTORIZE), "slp_in_user_compile": Seen.slp,
            "user_packed": packed_ops(user_sweep), "headstart_packed": packed_ops(lanes_scores),
            "headstart_notes": headstart_notes, "user_notes": user_notes, "exact": exact}))
    """, env=_env_without_slp())
    assert got["import"] == [] and got["compile"] == []
    # numba's default (no SLP) for the user's function, during and after headstart's compiles
    assert got["slp_default"] == 0 and got["slp_in_user_compile"] and set(got["slp_in_user_compile"]) == {0}
    assert got["user_packed"] == 0
    # ... while headstart's sweep is vector code
    assert got["headstart_packed"] > 0 and got["exact"]
    # the object-mode note is silenced for headstart's clock only
    assert got["headstart_notes"] == []
    assert any("object mode won't allow parallel execution" in m for m in got["user_notes"])


def test_the_user_kernel_would_vectorise_with_slp(tmp_path):
    """The check above can fail: with SLP on for the process (what importing headstart
    used to do), the same user kernel is vector code."""
    got = _compile_in_fresh_process(tmp_path, """
        import json
        import numpy as np
        user_sweep(np.ones(50), np.ones((50, 8)), np.zeros((8, 50)))
        print(json.dumps({"user_packed": packed_ops(user_sweep)}))
    """, env={"NUMBA_SLP_VECTORIZE": "1"})
    assert got["user_packed"] > 0


def test_a_user_choice_of_numba_slp_vectorize_applies_to_headstart_too(tmp_path):
    got = _compile_in_fresh_process(tmp_path, """
        import json
        import numpy as np
        import scipy.sparse as sp
        import headstart
        from headstart.objective import erm, losses, regularizers
        from headstart.params import TrainParams
        defaults = TrainParams()
        problem = lambda X: erm.make_problem(X, 1.0, losses.make(defaults), regularizers.make(defaults), False)
        from headstart.training.kernel import lanes_scores
        X = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=0)
        lanes_scores(problem(X), np.ones((31, 16), dtype=np.float32), np.zeros((16, 40)), False)
        print(json.dumps({"headstart_packed": packed_ops(lanes_scores)}))
    """, env={"NUMBA_SLP_VECTORIZE": "0"})
    assert got["headstart_packed"] == 0


def test_cache_freshness_covers_the_whole_package(tmp_path, monkeypatch):
    """headstart's kernels are cached with a stamp that covers every source file of the
    package (a kernel holds the code of the functions it calls from other files); a
    function defined elsewhere keeps Numba's own locator and stamp."""
    script = tmp_path / "user_kernel.py"
    script.write_text("import numba\n\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n")
    code = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
import headstart
from headstart import _compile
from headstart.training import kernel
from numba.core import caching
import user_kernel
ours = caching.CompileResultCacheImpl(kernel.lanes_scores.py_func).locator
theirs = caching.CompileResultCacheImpl(user_kernel.f.py_func).locator
assert type(ours).__name__ == "_PackageInTree", type(ours)
assert ours.get_source_stamp()[1] == _compile.package_digest()
assert ours.get_cache_path() == caching.InTreeCacheLocator.from_function(
    kernel.lanes_scores.py_func, kernel.__file__).get_cache_path()
assert type(theirs) is caching.InTreeCacheLocator, type(theirs)
assert not _compile.in_package(str({str(script)!r}))
print("ok")
"""
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)   # (it would choose Numba's locator for that)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_package_digest_follows_any_file_content(tmp_path):
    from headstart._compile import package_digest

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    d0 = package_digest(tmp_path)
    assert package_digest(tmp_path) == d0
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    d1 = package_digest(tmp_path)
    assert d1 != d0
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    assert package_digest(tmp_path) == d0          # the contents, not the times


def _read_only_install(tmp_path) -> tuple[Path, dict]:
    """A copy of the package where Numba can write none of its cache places: every
    ``__pycache__`` is a file (the install's directories cannot be written), the user-wide
    cache directory is below a file (a home directory that cannot be written), no
    NUMBA_CACHE_DIR; TMPDIR is a writable directory of the test's."""
    import shutil

    site = tmp_path / "site"
    shutil.copytree(REPO / "headstart", site / "headstart", ignore=shutil.ignore_patterns("__pycache__"))
    for d in [site / "headstart", *(p for p in (site / "headstart").rglob("*") if p.is_dir())]:
        (d / "__pycache__").write_text("not a directory\n")
    (tmp_path / "home").write_text("not a directory\n")
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", HOME=str(tmp_path / "home"),
               XDG_CACHE_HOME=str(tmp_path / "home" / "cache"), TMPDIR=str(tmp_path / "tmp"))
    return site, env


_CACHE_PROBE = """
import os, numpy as np
import headstart
from headstart import _compile
from headstart._heapsort import heapsort
from numba.core import caching
loc = caching.CompileResultCacheImpl(heapsort.py_func).locator
keys = np.array([3, 1, 2], dtype=np.int64)
heapsort(keys, np.empty(0, np.int64), 0, 3)        # compiled here, and saved in the cache
assert sorted(keys) == [1, 2, 3]
print(type(loc).__name__, loc.get_cache_path())
"""


def test_a_read_only_install_caches_the_kernels_in_the_temporary_directory(tmp_path):
    """Numba raises 'cannot cache function' when it has nowhere to write a cache: that made
    ``import headstart`` fail on a read-only install whose user's home cannot be written.
    The kernels are then cached in a directory of the user's in TMPDIR, and a second process
    loads them from there."""
    site, env = _read_only_install(tmp_path)
    out = subprocess.run([sys.executable, "-c", _CACHE_PROBE], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path), timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    name, path = out.stdout.split()
    root = tmp_path / "tmp" / f"headstart-numba-cache-{os.getuid()}"
    assert name == "_PackageTemp" and Path(path).parent == root, out.stdout
    assert (root.stat().st_mode & 0o777) == 0o700
    saved = sorted(p.name for p in Path(path).iterdir())
    assert any(n.startswith("_heapsort.heapsort-") and n.endswith(".nbi") for n in saved), saved
    again = subprocess.run([sys.executable, "-c", _CACHE_PROBE + "print(sum(heapsort.stats.cache_hits.values()))"],
                           capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=600)
    assert again.returncode == 0, again.stderr
    assert int(again.stdout.split()[-1]) >= 1, again.stdout        # loaded, not compiled again


def test_a_temporary_cache_directory_open_to_others_is_not_used(tmp_path):
    """Numba unpickles what it loads from a cache: a shared directory that others can write
    to is passed over for one of the process's own, removed at exit."""
    site, env = _read_only_install(tmp_path)
    shared = tmp_path / "tmp" / f"headstart-numba-cache-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    out = subprocess.run([sys.executable, "-c", _CACHE_PROBE], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path), timeout=600)
    assert out.returncode == 0, out.stderr
    name, path = out.stdout.split()
    own = Path(path).parent
    assert name == "_PackageTemp" and own.parent == tmp_path / "tmp" and own != shared, out.stdout
    assert own.name.startswith("headstart-numba-cache-")
    assert not own.exists()                 # removed when the process ended
    assert list(shared.iterdir()) == []


def test_numba_lower_bound_is_the_oldest_numba_the_package_imports_with():
    """pyproject.toml allowed numba 0.59, with which ``import headstart`` failed inside
    numba's internals (0.59-0.61: locator classes of other names; 0.62-0.67: no
    ``caching._hash_source_file``): the bound is the version _compile checks."""
    import re
    import tomllib

    from headstart._compile import MIN_NUMBA

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (numba_dep,) = [d for d in deps if re.match(r"numba\b", d)]
    m = re.fullmatch(r"numba\s*>=\s*(\d+)\.(\d+)", numba_dep)
    assert m and (int(m.group(1)), int(m.group(2))) == MIN_NUMBA, numba_dep
    assert MIN_NUMBA >= (0, 68)


def test_too_old_a_numba_is_named_at_import():
    out = run_python("""
        import numba
        numba.__version__ = "0.67.0"        # as installed beside it (pip install --no-deps, conda)
        try:
            import headstart
        except ImportError as e:
            print(e)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("headstart needs numba >= 0.68, found numba 0.67.0: "
                                  "pip install 'numba>=0.68'"), out.stdout


def test_every_missing_extra_raises_the_named_error():
    """The text vectorizer (sklearn extra) and the pynndescent first stage (ann extra)
    raised ParameterError, which ``except ImportError`` (and MissingExtraError) cannot catch."""
    out = run_python("""
        import sys
        import numpy as np, scipy.sparse as sp
        sys.modules["sklearn"] = None
        sys.modules["pynndescent"] = None
        from headstart.errors import HeadstartError, MissingExtraError
        from headstart.io.text import _sklearn_vectorizer
        from headstart.shortlist.candidates import PyNNDescentIndex
        for make in (_sklearn_vectorizer, lambda: PyNNDescentIndex(sp.eye(4, format="csr"))):
            try:
                make()
            except MissingExtraError as e:
                assert isinstance(e, ImportError) and isinstance(e, HeadstartError)
                print(e)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "text data needs scikit-learn: pip install 'headstart[sklearn]'",
        "backend 'pynndescent' needs the pynndescent package: pip install 'headstart[ann]' "
        "(backend 'exact' needs no extra)"]


def test_the_temporary_cache_directory_is_made_only_for_headstart_kernels(tmp_path):
    """The last-resort locator declines other functions before it looks for its
    directory: a user's ``cache=True`` function (which Numba caches in place) made
    TMPDIR/headstart-numba-cache-UID appear."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "user_kernel.py").write_text("import numba\n\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n")
    code = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
import headstart
import user_kernel
assert user_kernel.f(1) == 2
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(REPO), TMPDIR=str(tmp_path / "tmp"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
    assert (tmp_path / "__pycache__").is_dir()          # cached where Numba caches it


def test_the_command_line_imports_only_what_the_named_command_needs():
    """`headstart train` builds the options of `train` only: the choices of other commands
    come from modules (shortlist, tuning, experiment) that cost every process ~2 MB;
    `--help` still lists every command, and a named command has all its options."""
    out = run_python("""
        import json, sys
        from headstart.cli.main import build_parser
        p = build_parser(["train", "x.txt", "-o", "m"])
        args = p.parse_args(["train", "x.txt", "-o", "m", "--init", "zero"])
        heavy = sorted(m for m in ("headstart.shortlist", "headstart.tuning", "headstart.experiment")
                       if m in sys.modules)
        full = build_parser(["shortlist", "x.txt", "-o", "s"]).parse_args(["shortlist", "x.txt", "-o", "s",
                                                                          "--backend", "exact"])
        print(json.dumps([heavy, args.init, full.backend]))
    """)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [[], "zero", "exact"]
