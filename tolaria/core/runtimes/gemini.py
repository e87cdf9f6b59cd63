"""Gemini CLI's ``--output-format stream-json`` dialect.

Mapped from real captured output (tests/fixtures/gemini/): ``init {session_id, model}``,
``message {role, content, delta}`` (the user's prompt is echoed back with role ``user``),
``tool_use {tool_name, tool_id, parameters}``, ``tool_result {tool_id, status, output | error}``
and a final ``result {status, stats | error}``. Gemini exits 0 even when killed by SIGTERM and 145
on an API error, so only ``result.status`` says how the turn ended.
"""

from __future__ import annotations

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
from tolaria.core.runtimes.base import Outcome
from tolaria.core.runtimes.jsonl import JsonLinesRuntime, int_or_none, str_or_none


class GeminiStreamJson(JsonLinesRuntime):
    def __init__(self, stream_id: str, agent: str) -> None:
        super().__init__(stream_id, agent)
        self.session_id: str | None = None

    def feed_stderr(self, line: str) -> None:
        # Gemini reports retries only on stderr, each followed by a stack trace:
        # "Attempt 2 failed. Retrying with backoff... Error: exception TypeError: fetch failed
        # sending request" (docs/retries.md); stdout stays silent meanwhile.
        if "Retrying with backoff" in line:
            self.mark_retrying(line.strip())

    def dispatch(self, data: dict[str, Any]) -> list[Event]:
        kind = data.get("type")
        if kind == "init":
            self.session_id = str_or_none(data.get("session_id"))
            return [Init(self.stream_id, agent=self.agent, session_id=self.session_id)]
        if kind == "message":
            if data.get("role") != "assistant":
                return []
            content = data.get("content")
            if not isinstance(content, str):
                raise TypeError("message content is not a string")
            return [TextDelta(self.stream_id, text=content)] if content else []
        if kind == "thought":
            return [ThinkingDelta(self.stream_id, text=_text(data.get("content")))]
        if kind == "tool_use":
            return [ToolStart(self.stream_id, tool_id=_required_id(data),
                              name=str(data.get("tool_name", "")), input=data.get("parameters"))]
        if kind == "tool_result":
            output = data.get("output")
            if output is None and data.get("error") is not None:
                output = _error_message(data.get("error"))
            return [ToolDone(self.stream_id, tool_id=_required_id(data), output=_text(output),
                             is_error=data.get("status") != "success")]
        if kind == "error":
            return [self.diag(f"gemini {data.get('severity', 'error')}: "
                              f"{_text(data.get('message'))}")]
        if kind == "result":
            return self._result(data)
        return []

    def _result(self, data: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        stats = data.get("stats")
        if isinstance(stats, dict) and data.get("status") == "success":
            out.append(Usage(self.stream_id, input_tokens=int_or_none(stats.get("input_tokens")),
                             output_tokens=int_or_none(stats.get("output_tokens"))))
        if data.get("status") == "success":
            self._outcome = Outcome(STOP_END_TURN)
        else:
            message = _error_message(data.get("error")) \
                or f"gemini reported status {data.get('status')!r}"
            self._outcome = Outcome(STOP_ERROR, error=message)
        return out


def _required_id(data: dict[str, Any]) -> str:
    tool_id = data.get("tool_id")
    if not isinstance(tool_id, str):
        raise ValueError("tool event without tool_id")
    return tool_id


def _error_message(error: object) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        return message if isinstance(message, str) else json.dumps(error)[:2000]
    return "" if error is None else str(error)


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value)[:10_000]
