"""A test that hangs is reported once, not run again on every replacement worker."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("xdist")
pytest.importorskip("pytest_timeout")

HERE = Path(__file__).resolve().parent


def test_a_test_that_hangs_its_worker_is_not_handed_to_the_next_worker(tmp_path):
    """``--dist loadfile`` with pytest-timeout's thread method (as ``make test`` runs):
    the timeout ends the worker process, and xdist gave the file's unfinished tests --
    the hung one included -- to the next worker, where it hung again, up to
    --max-worker-restart times (9 runs with 2 workers: 9 x 15 minutes, past CI's limit;
    helper-76).  Now it runs once, fails as a crash, and the file's other tests run."""
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 2\ntimeout_method = thread\n")
    (tmp_path / "conftest.py").write_text(
        "from _rerun_guard import pytest_runtest_protocol, pytest_runtest_setup, pytest_sessionfinish  # noqa\n")
    (tmp_path / "test_hangs.py").write_text(textwrap.dedent("""
        import os, time

        def test_a():
            pass

        def test_hang():
            with open("starts.log", "a") as fh:
                fh.write(f"{os.getpid()}\\n")
            time.sleep(600)

        def test_c():
            pass
    """))
    (tmp_path / "test_other.py").write_text("def test_x():\n    pass\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                        "loadfile", "-rs", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    out = r.stdout + r.stderr
    starts = (tmp_path / "starts.log").read_text().split()
    assert len(starts) == 1, f"the hung test ran {len(starts)} times:\n{out[-3000:]}"
    assert "crashed while running 'test_hangs.py::test_hang'" in out, out[-3000:]
    assert "1 failed, 3 passed, 1 skipped" in out, out[-3000:]
    assert "took its worker process down earlier in this run" in out, out[-3000:]
