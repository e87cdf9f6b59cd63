"""The line under the composer: agent, a spinner and elapsed time while a turn runs, then the
final duration and usage; at its end, the context meter."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from tolaria.ui import theme
from tolaria.ui.composer.context_meter import ContextMeter

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class StatusLine(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statusLine")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 0, 2, 0)
        layout.setSpacing(6)
        self._spinner = QLabel(self)
        self._spinner.setObjectName("spinner")
        theme.follow_color(self._spinner, theme.accent)
        self._spinner.hide()
        self._label = QLabel(self)
        self._label.setTextFormat(Qt.TextFormat.PlainText)  # agent names and summaries
        self._label.setObjectName("statusText")
        theme.follow_color(self._label, theme.muted_text)
        layout.addWidget(self._spinner)
        layout.addWidget(self._label, 1)
        #: How full the model's context is (where the agent says), at the line's end.
        self.context = ContextMeter(self)
        layout.addWidget(self.context)
        self._timer = QTimer(self)
        self._timer.setInterval(100)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._agent = ""
        self._summary = ""
        self._started = 0.0
        self._frame = 0
        self._verb = "Running"

    @property
    def text(self) -> str:
        return self._label.text()

    @property
    def running(self) -> bool:
        return self._timer.isActive()

    def set_idle(self, agent_name: str, summary: str | None = None) -> None:
        """Show the agent (and the last turn's summary, kept unless a new one is given)."""
        self._agent = agent_name
        if summary is not None:
            self._summary = summary
        if not self.running:
            self._show_summary()

    def _show_summary(self) -> None:
        self._label.setText(f"{self._agent} · {self._summary}" if self._summary else self._agent)

    def start(self, agent_name: str) -> None:
        self._agent = agent_name
        self._started = time.monotonic()
        self._verb = "Running"
        self._spinner.show()
        self._timer.start()
        self._on_timer_timeout()

    def stopping(self) -> None:
        self._verb = "Stopping"
        self._on_timer_timeout()

    def finish(self, summary: str) -> None:
        self._timer.stop()
        self._spinner.hide()
        self._summary = summary
        self._show_summary()

    def _on_timer_timeout(self) -> None:
        self._frame = (self._frame + 1) % len(_FRAMES)
        self._spinner.setText(_FRAMES[self._frame])
        elapsed = time.monotonic() - self._started
        self._label.setText(f"{self._agent} · {self._verb} · {elapsed:.1f} s")
