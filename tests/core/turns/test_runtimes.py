"""Dialect parsers against real captured CLI output and generated garbage."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import text_of
from hypothesis import given, settings
from hypothesis import strategies as st

from tolaria.core.events import (
    Diagnostic,
    Event,
    Init,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    Usage,
)
from tolaria.core.runtimes import make_runtime
from tolaria.core.runtimes.base import Outcome

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude"
SID = "ai-agent-stream-test"


def parse(name: str) -> tuple[list[Event], Outcome | None]:
    rt = make_runtime("claude-stream-json", SID, "claude")
    events: list[Event] = []
    for line in (FIXTURES / name).read_text().splitlines():
        events.extend(rt.feed(line))
    return events, rt.outcome()


def test_plain_text_turn() -> None:
    events, outcome = parse("claude_text.jsonl")
    assert isinstance(events[0], Init)
    assert events[0].session_id == "178d65b4-e1b5-4947-a02b-14aea79470d9"
    assert text_of(events) == "Hello from the fake model!"
    # One Usage per API message as it streams (the turn so far, no cost yet), then the
    # result's total with its cost: the last one is the turn's (limits watch the first ones).
    usage = [e for e in events if isinstance(e, Usage)]
    assert [(u.input_tokens, u.output_tokens) for u in usage] == [(10, 1), (10, 12)]
    assert usage[0].cost_usd is None
    assert usage[-1].cost_usd is not None and usage[-1].cost_usd > 0
    assert outcome is not None and outcome.stop_reason == "end_turn" and outcome.error is None
    assert all(e.stream_id == SID for e in events)


def test_tool_turn() -> None:
    events, outcome = parse("claude_echo.jsonl")
    starts = [e for e in events if isinstance(e, ToolStart)]
    dones = [e for e in events if isinstance(e, ToolDone)]
    assert [s.name for s in starts] == ["Bash"]
    assert starts[0].input["command"] == "echo hi-from-tool"
    assert dones[0].tool_id == starts[0].tool_id and dones[0].output == "hi-from-tool"
    assert not dones[0].is_error
    assert events.index(starts[0]) < events.index(dones[0])
    assert "Tool finished" in text_of(events)
    assert outcome is not None and outcome.stop_reason == "end_turn"


def test_partial_messages_are_not_duplicated() -> None:
    events, outcome = parse("claude_partial.jsonl")
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["Hello ", "from ", "the ", "fake ", "model!"]
    assert outcome is not None and outcome.stop_reason == "end_turn"


def test_interrupt_reads_cancelled() -> None:
    events, outcome = parse("claude_sleep_INT.jsonl")
    dones = [e for e in events if isinstance(e, ToolDone)]
    assert dones and dones[0].is_error
    assert outcome is not None and outcome.stop_reason == "cancelled"


def test_sigterm_leaves_no_outcome() -> None:
    _, outcome = parse("claude_sleep_TERM.jsonl")
    assert outcome is None


def test_api_errors_are_errors_even_with_subtype_success() -> None:
    for name, needle in (("claude_401.jsonl", "Invalid API key"),
                         ("claude_unreach.jsonl", "Connection refused")):
        events, outcome = parse(name)
        assert outcome is not None and outcome.stop_reason == "error"
        assert needle in (outcome.error or "")
        assert needle in text_of(events)


def test_thinking_and_diagnostics() -> None:
    rt = make_runtime("claude-stream-json", SID, "claude")
    out = rt.feed(json.dumps({"type": "assistant", "message": {"id": "m1", "content": [
        {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "ok"}]}}))
    assert [type(e) for e in out] == [ThinkingDelta, TextDelta]
    out = rt.feed(json.dumps({"type": "stream_event", "event": {
        "type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "t"}}}))
    assert out == [ThinkingDelta(SID, text="t")]
    for junk in ("not json", "[1,2]", '{"type":"assistant","message":"x"}', '{"type":"assist',
                 '{"type":"user","message":{"content":[{"type":"tool_result"}]}}'):
        out = rt.feed(junk)
        assert len(out) == 1 and isinstance(out[0], Diagnostic), junk
    assert rt.feed("") == []
    assert rt.feed('{"type":"something_new"}') == []


def test_lines_runtime() -> None:
    rt = make_runtime("lines", SID, "aider")
    assert rt.feed("hello") == [TextDelta(SID, text="hello\n")]
    assert rt.outcome() is None and rt.trusts_exit_code


def _json_values() -> st.SearchStrategy[object]:
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
        lambda children: st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["type", "message", "content", "event", "delta", "id",
                                           "text", "subtype", "is_error", "usage", "result",
                                           "tool_use_id", "input", "session_id"]), children,
                          max_size=5),
        max_leaves=20,
    )


@settings(max_examples=400, deadline=None)
@given(_json_values())
def test_generated_json_never_crashes(value: object) -> None:
    rt = make_runtime("claude-stream-json", SID, "claude")
    for event in rt.feed(json.dumps(value)):
        assert event.stream_id == SID


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_generated_bytes_never_crash(data: bytes) -> None:
    rt = make_runtime("claude-stream-json", SID, "claude")
    rt.feed(data.decode("utf-8", errors="replace"))


def test_deep_nesting_is_a_diagnostic() -> None:
    rt = make_runtime("claude-stream-json", SID, "claude")
    out = rt.feed("[" * 100_000 + "]" * 100_000)
    assert len(out) == 1 and isinstance(out[0], Diagnostic)
