"""Codex's ``codex exec --json`` dialect.

Mapped from real captured output (tests/fixtures/codex/): ``thread.started {thread_id}``,
``turn.started``, ``item.started`` / ``item.completed`` whose ``item.type`` is
``command_execution`` (a tool), ``agent_message`` (text), ``reasoning`` (thinking) or ``error``
(a warning such as missing model metadata), top-level ``error`` lines (also the "Reconnecting..."
retries), and a final ``turn.completed {usage}`` or ``turn.failed {error}``.

A top-level ``error`` is held back for one line: when ``turn.failed`` follows, that carries the
same message as the turn's error; otherwise it is shown as a diagnostic.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tolaria.core.events import (
    STOP_END_TURN,
    STOP_ERROR,
    Event,
    Init,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    Usage,
)
from tolaria.core.mcp.toolnames import tool_start
from tolaria.core.runtimes import codex_rollout
from tolaria.core.runtimes.base import Outcome
from tolaria.core.runtimes.jsonl import JsonLinesRuntime, as_dict, int_or_none, str_or_none

#: Item types that are not tools.
_NOT_TOOLS = {"agent_message", "reasoning", "error"}
_FAILED = {"failed", "declined"}


class CodexExecJson(JsonLinesRuntime):
    def __init__(self, stream_id: str, agent: str) -> None:
        super().__init__(stream_id, agent)
        self.session_id: str | None = None
        self._started_tools: set[str] = set()
        self._pending_error: str | None = None
        self._just_failed = False
        #: The turn's tokens (``turn.completed``), completed at the end from the session file.
        self._usage: Usage | None = None

    def feed(self, line: str) -> list[Event]:
        if not line.strip():
            return []
        pending, self._pending_error = self._pending_error, None
        self._just_failed = False
        events = super().feed(line)
        if pending is not None and not self._just_failed:
            events.insert(0, self.diag(f"codex: {pending}"))
        return events

    def finish(self) -> list[Event]:
        pending, self._pending_error = self._pending_error, None
        out: list[Event] = [] if pending is None else [self.diag(f"codex: {pending}")]
        return out + self._context()

    def _context(self) -> list[Event]:
        """The context window and rate limits from Codex's session file, read once Codex
        has ended (it has written the file by then): the turn's Usage again, with them."""
        if self._usage is None or self.session_id is None:
            return []
        path = codex_rollout.find_rollout(self.session_id,
                                          codex_rollout.codex_home(self.agent_env))
        count = codex_rollout.last_token_count(path) if path is not None else None
        if count is None or (count.context_window is None and count.rate_limits is None):
            return []
        return [dataclasses.replace(self._usage, context_tokens=count.context_tokens,
                                    context_window=count.context_window,
                                    rate_limits=count.rate_limits)]

    def dispatch(self, data: dict[str, Any]) -> list[Event]:
        kind = data.get("type")
        if kind == "thread.started":
            self.session_id = str_or_none(data.get("thread_id"))
            return [Init(self.stream_id, agent=self.agent, session_id=self.session_id)]
        if kind == "item.started":
            return self._item_started(as_dict(data.get("item"), "item"))
        if kind == "item.completed":
            return self._item_completed(as_dict(data.get("item"), "item"))
        if kind == "error":
            message = data.get("message")
            self._pending_error = message if isinstance(message, str) else json.dumps(data)[:500]
            if self._pending_error.startswith("Reconnecting"):
                # "Reconnecting... waiting for network (...)": printed again and again, with
                # no end, while the model cannot be reached (tests/fixtures/codex/*_unreach).
                self.mark_retrying(self._pending_error)
            return []
        if kind == "turn.completed":
            self._outcome = Outcome(STOP_END_TURN)
            usage = data.get("usage")
            if isinstance(usage, dict):
                self._usage = Usage(
                    self.stream_id, input_tokens=int_or_none(usage.get("input_tokens")),
                    output_tokens=int_or_none(usage.get("output_tokens")),
                    cache_read_tokens=int_or_none(usage.get("cached_input_tokens")),
                    cache_write_tokens=int_or_none(usage.get("cache_write_input_tokens")))
                return [self._usage]
            return []
        if kind == "turn.failed":
            error = data.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            self._outcome = Outcome(STOP_ERROR, error=str(message or "codex reported a failed turn"))
            self._just_failed = True
            return []
        return []

    def _item_started(self, item: dict[str, Any]) -> list[Event]:
        itype = item.get("type")
        if itype in _NOT_TOOLS:
            return []
        tool_id = str(item.get("id", ""))
        self._started_tools.add(tool_id)
        return [_tool_start(self.stream_id, tool_id, item)]

    def _item_completed(self, item: dict[str, Any]) -> list[Event]:
        itype = item.get("type")
        if itype == "agent_message":
            return [TextDelta(self.stream_id, text=str(item.get("text", "")))]
        if itype == "reasoning":
            return [ThinkingDelta(self.stream_id, text=str(item.get("text", "")))]
        if itype == "error":
            return [self.diag(f"codex: {item.get('message', '')}")]
        tool_id = str(item.get("id", ""))
        out: list[Event] = []
        if tool_id not in self._started_tools:
            out.append(_tool_start(self.stream_id, tool_id, item))
        self._started_tools.discard(tool_id)
        exit_code = item.get("exit_code")
        is_error = item.get("status") in _FAILED or (exit_code is not None and exit_code != 0)
        out.append(ToolDone(self.stream_id, tool_id=tool_id, output=_tool_output(item),
                            is_error=bool(is_error)))
        return out


def _tool_start(stream_id: str, tool_id: str, item: dict[str, Any]) -> ToolStart:
    """An ``mcp_tool_call`` names its server and tool: the card shows both."""
    server, tool = item.get("server"), item.get("tool")
    if item.get("type") == "mcp_tool_call" and isinstance(server, str) and server:
        return tool_start(stream_id, tool_id, str(tool or "tool"), item.get("arguments"),
                          server=server)
    return ToolStart(stream_id, tool_id=tool_id, name=str(item.get("type")),
                     input=_tool_input(item))


def _tool_input(item: dict[str, Any]) -> Any:
    if item.get("type") == "command_execution":
        return {"command": item.get("command")}
    return {k: v for k, v in item.items()
            if k not in ("id", "type", "status", "aggregated_output", "result", "exit_code")}


def _tool_output(item: dict[str, Any]) -> str:
    output = item.get("aggregated_output")
    if isinstance(output, str):
        return output
    for key in ("result", "error", "changes"):
        if item.get(key) is not None:
            value = item[key]
            return value if isinstance(value, str) else json.dumps(value)[:10_000]
    return ""
