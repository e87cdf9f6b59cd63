"""Pages of a chat's turns and search over its stored text, on a real SQLite file
(tolaria/core/store/pages.py): what a long chat's view reads instead of the whole event log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import fill_chat

from tolaria.core.events import Done, TextDelta, ToolStart
from tolaria.core.store.db import Store
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
