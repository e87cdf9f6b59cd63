"""The demo agent streams its tool's output while the tool runs (the tool card's live tail), in
a ``tool_progress`` line the Claude dialect maps to ``ToolUpdate``; Claude's own
``tool_progress`` (elapsed time only) shows nothing. The demo runs as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tolaria.core.events import Event, ToolDone, ToolStart, ToolUpdate
from tolaria.core.runtimes import make_runtime

ROOT = Path(__file__).resolve().parents[3]
SID = "ai-agent-stream-demoprogress"


def test_the_demo_streams_its_tool_output_before_the_result() -> None:
    env = {**os.environ, "TOLARIA_DEMO_TOOL_SECONDS": "0.3", "TOLARIA_DEMO_DELAY": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-m", "tolaria.demo_agent", "--", "show me"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=60, check=True)
    runtime = make_runtime("claude-stream-json", SID, "demo")
    events: list[Event] = []
    for line in run.stdout.splitlines():
        events.extend(runtime.feed(line))
    tools = [e for e in events if isinstance(e, ToolStart | ToolUpdate | ToolDone)]
    assert isinstance(tools[0], ToolStart)
    updates = [e for e in tools if isinstance(e, ToolUpdate)]
    assert [u.output for u in updates] == ["started\n", "started\nfinished\n"]
    assert {u.tool_id for u in updates} == {tools[0].tool_id}
    assert all(u.status == "running" for u in updates)
    done = tools[-1]
    assert isinstance(done, ToolDone) and done.output == "started\nfinished"
    assert tools.index(updates[0]) < tools.index(done)


def test_claudes_own_tool_progress_shows_nothing() -> None:
    runtime = make_runtime("claude-stream-json", SID, "claude")
    line = {"type": "tool_progress", "tool_use_id": "toolu_1", "tool_name": "Bash",
            "parent_tool_use_id": None, "elapsed_time_seconds": 3.2, "session_id": "s"}
    assert runtime.feed(json.dumps(line)) == []
