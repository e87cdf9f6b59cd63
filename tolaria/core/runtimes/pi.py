"""pi's ``pi --mode json`` dialect (npm @mariozechner/pi-coding-agent).

From the documentation (packages/coding-agent/docs/json.md and packages/ai/src/types.ts of
https://github.com/badlogic/pi-mono), not from captured output (tests/fixtures/pi/README.md):
a ``session {id, cwd}`` header, then ``agent_start``, ``turn_start``, ``message_start`` /
``message_update {assistantMessageEvent}`` / ``message_end {message}``,
``tool_execution_start {toolCallId, toolName, args}``, ``tool_execution_end {toolCallId,
result, isError}``, ``turn_end`` and finally ``agent_end {messages}``. An assistant message
carries ``usage {input, output, cost.total}``, ``stopReason`` (``stop``, ``length``,
``toolUse``, ``error``, ``aborted``) and, on failure, ``errorMessage``.
"""

from __future__ import annotations

import json
from typing import Any

from tolaria.core.events import (
    STOP_CANCELLED,
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
from tolaria.core.runtimes.jsonl import JsonLinesRuntime, as_dict, int_or_none, str_or_none


class PiJson(JsonLinesRuntime):
    def __init__(self, stream_id: str, agent: str) -> None:
        super().__init__(stream_id, agent)
        self.session_id: str | None = None
        self._streamed = False  # the current assistant message came as deltas
        self._input = self._output = 0
        self._cost = 0.0
        self._last: dict[str, Any] | None = None  # the last assistant message

    def dispatch(self, data: dict[str, Any]) -> list[Event]:
        kind = data.get("type")
        if kind == "session":
            self.session_id = str_or_none(data.get("id"))
            return [Init(self.stream_id, agent=self.agent, session_id=self.session_id)]
        if kind == "message_start":
            self._streamed = False
            return []
        if kind == "message_update":
            return self._update(as_dict(data.get("assistantMessageEvent"), "assistantMessageEvent"))
        if kind == "message_end":
            return self._message_end(as_dict(data.get("message"), "message"))
        if kind == "tool_execution_start":
            return [ToolStart(self.stream_id, tool_id=str(data.get("toolCallId", "")),
                              name=str(data.get("toolName", "")), input=data.get("args"))]
        if kind == "tool_execution_end":
            return [ToolDone(self.stream_id, tool_id=str(data.get("toolCallId", "")),
                             output=_result_text(data.get("result")),
                             is_error=bool(data.get("isError", False)))]
        if kind == "auto_retry_start":
            return [self.diag(f"pi: retry {data.get('attempt')}/{data.get('maxAttempts')}: "
                              f"{data.get('errorMessage', '')}")]
        if kind == "agent_end":
            return self._agent_end()
        return []

    def _update(self, event: dict[str, Any]) -> list[Event]:
        etype, delta = event.get("type"), event.get("delta")
        if etype == "text_delta" and isinstance(delta, str):
            self._streamed = True
            return [TextDelta(self.stream_id, text=delta)]
        if etype == "thinking_delta" and isinstance(delta, str):
            self._streamed = True
            return [ThinkingDelta(self.stream_id, text=delta)]
        return []

    def _message_end(self, message: dict[str, Any]) -> list[Event]:
        if message.get("role") != "assistant":
            return []
        self._last = message
        usage = message.get("usage")
        if isinstance(usage, dict):
            self._input += int_or_none(usage.get("input")) or 0
            self._output += int_or_none(usage.get("output")) or 0
            cost = usage.get("cost")
            total = cost.get("total") if isinstance(cost, dict) else None
            if isinstance(total, int | float) and not isinstance(total, bool):
                self._cost += float(total)
        if self._streamed:
            return []
        out: list[Event] = []  # no deltas came: the whole message is the text
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "text":
                out.append(TextDelta(self.stream_id, text=str(block.get("text", ""))))
            elif isinstance(block, dict) and block.get("type") == "thinking":
                out.append(ThinkingDelta(self.stream_id, text=str(block.get("thinking", ""))))
        return out

    def _agent_end(self) -> list[Event]:
        reason = (self._last or {}).get("stopReason")
        if reason == "aborted":
            self._outcome = Outcome(STOP_CANCELLED)
        elif reason == "error":
            message = (self._last or {}).get("errorMessage")
            self._outcome = Outcome(STOP_ERROR, error=str(message or "pi reported an error"))
        else:
            self._outcome = Outcome(STOP_END_TURN)
        if self._last is None:
            return []
        return [Usage(self.stream_id, input_tokens=self._input, output_tokens=self._output,
                      cost_usd=self._cost)]


def _result_text(result: object) -> str:
    """A tool result is ``{content: [{type: text, text}], details}``."""
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        return "\n".join(str(block.get("text", "")) for block in result["content"]
                         if isinstance(block, dict) and block.get("type") == "text")
    if isinstance(result, str):
        return result
    return "" if result is None else json.dumps(result)[:10_000]
