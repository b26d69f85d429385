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

