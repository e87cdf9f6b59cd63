"""The whole backend -> UI signal surface: the turn engine's facts in, Qt signals out.

Run signals carry the ``stream_id`` first. The engine's stream gate (tolaria/chats/engine/gate.py)
keeps late events out of the views and drops what a stopped run still says; the bridge owns the
window's gate, made to batch: events are forwarded once per event-loop turn (a zero timer), the
consecutive text (or thinking) deltas merged, so a flood costs one signal per read instead of one
per line. Order is kept, and a pending batch is always flushed before ``run_stopping`` and
``run_finished``. ``BridgeObserver`` is the engine's observer: each fact becomes the signal of the
same name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from tolaria.chats.engine.gate import StreamGate
from tolaria.core.events import Done, Event
from tolaria.core.store.db import Conversation, Store, Turn
from tolaria.core.store.queue import QueueState


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
    #: File → Export… ended: the file written ("" when it failed), why it failed ("" if not).
    export_finished = Signal(str, str)
    #: A file attached in a composer was checked and stored, or refused (ADR 0028):
    #: conversation id, tolaria.qt.attach_control.AttachSettled.
    attachment_settled = Signal(int, object)
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
    #: ssh asks something of a chat's turn (host key, passphrase, password; ADR 0033):
    #: tolaria.core.remote.askpass_desk.SshQuestion, ssh's words verbatim.
    ssh_question_asked = Signal(object)
    #: An ssh question went away unanswered (timeout, the turn stopped): its id.
    ssh_question_closed = Signal(str)
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
        self._flusher = QTimer(self)
        self._flusher.setSingleShot(True)
        self._flusher.setInterval(0)
        #: The window's stream gate; the turn engine takes it over (``TurnEngine(gate=...)``).
        self.gate = StreamGate(batch=True, schedule=self._flusher.start)
        self._flusher.timeout.connect(self.gate.flush)
        self.gate.on_event = self._emit_event
        self.gate.on_stopping = self.run_stopping.emit
        self.gate.on_finished = self.run_finished.emit

    def _emit_event(self, event: Event) -> None:
        self.event_received.emit(event.stream_id, event)

    # The gate's own calls, kept here for the window's parts and tests that hold the bridge.
    def open_stream(self, stream_id: str) -> Callable[[Event], None]:
        """Start accepting events of ``stream_id``; returns the callback for the runner."""
        return self.gate.open_stream(stream_id)

    def mark_stopping(self, stream_id: str) -> bool:
        """Stop forwarding content of ``stream_id``; False if the stream is not live."""
        return self.gate.mark_stopping(stream_id)

    def stop(self, stream_id: str, abort: Callable[[], bool]) -> bool:
        """``StreamGate.stop``: ``abort`` with the content held, kept held if it took."""
        return self.gate.stop(stream_id, abort)

    def stop_all(self, stream_ids: Iterable[str],
                 abort_all: Callable[[], list[str]]) -> list[str]:
        return self.gate.stop_all(stream_ids, abort_all)

    def hold(self, stream_id: str) -> bool:
        return self.gate.hold(stream_id)

    def release(self, stream_id: str) -> None:
        self.gate.release(stream_id)

    def deliver(self, event: Event) -> None:
        """The runner's ``on_event``: filter and batch. Called on the loop (GUI) thread."""
        self.gate.deliver(event)

    def flush(self) -> None:
        """Emit every pending batch now (normally done once per event-loop turn)."""
        self.gate.flush()

    def is_live(self, stream_id: str) -> bool:
        return self.gate.is_live(stream_id)

    def show_permission(self, stream_id: str, key: str, request: object) -> bool:
        """Emit ``permission_requested`` after what the run said before it (its tool card);
        False when the stream is not open (stopping or over): nobody is asked then."""
        if not self.gate.is_open(stream_id):
            return False
        self.gate.flush_stream(stream_id)
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


class BridgeObserver:
    """The turn engine's observer in the window: each fact is the bridge's signal."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    def event(self, event: Event) -> None:
        self.bridge.event_received.emit(event.stream_id, event)

    def run_started(self, stream_id: str, conversation_id: int, turn: Turn) -> None:
        self.bridge.run_started.emit(stream_id, conversation_id, turn)

    def agent_starting(self, stream_id: str) -> None:
        return None

    def run_stopping(self, stream_id: str) -> None:
        self.bridge.run_stopping.emit(stream_id)

    def run_finished(self, stream_id: str, done: Done) -> None:
        self.bridge.run_finished.emit(stream_id, done)

    def conversation_saved(self, conversation: Conversation) -> None:
        self.bridge.conversation_saved.emit(conversation)

    def conversation_deleted(self, conversation_id: int) -> None:
        self.bridge.conversation_deleted.emit(conversation_id)

    def queue_changed(self, conversation_id: int, state: QueueState) -> None:
        self.bridge.queue_changed.emit(conversation_id, state)

    def messages_delivered(self, conversation_id: int, stream_id: str,
                           message_ids: Sequence[int]) -> None:
        self.bridge.messages_delivered.emit(conversation_id, stream_id, list(message_ids))

    def turn_restarted(self, conversation_id: int, old_stream: str, new_stream: str) -> None:
        self.bridge.turn_restarted.emit(conversation_id, old_stream, new_stream)

    def turn_changes_changed(self, conversation_id: int, changes: list[Any]) -> None:
        self.bridge.turn_changes_changed.emit(conversation_id, changes)

    def problem_reported(self, message: str) -> None:
        self.bridge.problem_reported.emit(message)
