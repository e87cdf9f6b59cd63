"""Usage totals from a real SQLite store: per chat, day and agent, never counting a turn twice."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN, Done, Usage
from tolaria.core.store.db import Store
from tolaria.core.store.schema import MIGRATIONS
from tolaria.core.store.usage import BY_AGENT, BY_CHAT, BY_DAY

WINDOWS = [{"name": "five_hour", "used_percent": 40.0, "resets_at": 1.9e9, "status": "allowed"}]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "t.sqlite3")
    yield s
    s.close()


def _noon(days_ago: int) -> float:
    day = datetime.now().replace(hour=12, minute=0, second=0, microsecond=0)
    return (day - timedelta(days=days_ago)).timestamp()


def _turn(store: Store, chat: int, agent: str, at: float, usages: list[Usage],
          duration_ms: int = 1000, stop: str = STOP_END_TURN) -> str:
    sid = f"ai-agent-stream-{chat}-{at}-{len(usages)}-{time.monotonic_ns()}"
    store.start_turn(chat, sid, agent, "p", started_at=at)
    for usage in usages:
        store.append_event(Usage(sid, **{k: v for k, v in vars(usage).items()
                                         if k != "stream_id"}))
    store.append_event(Done(sid, stop_reason=stop, duration_ms=duration_ms))
    return sid


def test_a_claude_turn_counts_its_result_not_its_messages_too(store: Store) -> None:
    """Per-message usage while it streams, then the result's total: the last one is the
    turn's (summing them would count the turn twice)."""
    chat = store.create_conversation("c", "claude", None).id
    _turn(store, chat, "claude", _noon(0), [
        Usage("x", input_tokens=10, output_tokens=5, cache_read_tokens=100, context_tokens=115),
        Usage("x", input_tokens=30, output_tokens=9, cache_read_tokens=300, context_tokens=140),
        Usage("x", input_tokens=31, output_tokens=12, cost_usd=0.25, cache_read_tokens=300,
              cache_write_tokens=7, context_tokens=140, context_window=200_000,
              rate_limits=WINDOWS),
    ], duration_ms=4200)
    (row,) = store.usage(BY_CHAT)
    assert (row.turns, row.input_tokens, row.output_tokens) == (1, 31, 12)
    assert (row.cache_read_tokens, row.cache_write_tokens) == (300, 7)
    assert row.cost_usd == pytest.approx(0.25)
    assert row.agent_ms == 4200
    assert (row.label, row.agent) == ("c", "claude")
    context = store.chat_context(chat)
    assert context is not None
    assert (context.context_tokens, context.context_window) == (140, 200_000)
    assert context.fraction == pytest.approx(140 / 200_000)
    assert context.rate_limits == WINDOWS
    assert store.rate_limits()["claude"].rate_limits == WINDOWS


def test_totals_per_chat_day_and_agent_agree(store: Store) -> None:
    a = store.create_conversation("alpha", "claude", None).id
    b = store.create_conversation("beta", "codex", None).id
    _turn(store, a, "claude", _noon(2), [Usage("x", input_tokens=100, output_tokens=10,
                                                cost_usd=0.5)], duration_ms=2000)
    _turn(store, a, "claude", _noon(0), [Usage("x", input_tokens=50, output_tokens=5,
                                                cost_usd=0.25)], duration_ms=3000)
    _turn(store, b, "codex", _noon(0), [Usage("x", input_tokens=1000, output_tokens=100,
                                               cache_read_tokens=800)], duration_ms=5000)
    # a stopped turn with no usage: it counts as a turn and its time, nothing else
    _turn(store, b, "codex", _noon(1), [], duration_ms=700, stop=STOP_CANCELLED)

    by_agent = {r.key: r for r in store.usage(BY_AGENT)}
    assert by_agent["codex"].tokens == 1100 and by_agent["codex"].cost_usd is None
    assert by_agent["codex"].turns == 2 and by_agent["codex"].agent_ms == 5700
    assert by_agent["claude"].cost_usd == pytest.approx(0.75)
    assert [r.key for r in store.usage(BY_AGENT)] == ["codex", "claude"]  # most tokens first

    days = store.usage(BY_DAY)
    assert [r.label for r in days] == sorted(r.label for r in days)  # oldest first
    assert [r.tokens for r in days] == [110, 0, 1155]
    chats = {r.label: r for r in store.usage(BY_CHAT)}
    assert chats["beta"].cache_read_tokens == 800 and chats["beta"].agent == "codex"

    total = store.usage_total()
    for grouping in (BY_CHAT, BY_DAY, BY_AGENT):
        rows = store.usage(grouping)
        assert sum(r.tokens for r in rows) == total.tokens == 1265
        assert sum(r.agent_ms for r in rows) == total.agent_ms == 10_700
        assert sum(r.turns for r in rows) == total.turns == 4

    since = _noon(0) - 3600
    assert store.usage_total(since).tokens == 1155
    assert {(s.agent, s.tokens) for s in store.usage_by_day_agent(since)} == {
        ("claude", 55), ("codex", 1100)}
    with pytest.raises(ValueError, match="unknown grouping"):
        store.usage("week")


def test_a_deleted_chats_turns_leave_the_totals(store: Store) -> None:
    chat = store.create_conversation("gone", "claude", None).id
    _turn(store, chat, "claude", _noon(0), [Usage("x", input_tokens=5, output_tokens=5)])
    store.delete_conversation(chat)
    assert store.usage(BY_CHAT) == [] and store.usage_total().tokens == 0


def test_a_store_of_the_version_before_gets_the_usage_columns(tmp_path: Path) -> None:
    """An existing store migrates: its turns keep their tokens, the new columns start empty."""
    db = tmp_path / "old.sqlite3"
    before = 5  # the version before the usage columns (migration 6)
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        for migration in MIGRATIONS[:before]:
            for statement in migration:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {before}")
        conn.execute("INSERT INTO conversations (title, agent, created_at, updated_at)"
                     " VALUES ('old', 'codex', 1, 1)")
        conn.execute("INSERT INTO turns (conversation_id, stream_id, agent, prompt, status,"
                     " started_at, duration_ms, input_tokens, output_tokens)"
                     " VALUES (1, 's', 'codex', 'p', 'completed', ?, 900, 40, 2)", (_noon(0),))
    store = Store(db)
    try:
        (row,) = store.usage(BY_AGENT)
        assert (row.tokens, row.cache_read_tokens, row.agent_ms) == (42, 0, 900)
        assert store.chat_context(1) is None
        plan = store._query("EXPLAIN QUERY PLAN SELECT * FROM turns t WHERE t.started_at >= 1")
        assert "turns_by_start" in " ".join(str(r) for r in plan)
    finally:
        store.close()
