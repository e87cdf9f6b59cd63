"""ACP agents (protocol ``acp``) against a scripted agent process speaking JSON-RPC on stdio.

Each run checks its events, its one ``done`` (last) and that no process of the run is left
(scanned through /proc/*/environ, independently of the code under test). The update mapper also
parses real captured sessions of claude-agent-acp and ``gemini --acp`` (tests/fixtures/acp/).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from helpers import (
    Collector,
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
from tolaria.core.events import (
    Diagnostic,
    Error,
    Init,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    Usage,
)
from tolaria.core.permissions import PermissionRequest
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.programs.discovery import detect
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.acp.updates import (
    UpdateMapper,
    result_usage,
    stop_reason,
)
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

FAKE_ACP = Path(__file__).resolve().parents[3] / "fakes" / "fake_acp_agent.py"
CAPTURES = Path(__file__).resolve().parents[3] / "fixtures" / "acp"


def acp_manifest(mode: str, *, permissions: str = "safe", window_ms: int = 1000,
                 env: dict[str, str] | None = None) -> Manifest:
    return Manifest(id=f"fake-acp-{mode.replace('_', '-')}", name=f"Fake ACP ({mode})",
                    protocol="acp", command=(sys.executable, str(FAKE_ACP), mode),
                    env=env or {}, stop=StopPolicy(polite_window_ms=window_ms),
                    permissions=permissions)


def of(collector: Collector, cls: type[Any]) -> list[Any]:
    return [e for e in collector.events if isinstance(e, cls)]


# --- a turn -------------------------------------------------------------------------------------


@async_test
async def test_streams_text_thought_tool_plan_usage_and_ends_turn(tmp_path: Path) -> None:
    live = start_run(acp_manifest("normal"), "say hi", cwd=tmp_path)
    done = await live.finish()
    c = live.collector
    assert done.stop_reason == "end_turn", c.events
    inits = of(c, Init)
    assert len(inits) == 1 and inits[0].session_id == "fake-acp-session"
    assert c.text() == "Hello from the fake agent: say hi"
    assert [e.text for e in of(c, ThinkingDelta)] == ["Let me think."]
    assert [(e.tool_id, e.name, e.input) for e in of(c, ToolStart)] == [
        ("t-echo", "echo hi", {"command": "echo hi"})]
    assert [(e.tool_id, e.output, e.is_error) for e in of(c, ToolDone)] == [("t-echo", "hi", False)]
    assert any(e.source == "plan" and "say hello" in e.message for e in of(c, Diagnostic))
    usage = of(c, Usage)
    assert any(u.cost_usd == 0.5 for u in usage)
    assert any(u.input_tokens == 10 and u.output_tokens == 12 for u in usage)
    assert not of(c, Error)
    assert_run_gone(live.stream_id)


@async_test
async def test_load_session_when_advertised_without_replaying_history(tmp_path: Path) -> None:
    collector = Collector()
    sid = new_stream_id()
    request = RunRequest(acp_manifest("normal"), "again", str(tmp_path), session_id="old-one")
    done = await stream_ai_agent(request, sid, collector, registry=ProcessRegistry(), grace_s=0.5)
    assert done.stop_reason == "end_turn"
    assert [e.session_id for e in of(collector, Init)] == ["old-one"]
    assert "OLD ANSWER" not in collector.text() and "old question" not in collector.text()
    assert_run_gone(sid)


# --- stop ---------------------------------------------------------------------------------------


@async_test
async def test_stop_during_tool_cancels_politely_and_the_tool_is_gone(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    live = start_run(acp_manifest("normal", window_ms=5000, env={"FAKE_PIDFILE": str(pidfile)}),
                     "SLEEP please", cwd=tmp_path)
    sleeper = (await wait_pidfile(pidfile))[0]
    await live.wait_for_kind("tool_start")
    started = time.monotonic()
    assert live.abort()
    done = await live.finish()
    assert done.stop_reason == "cancelled"
    assert time.monotonic() - started < 4, "the polite cancel should not need the whole window"
    c = live.collector
    assert [(e.tool_id, e.output, e.is_error) for e in of(c, ToolDone)] == [
        ("t-sleep", "cancelled", True)]
    # The agent answered in time: no "did not end the turn" note.
    assert not any("did not end the turn" in e.message for e in of(c, Diagnostic))
    assert_run_gone(live.stream_id, [sleeper])


@async_test
async def test_stop_when_agent_ignores_cancel_kills_the_tree_after_the_window(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    live = start_run(acp_manifest("ignore_cancel", window_ms=300,
                                  env={"FAKE_PIDFILE": str(pidfile)}), "hi", cwd=tmp_path)
    sleeper = (await wait_pidfile(pidfile))[0]
    await live.wait_for_kind("tool_start")
    started = time.monotonic()
    assert live.abort()
    done = await live.finish()
    elapsed = time.monotonic() - started
    assert done.stop_reason == "cancelled"
    assert 0.3 <= elapsed < 5, elapsed
    assert any("did not end the turn" in e.message for e in of(live.collector, Diagnostic))
    assert [e.output for e in of(live.collector, ToolDone)] == ["cancelled"]
    assert_run_gone(live.stream_id, [sleeper])


@async_test
async def test_stop_before_the_session_exists_still_ends_everything(tmp_path: Path) -> None:
    live = start_run(acp_manifest("hang_init", window_ms=5000), "hi", cwd=tmp_path)
    await live.wait_for_kind("diagnostic")
    started = time.monotonic()
    assert live.abort()
    done = await live.finish()
    assert done.stop_reason == "cancelled"
    assert time.monotonic() - started < 4, "no session to cancel: no polite window to wait out"
    assert not live.collector.of("init")
    assert_run_gone(live.stream_id)


@async_test
async def test_cancelling_the_awaiting_task_kills_the_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    live = start_run(acp_manifest("ignore_cancel", window_ms=200,
                                  env={"FAKE_PIDFILE": str(pidfile)}), "hi", cwd=tmp_path)
    sleeper = (await wait_pidfile(pidfile))[0]
    live.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await live.task
    assert live.collector.done.stop_reason == "cancelled"
    assert_run_gone(live.stream_id, [sleeper])


# --- permissions --------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "answer", "tool_error"),
                         [("safe", "no", True), ("full", "yes", False)])
def test_permission_request(tmp_path: Path, mode: str, answer: str, tool_error: bool) -> None:
    @async_test
    async def run() -> None:
        live = start_run(acp_manifest("ask_permission", permissions=mode), "rm", cwd=tmp_path)
        done = await live.finish()
        assert done.stop_reason == "end_turn"
        assert f"permission: {answer}" in live.collector.text()
        assert [e.is_error for e in of(live.collector, ToolDone)] == [tool_error]
        notes = [e.message for e in of(live.collector, Diagnostic) if e.source == "permission"]
        assert len(notes) == 1 and "rm -rf build" in notes[0]
        assert_run_gone(live.stream_id)

    run()


@async_test
async def test_permission_callback_chooses_in_safe_mode(tmp_path: Path) -> None:
    asked: list[PermissionRequest] = []

    async def choose(request: PermissionRequest) -> str | None:
        asked.append(request)
        return "always"

    collector, sid = Collector(), new_stream_id()
    request = RunRequest(acp_manifest("ask_permission"), "rm", str(tmp_path), on_permission=choose)
    done = await stream_ai_agent(request, sid, collector, registry=ProcessRegistry(), grace_s=0.5)
    assert done.stop_reason == "end_turn"
    assert "permission: always" in collector.text()
    assert len(asked) == 1
    assert (asked[0].stream_id, asked[0].tool_id, asked[0].title) == (sid, "t-rm", "rm -rf build")
    assert asked[0].input == {"command": "rm -rf build"}
    assert [c.kind for c in asked[0].choices] == ["allow_once", "allow_always", "reject_once"]
    assert_run_gone(sid)


@async_test
async def test_stop_answers_a_pending_permission_request_cancelled(tmp_path: Path) -> None:
    asked = asyncio.Event()

    async def never(request: PermissionRequest) -> str | None:
        asked.set()
        await asyncio.sleep(3600)
        return None

    collector, sid, registry = Collector(), new_stream_id(), ProcessRegistry()
    request = RunRequest(acp_manifest("ask_permission", window_ms=5000), "rm", str(tmp_path),
                         on_permission=never)
    task = asyncio.ensure_future(
        stream_ai_agent(request, sid, collector, registry=registry, grace_s=0.5))
    await asyncio.wait_for(asked.wait(), 10)
    started = time.monotonic()
    assert registry.abort(sid)
    done = await asyncio.wait_for(task, 10)
    assert done.stop_reason == "cancelled"
    assert time.monotonic() - started < 4
    assert "permission: cancelled" in collector.text()  # the agent heard "cancelled"
    assert [(e.tool_id, e.output) for e in of(collector, ToolDone)] == [("t-rm", "cancelled")]
    assert_run_gone(sid)


# --- misbehaving agents -------------------------------------------------------------------------


@async_test
async def test_chatty_stderr_does_not_hang_initialize(tmp_path: Path) -> None:
    live = start_run(acp_manifest("chatty_stderr"), "hi", cwd=tmp_path)
    done = await live.finish(within=15)
    assert done.stop_reason == "end_turn"
    assert len([e for e in of(live.collector, Diagnostic) if e.source == "stderr"]) == 300
    assert_run_gone(live.stream_id)


@async_test
async def test_crash_mid_turn_is_an_error_with_exit_code(tmp_path: Path) -> None:
    live = start_run(acp_manifest("crash"), "hi", cwd=tmp_path)
    done = await live.finish()
    assert done.stop_reason == "error"
    assert done.exit_code == 3
    assert live.collector.text() == "partial answer"
    errors = of(live.collector, Error)
    assert len(errors) == 1 and "exited before the turn ended" in errors[0].message
    assert_run_gone(live.stream_id)


@async_test
async def test_missing_program_reports_install_hint(tmp_path: Path) -> None:
    manifest = Manifest(id="nope", name="Nope", protocol="acp",
                        command=("no-such-acp-agent-xyz",), install_hint="npm i -g nope")
    live = start_run(manifest, "hi", cwd=tmp_path)
    done = await live.finish()
    assert done.stop_reason == "error"
    assert "npm i -g nope" in of(live.collector, Error)[0].message


# --- the mapper on real captures ----------------------------------------------------------------


def replay(name: str) -> tuple[UpdateMapper, list[Any], dict[str, Any]]:
    mapper = UpdateMapper("ai-agent-stream-capture")
    events: list[Any] = []
    result: dict[str, Any] = {}
    for line in (CAPTURES / name).read_text().splitlines():
        msg = json.loads(line)["msg"]
        if msg.get("method") == "session/update":
            events += mapper.feed(msg["params"]["update"])
        elif "result" in msg and isinstance(msg["result"], dict) and "stopReason" in msg["result"]:
            result = msg["result"]
    return mapper, events, result


def test_capture_claude_text_turn() -> None:
    _, events, result = replay("acp_text.acp.jsonl")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello from the fake model!"
    assert not [e for e in events if isinstance(e, Diagnostic)]  # commands update is quiet
    assert [e.cost_usd for e in events if isinstance(e, Usage)] == [0.00021]
    assert stop_reason(result) == "end_turn"
    usage = result_usage("s", result)
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (10, 12)


def test_capture_claude_cancel_leaves_tool_open_for_stop_to_close() -> None:
    mapper, events, result = replay("acp_sleep_cancel.acp.jsonl")
    starts = [e for e in events if isinstance(e, ToolStart)]
    assert [(s.tool_id, s.name) for s in starts] == [("toolu_fake_1a1cc10f9360", "Terminal")]
    assert stop_reason(result) == "cancelled"
    closed = mapper.cancel_open_tools()
    assert [(e.tool_id, e.is_error, e.output) for e in closed] == [
        ("toolu_fake_1a1cc10f9360", True, "cancelled")]


def test_capture_gemini_cancel() -> None:
    mapper, events, result = replay("gemini_acp_cancel.acp.jsonl")
    dones = [e for e in events if isinstance(e, ToolDone)]
    assert len(dones) == 1 and "Command cancelled by user." in dones[0].output
    assert not mapper.open_tools
    assert stop_reason(result) == "cancelled"


def test_late_update_of_a_cancelled_tool_is_dropped() -> None:
    mapper = UpdateMapper("s")
    mapper.feed({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "x"})
    mapper.cancel_open_tools()
    assert mapper.feed({"sessionUpdate": "tool_call_update", "toolCallId": "t",
                        "status": "completed"}) == []


@pytest.mark.parametrize(("result", "reason"), [
    ({"stopReason": "end_turn"}, "end_turn"), ({"stopReason": "max_tokens"}, "max_tokens"),
    ({"stopReason": "max_turn_requests"}, "max_turn_requests"),
    ({"stopReason": "refusal"}, "refusal"), ({"stopReason": "cancelled"}, "cancelled"),
    ({}, "end_turn"), (None, "end_turn")])
def test_stop_reasons(result: dict[str, Any] | None, reason: str) -> None:
    assert stop_reason(result) == reason


# --- manifests ----------------------------------------------------------------------------------


def test_builtin_acp_manifests_load_and_detect() -> None:
    adapters = load_adapters()
    assert not adapters.errors
    for ident in ("claude-acp", "gemini-acp"):
        manifest = adapters.get(ident)
        assert manifest.protocol == "acp" and manifest.permissions == "safe"
        detection = asyncio.run(detect(manifest, timeout=2))
        assert detection.agent == ident


def test_permissions_key_is_validated() -> None:
    base = {"id": "x", "protocol": "acp", "command": ["x"]}
    assert parse_manifest({**base, "permissions": "full"}).permissions == "full"
    with pytest.raises(ManifestError, match="permissions"):
        parse_manifest({**base, "permissions": "yolo"})
    # Every protocol that spawns the agent has a default permission mode (not openai-chat).
    assert parse_manifest({"id": "x", "protocol": "lines", "command": ["x"],
                           "permissions": "full"}).permissions == "full"
