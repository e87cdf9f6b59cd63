"""Chat search matches what the transcript shows, never the stored JSON (issue 22 item 7).

Every event is stored as a JSON payload (``{"stream_id": "ai-agent-stream-…", "kind":
"text_delta", "text": …}``): a search over the raw payload found "text", "stream", "delta",
"agent" in every turn. These tests run on a real SQLite file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from tolaria.core.events import Done, Error, Init, TextDelta, ToolDone, ToolStart, ToolUpdate, Usage
from tolaria.core.store.db import Store

SID = "ai-agent-stream-shown0000001"
TOOL_SID = "ai-agent-stream-shown0000002"


def _turn_id(store: Store, stream_id: str) -> int:
    turn = store.turn_by_stream(stream_id)
    assert turn is not None
    return turn.id


def test_a_plain_answer_is_found_by_its_words_only(store: Store) -> None:
    chat = store.create_conversation("plain", "demo", None).id
    store.start_turn(chat, SID, "demo", "hi")
    store.append_event(Init(SID, agent="demo", session_id="sess-1"))
    store.append_event(TextDelta(SID, text="just a plain answer"))
    store.append_event(Usage(SID, input_tokens=3, output_tokens=4))
    store.append_event(Done(SID))
    for hidden in ("text", "stream", "delta", "agent", "tool", "output", "kind", "stream_id",
                   "ai-agent", SID, "shown0000001", '"text"', "end_turn", "sess-1", "demo"):
        assert store.search_turns(chat, hidden) == [], f"{hidden!r} is not shown"
    found = [_turn_id(store, SID)]
    for shown in ("just a plain answer", "PLAIN", "a plain", "answer", "hi"):
        assert store.search_turns(chat, shown) == found, f"{shown!r} is shown"


def test_tool_commands_outputs_and_errors_are_found_not_their_keys(store: Store) -> None:
    chat = store.create_conversation("tools", "demo", None).id
    store.start_turn(chat, TOOL_SID, "demo", "look around")
    store.append_event(ToolStart(TOOL_SID, tool_id="toolu_01XYZ", name="Bash",
                                 input={"command": "ls -la src", "timeout": 120}))
    store.append_event(ToolUpdate(TOOL_SID, tool_id="toolu_01XYZ", status="running",
                                  output="partial listing"))
    store.append_event(ToolDone(TOOL_SID, tool_id="toolu_01XYZ", output="total 4\nmain.py",
                                is_error=False))
    store.append_event(ToolStart(TOOL_SID, tool_id="t2", name="Edit",
                                 input={"file_path": "/repo/notes.md", "old_string": "alpha",
                                        "new_string": "beta"}))
    store.append_event(Error(TOOL_SID, message="rate limited by the model",
                             category="rate_limit", hint="Wait a minute and retry."))
    store.append_event(Done(TOOL_SID))
    found = [_turn_id(store, TOOL_SID)]
    for shown in ("ls -la src", "120", "partial listing", "main.py", "total 4\nmain", "bash",
                  "notes.md", "alpha", "beta", "rate limited", "wait a minute"):
        assert store.search_turns(chat, shown) == found, f"{shown!r} is shown"
    for hidden in ("command", "file_path", "old_string", "toolu_01", "is_error", "false",
                   "tool_id", "input", "output", "rate_limit", "category", "hint", "status",
                   "running", "stream", '"ls'):
        assert store.search_turns(chat, hidden) == [], f"{hidden!r} is not shown"


def test_an_unreadable_or_odd_row_never_breaks_a_search(db: Path) -> None:
    with closing(Store(db)) as store:
        chat = store.create_conversation("odd", "demo", None).id
        store.start_turn(chat, SID, "demo", "hi")
        store.append_event(TextDelta(SID, text="half a pair \ud800 then findable words"))
        store.append_event(Done(SID))
        turn_id = _turn_id(store, SID)
    with closing(sqlite3.connect(db)) as conn:  # a row that no longer decodes as JSON
        conn.execute("INSERT INTO events (turn_id, seq, kind, payload, created_at)"
                     " VALUES (?, 99, 'text_delta', '{\"text\": \"findable but broken', 0)",
                     (turn_id,))
        conn.commit()
    with closing(Store(db)) as store:
        assert store.search_turns(chat, "findable words") == [turn_id]  # no error either
        assert store.search_turns(chat, "half a pair") == [turn_id]
