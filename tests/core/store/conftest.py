"""The store fixtures of tests/core/store: a database path in the test's own folder, and a
Store opened on it (closed after the test)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tolaria.core.store.db import Store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "tolaria.sqlite3"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    with closing(Store(db)) as opened:
        yield opened
