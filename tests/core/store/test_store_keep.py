"""A keep-running chat's turn on a host survives the store's crash recovery (ADR 0032): it is
found by ``kept_remote_turns`` and taken back by ``resume_turn`` (its stored events cleared: the
host replays the run from its start); other running turns are interrupted as before."""

from __future__ import annotations

from pathlib import Path

from tolaria.core.events import TextDelta
from tolaria.core.store.db import Store


def test_a_kept_remote_turn_is_left_for_the_reattach(db: Path) -> None:
    store = Store(db)
    kept = store.create_conversation("kept", "demo", "~/src", host="box")
    assert kept.keep_running is False
    assert store.set_conversation_keep_running(kept.id, True).keep_running is True
    plain = store.create_conversation("plain", "demo", "~/src", host="box")
    local = store.create_conversation("local", "demo", "/tmp")
    store.set_conversation_keep_running(local.id, True)  # no host: nothing to keep
    for chat, sid in ((kept, "ai-agent-stream-k"), (plain, "ai-agent-stream-p"),
                      (local, "ai-agent-stream-l")):
        store.start_turn(chat.id, sid, "demo", "go")
        store.append_event(TextDelta(sid, text="partial"))
    store.flush()
    store._conn.close()  # a crash: no Done, no close

    again = Store(db)
    try:
        status = {t.stream_id: t.status for c in (kept, plain, local) for t in again.turns(c.id)}
        assert status == {"ai-agent-stream-k": "running", "ai-agent-stream-p": "interrupted",
                          "ai-agent-stream-l": "interrupted"}
        assert [t.stream_id for t in again.kept_remote_turns()] == ["ai-agent-stream-k"]
        turn = again.resume_turn("ai-agent-stream-k")
        assert turn is not None and again.events(turn.id) == []
        again.append_event(TextDelta("ai-agent-stream-k", text="replayed"))
        again.flush()
        assert [e.text for e in again.events(turn.id)] == ["replayed"]  # type: ignore[attr-defined]
        assert again.kept_remote_turns() == [], "taken back: not offered twice"
        assert again.resume_turn("ai-agent-stream-p") is None
    finally:
        again.close()


def test_a_turn_another_process_streams_is_not_taken(db: Path) -> None:
    store = Store(db)
    chat = store.create_conversation("kept", "demo", "~/src", host="box")
    store.set_conversation_keep_running(chat.id, True)
    store.start_turn(chat.id, "ai-agent-stream-elsewhere", "demo", "go")
    store.flush()
    store._conn.close()
    other = Store(db, live_elsewhere=["ai-agent-stream-elsewhere"])
    try:
        assert other.kept_remote_turns() == []
    finally:
        other._conn.close()
    alone = Store(db)
    try:
        assert [t.stream_id for t in alone.kept_remote_turns()] == ["ai-agent-stream-elsewhere"]
    finally:
        alone.close()
