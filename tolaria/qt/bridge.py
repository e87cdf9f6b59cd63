"""The whole backend -> UI signal surface: core callbacks in, Qt signals out.

Run signals carry the ``stream_id`` first. The bridge is also the gate that keeps late events out
of the views: it forwards events only for streams it has opened and not yet seen finish, and once
a stop was requested it forwards no more conversation content (text, thinking, tools) of that
stream, only what explains the ending (errors, diagnostics, usage) and the final ``Done``.

Events are forwarded in batches, once per event-loop turn: the core may hand over hundreds of
deltas from one read of the agent's pipe, and consecutive text (or thinking) deltas are merged
into one event, so a flood costs one signal per read instead of one per line. Order is kept, and
a pending batch is always flushed before ``run_stopping`` and ``run_finished``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject, QTimer, Signal

from tolaria.core.events import (
    Done,
    Event,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    ToolUpdate,
)
from tolaria.core.store.db import Store

_OPEN = "open"
_STOPPING = "stopping"
#: What a stopped run may still say: the rest is the agent talking after the user said stop.
_CONTENT = (TextDelta, ThinkingDelta, ToolStart, ToolUpdate, ToolDone)
_DELTAS = (TextDelta, ThinkingDelta)
#: A merged delta is cut at about this many characters (views chunk their text anyway).
_MERGE_LIMIT = 256 * 1024


class _Merged:
    """Consecutive deltas of one kind, joined once when the batch is flushed."""

    __slots__ = ("cls", "parts", "size", "stream_id")

    def __init__(self, event: TextDelta | ThinkingDelta) -> None:
        self.cls = type(event)
        self.stream_id = event.stream_id
        self.parts = [event.text]
        self.size = len(event.text)

    def event(self) -> Event:
        return self.cls(self.stream_id, text="".join(self.parts))


class Bridge(QObject):
    #: A turn started: stream_id, conversation id, the stored Turn.
    run_started = Signal(str, int, object)
    #: An event of a live run, for views and the store: stream_id, Event (never a Done).
    event_received = Signal(str, object)
    #: A stop of this stream was requested; its remaining content is dropped: stream_id.
    run_stopping = Signal(str)
    #: The run ended; nothing of this stream follows: stream_id, Done.
    run_finished = Signal(str, object)
    #: A conversation was created or changed: Conversation.
    conversation_saved = Signal(object)
    #: A conversation was deleted: conversation id.
    conversation_deleted = Signal(int)
    #: The newest stored turns of a conversation, for its new view: conversation id, TurnPage.
    history_loaded = Signal(int, object)
    #: A page of stored turns a view asked for (scrolling, a search jump): TurnPage.
    page_loaded = Signal(object)
    #: The turns of a conversation whose stored text matches: conversation id, text, [turn id].
    search_finished = Signal(int, str, object)
    #: Agent detection finished: list[Detection].
    agents_detected = Signal(object)
    #: Something the user must read that belongs to no turn: message.
    problem_reported = Signal(str)
    #: The messages waiting for a conversation's running turn to end changed (or the chat was
    #: opened): conversation id, QueueState (messages in delivery order, paused and why).
    queue_changed = Signal(int, object)
    #: Queued messages went to the agent as the prompt of a new turn: conversation id,
    #: stream id of that turn, list of the delivered QueuedMessage ids.
    messages_delivered = Signal(int, str, object)
    #: What a chat's turns changed in its git folder, or a note why not (after a turn ends,
    #: an undo, or the chat was opened): conversation id, list[TurnChanges].
    turn_changes_changed = Signal(int, object)
    #: One file's diff under a turn, after it was asked for or a hunk was accepted or reverted:
    #: conversation id, FileReview (tolaria/chats/review.py).
    file_review_loaded = Signal(int, object)
    #: "Import sessions from CLIs…" ended: ImportReport (None when it failed), why it failed.
    sessions_imported = Signal(object, str)
    #: A chat's git worktree was made, removed or kept: conversation id, its path ("" when it
    #: has none now), a note for the user ("" for none).
    worktree_changed = Signal(int, str, str)
    #: A turn was abandoned and its prompt re-run: conversation id, old stream id, new stream id.
    turn_restarted = Signal(int, str, str)
    #: The operator markers of a conversation, after ``history_loaded``: id, list[Marker].
    markers_loaded = Signal(int, object)
    #: A running turn asks the user before a tool runs (tolaria/qt/permissions.py): stream_id,
    #: question key, PermissionRequest.
    permission_requested = Signal(str, str, object)
    #: A permission question ended: stream_id, question key, outcome (allow_once, allow_always,
    #: reject, remembered: answered by an earlier "allow always", cancelled: by Stop).
    permission_settled = Signal(str, str, str)
    #: A fan-out job's conversations exist; its runs start right after: FanOutJob.
    job_created = Signal(object)
    #: A fan-out job's status changed (running, completed, cancelled, failed): job id, status.
    job_changed = Signal(str, str)
    #: The store cannot save (a full disk, a read-only folder); said once per problem: the
    #: database file, why ("disk full" or SQLite's words).
    store_write_failed = Signal(str, str)
    #: The store saves again: everything held back is written.
    store_write_recovered = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._streams: dict[str, str] = {}
        self._pending: dict[str, list[Event | _Merged]] = {}
        self._flusher = QTimer(self)
        self._flusher.setSingleShot(True)
        self._flusher.setInterval(0)
        self._flusher.timeout.connect(self.flush)

    def open_stream(self, stream_id: str) -> Callable[[Event], None]:
        """Start accepting events of ``stream_id``; returns the callback for the runner."""
        self._streams[stream_id] = _OPEN
        return self.deliver

    def mark_stopping(self, stream_id: str) -> bool:
        """Stop forwarding content of ``stream_id``; False if the stream is not live."""
        if not self.hold(stream_id):
            return False
        self.run_stopping.emit(stream_id)
        return True

    def stop(self, stream_id: str, abort: Callable[[], bool]) -> bool:
        """Run ``abort`` (the registry's) with ``stream_id``'s content held back, and keep it
        held (``run_stopping``) only if the abort took effect.

        An abort that comes too late (the agent already exited by itself: the run is finishing
        and only its pipes are draining) returns False; the stream is then open again, so the
        tail of the answer still reaches the views and the store, and nobody is told "stopping".
        Held during the call, so nothing the run says after the stop is shown either way."""
        held = self.hold(stream_id)
        took = False
        try:
            took = abort()
        finally:
            if held and not took:
                self.release(stream_id)
        if held and took and self._streams.get(stream_id) == _STOPPING:
            self.run_stopping.emit(stream_id)
        return took

    def stop_all(self, stream_ids: Iterable[str],
                 abort_all: Callable[[], list[str]]) -> list[str]:
        """``stop`` for many streams at once: ``abort_all`` (the registry's) runs with their
        content held back; the aborted ones say "stopping", the others (already finishing by
        themselves) are forwarded again, their tails kept. The aborted stream ids."""
        held = [stream_id for stream_id in stream_ids if self.hold(stream_id)]
        aborted: list[str] = []
        try:
            aborted = abort_all()
        finally:
            for stream_id in held:
                if stream_id in aborted:
                    self.run_stopping.emit(stream_id)
                else:
                    self.release(stream_id)
        return aborted

    def hold(self, stream_id: str) -> bool:
        """Stop forwarding content of ``stream_id`` without telling anyone yet (``stop``,
        ``mark_stopping``); False if the stream is not open."""
        if self._streams.get(stream_id) != _OPEN:
            return False
        self._flush_stream(stream_id)  # what arrived before the stop is still shown
        self._streams[stream_id] = _STOPPING
        return True

    def release(self, stream_id: str) -> None:
        """Forward ``stream_id``'s content again after ``hold``: its stop did not take."""
        if self._streams.get(stream_id) == _STOPPING:
            self._streams[stream_id] = _OPEN

    def show_permission(self, stream_id: str, key: str, request: object) -> bool:
        """Emit ``permission_requested`` after what the run said before it (its tool card);
        False when the stream is not open (stopping or over): nobody is asked then."""
        if self._streams.get(stream_id) != _OPEN:
            return False
        self._flush_stream(stream_id)
        self.permission_requested.emit(stream_id, key, request)
        return True

    def watch_store(self, store: Store) -> None:
        """Turn the store's write problems into ``store_write_failed``/``_recovered``. The store
        may tell from its flusher thread: a signal emitted there is queued to the window."""
        path = str(store.path)

        def tell(reason: str | None) -> None:
            if reason is None:
                self.store_write_recovered.emit()
            else:
                self.store_write_failed.emit(path, reason)

        store.write_listener = tell

    def is_live(self, stream_id: str) -> bool:
        return stream_id in self._streams

    def deliver(self, event: Event) -> None:
        """The runner's ``on_event``: filter and batch. Called on the loop (GUI) thread."""
        stream_id = event.stream_id
        state = self._streams.get(stream_id)
        if state is None:
            return  # late: the stream finished (or was never opened here)
        if isinstance(event, Done):
            self._flush_stream(stream_id)
            del self._streams[stream_id]
            self.run_finished.emit(stream_id, event)
            return
        if state == _STOPPING and isinstance(event, _CONTENT):
            return
        batch = self._pending.setdefault(stream_id, [])
        last = batch[-1] if batch else None
        if isinstance(event, _DELTAS):
            if isinstance(last, _Merged) and last.cls is type(event) and last.size < _MERGE_LIMIT:
                last.parts.append(event.text)
                last.size += len(event.text)
            else:
                batch.append(_Merged(event))
        else:
            batch.append(event)
        if not self._flusher.isActive():
            self._flusher.start()

    def flush(self) -> None:
        """Emit every pending batch now (normally done once per event-loop turn)."""
        for stream_id in list(self._pending):
            self._flush_stream(stream_id)

    def _flush_stream(self, stream_id: str) -> None:
        batch = self._pending.pop(stream_id, None)
        for item in batch or ():
            self.event_received.emit(stream_id,
                                     item.event() if isinstance(item, _Merged) else item)
