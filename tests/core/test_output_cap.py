"""Per-turn output caps (tolaria/core/output_cap.py) on their own and in the real store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tolaria.core.events import (
    Diagnostic,
    Done,
    Error,
    Event,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    ToolUpdate,
)
from tolaria.core.output_cap import CAP_SOURCE, OutputCap, OutputLimits, clip_item
from tolaria.core.store.db import Store

SID = "ai-agent-stream-capped0001"
LIMITS = OutputLimits(turn_chars=10_000, item_chars=2_000, tail_chars=500)


def text_of(events: list[Event], cls: type = TextDelta) -> str:
    return "".join(e.text for e in events if isinstance(e, cls))  # type: ignore[attr-defined]


def notices(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, Diagnostic) and e.source == CAP_SOURCE]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with closing(Store(tmp_path / "tolaria.sqlite3", limits=LIMITS)) as s:
        yield s


def start(store: Store) -> int:
    conversation = store.create_conversation("flood", "fake", None)
    return store.start_turn(conversation.id, SID, "fake", "flood me").id


def test_a_text_flood_keeps_the_start_a_notice_and_the_tail(store: Store) -> None:
    turn = start(store)
    chunk = "".join(f"{i:07d}\n" for i in range(100))  # 800 characters, numbered lines
    for _ in range(40):  # 32,000 characters: over 3 x the 10,000 cap
        store.append_event(TextDelta(SID, text=chunk))
    store.append_event(ToolStart(SID, tool_id="t1", name="Bash", input={"command": "ls"}))
    store.append_event(Done(SID))
    events = store.events(turn)
    whole = chunk * 40
    kept = text_of(events)
    # The start (exactly the cap), then the last tail_chars of the rest.
    assert kept == whole[:10_000] + whole[-500:]
    first, last = notices(events)
    assert first.startswith("Output truncated: this turn printed more than 10 KB")
    assert "Stop ends it" in first
    assert "21 KB of output was not kept" in last and "The last 500 characters" in last
    kinds = [e.kind if not isinstance(e, Diagnostic) else e.source for e in events]
    assert kinds == ["text_delta", CAP_SOURCE, "tool_start", CAP_SOURCE, "text_delta", "done"]
    assert store.turns(1)[0].status == "completed"


def test_the_stored_size_is_bounded_whatever_is_printed(store: Store, tmp_path: Path) -> None:
    turn = start(store)
    for i in range(3000):  # 3 MB of text, thinking and stderr, interleaved
        store.append_event(TextDelta(SID, text="t" * 500))
        store.append_event(ThinkingDelta(SID, text="h" * 300))
        store.append_event(Diagnostic(SID, source="stderr", message=f"line {i} " + "e" * 200))
    store.append_event(Done(SID, stop_reason="cancelled"))
    store.flush()
    [(payload_chars,)] = store._query("SELECT SUM(LENGTH(payload)) FROM events WHERE turn_id = ?",
                                      turn)
    # Content up to the cap, the tail, two notices, and the JSON framing (~100 characters) of
    # the ~40 rows written before the cap was reached; nothing of the other 2.97 MB.
    assert payload_chars <= 10_000 + 500 + 5_000
    events = store.events(turn)
    assert len(notices(events)) == 2
    assert sum(len(e.text) for e in events if isinstance(e, TextDelta | ThinkingDelta)) \
        + sum(len(e.message) for e in events if isinstance(e, Diagnostic)
              and e.source == "stderr") <= 10_000 + 500


def test_one_tool_output_is_clipped_and_an_update_over_the_budget_keeps_its_old_output(
        store: Store) -> None:
    turn = start(store)
    big = "HEAD" + "x" * 6_000 + "TAIL"
    store.append_event(ToolStart(SID, tool_id="t1", name="Bash", input={"command": "cat log"}))
    store.append_event(ToolUpdate(SID, tool_id="t1", status="running", output="partial"))
    store.append_event(ToolDone(SID, tool_id="t1", output=big))
    store.append_event(TextDelta(SID, text="a" * 7_500))  # ~450 characters of budget left
    store.append_event(ToolStart(SID, tool_id="t2", name="Bash", input={"command": "cat more"}))
    store.append_event(ToolUpdate(SID, tool_id="t2", status="running", output="y" * 1_000))
    store.append_event(ToolDone(SID, tool_id="t2", output="z" * 1_500))
    store.append_event(Error(SID, message="E" * 50_000))
    store.append_event(Done(SID))
    events = store.events(turn)
    done1, done2 = [e for e in events if isinstance(e, ToolDone)]
    assert done1.output.startswith("HEAD") and done1.output.endswith("TAIL")
    assert len(done1.output) < 2_100 and "not kept: longer than 2 KB" in done1.output
    [update2] = [e for e in events if isinstance(e, ToolUpdate) and e.tool_id == "t2"]
    assert update2.output is None and update2.status == "running"  # None: unchanged
    assert done2.output == "[1 KB of output not kept: this turn passed its 10 KB output cap]"
    [error] = [e for e in events if isinstance(e, Error)]
    assert 1_000 < len(error.message) <= 2_100, "an error is always kept, clipped"
    assert len(notices(events)) == 1, "no text was dropped: no tail"


def test_a_restored_turn_passes_a_second_cap_unchanged(store: Store) -> None:
    turn = start(store)
    for _ in range(30):
        store.append_event(TextDelta(SID, text="q" * 1_000))
    store.append_event(Done(SID))
    stored = store.events(turn)
    again = OutputCap(LIMITS)
    replayed = [kept for e in stored for kept in again.feed(e)] + again.finish(SID)
    assert replayed == stored
    assert again.upstream and again.truncated


def test_the_tail_survives_mark_interrupted_and_close(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    with closing(Store(path, limits=LIMITS)) as store:
        turn = start(store)
        store.append_event(TextDelta(SID, text="a" * 10_000 + "b" * 20_000 + "END"))
        store.mark_interrupted(SID)
        events = store.events(turn)
        assert text_of(events) == "a" * 10_000 + ("b" * 20_000 + "END")[-500:]
        other = store.start_turn(1, SID + "x", "fake", "again").id
        store.append_event(TextDelta(SID + "x", text="c" * 10_000 + "d" * 700))
    with closing(Store(path, limits=LIMITS)) as store:  # closed while running: tail kept
        events = store.events(other)
        assert text_of(events) == "c" * 10_000 + "d" * 500
        assert store.turns(1)[1].status == "interrupted"


def test_limits_come_from_the_environment_and_bad_values_are_ignored() -> None:
    assert OutputLimits.from_env({}) == OutputLimits()
    assert OutputLimits.from_env({"TOLARIA_MAX_TURN_CHARS": "5", "TOLARIA_MAX_ITEM_CHARS": "x",
                                  "TOLARIA_TAIL_CHARS": "0"}) == OutputLimits(
        turn_chars=5, tail_chars=0)
    assert OutputLimits().turn_chars == 32 * 1024 * 1024


def test_clip_item_keeps_start_and_end() -> None:
    assert clip_item("abc", 3) == "abc"
    clipped = clip_item("S" + "m" * 10_000 + "E", 1_000, tail=100)
    assert clipped.startswith("S" + "m" * 899) and clipped.endswith("m" * 99 + "E")
    assert "[9 KB not kept: longer than 1000 characters]" in clipped
