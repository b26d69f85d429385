"""What the source distribution and the wheel hold, built from this checkout's tracked
files with setuptools' own build backend (what ``python -m build`` and ``pip wheel`` call)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _setuptools_release() -> tuple[int, ...]:
    try:
        import setuptools
    except ImportError:
        return ()
    return tuple(int(x) for x in setuptools.__version__.split(".")[:2] if x.isdigit())


# pyproject's SPDX license (PEP 639) is read from setuptools 77 on; an older one refuses
# the whole pyproject.toml, so say why instead of failing on its validation message.
# The test extra requires 77 (pip install -e '.[test]', as the Makefile does).
pytestmark = pytest.mark.skipif(_setuptools_release() < (77,),
                                reason="builds with the installed setuptools, older than the 77 pyproject.toml needs")


def _tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, timeout=60)
    except OSError:
        out = None
    if out is None or out.returncode != 0:
        pytest.skip("not a git checkout")
    return [p for p in out.stdout.split("\0") if p]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the tracked files (a build writes headstart.egg-info beside the sources)."""
    src = tmp_path_factory.mktemp("src")
    for rel in _tracked():
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    return src


def _build(source: Path, dist: Path, what: str) -> subprocess.CompletedProcess:
    # numba made unimportable: a build reads headstart's version from the source
    # (pyproject's dynamic version), it must not import the package and its dependencies
    code = (f"import sys\nsys.modules['numba'] = None\nfrom setuptools import build_meta as b\n"
            f"print(b.build_{what}(sys.argv[1]))\n")
    return subprocess.run([sys.executable, "-c", code, str(dist)], cwd=source, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def sdist(source, tmp_path_factory) -> set[str]:
    dist = tmp_path_factory.mktemp("sdist")
    out = _build(source, dist, "sdist")
    assert out.returncode == 0, out.stderr
    name = out.stdout.split()[-1]
    top = name[: -len(".tar.gz")] + "/"
    with tarfile.open(dist / name) as t:
        return {m.name[len(top):] for m in t.getmembers() if m.isfile()}


@pytest.fixture(scope="module")
def wheel(source, tmp_path_factory) -> dict[str, str]:
    """The wheel's file names, each with its text for the dist-info's small files."""
    dist = tmp_path_factory.mktemp("wheel")
    out = _build(source, dist, "wheel")
    assert out.returncode == 0, out.stderr
    with zipfile.ZipFile(dist / out.stdout.split()[-1]) as z:
        return {n: z.read(n).decode() if ".dist-info/" in n else "" for n in z.namelist()}


def test_the_sdist_holds_what_its_tests_and_demo_read(sdist):
    """The sdist held tests/test_*.py (setuptools' default) without conftest.py, the
    helper modules they import and the data, benchmarks, fuzz corpus and CI script they
    read: its tests could not run.  It now holds them, the Makefile and the docs that the
    README and ``--help`` cite."""
    wanted = {p for p in _tracked()
              if p.startswith(("headstart/", "tests/", "data/", "benchmarks/", "fuzz/"))
              or p in {"README.md", "LICENSE", "pyproject.toml", "Makefile", ".ci/run", "_headstart_command.py"}
              or (p.startswith("docs/") and p.count("/") == 1 and p.endswith(".md"))}
    assert wanted - sdist == set()
    assert not [n for n in sdist if "__pycache__" in n or n.endswith((".pyc", ".nbi", ".nbc"))]


def test_the_wheel_holds_the_package_and_the_command_only(wheel):
    """The package, and beside it the command's entry point, which imports the package
    inside its function (a Ctrl-C while the package loads is the command's one-line
    interrupt, not a traceback: test_cli)."""
    names = wheel
    package = {n for n in names if not n.startswith("headstart-")}
    # py.typed: the PEP 561 marker, without which type checkers skip the package's hints
    assert package == {p for p in _tracked() if p.startswith("headstart/") and p.endswith((".py", "/py.typed"))} \
        | {"_headstart_command.py"}
    assert "headstart/py.typed" in package
    assert _dist_info(wheel, "entry_points.txt").split() == ["[console_scripts]", "headstart", "=",
                                                            "_headstart_command:main"]


def _dist_info(wheel: dict[str, str], name: str) -> str:
    [text] = [t for n, t in wheel.items() if n.endswith(".dist-info/" + name)]
    return text


def test_the_wheel_states_its_license_as_spdx_and_ships_the_file(wheel):
    """pyproject's license was the table {text = "MIT"}, which setuptools deprecates; now
    the SPDX expression, with LICENSE in the dist-info (PEP 639)."""
    metadata = _dist_info(wheel, "METADATA").splitlines()
    assert "License-Expression: MIT" in metadata
    assert "License-File: LICENSE" in metadata
    assert not [line for line in metadata if line.startswith("License:")]
    assert _dist_info(wheel, "licenses/LICENSE") == (REPO / "LICENSE").read_text()


def test_the_wheel_version_is_the_package_version(wheel):
    """The version is stated once, in headstart/__init__.py, and pyproject.toml reads it."""
    import ast

    tree = ast.parse((REPO / "headstart" / "__init__.py").read_text())
    [version] = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__version__"]]
    assert f"Version: {version}" in _dist_info(wheel, "METADATA").splitlines()
