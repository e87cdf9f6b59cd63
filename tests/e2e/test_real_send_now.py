"""What the real Claude Code does with a user message written into its running stream-json turn
(issue 22 item 8): the measurements behind "Send now stops, it does not steer" (ADR 0007).

Claude run as Tolaria's adapter runs it (``-p --input-format stream-json``), against the loopback
fake model, the message written straight to its stdin:

- during a tool (``sleep 8``): the message is neither delivered nor does it stop anything; the
  tool runs to its end and the message reaches the model only with the tool's result. With a tool
  that never ends it would never be delivered: steering is not "now".
- just after the last tool result, before the turn's ``result``: Claude answers the turn, then
  runs the message as a second turn, with a second ``result``, in the same process. On a kept
  process that answer would land in the next turn.

If a new Claude delivers mid-tool messages at once, the first test fails: the decision is then
worth revisiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from e2e.clis import run_env
from e2e.e2ehelpers import TURN_S, installed_cli, manifest
from e2e.fake_model import TEXT_REPLY, WAIT_COMMAND, FakeModelServer
from helpers import async_test, marker_pids, wait_until

from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.stream_input import user_message

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

STEERED = "E2E-TEXT: the message sent while it ran"


class Claude:
    """The real Claude in stream-json input mode; its stdout lines with their arrival times."""

    def __init__(self, proc: asyncio.subprocess.Process, stream_id: str) -> None:
        self.proc = proc
        self.stream_id = stream_id
        self.t0 = time.monotonic()
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, server: FakeModelServer, tmp: Path) -> Claude:
        cli = installed_cli("claude")
        m = manifest("claude")
        work = tmp / "work"
        work.mkdir()
        stream_id = new_stream_id()
        env = {**os.environ, **run_env(cli, tmp / "home", server.url),
               "TOLARIA_STREAM_ID": stream_id}
        command = [*m.command, *m.permission_args["full"]]
        proc = await asyncio.create_subprocess_exec(
            *command, cwd=work, env=env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True, limit=16 * 1024 * 1024)
        return cls(proc, stream_id)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            with contextlib.suppress(ValueError):
                line = json.loads(raw)
                if isinstance(line, dict):
                    self.lines.append((time.monotonic() - self.t0, line))

    async def write(self, text: str) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(user_message(text))
        await self.proc.stdin.drain()
        return time.monotonic() - self.t0

    def first(self, kind: str, needle: str = "") -> float | None:
        return next((t for t, line in self.lines
                     if line.get("type") == kind and needle in json.dumps(line)), None)

    def results(self) -> list[dict[str, Any]]:
        return [line for _, line in self.lines if line.get("type") == "result"]

    async def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        self._reader.cancel()
        await wait_until(lambda: not marker_pids(self.stream_id), 10, "Claude's processes to go")


def model_messages(server: FakeModelServer, since: int) -> list[list[dict[str, Any]]]:
    return [s.body.get("messages", []) for s in server.requests("anthropic")[since:]]


@async_test
async def test_a_message_written_during_a_tool_waits_for_the_tool_to_end(
        model_server: FakeModelServer, tmp_path: Path) -> None:
    since = len(model_server.requests("anthropic"))
    claude = await Claude.start(model_server, tmp_path)
    try:
        await claude.write("E2E-WAIT: run the waiting command")
        await wait_until(lambda: claude.first("assistant", WAIT_COMMAND), TURN_S, "the tool call")
        await asyncio.sleep(1.0)  # the tool's sleep is running
        sent_at = await claude.write(STEERED)
        await wait_until(lambda: claude.results(), TURN_S, "the turn's result")
        tool_done = claude.first("user", "tool_result")
        assert tool_done is not None
        # Not delivered, and nothing stopped: the tool ran its whole 8 s.
        assert tool_done - sent_at > 5.0, (sent_at, tool_done)
        assert claude.first("user", "started\\nfinished") is not None, "the tool ran to its end"
        # The model saw the message only with the tool's result, in the same request.
        carrying = [msgs for msgs in model_messages(model_server, since) if STEERED in json.dumps(msgs)]
        assert carrying, "the message reached the model in the end"
        last = json.dumps(carrying[0][-1])
        assert "tool_result" in last and STEERED in last
        assert [r.get("subtype") for r in claude.results()] == ["success"]
    finally:
        await claude.close()


@async_test
async def test_a_message_after_the_last_tool_result_becomes_a_second_turn(
        model_server: FakeModelServer, tmp_path: Path) -> None:
    claude = await Claude.start(model_server, tmp_path)
    try:
        await claude.write("E2E-ECHO: run echo hi")
        await wait_until(lambda: claude.first("user", "tool_result") or claude.results(), TURN_S,
                         "the tool result")
        await claude.write(STEERED)
        await wait_until(lambda: len(claude.results()) >= 2, TURN_S, "a second result")
        texts = [json.dumps(line) for _, line in claude.lines if line.get("type") == "assistant"]
        assert any("The command printed: hi" in t for t in texts)
        assert any(TEXT_REPLY in t for t in texts), "the message was answered as its own turn"
        assert [r.get("subtype") for r in claude.results()] == ["success", "success"]
    finally:
        await claude.close()
