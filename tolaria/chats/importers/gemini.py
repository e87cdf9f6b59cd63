"""Gemini CLI sessions: ``~/.gemini/tmp/<project>/chats/session-*.jsonl`` (or ``.json``).

The JSONL form is a log: a header (``sessionId``, ``startTime``), ``{"$set": {...}}`` patches
(``messages`` may be set whole) and message records that may be written again as they grow (the
same ``id``: the last one wins, in first-seen order). The older ``.json`` form is one object with
``messages``. A ``gemini`` message holds its text, ``thoughts`` and ``toolCalls`` with their
results; ``user`` messages are prompts, the CLI's ``<session_context>`` and tool responses.
The project folder is in ``<project>/.project_root``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tolaria.chats.importers.model import (
    Session,
    SessionFormatError,
    Thinking,
    Tool,
    Turn,
    check_file,
    output_text,
    read_jsonl,
    text_of,
    timestamp,
)

AGENT = "gemini"
_CONTEXT = ("<session_context>",)


def find(home: Path) -> Iterator[Path]:
    chats = home / ".gemini" / "tmp"
    yield from sorted([*chats.glob("*/chats/session-*.jsonl"), *chats.glob("*/chats/session-*.json")])


def parse(path: Path) -> Session:
    if path.suffix == ".json":
        check_file(path)
        try:
            whole = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except ValueError as exc:
            raise SessionFormatError(f"not JSON: {exc}") from None
        if not isinstance(whole, dict):
            raise SessionFormatError("not a session object")
        records, bad = [whole, *[m for m in whole.get("messages") or [] if isinstance(m, dict)]], 0
    else:
        records, bad = read_jsonl(path)
    session = Session(AGENT, path.stem, path, bad_lines=bad)
    messages: dict[str, dict[str, Any]] = {}
    for record in records:
        patch = record.get("$set")
        if isinstance(patch, dict):
            record = patch
        if isinstance(record.get("sessionId"), str):
            session.session_id = record["sessionId"]
        for message in record.get("messages") or []:
            if isinstance(message, dict) and "id" in message:
                messages[str(message["id"])] = message
        if "id" in record and "type" in record:
            messages[str(record["id"])] = record
    root = path.parent.parent / ".project_root"
    if root.is_file():
        session.cwd = root.read_text(errors="replace").strip() or None
    turn: Turn | None = None
    for message in messages.values():
        if message.get("type") == "user":
            text = text_of(message.get("content"))
            if text.strip() and not text.lstrip().startswith(_CONTEXT):
                turn = Turn(text, started_at=timestamp(message.get("timestamp")))
                session.turns.append(turn)
        elif message.get("type") == "gemini" and turn is not None:
            _answer(message, turn)
    if not session.turns:
        raise SessionFormatError("no user prompt in the session")
    return session


def _answer(message: dict[str, Any], turn: Turn) -> None:
    for thought in message.get("thoughts") or []:
        if isinstance(thought, dict):
            text = "\n".join(str(thought[k]) for k in ("subject", "description") if thought.get(k))
            if text:
                turn.items.append(Thinking(text))
    turn.text(text_of(message.get("content")))
    for call in message.get("toolCalls") or []:
        if not isinstance(call, dict):
            continue
        tool = Tool(str(call.get("id", "")), str(call.get("name", "tool")), call.get("args"))
        tool.output, tool.is_error = _result(call)
        turn.tool(tool)


def _result(call: dict[str, Any]) -> tuple[str | None, bool]:
    error = call.get("status") == "error"
    for part in call.get("result") or []:
        response = part.get("functionResponse", {}).get("response") if isinstance(part, dict) else None
        if isinstance(response, dict):
            if "error" in response:
                return output_text(response["error"]), True
            return output_text(response.get("output", response)), error
    display = call.get("resultDisplay")
    return (output_text(display) if display is not None else None), error
