"""Shared test fixtures (keep this file small)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIBTEX = REPO / "data" / "bibtex"


@pytest.fixture(scope="session")
def bibtex_dir() -> Path:
    """The bibtex data shipped in data/bibtex (train.txt.gz, test.txt.gz)."""
    if not (BIBTEX / "train.txt.gz").is_file():
        pytest.skip("data/bibtex is not present")
    return BIBTEX
