"""Conversations, turns and their event logs, persisted in SQLite. See docs/adr/0004.

Appending an event is cheap (a dict lookup and a list append under a lock) because agents can
stream tens of MB in tiny text deltas; a daemon thread commits the buffer every
``flush_interval`` seconds, so a crash loses at most about that much. Events that change a turn's
row (``Init``, ``Usage``, ``Done``) are committed before ``append_event`` returns. The database
runs in WAL mode with ``synchronous=NORMAL``: a committed transaction survives the process being
killed (only an OS crash or power loss may roll back the last commits). What is kept of a
turn's output is capped (tolaria/core/output_cap.py, 32 Mi characters by default): the store never
writes more than that per turn, plus a notice and the last 64 Ki characters of the answer.
The buffer and its flusher live in tolaria/core/store/buffer.py, the failed-write reporting in
tolaria/core/store/write_errors.py.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tolaria.core.attachments.model import Attachment
from tolaria.core.events import Diagnostic, Event
from tolaria.core.output_cap import OutputCap, OutputLimits
from tolaria.core.store.attachments import AttachmentLog, insert_attachments
from tolaria.core.store.buffer import COALESCE_MAX_CHARS, EventBuffer, Live, Pending
from tolaria.core.store.markers import (  # re-exported: the store's API
    MARKER_MESSAGE_QUEUED,
    MARKER_MESSAGE_UNQUEUED,
    MARKER_MESSAGES_DELIVERED,
    MARKER_STOP_REQUESTED,
    MARKER_TURN_RESTARTED,
    Marker,
    MarkerLog,
)
from tolaria.core.store.pages import TurnPage, TurnPages
from tolaria.core.store.queue import QueueLog
from tolaria.core.store.schema import (  # re-exported: the store's API
    CONV_COLS as _CONV_COLS,
)
from tolaria.core.store.schema import MIGRATIONS as _MIGRATIONS  # noqa: F401 (tests use it)
from tolaria.core.store.schema import (
    ORIGIN_COMMAND_LINE,
    ORIGIN_WINDOW,
    SCHEMA_VERSION,
    STATUS_CANCELLED,
    STATUS_COMPLETED,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_RUNNING,
    Conversation,
    Turn,
    prepare,
)
from tolaria.core.store.schema import (
    TURN_COLS as _TURN_COLS,
)
from tolaria.core.store.schema import decode as _decode
from tolaria.core.store.usage import UsageLog
from tolaria.core.store.write_errors import WRITE_ERRORS
from tolaria.support import paths

__all__ = [
    "COALESCE_MAX_CHARS",
    "MARKER_MESSAGES_DELIVERED",
    "MARKER_MESSAGE_QUEUED",
    "MARKER_MESSAGE_UNQUEUED",
    "MARKER_STOP_REQUESTED",
    "MARKER_TURN_RESTARTED",
    "ORIGIN_COMMAND_LINE",
    "ORIGIN_WINDOW",
    "SCHEMA_VERSION",
    "STATUS_CANCELLED",
    "STATUS_COMPLETED",
    "STATUS_FAILED",
    "STATUS_INTERRUPTED",
    "STATUS_RUNNING",
    "Conversation",
    "Marker",
    "Store",
    "Turn",
    "TurnPage",
]

def default_db_path() -> Path:
    return paths.data_dir() / "tolaria.sqlite3"


DEFAULT_PATH: Callable[[], Path] = default_db_path


class Store(EventBuffer, MarkerLog, TurnPages, QueueLog, UsageLog, AttachmentLog):
    """The conversation store. Thread-safe; ``close`` it when done."""

    def __init__(self, path: Path | None = None, flush_interval: float = 0.05, *,
                 limits: OutputLimits | None = None, live_elsewhere: Iterable[str] = ()) -> None:
        if flush_interval <= 0:
            raise ValueError("flush_interval must be positive")
        #: What is kept of each turn's output (default: the caps, changed by the environment).
        self.limits = limits if limits is not None else OutputLimits.from_env()
        if path is None:
            paths.private_data_dir()  # 0700, and an older install's files tightened
        self.path = path if path is not None else DEFAULT_PATH()
        paths.private_dir(self.path.parent)
        paths.private_file(self.path)  # 0600 before SQLite opens it: -wal/-shm follow its mode
        for suffix in ("-wal", "-shm"):
            paths.tighten(Path(f"{self.path}{suffix}"), 0o600)
        #: Stream ids other Tolaria processes are running right now (``control.live_stream_ids``):
        #: their turns are not crashed, so the start-up recovery leaves them alone.
        self._live_elsewhere = frozenset(live_elsewhere)
        # Lock order: _db_lock before _buf_lock. Appends only take _buf_lock, so a slow write
        # never blocks the thread that reads the agent's output.
        self._db_lock = threading.RLock()
        self._buf_lock = threading.Lock()
        self._buffer: list[Pending] = []
        self._live: dict[str, Live] = {}
        self._closed = False
        self._last_tick = 0.0
        self._conn = sqlite3.connect(
            str(self.path), check_same_thread=False, isolation_level=None, timeout=5.0
        )
        try:
            prepare(self._conn, self.path)
            self._recover()
        except BaseException:
            self._conn.close()
            raise
        self._interval = flush_interval
        self._stop = threading.Event()
        self._flusher = threading.Thread(
            target=self._run_flusher, name="tolaria-store-flusher", daemon=True
        )
        self._flusher.start()

    # lifecycle

    def close(self) -> None:
        """Flush, stop the flusher and close the database; idempotent."""
        with self._buf_lock:
            if self._closed:
                return
            self._closed = True
            now = time.time()
            for stream_id, live in list(self._live.items()):  # still running: keep their tails
                for item in live.cap.finish(stream_id):
                    self._buffer_locked(live, item, now)
        self._stop.set()
        if self._flusher is not threading.current_thread():
            self._flusher.join()
        with self._db_lock:
            try:
                self._flush_locked()
            except WRITE_ERRORS:
                pass  # kept in write_error: the caller reports it (nothing to retry any more)
            finally:
                self._live.clear()
                self._conn.close()

    # conversations

    def create_conversation(self, title: str, agent: str, cwd: str | None,
                            origin: str = ORIGIN_WINDOW, host: str | None = None) -> Conversation:
        with self._db_lock, self._tx():
            now = self._tick()
            cur = self._conn.execute(
                "INSERT INTO conversations (title, agent, cwd, created_at, updated_at, origin,"
                " host) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (title, agent, cwd, now, now, origin, host),
            )
            assert cur.lastrowid is not None
            return Conversation(cur.lastrowid, title, agent, cwd, now, now, None, origin, None,
                                host)

    def get_conversation(self, conversation_id: int) -> Conversation | None:
        rows = self._query(f"SELECT {_CONV_COLS} FROM conversations WHERE id = ?", conversation_id)
        return _conversation(rows[0]) if rows else None

    def list_conversations(self) -> list[Conversation]:
        """Most recently updated first (a turn starting or finishing counts as an update)."""
        rows = self._query(f"SELECT {_CONV_COLS} FROM conversations ORDER BY updated_at DESC, id DESC")
        return [_conversation(row) for row in rows]

    def rename_conversation(self, conversation_id: int, title: str) -> Conversation:
        """Raises KeyError for an unknown id. Does not bump ``updated_at`` (not activity)."""
        return self._update_conversation(conversation_id, {"title": title})

    def update_conversation(
        self, conversation_id: int, *, agent: str | None = None, cwd: str | None = None,
        agent_session_id: str | None = None,
    ) -> Conversation:
        """Set the given fields (``None`` leaves a field unchanged); KeyError for an unknown id."""
        changes = {"agent": agent, "cwd": cwd, "agent_session_id": agent_session_id}
        return self._update_conversation(
            conversation_id, {k: v for k, v in changes.items() if v is not None}
        )

    def set_conversation_limits(self, conversation_id: int, limits: str | None) -> Conversation:
        """A chat's own limits (JSON; None: the defaults again). KeyError for an unknown id."""
        return self._update_conversation(conversation_id, {"limits": limits})

    def set_conversation_host(self, conversation_id: int, host: str | None,
                              cwd: str | None) -> Conversation:
        """Where the chat's turns run (None: this machine) with its folder there (None: the
        host's home). KeyError for an unknown id."""
        return self._update_conversation(conversation_id, {"host": host, "cwd": cwd})

    def set_conversation_keep_running(self, conversation_id: int, keep: bool) -> Conversation:
        """The chat's "keep running when disconnected" (ADR 0032). KeyError for an unknown id."""
        return self._update_conversation(conversation_id, {"keep_running": int(keep)})

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete it with its turns and events; later events of its running turns are ignored."""
        with self._db_lock:
            with self._buf_lock:
                for stream_id, live in list(self._live.items()):
                    if live.conversation_id == conversation_id:
                        del self._live[stream_id]
                self._buffer = [p for p in self._buffer if p.conversation_id != conversation_id]
            with self._tx():
                self._conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    # turns

    def start_turn(self, conversation_id: int, stream_id: str, agent: str, prompt: str, *,
                   delivering: Sequence[int] = (), started_at: float | None = None,
                   attachments: Sequence[Attachment] = ()) -> Turn:
        """Record a running turn; KeyError for an unknown conversation, ValueError for a reused
        stream id.

        ``delivering``: the ids of the queued messages this turn's prompt is made of. They leave
        the queue and a ``messages_delivered`` marker records them in the same transaction as
        the turn: whatever happens (a crash, a failed write), either the turn exists and its
        messages are delivered, or there is no turn and they are still queued.

        ``started_at``: when the turn really started, where that was not now (an imported turn
        keeps the CLI's time).

        ``attachments``: the files sent with it (stored copies), recorded in the same
        transaction (ADR 0028)."""
        with self._db_lock:
            with self._tx():
                now = self._tick()
                self._touch(conversation_id, now)
                try:
                    cur = self._conn.execute(
                        "INSERT INTO turns (conversation_id, stream_id, agent, prompt, status,"
                        " started_at) VALUES (?, ?, ?, ?, ?, ?)",
                        (conversation_id, stream_id, agent, prompt, STATUS_RUNNING,
                         now if started_at is None else started_at),
                    )
                except sqlite3.IntegrityError as exc:
                    raise ValueError(f"stream id {stream_id!r} already has a turn") from exc
                assert cur.lastrowid is not None
                if attachments:
                    insert_attachments(self._conn, cur.lastrowid, attachments)
                if delivering:
                    taken = self._take_queued(conversation_id, delivering)
                    self._insert_marker(conversation_id, MARKER_MESSAGES_DELIVERED,
                                        cur.lastrowid, {"ids": [m.id for m in taken],
                                                        "messages": [m.text for m in taken]})
            with self._buf_lock:
                self._live[stream_id] = Live(cur.lastrowid, conversation_id,
                                             OutputCap(self.limits))
        return Turn(cur.lastrowid, conversation_id, stream_id, agent, prompt, STATUS_RUNNING,
                    None, now if started_at is None else started_at,
                    None, None, None, None, None, None)

    def turns(self, conversation_id: int) -> list[Turn]:
        """Oldest first."""
        return self._select_turns("conversation_id = ? ORDER BY id", conversation_id)

    def kept_remote_turns(self) -> list[Turn]:
        """Turns left running in keep-running chats on a host (a crash, a kill) that no other
        live Tolaria process streams: to be reattached (ADR 0032)."""
        return [turn for turn in self._select_turns(
            f"status = 'running' AND conversation_id IN ({_KEPT_CHATS}) AND 1 = ?", 1)
            if turn.stream_id not in self._live_elsewhere and turn.stream_id not in self._live]

    def resume_turn(self, stream_id: str) -> Turn | None:
        """Take a kept remote turn back (ADR 0032): its stored events are cleared, as the host
        replays the run's output from its start, and its next events go to it again."""
        with self._db_lock:
            turn = self.turn_by_stream(stream_id)
            if turn is None or turn.status != STATUS_RUNNING:
                return None
            with self._tx():
                self._conn.execute("DELETE FROM events WHERE turn_id = ?", (turn.id,))
            with self._buf_lock:
                self._live[stream_id] = Live(turn.id, turn.conversation_id,
                                             OutputCap(self.limits))
        return turn

    def turn_by_stream(self, stream_id: str) -> Turn | None:
        found = self._select_turns("stream_id = ?", stream_id)
        return found[0] if found else None

    def events(self, turn_id: int) -> list[Event]:
        """The turn's events in order. Consecutive deltas may come back merged into one event
        (the concatenated text is identical). A row that no longer decodes comes back as a
        ``Diagnostic`` rather than disappearing."""
        rows = self._query(
            "SELECT e.seq, e.payload, t.stream_id FROM events e JOIN turns t ON t.id = e.turn_id"
            " WHERE e.turn_id = ? ORDER BY e.seq", turn_id, flush=True,
        )
        out: list[Event] = []
        for seq, payload, stream_id in rows:
            try:
                out.append(_decode(payload))
            except ValueError as exc:
                out.append(Diagnostic(stream_id, source="store",
                                      message=f"unreadable stored event #{seq}: {exc}"))
        return out

    def mark_interrupted(self, stream_id: str, reason: str = STATUS_INTERRUPTED) -> None:
        """Finish a running turn whose run vanished without a ``Done``; no-op otherwise. A
        write that fails is kept in ``write_error`` (the next open recovers the turn anyway).
        ``reason`` is the stop reason stored (e.g. ``STOP_NOT_ANSWERED`` for an import)."""
        try:
            self._mark_interrupted(stream_id, reason)
        except WRITE_ERRORS as exc:
            self._write_failed(exc)

    def _mark_interrupted(self, stream_id: str, reason: str) -> None:
        with self._db_lock:
            with self._buf_lock:
                live = self._live.pop(stream_id, None)
                if live is not None:
                    for item in live.cap.finish(stream_id):
                        self._buffer_locked(live, item, time.time())
            self._flush_locked()
            with self._tx():
                row = self._conn.execute(
                    "SELECT conversation_id FROM turns WHERE stream_id = ? AND status = ?",
                    (stream_id, STATUS_RUNNING),
                ).fetchone()
                if row is None:
                    return
                self._interrupt("stream_id = ?", (stream_id,), time.time(), reason)
                self._touch(row[0], self._tick())

    # internals

    @contextmanager
    def _tx(self) -> Iterator[None]:
        """A write transaction. A write that fails for want of room or rights (not a broken
        constraint) is kept in ``write_error`` as a failed flush is; one that works while
        nothing waits in the buffer means writing works again."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._conn.execute("COMMIT")
            except BaseException:
                # SQLite may have rolled back already (a full disk does): a ROLLBACK then fails
                # with "no transaction is active", which must not hide the real error.
                if self._conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                raise
        except WRITE_ERRORS as exc:
            if not isinstance(exc, sqlite3.IntegrityError):
                self._write_failed(exc)
            raise
        if not self._buffer:  # unlocked peek: a flush in progress reports for itself
            self._writes_work()

    def _tick(self) -> float:
        """Wall-clock time, strictly increasing within this store (coarse clocks tie)."""
        self._last_tick = max(time.time(), self._last_tick + 1e-6)
        return self._last_tick

    def _touch(self, conversation_id: int, now: float) -> None:
        cur = self._conn.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id)
        )
        if cur.rowcount == 0:
            raise KeyError(conversation_id)

    def _query(self, sql: str, *args: object, flush: bool = False) -> list[Any]:
        with self._db_lock:
            if flush:  # read your own writes, buffered deltas included
                with contextlib.suppress(*WRITE_ERRORS):  # still show what is stored
                    self._flush_locked()
            return self._conn.execute(sql, args).fetchall()

    def _select_turns(self, where: str, arg: object) -> list[Turn]:
        rows = self._query(f"SELECT {_TURN_COLS} FROM turns WHERE {where}", arg, flush=True)
        return [Turn(*row) for row in rows]

    def _update_conversation(self, conversation_id: int, changes: dict[str, Any]) -> Conversation:
        with self._db_lock:
            if changes:  # the column names come from our own code, never from the caller
                sets = ", ".join(f"{column} = ?" for column in changes)
                with self._tx():
                    self._conn.execute(f"UPDATE conversations SET {sets} WHERE id = ?",
                                       (*changes.values(), conversation_id))
            conversation = self.get_conversation(conversation_id)
        if conversation is None:
            raise KeyError(conversation_id)
        return conversation

    def _recover(self) -> None:
        """Turns left running by a crash (or a kill) become interrupted, partial output kept;
        not those another live Tolaria process is streaming (``live_elsewhere``)."""
        live = sorted(self._live_elsewhere)
        # Nor a keep-running chat's turn on a host: it goes on there, the window reattaches it
        # (``kept_remote_turns``, ADR 0032).
        where = f"status = ? AND conversation_id NOT IN ({_KEPT_CHATS})"
        if live:
            where += f" AND stream_id NOT IN ({', '.join('?' * len(live))})"
        with self._tx():
            self._interrupt(where, (STATUS_RUNNING, *live), time.time())

    def _interrupt(self, where: str, args: tuple[Any, ...], now: float,
                   reason: str = STATUS_INTERRUPTED) -> None:
        last_event = ("(SELECT created_at FROM events WHERE events.turn_id = turns.id"
                      " ORDER BY seq DESC LIMIT 1)")
        self._conn.execute(
            f"UPDATE turns SET finished_at = COALESCE({last_event}, ?)"
            f" WHERE status = 'running' AND {where}",
            (now, *args),
        )
        self._conn.execute(
            "UPDATE turns SET status = ?, stop_reason = ?,"
            " duration_ms = CAST(ROUND(MAX(finished_at - started_at, 0) * 1000) AS INTEGER)"
            f" WHERE status = 'running' AND {where}",
            (STATUS_INTERRUPTED, reason, *args),
        )


_KEPT_CHATS = "SELECT id FROM conversations WHERE keep_running = 1 AND host IS NOT NULL"


def _conversation(row: Any) -> Conversation:
    """A conversations row as a ``Conversation`` (keep_running, the last column, is 0/1)."""
    fields = list(row)
    fields[-1] = bool(fields[-1])
    return Conversation(*fields)
