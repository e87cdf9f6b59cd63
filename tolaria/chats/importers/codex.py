"""Codex sessions: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``.

``session_meta`` names the session and folder; ``response_item`` lines are the conversation as
the model saw it: ``message`` (user / assistant; developer and context messages are Codex's
own), ``function_call`` / ``custom_tool_call`` and their ``*_output`` by ``call_id``, and
``reasoning`` summaries; a prompt's ``input_image`` parts are its images. ``event_msg`` lines
repeat the same for the UI and are not read, but for ``task_complete``: a turn is complete when Codex wrote it for the prompt's turn id (a
``turn_aborted`` one was stopped). The prompt message's ``id`` names the turn. A command the user
stopped while it ran (its output ends in Codex's "aborted by user") has no result: it shows as
interrupted with its turn, not as done.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tolaria.chats.importers.model import (
    Image,
    Session,
    SessionFormatError,
    Thinking,
    Tool,
    Turn,
    answered,
    image_from_url,
    image_name,
    output_text,
    read_jsonl,
    text_of,
    timestamp,
)

AGENT = "codex"
#: User-role messages that Codex writes itself (environment, instructions), not typed prompts.
_CONTEXT = ("<environment_context>", "<user_instructions>", "<skills_instructions>",
            "<permissions", "# AGENTS.md", "<turn_aborted>", "<user_shell_command>")
#: The last line of a command's output when the user stopped it while it ran.
_ABORTED = "aborted by user"
_EXIT = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")
#: The text part Codex puts before an attached image: ``<image name=[Image #1] path="...">``.
_IMAGE_TAG = re.compile(r'^<image name=[^>]*?(?: path="([^"]*)")?>$|^</image>$')
_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")


def find(home: Path) -> Iterator[Path]:
    yield from sorted((home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))


def parse(path: Path) -> Session:
    records, bad, cut = read_jsonl(path)
    match = _ID.search(path.name)
    session = Session(AGENT, match.group(1) if match else path.stem, path, bad_lines=bad,
                      cut=cut)
    tools: dict[str, Tool] = {}
    turn: Turn | None = None
    completed = {str(r["payload"].get("turn_id")) for r in records
                 if r.get("type") == "event_msg" and isinstance(r.get("payload"), dict)
                 and r["payload"].get("type") == "task_complete"}
    turn_ids: dict[int, str] = {}
    for record in records:
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        if record.get("type") == "session_meta":
            session.session_id = str(payload.get("id") or payload.get("session_id")
                                     or session.session_id)
            if isinstance(payload.get("cwd"), str):
                session.cwd = payload["cwd"]
            continue
        if record.get("type") != "response_item":
            continue
        kind = payload.get("type")
        if turn is not None:
            turn.saw(timestamp(record.get("timestamp")))
        if kind == "message" and payload.get("role") == "user":
            text, images = _prompt(payload.get("content"))
            if text.strip() and not text.lstrip().startswith(_CONTEXT):
                record_id = payload.get("id")
                turn = Turn(text, started_at=timestamp(record.get("timestamp")),
                            record_id=record_id if isinstance(record_id, str) else None,
                            images=images)
                meta = payload.get("internal_chat_message_metadata_passthrough")
                if isinstance(meta, dict) and meta.get("turn_id"):
                    turn_ids[len(session.turns)] = str(meta["turn_id"])
                session.turns.append(turn)
                turn.saw(turn.started_at)
        elif turn is None:
            continue
        elif kind == "message" and payload.get("role") == "assistant":
            turn.text(text_of(payload.get("content")))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            tool = Tool(str(payload.get("call_id", "")), str(payload.get("name", "shell")),
                        _arguments(payload))
            tools[tool.tool_id] = tool
            turn.tool(tool)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            _result(payload, tools)
        elif kind == "reasoning":
            summary = "\n".join(text_of([s]) for s in payload.get("summary") or []
                                if isinstance(s, dict))
            if summary.strip():
                turn.items.append(Thinking(summary))
    if not session.turns:
        raise SessionFormatError("no user prompt in the session")
    for index, each in enumerate(session.turns):
        # An older Codex without turn ids in its messages: judged by what the turn holds.
        each.complete = (turn_ids[index] in completed if index in turn_ids
                         else answered(each))
    session.last_open()
    return session


def _prompt(content: Any) -> tuple[str, list[Image]]:
    """The typed text and the images of a user message: Codex wraps each ``input_image`` (a
    ``data:`` URL) in ``<image name=... path="...">`` / ``</image>`` text parts, left out."""
    if not isinstance(content, list):
        return text_of(content), []
    texts: list[str] = []
    images: list[Image] = []
    path: str | None = None
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "input_image":
            name = image_name(path, None, len(images) + 1)
            images.append(image_from_url(name, part.get("image_url")))
            path = None
            continue
        text = part.get("text")
        if not isinstance(text, str):
            continue
        tag = _IMAGE_TAG.match(text.strip())
        if tag is not None:
            path = tag.group(1) or path
            continue
        texts.append(text)
    return "".join(texts), images


def _arguments(payload: dict[str, Any]) -> Any:
    raw = payload.get("arguments", payload.get("input", payload.get("action")))
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _result(payload: dict[str, Any], tools: dict[str, Tool]) -> None:
    tool = tools.get(str(payload.get("call_id")))
    if tool is None:
        return
    output = payload.get("output")
    if isinstance(output, dict):
        output = output.get("content", output)
    tool.output = output_text(output)
    if tool.output.rstrip().endswith(_ABORTED):
        tool.stop()  # Codex's note that the user stopped it: not the command's result
        return
    code = _EXIT.search(tool.output)
    tool.is_error = bool(code and code.group(1) != "0")
