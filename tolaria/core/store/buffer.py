"""The store's event buffer and the flusher thread that commits it.

Agents can stream tens of MB in tiny text deltas, so ``append_event`` only takes a short lock and
appends to a list (consecutive deltas of a turn merge into one row, up to
``COALESCE_MAX_CHARS``); a daemon thread commits the buffer every ``flush_interval`` seconds.
Events that change a turn's row (``Init``, ``Usage``, ``Done``) are committed before
``append_event`` returns. A batch that cannot be written goes back to the front of the buffer
and its reason to ``write_error`` (tolaria/core/store/write_errors.py). ``EventBuffer`` is the
part of ``Store`` that does this.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass

from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    Diagnostic,
    Done,
    Event,
    Init,
    TextDelta,
    ThinkingDelta,
    Usage,
    to_dict,
)
from tolaria.core.output_cap import OutputCap, OutputLimits
from tolaria.core.store.parts import StorePart
from tolaria.core.store.schema import (
    STATUS_CANCELLED,
    STATUS_COMPLETED,
    STATUS_FAILED,
    STATUS_RUNNING,
)
from tolaria.core.store.schema import encode as _encode
from tolaria.core.store.usage import apply_usage_extras
from tolaria.core.store.write_errors import WRITE_ERRORS, WriteErrors

log = logging.getLogger("tolaria.core.store.db")  # the store's logger, as before the split

#: Consecutive deltas of one turn are merged into one row up to this many characters.
COALESCE_MAX_CHARS = 256 * 1024

_DELTA_TYPES = (TextDelta, ThinkingDelta)
#: Events that change the turn or conversation row: committed before append_event returns.
ROW_EVENTS = (Init, Usage, Done)
#: A Done's stop reason -> the turn's status; any other reason is a failure.
_STATUS_BY_STOP = {STOP_END_TURN: STATUS_COMPLETED, STOP_CANCELLED: STATUS_CANCELLED}


@dataclass(slots=True)
class Pending:
    """One future event row; deltas keep their texts in ``parts`` until the flush joins them."""

    turn_id: int
    conversation_id: int
    seq: int
    event: Event
    created_at: float
    parts: list[str] | None = None
    size: int = 0

    def row(self) -> tuple[int, int, str, str | bytes, float]:
        event = self.event
        if self.parts is not None:
            event = type(event)(stream_id=event.stream_id, text="".join(self.parts))  # type: ignore[call-arg]
        try:
            payload = _encode(to_dict(event))
        except (TypeError, ValueError) as exc:  # e.g. a tool input with non-string keys
            # A row that can never be written must not block every later write: keep a note.
            event = Diagnostic(event.stream_id, source="store",
                               message=f"could not store a {event.kind} event: {exc}")
            payload = _encode(to_dict(event))
        return (self.turn_id, self.seq, event.kind, payload, self.created_at)


@dataclass(slots=True)
class Live:
    """A turn that is running in this process: where its next events go."""

    turn_id: int
    conversation_id: int
    cap: OutputCap
    next_seq: int = 0
    open: Pending | None = None  # the buffered delta row that the next same-kind delta extends


class EventBuffer(WriteErrors, StorePart):
    """Mixed into ``Store``, which creates the buffer, the live turns and the flusher thread
    (lock order: ``_db_lock`` before ``_buf_lock``; appends only take ``_buf_lock``, so a slow
    write never blocks the thread that reads the agent's output)."""

    _buf_lock: threading.Lock
    _buffer: list[Pending]
    _live: dict[str, Live]
    _closed: bool
    _interval: float
    _stop: threading.Event
    limits: OutputLimits

    def flush(self) -> None:
        """Write the buffered events now."""
        with self._db_lock:
            self._flush_locked()

    def append_event(self, event: Event) -> None:
        """Buffer ``event`` for its turn. Never raises: events of an unknown or finished stream
        are ignored, and a failed write is logged and retried by the flusher. What is kept of a
        turn's output is capped (tolaria/core/output_cap.py): the start, a notice, the tail."""
        now = time.time()
        with self._buf_lock:
            live = self._live.get(event.stream_id)
            if live is None or self._closed:
                return
            pending = live.open
            if (pending is not None and isinstance(event, _DELTA_TYPES)
                    and type(event) is type(pending.event) and pending.parts is not None
                    and pending.size < COALESCE_MAX_CHARS and live.cap.take_delta(event)):
                # Most of a flood: a delta kept whole that extends the row being buffered.
                text = event.text
                pending.parts.append(text)
                pending.size += len(text)
                pending.created_at = now
                return
            if isinstance(event, Done):
                kept = [*live.cap.finish(event.stream_id), event]
            else:
                kept = live.cap.feed(event)
            for item in kept:
                self._buffer_locked(live, item, now)
        if isinstance(event, ROW_EVENTS):
            with contextlib.suppress(*WRITE_ERRORS):  # in write_error; the flusher retries
                self.flush()

    def reopen_turn(self, stream_id: str) -> bool:
        """Let a finished turn take more events, after those it has: it is ``running`` again
        until its next ``Done`` (or ``mark_interrupted``; a crash in between leaves it
        ``interrupted`` at the next open). For an imported turn the CLI went on writing
        (tolaria/chats/importing.py); False when there is no such turn or it is running. What is
        added is capped afresh (tolaria/core/output_cap.py)."""
        with self._db_lock:
            with self._buf_lock:
                if stream_id in self._live:
                    return False
            self._flush_locked()
            with self._tx():
                row = self._conn.execute(
                    "SELECT id, conversation_id FROM turns WHERE stream_id = ? AND status != ?",
                    (stream_id, STATUS_RUNNING)).fetchone()
                if row is None:
                    return False
                turn_id, conversation_id = row
                (next_seq,) = self._conn.execute(
                    "SELECT COALESCE(MAX(seq), -1) + 1 FROM events WHERE turn_id = ?",
                    (turn_id,)).fetchone()
                self._conn.execute(
                    "UPDATE turns SET status = ?, stop_reason = NULL, finished_at = NULL,"
                    " duration_ms = NULL WHERE id = ?", (STATUS_RUNNING, turn_id))
                self._conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?",
                                   (self._tick(), conversation_id))
            with self._buf_lock:
                self._live[stream_id] = Live(turn_id, conversation_id, OutputCap(self.limits),
                                             next_seq=next_seq)
        return True

    def _buffer_locked(self, live: Live, event: Event, now: float) -> None:
        if isinstance(event, _DELTA_TYPES):
            pending = live.open
            if (pending is not None and type(pending.event) is type(event)
                    and pending.size < COALESCE_MAX_CHARS):
                assert pending.parts is not None
                pending.parts.append(event.text)
                pending.size += len(event.text)
                pending.created_at = now
                return
            pending = Pending(live.turn_id, live.conversation_id, live.next_seq, event, now,
                              [event.text], len(event.text))
            live.open = pending
        else:
            pending = Pending(live.turn_id, live.conversation_id, live.next_seq, event, now)
            live.open = None
            if isinstance(event, Done):
                del self._live[event.stream_id]
        live.next_seq += 1
        self._buffer.append(pending)

    def _flush_locked(self) -> None:
        with self._buf_lock:
            if not self._buffer:
                return
            batch, self._buffer = self._buffer, []
            for live in self._live.values():
                live.open = None  # those rows are leaving the buffer; no more merging into them
        try:
            self._write(batch)
        except BaseException as exc:
            with self._buf_lock:
                self._buffer[:0] = batch  # keep the order; the flusher retries
            if isinstance(exc, WRITE_ERRORS):
                self._write_failed(exc)
            raise
        with self._buf_lock:
            saved = not self._buffer
        if saved:
            self._writes_work()

    def _write(self, batch: list[Pending]) -> None:
        rows = [p.row() for p in batch]
        with self._tx():
            self._conn.executemany(
                "INSERT INTO events (turn_id, seq, kind, payload, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            for p in batch:
                if isinstance(p.event, ROW_EVENTS):
                    self._apply(p)

    def _apply(self, p: Pending) -> None:
        event, execute = p.event, self._conn.execute
        if isinstance(event, Init):
            execute("UPDATE turns SET session_id = ? WHERE id = ?", (event.session_id, p.turn_id))
            if event.session_id is not None:
                execute("UPDATE conversations SET agent_session_id = ? WHERE id = ?",
                        (event.session_id, p.conversation_id))
        elif isinstance(event, Usage):
            execute(
                "UPDATE turns SET input_tokens = COALESCE(?, input_tokens),"
                " output_tokens = COALESCE(?, output_tokens), cost_usd = COALESCE(?, cost_usd)"
                " WHERE id = ?",
                (event.input_tokens, event.output_tokens, event.cost_usd, p.turn_id),
            )
            apply_usage_extras(execute, event, p.turn_id)
        elif isinstance(event, Done):
            status = _STATUS_BY_STOP.get(event.stop_reason, STATUS_FAILED)
            execute(
                "UPDATE turns SET status = ?, stop_reason = ?, duration_ms = ?, finished_at = ?"
                " WHERE id = ? AND status = 'running'",
                (status, event.stop_reason, event.duration_ms, p.created_at, p.turn_id),
            )
            execute("UPDATE conversations SET updated_at = ? WHERE id = ?",
                    (self._tick(), p.conversation_id))

    def _run_flusher(self) -> None:
        while not self._stop.wait(self._interval):
            if not self._buffer:  # unlocked peek: a miss only delays the write by one interval
                continue
            try:
                self.flush()
            except WRITE_ERRORS:
                pass  # in write_error (logged once); retried at the next interval
            except Exception:
                log.exception("could not write buffered events to %s", self.path)
