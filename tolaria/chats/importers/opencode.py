"""opencode sessions: the SQLite database ``~/.local/share/opencode/opencode.db``.

Tables ``session`` (id, directory, title; a ``parent_id`` marks a sub-agent's session),
``message`` (JSON ``data`` with ``role``) and ``part`` (JSON ``data``: ``text``, ``reasoning``,
``tool`` with ``state.input/output/status``, step markers; a user message's image ``file``
parts are its images). The database is copied (with its WAL)
to a temporary folder and read there: opening it in place could write its ``-shm`` file, and an
import never writes to a CLI's files. The user message's id names the turn; a turn is complete
when its last assistant message finished (``time.completed``) with a ``finish`` that ends the
answer (not ``tool-calls``) and no error (a stopped one carries ``MessageAbortedError``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
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
    check_file,
    image_from_url,
    image_name,
    output_text,
    timestamp,
)

AGENT = "opencode"


def find(home: Path) -> Iterator[Path]:
    db = home / ".local" / "share" / "opencode" / "opencode.db"
    if db.exists():
        yield db


def parse_all(path: Path) -> list[Session]:
    """Every top-level session in the database."""
    check_file(path)
    with tempfile.TemporaryDirectory(prefix="tolaria-import-") as tmp:
        copy = Path(tmp) / "opencode.db"
        shutil.copyfile(path, copy)
        for suffix in ("-wal",):
            side = path.with_name(path.name + suffix)
            if side.is_file():
                shutil.copyfile(side, copy.with_name(copy.name + suffix))
        try:
            conn = sqlite3.connect(copy)
            try:
                return _sessions(conn, path)
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise SessionFormatError(f"not an opencode database: {exc}") from None


def _sessions(conn: sqlite3.Connection, path: Path) -> list[Session]:
    rows = conn.execute("SELECT id, directory, title FROM session WHERE parent_id IS NULL"
                        " ORDER BY time_created, id").fetchall()
    found = []
    for session_id, directory, title in rows:
        session = Session(AGENT, str(session_id), path, cwd=directory or None, title=title or None)
        _turns(conn, session)
        if session.turns:
            found.append(session)
    return found


def _turns(conn: sqlite3.Connection, session: Session) -> None:
    parts: dict[str, list[dict[str, Any]]] = {}
    for message_id, data in conn.execute(
            "SELECT message_id, data FROM part WHERE session_id = ? ORDER BY time_created, id",
            (session.session_id,)):
        parsed = _json(data)
        if parsed is not None:
            parts.setdefault(message_id, []).append(parsed)
    turn: Turn | None = None
    for message_id, created, data in conn.execute(
            "SELECT id, time_created, data FROM message WHERE session_id = ?"
            " ORDER BY time_created, id", (session.session_id,)):
        info = _json(data) or {}
        mine = parts.get(message_id, [])
        if info.get("role") == "user":
            text = "".join(p.get("text", "") for p in mine
                           if p.get("type") == "text" and not p.get("synthetic"))
            if text.strip():
                turn = Turn(text, started_at=timestamp(created), record_id=str(message_id),
                            images=_images(mine))
                session.turns.append(turn)
        elif info.get("role") == "assistant" and turn is not None:
            for part in mine:
                _part(part, turn)
            raw = info.get("time")
            times: dict[str, Any] = raw if isinstance(raw, dict) else {}
            finished = bool(times.get("completed"))
            turn.saw(timestamp(times["completed"] if finished else created))
            turn.complete = (finished and not info.get("error")
                             and info.get("finish") not in (None, "tool-calls", "unknown"))


def _images(parts: list[dict[str, Any]]) -> list[Image]:
    """A user message's ``file`` parts that are images (a ``data:`` or ``file://`` URL)."""
    files = [p for p in parts if p.get("type") == "file"
             and str(p.get("mime", "")).startswith("image/")]
    return [image_from_url(image_name(p.get("filename"), p.get("mime"), n), p.get("url"))
            for n, p in enumerate(files, 1)]


def _part(part: dict[str, Any], turn: Turn) -> None:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        turn.text(part["text"])
    elif kind == "reasoning" and isinstance(part.get("text"), str) and part["text"]:
        turn.items.append(Thinking(part["text"]))
    elif kind == "tool":
        raw = part.get("state")
        state: dict[str, Any] = raw if isinstance(raw, dict) else {}
        tool = Tool(str(part.get("callID", "")), str(part.get("tool", "tool")), state.get("input"))
        if state.get("status") == "error":
            tool.output, tool.is_error = output_text(state.get("error")), True
        elif "output" in state:
            tool.output = output_text(state.get("output"))
        turn.tool(tool)


def _json(data: Any) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
