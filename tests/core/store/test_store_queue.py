"""Queued messages in the store (tolaria/core/store/queue.py): order, edits, pause, and that a
message survives the writer being SIGKILLed right after it was queued."""

from __future__ import annotations

import signal
import sqlite3
from contextlib import closing
from pathlib import Path

from helpers import python_child, sigkill

from tolaria.core.store.db import SCHEMA_VERSION, Store
from tolaria.core.store.queue import PAUSED_AFTER_CRASH, PAUSED_BY_USER
from tolaria.core.store.schema import MIGRATIONS


def texts(store: Store, conversation_id: int) -> list[str]:
    return [m.text for m in store.queued(conversation_id)]


def test_queue_keeps_order_moves_edits_and_removes(store: Store) -> None:
    conv = store.create_conversation("c", "demo", None)
    other = store.create_conversation("o", "demo", None)
    a, b, c = (store.queue_add(conv.id, t) for t in ("a", "b", "c"))
    assert a is not None and b is not None and c is not None
    store.queue_add(other.id, "elsewhere")
    assert texts(store, conv.id) == ["a", "b", "c"]
    assert store.queue_move(conv.id, c.id, 0)
    assert texts(store, conv.id) == ["c", "a", "b"]
    assert store.queue_move(conv.id, c.id, 99)  # clamped to the end
    assert texts(store, conv.id) == ["a", "b", "c"]
    assert not store.queue_move(conv.id, 12345, 0)
    edited = store.queue_edit(conv.id, b.id, "b, edited")
    assert edited is not None and edited.id == b.id and edited.text == "b, edited"
    assert texts(store, conv.id) == ["a", "b, edited", "c"], "an edit keeps the position"
    assert store.queue_edit(other.id, b.id, "not yours") is None
    assert [m.text for m in store.queue_remove(conv.id, [a.id, c.id, 999])] == ["a", "c"]
    assert texts(store, conv.id) == ["b, edited"]
    assert texts(store, other.id) == ["elsewhere"]
    d = store.queue_add(conv.id, "d")
    assert d is not None
    assert texts(store, conv.id) == ["b, edited", "d"], "a new message goes last"
    assert store.queued_conversations() == [conv.id, other.id]
    assert store.queue_add(conv.id + 1000, "no chat") is None


def test_pause_flag_with_reason_and_cascade_on_delete(db: Path) -> None:
    with closing(Store(db)) as store:
        conv = store.create_conversation("c", "demo", None)
        assert store.queue_state(conv.id).paused is False
        store.queue_add(conv.id, "later")
        store.set_queue_paused(conv.id, True, PAUSED_AFTER_CRASH)
        store.set_queue_paused(conv.id + 1000, True)  # a deleted chat: nothing, no error
    with closing(Store(db)) as store:
        state = store.queue_state(conv.id)
        assert (state.paused, state.reason) == (True, PAUSED_AFTER_CRASH)
        assert [m.text for m in state.messages] == ["later"]
        store.set_queue_paused(conv.id, False)
        assert store.queue_state(conv.id).reason is None
        store.set_queue_paused(conv.id, True, PAUSED_BY_USER)
        store.delete_conversation(conv.id)
        assert store.queued(conv.id) == [] and store.queue_state(conv.id).paused is False
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM queued_messages").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM queue_state").fetchone()[0] == 0


def test_a_version_2_database_gains_the_queue(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db)) as conn:
        for migration in MIGRATIONS[:2]:
            for statement in migration:
                conn.execute(statement)
        conn.execute("INSERT INTO conversations (title, agent, created_at, updated_at)"
                     " VALUES ('old', 'demo', 1, 1)")
        conn.execute("PRAGMA user_version = 2")
        conn.commit()
    with closing(Store(db)) as store:
        (conv,) = store.list_conversations()
        assert store.queue_add(conv.id, "kept") is not None
        assert texts(store, conv.id) == ["kept"]
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


#: Queues one message, says so, then waits to be killed (no close, no flush).
CHILD = r"""
import sys, time
from pathlib import Path
from tolaria.core.store.db import Store

store = Store(Path(sys.argv[1]), flush_interval=3600)
conversation = store.create_conversation("crash", "fake", None)
store.queue_add(conversation.id, "typed just before the crash")
print(conversation.id, flush=True)
time.sleep(300)
"""


def test_a_queued_message_survives_a_sigkill_right_after_it_was_typed(db: Path) -> None:
    with python_child(CHILD, str(db)) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"child died first: {proc.communicate()[1]}"
        sigkill(proc)  # at once: no flush interval passes
    assert proc.returncode == -signal.SIGKILL
    with closing(Store(db)) as store:
        assert texts(store, int(line)) == ["typed just before the crash"]
