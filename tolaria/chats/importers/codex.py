"""Codex sessions: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``.

``session_meta`` names the session and folder; ``response_item`` lines are the conversation as
the model saw it: ``message`` (user / assistant; developer and context messages are Codex's
own), ``function_call`` / ``custom_tool_call`` and their ``*_output`` by ``call_id``, and
``reasoning`` summaries. ``event_msg`` lines repeat the same for the UI and are not read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tolaria.chats.importers.model import (
    Session,
    SessionFormatError,
    Thinking,
    Tool,
    Turn,
    output_text,
    read_jsonl,
    text_of,
    timestamp,
)

AGENT = "codex"
#: User-role messages that Codex writes itself (environment, instructions), not typed prompts.
_CONTEXT = ("<environment_context>", "<user_instructions>", "<skills_instructions>",
            "<permissions", "# AGENTS.md", "<turn_aborted>", "<user_shell_command>")
_EXIT = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")
_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")


def find(home: Path) -> Iterator[Path]:
    yield from sorted((home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))


def parse(path: Path) -> Session:
    records, bad = read_jsonl(path)
    match = _ID.search(path.name)
    session = Session(AGENT, match.group(1) if match else path.stem, path, bad_lines=bad)
    tools: dict[str, Tool] = {}
    turn: Turn | None = None
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
        if kind == "message" and payload.get("role") == "user":
            text = text_of(payload.get("content"))
            if text.strip() and not text.lstrip().startswith(_CONTEXT):
                turn = Turn(text, started_at=timestamp(record.get("timestamp")))
                session.turns.append(turn)
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
    return session


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
    code = _EXIT.search(tool.output)
    tool.is_error = bool(code and code.group(1) != "0")
