"""A chat knows where it was started (the window or ``tolaria run``), for the sidebar's badge."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from tolaria.core.store.db import ORIGIN_COMMAND_LINE, ORIGIN_WINDOW, Store
from tolaria.core.store.schema import MIGRATIONS


def test_new_chats_keep_their_origin(tmp_path: Path) -> None:
    with closing(Store(tmp_path / "s.sqlite3")) as store:
        window = store.create_conversation("in the window", "demo", None)
        headless = store.create_conversation("from a terminal", "demo", None,
                                             origin=ORIGIN_COMMAND_LINE)
        assert window.origin == ORIGIN_WINDOW and headless.origin == ORIGIN_COMMAND_LINE
    with closing(Store(tmp_path / "s.sqlite3")) as store:  # read back from the file
        by_id = {c.id: c.origin for c in store.list_conversations()}
        assert by_id == {window.id: ORIGIN_WINDOW, headless.id: ORIGIN_COMMAND_LINE}
        fetched = store.get_conversation(headless.id)
        assert fetched is not None and fetched.origin == ORIGIN_COMMAND_LINE


#: The schema version before chats had an origin (migration 3 added it).
_BEFORE_ORIGIN = 2


def test_chats_of_an_older_store_come_from_the_window(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite3"
    with closing(sqlite3.connect(db)) as conn:
        for migration in MIGRATIONS[:_BEFORE_ORIGIN]:
            for statement in migration:
                conn.execute(statement)
        conn.execute("INSERT INTO conversations (title, agent, created_at, updated_at)"
                     " VALUES ('old', 'demo', 1, 1)")
        conn.execute(f"PRAGMA user_version = {_BEFORE_ORIGIN}")
        conn.commit()
    with closing(Store(db)) as store:
        (old,) = store.list_conversations()
        assert old.title == "old" and old.origin == ORIGIN_WINDOW
