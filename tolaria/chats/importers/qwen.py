"""Qwen Code sessions: ``~/.qwen/projects/<folder>/chats/<session id>.jsonl`` (also the older
``~/.qwen/tmp/<hash>/chats/``).

One record a line, Gemini-style parts: ``user`` (typed prompts), ``assistant`` (``text``,
``thought`` parts, ``functionCall``), ``tool_result`` (``functionResponse`` by call id) and
``system`` records (telemetry, snapshots), which are not the conversation. The prompt's ``uuid``
names the turn. Qwen marks no turn end: a turn is complete when its last record is the model's
text with every tool call answered (not while a tool runs, nor after a result it has not
answered, e.g. a stopped tool's "[Operation Cancelled]").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tolaria.chats.importers.model import (
    Session,
    SessionFormatError,
    Thinking,
    Tool,
    Turn,
    answered,
    output_text,
    read_jsonl,
    timestamp,
    typed_and_images,
)

AGENT = "qwen"


def find(home: Path) -> Iterator[Path]:
    base = home / ".qwen"
    yield from sorted([*base.glob("projects/*/chats/*.jsonl"), *base.glob("tmp/*/chats/*.jsonl")])


def parse(path: Path) -> Session:
    records, bad, cut = read_jsonl(path)
    session = Session(AGENT, path.stem, path, bad_lines=bad, cut=cut)
    tools: dict[str, Tool] = {}
    turn: Turn | None = None
    for record in records:
        if isinstance(record.get("sessionId"), str):
            session.session_id = record["sessionId"]
        if session.cwd is None and isinstance(record.get("cwd"), str):
            session.cwd = record["cwd"]
        message = record.get("message")
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(parts, list):
            continue
        parts = [p for p in parts if isinstance(p, dict)]
        kind = record.get("type")
        if turn is not None:
            turn.saw(timestamp(record.get("timestamp")))
        if kind == "user":
            text, images = typed_and_images(parts)
            if text.strip():
                uuid = record.get("uuid")
                turn = Turn(text, started_at=timestamp(record.get("timestamp")),
                            record_id=uuid if isinstance(uuid, str) else None, images=images)
                session.turns.append(turn)
                turn.saw(turn.started_at)
        elif kind == "assistant" and turn is not None:
            for part in parts:
                _assistant_part(part, turn, tools)
            turn.complete = answered(turn)
        elif kind == "tool_result":
            result = record.get("toolCallResult")
            stopped = isinstance(result, dict) and result.get("status") == "cancelled"
            for part in parts:
                tool = _result(part, tools)
                if tool is not None and stopped:
                    tool.stop()  # the user cancelled it: Qwen's note is no result
            if turn is not None:
                turn.complete = False
    if not session.turns:
        raise SessionFormatError("no user prompt in the session")
    session.last_open()
    return session


def _assistant_part(part: dict[str, Any], turn: Turn, tools: dict[str, Tool]) -> None:
    if isinstance(part.get("text"), str):
        if part.get("thought"):
            turn.items.append(Thinking(part["text"]))
        else:
            turn.text(part["text"])
    call = part.get("functionCall")
    if isinstance(call, dict):
        tool = Tool(str(call.get("id", "")), str(call.get("name", "tool")), call.get("args"))
        tools[tool.tool_id] = tool
        turn.tool(tool)


def _result(part: dict[str, Any], tools: dict[str, Tool]) -> Tool | None:
    """Give the call ``part`` answers its result; that call (None if none is known)."""
    response = part.get("functionResponse")
    if not isinstance(response, dict):
        return None
    tool = tools.get(str(response.get("id")))
    if tool is None:
        return None
    body = response.get("response")
    if isinstance(body, dict) and "error" in body:
        tool.output, tool.is_error = output_text(body["error"]), True
    else:
        tool.output = output_text(body.get("output", body) if isinstance(body, dict) else body)
    return tool
