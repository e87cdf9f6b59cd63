"""Operator markers: what the user did to a conversation's in-flight work, with its time.

Queueing and delivering messages, stopping and restarting turns are rows of the store's
``markers`` table (schema version 2), next to the turns and their events: the transcript is the
audit record. ``MarkerLog`` is the part of ``Store`` that reads and writes them.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from tolaria.core.store.parts import StorePart

#: Marker kinds (operator actions recorded in the transcript).
MARKER_MESSAGE_QUEUED = "message_queued"
MARKER_MESSAGE_UNQUEUED = "message_unqueued"
MARKER_MESSAGES_DELIVERED = "messages_delivered"
MARKER_TURN_RESTARTED = "turn_restarted"
MARKER_STOP_REQUESTED = "stop_requested"
#: A queued message given to the running turn itself; data: ``{"id", "text", "stream_id"}``.
#: Written only by the builds whose Send now steered Claude (no longer: ADR 0007); still shown
#: (a bubble inside that turn) so a chat stored then keeps what the user sent.
MARKER_MESSAGE_STEERED = "message_steered"
#: A turn started as one member of a fan-out job (one prompt sent to several agents at once);
#: data: ``{"job_id", "prompt", "agent", "stream_id"}``, on the member turn.
MARKER_FANOUT_JOB = "fanout_job"


@dataclass(frozen=True)
class Marker:
    """An operator action on a conversation (and, when it concerns one, a turn)."""

    id: int
    conversation_id: int
    turn_id: int | None
    kind: str
    data: Any  # JSON value
    created_at: float


class MarkerLog(StorePart):
    """Mixed into ``Store``, which provides the connection, its lock and transactions."""

    def add_marker(self, conversation_id: int, kind: str, *, turn_id: int | None = None,
                   data: Any = None) -> Marker | None:
        """Record an operator action; None (nothing written) if the conversation is gone."""
        with self._db_lock:
            try:
                with self._tx():
                    return self._insert_marker(conversation_id, kind, turn_id, data)
            except sqlite3.IntegrityError:  # the conversation (or turn) was deleted
                return None

    def _insert_marker(self, conversation_id: int, kind: str, turn_id: int | None,
                       data: Any) -> Marker:
        """The marker's row, inside the caller's transaction."""
        now = self._tick()
        cur = self._conn.execute(
            "INSERT INTO markers (conversation_id, turn_id, kind, data, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (conversation_id, turn_id, kind, json.dumps(data, default=str), now))
        assert cur.lastrowid is not None
        return Marker(cur.lastrowid, conversation_id, turn_id, kind, data, now)

    def markers(self, conversation_id: int, kind: str | None = None) -> list[Marker]:
        """Oldest first; only ``kind`` if given."""
        sql = ("SELECT id, conversation_id, turn_id, kind, data, created_at FROM markers"
               " WHERE conversation_id = ?")
        args: tuple[object, ...] = (conversation_id,)
        if kind is not None:
            sql += " AND kind = ?"
            args += (kind,)
        rows = self._query(sql + " ORDER BY id", *args)
        return [Marker(i, c, t, k, json.loads(d), at) for i, c, t, k, d, at in rows]

    def markers_of_kind(self, kind: str) -> list[Marker]:
        """Every conversation's markers of ``kind``, oldest first (e.g. the fan-out jobs)."""
        rows = self._query("SELECT id, conversation_id, turn_id, kind, data, created_at FROM markers"
                           " WHERE kind = ? ORDER BY id", kind)
        return [Marker(i, c, t, k, json.loads(d), at) for i, c, t, k, d, at in rows]
