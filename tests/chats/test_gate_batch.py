"""``StreamGate.batch_with`` (``tolaria run``'s text modes, ADR 0025): a read's deltas are
stored and handed on once, merged, in order, with every other event, before the loop goes on."""

from __future__ import annotations

import asyncio

from tolaria.chats.engine.gate import StreamGate
from tolaria.core.events import Done, Event, TextDelta, ThinkingDelta, ToolStart, Usage


def test_batched_gate_merges_a_turns_deltas_in_order() -> None:
    recorded: list[Event] = []
    shown: list[Event] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = StreamGate()
        gate.batch_with(lambda: loop.call_soon(gate.flush))
        gate.record = recorded.append
        gate.on_event = shown.append
        deliver = gate.open_stream("s")
        for text in ("a", "b", "c"):
            deliver(TextDelta("s", text=text))
        deliver(ThinkingDelta("s", text="t"))
        deliver(ToolStart("s", tool_id="1", name="Bash", input={}))
        deliver(TextDelta("s", text="d"))
        assert shown == []  # nothing before the loop's turn ends
        await asyncio.sleep(0)
        assert shown == [TextDelta("s", text="abc"), ThinkingDelta("s", text="t"),
                         ToolStart("s", tool_id="1", name="Bash", input={}),
                         TextDelta("s", text="d")]
        deliver(TextDelta("s", text="e"))
        deliver(Usage("s", input_tokens=1, output_tokens=2))
        deliver(Done("s", stop_reason="end_turn"))  # flushes what is pending first
        assert shown[-2:] == [TextDelta("s", text="e"), Usage("s", input_tokens=1,
                                                               output_tokens=2)]

    asyncio.run(main())
    assert recorded[:-1] == shown  # stored before shown, the same events
    assert recorded[-1] == Done("s", stop_reason="end_turn")


def test_batched_gate_shows_nothing_of_a_stopped_stream_after_the_stop() -> None:
    shown: list[Event] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = StreamGate()
        gate.batch_with(lambda: loop.call_soon(gate.flush))
        gate.on_event = shown.append
        deliver = gate.open_stream("s")
        deliver(TextDelta("s", text="before"))
        assert gate.mark_stopping("s")  # what came before the stop is still shown
        deliver(TextDelta("s", text="after"))
        await asyncio.sleep(0)

    asyncio.run(main())
    assert shown == [TextDelta("s", text="before")]
