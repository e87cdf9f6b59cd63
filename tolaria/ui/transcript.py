"""The scrolling transcript of one conversation, and its frame timer.

All updates of a transcript go through one single-shot 16 ms timer: events are queued on their
turn, and each tick applies as much as fits in a small time budget. So at most ~60 renders a
second happen whatever the agent prints, and the event loop is never held for long.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from tolaria.ui import theme
from tolaria.ui.turn_view import TurnView

FRAME_MS = 16
#: Seconds of work per tick for the visible transcript, and for hidden ones (which only need to
#: keep their queues short until they are shown).
VISIBLE_BUDGET_S = 0.003
HIDDEN_BUDGET_S = 0.002
_STICKY_SLACK = 24


class TranscriptView(QScrollArea):
    #: The user answered a permission question of one of its turns: stream id, key, option id.
    permission_answer_requested = Signal(str, str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setAccessibleName("Transcript")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        content = QWidget(self)
        content.setObjectName("transcriptContent")
        # The transcript sits on the base colour (white in light themes), like a document.
        content.setBackgroundRole(QPalette.ColorRole.Base)
        content.setAutoFillBackground(True)
        self._layout = QVBoxLayout(content)
        self._layout.setContentsMargins(16, 12, 16, 12)
        self._layout.setSpacing(6)
        self._placeholder = QLabel(
            "Ask the agent something.\n\nEnter sends · Shift+Enter adds a line · "
            "Esc stops the running turn", content)
        self._placeholder.setObjectName("transcriptPlaceholder")
        self._placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._placeholder.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        self._layout.addWidget(self._placeholder, 1)
        self._layout.addStretch(0)
        self.setWidget(content)
        self._turns: dict[str, TurnView] = {}
        self._busy: dict[str, TurnView] = {}
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._sticky = True
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_scrollbar_range_changed)
        bar.valueChanged.connect(self._on_scrollbar_value_changed)

    def add_turn(self, prompt: str, agent_name: str, stream_id: str) -> TurnView:
        self._placeholder.hide()
        turn = TurnView(prompt, agent_name, stream_id, self.widget())
        turn.permission_answer_requested.connect(self.permission_answer_requested)
        self._layout.insertWidget(self._layout.count() - 1, turn)
        self._turns[stream_id] = turn
        self._sticky = True
        return turn

    def turn(self, stream_id: str) -> TurnView | None:
        return self._turns.get(stream_id)

    def turns(self) -> list[TurnView]:
        return list(self._turns.values())

    def schedule(self, turn: TurnView) -> None:
        """``turn`` has queued work: apply it on the next frame."""
        self._busy.setdefault(turn.stream_id, turn)
        if not self._timer.isActive():
            self._timer.start()

    @property
    def busy(self) -> bool:
        return bool(self._busy)

    def flush_all(self) -> None:
        """Apply everything queued now, whatever it costs (tests and screenshots)."""
        while self._busy:
            self._on_timer_timeout(budget=3600.0)

    def _on_timer_timeout(self, budget: float | None = None) -> None:
        if budget is None:
            budget = VISIBLE_BUDGET_S if self.isVisible() else HIDDEN_BUDGET_S
        deadline = time.perf_counter() + budget
        for stream_id, turn in list(self._busy.items()):
            if turn.drain(deadline):
                break  # out of time; keep the order (older turns first)
            del self._busy[stream_id]
        if self._busy:
            self._timer.start()

    def _on_scrollbar_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._sticky:
            self.verticalScrollBar().setValue(maximum)

    def _on_scrollbar_value_changed(self, value: int) -> None:
        self._sticky = value >= self.verticalScrollBar().maximum() - _STICKY_SLACK
