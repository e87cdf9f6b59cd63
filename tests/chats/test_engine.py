"""The turn engine on plain asyncio (tolaria/chats/engine/): its stream gate's rules, a turn with
no store (``tolaria run --no-save``), and a stored turn stopped mid-tool, with real demo agents."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import async_test, marker_pids, tool_sleeping, wait_until

from tolaria.chats.engine import QuietObserver, StreamGate, TurnEngine
from tolaria.chats.inflight import Launch
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN, Done, Error, Event, TextDelta
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import MARKER_STOP_REQUESTED, Store
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.request import RunRequest
from tolaria.support.tasks import TaskSet


class Seen(QuietObserver):
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.facts: list[str] = []

    def event(self, event: Event) -> None:
        self.events.append(event)

    def agent_starting(self, stream_id: str) -> None:
        self.facts.append("agent_starting")

    def run_stopping(self, stream_id: str) -> None:
        self.facts.append("run_stopping")

    def run_finished(self, stream_id: str, done: Done) -> None:
        self.facts.append(f"run_finished:{done.stop_reason}")


def _gate(batch: bool = False) -> tuple[StreamGate, list[Event], list[Event], list[str]]:
    flushes: list[str] = []
    gate = StreamGate(batch=batch, schedule=lambda: flushes.append("asked"))
    recorded: list[Event] = []
    forwarded: list[Event] = []
    gate.record = recorded.append
    gate.on_event = forwarded.append
    gate.on_finished = lambda _sid, done: forwarded.append(done)
    return gate, recorded, forwarded, flushes


def test_after_a_stop_that_took_only_the_ending_passes_and_is_stored() -> None:
    gate, recorded, forwarded, _ = _gate()
    sid = new_stream_id()
    gate.open_stream(sid)
    gate.deliver(TextDelta(sid, text="before"))
    assert gate.stop(sid, lambda: True)
    for event in (TextDelta(sid, text="after"), Error(sid, message="why"),
                  Done(sid, stop_reason=STOP_CANCELLED), TextDelta(sid, text="late")):
        gate.deliver(event)
    assert [e.kind for e in forwarded] == ["text_delta", "error", "done"]
    assert recorded == forwarded  # stored exactly what was handed on, Done included
    assert not gate.is_live(sid)


def test_a_stop_that_comes_too_late_keeps_the_tail() -> None:
    gate, _recorded, forwarded, _ = _gate()
    sid = new_stream_id()
    gate.open_stream(sid)
    assert not gate.stop(sid, lambda: False)  # the agent had already ended by itself
    gate.deliver(TextDelta(sid, text="tail"))
    assert [e.text for e in forwarded if isinstance(e, TextDelta)] == ["tail"]


def test_batching_merges_deltas_per_flush_and_a_hold_flushes_first() -> None:
    gate, recorded, forwarded, flushes = _gate(batch=True)
    sid = new_stream_id()
    gate.open_stream(sid)
    for part in ("a", "b", "c"):
        gate.deliver(TextDelta(sid, text=part))
    assert forwarded == [] and flushes == ["asked"]  # one flush asked for, once
    gate.flush()
    assert [e.text for e in forwarded if isinstance(e, TextDelta)] == ["abc"] and recorded
    gate.deliver(TextDelta(sid, text="d"))
    assert gate.mark_stopping(sid)  # what arrived before the stop is still handed on
    assert [e.text for e in forwarded if isinstance(e, TextDelta)] == ["abc", "d"]


@async_test
async def test_a_turn_without_a_store_runs_as_requested(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    monkeypatch.setenv("TOLARIA_DEMO_DELAY", "0")
    seen = Seen()
    engine = TurnEngine(None, ProcessRegistry(), seen, TaskSet(), queues=False, grace_s=1.0)
    request = RunRequest(load_adapters().get("demo"), "hello", cwd=str(tmp_path))
    sid = new_stream_id()
    launch = Launch(0, "hello", "hello", None, "demo", str(tmp_path))
    task = engine.start(launch, sid, None, request=request)
    assert task is not None and engine.running_stream(0) == sid
    await task
    await engine.tasks.wait()
    assert seen.facts == ["agent_starting", f"run_finished:{STOP_END_TURN}"]
    assert "hello" in "".join(e.text for e in seen.events if isinstance(e, TextDelta))
    assert engine.running_count() == 0 and marker_pids(sid) == []


@async_test
async def test_a_stored_turn_stopped_mid_tool_ends_cancelled_with_its_marker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    monkeypatch.setenv("TOLARIA_DEMO_DELAY", "0")
    store = Store(tmp_path / "tolaria.sqlite3")
    seen = Seen()
    engine = TurnEngine(store, ProcessRegistry(), seen, TaskSet(), adapters=load_adapters(),
                        grace_s=1.0)
    try:
        chat = engine.new_conversation("demo", str(tmp_path)).id
        sid = engine.send(chat, "stop me")
        assert sid is not None
        await wait_until(lambda: tool_sleeping(sid), within=20, what="the demo's tool")
        assert engine.stop(chat) and not engine.stop(chat)  # a second Stop is a no-op
        await wait_until(lambda: engine.running_stream(chat) is None, within=20, what="the end")
        await engine.tasks.wait()
        turn = store.turn_by_stream(sid)
        assert turn is not None and turn.status == "cancelled"
        assert seen.facts[-2:] == ["run_stopping", f"run_finished:{STOP_CANCELLED}"]
        assert [m.kind for m in store.markers(chat, MARKER_STOP_REQUESTED)] == [
            MARKER_STOP_REQUESTED]
        assert store.get_conversation(chat).title == "stop me"  # type: ignore[union-attr]
        assert marker_pids(sid) == []
    finally:
        await engine.shutdown()
        await asyncio.sleep(0)
        store.close()
