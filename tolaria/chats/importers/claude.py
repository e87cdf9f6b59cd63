"""Claude Code sessions: ``~/.claude/projects/<folder>/<session id>.jsonl``.

One JSON object a line. ``user`` lines carry a prompt (a string, or text parts) or tool results
(``tool_result`` parts, matched to ``tool_use`` by id); ``assistant`` lines carry one content
block each (``text``, ``thinking``, ``tool_use``). Everything else (attachments, queue
operations, API request shapes, cost state) is bookkeeping. Sidechain (sub-agent) and meta lines
are not the conversation.
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
    output_text,
    read_jsonl,
    timestamp,
)

AGENT = "claude"
#: Text that Claude Code itself puts in the user's turn (slash commands, reminders).
_NOT_TYPED = ("<command-", "<local-command", "<system-reminder>", "Caveat: The messages below")


def find(home: Path) -> Iterator[Path]:
    yield from sorted((home / ".claude" / "projects").glob("*/*.jsonl"))


def parse(path: Path) -> Session:
    records, bad = read_jsonl(path)
    session = Session(AGENT, path.stem, path, bad_lines=bad)
    tools: dict[str, Tool] = {}
    turn: Turn | None = None
    for record in records:
        kind = record.get("type")
        if kind == "summary" and isinstance(record.get("summary"), str):
            session.title = session.title or record["summary"]
            continue
        if kind not in ("user", "assistant") or record.get("isSidechain") or record.get("isMeta"):
            continue
        if isinstance(record.get("sessionId"), str):
            session.session_id = record["sessionId"]
        if session.cwd is None and isinstance(record.get("cwd"), str):
            session.cwd = record["cwd"]
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if kind == "user":
            prompt = _prompt(content)
            if prompt is not None:
                turn = Turn(prompt, started_at=timestamp(record.get("timestamp")))
                session.turns.append(turn)
            else:
                _results(content, tools)
        elif turn is not None and isinstance(content, list):
            for block in content:
                _assistant_block(block, turn, tools)
    if not session.turns:
        raise SessionFormatError("no user prompt in the session")
    return session


def _prompt(content: Any) -> str | None:
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = [p for p in content if isinstance(p, dict)]
        if any(p.get("type") == "tool_result" for p in parts):
            return None
        text = "".join(p.get("text", "") for p in parts
                       if p.get("type") == "text" and isinstance(p.get("text"), str)
                       and not p["text"].startswith(_NOT_TYPED))
    else:
        return None
    if not text.strip() or text.lstrip().startswith(_NOT_TYPED):
        return None
    return text


def _results(content: Any, tools: dict[str, Tool]) -> None:
    if not isinstance(content, list):
        return
    for part in content:
        if isinstance(part, dict) and part.get("type") == "tool_result":
            tool = tools.get(str(part.get("tool_use_id")))
            if tool is not None:
                tool.output = output_text(part.get("content"))
                tool.is_error = bool(part.get("is_error"))


def _assistant_block(block: Any, turn: Turn, tools: dict[str, Tool]) -> None:
    if not isinstance(block, dict):
        return
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        turn.text(block["text"])
    elif kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"]:
        turn.items.append(Thinking(block["thinking"]))
    elif kind == "tool_use":
        tool = Tool(str(block.get("id", "")), str(block.get("name", "tool")), block.get("input"))
        tools[tool.tool_id] = tool
        turn.tool(tool)
