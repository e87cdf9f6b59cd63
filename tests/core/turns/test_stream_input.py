"""Claude Code's streaming input: the prompt as a stdin user message, the in-band interrupt as
the polite stop (tolaria/core/turns/stream_input.py, docs/adr/0007-claude-stream-input.md).

Parser tests run on the real capture (tests/fixtures/claude/claude_streamin.jsonl, with what was
written to Claude's stdin in claude_streamin.stdin.jsonl); runner tests drive
tests/fakes/fake_claude_stream.py, a real child process replaying that capture, which runs its
tool (``sleep 300``) in its own session like Claude does.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import (
    Collector,
    LiveRun,
    assert_run_gone,
    async_test,
    start_run,
    wait_pidfile,
)

from tolaria.core.adapters.manifest import (
    Manifest,
    ManifestError,
    StopPolicy,
    load_adapters,
    parse_manifest,
)
from tolaria.core.events import Diagnostic, Error, Init, TextDelta, ToolDone, ToolStart, Usage
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.runtimes import make_runtime
from tolaria.core.runtimes.base import Outcome
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent
from tolaria.core.turns.stream_input import StreamInputTurn, interrupt_request, user_message

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude"
FAKE = Path(__file__).resolve().parents[2] / "fakes" / "fake_claude_stream.py"
SID = "ai-agent-stream-test"
SESSION = "f01a032f-daed-4fdc-bf93-95fc1f53f8d3"
HOSTILE = 'say "hi" \\ $(touch /tmp/pwned) `id`\nsecond line\ttab {prompt} {cwd} ünï 🚀 \u2028'


def stream_manifest(*flags: str, polite: str = "interrupt", window_ms: int = 400,
                    resume: tuple[str, ...] = ("--resume", "{session_id}")) -> Manifest:
    return Manifest(id="fake-claude-stream", name="Fake Claude (stream input)",
                    protocol="claude-stream-json", input="claude-stream-json",
                    command=(sys.executable, str(FAKE), *flags),
                    stop=StopPolicy(polite=polite, polite_window_ms=window_ms), resume=resume)


def log_env(tmp_path: Path) -> dict[str, str]:
    return {"FAKE_LOG": str(tmp_path), "FAKE_PIDFILE": str(tmp_path / "pids")}


def stdin_lines(tmp_path: Path) -> list[str]:
    return (tmp_path / "stdin.jsonl").read_text().splitlines()


# --- the real capture ----------------------------------------------------------------------


def test_user_and_interrupt_lines_are_exactly_what_claude_was_sent() -> None:
    written = (FIXTURES / "claude_streamin.stdin.jsonl").read_text().splitlines()
    assert user_message("RUN_SLEEP") == (written[0] + "\n").encode()
    assert user_message("Say hello") == (written[2] + "\n").encode()
    assert interrupt_request("req_int_1") == (written[1] + "\n").encode()


def test_user_line_keeps_any_prompt_verbatim_on_one_line() -> None:
    line = user_message(HOSTILE)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["message"]["content"] == HOSTILE
    assert json.loads(user_message("\ud800 lone surrogate"))["message"]["content"] \
        == "\ud800 lone surrogate"


def test_capture_parses_into_two_turns() -> None:
    """Turn 1 is interrupted during its tool (cancelled), turn 2 ends normally; the
    control_response line is silent (no event, no diagnostic)."""
    lines = (FIXTURES / "claude_streamin.jsonl").read_text().splitlines()
    rt = make_runtime("claude-stream-json", SID, "claude")
    first = [e for line in lines[:7] for e in rt.feed(line)]
    assert rt.outcome() == Outcome("cancelled")
    assert rt.feed(lines[3]) == []  # the control_response
    assert first[0] == Init(SID, agent="claude", session_id=SESSION)
    assert "".join(e.text for e in first if isinstance(e, TextDelta)) == "I'll run it."
    start, = (e for e in first if isinstance(e, ToolStart))
    done, = (e for e in first if isinstance(e, ToolDone))
    assert start.name == "Bash" and start.input["command"] == "echo started; sleep 300; echo finished"
    assert done.tool_id == start.tool_id and done.is_error
    assert not [e for e in first if isinstance(e, Diagnostic | Error)]
    second = [e for line in lines[7:] for e in rt.feed(line)]
    assert rt.outcome() == Outcome("end_turn")
    assert isinstance(second[0], Init)
    assert "".join(e.text for e in second if isinstance(e, TextDelta)).startswith("Tool finished")
    # The turn's total is its last Usage (the ones before it are per API message, no cost).
    usages = [e for e in second if isinstance(e, Usage)]
    assert usages[-1].cost_usd == pytest.approx(0.00056)


# --- the manifest --------------------------------------------------------------------------


def manifest(**overrides: object) -> Manifest:
    data: dict[str, object] = {"id": "c", "protocol": "claude-stream-json",
                               "input": "claude-stream-json", "command": ["claude", "-p"],
                               "stop": {"polite": "interrupt"}}
    data.update(overrides)
    return parse_manifest(data)


def test_builtin_claude_manifest_uses_stream_input_and_interrupt() -> None:
    claude = load_adapters(user_dir=Path("/nonexistent")).get("claude")
    assert claude.input == "claude-stream-json"
    assert claude.stop.polite == "interrupt"
    assert claude.resume == ("--resume", "{session_id}")
    assert "--include-partial-messages" in claude.command
    assert claude.command[claude.command.index("--input-format") + 1] == "stream-json"
    assert not any("{prompt}" in part for part in claude.command)


def test_manifest_input_defaults_to_text() -> None:
    m = parse_manifest({"id": "x", "protocol": "lines", "command": ["x", "{prompt}"]})
    assert m.input == "text"
    assert manifest().input == "claude-stream-json"
    assert manifest(stop={"polite": "sigint"}).stop.polite == "sigint"


@pytest.mark.parametrize(
    ("overrides", "key", "reason"),
    [
        ({"input": "json"}, "input", "must be one of text, claude-stream-json, got 'json'"),
        ({"protocol": "codex-exec-json"}, "input", "needs protocol = \"claude-stream-json\""),
        ({"command": ["claude", "-p", "{prompt}"]}, "command", "must not contain {prompt}"),
        ({"input": "text", "command": ["claude", "{prompt}"]}, "stop.polite",
         "needs input = \"claude-stream-json\""),
        ({"stop": {"polite": "interupt"}}, "stop.polite", "must be one of"),
    ],
)
def test_manifest_errors_name_key_and_reason(overrides: dict[str, object], key: str,
                                             reason: str) -> None:
    with pytest.raises(ManifestError) as info:
        manifest(**overrides)
    assert info.value.key == key
    assert reason in info.value.reason


# --- the turn, against a real fake process ------------------------------------------------


@async_test
async def test_prompt_reaches_the_agent_verbatim_and_the_turn_ends_at_result(tmp_path: Path) -> None:
    run = start_run(stream_manifest(), HOSTILE, cwd=tmp_path, env=log_env(tmp_path))
    done = await run.finish()
    assert done.stop_reason == "end_turn" and done.exit_code == 0
    assert stdin_lines(tmp_path) == [user_message(HOSTILE).decode().rstrip("\n")]
    assert run.collector.text() == f"You said: {HOSTILE}"
    assert run.collector.of("init")[0] == Init(run.stream_id, agent="fake-claude-stream",
                                               session_id=SESSION)
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert "--resume" not in argv and HOSTILE not in argv  # the prompt is not an argument
    assert not run.collector.of("error")
    assert_run_gone(run.stream_id)


@async_test
async def test_resume_arguments_are_appended_for_a_session(tmp_path: Path) -> None:
    registry, collector, sid = ProcessRegistry(), Collector(), new_stream_id()
    request = RunRequest(stream_manifest(), "again", str(tmp_path), log_env(tmp_path),
                         session_id="sess-42")
    done = await stream_ai_agent(request, sid, collector, registry=registry, grace_s=0.5)
    assert done.stop_reason == "end_turn"
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[-2:] == ["--resume", "sess-42"]
    assert collector.events[0] == Init(sid, agent="fake-claude-stream", session_id="sess-42")
    assert_run_gone(sid)


async def start_tool_turn(tmp_path: Path, manifest: Manifest
                          ) -> tuple[LiveRun, psutil.Process, psutil.Process]:
    run = start_run(manifest, "RUN_SLEEP", cwd=tmp_path, env=log_env(tmp_path))
    agent, tool = await wait_pidfile(tmp_path / "pids")
    await run.wait_for_kind("tool_start")
    return run, agent, tool


@async_test
async def test_interrupt_stops_the_tool_fast_and_keeps_partial_output(tmp_path: Path) -> None:
    run, agent, tool = await start_tool_turn(tmp_path, stream_manifest(window_ms=2000))
    t0 = time.monotonic()
    assert run.abort()
    done = await run.finish()
    elapsed = time.monotonic() - t0
    assert done.stop_reason == "cancelled"
    assert elapsed < 1.0, f"stop took {elapsed:.2f} s"
    assert run.collector.text() == "I'll run it."
    tool_done, = run.collector.of("tool_done")
    assert isinstance(tool_done, ToolDone) and tool_done.is_error
    written = [json.loads(line) for line in stdin_lines(tmp_path)]
    assert [w["type"] for w in written] == ["user", "control_request"]
    assert written[1]["request"] == {"subtype": "interrupt"}
    # Answered in-band: no fallback, no "did not answer" note, no error shown.
    assert not [d for d in run.collector.of("diagnostic")
                if "interrupt" in getattr(d, "message", "")]
    assert not run.collector.of("error")
    assert done.exit_code == 0  # the fake exited on its own once stdin closed
    assert not run.abort()
    assert_run_gone(run.stream_id, [agent, tool])


@async_test
async def test_ignored_interrupt_falls_back_to_sigint(tmp_path: Path) -> None:
    run, agent, tool = await start_tool_turn(tmp_path, stream_manifest("--ignore-interrupt"))
    t0 = time.monotonic()
    assert run.abort()
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert 0.35 < time.monotonic() - t0 < 2.0
    notes = [d.message for d in run.collector.of("diagnostic") if isinstance(d, Diagnostic)]
    assert any("did not end the turn within 400 ms of the interrupt; sending SIGINT" in n
               for n in notes)
    assert done.exit_code == 0  # the SIGINT handler printed the result and exited 0
    assert run.collector.text() == "I'll run it."
    assert_run_gone(run.stream_id, [agent, tool])


@async_test
async def test_refused_interrupt_falls_back_to_sigint_at_once(tmp_path: Path) -> None:
    run, agent, tool = await start_tool_turn(
        tmp_path, stream_manifest("--refuse-interrupt", window_ms=20_000))
    t0 = time.monotonic()
    assert run.abort()
    done = await run.finish(within=30)
    assert done.stop_reason == "cancelled"
    # Not the 20 s window: the refusal is an answer (a wide margin, so a loaded machine passes).
    assert time.monotonic() - t0 < 10.0
    notes = [d.message for d in run.collector.of("diagnostic") if isinstance(d, Diagnostic)]
    assert any("refused the interrupt: not now" in n for n in notes), notes
    assert done.exit_code == 0  # SIGINT: the fake printed its result and exited 0
    assert_run_gone(run.stream_id, [agent, tool])


@async_test
async def test_cancelled_caller_still_interrupts_and_ends_the_tree(tmp_path: Path) -> None:
    """A closed chat cancels the task awaiting the turn: the stop path runs all the same."""
    run, agent, tool = await start_tool_turn(tmp_path, stream_manifest(window_ms=2000))
    run.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run.task
    assert run.collector.done.stop_reason == "cancelled"
    assert [json.loads(w)["type"] for w in stdin_lines(tmp_path)] == ["user", "control_request"]
    assert_run_gone(run.stream_id, [agent, tool])


@async_test
async def test_deaf_agent_is_tree_killed_and_its_tool_too(tmp_path: Path) -> None:
    run, agent, tool = await start_tool_turn(
        tmp_path, stream_manifest("--ignore-interrupt", "--ignore-sigint", window_ms=200))
    assert run.abort()
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert done.survivors == ()
    assert run.collector.text() == "I'll run it."
    assert_run_gone(run.stream_id, [agent, tool])


@async_test
async def test_stop_as_the_turn_starts_leaves_nothing(tmp_path: Path) -> None:
    run = start_run(stream_manifest(), "RUN_SLEEP", cwd=tmp_path, env=log_env(tmp_path))
    await asyncio.sleep(0)
    run.abort()
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert_run_gone(run.stream_id)


@async_test
async def test_agent_lingering_after_its_result_is_ended_and_keeps_end_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StreamInputTurn, "exit_after_result_s", 0.3)
    run = start_run(stream_manifest("--linger"), "hello", cwd=tmp_path, env=log_env(tmp_path))
    await wait_until_text(run.collector, "You said: hello")
    await asyncio.sleep(0.05)
    assert not run.abort(), "the result line ends the turn: Stop is too late from then on"
    done = await run.finish()
    assert done.stop_reason == "end_turn"
    assert any("did not exit within 0.3 s of its result" in getattr(d, "message", "")
               for d in run.collector.of("diagnostic"))
    assert_run_gone(run.stream_id)


@async_test
async def test_agent_crashing_before_its_result_is_an_error(tmp_path: Path) -> None:
    run = start_run(stream_manifest("--crash"), "hello", cwd=tmp_path, env=log_env(tmp_path))
    done = await run.finish()
    assert done.stop_reason == "error" and done.exit_code == 3
    error, = run.collector.of("error")
    assert "exited with code 3 without a final result" in getattr(error, "message", "")
    assert_run_gone(run.stream_id)


@async_test
async def test_signal_polite_stop_also_works_with_stream_input(tmp_path: Path) -> None:
    run, agent, tool = await start_tool_turn(tmp_path, stream_manifest(polite="sigint"))
    assert run.abort()
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert [json.loads(w)["type"] for w in stdin_lines(tmp_path)] == ["user"]
    assert_run_gone(run.stream_id, [agent, tool])


async def wait_until_text(collector: Collector, text: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while collector.text() != text:
        assert time.monotonic() < deadline, f"text so far: {collector.text()!r}"
        await asyncio.sleep(0.01)
