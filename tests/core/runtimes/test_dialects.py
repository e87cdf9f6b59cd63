"""Codex, Gemini, opencode and Qwen dialects against real captured CLI output and garbage.

The captures (tests/fixtures/<cli>/) are the real CLIs' stdout against a scripted loopback model
server, so model text ("Hello from the fake model!", "I'll run it.") is scripted and everything
else is what the CLI prints. The runner tests replay the same files from a real process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TypeVar

import pytest
from helpers import assert_run_gone, async_test, parse_fixture, start_run, text_of, wait_pidfile
from hypothesis import given, settings
from hypothesis import strategies as st

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

E = TypeVar("E", bound=Event)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REPLAY = Path(__file__).resolve().parents[2] / "fakes" / "replay_agent.py"
SID = "ai-agent-stream-test"
DIALECTS = {"codex": "codex-exec-json", "gemini": "gemini-stream-json",
            "opencode": "opencode-json", "qwen": "qwen-stream-json"}


def parse(name: str, protocol: str | None = None) -> tuple[list[Event], Outcome | None]:
    cli = name.split("_", 1)[0]
    return parse_fixture(cli, name, protocol or DIALECTS[cli], SID)


def of(events: list[Event], cls: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, cls)]


# --- Codex ------------------------------------------------------------------------------------


def test_codex_text() -> None:
    events, outcome = parse("codex_text.jsonl")
    assert events[0] == Init(SID, agent="codex", session_id="01a23647-ee55-7701-a1d6-1da6d7706acc")
    assert text_of(events) == "Hello from the fake model!"
    assert of(events, Usage) == [Usage(SID, input_tokens=10, output_tokens=5, cache_read_tokens=0,
                                       cache_write_tokens=0)]
    assert outcome == Outcome("end_turn")
    assert not of(events, Diagnostic)


def test_codex_tool() -> None:
    events, outcome = parse("codex_echo.jsonl")
    assert isinstance(events[0], Init)
    assert events[0].session_id == "01a23647-f07a-76b3-bd4e-7e30e13876c2"
    start, = of(events, ToolStart)
    done, = of(events, ToolDone)
    assert (start.tool_id, start.name) == ("item_0", "command_execution")
    assert start.input == {"command": "/bin/bash -lc 'echo hi-from-tool'"}
    assert (done.tool_id, done.output, done.is_error) == ("item_0", "hi-from-tool\n", False)
    assert events.index(start) < events.index(done)
    assert text_of(events).startswith("Tool finished: ")
    assert of(events, Usage)[0].input_tokens == 20
    assert outcome == Outcome("end_turn")


def test_codex_401_is_the_turn_error_not_a_diagnostic_too() -> None:
    events, outcome = parse("codex_401.jsonl")
    assert outcome is not None and outcome.stop_reason == "error"
    assert outcome.error is not None
    assert outcome.error.startswith("unexpected status 401 Unauthorized: Incorrect API key")
    diags = [d.message for d in of(events, Diagnostic)]
    # The model-metadata warning (an `error` item) is a diagnostic; the 401 only the outcome.
    assert len(diags) == 1 and "Model metadata for `fake-model` not found" in diags[0]
    assert not of(events, TextDelta)


def test_codex_interrupted_tool_has_no_outcome() -> None:
    events, outcome = parse("codex_native_sleep_INT.jsonl")
    start, = of(events, ToolStart)
    assert start.input == {"command": "/bin/bash -lc 'echo started; sleep 300; echo finished'"}
    assert not of(events, ToolDone)
    assert outcome is None


def test_codex_unreachable_retries_are_diagnostics() -> None:
    events, outcome = parse("codex_unreach.jsonl")
    retries = [d for d in of(events, Diagnostic) if "Reconnecting" in d.message]
    assert len(retries) == 4  # the last one is held back until stdout ends, then shown
    assert outcome is None


def test_codex_failed_command_and_reasoning() -> None:
    rt = make_runtime("codex-exec-json", SID, "codex")
    out = rt.feed(json.dumps({"type": "item.completed", "item": {
        "id": "item_3", "type": "command_execution", "command": "false", "aggregated_output": "",
        "exit_code": 1, "status": "failed"}}))
    assert [type(e) for e in out] == [ToolStart, ToolDone]
    assert isinstance(out[1], ToolDone) and out[1].is_error
    out = rt.feed('{"type":"item.completed","item":{"id":"r","type":"reasoning","text":"hmm"}}')
    assert out == [ThinkingDelta(SID, text="hmm")]
    rt.feed('{"type":"error","message":"boom"}')
    assert rt.feed("") == []  # a blank line keeps the error held back
    assert rt.feed('{"type":"turn.failed","error":{"message":"boom"}}') == []
    assert rt.outcome() == Outcome("error", error="boom")


# --- Gemini -----------------------------------------------------------------------------------


def test_gemini_text_skips_the_prompt_echo() -> None:
    events, outcome = parse("gemini_text.jsonl")
    assert events[0] == Init(SID, agent="gemini", session_id="32bf52f9-83bf-4d92-b075-ede78f0e24ca")
    assert text_of(events) == "Hello from the fake model!"
    assert of(events, Usage) == [Usage(SID, input_tokens=20, output_tokens=10)]
    assert outcome == Outcome("end_turn")


def test_gemini_tool() -> None:
    events, outcome = parse("gemini_echo.jsonl")
    start, = of(events, ToolStart)
    done, = of(events, ToolDone)
    assert start.tool_id == "run_shell_command__run_shell_command_1796207040175_0"
    assert start.name == "run_shell_command"
    assert start.input == {"command": "echo hi-from-tool", "description": "run echo hi-from-tool"}
    assert (done.tool_id, done.output, done.is_error) == (start.tool_id, "hi-from-tool", False)
    assert text_of(events).startswith("I'll run it.Tool finished: ")
    assert outcome == Outcome("end_turn")


def test_gemini_401() -> None:
    events, outcome = parse("gemini_401.jsonl")
    assert outcome is not None and outcome.stop_reason == "error"
    assert outcome.error is not None
    assert "401" in outcome.error and "API key not valid (fake)" in outcome.error
    assert not of(events, Usage) and not of(events, TextDelta)


def test_gemini_sigterm_mid_tool_has_no_outcome() -> None:
    events, outcome = parse("gemini_sleep_TERM.jsonl")
    assert [s.input["command"] for s in of(events, ToolStart)] == ["echo started; sleep 300; echo finished"]
    assert outcome is None


def test_gemini_failed_tool() -> None:
    rt = make_runtime("gemini-stream-json", SID, "gemini")
    out = rt.feed('{"type":"tool_result","tool_id":"t","status":"error",'
                  '"error":{"type":"x","message":"denied"}}')
    assert out == [ToolDone(SID, tool_id="t", output="denied", is_error=True)]


# --- opencode ---------------------------------------------------------------------------------


def test_opencode_text() -> None:
    events, outcome = parse("opencode_text.jsonl")
    assert events[0] == Init(SID, agent="opencode", session_id="ses_dc9b176cfffeByzojPg2lGstqN")
    assert len(of(events, Init)) == 1
    assert text_of(events) == "Hello from the fake model!"
    assert of(events, Usage) == [Usage(SID, input_tokens=10, output_tokens=5, cost_usd=0.0)]
    assert outcome == Outcome("end_turn")


def test_opencode_tool_over_two_steps() -> None:
    events, outcome = parse("opencode_echo.jsonl")
    assert len(of(events, Init)) == 1
    start, = of(events, ToolStart)
    done, = of(events, ToolDone)
    assert (start.tool_id, start.name) == ("call_fake_6f046ca4f7", "bash")
    assert start.input == {"command": "echo hi-from-tool", "description": "run echo hi-from-tool"}
    assert (done.tool_id, done.output, done.is_error) == (start.tool_id, "hi-from-tool\n", False)
    assert text_of(events) == "I'll run it.Tool finished: hi-from-tool "
    # Usage is cumulative over the steps: the chat shows the latest one.
    assert [(u.input_tokens, u.output_tokens) for u in of(events, Usage)] == [(10, 5), (20, 10)]
    assert outcome == Outcome("end_turn")


def test_opencode_401() -> None:
    events, outcome = parse("opencode_401.jsonl")
    assert events == [Init(SID, agent="opencode", session_id="ses_dc9b0ae6cffel4D25mh7lhoeoR")]
    assert outcome == Outcome("error", error="Incorrect API key provided (fake) (HTTP 401)")


def test_opencode_tool_error_and_tool_calls_step_is_not_final() -> None:
    rt = make_runtime("opencode-json", SID, "opencode")
    out = rt.feed('{"type":"tool_use","part":{"tool":"bash","callID":"c","state":'
                  '{"status":"error","input":{"command":"x"},"error":"no such command"}}}')
    assert out[1] == ToolDone(SID, tool_id="c", output="no such command", is_error=True)
    rt.feed('{"type":"step_finish","part":{"reason":"tool-calls","tokens":{"input":1,"output":2}}}')
    assert rt.outcome() is None


# --- Qwen -------------------------------------------------------------------------------------


def test_qwen_text() -> None:
    events, outcome = parse("qwen_text.jsonl")
    assert events[0] == Init(SID, agent="qwen", session_id="4c79b9c2-f81f-4ce5-b201-44442c57540b")
    assert text_of(events) == "Hello from the fake model!"
    # Each API message's usage as it comes (the turn's total so far), then the result's total.
    assert [(u.input_tokens, u.output_tokens) for u in of(events, Usage)] == [(10, 5), (20, 10)]
    # the context at the last API message (10 in, 5 out); the result's totals do not change it
    assert [u.context_tokens for u in of(events, Usage)] == [15, 15]
    assert outcome == Outcome("end_turn")
    assert not of(events, Diagnostic)  # Qwen's goal_state stream_event is ignored


def test_qwen_tool() -> None:
    events, outcome = parse("qwen_echo.jsonl")
    start, = of(events, ToolStart)
    done, = of(events, ToolDone)
    assert (start.tool_id, start.name) == ("call_fake_ae75581489", "run_shell_command")
    assert start.input["command"] == "echo hi-from-tool"
    assert (done.tool_id, done.output, done.is_error) == (start.tool_id, "hi-from-tool", False)
    assert outcome == Outcome("end_turn")


def test_qwen_401_reads_error_message() -> None:
    events, outcome = parse("qwen_401.jsonl")
    assert outcome == Outcome("error", error="[API Error: 401 Incorrect API key provided (fake)]")
    # Claude's parser alone would only say "agent reported an error (error_during_execution)".
    _, claude = parse("qwen_401.jsonl", "claude-stream-json")
    assert claude is not None and "401" not in (claude.error or "")
    assert "401" in text_of(events)


def test_qwen_sigterm_cancels_the_tool() -> None:
    events, outcome = parse("qwen_direct_sleep_TERM.jsonl")
    done, = of(events, ToolDone)
    assert done.is_error and done.output.startswith("[Operation Cancelled]")
    assert outcome is None


# --- garbage ----------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", sorted(DIALECTS.values()))
def test_junk_lines_are_diagnostics(protocol: str) -> None:
    rt = make_runtime(protocol, SID, "x")
    for junk in ("not json", "[1,2]", '{"type":"item.completed","item":"x"}', '{"type":"tool_',
                 '{"type":"tool_use","part":3}', '{"type":"tool_result","status":"success"}',
                 '{"type":"message","role":"assistant","content":{"a":1}}',
                 '{"type":"text","part":{"text":5}}', '{"type":"assistant","message":"x"}'):
        out = rt.feed(junk)
        if protocol == "codex-exec-json":
            out += rt.finish()
        assert all(isinstance(e, Diagnostic) for e in out), (junk, out)
        if junk in ("not json", "[1,2]", '{"type":"tool_'):
            assert len(out) == 1, junk
    assert rt.feed("") == []
    assert rt.feed('{"type":"something_new"}') == []
    assert rt.feed("[" * 100_000 + "]" * 100_000)[0].kind == "diagnostic"


def _json_values() -> st.SearchStrategy[object]:
    keys = ["type", "item", "part", "state", "message", "content", "role", "text", "tool_id",
            "tool_name", "parameters", "status", "output", "error", "data", "stats", "usage",
            "tokens", "reason", "exit_code", "aggregated_output", "thread_id", "session_id",
            "sessionID", "callID", "tool", "input", "result", "is_error"]
    scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
               | st.text(max_size=10)
               | st.sampled_from(["thread.started", "item.started", "item.completed", "error",
                                  "turn.completed", "turn.failed", "init", "message", "tool_use",
                                  "tool_result", "result", "step_start", "step_finish", "text",
                                  "assistant", "user", "success", "completed", "stop"]))
    return st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                        | st.dictionaries(st.sampled_from(keys), children, max_size=6),
                        max_leaves=25)


@pytest.mark.parametrize("protocol", sorted(DIALECTS.values()))
@settings(max_examples=300, deadline=None)
@given(values=st.lists(_json_values(), max_size=4))
def test_generated_json_never_crashes(protocol: str, values: list[object]) -> None:
    rt = make_runtime(protocol, SID, "x")
    for value in values:
        for event in rt.feed(json.dumps(value)):
            assert event.stream_id == SID
    rt.finish()
    rt.outcome()


@pytest.mark.parametrize("protocol", sorted(DIALECTS.values()))
@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=300))
def test_generated_bytes_never_crash(protocol: str, data: bytes) -> None:
    rt = make_runtime(protocol, SID, "x")
    rt.feed(data.decode("utf-8", errors="replace"))
    rt.finish()


# --- manifests --------------------------------------------------------------------------------


def test_builtin_manifests_for_the_dialects() -> None:
    adapters = load_adapters(user_dir=Path("/nonexistent"))
    assert adapters.errors == []
    for ident, protocol in DIALECTS.items():
        manifest = adapters.get(ident)
        assert manifest.protocol == protocol and manifest.protocol in RUNTIMES
        assert manifest.version_command == (manifest.command[0], "--version")
        assert manifest.install_hint.startswith("npm install -g ")
        assert any("{prompt}" in part for part in manifest.command)
    assert adapters.get("qwen").env == {"QWEN_CODE_NO_RELAUNCH": "true"}
    assert adapters.get("codex").stop.polite == "sigint"
    assert adapters.get("gemini").stop.polite == "sigterm"
    assert adapters.get("codex").resume == ()


# --- through the real runner ------------------------------------------------------------------


def replay_manifest(cli: str, fixture: str, *extra: str) -> Manifest:
    return Manifest(id=f"replay-{cli}", name=f"Replayed {cli}", protocol=DIALECTS[cli],
                    command=(sys.executable, str(REPLAY), str(FIXTURES / cli / fixture), *extra,
                             "{prompt}"),
                    stop=StopPolicy(polite="sigint", polite_window_ms=300))


RUNS = [
    ("codex", "codex_echo.jsonl", ["init", "tool_start", "tool_done", "text_delta", "usage"], "end_turn"),
    ("codex", "codex_401.jsonl", ["init", "diagnostic", "error"], "error"),
    ("gemini", "gemini_echo.jsonl",
     ["init", "text_delta", "tool_start", "tool_done", "text_delta", "usage"], "end_turn"),
    ("gemini", "gemini_401.jsonl", ["init", "error"], "error"),
    ("opencode", "opencode_echo.jsonl",
     ["init", "text_delta", "tool_start", "tool_done", "usage", "text_delta", "usage"], "end_turn"),
    ("opencode", "opencode_401.jsonl", ["init", "error"], "error"),
    ("qwen", "qwen_echo.jsonl",
     ["init", "text_delta", "usage", "tool_start", "tool_done", "usage", "text_delta", "usage"],
     "end_turn"),
    ("qwen", "qwen_401.jsonl", ["init", "text_delta", "usage", "error"], "error"),
]


@pytest.mark.parametrize(("cli", "fixture", "kinds", "reason"), RUNS)
@async_test
async def test_replayed_run_through_the_runner(cli: str, fixture: str, kinds: list[str],
                                               reason: str) -> None:
    run = start_run(replay_manifest(cli, fixture))
    done = await run.finish()
    assert run.collector.kinds() == [*kinds, "done"]
    assert done.stop_reason == reason and done.exit_code == 0  # status from the last event
    if reason == "error":
        error, = run.collector.of("error")
        assert isinstance(error, Error) and "401" in error.message
    else:
        assert isinstance(run.collector.events[0], Init) and run.collector.events[0].session_id
    assert_run_gone(run.stream_id)


@pytest.mark.parametrize("cli", sorted(DIALECTS))
@async_test
async def test_abort_mid_tool_through_the_runner(cli: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    run = start_run(replay_manifest(cli, f"{cli}_echo.jsonl", "--hang"),
                    env={"FAKE_PIDFILE": str(pidfile)})
    procs = await wait_pidfile(pidfile)
    await run.wait_for_kind("tool_start")
    assert run.abort() is True
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert done.survivors == ()
    assert "error" not in run.collector.kinds()
    assert isinstance(run.collector.events[0], Init)
    assert_run_gone(run.stream_id, procs)


@async_test
async def test_codex_last_held_error_reaches_the_chat_when_stdout_ends() -> None:
    run = start_run(replay_manifest("codex", "codex_unreach.jsonl"))
    done = await run.finish()
    retries = [e for e in run.collector.events
               if isinstance(e, Diagnostic) and e.source == "stdout" and "Reconnecting" in e.message]
    assert len(retries) == 4
    error, = run.collector.of("error")
    assert isinstance(error, Error) and "without a final result" in error.message
    assert run.collector.events.index(retries[-1]) < run.collector.events.index(error)
    assert done.stop_reason == "error"
