"""Model-chat histories on disk, so a restarted Tolaria continues a model conversation.

One JSON file per session under ``<data dir>/model-chats/<session id>.json`` (mode 0600):
``{"version": 1, "messages": [...], "no_tools_models": [...]}``. ``messages`` is the Chat
Completions message list exactly as sent (system, user, assistant with ``tool_calls``, tool
results, including the "Tool call cancelled" answers), so it is valid for the next request.
``no_tools_models`` remembers the models that rejected ``tools`` in this session.

Writes are atomic: a temporary file in the same folder, fsync, then ``os.replace``; a crash
leaves the old file or the new one, never half of one.

A tool call left without an answer (the run's task was cancelled while a command ran) is
answered "Tool call cancelled" before saving: servers refuse a history with an unanswered call.

Bounds: a history is cut to ``MAX_HISTORY_CHARS`` characters of JSON (about 100k tokens) by
dropping whole turns from the oldest end (a turn is a user message and everything up to the next
one, so a tool call is never separated from its result; the system message stays). When the
newest turn alone is still too big, its longest tool results are shortened in place. At most
``MAX_SESSIONS`` files are kept; the least recently written go first.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tolaria.core.modelchat.client import CANCELLED_TOOL_RESULT
from tolaria.support import paths

MAX_HISTORY_CHARS = 400_000
MAX_SESSIONS = 500
TRUNCATED_NOTE = "\n[... shortened by Tolaria to keep the saved conversation small]"
_SESSION_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_VERSION = 1


class HistoryError(Exception):
    """A saved history cannot be read or written; the message names the file."""


@dataclass
class SavedChat:
    messages: list[dict[str, Any]] = field(default_factory=list)
    no_tools_models: list[str] = field(default_factory=list)


def history_dir() -> Path:
    return paths.data_dir() / "model-chats"


def valid_session_id(session_id: str) -> bool:
    """Only simple names become file names (a session id may come from a caller)."""
    return bool(_SESSION_RE.match(session_id))


class ChatHistoryStore:
    def __init__(self, folder: Path | None = None, *, max_chars: int = MAX_HISTORY_CHARS,
                 max_sessions: int = MAX_SESSIONS) -> None:
        self.folder = folder if folder is not None else history_dir()
        self.max_chars = max_chars
        self.max_sessions = max_sessions

    def _path(self, session_id: str) -> Path:
        return self.folder / f"{session_id}.json"

    def load(self, session_id: str) -> SavedChat | None:
        """The saved chat, or None when there is none; raises HistoryError when unreadable."""
        if not valid_session_id(session_id):
            return None
        path = self._path(session_id)
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise HistoryError(f"cannot read {path}: {exc.strerror or exc}") from exc
        try:
            data = json.loads(raw)
            messages = data["messages"]
            if not isinstance(messages, list) or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
                raise ValueError("messages is not a list of messages")
            no_tools = [str(m) for m in data.get("no_tools_models", [])]
        except (ValueError, KeyError, TypeError) as exc:
            raise HistoryError(f"{path} is not a saved model chat ({exc})") from exc
        return SavedChat(messages, no_tools)

    def save(self, session_id: str, chat: SavedChat, *, redact: str | None = None) -> None:
        """Write ``chat`` atomically, cut to the size bound. ``redact``: a secret (the API key)
        replaced by ``***`` wherever it appears."""
        if not valid_session_id(session_id):
            raise HistoryError(f"invalid session id {session_id!r}")
        messages = bound_messages(answer_dangling_calls(chat.messages), self.max_chars)
        text = json.dumps({"version": _VERSION, "messages": messages,
                           "no_tools_models": sorted(set(chat.no_tools_models))},
                          ensure_ascii=False)
        if redact:
            # The key as JSON encodes it, so it matches inside any string value.
            text = text.replace(json.dumps(redact, ensure_ascii=False)[1:-1], "***")
        try:
            paths.private_dir(self.folder)
            fd, tmp = tempfile.mkstemp(prefix=f".{session_id}.", suffix=".tmp", dir=self.folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self._path(session_id))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise HistoryError(f"cannot save the model chat in {self.folder}: "
                               f"{exc.strerror or exc}") from exc
        self._prune()

    def delete(self, session_id: str) -> None:
        if valid_session_id(session_id):
            with contextlib.suppress(FileNotFoundError):
                self._path(session_id).unlink()

    def _prune(self) -> None:
        try:
            files = [(p.stat().st_mtime, p) for p in self.folder.glob("*.json")]
        except OSError:
            return
        files.sort()
        for _, path in files[:max(0, len(files) - self.max_sessions)]:
            with contextlib.suppress(OSError):
                path.unlink()


def answer_dangling_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every unanswered tool call of an assistant message answered (right
    after that message's existing answers) by "Tool call cancelled"."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []

    def close() -> None:
        out.extend({"role": "tool", "tool_call_id": call_id, "content": CANCELLED_TOOL_RESULT}
                   for call_id in pending)
        pending.clear()

    for message in messages:
        if message.get("role") == "tool":
            if message.get("tool_call_id") in pending:
                pending.remove(message["tool_call_id"])
            out.append(message)
            continue
        close()
        out.append(message)
        if message.get("role") == "assistant":
            pending.extend(str(c.get("id")) for c in message.get("tool_calls") or ()
                           if isinstance(c, dict))
    close()
    return out


def _size(messages: list[dict[str, Any]]) -> int:
    return len(json.dumps(messages, ensure_ascii=False))


def bound_messages(messages: list[dict[str, Any]], max_chars: int) -> list[dict[str, Any]]:
    """``messages`` cut to about ``max_chars`` characters of JSON (see the module docstring)."""
    if _size(messages) <= max_chars:
        return list(messages)
    head = [m for m in messages[:1] if m.get("role") == "system"]
    rest = messages[len(head):]
    turns: list[list[dict[str, Any]]] = []
    for message in rest:
        if message.get("role") == "user" or not turns:
            turns.append([])
        turns[-1].append(message)
    budget = max_chars - _size(head)
    kept: list[list[dict[str, Any]]] = []
    used = 0
    for turn in reversed(turns):  # newest first; stop at the first turn that does not fit
        size = _size(turn)
        if kept and used + size > budget:
            break
        kept.append(turn)
        used += size
    kept.reverse()
    out = head + [m for turn in kept for m in turn]
    if _size(out) > max_chars:
        out = _shorten_tool_results(out, max_chars)
    return out


def _shorten_tool_results(messages: list[dict[str, Any]], max_chars: int) -> list[dict[str, Any]]:
    """Shorten the longest tool results (never drop them: their calls need an answer)."""
    out = [dict(m) for m in messages]
    tools = sorted((i for i, m in enumerate(out) if m.get("role") == "tool"
                    and isinstance(m.get("content"), str)),
                   key=lambda i: -len(out[i]["content"]))
    for i in tools:
        excess = _size(out) - max_chars
        if excess <= 0:
            break
        content: str = out[i]["content"]
        keep = max(0, len(content) - excess - len(TRUNCATED_NOTE) - 16)
        out[i]["content"] = content[:keep] + TRUNCATED_NOTE
    return out
