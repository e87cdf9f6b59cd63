"""Claude Code's ``--output-format stream-json`` dialect (also Qwen Code's, nearly).

Mapped from real captured output (tests/fixtures/claude/). With ``--include-partial-messages``
Claude prints ``stream_event`` deltas *and then* the complete ``assistant`` message with the same
message id; text and thinking of such a message are emitted once, from the deltas.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # (C; not in the stubs)
from typing import Any

from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    STOP_ERROR,
    Diagnostic,
    Event,
    Init,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolUpdate,
    text_delta,
)
from tolaria.core.mcp.servers import NOTE
from tolaria.core.mcp.toolnames import tool_start
from tolaria.core.runtimes.base import Outcome
from tolaria.core.runtimes.claude_usage import ClaudeUsage
from tolaria.core.runtimes.jsonl import JsonLinesRuntime, preview

#: Most of what Claude prints is text deltas, each one line of exactly this shape (keys in this
#: order, no spaces): ``_text_delta`` reads their text without parsing the whole line. Any
#: other line, or one that differs in anything, goes through the JSON parser as before.
_DELTA_HEAD = re.compile(r'\{"type":"stream_event","event":\{"type":"content_block_delta",'
                         r'"index":(?:0|[1-9][0-9]*),"delta":\{"type":"text_delta","text":"')
#: The same with index 0, tested without the regex.
_DELTA_HEAD_0 = ('{"type":"stream_event","event":{"type":"content_block_delta","index":0,'
                 '"delta":{"type":"text_delta","text":"')
#: What may follow the text: the ends of the delta and the event, then only these keys (none
#: the dialect reads) with a plain string or null (valid JSON: no escapes, no control
#: characters), and the end of the line's object.
_DELTA_TAIL = re.compile(r'\}\}(?:,"(?:session_id|parent_tool_use_id|uuid|api_message_id)":'
                         r'(?:"[^"\\\x00-\x1f]*+"|null))*+\}')  # (possessive: no backtracking)


def _text_delta(line: str) -> str | None:
    """The text of a text-delta line of the usual shape, exactly as the JSON parser would
    read it; None for any other line."""
    if line.startswith(_DELTA_HEAD_0):  # nearly every delta: no regex needed
        start = len(_DELTA_HEAD_0)
    else:
        head = _DELTA_HEAD.match(line)
        if head is None:
            return None
        start = head.end()
    try:
        text, end = scanstring(line, start, True)  # json's own string reader, strict
    except ValueError:  # (JSONDecodeError) the full parse reports it
        return None
    return text if _DELTA_TAIL.fullmatch(line, end) else None


class ClaudeStreamJson(JsonLinesRuntime):
    def __init__(self, stream_id: str, agent: str) -> None:
        super().__init__(stream_id, agent)
        self._streamed_messages: set[str] = set()
        self._current_message: str | None = None
        self.session_id: str | None = None
        #: The turn's tokens, cost, context and rate limits as they come.
        self._usage = ClaudeUsage(stream_id)

    def feed(self, line: str) -> list[Event]:
        text = _text_delta(line)
        if text is None:
            return super().feed(line)
        events: list[Event] = [text_delta(self.stream_id, text)]
        if self.retrying is not None:
            self.note_progress(events)
        return events

    def dispatch(self, data: dict[str, Any]) -> list[Event]:
        kind = data.get("type")
        if kind == "stream_event":  # most lines: the deltas
            return self._stream_event(data.get("event"))
        if kind == "system":
            return self._system(data)
        if kind == "assistant":
            return self._assistant(data["message"])
        if kind == "user":
            return self._user(data["message"])
        if kind == "result":
            return self._result(data)
        if kind == "tool_progress":
            return self._tool_progress(data)
        if kind == "rate_limit_event":
            return list(self._usage.rate_limit(data))
        return []

    def _tool_progress(self, data: dict[str, Any]) -> list[Event]:
        """A running tool's output so far: ``partial_output`` is sent by Tolaria's demo agent
        only (Claude's own ``tool_progress`` says how long a tool has run, nothing to show)."""
        tool_id, output = data.get("tool_use_id"), data.get("partial_output")
        if not isinstance(tool_id, str) or not isinstance(output, str):
            return []
        return [ToolUpdate(self.stream_id, tool_id=tool_id, status="running", output=output)]

    def _system(self, data: dict[str, Any]) -> list[Event]:
        subtype = data.get("subtype")
        if subtype == "init":
            sid = data.get("session_id")
            self.session_id = sid if isinstance(sid, str) else None
            return [Init(self.stream_id, agent=self.agent, session_id=self.session_id),
                    *self._mcp_status(data.get("mcp_servers"))]
        if subtype == "api_retry":
            # Seen for a refused connection: attempt 1..10 of max_retries 10, error "unknown",
            # error_status null, delays doubling up to ~35 s (docs/retries.md).
            status = data.get("error_status")
            self.mark_retrying(f"API retry {data.get('attempt')} of {data.get('max_retries')}: "
                               f"{data.get('error') or 'error'}"
                               + (f", HTTP {status}" if isinstance(status, int) else ""))
            return [self.diag(f"API retry: {preview(json.dumps(data))}")]
        return []

    def _mcp_status(self, servers: object) -> list[Event]:
        """A server Claude could not connect to is said in the chat, not dropped silently (the
        run goes on without it; a slow one may still connect later)."""
        out: list[Event] = []
        for server in servers if isinstance(servers, list) else []:
            if not isinstance(server, dict) or server.get("status") in ("connected", None):
                continue
            out.append(Diagnostic(self.stream_id, source=NOTE,
                                  message=f"MCP server {str(server.get('name'))!r}: "
                                          f"{server.get('status')} at start (Claude Code)"))
        return out

    def _stream_event(self, event: object) -> list[Event]:
        if not isinstance(event, dict):
            raise TypeError("event is not an object")
        etype = event.get("type")
        if etype == "content_block_delta":
            delta = event["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                return [TextDelta(self.stream_id, text=str(delta["text"]))]
            if dtype == "thinking_delta":
                return [ThinkingDelta(self.stream_id, text=str(delta["thinking"]))]
            return []
        if etype == "message_start":
            message = event.get("message") or {}
            mid = message.get("id") if isinstance(message, dict) else None
            self._current_message = mid if isinstance(mid, str) else None
            if self._current_message:
                self._streamed_messages.add(self._current_message)
        return []

    def _assistant(self, message: dict[str, Any]) -> list[Event]:
        streamed = message.get("id") in self._streamed_messages
        out: list[Event] = list(self._usage.message(message))
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and not streamed:
                out.append(TextDelta(self.stream_id, text=str(block.get("text", ""))))
            elif btype == "thinking" and not streamed:
                out.append(ThinkingDelta(self.stream_id, text=str(block.get("thinking", ""))))
            elif btype == "tool_use":
                out.append(tool_start(self.stream_id, str(block.get("id", "")),
                                      str(block.get("name", "")), block.get("input")))
        return out

    def _user(self, message: dict[str, Any]) -> list[Event]:
        content = message.get("content")
        if not isinstance(content, list):
            return []
        out: list[Event] = []
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            tool_id = block.get("tool_use_id")
            if not isinstance(tool_id, str):
                raise ValueError("tool_result without tool_use_id")
            out.append(ToolDone(self.stream_id, tool_id=tool_id,
                                output=_content_text(block.get("content")),
                                is_error=bool(block.get("is_error", False))))
        return out

    def _result(self, data: dict[str, Any]) -> list[Event]:
        out: list[Event] = list(self._usage.result(data))
        if data.get("terminal_reason") == "aborted_tools":
            self._outcome = Outcome(STOP_CANCELLED)
        elif data.get("is_error"):
            message = data.get("result") or "; ".join(map(str, data.get("errors") or [])) \
                or f"agent reported an error ({data.get('subtype')})"
            self._outcome = Outcome(STOP_ERROR, error=str(message))
        else:
            self._outcome = Outcome(STOP_END_TURN)
        return out


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
            elif isinstance(item, str):
                parts.append(item)
        return "\n".join(parts)
    return "" if content is None else json.dumps(content)[:10_000]
