"""Fixtures of the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """An empty working folder for the agent (``cwd`` of the ``tolaria`` process)."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder
