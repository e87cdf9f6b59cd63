"""One turn in the transcript: the prompt, then what the agent did, then how it ended.

Events are queued as they arrive and applied by the transcript's frame timer in time-boxed
batches (``drain``): consecutive text deltas are merged, so a flood costs one render per frame,
not one per delta. When text arrives faster than it can be shown, the oldest unseen text is
dropped from the queue (and counted as "not shown"); the store keeps it, up to the turn's output
cap: events go through the same ``OutputCap`` as in the store (tolaria/core/output_cap.py), so the
view holds a bounded amount and shows the same "Output truncated" notice, live and restored.

Each message has a header (avatar, name, time, actions): Copy on both, Edit on the last prompt,
Retry on a turn that failed or was stopped. The turn only says what the user asked for
(``retry_requested``, ``edit_requested``); the pane decides.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TypeVar

from PySide6.QtCore import Qt, Signal, SignalInstance
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from tolaria.core.events import (
    Attached,
    Diagnostic,
    Error,
    Event,
    ToolDone,
    ToolStart,
    ToolUpdate,
    Usage,
)
from tolaria.core.limits import WARNING_SOURCE as LIMIT_SOURCE
from tolaria.core.output_cap import CAP_SOURCE, human_size
from tolaria.core.permissions import PermissionRequest
from tolaria.ui.transcript.blocks import (
    CHUNK_CHARS,
    CodeBlock,
    CodeText,
    Collapsible,
    ErrorCard,
    MarkdownSegment,
    RetryNotice,
    RichText,
    ThinkingBlock,
    ToolCard,
)
from tolaria.ui.transcript.cards.attachment_card import AttachmentCard
from tolaria.ui.transcript.cards.message import MessageHeader
from tolaria.ui.transcript.cards.style import Bubble, set_tone
from tolaria.ui.transcript.permission_card import PermissionCard
from tolaria.ui.transcript.turn_model import (  # re-exported: the turn's vocabulary
    NOTICE_SOURCE,
    PENDING_TOOL,
    STATUS_CANCELLED,
    STATUS_COMPLETED,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_RUNNING,
    STDERR_LINE_CHARS,
    STDERR_LINES,
    Ending,
    Question,
    QueuedText,
    ending_line,
    format_duration,
    format_usage,
    status_from_stop_reason,
)
from tolaria.ui.transcript.turn_queue import TurnQueue

__all__ = [
    "NOTICE_SOURCE", "STATUS_CANCELLED", "STATUS_COMPLETED", "STATUS_FAILED",
    "STATUS_INTERRUPTED", "STATUS_RUNNING", "Ending", "TurnView", "format_duration",
    "format_usage", "status_from_stop_reason",
]

W = TypeVar("W", bound=QWidget)
#: Statuses a turn can be retried from.
RETRYABLE = (STATUS_FAILED, STATUS_CANCELLED, STATUS_INTERRUPTED)
#: The widest an attachment card under the prompt grows (a file, not a block of the answer).
_ATTACHMENT_WIDTH = 420


class TurnView(QWidget):
    #: The user answered a permission question of this turn: stream id, question key, option id.
    permission_answer_requested = Signal(str, str, str)
    #: Run this turn's prompt again (it failed or was stopped): stream id.
    retry_requested = Signal(str)
    #: Put this turn's prompt in the composer to edit and send again: stream id.
    edit_requested = Signal(str)
    #: A block was opened or closed by the user: the transcript keeps the view still.
    block_toggled = Signal(QWidget)

    def __init__(self, prompt: str, agent_name: str, stream_id: str,
                 parent: QWidget | None = None, *, turn_id: int | None = None,
                 started_at: float | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("turnView")
        self.stream_id = stream_id
        #: The store's id of the turn (pages are asked relative to it); None until known.
        self.turn_id = turn_id
        self.prompt = prompt
        self.agent_name = agent_name
        self.started_at = started_at if started_at is not None else time.time()
        #: Text a search is showing in this turn (highlighted as the turn renders).
        self.needle = ""
        self.status = STATUS_RUNNING
        #: What waits to be shown (tolaria/ui/transcript/turn_queue.py).
        self.queue = TurnQueue(stream_id)
        self._tools: dict[str, ToolCard] = {}
        #: When this turn's live tool calls began, by tool id (monotonic), shared with the
        #: transcript so that a view built again keeps counting from the real start.
        self.tool_started: dict[str, float] = {}
        self._errors: list[ErrorCard] = []
        self._questions: dict[str, PermissionCard] = {}
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._cap = self.queue.cap
        #: The "Output truncated" notice of a live turn (its count of what was not kept grows).
        self._cap_label: QLabel | None = None
        self._cap_counted = 0
        self._last: QWidget | None = None
        self.ending: Ending | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 6, 0, 14)
        layout.setSpacing(8)
        self.you = MessageHeader("You", self.started_at, self, user=True)
        self.copy_prompt = self.you.action("Copy", "Copy the prompt", "copyPrompt")
        self.copy_prompt.clicked.connect(self._on_copy_prompt_clicked)
        #: Edit (the last prompt) and Retry (a failed or stopped turn): made when first offered.
        self.edit_button: QToolButton | None = None
        self.retry_button: QToolButton | None = None
        layout.addWidget(self.you)
        bubble = Bubble(prompt, self)
        bubble.setObjectName("promptBubble")
        bubble.setWordWrap(True)
        bubble.setTextFormat(Qt.TextFormat.PlainText)
        bubble.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bubble.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        layout.addWidget(bubble)
        self._bubble = bubble
        #: The prompt's files (``attached`` events), under the prompt: made with the first.
        self.attached_box: QWidget | None = None
        self.agent_header = MessageHeader(agent_name, self.started_at, self)
        self.copy_answer = self.agent_header.action("Copy", "Copy the answer", "copyAnswer")
        self.copy_answer.clicked.connect(self._on_copy_answer_clicked)
        layout.addWidget(self.agent_header)
        #: What the agent did; hidden when the turn was abandoned by a restart.
        self.body = QWidget(self)
        self._blocks = QVBoxLayout(self.body)
        self._blocks.setContentsMargins(28, 0, 0, 0)
        self._blocks.setSpacing(8)
        layout.addWidget(self.body)
        self.restarted = False
        #: The "Abandoned" note and its Show attempt toggle (made when the turn is abandoned).
        self.abandoned_toggle: QToolButton | None = None
        self.footer = QLabel(self)
        self.footer.setObjectName("turnStatus")
        self.footer.setContentsMargins(28, 0, 0, 0)
        set_tone(self.footer, "muted")
        self.footer.setText("Working…")
        layout.addWidget(self.footer)
        self.survivors_label: QLabel | None = None
        self._layout = layout
        #: Messages sent into this turn while it ran, by marker id (``add_steered``).
        self._steered: dict[int, Bubble] = {}

    def restyle(self) -> None:
        """Colours that are not in the transcript's style sheet follow the theme (code and diff
        highlighting, avatars)."""
        for text in self.findChildren(CodeText):
            text.restyle()
        for card in self._tools.values():
            card.restyle()
        self.update()

    # -- actions --------------------------------------------------------------------------------
    def set_editable(self, on: bool) -> None:
        """Offer Edit on the prompt (the pane offers it on the last turn only)."""
        if on and self.edit_button is None:
            self.edit_button = self._action(self.you, "Edit", "Edit this prompt and send it "
                                            "again", "editPrompt", self.edit_requested)
        if self.edit_button is not None:
            self.edit_button.setVisible(on)

    def _offer_retry(self, on: bool) -> None:
        if on and self.retry_button is None:
            self.retry_button = self._action(self.agent_header, "Retry", "Run this prompt again",
                                             "retryTurn", self.retry_requested)
        if self.retry_button is not None:
            self.retry_button.setVisible(on)

    def _action(self, header: MessageHeader, text: str, tip: str, name: str,
                intent: SignalInstance) -> QToolButton:
        """An action made when first offered; clicking it emits ``intent(stream id)``."""
        button = header.action(text, tip, name)
        button.clicked.connect(lambda: intent.emit(self.stream_id))
        return button

    def _on_copy_prompt_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.prompt)

    def _on_copy_answer_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.text())

    def set_needle(self, needle: str) -> None:
        """Highlight ``needle`` (a search match) in the prompt and the answer text, now and as
        the answer renders."""
        self.needle = needle
        for chunk in self.findChildren(RichText):
            chunk.highlight(needle)
        for bubble in self.findChildren(Bubble):
            bubble.highlight(needle)

    def add_steered(self, key: int, text: str) -> None:
        """A message the user gave this turn while it ran (a stored ``message_steered`` marker):
        a small prompt bubble in the turn's body, once per ``key`` (the marker's id)."""
        if key in self._steered:
            return
        bubble = Bubble(text, self.body)
        bubble.setObjectName("steeredBubble")
        bubble.setWordWrap(True)
        bubble.setTextFormat(Qt.TextFormat.PlainText)
        bubble.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bubble.setToolTip("Sent while running")
        if self.needle:
            bubble.highlight(self.needle)
        self._steered[key] = bubble
        self._add_block(bubble)

    def attach_below(self, widget: QWidget) -> None:
        """Show ``widget`` under the turn (its changed files: tolaria/ui/review/turn_changes.py)."""
        layout = self.layout()
        assert layout is not None
        layout.addWidget(widget)

    # -- queueing (cheap, called per event) ---------------------------------------------------
    # -- queueing (cheap, called per event; tolaria/ui/transcript/turn_queue.py) ----------------
    def enqueue(self, event: Event) -> None:
        self.queue.enqueue(event)

    def end(self, ending: Ending) -> None:
        self.queue.end(ending)

    def ask(self, key: str, request: PermissionRequest) -> None:
        """A permission question, shown in order with the turn's events."""
        self.queue.ask(key, request)

    def settle(self, key: str, outcome: str) -> None:
        self.queue.settle(key, outcome)

    @property
    def received_chars(self) -> int:
        return self.queue.received_chars

    @property
    def usage(self) -> Usage | None:
        return self.queue.usage

    @property
    def ended(self) -> bool:
        return self.queue.ended

    def collapse_restarted(self) -> None:
        """This attempt was abandoned (Restart turn, Retry, Edit): keep it, collapsed, under a
        note."""
        if self.restarted:
            return
        self.restarted = True
        row = QWidget(self)
        line = QHBoxLayout(row)
        line.setContentsMargins(28, 0, 0, 0)
        note = QLabel("Abandoned: this turn was run again.", row)
        note.setObjectName("restartedNote")
        set_tone(note, "muted")
        line.addWidget(note)
        toggle = QToolButton(row)
        toggle.setObjectName("abandonedToggle")
        toggle.setText("Show attempt")
        toggle.setAutoRaise(True)
        toggle.clicked.connect(self._on_abandoned_toggle_clicked)
        line.addWidget(toggle)
        line.addStretch(1)
        self._layout.insertWidget(self._layout.indexOf(self.body) + 1, row)
        self.abandoned_toggle = toggle
        self.body.hide()
        self._offer_retry(False)
        self.set_editable(False)

    def _on_abandoned_toggle_clicked(self) -> None:
        shown = not self.body.isVisible()
        self.body.setVisible(shown)
        if self.abandoned_toggle is not None:
            self.abandoned_toggle.setText("Hide attempt" if shown else "Show attempt")

    def mark_stopping(self) -> None:
        if self.status == STATUS_RUNNING:
            self.footer.setText("Stopping…")

    @property
    def busy(self) -> bool:
        return bool(self.queue)

    # -- applying (time-boxed, called by the frame timer) ---------------------------------------
    def drain(self, deadline: float) -> bool:
        """Apply queued events until ``deadline`` (perf_counter); True if work remains."""
        touched: dict[int, MarkdownSegment | ThinkingBlock] = {}
        queue = self.queue
        while queue:
            item = queue.first()
            if isinstance(item, QueuedText):
                widget = self._text_block(item.kind)
                if item.dropped and isinstance(widget, MarkdownSegment):
                    widget.elide_all(item.dropped)
                    item.dropped = 0
                widget.append(queue.take_text(item, CHUNK_CHARS))
                touched[id(widget)] = widget
                if not item.parts:
                    queue.pop()
                    if queue.ended:  # (stored text: nothing more comes) rendered now, timed
                        widget.refresh()
            else:
                queue.pop()
                if isinstance(item, Ending):
                    self._apply_ending(item)
                elif isinstance(item, Question):
                    self._apply_question(item)
                else:
                    self._apply(item)
            if time.perf_counter() >= deadline:
                break
        for widget in touched.values():
            widget.refresh()
        if self.needle and touched:
            self.set_needle(self.needle)
        if (self._cap_label is not None and self.status == STATUS_RUNNING
                and self._cap.dropped != self._cap_counted):
            self._cap_counted = self._cap.dropped
            self._cap_label.setText(f"{self._cap.notice_text()} Not kept so far: "
                                    f"{human_size(self._cap.dropped)}.")
        return bool(queue)

    def _attach_card(self, event: Attached) -> None:
        """A file of the prompt shows under the prompt's bubble, not in the agent's answer (as
        Claude desktop shows the files of a message with the message)."""
        if self.attached_box is None:
            self.attached_box = QWidget(self)
            self.attached_box.setObjectName("promptAttachments")
            column = QVBoxLayout(self.attached_box)
            column.setContentsMargins(0, 0, 0, 0)  # aligned with the bubble
            column.setSpacing(6)
            self._layout.insertWidget(self._layout.indexOf(self._bubble) + 1, self.attached_box)
        card = AttachmentCard(event, self.attached_box)
        card.setMaximumWidth(_ATTACHMENT_WIDTH)
        layout = self.attached_box.layout()
        assert layout is not None
        layout.addWidget(card)

    def _add_block(self, widget: QWidget) -> None:
        self._blocks.addWidget(widget)
        self._last = widget
        for fold in ([widget] if isinstance(widget, Collapsible) else []) + \
                widget.findChildren(Collapsible):
            fold.expanded_changed.connect(self._on_fold_expanded_changed)

    def _on_fold_expanded_changed(self, _on: bool) -> None:
        self.block_toggled.emit(self)

    def _text_block(self, kind: str) -> MarkdownSegment | ThinkingBlock:
        cls = MarkdownSegment if kind == "text" else ThinkingBlock
        if isinstance(self._last, cls):
            return self._last
        widget = cls(self.body)
        self._add_block(widget)
        return widget

    def _apply(self, event: Event) -> None:
        if isinstance(event, ToolStart):
            card = ToolCard(event.tool_id, event.name, event.input, self, live=not self.ended,
                            started=self.tool_started.get(event.tool_id))
            if card.started is not None:
                self.tool_started.setdefault(event.tool_id, card.started)
            self._tools[event.tool_id] = card
            self._add_block(card)
        elif isinstance(event, ToolUpdate):
            updated = self._tools.get(event.tool_id)
            if updated is not None:
                updated.apply_update(event.name, event.input, event.status, event.output)
        elif isinstance(event, ToolDone):
            known = self._tools.get(event.tool_id)
            if known is None:  # a result without a start: still show it
                known = ToolCard(event.tool_id, "tool", None, self, live=not self.ended)
                self._tools[event.tool_id] = known
                self._add_block(known)
            known.finish(event.output, event.is_error)
        elif isinstance(event, Attached):  # a file of the prompt (ADR 0028): under it
            self._attach_card(event)
        elif isinstance(event, Error):
            error = ErrorCard(event.message, list(self._stderr), self, hint=event.hint)
            self._errors.append(error)
            self._add_block(error)
        elif isinstance(event, Diagnostic) and event.source == "retry":
            if isinstance(self._last, RetryNotice):
                self._last.setText(event.message)
            else:
                self._add_block(RetryNotice(event.message, self))
        elif isinstance(event, Diagnostic) and event.source == NOTICE_SOURCE:
            note = QLabel(event.message, self.body)
            note.setObjectName("turnNotice")
            note.setWordWrap(True)
            note.setTextFormat(Qt.TextFormat.PlainText)
            set_tone(note, "muted")
            self._add_block(note)
        elif isinstance(event, Diagnostic) and event.source == LIMIT_SOURCE:
            note = QLabel(f"⚠ {event.message}", self.body)
            note.setObjectName("limitNotice")
            note.setWordWrap(True)
            note.setTextFormat(Qt.TextFormat.PlainText)
            note.setAccessibleName("Limit warning")
            set_tone(note, "warning")
            self._add_block(note)
        elif isinstance(event, Diagnostic) and event.source == CAP_SOURCE:
            note = QLabel(event.message, self.body)
            note.setObjectName("capNotice")
            note.setWordWrap(True)
            note.setTextFormat(Qt.TextFormat.PlainText)
            note.setAccessibleName("Output truncated")
            set_tone(note, "warning")
            self._add_block(note)
            if self._cap_label is None and not self._cap.upstream:
                self._cap_label = note
        elif isinstance(event, Diagnostic) and event.source == "stderr":
            line = event.message
            if len(line) > STDERR_LINE_CHARS:
                line = line[:STDERR_LINE_CHARS] + f"… ({human_size(len(line))} in all)"
            self._stderr.append(line)
            for error in self._errors:
                error.set_stderr(list(self._stderr))

    def _apply_question(self, item: Question) -> None:
        if item.request is not None and item.key in self._questions:
            return  # one card per question: asked live and kept in the store, shown once
        if item.request is not None:
            card = PermissionCard(item.key, item.request, self)
            card.answer_requested.connect(self._on_permission_card_answer_requested)
            self._questions[item.key] = card
            self._add_block(card)
        elif item.outcome is not None and item.key in self._questions:
            question = self._questions[item.key]
            question.settle(item.outcome)
            tool = self._tools.get(question.request.tool_id)
            if tool is not None and tool.status == "pending" and question.allowed:
                tool.set_status("running")  # no longer waiting for approval

    def _on_permission_card_answer_requested(self, key: str, option_id: str) -> None:
        self.permission_answer_requested.emit(self.stream_id, key, option_id)

    def _apply_ending(self, ending: Ending) -> None:
        self.ending = ending
        self.status = ending.status
        if self._cap_label is not None:  # the closing notice has the total: as when restored
            self._cap_label.setText(self._cap.notice_text())
        for question in self._questions.values():  # (a no-op for the answered ones)
            question.settle("cancelled" if ending.status == STATUS_CANCELLED else "closed")
        for card in self._tools.values():
            if card.status in ("running", "pending"):
                card.set_status(PENDING_TOOL.get(ending.status, "unfinished"))
        line, tone = ending_line(ending)
        usage = self.usage
        extra = format_usage(
            ending.input_tokens if ending.input_tokens is not None else
            (usage.input_tokens if usage else None),
            ending.output_tokens if ending.output_tokens is not None else
            (usage.output_tokens if usage else None),
            ending.cost_usd if ending.cost_usd is not None else (usage.cost_usd if usage else None))
        self.footer.setText(f"{line} · {extra}" if extra else line)
        set_tone(self.footer, tone)
        self._offer_retry(ending.status in RETRYABLE)
        self.footer.setAccessibleName(f"Turn status: {line}")
        if ending.survivors:
            names = ", ".join(f"{s.name} (pid {s.pid})" for s in ending.survivors)
            label = QLabel(f"⚠ Still running after the stop: {names}. Tolaria could not end "
                           "these processes; end them yourself.", self)
            label.setObjectName("survivors")
            label.setTextFormat(Qt.TextFormat.PlainText)  # names the agent chose
            label.setWordWrap(True)
            label.setContentsMargins(28, 0, 0, 0)
            set_tone(label, "warning")
            self._layout.addWidget(label)
            self.survivors_label = label

    # -- inspection (tests, copy) --------------------------------------------------------------
    def text(self) -> str:
        """The answer text applied so far (what the transcript shows, in source form)."""
        return "\n\n".join(w.source_text() for w in self._widgets(MarkdownSegment))

    def code_blocks(self) -> list[CodeBlock]:
        return self.body.findChildren(CodeBlock)

    def tool_cards(self) -> list[ToolCard]:
        return list(self._tools.values())

    def permission_cards(self) -> list[PermissionCard]:
        return list(self._questions.values())

    def error_cards(self) -> list[ErrorCard]:
        return list(self._errors)

    def cap_notices(self) -> list[str]:
        """The texts of the turn's "Output truncated" notices (tolaria/core/output_cap.py)."""
        return [label.text() for label in self._widgets(QLabel)
                if label.objectName() == "capNotice"]

    def thinking_blocks(self) -> list[ThinkingBlock]:
        return self._widgets(ThinkingBlock)

    def _widgets(self, cls: type[W]) -> list[W]:
        out = []
        for i in range(self._blocks.count()):
            item = self._blocks.itemAt(i)
            widget = item.widget() if item is not None else None
            if isinstance(widget, cls):
                out.append(widget)
        return out
