"""ACP ``session/update`` payloads to core events. No I/O, no SDK: plain dicts as on the wire.

Kept apart from the turn so the same mapper parses real captured sessions in the tests
(tests/fixtures/acp/) and the SDK's models (dumped back to wire form) at run time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    AgentCommands,
    Diagnostic,
    Event,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolUpdate,
    Usage,
)
from tolaria.core.mcp.toolnames import tool_start

#: Stop reasons of ``session/prompt`` (ACP v1); any other value is passed through as given.
STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")
CANCELLED_TOOL_OUTPUT = "cancelled"
_MAX_OUTPUT = 64_000
#: ACP statuses of a tool call that has not finished, as ``ToolUpdate.status``.
_OPEN_STATUS = {"pending": "pending", "in_progress": "running"}
#: Updates that describe the session, not the conversation: nothing to show in a turn.
_QUIET = {"current_mode_update", "config_option_update",
          "session_info_update", "user_message_chunk"}


def stop_reason(result: Mapping[str, Any] | None) -> str:
    """The Done stop reason for a ``session/prompt`` result.

    An agent on a protocol version without ``stopReason`` still ended the turn by answering.
    """
    reason = (result or {}).get("stopReason")
    if not isinstance(reason, str) or not reason:
        return STOP_END_TURN
    return STOP_CANCELLED if reason == "cancelled" else reason


def result_usage(stream_id: str, result: Mapping[str, Any] | None) -> Usage | None:
    usage = (result or {}).get("usage")
    if not isinstance(usage, Mapping):
        return None
    return Usage(stream_id, input_tokens=_int(usage.get("inputTokens")),
                 output_tokens=_int(usage.get("outputTokens")))


#: Commands kept of an ``available_commands_update``, and characters of each description.
_MAX_COMMANDS = 200
_MAX_DESCRIPTION = 300


def agent_commands(update: Mapping[str, Any]) -> tuple[dict[str, str], ...]:
    """The commands of an ``available_commands_update`` (name, one-line description, the input
    hint), bounded; entries without a usable name are left out."""
    found: list[dict[str, str]] = []
    listed = update.get("availableCommands")
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip() or "\n" in name:
            continue
        description = entry.get("description")
        line = " ".join(description.split()) if isinstance(description, str) else ""
        if len(line) > _MAX_DESCRIPTION:
            line = line[:_MAX_DESCRIPTION - 1] + "…"
        given = entry.get("input")
        hint = given.get("hint") if isinstance(given, Mapping) else None
        found.append({"name": name.strip().lstrip("/"), "description": line,
                      "hint": hint if isinstance(hint, str) else ""})
        if len(found) >= _MAX_COMMANDS:
            break
    return tuple(found)


class UpdateMapper:
    """Stateful: remembers which tool calls are open so Stop can close them as cancelled."""

    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        #: tool call id -> title, for calls started and not finished.
        self.open_tools: dict[str, str] = {}
        self._state: dict[str, _ToolState] = {}
        self._closed_tools: set[str] = set()
        #: While an agent replays history (``session/load``), nothing is a new event.
        self.muted = False

    def feed(self, update: Mapping[str, Any]) -> list[Event]:
        kind = update.get("sessionUpdate")
        if self.muted and kind != "available_commands_update":  # the session's, not history
            return []
        sid = self.stream_id
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            block = update.get("content")
            if not isinstance(block, Mapping):
                return []
            if block.get("type") != "text":
                return [Diagnostic(sid, source="acp",
                                   message=f"agent sent {block.get('type')!r} content (not shown)")]
            text = block.get("text")
            if not isinstance(text, str) or not text:
                return []
            return [TextDelta(sid, text=text) if kind == "agent_message_chunk"
                    else ThinkingDelta(sid, text=text)]
        if kind in ("tool_call", "tool_call_update"):
            return self._tool(update)
        if kind == "plan":
            entries = update.get("entries") or []
            lines = [f"[{e.get('status', '?')}] {e.get('content', '')}"
                     for e in entries if isinstance(e, Mapping)]
            return [Diagnostic(sid, source="plan", message="\n".join(lines))]
        if kind == "usage_update":
            cost = update.get("cost")
            amount = None
            if isinstance(cost, Mapping) and cost.get("currency", "USD") == "USD":
                amount = cost.get("amount")
            # ``used`` of ``size``: the tokens in the model's context now, of its window
            return [Usage(sid, cost_usd=float(amount) if isinstance(amount, int | float) else None,
                          context_tokens=_int(update.get("used")),
                          context_window=_int(update.get("size")) or None)]
        if kind == "available_commands_update":
            return [AgentCommands(sid, commands=agent_commands(update))]
        if kind in _QUIET or not isinstance(kind, str):
            return []
        return [Diagnostic(sid, source="acp", message=f"unhandled session update {kind!r}")]

    def cancel_open_tools(self) -> list[ToolDone]:
        """Stop: every unfinished tool call ends now, as an error saying it was cancelled."""
        return self.close_open_tools(CANCELLED_TOOL_OUTPUT)

    def close_open_tools(self, output: str) -> list[ToolDone]:
        events = [ToolDone(self.stream_id, tool_id=tool_id, output=output, is_error=True)
                  for tool_id in self.open_tools]
        self._closed_tools.update(self.open_tools)
        self.open_tools.clear()
        self._state.clear()
        return events

    def _tool(self, update: Mapping[str, Any]) -> list[Event]:
        tool_id = update.get("toolCallId")
        if not isinstance(tool_id, str) or tool_id in self._closed_tools:
            return []  # late news of a call already closed (by Stop): the turn has moved on
        events: list[Event] = []
        state = self._state.get(tool_id)
        if state is None or tool_id not in self.open_tools:
            title = str(update.get("title") or update.get("kind") or "tool")
            raw_input = update.get("rawInput")
            state = self._state[tool_id] = _ToolState(title, raw_input)
            self.open_tools[tool_id] = title
            events.append(tool_start(self.stream_id, tool_id, title, raw_input))
        status = update.get("status")
        finished = status in ("completed", "failed")
        change = state.change(update, finished)
        if change is not None:
            self.open_tools[tool_id] = state.title
            events.append(ToolUpdate(self.stream_id, tool_id=tool_id, **change))
        if finished:
            del self.open_tools[tool_id]
            self._state.pop(tool_id, None)
            self._closed_tools.add(tool_id)
            events.append(ToolDone(self.stream_id, tool_id=tool_id, output=_tool_output(update),
                                   is_error=status == "failed"))
        return events


class _ToolState:
    """What the chat was last told of an open tool call, so only changes become events."""

    __slots__ = ("input", "output", "status", "title")

    def __init__(self, title: str, raw_input: Any) -> None:
        self.title = title
        self.input = raw_input
        self.status = "running"  # what a started tool shows until told otherwise
        self.output = ""

    def change(self, update: Mapping[str, Any], finished: bool) -> dict[str, Any] | None:
        """The changed fields of a ``ToolUpdate`` (None when nothing changed).

        A finishing update only contributes its title and input: its output goes in ToolDone.
        """
        out: dict[str, Any] = {}
        title = update.get("title")
        if isinstance(title, str) and title and title != self.title:
            self.title = out["name"] = title
        if "rawInput" in update and update["rawInput"] not in (None, {}) \
                and update["rawInput"] != self.input:
            self.input = out["input"] = update["rawInput"]
        if not finished:
            status = _OPEN_STATUS.get(str(update.get("status")))
            if status is not None and status != self.status:
                self.status = out["status"] = status
            if update.get("content") or update.get("rawOutput") is not None:
                output = _tool_output(update)
                if output and output != self.output:
                    self.output = out["output"] = output
        return out or None


def _tool_output(update: Mapping[str, Any]) -> str:
    parts: list[str] = []
    for item in update.get("content") or []:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "content":
            block = item.get("content")
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        elif item.get("type") == "diff":
            parts.append(f"edited {item.get('path', '?')}")
        elif item.get("type") == "terminal":
            parts.append(f"[terminal {item.get('terminalId', '?')}]")
    if not parts and update.get("rawOutput") is not None:
        raw = update["rawOutput"]
        parts.append(raw if isinstance(raw, str) else json.dumps(raw))
    return "\n".join(parts)[:_MAX_OUTPUT]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
