"""Messages queued behind a running turn, kept in the store so they survive a quit or a crash.

Each change is its own committed transaction before the call returns (never batched like event
deltas): a message typed a moment before a crash is still there at the next start. A queue has a
``paused`` flag with its reason (``user``; ``quit``: Tolaria was closed with messages waiting;
``crash``: it ended without shutting down): a paused queue is not delivered when the turn ends.
``QueueLog`` is the part of ``Store`` that reads and writes the ``queued_messages`` and
``queue_state`` tables (schema version 3), and ``queued_attachments`` (the files queued with a
message, issue 26).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from tolaria.core.attachments.model import IMAGE, Attachment
from tolaria.core.store.parts import StorePart

_ATTACH_COLS = "name, sha256, size, mime, kind"

#: Why a queue is paused.
PAUSED_BY_USER = "user"
PAUSED_AT_QUIT = "quit"
PAUSED_AFTER_CRASH = "crash"


@dataclass(frozen=True)
class QueuedMessage:
    """A message typed while a turn ran; it becomes (part of) the next turn's prompt."""

    id: int
    text: str
    created: float = 0.0
    #: The files sent with it (stored copies; ADR 0028), in order.
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class QueueState:
    """A conversation's queue: its messages in delivery order and whether it is paused."""

    messages: tuple[QueuedMessage, ...] = ()
    paused: bool = False
    #: PAUSED_BY_USER, PAUSED_AT_QUIT or PAUSED_AFTER_CRASH when paused.
    reason: str | None = None
    #: The message the chat's agent cannot take now (an image after a switch to an agent that
    #: takes none), 0 if none: the queue waits at it; ``held_why`` says why to the user.
    held: int = 0
    held_why: str = ""


class QueueLog(StorePart):
    """Mixed into ``Store``, which provides the connection, its lock and transactions."""

    def queue_add(self, conversation_id: int, text: str,
                  attachments: Sequence[Attachment] = ()) -> QueuedMessage | None:
        """Append ``text`` (with ``attachments``, in the same transaction) to the
        conversation's queue; None if the conversation is gone."""
        with self._db_lock:
            try:
                with self._tx():
                    now = self._tick()
                    cur = self._conn.execute(
                        "INSERT INTO queued_messages (conversation_id, position, text, created)"
                        " VALUES (?, (SELECT COALESCE(MAX(position), 0) + 1 FROM queued_messages"
                        " WHERE conversation_id = ?), ?, ?)",
                        (conversation_id, conversation_id, text, now))
                    assert cur.lastrowid is not None
                    self._conn.executemany(
                        f"INSERT INTO queued_attachments (message_id, position, {_ATTACH_COLS})"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(cur.lastrowid, i, a.name, a.sha256, a.size, a.mime, a.kind)
                         for i, a in enumerate(attachments)])
            except sqlite3.IntegrityError:  # the conversation was deleted
                return None
        return QueuedMessage(cur.lastrowid, text, now, tuple(attachments))

    def queued(self, conversation_id: int) -> list[QueuedMessage]:
        """The conversation's queued messages in delivery order, with their attachments."""
        rows = self._query("SELECT id, text, created FROM queued_messages WHERE conversation_id = ?"
                           " ORDER BY position, id", conversation_id)
        files: dict[int, list[Attachment]] = {}
        for message_id, *rest in self._query(
                f"SELECT q.message_id, {', '.join('q.' + c for c in _ATTACH_COLS.split(', '))}"
                " FROM queued_attachments q JOIN queued_messages m ON m.id = q.message_id"
                " WHERE m.conversation_id = ? ORDER BY q.message_id, q.position",
                conversation_id):
            files.setdefault(message_id, []).append(Attachment(*rest))
        return [QueuedMessage(row[0], row[1], row[2], tuple(files.get(row[0], ())))
                for row in rows]

    def queue_state(self, conversation_id: int) -> QueueState:
        rows = self._query("SELECT paused, reason FROM queue_state WHERE conversation_id = ?",
                           conversation_id)
        paused, reason = rows[0] if rows else (0, None)
        return QueueState(tuple(self.queued(conversation_id)), bool(paused),
                          reason if paused else None)

    def queued_conversations(self) -> list[int]:
        """Conversations with messages waiting, oldest chat first."""
        rows = self._query("SELECT DISTINCT conversation_id FROM queued_messages"
                           " ORDER BY conversation_id")
        return [row[0] for row in rows]

    def queue_remove(self, conversation_id: int, message_ids: list[int]) -> list[QueuedMessage]:
        """Delete these messages (delivered or taken back); returns those that were queued."""
        with self._db_lock, self._tx():
            return self._take_queued(conversation_id, message_ids)

    def _take_queued(self, conversation_id: int, message_ids: Sequence[int]
                     ) -> list[QueuedMessage]:
        """Delete these queued messages inside the caller's transaction; returns those found."""
        wanted = set(message_ids)
        found = [m for m in self.queued(conversation_id) if m.id in wanted]
        self._conn.executemany(
            "DELETE FROM queued_messages WHERE conversation_id = ? AND id = ?",
            [(conversation_id, m.id) for m in found])
        return found

    def queue_edit(self, conversation_id: int, message_id: int, text: str) -> QueuedMessage | None:
        """Change a queued message's text in place (its position kept); None if not queued."""
        with self._db_lock, self._tx():
            cur = self._conn.execute(
                "UPDATE queued_messages SET text = ? WHERE conversation_id = ? AND id = ?",
                (text, conversation_id, message_id))
            if cur.rowcount == 0:
                return None
        return next((m for m in self.queued(conversation_id) if m.id == message_id), None)

    def queue_drop_files(self, conversation_id: int, message_id: int,
                         images_only: bool = True) -> QueuedMessage | None:
        """Take the images (or all files) off a queued message, its text kept; None if not
        queued."""
        with self._db_lock, self._tx():
            if not self._query("SELECT 1 FROM queued_messages WHERE conversation_id = ? AND id = ?",
                               conversation_id, message_id):
                return None
            if images_only:
                self._conn.execute("DELETE FROM queued_attachments WHERE message_id = ?"
                                   " AND kind = ?", (message_id, IMAGE))
            else:
                self._conn.execute("DELETE FROM queued_attachments WHERE message_id = ?",
                                   (message_id,))
        return next((m for m in self.queued(conversation_id) if m.id == message_id), None)

    def queue_move(self, conversation_id: int, message_id: int, index: int) -> bool:
        """Put a queued message at ``index`` (clamped) of the delivery order; False if not queued."""
        with self._db_lock, self._tx():
            order = [m.id for m in self.queued(conversation_id)]
            if message_id not in order:
                return False
            order.remove(message_id)
            order.insert(max(0, min(index, len(order))), message_id)
            self._conn.executemany(
                "UPDATE queued_messages SET position = ? WHERE id = ?",
                [(position, mid) for position, mid in enumerate(order, 1)])
        return True

    def set_queue_paused(self, conversation_id: int, paused: bool,
                         reason: str = PAUSED_BY_USER) -> None:
        """Pause (with why) or resume a conversation's queue; nothing if the chat is gone."""
        with self._db_lock:
            try:
                with self._tx():
                    self._conn.execute(
                        "INSERT INTO queue_state (conversation_id, paused, reason) VALUES (?, ?, ?)"
                        " ON CONFLICT (conversation_id) DO UPDATE SET paused = excluded.paused,"
                        " reason = excluded.reason",
                        (conversation_id, int(paused), reason if paused else None))
            except sqlite3.IntegrityError:
                return
