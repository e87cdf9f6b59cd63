"""The conversation store on real SQLite files: conversations, turns and their events, reopen and
interruption, markers. Volume, exactness and a real crash: test_store_volume.py."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
from core.store.storehelpers import SID, raw_count, squash
from helpers import text_of

from tolaria.core.events import (
    Diagnostic,
    Done,
    Error,
    Event,
    Init,
    Survivor,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    Usage,
)
from tolaria.core.store.db import (
    DEFAULT_PATH,
    SCHEMA_VERSION,
    Store,
    default_db_path,
)

# conversations


def test_default_path_is_in_the_data_folder_of_tolaria_home(tolaria_home: Path) -> None:
    assert DEFAULT_PATH() == default_db_path() == tolaria_home / "data" / "tolaria.sqlite3"
    with closing(Store()) as store:
        assert store.path == DEFAULT_PATH()
        store.create_conversation("hello", "claude", None)
    assert DEFAULT_PATH().is_file()
    with closing(sqlite3.connect(DEFAULT_PATH())) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_conversation_crud(store: Store) -> None:
    a = store.create_conversation("First", "claude", "/tmp/a")
    b = store.create_conversation("Second", "gemini", None)
    assert store.get_conversation(a.id) == a
    assert (a.title, a.agent, a.cwd, a.agent_session_id) == ("First", "claude", "/tmp/a", None)
    assert a.created_at == a.updated_at
    assert store.get_conversation(9999) is None
    assert [c.id for c in store.list_conversations()] == [b.id, a.id]

    renamed = store.rename_conversation(a.id, "Renamed")
    assert renamed.title == "Renamed"
    assert store.get_conversation(a.id) == renamed
    updated = store.update_conversation(a.id, agent="codex", agent_session_id="sess-1")
    assert (updated.title, updated.agent, updated.cwd) == ("Renamed", "codex", "/tmp/a")
    assert updated.agent_session_id == "sess-1"
    assert store.update_conversation(a.id, cwd="/srv").cwd == "/srv"
    assert store.update_conversation(a.id) == store.get_conversation(a.id)
    with pytest.raises(KeyError):
        store.rename_conversation(9999, "nope")
    with pytest.raises(KeyError):
        store.update_conversation(9999, agent="x")

    store.delete_conversation(b.id)
    store.delete_conversation(b.id)  # already gone: no error
    assert store.get_conversation(b.id) is None
    assert [c.id for c in store.list_conversations()] == [a.id]


def test_turn_activity_moves_a_conversation_to_the_top(store: Store) -> None:
    a = store.create_conversation("a", "claude", None)
    b = store.create_conversation("b", "claude", None)
    assert [c.id for c in store.list_conversations()] == [b.id, a.id]
    store.start_turn(a.id, SID, "claude", "hi")
    assert [c.id for c in store.list_conversations()] == [a.id, b.id]
    started = store.get_conversation(a.id)
    assert started is not None
    assert started.updated_at > a.updated_at
    store.append_event(Done(SID))
    finished = store.get_conversation(a.id)
    assert finished is not None
    assert finished.updated_at > started.updated_at


# turns and events


def full_run(stream_id: str) -> list[Event]:
    return [
        Init(stream_id, agent="claude", session_id="sess-42"),
        ThinkingDelta(stream_id, "let me "),
        ThinkingDelta(stream_id, "think"),
        TextDelta(stream_id, "Hel"),
        TextDelta(stream_id, ""),
        TextDelta(stream_id, "lo, "),
        ToolStart(stream_id, tool_id="t1", name="Bash", input={"command": "ls", "n": [1, 2.5]}),
        Diagnostic(stream_id, source="stderr", message="warning: ünïcode"),
        ToolDone(stream_id, tool_id="t1", output="a\nb\n", is_error=False),
        ToolDone(stream_id, tool_id="t2", output="boom", is_error=True),
        TextDelta(stream_id, "world 🌍"),
        Error(stream_id, message="rate limited, retrying"),
        Usage(stream_id, input_tokens=120, output_tokens=45, cost_usd=0.0123),
        Done(stream_id, stop_reason="end_turn", exit_code=0, duration_ms=1234,
             survivors=(Survivor(pid=4242, name="sleep"), Survivor(pid=4243, name="node"))),
    ]


def test_turn_and_events_round_trip_across_reopen(db: Path) -> None:
    run = full_run(SID)
    with closing(Store(db)) as store:
        conv = store.create_conversation("c", "claude", "/w")
        turn = store.start_turn(conv.id, SID, "claude", "say hello")
        assert turn.status == "running"
        assert store.turn_by_stream(SID) == turn
        for event in run:
            store.append_event(event)
        done_at = time.time()
    with closing(Store(db)) as store:
        (stored,) = store.turns(conv.id)
        assert stored.id == turn.id
        assert (stored.stream_id, stored.agent, stored.prompt) == (SID, "claude", "say hello")
        assert (stored.status, stored.stop_reason) == ("completed", "end_turn")
        assert stored.duration_ms == 1234
        assert stored.finished_at is not None
        assert stored.started_at <= stored.finished_at <= done_at
        assert stored.session_id == "sess-42"
        assert (stored.input_tokens, stored.output_tokens, stored.cost_usd) == (120, 45, 0.0123)
        conversation = store.get_conversation(conv.id)
        assert conversation is not None
        assert conversation.agent_session_id == "sess-42"
        events = store.events(turn.id)
        assert squash(events) == squash(run)
        assert text_of(events) == "Hello, world 🌍"
        assert events[-1] == run[-1]  # survivors and all Done fields intact


def test_reads_see_buffered_events_of_a_running_turn(db: Path) -> None:
    with closing(Store(db, flush_interval=60)) as store:  # the flusher never fires here
        conv = store.create_conversation("c", "claude", None)
        turn = store.start_turn(conv.id, SID, "claude", "p")
        store.append_event(TextDelta(SID, "partial"))
        assert text_of(store.events(turn.id)) == "partial"
        assert store.turns(conv.id)[0].status == "running"


@pytest.mark.parametrize(
    ("stop_reason", "status"),
    [("end_turn", "completed"), ("cancelled", "cancelled"), ("error", "failed"),
     ("max_iterations", "failed"), ("something-new", "failed")],
)
def test_done_sets_status_and_keeps_partial_text(
    store: Store, stop_reason: str, status: str
) -> None:
    conv = store.create_conversation("c", "claude", None)
    turn = store.start_turn(conv.id, SID, "claude", "p")
    store.append_event(TextDelta(SID, "partial "))
    store.append_event(TextDelta(SID, "answer"))
    store.append_event(Done(SID, stop_reason=stop_reason, exit_code=None, duration_ms=77))
    stored = store.turn_by_stream(SID)
    assert stored is not None
    assert (stored.status, stored.stop_reason, stored.duration_ms) == (status, stop_reason, 77)
    assert text_of(store.events(turn.id)) == "partial answer"


def test_done_is_durable_before_append_returns(db: Path) -> None:
    with closing(Store(db, flush_interval=60)) as store:
        conv = store.create_conversation("c", "claude", None)
        store.start_turn(conv.id, SID, "claude", "p")
        store.append_event(TextDelta(SID, "before done"))
        store.append_event(Done(SID, stop_reason="cancelled"))
        # Another connection (as after a crash) already sees the finished turn and its text.
        with closing(sqlite3.connect(db)) as conn:
            status = conn.execute("SELECT status FROM turns WHERE stream_id = ?", (SID,))
            assert status.fetchone()[0] == "cancelled"
            kinds = [k for (k,) in conn.execute("SELECT kind FROM events ORDER BY seq")]
            assert kinds == ["text_delta", "done"]


def test_events_of_unknown_or_finished_streams_are_ignored(db: Path) -> None:
    with closing(Store(db)) as store:
        store.append_event(TextDelta("ai-agent-stream-unknown", "lost"))
        store.append_event(Done("ai-agent-stream-unknown"))
        conv = store.create_conversation("c", "claude", None)
        turn = store.start_turn(conv.id, SID, "claude", "p")
        store.append_event(TextDelta(SID, "kept"))
        store.append_event(Done(SID))
        store.append_event(TextDelta(SID, "after done"))
        store.append_event(Done(SID, stop_reason="error"))
        store.flush()
        assert text_of(store.events(turn.id)) == "kept"
        stored = store.turn_by_stream(SID)
        assert stored is not None
        assert stored.status == "completed"
        assert store.turn_by_stream("ai-agent-stream-unknown") is None
    assert raw_count(db, "events") == 2
    with closing(Store(db)) as store:  # a reopened store does not know the stream either
        store.append_event(TextDelta(SID, "late"))
        assert text_of(store.events(turn.id)) == "kept"


def test_start_turn_rejects_unknown_conversation_and_reused_stream(store: Store) -> None:
    with pytest.raises(KeyError):
        store.start_turn(9999, SID, "claude", "p")
    conv = store.create_conversation("c", "claude", None)
    store.start_turn(conv.id, SID, "claude", "p")
    with pytest.raises(ValueError, match="already has a turn"):
        store.start_turn(conv.id, SID, "claude", "again")
    assert len(store.turns(conv.id)) == 1


def test_turns_are_oldest_first_per_conversation(store: Store) -> None:
    a = store.create_conversation("a", "claude", None)
    b = store.create_conversation("b", "claude", None)
    for i in range(3):
        store.start_turn(a.id, f"{SID}-a{i}", "claude", f"a{i}")
        store.start_turn(b.id, f"{SID}-b{i}", "claude", f"b{i}")
    assert [t.prompt for t in store.turns(a.id)] == ["a0", "a1", "a2"]
    assert [t.prompt for t in store.turns(b.id)] == ["b0", "b1", "b2"]
    assert store.turns(9999) == []


def test_init_and_usage_update_turn_and_conversation(store: Store) -> None:
    conv = store.create_conversation("c", "claude", None)
    store.update_conversation(conv.id, agent_session_id="old-session")
    store.start_turn(conv.id, SID, "claude", "p")
    store.append_event(Init(SID, agent="claude", session_id=None))
    turn = store.turn_by_stream(SID)
    assert turn is not None
    assert turn.session_id is None
    conversation = store.get_conversation(conv.id)
    assert conversation is not None
    assert conversation.agent_session_id == "old-session"  # an Init without id keeps the old one

    store.append_event(Init(SID, agent="claude", session_id="new-session"))
    store.append_event(Usage(SID, input_tokens=10))
    store.append_event(Usage(SID, output_tokens=3, cost_usd=0.5))
    turn = store.turn_by_stream(SID)
    assert turn is not None
    assert turn.session_id == "new-session"
    assert (turn.input_tokens, turn.output_tokens, turn.cost_usd) == (10, 3, 0.5)
    conversation = store.get_conversation(conv.id)
    assert conversation is not None
    assert conversation.agent_session_id == "new-session"


def test_delete_conversation_cascades(db: Path) -> None:
    with closing(Store(db)) as store:
        keep = store.create_conversation("keep", "claude", None)
        gone = store.create_conversation("gone", "claude", None)
        for conv, sid in ((keep, f"{SID}-keep"), (gone, f"{SID}-gone")):
            store.start_turn(conv.id, sid, "claude", "p")
            for event in full_run(sid):
                store.append_event(event)
        running = store.start_turn(gone.id, f"{SID}-running", "claude", "p")
        store.append_event(TextDelta(running.stream_id, "buffered, never flushed"))
        store.delete_conversation(gone.id)
        # Events of the deleted running turn are dropped, not written against a missing turn.
        store.append_event(TextDelta(running.stream_id, "late"))
        store.append_event(Done(running.stream_id))
        store.flush()
        assert store.turn_by_stream(f"{SID}-gone") is None
        assert store.events(running.id) == []
        assert [t.stream_id for t in store.turns(keep.id)] == [f"{SID}-keep"]
    assert raw_count(db, "conversations") == 1
    assert raw_count(db, "turns") == 1
    with closing(sqlite3.connect(db)) as conn:
        orphans = conn.execute(
            "SELECT count(*) FROM events WHERE turn_id NOT IN (SELECT id FROM turns)"
        ).fetchone()[0]
        assert orphans == 0
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_mark_interrupted_keeps_partial_output(store: Store) -> None:
    conv = store.create_conversation("c", "claude", None)
    turn = store.start_turn(conv.id, SID, "claude", "p")
    store.append_event(TextDelta(SID, "half an ans"))
    last_event_at = time.time()
    time.sleep(0.05)
    store.mark_interrupted(SID)
    stored = store.turn_by_stream(SID)
    assert stored is not None
    assert (stored.status, stored.stop_reason) == ("interrupted", "interrupted")
    assert stored.finished_at is not None
    assert stored.finished_at <= last_event_at  # the time of the last event, not of the call
    assert stored.duration_ms is not None
    assert stored.duration_ms >= 0
    store.append_event(TextDelta(SID, "wer"))  # the turn is over: ignored
    store.mark_interrupted(SID)  # no-op
    store.mark_interrupted("ai-agent-stream-unknown")  # no-op
    assert store.turn_by_stream(SID) == stored
    assert text_of(store.events(turn.id)) == "half an ans"


def test_mark_interrupted_does_not_touch_a_finished_turn(store: Store) -> None:
    conv = store.create_conversation("c", "claude", None)
    store.start_turn(conv.id, SID, "claude", "p")
    store.append_event(Done(SID, stop_reason="cancelled"))
    store.mark_interrupted(SID)
    turn = store.turn_by_stream(SID)
    assert turn is not None
    assert turn.status == "cancelled"


def test_reopen_interrupts_running_turns_and_is_idempotent(db: Path) -> None:
    with closing(Store(db)) as store:
        conv = store.create_conversation("c", "claude", None)
        silent = store.start_turn(conv.id, f"{SID}-silent", "claude", "no output yet")
        talking = store.start_turn(conv.id, SID, "claude", "p")
        store.append_event(TextDelta(SID, "partial"))
        store.start_turn(conv.id, f"{SID}-done", "claude", "p")
        store.append_event(Done(f"{SID}-done"))
    # Closed without a Done for two turns: as if the app had died mid-run.
    before = time.time()
    with closing(Store(db)) as store:
        first = store.turns(conv.id)
        assert [t.status for t in first] == ["interrupted", "interrupted", "completed"]
        assert [t.stop_reason for t in first] == ["interrupted", "interrupted", "end_turn"]
        assert first[0].finished_at is not None
        assert first[0].finished_at >= before  # no event at all: "now"
        assert first[1].finished_at is not None
        assert first[1].finished_at < before  # the time of its last event
        assert text_of(store.events(talking.id)) == "partial"
        assert store.events(silent.id) == []
        store.append_event(TextDelta(SID, "ignored"))
    for _ in range(2):
        with closing(Store(db)) as store:
            assert store.turns(conv.id) == first
            assert text_of(store.events(talking.id)) == "partial"
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_newer_schema_is_refused(db: Path) -> None:
    Store(db).close()
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="schema version"):
        Store(db)


def test_close_is_idempotent_and_later_appends_are_ignored(db: Path) -> None:
    store = Store(db)
    conv = store.create_conversation("c", "claude", None)
    store.start_turn(conv.id, SID, "claude", "p")
    store.append_event(TextDelta(SID, "flushed by close"))
    store.close()
    store.close()
    store.append_event(TextDelta(SID, "after close"))
    with closing(Store(db)) as reopened:
        turn = reopened.turn_by_stream(SID)
        assert turn is not None
        assert text_of(reopened.events(turn.id)) == "flushed by close"


def test_flusher_writes_in_the_background(db: Path) -> None:
    with closing(Store(db, flush_interval=0.02)) as store:
        conv = store.create_conversation("c", "claude", None)
        store.start_turn(conv.id, SID, "claude", "p")
        store.append_event(TextDelta(SID, "soon on disk"))
        deadline = time.monotonic() + 5
        while raw_count(db, "events") == 0:
            assert time.monotonic() < deadline, "the flusher never wrote the buffered event"
            time.sleep(0.01)


def test_ids_of_deleted_conversations_are_never_reused() -> None:
    store = Store()
    try:
        first = store.create_conversation("a", "demo", None)
        store.delete_conversation(first.id)
        second = store.create_conversation("b", "demo", None)
        assert second.id != first.id
    finally:
        store.close()


def test_markers_record_operator_actions_and_go_with_their_conversation(store: Store) -> None:
    from tolaria.core.store.db import MARKER_MESSAGES_DELIVERED, MARKER_TURN_RESTARTED

    conv = store.create_conversation("c", "demo", None)
    turn = store.start_turn(conv.id, SID, "demo", "p")
    queued = store.add_marker(conv.id, "message_queued", data={"id": 1, "text": "later"})
    delivered = store.add_marker(conv.id, MARKER_MESSAGES_DELIVERED, turn_id=turn.id,
                                 data={"messages": ["later"]})
    store.add_marker(conv.id, MARKER_TURN_RESTARTED, turn_id=turn.id)
    assert queued is not None and delivered is not None
    assert queued.created_at < delivered.created_at
    assert [m.kind for m in store.markers(conv.id)] == [
        "message_queued", MARKER_MESSAGES_DELIVERED, MARKER_TURN_RESTARTED]
    assert store.markers(conv.id, MARKER_MESSAGES_DELIVERED) == [delivered]
    assert store.add_marker(conv.id + 1000, "message_queued") is None  # no such conversation
    store.delete_conversation(conv.id)
    assert store.markers(conv.id) == []


def test_a_version_1_database_gains_markers(db: Path) -> None:
    from tolaria.core.store.schema import MIGRATIONS as _MIGRATIONS

    db.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db)) as conn:
        for statement in _MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO conversations (title, agent, created_at, updated_at)"
                     " VALUES ('old', 'demo', 1, 1)")
        conn.execute("PRAGMA user_version = 1")
        conn.commit()
    with closing(Store(db)) as store:
        (conv,) = store.list_conversations()
        assert store.add_marker(conv.id, "stop_requested") is not None
        assert [m.kind for m in store.markers(conv.id)] == ["stop_requested"]
