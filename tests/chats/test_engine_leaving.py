"""Letting a kept run go at quit (ADR 0032, "Quit"), the pieces without a host: the registry
lets go only a spawned run whose turn said how (a kept remote link), and no abort reaches it
after; the gate stores what the run said before and nothing after, not even its Done.
Through a real host: tests/remote/test_keep_quit.py."""

from __future__ import annotations

import asyncio

from tolaria.chats.engine.gate import StreamGate
from tolaria.core.events import Done, Event, TextDelta
from tolaria.core.process.registry import RUNNING, ProcessRegistry
from tolaria.core.stream_id import new_stream_id


def test_only_a_spawned_run_with_a_way_to_let_go_is_let_go_and_no_abort_follows() -> None:
    async def scenario() -> None:
        registry = ProcessRegistry()
        run = registry.reserve(new_stream_id(), "demo")
        let_go: list[bool] = []
        try:
            assert not registry.can_let_go(run.stream_id), "not spawned yet"
            assert not registry.detach(run.stream_id)
            registry.transition(run, RUNNING)
            assert not registry.detach(run.stream_id), "not a kept link: it is stopped"
            run.let_go = lambda: let_go.append(True)
            assert registry.can_let_go(run.stream_id)
            assert registry.detach(run.stream_id)
            assert not registry.detach(run.stream_id), "once"
            assert not registry.abort(run.stream_id), "a run let go is not stopped after"
            assert registry.abort_all() == []
            await asyncio.sleep(0)
            assert let_go == [True] and run.detached and not run.stop_requested
        finally:
            registry.unregister(run)

    asyncio.run(scenario())


def test_the_gate_keeps_what_was_said_and_forgets_the_rest() -> None:
    stored: list[Event] = []
    finished: list[str] = []
    gate = StreamGate(batch=True, schedule=lambda: None)
    gate.record = stored.append
    gate.on_finished = lambda stream_id, _done: finished.append(stream_id)
    sid = new_stream_id()
    deliver = gate.open_stream(sid)
    deliver(TextDelta(sid, text="said before the quit"))
    gate.forget(sid)
    deliver(TextDelta(sid, text="after"))
    deliver(Done(sid, stop_reason="error"))
    assert [e.text for e in stored if isinstance(e, TextDelta)] == ["said before the quit"]
    assert not any(isinstance(e, Done) for e in stored) and finished == []
    assert not gate.is_live(sid)
