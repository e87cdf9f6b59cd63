"""opencode's ``opencode run --format json`` dialect.

Mapped from real captured output (tests/fixtures/opencode/): each model step is ``step_start``,
then ``text {part.text}`` and ``tool_use {part.tool, part.callID, part.state}`` (printed only once
the tool has finished, so one line gives both the start and the end of the tool), then
``step_finish {part.reason, part.tokens, part.cost}``. A step whose reason is ``stop`` ends the
turn; ``tool-calls`` means another step follows. API failures are an ``error`` event
``{error: {name, data: {message, statusCode}}}``. Every line carries ``sessionID``.
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
from tolaria.core.runtimes.jsonl import JsonLinesRuntime, as_dict, int_or_none, str_or_none

#: ``step_finish`` reasons that end the turn.
_FINAL_REASONS = {"stop", "length", "content-filter"}


class OpencodeJson(JsonLinesRuntime):
    def __init__(self, stream_id: str, agent: str) -> None:
        super().__init__(stream_id, agent)
        self.session_id: str | None = None
        self._initialised = False
        self._input_tokens = 0
        self._output_tokens = 0
        self._cost = 0.0
        self._has_cost = False

    def dispatch(self, data: dict[str, Any]) -> list[Event]:
        kind = data.get("type")
        out: list[Event] = []
        if not self._initialised and kind in ("step_start", "error"):
            self._initialised = True
            part = data.get("part")
            sid = data.get("sessionID") or (part.get("sessionID") if isinstance(part, dict) else None)
            self.session_id = str_or_none(sid)
            out.append(Init(self.stream_id, agent=self.agent, session_id=self.session_id))
        if kind == "text":
            text = as_dict(data.get("part"), "part").get("text")
            if not isinstance(text, str):
                raise TypeError("text part without text")
            if text:
                out.append(TextDelta(self.stream_id, text=text))
        elif kind == "reasoning":
            text = as_dict(data.get("part"), "part").get("text")
            if isinstance(text, str) and text:
                out.append(ThinkingDelta(self.stream_id, text=text))
        elif kind == "tool_use":
            out.extend(self._tool(as_dict(data.get("part"), "part")))
        elif kind == "step_finish":
            out.extend(self._step_finish(as_dict(data.get("part"), "part")))
        elif kind == "error":
            self._outcome = Outcome(STOP_ERROR, error=_error_message(data.get("error")))
        return out

    def _tool(self, part: dict[str, Any]) -> list[Event]:
        state = as_dict(part.get("state"), "part.state")
        tool_id = str(part.get("callID") or part.get("id") or "")
        out: list[Event] = [ToolStart(self.stream_id, tool_id=tool_id,
                                      name=str(part.get("tool", "")), input=state.get("input"))]
        status = state.get("status")
        if status == "completed":
            out.append(ToolDone(self.stream_id, tool_id=tool_id, output=_text(state.get("output"))))
        elif status == "error":
            out.append(ToolDone(self.stream_id, tool_id=tool_id,
                                output=_text(state.get("error") or state.get("output")),
                                is_error=True))
        return out

    def _step_finish(self, part: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        tokens = part.get("tokens")
        if isinstance(tokens, dict):
            # Each step reports its own tokens; the chat shows the latest Usage, so send totals.
            self._input_tokens += int_or_none(tokens.get("input")) or 0
            self._output_tokens += int_or_none(tokens.get("output")) or 0
            cost = part.get("cost")
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                self._cost += float(cost)
                self._has_cost = True
            out.append(Usage(self.stream_id, input_tokens=self._input_tokens,
                             output_tokens=self._output_tokens,
                             cost_usd=self._cost if self._has_cost else None))
        if part.get("reason") in _FINAL_REASONS:
            self._outcome = Outcome(STOP_END_TURN)
        return out


def _error_message(error: object) -> str:
    if isinstance(error, dict):
        data = error.get("data")
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            status = data.get("statusCode")
            return f"{data['message']} (HTTP {status})" if isinstance(status, int) else data["message"]
        if isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error.get("name"), str):
            return f"opencode error: {error['name']}"
    return f"opencode reported an error: {json.dumps(error)[:500]}"


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value)[:10_000]
