"""A chat's host (issue 25): kept with the chat, none for the chats of an older store."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tolaria.core.store.db import Store
from tolaria.core.store.schema import MIGRATIONS


def test_a_chat_keeps_its_host_and_folder_there(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with closing(Store(path)) as store:
        local = store.create_conversation("here", "demo", "/tmp")
        remote = store.create_conversation("there", "demo", "~/src", host="devbox")
        assert (local.host, remote.host) == (None, "devbox")
        moved = store.set_conversation_host(local.id, "exec:docker exec -i box", "/work")
        assert (moved.host, moved.cwd) == ("exec:docker exec -i box", "/work")
        back = store.set_conversation_host(remote.id, None, None)
        assert (back.host, back.cwd) == (None, None)
        with pytest.raises(KeyError):
            store.set_conversation_host(9999, "devbox", None)
    with closing(Store(path)) as store:  # read back from the file
        hosts = {c.title: (c.host, c.cwd) for c in store.list_conversations()}
        assert hosts == {"here": ("exec:docker exec -i box", "/work"), "there": (None, None)}


def test_chats_of_an_older_store_run_here(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite3"
    before = next(i for i, m in enumerate(MIGRATIONS)  # the schema before the host came
                  if any("ADD COLUMN host" in statement for statement in m))
    with closing(sqlite3.connect(db)) as conn:
        for migration in MIGRATIONS[:before]:
            for statement in migration:
                conn.execute(statement)
        conn.execute("INSERT INTO conversations (title, agent, cwd, created_at, updated_at)"
                     " VALUES ('old', 'demo', '/srv', 1, 1)")
        conn.execute(f"PRAGMA user_version = {before}")
        conn.commit()
    with closing(Store(db)) as store:
        (old,) = store.list_conversations()
        assert (old.title, old.cwd, old.host) == ("old", "/srv", None)
