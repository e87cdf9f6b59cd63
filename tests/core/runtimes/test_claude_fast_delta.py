"""The Claude dialect reads the text of a usual text-delta line without parsing the whole line
(tolaria/core/runtimes/claude.py, ``_text_delta``): for any line, what it gives is exactly what
the JSON path gives (the same events, the same diagnostic for a broken line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tolaria.core.events import Event, TextDelta
from tolaria.core.runtimes.claude import ClaudeStreamJson, _text_delta
from tolaria.core.runtimes.jsonl import JsonLinesRuntime

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude"
HEAD = '{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":'
TAIL = (',"session_id":"368300af-edb8-49cf-91b7-e04250d25a47","parent_tool_use_id":null,'
        '"uuid":"63e0043a-edc2-4d48-bc84-098285ed8032","api_message_id":"msg_fake_1"}')


def delta(text_json: str, tail: str = TAIL, head: str = HEAD) -> str:
    return f'{head}{{"type":"text_delta","text":{text_json}}}}}{tail}'


#: Lines of the usual shape: read by the fast path.
USUAL = [
    delta('"Hello "'),
    delta(json.dumps("é → 😀 \n\t\"quoted\" \\ back", ensure_ascii=False)),
    delta(json.dumps("é → 😀 \n\t\"quoted\" \\ back")),  # \u escapes
    delta('"\\ud800 lone"'),  # a lone surrogate, as JSON allows
    delta('""'),
    delta('"x"', tail="}"),
    delta('"x"', tail=',"parent_tool_use_id":"toolu_01"}'),
    delta('"x"', head=HEAD.replace('"index":0', '"index":12')),
    delta('"x"', tail=',"uuid":"a","uuid":"b"}'),  # a repeated key the dialect does not read
]
#: Lines that look alike but must take the JSON path (and give what it gives).
UNUSUAL = [
    delta('"x"', tail=',"type":"assistant"}'),  # a repeated key that matters
    delta('"x"', tail=',"event":{"type":"message_start"}}'),
    delta('"x"', tail=',"request_id":"r"}'),  # a key the fast path does not know
    delta('"x"', tail=',"uuid":"a\\"b"}'),  # an escape in the tail
    delta('"x"', tail=',"uuid":"a\x01b"}'),  # a raw control character: not JSON
    delta('"x"', tail=',"uuid":1}'),
    delta('"x"', tail=TAIL + " "),  # trailing space
    delta('"x"', tail=TAIL[:-1]),  # unterminated object
    delta('"x"', tail=TAIL + "}"),  # extra data
    delta('"a\x01b"'),  # raw control character in the text
    delta('"bad \\q escape"'),
    delta('"unterminated'),
    delta('"x","extra":1'),
    delta('"x"', head=HEAD.replace('"index":0', '"index":01')),
    delta('"x"', head=HEAD.replace('"index":0', '"index":-1')),
    delta('"x"', head=HEAD.replace('"index":0', '"index":0.5')),
    " " + delta('"x"'),
    delta('"x"').replace('"type":"text_delta"', '"type":"thinking_delta"'),
    delta('"x"').replace('{"type":"stream_event",', '{"type":"stream_event" ,'),
]


def both(line: str) -> tuple[list[Event], list[Event]]:
    fast = ClaudeStreamJson("s", "claude")
    slow = ClaudeStreamJson("s", "claude")
    return fast.feed(line), JsonLinesRuntime.feed(slow, line)


@pytest.mark.parametrize("line", USUAL)
def test_a_usual_delta_is_read_fast_and_the_same(line: str) -> None:
    assert _text_delta(line) is not None
    fast, slow = both(line)
    assert fast == slow
    assert len(fast) == 1 and isinstance(fast[0], TextDelta)


@pytest.mark.parametrize("line", UNUSUAL)
def test_an_unusual_line_gives_what_the_json_path_gives(line: str) -> None:
    assert _text_delta(line) is None
    fast, slow = both(line)
    assert fast == slow


def test_every_captured_claude_line_gives_the_same_events() -> None:
    lines = [line for path in sorted(FIXTURES.glob("*.jsonl"))
             for line in path.read_text().splitlines()]
    fast_runtime, slow_runtime = ClaudeStreamJson("s", "claude"), ClaudeStreamJson("s", "claude")
    fast = [e for line in lines for e in fast_runtime.feed(line)]
    slow = [e for line in lines for e in JsonLinesRuntime.feed(slow_runtime, line)]
    assert fast == slow
    assert sum(_text_delta(line) is not None for line in lines) >= 5  # the fast path was used


def test_a_delta_clears_a_retry_as_before() -> None:
    runtime = ClaudeStreamJson("s", "claude")
    runtime.mark_retrying("API retry 1 of 10")
    runtime.feed(USUAL[0])
    assert runtime.retrying is None
