"""``tolaria run``'s output is written once per turn of the loop (tolaria/cli/printer.py): the
same bytes in the same order as a flush per event, stdout and stderr kept in order, a closed
reader still noticed (at the flush) and the run stopped; ``--json`` writes a text delta through a
shortcut that gives exactly the generic line."""

from __future__ import annotations

import asyncio
import io
import os
import random

import pytest

from tolaria.cli.printer import JsonPrinter, Output
from tolaria.cli.terminal import json_line
from tolaria.core.events import Done, TextDelta, to_dict


class Recorder(io.StringIO):
    """A text stream that notes each flush (what had been written by then)."""

    def __init__(self, log: list[tuple[str, str]], name: str) -> None:
        super().__init__()
        self.log, self.name = log, name

    def flush(self) -> None:
        self.log.append((self.name, self.getvalue()))


def test_writes_of_one_loop_turn_are_flushed_together_after_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[tuple[str, str]] = []
    out, err = Recorder(log, "out"), Recorder(log, "err")
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    output = Output()

    async def turn() -> None:
        output.out("a")
        output.out("b")
        assert out.getvalue() == "" and log == []  # nothing written yet within the turn
        output.err("[tool]\n")  # the other stream: stdout's text goes first
        output.out("c")
        await asyncio.sleep(0)  # the turn ends: the flush runs
        assert log == [("out", "ab"), ("err", "[tool]\n"), ("out", "abc")]
        output.out("d")
        output.unwatch()  # the run is over: flushed at once

    asyncio.run(turn())
    assert log[-1] == ("out", "abcd")
    assert err.getvalue() == "[tool]\n"


def test_without_a_loop_every_write_is_flushed(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[tuple[str, str]] = []
    monkeypatch.setattr("sys.stdout", Recorder(log, "out"))
    output = Output()
    output.out("a")
    output.out("b")
    assert log == [("out", "a"), ("out", "ab")]


def test_a_closed_reader_is_noticed_at_the_flush_and_stops_the_run_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    stdout = open(write_end, "w", encoding="utf-8")  # noqa: SIM115  (closed below)
    monkeypatch.setattr("sys.stdout", stdout)
    output = Output()
    stops = []
    output.on_closed = lambda: stops.append(1)
    os.close(read_end)

    async def flood() -> None:
        for _ in range(3):
            for _ in range(100):
                output.out("x" * 100)
            await asyncio.sleep(0)

    try:
        asyncio.run(flood())
        assert output.closed
        assert stops == [1]
    finally:
        stdout.close()


def test_a_json_text_delta_is_the_generic_line(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    alphabet = [chr(c) for c in (*range(0, 0x80), 0xE9, 0x2028, 0x2029, 0x85, 0x9B, 0xD800,
                                 0xDFFF, 0x1F600, 0xFFFD)]
    texts = ["", "plain", '"quoted" \\ and\nnewline'] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20))) for _ in range(500)]
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    printer = JsonPrinter()
    events = [TextDelta("ai-agent-stream-x", text=t) for t in texts]
    for event in events:
        printer(event)
    printer(Done("ai-agent-stream-x"))
    expected = "".join(json_line(to_dict(e)) + "\n" for e in [*events, Done("ai-agent-stream-x")])
    assert out.getvalue() == expected
