"""The context meter at the end of the status line: how full the model's context was at the
last request ("42k / 200k" and a thin bar), where the agent reports it (Claude, Codex); its
tooltip says the exact figures and the plan's rate limits the CLI last reported.

It follows the chat's ``Usage`` events, live and from the stored turns: a Usage that says
nothing about the context leaves what is shown; another agent in the chat clears it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QWidget

from tolaria.chats.usage import tokens
from tolaria.core.events import Event, Usage
from tolaria.core.ratelimits import describe
from tolaria.ui import theme

#: Past these shares of the window the bar turns amber, then red (a compaction is near).
WARN, FULL = 0.8, 0.95
_BAR_W, _BAR_H, _GAP = 44, 5, 6


def last_context(events: Iterable[Event]) -> Usage | None:
    """The newest Usage of ``events`` that says anything about the context or the limits."""
    found = None
    for event in events:
        if isinstance(event, Usage) and (event.context_tokens is not None
                                         or event.context_window is not None
                                         or event.rate_limits):
            found = event
    return found


class ContextMeter(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("contextMeter")
        self.used: int | None = None
        self.context_window: int | None = None
        self.rate_limits: list[dict[str, Any]] = []
        self.hide()

    # -- facts ---------------------------------------------------------------------------------
    def feed(self, usage: Usage) -> None:
        """A Usage of this chat's agent: what it says of the context replaces what was shown."""
        if usage.context_tokens is not None:
            self.used = usage.context_tokens
        if usage.context_window is not None:
            self.context_window = usage.context_window
        if isinstance(usage.rate_limits, list):
            self.rate_limits = [w for w in usage.rate_limits if isinstance(w, dict)]
        self._refresh()

    def load(self, turns: Sequence[Sequence[Event]]) -> None:
        """The stored turns of a chat opened (oldest first): the newest that said."""
        for events in reversed(turns):
            usage = last_context(events)
            if usage is not None:
                self.feed(usage)
                return

    def clear(self) -> None:
        self.used = self.context_window = None
        self.rate_limits = []
        self._refresh()

    @property
    def fraction(self) -> float | None:
        if self.used is None or not self.context_window:
            return None
        return min(1.0, self.used / self.context_window)

    @property
    def text(self) -> str:
        if self.used is None:
            return ""
        if not self.context_window:
            return f"{tokens(self.used)} in context"
        return f"{tokens(self.used)} / {tokens(self.context_window)}"

    # -- drawing -------------------------------------------------------------------------------
    def _refresh(self) -> None:
        visible = self.used is not None or bool(self.rate_limits)
        self.setVisible(visible)
        tips = []
        if self.used is not None:
            share = f" ({100 * self.fraction:.0f} %)" if self.fraction is not None else ""
            of = f" of {self.context_window:,}" if self.context_window else ""
            tips.append(f"Context: {self.used:,}{of} tokens{share} at the last request")
        tips += [describe(w) for w in self.rate_limits]
        self.setToolTip("\n".join(tips))
        self.setAccessibleName("Context used: " + (self.text or "not reported"))
        self.updateGeometry()
        self.update()

    def _label(self) -> str:
        if self.used is not None:
            return self.text
        limit = max(self.rate_limits, key=lambda w: w.get("used_percent") or 0, default=None)
        used = limit.get("used_percent") if limit else None
        return f"limit {used:.0f} %" if isinstance(used, int | float) else "limits"

    def sizeHint(self) -> QSize:
        width = self.fontMetrics().horizontalAdvance(self._label())
        bar = _BAR_W + _GAP if self.fraction is not None else 0
        return QSize(bar + width + 2, max(self.fontMetrics().height(), 12))

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def bar_color(self) -> QColor:
        fraction = self.fraction or 0.0
        if fraction >= FULL:
            return theme.error_colors()[2]
        if fraction >= WARN:
            return theme.warning_color()
        return theme.accent()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        x = 0.0
        fraction = self.fraction
        if fraction is not None:
            top = (self.height() - _BAR_H) / 2
            track = QRectF(0, top, _BAR_W, _BAR_H)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.mix(theme.base(), theme.text(), 0.14))
            painter.drawRoundedRect(track, _BAR_H / 2, _BAR_H / 2)
            if fraction > 0:
                painter.setBrush(self.bar_color())
                painter.drawRoundedRect(QRectF(0, top, max(_BAR_H, _BAR_W * fraction), _BAR_H),
                                        _BAR_H / 2, _BAR_H / 2)
            x = _BAR_W + _GAP
        painter.setPen(theme.muted_text())
        painter.drawText(QRectF(x, 0, self.width() - x, self.height()),
                         int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
                         self._label())
        painter.end()
