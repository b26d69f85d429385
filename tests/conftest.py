"""Shared test fixtures (keep this file small)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIBTEX = REPO / "data" / "bibtex"
#: the logger of the trainers' reports (training.chunks.report_problems)
REPORT_LOG = "headstart.training.trainer"


@pytest.fixture(scope="session")
def bibtex_dir() -> Path:
    """The bibtex data shipped in data/bibtex (train.txt.gz, test.txt.gz)."""
    if not (BIBTEX / "train.txt.gz").is_file():
        pytest.skip("data/bibtex is not present")
    return BIBTEX


@pytest.fixture
def trainer_log(caplog):
    """caplog for the trainers' reports (the CLI turns propagation of 'headstart' off)."""
    top = logging.getLogger("headstart")
    old = top.propagate
    top.propagate = True
    caplog.set_level(logging.INFO, logger=REPORT_LOG)
    yield caplog
    top.propagate = old


def pytest_xdist_auto_num_workers(config):
    """``make test`` runs ``-n auto``: one worker per core this process may use (a
    container's CPU quota, a batch job's cores; headstart._threads.usable_cores), at most
    4 -- each worker holds its own compiled kernels and data (~0.5-1 GB)."""
    from headstart._threads import usable_cores

    return min(4, usable_cores())


# a test that hangs (pytest-timeout ends its xdist worker) or crashes its worker is not
# handed to the next worker again (tests/_rerun_guard.py)
from _rerun_guard import pytest_runtest_protocol, pytest_runtest_setup, pytest_sessionfinish  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _no_ctrl_c_left_over():
    """A Ctrl-C the command line remembered (``_threads.INTERRUPTS``, set by its SIGINT
    handler or by a test) ends with its test: a test that failed half-way through would
    otherwise leave it set, and every later test on that worker would stop with a
    KeyboardInterrupt where the library checks for one."""
    yield
    threads = sys.modules.get("headstart._threads")    # (imported only where a test did)
    if threads is not None:
        threads.INTERRUPTS.seen = False
