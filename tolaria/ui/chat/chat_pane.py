"""One conversation: its transcript, composer, Send/Stop and Restart buttons, and status line.

While a turn runs the composer stays usable: what is sent then is queued (shown as chips) and
delivered by the controller as the next turn.

A pane renders the facts of its own streams only (the chat stack routes them by stream id) and
emits intents; it never starts or stops anything itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from tolaria.chats.checkpoints import TurnChanges, UndoRequest
from tolaria.chats.inflight import (
    DROP_FILES,
    EDIT,
    MOVE,
    PAUSE,
    RESUME,
    SEND_NOW,
    QueueChange,
    QueueState,
)
from tolaria.chats.review import FileReview
from tolaria.chats.slash import AgentCommand
from tolaria.config.settings import DEFAULT_WATCHDOG_S
from tolaria.core.events import AgentCommands, Done, Event, Usage
from tolaria.core.permissions import PermissionRequest
from tolaria.core.store.db import MARKER_TURN_RESTARTED, Marker, Turn
from tolaria.core.store.markers import MARKER_MESSAGE_STEERED
from tolaria.core.store.pages import PAGE_AROUND, PAGE_LATEST, TurnPage
from tolaria.ui.chat.pane_questions import PaneQuestions
from tolaria.ui.chat.ssh_question import SshQuestions
from tolaria.ui.composer.assist import ComposerAssist
from tolaria.ui.composer.attachments import AttachmentTray
from tolaria.ui.composer.composer import Composer
from tolaria.ui.composer.notices import (
    SSH_WAITING_TEXT,
    AwaitingNotice,
    AwaitTracker,
    WatchdogNotice,
)
from tolaria.ui.composer.polish import BudgetLabel, ComposerKeys
from tolaria.ui.composer.queue_chips import QueuedChips
from tolaria.ui.composer.status_line import StatusLine
from tolaria.ui.review.turn_changes import TurnChangesRow
from tolaria.ui.transcript.cards.style import follow_palette, pane_button_css
from tolaria.ui.transcript.permission_card import ANSWER_SHORTCUT
from tolaria.ui.transcript.search_bar import SearchBar
from tolaria.ui.transcript.turn_model import ending_summary
from tolaria.ui.transcript.turn_view import Ending, TurnView, status_from_stop_reason
from tolaria.ui.transcript.view import TranscriptView


class ChatPane(QWidget):
    #: The user asked to send a prompt: conversation id, prompt.
    send_requested = Signal(int, str)
    #: The user asked to stop this conversation's running turn: conversation id.
    stop_requested = Signal(int)
    #: The user sent a message while a turn runs: conversation id, text.
    queue_requested = Signal(int, str)
    #: The user took a queued message back (removed, or to edit it): conversation id, message id.
    unqueue_requested = Signal(int, int)
    #: Reorder, edit in place, send now, pause or resume the queue: conversation id, QueueChange.
    queue_change_requested = Signal(int, object)
    #: Revert a file a turn changed, or rewind the folder to before it: conversation id,
    #: UndoRequest.
    undo_requested = Signal(int, object)
    #: The user asked to abandon the running turn and re-run its prompt: conversation id.
    restart_requested = Signal(int)
    #: The user answered a permission question of a turn: stream id, question key, option id.
    permission_answer_requested = Signal(str, str, str)
    #: The transcript wants a page of stored turns: conversation id, page kind, turn id.
    page_requested = Signal(int, str, int)
    #: The user looks for text in this chat: conversation id, text.
    search_requested = Signal(int, str)
    #: Run a turn's prompt (or its edited text) again in place of it: conversation id, stream
    #: id of the turn it replaces, prompt.
    retry_requested = Signal(int, str, str)
    #: Check and store files for this chat's next message (ADR 0028): conversation id,
    #: AttachIntent.
    attach_requested = Signal(int, object)
    #: Send a prompt with its attachments: conversation id, prompt, tuple of Attachment (while
    #: the chat's turn runs: queue it with them; the composer and its chips are emptied).
    send_attached_requested = Signal(int, str, object)
    #: The user chose one of Tolaria's commands in the composer's ``/`` menu: conversation id,
    #: command name (tolaria/ui/composer/slash_menu.py).
    command_requested = Signal(int, str)
    #: The composer's text changed (kept as the chat's draft): conversation id, text.
    draft_changed = Signal(int, str)

    def __init__(self, conversation_id: int, agent_name: str, stop_hint: str = "Esc",
                 parent: QWidget | None = None, *,
                 watchdog_seconds: float = DEFAULT_WATCHDOG_S) -> None:
        super().__init__(parent)
        self.setObjectName("chatPane")
        self.conversation_id = conversation_id
        self.running_stream: str | None = None
        self._agent_name = agent_name
        self._stop_hint = stop_hint
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 6)
        layout.setSpacing(6)
        self.transcript = TranscriptView(self)
        self.search_bar = SearchBar(self.transcript, self)
        self.search_bar.search_requested.connect(self._on_search_bar_search_requested)
        self.search_bar.jump_requested.connect(self._on_search_bar_jump_requested)
        self.search_bar.closed.connect(self._on_search_bar_closed)
        layout.addWidget(self.search_bar)
        self.transcript.permission_answer_requested.connect(self.permission_answer_requested)
        self.transcript.page_requested.connect(self._on_transcript_page_requested)
        self.transcript.retry_requested.connect(self._on_transcript_retry_requested)
        self.transcript.edit_requested.connect(self._on_transcript_edit_requested)
        #: The turn whose prompt is being edited in the composer (sent in its place).
        self.editing: str | None = None
        layout.addWidget(self.transcript, 1)
        #: ssh's own questions of this chat's remote turn (ADR 0033), above the composer.
        self.ssh_questions = SshQuestions(self)
        layout.addWidget(self.ssh_questions)
        self.queued_chips = QueuedChips(self)
        self.queued_chips.edit_requested.connect(self._on_queued_chips_edit_requested)
        self.queued_chips.remove_requested.connect(self._on_queued_chips_remove_requested)
        chips, change = self.queued_chips, self._request_queue_change
        chips.move_requested.connect(lambda mid, by: change(QueueChange(MOVE, mid, offset=by)))
        chips.rewrite_requested.connect(lambda mid, text: change(QueueChange(EDIT, mid, text)))
        chips.send_now_requested.connect(lambda mid: change(QueueChange(SEND_NOW, mid)))
        chips.pause_requested.connect(lambda on: change(QueueChange(PAUSE if on else RESUME)))
        chips.drop_files_requested.connect(lambda mid: change(QueueChange(DROP_FILES, mid)))
        layout.addWidget(self.queued_chips)
        self.attachments = AttachmentTray(self)  # chips, Attach…, paste and drop (ADR 0028)
        self.attachments.attach_requested.connect(
            lambda intent: self.attach_requested.emit(self.conversation_id, intent))
        layout.addWidget(self.attachments)
        row = QHBoxLayout()
        row.setContentsMargins(12, 0, 12, 0)
        self.composer = Composer(self)
        self.composer.submit_requested.connect(self._on_composer_submit_requested)
        self.attachments.watch(self.composer)
        row.addWidget(self.attachments.button, 0, Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.composer, 1)
        self.button = QPushButton(self)
        self.button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Expanding)
        self.button.setMinimumWidth(84)
        self.button.clicked.connect(self._on_button_clicked)
        row.addWidget(self.button)
        self.restart_button = QPushButton("Restart turn", self)
        self.restart_button.setObjectName("restartButton")
        self.restart_button.setAccessibleName("Restart turn")
        self.restart_button.setToolTip("Stop this turn and run its prompt again (Ctrl+R)")
        self.restart_button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Expanding)
        self.restart_button.clicked.connect(self._on_restart_button_clicked)
        row.addWidget(self.restart_button)
        layout.addLayout(row)
        # Up recalls, Ctrl+Shift+V, then @ and / (an event filter installed later sees keys first).
        self.composer_keys = ComposerKeys(self.composer, self._prompts)
        self.assist = ComposerAssist(self.composer)
        self.assist.command_requested.connect(self._on_assist_command_requested)
        self.composer.textChanged.connect(self._on_composer_text_changed)
        self.budget = BudgetLabel(self.composer, self)
        self.budget.setContentsMargins(14, 0, 14, 0)
        layout.addWidget(self.budget)
        self.status_line = StatusLine(self)
        self.status_line.setContentsMargins(12, 0, 12, 0)
        layout.addWidget(self.status_line)
        self.watchdog = WatchdogNotice(watchdog_seconds, self)
        self.watchdog.setContentsMargins(12, 0, 12, 0)
        self.watchdog.restart_requested.connect(self._on_restart_button_clicked)
        self.watchdog.question_requested.connect(self.show_open_question)
        layout.addWidget(self.watchdog)
        self.awaiting = AwaitingNotice(self)
        self.awaiting.setContentsMargins(12, 0, 12, 0)
        layout.addWidget(self.awaiting)
        self._tracker = AwaitTracker()
        #: stream id -> the row of files that turn changed (tolaria/ui/review/turn_changes.py).
        self._change_rows: dict[str, TurnChangesRow] = {}
        #: The running turn's open permission questions, and the watchdog's waiting for them
        #: (tolaria/ui/chat/pane_questions.py).
        self.questions = PaneQuestions(self.transcript, self.watchdog, self)
        self.questions.latest_requested.connect(self._show_latest)
        self.ssh_questions.asking_changed.connect(self._on_ssh_questions_asking_changed)
        self.setFocusProxy(self.composer)
        answer = QShortcut(QKeySequence(ANSWER_SHORTCUT), self)
        answer.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        answer.activated.connect(self.show_open_question)
        self._show_running(False)
        self.status_line.set_idle(agent_name)
        self.restyle()
        follow_palette(self, self.restyle)

    # -- intents ------------------------------------------------------------------------------
    def _on_composer_submit_requested(self) -> None:
        prompt = self.composer.toPlainText()
        if not prompt.strip():
            return
        if self.attachments.chips and self._send_attached(prompt):
            return
        if self.running_stream is not None:  # one turn at a time: the message waits its turn
            self.composer.clear()
            self.queue_requested.emit(self.conversation_id, prompt)
        elif self.editing is not None:
            replaced, self.editing = self.editing, None
            self.retry_requested.emit(self.conversation_id, replaced, prompt)
        else:
            self.send_requested.emit(self.conversation_id, prompt)

    def _send_attached(self, prompt: str) -> bool:
        """Send with the chips' files (True), or say why not (True: nothing else happens)."""
        problem = self.attachments.send_problem()
        if problem is None and self.editing is not None and self.running_stream is None:
            problem = "Edit and resend keeps the turn's own attachments: remove these chips"
        if problem is not None:
            self.status_line.set_idle(self._agent_name, problem)
            return True
        attached = tuple(self.attachments.attachments())
        if self.running_stream is not None:  # queued with its files, sent when the turn ends
            self.composer.clear()
            self.attachments.clear()
        self.send_attached_requested.emit(self.conversation_id, prompt, attached)
        return True

    def _on_assist_command_requested(self, name: str) -> None:
        self.command_requested.emit(self.conversation_id, name)

    def _on_composer_text_changed(self) -> None:
        self.draft_changed.emit(self.conversation_id, self.composer.toPlainText())

    def _prompts(self) -> list[str]:
        """The prompts of the loaded turns, oldest first (what Up recalls)."""
        return [view.prompt for view in self.transcript.turns()]

    def set_chat_context(self, cwd: str | None, agent: str, agent_name: str, *,
                         takes_images: bool = True, host: str = "") -> None:
        """The chat's folder and agent: what ``@`` lists (on ``host`` when it has one), whose
        commands ``/`` offers, and whether an image chip can go to it."""
        self.assist.set_context(cwd, agent, agent_name, host=host)
        self.attachments.set_agent(agent_name, takes_images)

    def _on_transcript_retry_requested(self, stream_id: str) -> None:
        view = self.transcript.turn(stream_id)
        if view is not None and self.running_stream is None:
            self.retry_requested.emit(self.conversation_id, stream_id, view.prompt)

    def _on_transcript_edit_requested(self, stream_id: str) -> None:
        view = self.transcript.turn(stream_id)
        if view is None or self.running_stream is not None:
            return
        self.editing = stream_id
        self.composer.setPlainText(view.prompt)
        self.composer.setFocus()
        self.status_line.set_idle(self._agent_name, "Editing the last prompt: Send replaces it")

    def _refresh_actions(self) -> None:
        """Edit is offered on the newest prompt while nothing runs."""
        views = self.transcript.turns()
        last = views[-1] if views and not self.transcript.has_newer else None
        for view in views:
            view.set_editable(view is last and self.running_stream is None and view.ended
                              and not view.restarted)

    def restyle(self) -> None:
        self.button.setStyleSheet(pane_button_css(
            "stop" if self.running_stream is not None else "send"))
        self.restart_button.setStyleSheet(pane_button_css("restart"))
        self.search_bar.restyle()
        self.attachments.restyle()

    def show_open_question(self) -> bool:
        """Bring the oldest open permission question of this chat into view and focus its
        answers (Ctrl+Shift+A, the watchdog notice's link). When its turn is out of the
        transcript's window (a search jumped to an old turn) the newest turns come back first,
        and the card gets the focus once built. False if no question is open."""
        return self.ssh_questions.focus_oldest() or self.questions.show_open(self.running_stream)

    def _on_ssh_questions_asking_changed(self, asking: bool) -> None:
        """ssh waits for the user (host key, passphrase): no silence is counted meanwhile."""
        if asking:
            self.watchdog.wait_for_answer(SSH_WAITING_TEXT)
        elif self.running_stream is not None and self.questions.asking:
            self.watchdog.wait_for_answer()  # the agent's own question is still open
        elif self.running_stream is not None:
            self.watchdog.arm()
        elif self.running_stream is None:  # a look at the host's agents asked: no turn runs
            self.watchdog.disarm()

    def _show_latest(self) -> None:
        """Back to the newest turns (the transcript was scrolled or jumped far up)."""
        self.transcript.clear()
        self.page_requested.emit(self.conversation_id, PAGE_LATEST, 0)

    def _on_transcript_page_requested(self, kind: str, turn_id: int) -> None:
        self.page_requested.emit(self.conversation_id, kind, turn_id)

    def _on_restart_button_clicked(self) -> None:
        if self.running_stream is not None:
            self.restart_requested.emit(self.conversation_id)

    def _on_queued_chips_edit_requested(self, message_id: int, text: str) -> None:
        typed = self.composer.toPlainText()
        self.composer.setPlainText(f"{text}\n{typed}" if typed.strip() else text)
        self.composer.setFocus()
        for chip in self.queued_chips.chips():  # its files come back as chips too
            if chip.message.id == message_id:
                self.attachments.add_stored(chip.message.attachments)
        self.unqueue_requested.emit(self.conversation_id, message_id)

    def _on_queued_chips_remove_requested(self, message_id: int) -> None:
        self.unqueue_requested.emit(self.conversation_id, message_id)

    def _request_queue_change(self, change: QueueChange) -> None:
        self.queue_change_requested.emit(self.conversation_id, change)

    def _on_button_clicked(self) -> None:
        if self.running_stream is not None:
            self.stop_requested.emit(self.conversation_id)
        else:
            self._on_composer_submit_requested()

    def _show_running(self, running: bool) -> None:
        self.restart_button.setVisible(running)
        self._set_running_look(running)
        for row in self._change_rows.values():
            row.set_busy(running)
        if running:
            self.button.setText("Stop")
            self.button.setAccessibleName("Stop")
            self.button.setToolTip(f"Stop the running turn ({self._stop_hint})")
        else:
            self.button.setText("Send")
            self.button.setAccessibleName("Send")
            self.button.setToolTip("Send the message (Enter)")

    def _set_running_look(self, running: bool) -> None:
        """Send is the accent button; Stop takes its place."""
        self.button.setObjectName("stopButton" if running else "sendButton")
        self.button.setStyleSheet(pane_button_css("stop" if running else "send"))

    def set_stop_hint(self, hint: str) -> None:
        self._stop_hint = hint
        self._show_running(self.running_stream is not None)

    def set_agent_name(self, name: str) -> None:
        if name != self._agent_name:  # another agent, another model: its context is not known
            self.status_line.context.clear()
        self._agent_name = name
        self.status_line.set_idle(name)

    # -- facts --------------------------------------------------------------------------------
    def load_history(self, history: TurnPage | Sequence[tuple[Turn, Sequence[Event]]],
                     agent_names: dict[str, str]) -> None:
        """Show the newest stored turns (a page; applied progressively by the frame timer)."""
        if not isinstance(history, TurnPage):
            history = TurnPage(self.conversation_id, PAGE_LATEST,
                               [(turn, list(events)) for turn, events in history])
        endings = self.load_page(history, agent_names)
        self.status_line.context.load([events for _turn, events in history.turns])
        last_summary = next((ending_summary(e) for e in reversed(endings) if e is not None), "")
        if last_summary:
            self.status_line.set_idle(self._agent_name, last_summary)
        if history.turns and self.running_stream is None:
            turn, events = history.turns[-1]
            self.awaiting.setVisible(AwaitTracker().feed_all(events).awaits_operator(
                turn.status))

    def load_page(self, page: TurnPage, agent_names: dict[str, str]) -> list[Ending | None]:
        """A page of stored turns the transcript asked for (or the search jumped to)."""
        self.questions.page_loaded(page)
        endings = self.transcript.show_page(page, agent_names)
        self._refresh_actions()
        return endings

    def load_markers(self, markers: Sequence[Marker]) -> None:
        for marker in markers:
            if marker.kind == MARKER_TURN_RESTARTED and isinstance(marker.data, dict):
                self.transcript.mark_restarted(str(marker.data.get("stream_id")))
            elif marker.kind == MARKER_MESSAGE_STEERED and isinstance(marker.data, dict):
                self.transcript.add_steered(str(marker.data.get("stream_id")), marker.id,
                                            str(marker.data.get("text", "")))

    # -- find in the chat -----------------------------------------------------------------------
    def _on_search_bar_search_requested(self, text: str) -> None:
        self.search_requested.emit(self.conversation_id, text)

    def show_matches(self, text: str, turn_ids: Sequence[int]) -> None:
        """The store's answer to a search: the bar jumps to the newest matching turn."""
        self.search_bar.show_matches(text, turn_ids)

    def _on_search_bar_jump_requested(self, turn_id: int) -> None:
        self.page_requested.emit(self.conversation_id, PAGE_AROUND, turn_id)

    def _on_search_bar_closed(self) -> None:
        self.composer.setFocus()

    def set_queue(self, state: QueueState) -> None:
        self.queued_chips.set_state(state)

    def set_turn_changes(self, changes: Sequence[TurnChanges]) -> None:
        """Show under each turn the files it changed (or why not), and what was undone."""
        for change in changes:
            view = self.transcript.turn(change.stream_id)
            if view is None:
                continue
            row = self._change_rows.get(change.stream_id)
            if row is None:
                row = TurnChangesRow()
                row.revert_file_requested.connect(self._on_changes_revert_file_requested)
                row.rewind_requested.connect(self._on_changes_rewind_requested)
                row.review_requested.connect(self._on_changes_review_requested)
                row.restore_requested.connect(self._on_changes_review_requested)
                view.attach_below(row)
                self._change_rows[change.stream_id] = row
            row.set_changes(change)
            row.set_busy(self.running_stream is not None)

    def _on_changes_revert_file_requested(self, turn_id: int, path: str) -> None:
        self.undo_requested.emit(self.conversation_id, UndoRequest(turn_id, path))

    def _on_changes_review_requested(self, request: object) -> None:
        self.undo_requested.emit(self.conversation_id, request)

    def show_file_review(self, review: FileReview) -> None:
        """One file's diff, or what became of an Accept / Revert, under its turn."""
        for row in self._change_rows.values():
            if row.changes is not None and row.changes.turn_id == review.turn_id:
                row.show_review(review)

    def _on_changes_rewind_requested(self, turn_id: int) -> None:
        self.undo_requested.emit(self.conversation_id, UndoRequest(turn_id))

    def turn_restarted(self, old_stream: str) -> None:
        self.transcript.mark_restarted(old_stream)

    def run_started(self, stream_id: str, turn: Turn, agent_name: str) -> None:
        self.running_stream = stream_id
        if self.transcript.has_newer:  # scrolled far up: go back to the newest turns first
            self._show_latest()
        self.transcript.add_turn(turn.prompt, agent_name, stream_id, turn_id=turn.id,
                                 started_at=turn.started_at)
        self.editing = None
        self._refresh_actions()
        if self.composer.toPlainText() == turn.prompt:
            # It was sent from the composer; a delivered queue or a restart leaves what is typed.
            self.composer.clear()
            self.attachments.clear()
        self._show_running(True)
        self.status_line.start(agent_name)
        self.awaiting.hide()
        self._tracker = AwaitTracker()
        self.questions.started()

    def adopt_run(self, stream_id: str) -> bool:
        """Follow a running turn started in another view (a fan-out job's pane): its stored
        part was just loaded as history; the rest arrives live. False if it is not shown here."""
        if self.running_stream is not None or self.transcript.turn(stream_id) is None:
            return False
        self.running_stream = stream_id
        self._show_running(True)
        self.status_line.start(self._agent_name)
        self.awaiting.hide()
        self.questions.adopt(stream_id)
        return True

    def apply_event(self, stream_id: str, event: Event) -> None:
        view = self.transcript.turn(stream_id)
        if view is not None:
            view.enqueue(event)
            self.transcript.schedule(view)
        else:  # not built: its page may be queued to be (else the store has the event)
            self.transcript.add_late(stream_id, event)
        if stream_id == self.running_stream:
            self._tracker.feed(event)
            self.questions.output()  # the silence starts again
            if isinstance(event, Usage):
                self.status_line.context.feed(event)
            elif isinstance(event, AgentCommands):  # the agent's own ``/`` commands (ACP)
                self.assist.set_session_commands([
                    AgentCommand(c.get("name", ""), c.get("description", ""), "agent")
                    for c in event.commands])

    def permission_requested(self, stream_id: str, key: str, request: PermissionRequest) -> None:
        """A question of a running turn. Never dropped: when the turn's view is not built (a
        search jumped away from it, its page is still loading) it is shown when it is."""
        self.questions.asked(stream_id, key, request, stream_id == self.running_stream)

    def permission_settled(self, stream_id: str, key: str, outcome: str) -> None:
        self.questions.settled(stream_id, key, stream_id == self.running_stream)
        view = self.transcript.turn(stream_id)
        if view is not None:
            view.settle(key, outcome)
            self.transcript.schedule(view)

    def run_stopping(self, stream_id: str) -> None:
        view = self.transcript.turn(stream_id)
        if view is not None:
            view.mark_stopping()
        if stream_id == self.running_stream:
            self.status_line.stopping()
            self.questions.stopping()
            self.ssh_questions.refuse_all()  # ssh gives up at once: the stop need not wait

    def run_finished(self, stream_id: str, done: Done) -> None:
        view = self.transcript.turn(stream_id)
        ending = Ending(status_from_stop_reason(done.stop_reason), done.duration_ms,
                        done.survivors, stop_reason=done.stop_reason, limit=done.limit,
                        limit_value=done.limit_value)
        if view is not None:
            view.end(ending)
            self.transcript.schedule(view)
        self.questions.finished(stream_id, stream_id == self.running_stream)
        self.transcript.turn_ended(stream_id)
        if stream_id == self.running_stream:
            self.running_stream = None
            self._show_running(False)
            self._refresh_actions()
            self.awaiting.setVisible(self._tracker.awaits_operator(ending.status))
            self.status_line.finish(ending_summary(ending,
                                                   view.usage if view is not None else None))

    # -- inspection ---------------------------------------------------------------------------
    def turn_views(self) -> list[TurnView]:
        return self.transcript.turns()
