"""A stored chat as the export sees it: its metadata, then its turns one by one.

The turns are read from the store a page at a time (``Store.turns_after``), so a chat of
thousands of turns never sits in memory whole: each writer (JSON, Markdown, HTML) takes one turn,
writes it and forgets it. A turn is a plain JSON-ready dict, the same one the JSON export writes
(its shape: docs/EXPORT.md), built the way the transcript shows a turn (tolaria/ui/transcript/
turn_view.py): consecutive text joined, each tool call with its input, output, status and the
diff of an edit, errors with the stderr lines before them, notices, permission questions.

Every string passes the one secret policy (tolaria/support/redact.py) here, once: no writer can
forget it. A tool's input goes through ``redact_data`` (values under secret-looking keys), all
text through ``redact_text``.
"""

from __future__ import annotations

import base64
import time
from collections import deque
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from tolaria import __version__
from tolaria.chats.checkpoints import TurnChanges, TurnCheckpoints
from tolaria.core.attachments.blobs import BlobStore
from tolaria.core.attachments.model import AttachError, Attachment
from tolaria.core.events import (
    Diagnostic,
    Done,
    Error,
    Event,
    PermissionAsked,
    PermissionSettled,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    ToolUpdate,
    Usage,
)
from tolaria.core.output_cap import CAP_SOURCE
from tolaria.core.store.db import MARKER_TURN_RESTARTED, Conversation, Store, Turn
from tolaria.core.store.markers import MARKER_MESSAGE_STEERED
from tolaria.core.tool_edits import edit_of
from tolaria.support.redact import redact_data, redact_text

#: The JSON document's ``format`` and ``version`` (docs/EXPORT.md): a script checks both.
FORMAT_NAME = "tolaria-chat"
FORMAT_VERSION = 1
#: Turns read from the store at once.
PAGE = 100
#: Stderr lines kept before an error (the transcript's error card shows as many).
STDERR_LINES = 40
#: Diagnostic sources shown in a turn as a notice (the others are logs, not conversation).
NOTICE_SOURCES = ("notice", CAP_SOURCE, "retry")
#: What a tool without a result became when its turn ended so (as the transcript says).
_PENDING_TOOL = {"cancelled": "cancelled", "interrupted": "interrupted"}


class ChatNotFound(LookupError):
    """No stored chat has that id."""


def iso(moment: float | None) -> str | None:
    """A store time (seconds since the epoch) as ISO 8601 in UTC, None stays None."""
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def chat_header(store: Store, conversation_id: int) -> dict[str, Any]:
    """The document's head: the format, when and by what it was written, the chat itself."""
    chat = store.get_conversation(conversation_id)
    if chat is None:
        raise ChatNotFound(conversation_id)
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION,
            "exported_at": iso(time.time()), "tolaria": __version__, "chat": _chat(chat),
            "turn_count": store.turn_count(conversation_id)}


def _chat(chat: Conversation) -> dict[str, Any]:
    return {"id": chat.id, "title": redact_text(chat.title), "agent": chat.agent,
            "cwd": chat.cwd, "origin": chat.origin, "created_at": iso(chat.created_at),
            "updated_at": iso(chat.updated_at)}


def iter_turns(store: Store, conversation_id: int, page: int = PAGE) -> Iterator[dict[str, Any]]:
    """The chat's turns, oldest first, as export dicts, read ``page`` turns at a time."""
    markers = store.markers(conversation_id)
    abandoned = {m.turn_id for m in markers if m.kind == MARKER_TURN_RESTARTED}
    steered: dict[int, list[str]] = {}
    for m in markers:
        if m.kind == MARKER_MESSAGE_STEERED and m.turn_id is not None \
                and isinstance(m.data, dict):
            steered.setdefault(m.turn_id, []).append(str(m.data.get("text", "")))
    changes = {c.turn_id: c for c in TurnCheckpoints(store).changes(conversation_id)}
    after, number = 0, 0
    while True:
        chunk = store.turns_after(conversation_id, after, page)
        files = store.attachments_of_turns([turn.id for turn, _events in chunk.turns])
        for turn, events in chunk.turns:
            number += 1
            yield turn_dict(number, turn, events, abandoned=turn.id in abandoned,
                            steered=steered.get(turn.id, ()), changes=changes.get(turn.id),
                            attachments=files.get(turn.id, ()))
            after = turn.id
        if not chunk.has_newer or not chunk.turns:
            return


def turn_dict(number: int, turn: Turn, events: list[Event], *, abandoned: bool = False,
              steered: Any = (), changes: TurnChanges | None = None,
              attachments: Sequence[Attachment] = ()) -> dict[str, Any]:
    """One turn as the JSON export writes it (docs/EXPORT.md)."""
    builder = _Items(turn.status)
    for event in events:
        builder.add(event)
    builder.finish()
    usage = builder.usage
    input_tokens = turn.input_tokens if turn.input_tokens is not None else usage.get("input")
    output_tokens = turn.output_tokens if turn.output_tokens is not None else usage.get("output")
    cost = turn.cost_usd if turn.cost_usd is not None else usage.get("cost")
    items = builder.items + [{"type": "message", "text": redact_text(t)} for t in steered]
    return {
        "number": number, "id": turn.id, "stream_id": turn.stream_id, "agent": turn.agent,
        "prompt": redact_text(turn.prompt), "status": turn.status,
        "stop_reason": turn.stop_reason, "abandoned": abandoned,
        "started_at": iso(turn.started_at), "finished_at": iso(turn.finished_at),
        "duration_ms": turn.duration_ms,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cost_usd": cost},
        "items": items,
        "survivors": builder.survivors,
        "changes": _changes(changes),
        # Files the user attached to the prompt (ADR 0028), their bytes as base64 from the
        # stored copy ("data": null when that copy is gone).
        "attachments": [_attachment(a) for a in attachments],
    }


def _attachment(attachment: Attachment) -> dict[str, Any]:
    try:
        data: str | None = base64.b64encode(BlobStore().read(attachment)).decode("ascii")
    except AttachError:
        data = None
    return {"name": attachment.name, "media_type": attachment.mime, "size": attachment.size,
            "kind": attachment.kind, "sha256": attachment.sha256, "data": data}


def _changes(changes: TurnChanges | None) -> dict[str, Any] | None:
    if changes is None:
        return None
    return {"files": [{"path": f.path, "status": f.status} for f in changes.files],
            "reverted": sorted(changes.reverted), "rewound": changes.rewound,
            "late": changes.late, "notice": changes.notice}


class _Items:
    """A turn's events folded into the items the transcript shows, in order."""

    def __init__(self, status: str) -> None:
        self.status = status
        self.items: list[dict[str, Any]] = []
        self.tools: dict[str, dict[str, Any]] = {}
        self.questions: dict[str, dict[str, Any]] = {}
        self.stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self.usage: dict[str, Any] = {}
        self.survivors: list[dict[str, Any]] = []
        self._text: list[str] = []
        self._text_kind = ""

    def _flush_text(self) -> None:
        if self._text:
            self.items.append({"type": self._text_kind, "text": redact_text("".join(self._text))})
            self._text = []

    def _append(self, item: dict[str, Any]) -> None:
        self._flush_text()
        self.items.append(item)

    def add(self, event: Event) -> None:
        if isinstance(event, TextDelta | ThinkingDelta):
            kind = "text" if isinstance(event, TextDelta) else "thinking"
            if kind != self._text_kind:
                self._flush_text()
                self._text_kind = kind
            self._text.append(event.text)
        elif isinstance(event, ToolStart):
            tool: dict[str, Any] = {"type": "tool", "id": event.tool_id, "name": event.name,
                    "input": redact_data(event.input), "output": "", "status": "running",
                    "diff": None}
            self.tools[event.tool_id] = tool
            self._append(tool)
        elif isinstance(event, ToolUpdate):
            self._update(event)
        elif isinstance(event, ToolDone):
            found = self.tools.get(event.tool_id)
            if found is None:  # a result without a start: still shown
                found = {"type": "tool", "id": event.tool_id, "name": "tool", "input": None,
                         "output": "", "status": "running", "diff": None}
                self.tools[event.tool_id] = found
                self._append(found)
            found["output"] = redact_text(event.output)
            found["status"] = "failed" if event.is_error else "done"
        elif isinstance(event, Error):
            self._append({"type": "error", "message": redact_text(event.message),
                          "hint": redact_text(event.hint), "category": event.category,
                          "stderr": list(self.stderr)})
        elif isinstance(event, Diagnostic):
            self._diagnostic(event)
        elif isinstance(event, PermissionAsked):
            question = {"type": "question", "title": redact_text(event.title),
                        "tool_id": event.tool_id, "outcome": None}
            if event.key not in self.questions:
                self.questions[event.key] = question
                self._append(question)
        elif isinstance(event, PermissionSettled):
            if event.key in self.questions:
                self.questions[event.key]["outcome"] = event.outcome
        elif isinstance(event, Usage):
            self.usage = {"input": event.input_tokens, "output": event.output_tokens,
                          "cost": event.cost_usd}
        elif isinstance(event, Done):
            self.survivors = [{"pid": s.pid, "name": s.name} for s in event.survivors]

    def _update(self, event: ToolUpdate) -> None:
        tool = self.tools.get(event.tool_id)
        if tool is None:
            return
        if event.name:
            tool["name"] = event.name
        if event.input is not None:
            tool["input"] = redact_data(event.input)
        if event.status and tool["status"] in ("pending", "running"):
            tool["status"] = event.status
        if event.output is not None and tool["status"] in ("pending", "running"):
            tool["output"] = redact_text(event.output)

    def _diagnostic(self, event: Diagnostic) -> None:
        if event.source == "stderr":
            self.stderr.append(redact_text(event.message))
        elif event.source in NOTICE_SOURCES:
            last = self.items[-1] if self.items and not self._text else None
            if event.source == "retry" and last is not None and last.get("source") == "retry":
                last["message"] = redact_text(event.message)  # the transcript keeps the last
            else:
                self._append({"type": "notice", "source": event.source,
                              "message": redact_text(event.message)})

    def finish(self) -> None:
        self._flush_text()
        for tool in self.tools.values():
            edit = edit_of(tool["input"])  # (path, diff text) or None
            if edit is not None:
                tool["diff"] = {"path": edit[0], "text": edit[1]}
            if tool["status"] in ("pending", "running") and self.status != "running":
                tool["status"] = _PENDING_TOOL.get(self.status, "unfinished")
        for question in self.questions.values():
            if question["outcome"] is None and self.status != "running":
                question["outcome"] = "closed"
