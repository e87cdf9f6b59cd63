"""Live tool-call updates of ACP agents (``ToolUpdate``) and the SDK's ``used: null`` noise.

The mapper runs over the real captured sessions of claude-agent-acp and ``gemini --acp``
(tests/fixtures/acp/); the runs use the scripted ACP agent as a real process.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from helpers import Collector, assert_run_gone, async_test, start_run, wait_pidfile

from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.events import (
    Event,
    ToolDone,
    ToolStart,
    ToolUpdate,
    Usage,
    event_from_dict,
    to_dict,
)
from tolaria.core.store.db import Store
from tolaria.core.turns.acp.noise import (
    NullUsageFilter,
    is_null_usage_error,
    quiet_null_usage_errors,
)
from tolaria.core.turns.acp.updates import UpdateMapper

FAKE_ACP = Path(__file__).resolve().parents[3] / "fakes" / "fake_acp_agent.py"
CAPTURES = Path(__file__).resolve().parents[3] / "fixtures" / "acp"
SID = "ai-agent-stream-capture"


def acp_manifest(mode: str, env: dict[str, str] | None = None) -> Manifest:
    return Manifest(id=f"fake-acp-{mode.replace('_', '-')}", name=f"Fake ACP ({mode})",
                    protocol="acp", command=(sys.executable, str(FAKE_ACP), mode),
                    env=env or {}, stop=StopPolicy(polite_window_ms=5000))


def capture_updates(name: str) -> list[dict[str, Any]]:
    out = []
    for line in (CAPTURES / name).read_text().splitlines():
        msg = json.loads(line)["msg"]
        if msg.get("method") == "session/update":
            out.append(msg["params"]["update"])
    return out


def tool_events(events: list[Event]) -> list[Event]:
    return [e for e in events if isinstance(e, ToolStart | ToolUpdate | ToolDone)]


# --- the mapper over real captures --------------------------------------------------------------


def test_claude_terminal_tool_gets_its_command_from_the_update() -> None:
    """claude-agent-acp: tool_call "Terminal" with empty input, then the real command."""
    mapper = UpdateMapper(SID)
    events = [e for u in capture_updates("acp_sleep_cancel.acp.jsonl") for e in mapper.feed(u)]
    tools = tool_events(events)
    command = "echo started; sleep 300; echo finished"
    tool_id = "toolu_fake_1a1cc10f9360"
    assert tools == [
        ToolStart(SID, tool_id=tool_id, name="Terminal", input={}),
        ToolUpdate(SID, tool_id=tool_id, status="pending"),
        ToolUpdate(SID, tool_id=tool_id, name=command,
                   input={"command": command, "description": f"Run: {command}"},
                   output=f"Run: {command}"),
    ]
    assert mapper.open_tools == {tool_id: command}  # Stop closes it under its real title
    assert [e.tool_id for e in mapper.cancel_open_tools()] == [tool_id]


def test_gemini_tool_running_then_done_has_no_redundant_update() -> None:
    mapper = UpdateMapper(SID)
    events = [e for u in capture_updates("gemini_acp_cancel.acp.jsonl") for e in mapper.feed(u)]
    tools = tool_events(events)
    assert [type(e).__name__ for e in tools] == ["ToolStart", "ToolUpdate", "ToolDone"]
    start, update, done = tools
    assert isinstance(start, ToolStart) and start.name == "echo started; sleep 300; echo finished"
    # in_progress from the start: the initial content is the only news, not the status.
    assert isinstance(update, ToolUpdate) and update.status is None and update.name is None
    assert update.output is not None and "run echo started" in update.output
    assert isinstance(done, ToolDone) and "Command cancelled by user." in done.output


def test_only_changes_become_updates() -> None:
    mapper = UpdateMapper(SID)
    mapper.feed({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "Read",
                 "status": "pending", "rawInput": {}})
    same = {"sessionUpdate": "tool_call_update", "toolCallId": "t", "title": "Read",
            "status": "pending"}
    assert mapper.feed(same) == []
    assert mapper.feed({**same, "status": "in_progress"}) == [
        ToolUpdate(SID, tool_id="t", status="running")]
    partial = {"sessionUpdate": "tool_call_update", "toolCallId": "t", "content": [
        {"type": "content", "content": {"type": "text", "text": "line 1"}}]}
    assert mapper.feed(partial) == [ToolUpdate(SID, tool_id="t", output="line 1")]
    assert mapper.feed(partial) == []
    # The finishing update's new title still reaches the card before the result.
    assert mapper.feed({"sessionUpdate": "tool_call_update", "toolCallId": "t",
                        "title": "Read notes.md", "status": "completed", "content": [
                            {"type": "content", "content": {"type": "text", "text": "all"}}]}) == [
        ToolUpdate(SID, tool_id="t", name="Read notes.md"),
        ToolDone(SID, tool_id="t", output="all", is_error=False)]


def test_tool_update_round_trips_through_json_and_the_store(tmp_path: Path) -> None:
    update = ToolUpdate(SID, tool_id="t", name="ls -la", input={"command": "ls -la"},
                        status="running", output="total 0")
    data = json.loads(json.dumps(to_dict(update)))
    assert data["kind"] == "tool_update"
    assert event_from_dict(data) == update
    sparse = ToolUpdate(SID, tool_id="t", status="pending")
    assert event_from_dict(to_dict(sparse)) == sparse

    store = Store(tmp_path / "t.db")
    try:
        conversation = store.create_conversation("c", "fake", str(tmp_path))
        store.start_turn(conversation.id, SID, "fake", "hi")
        events: list[Event] = [ToolStart(SID, tool_id="t", name="Terminal", input={}),
                               sparse, update, ToolDone(SID, tool_id="t", output="done")]
        for event in events:
            store.append_event(event)
        turn = store.turns(conversation.id)[0]
        assert store.events(turn.id) == events
    finally:
        store.close()


# --- a real run ----------------------------------------------------------------------------------


@async_test
async def test_run_reports_the_sleep_command_as_an_update(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    live = start_run(acp_manifest("normal", {"FAKE_PIDFILE": str(pidfile)}), "SLEEP",
                     cwd=tmp_path)
    await wait_pidfile(pidfile)
    await live.wait_for_kind("tool_update")
    assert live.abort()
    done = await live.finish()
    assert done.stop_reason == "cancelled"
    updates = [e for e in live.collector.events if isinstance(e, ToolUpdate)]
    assert any(u.name == "sleep 300" and u.input == {"command": "sleep 300"} for u in updates)
    assert_run_gone(live.stream_id)


# --- the SDK's `used: null` noise ----------------------------------------------------------------


@async_test
async def test_null_usage_update_logs_nothing_and_the_turn_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    collector = Collector()
    live = start_run(acp_manifest("normal", {"FAKE_NULL_USAGE": "1"}), "hi", cwd=tmp_path,
                     collector=collector)
    done = await live.finish()
    assert done.stop_reason == "end_turn"
    assert [u.cost_usd for u in collector.events if isinstance(u, Usage) and u.cost_usd] == [0.5]
    # ``used`` of ``size``: the context meter's figures (issue 27)
    assert [(u.context_tokens, u.context_window) for u in collector.events
            if isinstance(u, Usage) and u.context_window] == [(11, 1000)]
    noisy = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert noisy == [], [r.getMessage() for r in noisy]
    assert_run_gone(live.stream_id)


def _sdk_record(notification: dict[str, Any]) -> logging.LogRecord:
    """The record the SDK logs for a notification its models reject (same call site)."""
    import acp
    from acp.schema import SessionNotification
    from pydantic import ValidationError

    try:
        SessionNotification.model_validate(notification)
    except ValidationError as exc:
        error = exc
    else:
        raise AssertionError("the notification validated")
    return logging.LogRecord(
        "root", logging.ERROR, str(Path(acp.__file__).parent / "connection.py"), 230,
        "Unhandled error while handling notification method=%s", ("session/update",),
        (type(error), error, error.__traceback__))


def test_filter_drops_only_null_usage_records() -> None:
    import acp

    sdk_dir = str(Path(acp.__file__).resolve().parent)
    quiet = NullUsageFilter(sdk_dir)
    null_used = _sdk_record({"sessionId": "s", "update": {
        "sessionUpdate": "usage_update", "used": None, "size": 200000,
        "cost": {"amount": 0.1, "currency": "USD"}}})
    assert not quiet.filter(null_used)
    # Anything else the SDK rejects is still an error worth seeing.
    bad_size = _sdk_record({"sessionId": "s", "update": {
        "sessionUpdate": "usage_update", "used": 5, "size": "huge"}})
    bad_tool = _sdk_record({"sessionId": "s", "update": {
        "sessionUpdate": "tool_call", "toolCallId": 5, "title": None}})
    assert quiet.filter(bad_size) and quiet.filter(bad_tool)
    # The same message from another module is not the SDK's.
    elsewhere = logging.LogRecord("root", logging.ERROR, "/somewhere/else.py", 1,
                                  null_used.msg, null_used.args, null_used.exc_info)
    assert quiet.filter(elsewhere)
    assert not is_null_usage_error(logging.LogRecord(
        "root", logging.ERROR, null_used.pathname, 1, "other %s", ("x",), None), sdk_dir)


def test_install_is_idempotent_and_scoped_to_the_root_logger() -> None:
    quiet_null_usage_errors()
    quiet_null_usage_errors()
    root = logging.getLogger()
    assert len([f for f in root.filters if isinstance(f, NullUsageFilter)]) == 1
