"""Claude Code sessions: ``~/.claude/projects/<folder>/<session id>.jsonl``.

One JSON object a line. ``user`` lines carry a prompt (a string, or text parts) or tool results
(``tool_result`` parts, matched to ``tool_use`` by id); ``assistant`` lines carry one content
block each (``text``, ``thinking``, ``tool_use``). A prompt's ``image`` blocks (base64) are its
images. Everything else (attachments, queue operations, API request shapes, cost state) is
bookkeeping. Sidechain (sub-agent) and meta lines
are not the conversation, nor are Claude's own interruption notes (a user record
``[Request interrupted by user]`` / ``... for tool use]`` after a stop, and the ``<synthetic>``
assistant reply "No response requested." that follows it). A tool call the user stopped (its
result record says ``toolUseResult: "User rejected tool use"``: the "result" is Claude's note to
the model) has no result: it shows as interrupted with its turn, not as failed.

A turn is complete when its last record is an assistant block whose ``stop_reason`` ends the
answer (``end_turn``, ``stop_sequence``, ``max_tokens``): not while a tool runs or its result
waits for the model, and not when the turn was interrupted. The prompt's ``uuid`` names the turn.
"""

from __future__ import annotations

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
    image_from_base64,
    image_name,
    output_text,
    read_jsonl,
    timestamp,
)

AGENT = "claude"
#: Text that Claude Code itself puts in the user's turn (slash commands, reminders).
_NOT_TYPED = ("<command-", "<local-command", "<system-reminder>", "Caveat: The messages below")
#: The user record Claude Code writes when a turn is stopped (not something the user typed).
_INTERRUPTED = "[Request interrupted by user"
#: The ``toolUseResult`` of a tool result that is Claude's note of the user stopping the call.
_REJECTED = "User rejected tool use"
#: An assistant ``stop_reason`` that ends the answer (``tool_use`` means a tool call follows).
_ANSWER_ENDS = ("end_turn", "stop_sequence", "max_tokens", "refusal")


def find(home: Path) -> Iterator[Path]:
    yield from sorted((home / ".claude" / "projects").glob("*/*.jsonl"))


def parse(path: Path) -> Session:
    records, bad, cut = read_jsonl(path)
    session = Session(AGENT, path.stem, path, bad_lines=bad, cut=cut)
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
        if turn is not None:
            turn.saw(timestamp(record.get("timestamp")))
        if kind == "user":
            prompt = _prompt(content)
            if prompt is not None and prompt.lstrip().startswith(_INTERRUPTED):
                if turn is not None:
                    turn.complete = False  # cut off: its answer never came
            elif prompt is not None:
                uuid = record.get("uuid")
                turn = Turn(prompt, started_at=timestamp(record.get("timestamp")),
                            record_id=uuid if isinstance(uuid, str) else None,
                            images=_images(content))
                session.turns.append(turn)
                turn.saw(turn.started_at)
            elif _results(content, tools, stopped=_stopped(record)) and turn is not None:
                turn.complete = False  # the model has not answered the results yet
        elif (turn is not None and isinstance(content, list) and isinstance(message, dict)
              and message.get("model") != "<synthetic>"):
            for block in content:
                _assistant_block(block, turn, tools)
            turn.complete = message.get("stop_reason") in _ANSWER_ENDS
    if not session.turns:
        raise SessionFormatError("no user prompt in the session")
    session.last_open()
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


def _images(content: Any) -> list[Image]:
    """The prompt's ``image`` blocks (base64 ``source``: what Claude was sent)."""
    blocks = [p for p in content if isinstance(p, dict) and p.get("type") == "image"
              and isinstance(p.get("source"), dict)] if isinstance(content, list) else []
    found = []
    for number, block in enumerate(blocks, 1):
        source = block["source"]
        name = image_name(None, source.get("media_type"), number)
        if source.get("type") == "base64":
            found.append(image_from_base64(name, source.get("data")))
        else:
            found.append(Image(name, problem="the session keeps only a link to it"))
    return found


def _stopped(record: dict[str, Any]) -> bool:
    """The user record's tool result is Claude's note that the user stopped the call."""
    return (record.get("toolUseResult") == _REJECTED
            or record.get("toolDenialKind") == "user-rejected")


def _results(content: Any, tools: dict[str, Tool], *, stopped: bool = False) -> bool:
    """Give the tool calls their results (none for a call the user ``stopped``); True if
    ``content`` held any."""
    found = False
    if not isinstance(content, list):
        return found
    for part in content:
        if isinstance(part, dict) and part.get("type") == "tool_result":
            found = True
            tool = tools.get(str(part.get("tool_use_id")))
            if tool is not None and stopped:
                tool.stop()
            elif tool is not None:
                tool.output = output_text(part.get("content"))
                tool.is_error = bool(part.get("is_error"))
    return found


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
