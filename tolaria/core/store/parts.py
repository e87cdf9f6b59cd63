"""What the parts of ``Store`` mixed in from other modules (markers, the queue) rely on: the
connection, its lock, transactions and the store's clock, all provided by ``Store`` itself."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager
from typing import Any


class StorePart:
    """Base of a mixin of ``Store`` (tolaria/core/store/db.py), which overrides these."""

    _conn: sqlite3.Connection
    _db_lock: threading.RLock

    def _tx(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _tick(self) -> float:
        raise NotImplementedError

    def _query(self, sql: str, *args: object, flush: bool = False) -> list[Any]:
        raise NotImplementedError
