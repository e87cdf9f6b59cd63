"""Opening the window's store for a subcommand (``tolaria chats``, ``changes``, ``checkpoints``...),
saying in one line why it cannot be opened."""

from __future__ import annotations

import sqlite3
import sys

from tolaria.chats.saved_runs import open_store
from tolaria.core.store.db import Store
from tolaria.support.paths import access_problem

#: Exit codes when the store cannot be opened: the user must fix their data folder (a read-only
#: or foreign folder: bad input), or it failed otherwise (a damaged database).
EXIT_ACCESS, EXIT_FAILED = 2, 1


def open_store_or_say() -> Store | int:
    """The store, or (after one line on stderr saying why) the exit code to return."""
    try:
        return open_store()
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        problem = access_problem(exc)
        print(f"tolaria: {problem or f'cannot open the store: {exc}'}", file=sys.stderr)
        return EXIT_ACCESS if problem else EXIT_FAILED
