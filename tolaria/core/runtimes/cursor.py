"""Cursor Agent's ``cursor-agent -p --output-format stream-json`` dialect.

From the documentation (https://cursor.com/docs/cli/reference/output-format), not from captured
output (tests/fixtures/cursor/README.md): Claude's ``system/init {session_id}``, ``user`` (the
prompt echoed back), ``assistant {message.content[text]}`` and ``result {subtype, is_error,
result, duration_ms}``, plus Cursor's own tool lines: ``tool_call`` with ``subtype`` ``started``
or ``completed``, a ``call_id`` and ``tool_call: {<kind>ToolCall: {args, result}}`` (for example
``shellToolCall``, ``readToolCall``, ``editToolCall``, or ``function {name, arguments}``), whose
``result`` holds ``success`` or ``error``. Thinking arrives as ``thinking {subtype: delta, text}``.
"""

from __future__ import annotations

import json
from typing import Any

from tolaria.core.events import Event, ThinkingDelta, ToolDone, ToolStart
from tolaria.core.runtimes.claude import ClaudeStreamJson
from tolaria.core.runtimes.jsonl import as_dict

_FAILED = ("error", "failure", "rejected", "denied")


class CursorStreamJson(ClaudeStreamJson):
    def __init__(self, stream_id: str, agent: str) -> None:
        super().__init__(stream_id, agent)
        self._started_tools: set[str] = set()

    def dispatch(self, data: dict[str, Any]) -> list[Event]:
        kind = data.get("type")
        if kind == "tool_call":
            return self._tool_call(data)
        if kind == "thinking":
            text = data.get("text")
            return ([ThinkingDelta(self.stream_id, text=text)]
                    if data.get("subtype") == "delta" and isinstance(text, str) and text else [])
        return super().dispatch(data)

    def _tool_call(self, data: dict[str, Any]) -> list[Event]:
        call = as_dict(data.get("tool_call"), "tool_call")
        call_id = str(data.get("call_id") or "")
        name, body = _tool_kind(call)
        subtype = data.get("subtype")
        if subtype == "started":
            self._started_tools.add(call_id)
            return [ToolStart(self.stream_id, tool_id=call_id, name=name, input=_tool_args(body))]
        if subtype != "completed":
            return []
        out: list[Event] = []
        if call_id not in self._started_tools:
            out.append(ToolStart(self.stream_id, tool_id=call_id, name=name,
                                 input=_tool_args(body)))
        self._started_tools.discard(call_id)
        result = body.get("result")
        is_error = isinstance(result, dict) and any(key in result for key in _FAILED)
        out.append(ToolDone(self.stream_id, tool_id=call_id, output=_tool_output(result),
                            is_error=is_error))
        return out


def _tool_kind(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(``shell``, body) for ``{"shellToolCall": body}``; the one key names the tool."""
    for key, body in call.items():
        if isinstance(body, dict):
            if key == "function":
                return str(body.get("name") or "function"), body
            return (key[: -len("ToolCall")] if key.endswith("ToolCall") else key), body
    raise ValueError("tool_call names no tool")


def _tool_args(body: dict[str, Any]) -> Any:
    args = body.get("args", body.get("arguments"))
    if isinstance(args, str):
        try:
            return json.loads(args)
        except json.JSONDecodeError:
            return args
    return args


def _tool_output(result: object) -> str:
    if result is None:
        return ""
    if isinstance(result, dict) and len(result) == 1:
        result = next(iter(result.values()))  # the success / error payload
    if isinstance(result, dict):
        for key in ("content", "stdout", "output", "message", "error"):
            value = result.get(key)
            if isinstance(value, str) and value:
                stderr = result.get("stderr")
                return value + (f"\n{stderr}" if key == "stdout" and stderr else "")
    return result if isinstance(result, str) else json.dumps(result)[:10_000]
