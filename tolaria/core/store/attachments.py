"""The files attached to each turn (schema version 7, ADR 0028): which stored copy
(tolaria/core/attachments/blobs.py, by SHA-256), under which name, in which order.

The rows are written in the transaction that records the turn (``Store.start_turn``) and go with
it (``ON DELETE CASCADE``): deleting a chat removes them, and ``referenced`` then tells the blob
store which copies no turn needs any more.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tolaria.core.attachments.model import Attachment
from tolaria.core.store.parts import StorePart

_COLS = "name, sha256, size, mime, kind"


def insert_attachments(conn: sqlite3.Connection, turn_id: int,
                       attachments: Sequence[Attachment]) -> None:
    """Inside the caller's transaction."""
    conn.executemany(
        f"INSERT INTO attachments (turn_id, position, {_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(turn_id, i, a.name, a.sha256, a.size, a.mime, a.kind)
         for i, a in enumerate(attachments)])


class AttachmentLog(StorePart):
    """Mixed into ``Store``, which provides the connection, its lock and transactions."""

    def attachments(self, turn_id: int) -> list[Attachment]:
        """The turn's attachments in the order they were attached."""
        rows = self._query(f"SELECT {_COLS} FROM attachments WHERE turn_id = ? ORDER BY position",
                           turn_id)
        return [Attachment(*row) for row in rows]

    def attachments_of_turns(self, turn_ids: Sequence[int]) -> dict[int, list[Attachment]]:
        """Per turn id, its attachments (turns without any are left out)."""
        found: dict[int, list[Attachment]] = {}
        for start in range(0, len(turn_ids), 500):
            chunk = list(turn_ids[start:start + 500])
            marks = ", ".join("?" * len(chunk))
            rows = self._query(f"SELECT turn_id, {_COLS} FROM attachments WHERE turn_id IN "
                               f"({marks}) ORDER BY turn_id, position", *chunk)
            for turn_id, *rest in rows:
                found.setdefault(turn_id, []).append(Attachment(*rest))
        return found

    def chat_attachment_sizes(self, conversation_id: int) -> dict[str, int]:
        """The chat's attachments' sizes by SHA-256 (each content once: the per-chat cap)."""
        rows = self._query("SELECT DISTINCT a.sha256, a.size FROM attachments a"
                           " JOIN turns t ON t.id = a.turn_id WHERE t.conversation_id = ?",
                           conversation_id)
        return {sha: int(size) for sha, size in rows}

    def chat_attachment_bytes(self, conversation_id: int) -> int:
        """Bytes the chat's attachments hold, each content counted once."""
        return sum(self.chat_attachment_sizes(conversation_id).values())

    def referenced_attachments(self) -> set[str]:
        """The SHA-256s some turn or queued message still refers to (the blob store keeps
        those)."""
        return {row[0] for row in self._query("SELECT sha256 FROM attachments UNION"
                                              " SELECT sha256 FROM queued_attachments")}
