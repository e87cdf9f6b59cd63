"""One turn in the transcript: the prompt, then what the agent did, then how it ended.

Events are queued as they arrive and applied by the transcript's frame timer in time-boxed
batches (``drain``): consecutive text deltas are merged, so a flood costs one render per frame,
not one per delta. When text arrives faster than it can be shown, the oldest unseen text is
dropped from the queue (and counted as "not shown"); the store keeps it, up to the turn's output
cap: events go through the same ``OutputCap`` as in the store (tolaria/core/output_cap.py), so the
view holds a bounded amount and shows the same "Output truncated" notice, live and restored.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    STOP_MAX_ITERATIONS,
    Diagnostic,
    Error,
    Event,
    Survivor,
    TextDelta,
    ThinkingDelta,
    ToolDone,
    ToolStart,
    ToolUpdate,
    Usage,
)
from tolaria.core.output_cap import CAP_SOURCE, OutputCap, OutputLimits, human_size
from tolaria.core.turns.acp.updates import PermissionRequest
from tolaria.ui import theme
from tolaria.ui.blocks import (
    CHUNK_CHARS,
    MAX_CHUNKS,
    ErrorCard,
    MarkdownSegment,
    RetryNotice,
    ThinkingBlock,
    ToolCard,
)
from tolaria.ui.permission_card import PermissionCard

W = TypeVar("W", bound=QWidget)

#: ``Diagnostic.source`` of a note for the user (tolaria.core.modelchat.client.NOTICE), shown in the
#: turn: "<model> does not support tools ...", "Stopped after N tool rounds ...".
NOTICE_SOURCE = "notice"

#: Unseen text kept queued at most; beyond this the oldest queued text is dropped.
MAX_PENDING_TEXT = CHUNK_CHARS * MAX_CHUNKS
_STDERR_LINES = 40
#: Characters kept of one stderr line (the start: that is where the message is).
_STDERR_LINE_CHARS = 4096

STATUS_RUNNING = "running"
STATUS_COMPLETED = "completed"
STATUS_CANCELLED = "cancelled"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"

_STATUS_WORDS = {
    STATUS_COMPLETED: "Completed",
    STATUS_CANCELLED: "Stopped",
    STATUS_FAILED: "Failed",
    STATUS_INTERRUPTED: "Interrupted",
}
#: What a tool without a result became when the turn ended so.
_PENDING_TOOL = {STATUS_CANCELLED: "cancelled", STATUS_INTERRUPTED: "interrupted"}


def merge_updates(older: ToolUpdate, newer: ToolUpdate) -> ToolUpdate:
    """Two queued updates of one tool as one: what the newer one changed wins."""
    return ToolUpdate(newer.stream_id, tool_id=newer.tool_id,
                      name=newer.name if newer.name is not None else older.name,
                      input=newer.input if newer.input is not None else older.input,
                      status=newer.status if newer.status is not None else older.status,
                      output=newer.output if newer.output is not None else older.output)


def status_from_stop_reason(stop_reason: str) -> str:
    if stop_reason == STOP_END_TURN:
        return STATUS_COMPLETED
    if stop_reason == STOP_CANCELLED:
        return STATUS_CANCELLED
    return STATUS_FAILED


def format_duration(ms: int | None) -> str:
    if ms is None:
        return ""
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s"


def format_usage(input_tokens: int | None, output_tokens: int | None,
                 cost_usd: float | None) -> str:
    parts = []
    if input_tokens is not None or output_tokens is not None:
        parts.append(f"{input_tokens or 0:,} in / {output_tokens or 0:,} out tokens")
    if cost_usd is not None:
        parts.append(f"${cost_usd:.4f}")
    return " · ".join(parts)


@dataclass
class _Text:
    kind: str  # "text" | "thinking"
    parts: list[str] = field(default_factory=list)
    size: int = 0
    dropped: int = 0

    def take(self, limit: int) -> str:
        whole = "".join(self.parts)
        head, rest = whole[:limit], whole[limit:]
        self.parts = [rest] if rest else []
        self.size = len(rest)
        return head


@dataclass(frozen=True)
class _Question:
    """A permission question (``request`` set) or how one ended (``outcome`` set)."""

    key: str
    request: PermissionRequest | None = None
    outcome: str | None = None


@dataclass(frozen=True)
class Ending:
    status: str
    duration_ms: int | None = None
    survivors: Sequence[Survivor] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    #: The run's ``done`` stop reason, when known (it refines a failed status).
    stop_reason: str | None = None


class TurnView(QWidget):
    #: The user answered a permission question of this turn: stream id, question key, option id.
    permission_answer_requested = Signal(str, str, str)

    def __init__(self, prompt: str, agent_name: str, stream_id: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("turnView")
        self.stream_id = stream_id
        self.status = STATUS_RUNNING
        self.received_chars = 0
        self._queue: deque[_Text | Event | Ending | _Question] = deque()
        self._pending_text = 0
        self._tools: dict[str, ToolCard] = {}
        self._errors: list[ErrorCard] = []
        self._questions: dict[str, PermissionCard] = {}
        self._stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self._cap = OutputCap(OutputLimits.from_env())
        #: The "Output truncated" notice of a live turn (its count of what was not kept grows).
        self._cap_label: QLabel | None = None
        self._cap_counted = 0
        #: The latest usage the agent reported (kept as it arrives, not when applied).
        self.usage: Usage | None = None
        self._last: QWidget | None = None
        self.ending: Ending | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 12)
        layout.setSpacing(4)
        you = self._caption("You")
        layout.addWidget(you)
        bubble = QLabel(prompt, self)
        bubble.setObjectName("promptBubble")
        bubble.setWordWrap(True)
        bubble.setTextFormat(Qt.TextFormat.PlainText)
        bubble.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bubble.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        bubble.setStyleSheet(f"QLabel#promptBubble {{ background: "
                             f"{theme.css(theme.prompt_background())}; border-radius: 8px;"
                             f" padding: 8px 10px; }}")
        layout.addWidget(bubble)
        layout.addWidget(self._caption(agent_name))
        #: What the agent did; hidden when the turn was abandoned by a restart.
        self.body = QWidget(self)
        self._blocks = QVBoxLayout(self.body)
        self._blocks.setContentsMargins(0, 0, 0, 0)
        self._blocks.setSpacing(6)
        layout.addWidget(self.body)
        self.restarted = False
        self._restart_row = QWidget(self)
        row = QHBoxLayout(self._restart_row)
        row.setContentsMargins(0, 0, 0, 0)
        note = QLabel("Abandoned: this turn was restarted.", self._restart_row)
        note.setObjectName("restartedNote")
        note.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        row.addWidget(note)
        self.abandoned_toggle = QPushButton("Show attempt", self._restart_row)
        self.abandoned_toggle.setObjectName("abandonedToggle")
        self.abandoned_toggle.setFlat(True)
        self.abandoned_toggle.setCheckable(True)
        self.abandoned_toggle.toggled.connect(self._on_abandoned_toggle_toggled)
        row.addWidget(self.abandoned_toggle)
        row.addStretch(1)
        self._restart_row.hide()
        layout.addWidget(self._restart_row)
        self.footer = QLabel(self)
        self.footer.setObjectName("turnStatus")
        self.footer.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        self.footer.setText("Working…")
        layout.addWidget(self.footer)
        self.survivors_label = QLabel(self)
        self.survivors_label.setObjectName("survivors")
        self.survivors_label.setWordWrap(True)
        self.survivors_label.setStyleSheet(f"color: {theme.css(theme.warning_color())};")
        self.survivors_label.hide()
        layout.addWidget(self.survivors_label)

    def attach_below(self, widget: QWidget) -> None:
        """Show ``widget`` under the turn (its changed files: tolaria/ui/turn_changes.py)."""
        layout = self.layout()
        assert layout is not None
        layout.addWidget(widget)

    def _caption(self, text: str) -> QLabel:
        label = QLabel(text, self)
        font = label.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 0.9)
        label.setFont(font)
        label.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        return label

    # -- queueing (cheap, called per event) ---------------------------------------------------
    def enqueue(self, event: Event) -> None:
        if isinstance(event, TextDelta | ThinkingDelta):
            self.received_chars += len(event.text)
        for kept in self._cap.feed(event):
            self._enqueue_kept(kept)

    def _enqueue_kept(self, event: Event) -> None:
        if isinstance(event, TextDelta | ThinkingDelta):
            kind = "text" if isinstance(event, TextDelta) else "thinking"
            last = self._queue[-1] if self._queue else None
            if not (isinstance(last, _Text) and last.kind == kind):
                last = _Text(kind)
                self._queue.append(last)
            last.parts.append(event.text)
            last.size += len(event.text)
            if kind == "text":
                self._pending_text += len(event.text)
                if self._pending_text > MAX_PENDING_TEXT:
                    self._drop_oldest_text()
            return
        if isinstance(event, Usage):
            self.usage = event
        if isinstance(event, ToolUpdate) and self._queue:
            last = self._queue[-1]
            if isinstance(last, ToolUpdate) and last.tool_id == event.tool_id:
                self._queue[-1] = merge_updates(last, event)  # a stream of partial output
                return
        self._queue.append(event)

    def end(self, ending: Ending) -> None:
        for kept in self._cap.finish(self.stream_id):  # the tail of a capped answer
            self._enqueue_kept(kept)
        self._queue.append(ending)

    def ask(self, key: str, request: PermissionRequest) -> None:
        """A permission question, shown in order with the turn's events."""
        self._queue.append(_Question(key, request=request))

    def settle(self, key: str, outcome: str) -> None:
        self._queue.append(_Question(key, outcome=outcome))

    def collapse_restarted(self) -> None:
        """This attempt was abandoned by "Restart turn": keep it, collapsed, under a note."""
        if self.restarted:
            return
        self.restarted = True
        self._restart_row.show()
        self.abandoned_toggle.setChecked(False)
        self.body.hide()

    def _on_abandoned_toggle_toggled(self, shown: bool) -> None:
        self.body.setVisible(shown)
        self.abandoned_toggle.setText("Hide attempt" if shown else "Show attempt")

    def mark_stopping(self) -> None:
        if self.status == STATUS_RUNNING:
            self.footer.setText("Stopping…")

    def _drop_oldest_text(self) -> None:
        """Drop queued text from the oldest end until half the allowance is left."""
        excess = self._pending_text - MAX_PENDING_TEXT // 2
        for item in self._queue:
            if excess <= 0:
                break
            if not (isinstance(item, _Text) and item.kind == "text") or item.size == 0:
                continue
            whole = "".join(item.parts)
            cut = min(excess, len(whole))
            item.parts = [whole[cut:]]
            item.size = len(whole) - cut
            item.dropped += cut
            self._pending_text -= cut
            excess -= cut

    @property
    def busy(self) -> bool:
        return bool(self._queue)

    # -- applying (time-boxed, called by the frame timer) ---------------------------------------
    def drain(self, deadline: float) -> bool:
        """Apply queued events until ``deadline`` (perf_counter); True if work remains."""
        touched: dict[int, MarkdownSegment | ThinkingBlock] = {}
        while self._queue:
            item = self._queue[0]
            if isinstance(item, _Text):
                widget = self._text_block(item.kind)
                if item.dropped and isinstance(widget, MarkdownSegment):
                    widget.elide_all(item.dropped)
                    item.dropped = 0
                chunk = item.take(CHUNK_CHARS)
                if item.kind == "text":
                    self._pending_text -= len(chunk)
                widget.append(chunk)
                touched[id(widget)] = widget
                if not item.parts:
                    self._queue.popleft()
            else:
                self._queue.popleft()
                if isinstance(item, Ending):
                    self._apply_ending(item)
                elif isinstance(item, _Question):
                    self._apply_question(item)
                else:
                    self._apply(item)
            if time.perf_counter() >= deadline:
                break
        for widget in touched.values():
            widget.refresh()
        if (self._cap_label is not None and self.status == STATUS_RUNNING
                and self._cap.dropped != self._cap_counted):
            self._cap_counted = self._cap.dropped
            self._cap_label.setText(f"{self._cap.notice_text()} Not kept so far: "
                                    f"{human_size(self._cap.dropped)}.")
        return bool(self._queue)

    def _add_block(self, widget: QWidget) -> None:
        self._blocks.addWidget(widget)
        self._last = widget

    def _text_block(self, kind: str) -> MarkdownSegment | ThinkingBlock:
        cls = MarkdownSegment if kind == "text" else ThinkingBlock
        if isinstance(self._last, cls):
            return self._last
        widget = cls(self.body)
        self._add_block(widget)
        return widget

    def _apply(self, event: Event) -> None:
        if isinstance(event, ToolStart):
            card = ToolCard(event.tool_id, event.name, event.input, self)
            self._tools[event.tool_id] = card
            self._add_block(card)
        elif isinstance(event, ToolUpdate):
            updated = self._tools.get(event.tool_id)
            if updated is not None:
                updated.apply_update(event.name, event.input, event.status, event.output)
        elif isinstance(event, ToolDone):
            known = self._tools.get(event.tool_id)
            if known is None:  # a result without a start: still show it
                known = ToolCard(event.tool_id, "tool", None, self)
                self._tools[event.tool_id] = known
                self._add_block(known)
            known.finish(event.output, event.is_error)
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
            note.setStyleSheet(f"color: {theme.css(theme.muted_text())}; font-style: italic;")
            self._add_block(note)
        elif isinstance(event, Diagnostic) and event.source == CAP_SOURCE:
            note = QLabel(event.message, self.body)
            note.setObjectName("capNotice")
            note.setWordWrap(True)
            note.setTextFormat(Qt.TextFormat.PlainText)
            note.setAccessibleName("Output truncated")
            note.setStyleSheet(f"color: {theme.css(theme.warning_color())};")
            self._add_block(note)
            if self._cap_label is None and not self._cap.upstream:
                self._cap_label = note
        elif isinstance(event, Diagnostic) and event.source == "stderr":
            line = event.message
            if len(line) > _STDERR_LINE_CHARS:
                line = line[:_STDERR_LINE_CHARS] + f"… ({human_size(len(line))} in all)"
            self._stderr.append(line)
            for error in self._errors:
                error.set_stderr(list(self._stderr))

    def _apply_question(self, item: _Question) -> None:
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
                card.set_status(_PENDING_TOOL.get(ending.status, "unfinished"))
        words = _STATUS_WORDS.get(ending.status, ending.status.capitalize())
        duration = format_duration(ending.duration_ms)
        limit = ending.stop_reason == STOP_MAX_ITERATIONS
        if ending.status == STATUS_INTERRUPTED:
            line = "Interrupted: Tolaria closed while this turn was running"
        elif limit:  # not a failure: the model goes on when asked (the notice above says so)
            line = "Stopped at the tool-round limit (max_iterations)"
            line += f" after {duration}" if duration else ""
        elif ending.status == STATUS_COMPLETED:
            line = f"{words} in {duration}" if duration else words
        else:
            line = f"{words} after {duration}" if duration else words
        usage = self.usage
        extra = format_usage(
            ending.input_tokens if ending.input_tokens is not None else
            (usage.input_tokens if usage else None),
            ending.output_tokens if ending.output_tokens is not None else
            (usage.output_tokens if usage else None),
            ending.cost_usd if ending.cost_usd is not None else (usage.cost_usd if usage else None))
        self.footer.setText(f"{line} · {extra}" if extra else line)
        color = theme.warning_color() if limit or ending.status in (STATUS_CANCELLED,
                                                                    STATUS_INTERRUPTED) \
            else theme.error_colors()[2] if ending.status == STATUS_FAILED else theme.muted_text()
        self.footer.setStyleSheet(f"color: {theme.css(color)};")
        self.footer.setAccessibleName(f"Turn status: {line}")
        if ending.survivors:
            names = ", ".join(f"{s.name} (pid {s.pid})" for s in ending.survivors)
            self.survivors_label.setText(f"⚠ Still running after the stop: {names}. Tolaria "
                                         "could not end these processes; end them yourself.")
            self.survivors_label.show()

    # -- inspection (tests, copy) --------------------------------------------------------------
    def text(self) -> str:
        """The answer text applied so far (what the transcript shows, in source form)."""
        return "\n\n".join(w.source_text() for w in self._widgets(MarkdownSegment))

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
