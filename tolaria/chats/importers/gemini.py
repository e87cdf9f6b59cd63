"""Gemini CLI sessions: ``~/.gemini/tmp/<project>/chats/session-*.jsonl`` (or ``.json``).

The JSONL form is a log: a header (``sessionId``, ``startTime``), ``{"$set": {...}}`` patches
(``messages`` may be set whole) and message records that may be written again as they grow (the
same ``id``: the last one wins, in first-seen order). The older ``.json`` form is one object with
``messages``. A ``gemini`` message holds its text, ``thoughts`` and ``toolCalls`` with their
results; ``user`` messages are prompts, the CLI's ``<session_context>`` and tool responses.
The project folder is in ``<project>/.project_root``. A resumed session sets ``messages`` again
with a tool's response as a ``user`` message under the id of the ``gemini`` message that called
it: messages are known by (id, type), so the call is not overwritten by its response.

Gemini marks no turn end: a turn is complete when its last message is the model's text with every
tool call answered. Gemini writes a tool call into the session only once the tool has ended, so
a turn caught while its tool runs reads as complete; a later import adds what came next.
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
    answered,
    check_file,
    output_text,
    read_jsonl,
    text_of,
    timestamp,
    typed_and_images,
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
        records = [whole, *[m for m in whole.get("messages") or [] if isinstance(m, dict)]]
        bad, cut = 0, False
    else:
        records, bad, cut = read_jsonl(path)
    session = Session(AGENT, path.stem, path, bad_lines=bad, cut=cut)
    messages: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        patch = record.get("$set")
        if isinstance(patch, dict):
            record = patch
        if isinstance(record.get("sessionId"), str):
            session.session_id = record["sessionId"]
        for message in record.get("messages") or []:
            if isinstance(message, dict) and "id" in message:
                _keep(messages, message)
        if "id" in record and "type" in record:
            _keep(messages, record)
    root = path.parent.parent / ".project_root"
    if root.is_file():
        session.cwd = root.read_text(errors="replace").strip() or None
    responses = {str(part["functionResponse"].get("id")): part["functionResponse"]
                 for (_, kind), message in messages.items() if kind == "user"
                 for part in _parts(message.get("content"))
                 if isinstance(part.get("functionResponse"), dict)}
    turn: Turn | None = None
    for (message_id, kind), message in messages.items():
        if kind == "user":
            text, images = typed_and_images(message.get("content"))
            if text.strip() and not text.lstrip().startswith(_CONTEXT):
                turn = Turn(text, started_at=timestamp(message.get("timestamp")),
                            record_id=message_id, images=images)
                session.turns.append(turn)
                turn.saw(turn.started_at)
        elif kind == "gemini" and turn is not None:
            _answer(message, turn, responses)
            turn.saw(timestamp(message.get("timestamp")))
    for each in session.turns:
        each.complete = answered(each)
    if not session.turns:
        raise SessionFormatError("no user prompt in the session")
    session.last_open()
    return session


def _keep(messages: dict[tuple[str, str], dict[str, Any]], message: dict[str, Any]) -> None:
    """A message written again replaces the earlier one, but keeps what only the earlier had (a
    resumed session writes its messages back in the model's parts form, without ``toolCalls``)."""
    key = (str(message["id"]), str(message.get("type")))
    messages[key] = {**messages.get(key, {}), **message}


def _parts(content: Any) -> list[dict[str, Any]]:
    return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []


def _answer(message: dict[str, Any], turn: Turn, responses: dict[str, dict[str, Any]]) -> None:
    for thought in message.get("thoughts") or []:
        if isinstance(thought, dict):
            text = "\n".join(str(thought[k]) for k in ("subject", "description") if thought.get(k))
            if text:
                turn.items.append(Thinking(text))
    turn.text(text_of(message.get("content")))
    calls = [c for c in message.get("toolCalls") or [] if isinstance(c, dict)]
    for call in calls:
        tool = Tool(str(call.get("id", "")), str(call.get("name", "tool")), call.get("args"))
        tool.output, tool.is_error = _result(call)
        turn.tool(tool)
    # The parts form: ``functionCall`` parts, answered by ``functionResponse`` parts of a user
    # message with the call's id.
    listed = {str(c.get("id")) for c in calls}
    for part in _parts(message.get("content")):
        asked = part.get("functionCall")
        if isinstance(asked, dict) and str(asked.get("id")) not in listed:
            tool = Tool(str(asked.get("id", "")), str(asked.get("name", "tool")), asked.get("args"))
            answer = responses.get(tool.tool_id)
            if answer is not None:
                tool.output, tool.is_error = _result({"result": [{"functionResponse": answer}]})
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
