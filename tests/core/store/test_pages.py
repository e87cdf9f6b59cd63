"""Pages of a chat's turns and search over its stored text, on a real SQLite file
(tolaria/core/store/pages.py): what a long chat's view reads instead of the whole event log."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from helpers import fill_chat

from tolaria.core.events import Done, TextDelta, ToolStart
from tolaria.core.store.db import COALESCE_MAX_CHARS, Store
from tolaria.core.store.pages import PAGE_AROUND, PAGE_LATEST, PAGE_NEWER, PAGE_OLDER


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "pages.sqlite3")
    yield opened
    opened.close()


def _id(store: Store, stream_id: str) -> int:
    turn = store.turn_by_stream(stream_id)
    assert turn is not None
    return turn.id


def _chat(store: Store, turns: int) -> tuple[int, list[str]]:
    conversation = store.create_conversation("chat", "demo", None)
    return conversation.id, fill_chat(store, conversation.id, turns, text_chars=200)


def test_pages_walk_the_chat_both_ways_with_their_events(store: Store) -> None:
    chat, sids = _chat(store, 25)
    other, other_sids = _chat(store, 3)  # another chat's turns never leak in
    latest = store.turns_page(chat, limit=10)
    assert latest.kind == PAGE_LATEST
    assert [t.stream_id for t, _ in latest.turns] == sids[-10:]
    assert latest.has_older and not latest.has_newer
    for turn, events in latest.turns:
        assert {e.stream_id for e in events} == {turn.stream_id}
        assert isinstance(events[-1], Done) and any(isinstance(e, ToolStart) for e in events)
    older = store.turns_page(chat, latest.turns[0][0].id, limit=10)
    assert older.kind == PAGE_OLDER and older.has_older and older.has_newer
    assert [t.stream_id for t, _ in older.turns] == sids[5:15]
    oldest = store.turns_page(chat, older.turns[0][0].id, limit=10)
    assert [t.stream_id for t, _ in oldest.turns] == sids[:5] and not oldest.has_older
    newer = store.turns_after(chat, oldest.turns[-1][0].id, limit=10)
    assert newer.kind == PAGE_NEWER and newer.has_older and newer.has_newer
    assert [t.stream_id for t, _ in newer.turns] == sids[5:15]
    last = store.turns_after(chat, newer.turns[-1][0].id, limit=10)
    assert [t.stream_id for t, _ in last.turns] == sids[15:] and not last.has_newer
    assert store.turn_count(chat) == 25 and store.turn_count(other) == len(other_sids)


def test_a_page_around_a_turn_holds_it_near_its_middle(store: Store) -> None:
    chat, sids = _chat(store, 30)
    target = _id(store, sids[12])
    page = store.turns_around(chat, target, limit=10)
    ids = [t.stream_id for t, _ in page.turns]
    assert page.kind == PAGE_AROUND and page.focus_turn_id == target
    assert sids[12] in ids and ids == sids[sids.index(ids[0]):sids.index(ids[-1]) + 1]
    assert 3 <= ids.index(sids[12]) <= 7 and page.has_older and page.has_newer
    edge = store.turns_around(chat, _id(store, sids[0]), limit=10)
    assert edge.turns[0][0].stream_id == sids[0] and not edge.has_older


def test_search_runs_over_stored_text_prompts_and_tool_input(store: Store) -> None:
    chat, sids = _chat(store, 12)
    assert store.search_turns(chat, "turn-7-marker") == [_id(store, sids[7])]
    assert store.search_turns(chat, "QUESTION NUMBER 3:") == [_id(store, sids[3])]
    assert store.search_turns(chat, "ls -la src/11") == [_id(store, sids[11])]
    assert len(store.search_turns(chat, "Restoring a long chat")) == 12, "oldest first, all"
    assert store.search_turns(chat, "   ") == [] and store.search_turns(chat, "no such text") == []
    # Text with quotes and a line break is found as the user typed it (payloads are JSON).
    conversation = store.create_conversation("quotes", "demo", None)
    sid = "ai-agent-stream-pagesquote01"
    store.start_turn(conversation.id, sid, "demo", "hi")
    store.append_event(TextDelta(sid, text='He said "stop"\nthen left; ünïcode too'))
    store.append_event(Done(sid))
    found = store.search_turns(conversation.id, 'said "stop"\nthen')
    assert found == [_id(store, sid)]
    assert store.search_turns(conversation.id, "ünïcode") == found
    assert store.search_turns(chat, 'said "stop"') == [], "only this chat is searched"


def _text_rows(store: Store, stream_id: str) -> list[str]:
    """The turn's stored text rows, read straight from the database file."""
    with closing(sqlite3.connect(store.path)) as conn:
        rows = conn.execute("SELECT e.payload FROM events e JOIN turns t ON t.id = e.turn_id"
                            " WHERE t.stream_id = ? AND e.kind = 'text_delta' ORDER BY e.seq",
                            (stream_id,)).fetchall()
    return [json.loads(payload)["text"] for (payload,) in rows]


def test_search_finds_text_split_across_stored_rows(store: Store) -> None:
    chat = store.create_conversation("split", "demo", None).id
    fill_chat(store, chat, 3, text_chars=200)  # other turns: never found by these needles
    big = "big-row-turn"
    store.start_turn(chat, big, "demo", "hi")
    # A row is cut once it holds COALESCE_MAX_CHARS characters: the needle straddles the cut.
    store.append_event(TextDelta(big, text="x" * (COALESCE_MAX_CHARS - 8) + "Boundary"))
    store.append_event(TextDelta(big, text="-crossing needle, then more text"))
    store.append_event(Done(big))
    rows = _text_rows(store, big)
    assert len(rows) == 2 and rows[0].endswith("Boundary") and rows[1].startswith("-crossing")
    assert store.search_turns(chat, "boundary-CROSSING needle") == [_id(store, big)]

    small = "short-rows-turn"  # rows cut at each flush, one shorter than the needle
    store.start_turn(chat, small, "demo", "hi")
    for part in ("the quick br", "o", "wn fox"):
        store.append_event(TextDelta(small, text=part))
        store.flush()
    store.append_event(ToolStart(small, tool_id="t", name="Bash", input={"command": "true"}))
    for part in ("tool", "card"):  # a tool card between two texts: not one text
        store.append_event(TextDelta(small, text=part))
        store.append_event(ToolStart(small, tool_id=part, name="Bash", input={}))
    store.append_event(Done(small))
    assert _text_rows(store, small)[:3] == ["the quick br", "o", "wn fox"]
    assert store.search_turns(chat, "quick brown fox") == [_id(store, small)]
    assert store.search_turns(chat, "toolcard") == []
    assert store.search_turns(chat, "xBoundary-c") == [_id(store, big)]
    assert store.search_turns(chat, "brown fox!") == []
    quoted = "quoted-rows-turn"  # quotes and a line break across the cut (JSON escapes them)
    store.start_turn(chat, quoted, "demo", "hi")
    for part in ('He said "h', 'i"\nthen left'):
        store.append_event(TextDelta(quoted, text=part))
        store.flush()
    store.append_event(Done(quoted))
    assert store.search_turns(chat, 'SAID "hi"\nthen') == [_id(store, quoted)]
