"""The store under volume and at its limits: 200k deltas, huge texts split into bounded rows,
split surrogate pairs, several writer threads, arbitrary text (hypothesis), an unstorable event,
and a real crash (SIGKILL of a writing child) that may lose only the last moments."""

from __future__ import annotations

import itertools
import signal
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

from core.store.storehelpers import SID, raw_count, squash
from helpers import python_child, sigkill, text_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tolaria.core.events import (
    Diagnostic,
    Done,
    Event,
    TextDelta,
    ThinkingDelta,
    ToolStart,
    Usage,
)
from tolaria.core.store.db import COALESCE_MAX_CHARS, Store, Turn

# volume and exactness


def test_many_small_deltas_round_trip(db: Path) -> None:
    """200k deltas, with tool events in between; correctness only (no timing)."""
    with closing(Store(db)) as store:
        conv = store.create_conversation("flood", "claude", None)
        turn = store.start_turn(conv.id, SID, "claude", "p")
        expected: list[Event] = []
        for i in range(200_000):
            event: Event = TextDelta(SID, f"{i % 10}")
            if i % 50_000 == 49_999:
                event = ToolStart(SID, tool_id=f"t{i}", name="Read", input={"i": i})
            expected.append(event)
            store.append_event(event)
        store.append_event(Done(SID))
        expected.append(Done(SID))
    with closing(Store(db)) as store:
        events = store.events(turn.id)
        assert squash(events) == squash(expected)
        assert len(text_of(events)) == 200_000 - 4
    assert raw_count(db, "events") < 1_000  # coalesced: not one row per delta


def test_huge_text_is_split_into_bounded_rows(store: Store, db: Path) -> None:
    conv = store.create_conversation("c", "claude", None)
    turn = store.start_turn(conv.id, SID, "claude", "p")
    chunk = "abcdefghij" * 1000
    for _ in range(3 * COALESCE_MAX_CHARS // len(chunk) + 1):
        store.append_event(TextDelta(SID, chunk))
    store.flush()
    assert text_of(store.events(turn.id)) == chunk * (3 * COALESCE_MAX_CHARS // len(chunk) + 1)
    assert raw_count(db, "events") >= 3


def test_split_surrogate_pair_round_trips_exactly(store: Store) -> None:
    conv = store.create_conversation("c", "claude", None)
    turn = store.start_turn(conv.id, SID, "claude", "p")
    store.append_event(TextDelta(SID, "smile \ud83d"))
    store.append_event(TextDelta(SID, "\ude00 done"))
    store.append_event(ToolStart(SID, tool_id="t", name="x", input={"k": "\udfff"}))
    store.append_event(Done(SID))
    events = store.events(turn.id)
    assert text_of(events) == "smile \ud83d\ude00 done"
    assert len(text_of(events)) == 13  # two lone surrogates, not one joined emoji
    assert events[-2] == ToolStart(SID, tool_id="t", name="x", input={"k": "\udfff"})


def test_concurrent_turns_from_several_threads(db: Path) -> None:
    with closing(Store(db, flush_interval=0.005)) as store:
        conv = store.create_conversation("c", "claude", None)
        turns = [store.start_turn(conv.id, f"{SID}-{n}", "claude", "p") for n in range(4)]

        def produce(turn: Turn) -> None:
            for i in range(5_000):
                store.append_event(TextDelta(turn.stream_id, f"{i},"))
                if i % 1_000 == 0:
                    store.append_event(Usage(turn.stream_id, output_tokens=i))
            store.append_event(Done(turn.stream_id))

        threads = [threading.Thread(target=produce, args=(t,)) for t in turns]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        expected = "".join(f"{i}," for i in range(5_000))
        for turn in turns:
            assert text_of(store.events(turn.id)) == expected
            stored = store.turn_by_stream(turn.stream_id)
            assert stored is not None
            assert (stored.status, stored.output_tokens) == ("completed", 4_000)


# Any code point, with lone surrogates made frequent (the default strategy almost never draws one).
_any_char = st.one_of(st.characters(codec=None, categories=None), st.characters(categories=["Cs"]))
_small_text = st.text(alphabet=_any_char, max_size=20)
_delta_text = st.one_of(
    st.just(""),
    _small_text,
    # Huge-ish deltas, built by repetition: generating 50k random characters is slow.
    st.builds(lambda text, times: text * times, _small_text, st.integers(500, 5_000)),
)


def test_arbitrary_text_deltas_round_trip_exactly(db: Path) -> None:
    with closing(Store(db)) as store:
        conv = store.create_conversation("c", "claude", None)
        numbers = itertools.count()

        @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(st.lists(st.tuples(st.booleans(), _delta_text, st.booleans()), max_size=40))
        def check(deltas: list[tuple[bool, str, bool]]) -> None:
            sid = f"{SID}-{next(numbers)}"
            turn = store.start_turn(conv.id, sid, "claude", "p")
            sent: list[Event] = []
            for thinking, text, flush_after in deltas:
                event = ThinkingDelta(sid, text) if thinking else TextDelta(sid, text)
                sent.append(event)
                store.append_event(event)
                if flush_after:
                    store.flush()
            store.append_event(Done(sid))
            events = store.events(turn.id)
            assert squash(events) == squash([*sent, Done(sid)])
            assert text_of(events) == text_of(sent)

        check()


def test_an_unstorable_event_becomes_a_note_and_blocks_nothing(store: Store) -> None:
    conv = store.create_conversation("c", "claude", None)
    turn = store.start_turn(conv.id, SID, "claude", "p")
    store.append_event(ToolStart(SID, tool_id="t", name="x", input={(1, 2): "tuple key"}))
    store.append_event(ToolStart(SID, tool_id="u", name="y", input={"path": Path("/tmp")}))
    store.append_event(TextDelta(SID, "still here"))
    store.append_event(Done(SID))
    events = store.events(turn.id)
    assert isinstance(events[0], Diagnostic)
    assert events[0].source == "store"
    assert "tool_start" in events[0].message
    assert events[1] == ToolStart(SID, tool_id="u", name="y", input={"path": "/tmp"})
    assert text_of(events) == "still here"
    assert isinstance(events[-1], Done)


# a real crash

CHILD = r"""
import sys, time
from pathlib import Path
from tolaria.core.events import TextDelta
from tolaria.core.store.db import Store

sid = "ai-agent-stream-crash"
store = Store(Path(sys.argv[1]))
conversation = store.create_conversation("crash", "fake", None)
store.start_turn(conversation.id, sid, "fake", "flood me")
appended = 0
start = reported = time.monotonic()
ready = False
while True:
    for _ in range(20):
        store.append_event(TextDelta(sid, f"{appended:08d}|"))
        appended += 1
    now = time.monotonic()  # every event counted here was appended before `now`
    if now - reported >= 0.02:
        print(appended, now, flush=True)
        reported = now
    if not ready and now - start >= 0.3:
        print("ready", flush=True)
        ready = True
    time.sleep(0.001)
"""


def expected_text(count: int) -> str:
    return "".join(f"{i:08d}|" for i in range(count))


def test_sigkill_loses_at_most_the_last_moments(db: Path) -> None:
    with python_child(CHILD, str(db)) as proc:
        assert proc.stdout is not None
        lines: list[str] = []
        while (line := proc.stdout.readline()) and line.strip() != "ready":
            lines.append(line)
        assert line, f"child died before it was ready: {proc.communicate()[1]}"
        time.sleep(0.3)
        killed_at = time.monotonic()
        rest = sigkill(proc)
    assert proc.returncode == -signal.SIGKILL
    progress = [(int(n), float(t)) for n, t in (ln.split() for ln in lines + rest.splitlines())]
    must_have = max(n for n, t in progress if t <= killed_at - 0.15)
    assert must_have > 0

    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    for _ in range(2):  # the first open recovers, the second finds nothing left to do
        with closing(Store(db)) as store:
            turn = store.turn_by_stream("ai-agent-stream-crash")
            assert turn is not None
            assert (turn.status, turn.stop_reason) == ("interrupted", "interrupted")
            assert turn.finished_at is not None
            text = text_of(store.events(turn.id))
            assert text, "partial output lost"
            persisted = len(text) // 9
            assert text == expected_text(persisted), "persisted text is not an exact prefix"
            assert persisted >= must_have, (
                f"{must_have} events were appended >150 ms before the kill, only {persisted} kept"
            )
