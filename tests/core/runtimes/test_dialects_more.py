"""Cursor Agent and pi dialects, from fixtures written after their documentation.

Unlike the other dialects' fixtures these are NOT captured output (see
tests/fixtures/cursor/README.md and tests/fixtures/pi/README.md): they pin down what Tolaria
makes of the documented event shapes. The runner tests replay them from a real process.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import assert_run_gone, async_test, parse_fixture, start_run, text_of

from tolaria.core.adapters.manifest import Manifest, StopPolicy, load_adapters
from tolaria.core.events import (
    Diagnostic,
    Error,
    Event,
    Init,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    Usage,
)
from tolaria.core.runtimes import RUNTIMES, make_runtime
from tolaria.core.runtimes.base import Outcome

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REPLAY = Path(__file__).resolve().parents[2] / "fakes" / "replay_agent.py"
SID = "ai-agent-stream-test"
DIALECTS = {"cursor": "cursor-stream-json", "pi": "pi-json"}


def parse(name: str) -> tuple[list[Event], Outcome | None]:
    cli = name.split("_", 1)[0]
    return parse_fixture(cli, name, DIALECTS[cli], SID)


# --- Cursor -----------------------------------------------------------------------------------


def test_cursor_text() -> None:
    events, outcome = parse("cursor_text.jsonl")
    assert events[0] == Init(SID, agent="cursor", session_id="c6b62c6f-7ead-4fd6-9922-e952131177ff")
    assert text_of(events) == "Hello from the fake model! Anything else?"  # the user echo is not
    assert outcome == Outcome("end_turn")


def test_cursor_tools_and_thinking() -> None:
    events, outcome = parse("cursor_echo.jsonl")
    assert [e.kind for e in events] == ["init", "thinking_delta", "text_delta", "tool_start",
                                        "tool_done", "tool_start", "tool_done", "text_delta"]
    assert [e.text for e in events if isinstance(e, ThinkingDelta)] == ["I should run it."]
    shell_start, read_start = (e for e in events if isinstance(e, ToolStart))
    assert (shell_start.tool_id, shell_start.name) == ("toolu_01", "shell")
    assert shell_start.input == {"command": "echo hi", "workingDirectory": ""}
    assert (read_start.name, read_start.input) == ("read", {"path": "missing.txt"})
    shell_done, read_done = (e for e in events if isinstance(e, ToolDone))
    assert shell_done == ToolDone(SID, tool_id="toolu_01", output="hi\n", is_error=False)
    assert read_done.tool_id == "toolu_02" and read_done.is_error
    assert "File not found" in read_done.output
    assert outcome == Outcome("end_turn")


def test_cursor_error_result() -> None:
    events, outcome = parse("cursor_error.jsonl")
    assert [e.kind for e in events] == ["init"]
    assert outcome == Outcome("error", error="Authentication failed: invalid API key")


def test_cursor_tool_completed_without_start_and_odd_shapes() -> None:
    rt = make_runtime("cursor-stream-json", SID, "cursor")
    events = rt.feed('{"type":"tool_call","subtype":"completed","call_id":"c9","tool_call":'
                     '{"function":{"name":"grep","arguments":"{\\"q\\": 1}","result":"3 hits"}}}')
    assert events == [ToolStart(SID, tool_id="c9", name="grep", input={"q": 1}),
                      ToolDone(SID, tool_id="c9", output="3 hits", is_error=False)]
    for bad in ('{"type":"tool_call","subtype":"started","tool_call":"shell"}',
                '{"type":"tool_call","subtype":"started","tool_call":{}}'):
        diag, = rt.feed(bad)
        assert isinstance(diag, Diagnostic) and "tool_call" in diag.message
    assert rt.feed('{"type":"tool_call","subtype":"progress","call_id":"x",'
                   '"tool_call":{"shellToolCall":{}}}') == []
    assert rt.feed('{"type":"thinking","subtype":"completed"}') == []


# --- pi ---------------------------------------------------------------------------------------


def test_pi_text() -> None:
    events, outcome = parse("pi_text.jsonl")
    assert events == [Init(SID, agent="pi", session_id="1f9d3c2e-8a7b-4c6d-9e0f-a1b2c3d4e5f6"),
                      TextDelta(SID, text="Hello"), TextDelta(SID, text=" from the fake model!"),
                      Usage(SID, input_tokens=12, output_tokens=6, cost_usd=0.0003)]
    assert outcome == Outcome("end_turn")


def test_pi_tool_round() -> None:
    events, outcome = parse("pi_echo.jsonl")
    assert [e.kind for e in events] == ["init", "thinking_delta", "text_delta", "tool_start",
                                        "tool_done", "text_delta", "usage"]
    assert text_of(events) == "I'll run it.It printed hi."
    start = next(e for e in events if isinstance(e, ToolStart))
    assert (start.tool_id, start.name, start.input) == ("call_1", "bash", {"command": "echo hi"})
    assert next(e for e in events if isinstance(e, ToolDone)) == ToolDone(
        SID, tool_id="call_1", output="hi\n", is_error=False)
    usage = events[-1]
    assert isinstance(usage, Usage) and (usage.input_tokens, usage.output_tokens) == (60, 15)
    assert usage.cost_usd == pytest.approx(0.003)
    assert outcome == Outcome("end_turn")


def test_pi_error() -> None:
    events, outcome = parse("pi_error.jsonl")
    assert [e.kind for e in events] == ["init", "diagnostic", "usage"]
    assert "429 rate limited" in events[1].message  # type: ignore[attr-defined]
    assert outcome == Outcome("error", error="401 Unauthorized: invalid x-api-key")


def test_pi_aborted_and_unstreamed_message() -> None:
    rt = make_runtime("pi-json", SID, "pi")
    rt.feed('{"type":"message_start","message":{"role":"assistant","content":[]}}')
    events = rt.feed('{"type":"message_end","message":{"role":"assistant","stopReason":"aborted",'
                     '"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"par"}]}}')
    assert events == [ThinkingDelta(SID, text="hm"), TextDelta(SID, text="par")]
    assert rt.outcome() is None  # not over until agent_end
    rt.feed('{"type":"agent_end","messages":[]}')
    assert rt.outcome() == Outcome("cancelled")


def test_pi_without_agent_end_has_no_outcome() -> None:
    rt = make_runtime("pi-json", SID, "pi")
    rt.feed('{"type":"session","id":"s"}')
    diag, = rt.feed('{"type":"message_update","assistantMessageEvent":"text"}')
    assert isinstance(diag, Diagnostic)
    assert rt.outcome() is None


# --- manifests and the real runner ------------------------------------------------------------


def test_manifests_use_these_dialects() -> None:
    adapters = load_adapters(user_dir=Path("/nonexistent"))
    assert adapters.errors == []
    for ident, protocol in DIALECTS.items():
        manifest = adapters.get(ident)
        assert manifest.protocol == protocol and protocol in RUNTIMES
        assert manifest.version_command == (manifest.command[0], "--version")
        assert manifest.stop.polite == "sigint"
    assert adapters.get("pi").takes_prompt_on_stdin
    assert adapters.get("cursor").command[-2:] == ("--", "{prompt}")


RUNS = [
    ("cursor", "cursor_echo.jsonl", "end_turn"),
    ("cursor", "cursor_error.jsonl", "error"),
    ("pi", "pi_echo.jsonl", "end_turn"),
    ("pi", "pi_error.jsonl", "error"),
]


@pytest.mark.parametrize(("cli", "fixture", "reason"), RUNS)
@async_test
async def test_replayed_run_through_the_runner(cli: str, fixture: str, reason: str) -> None:
    manifest = Manifest(id=f"replay-{cli}", name=f"Replayed {cli}", protocol=DIALECTS[cli],
                        command=(sys.executable, str(REPLAY), str(FIXTURES / cli / fixture)),
                        stop=StopPolicy(polite="sigint", polite_window_ms=300))
    run = start_run(manifest, "-- a prompt on stdin")
    done = await run.finish()
    events, _ = parse(fixture)
    assert run.collector.kinds() == [*(e.kind for e in events),
                                     *(["error"] if reason == "error" else []), "done"]
    assert done.stop_reason == reason and done.exit_code == 0
    if reason == "error":
        error, = run.collector.of("error")
        assert isinstance(error, Error) and error.message
    assert isinstance(run.collector.events[0], Init) and run.collector.events[0].session_id
    assert_run_gone(run.stream_id)
