"""The Usage page's chart: one bar per day, stacked by agent (each agent its own colour), of
tokens, cost or agent time; drawn with QPainter, light and dark from the palette.

Days with nothing are drawn as empty slots, so the bars keep the calendar's rhythm; hovering
a bar says its day and each agent's figure.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from PySide6.QtCore import QPoint, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QToolTip, QWidget

from tolaria.chats.usage import agent_time, cost, tokens
from tolaria.core.store.usage import DayAgent
from tolaria.ui import theme

METRICS = ("tokens", "cost", "time")
#: Colours of the agents (hue order that keeps neighbours apart), toned for light or dark.
_HUES = (215, 28, 150, 275, 350, 55, 190, 95)
_LEFT, _BOTTOM, _TOP, _GAP = 52, 22, 8, 0.28


def agent_color(agent: str, agents: Sequence[str], dark: bool) -> QColor:
    """An agent's colour: by its place among ``agents`` (sorted), else by its name's hash."""
    index = agents.index(agent) if agent in agents else zlib.crc32(agent.encode())
    color = QColor.fromHsl(_HUES[index % len(_HUES)], 150 if dark else 170, 150 if dark else 118)
    return color


def value_of(segment: DayAgent, metric: str) -> float:
    if metric == "cost":
        return segment.cost_usd or 0.0
    if metric == "time":
        return segment.agent_ms / 1000
    return float(segment.tokens)


def metric_words(metric: str) -> Callable[[float], str]:
    if metric == "cost":
        return lambda v: cost(v)
    if metric == "time":
        return lambda v: agent_time(int(v * 1000))
    return lambda v: tokens(int(v))


@dataclass(frozen=True)
class Day:
    day: str
    segments: tuple[DayAgent, ...]


def days_of(bars: Sequence[DayAgent], first: date | None, last: date) -> list[Day]:
    """Every day from ``first`` (else the first with usage) to ``last``, with its segments."""
    by_day: dict[str, list[DayAgent]] = {}
    for bar in bars:
        by_day.setdefault(bar.day, []).append(bar)
    if first is None:
        if not by_day:
            return []
        first = date.fromisoformat(min(by_day))
    count = max(0, (last - first).days + 1)
    days = [(first + timedelta(days=n)).isoformat() for n in range(count)]
    return [Day(d, tuple(by_day.get(d, ()))) for d in days]


def _nice_ceiling(value: float) -> float:
    """1, 2, 2.5 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= value:
            return step * power
    return 10.0 * power


class UsageChart(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("usageChart")
        self.setMouseTracking(True)
        self.setMinimumHeight(170)
        self.days: list[Day] = []
        self.agents: list[str] = []
        self.measure = "tokens"
        self._names: dict[str, str] = {}

    def set_data(self, days: list[Day], agents: list[str], metric: str,
                 names: dict[str, str] | None = None) -> None:
        self.days, self.agents, self.measure = days, agents, metric
        self._names = names or {}
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(560, 200)

    def peak(self) -> float:
        return max((sum(value_of(s, self.measure) for s in d.segments) for d in self.days),
                   default=0.0)

    def _plot(self) -> QRectF:
        return QRectF(_LEFT, _TOP, max(1, self.width() - _LEFT - 4),
                      max(1, self.height() - _TOP - _BOTTOM))

    def _slot(self, index: int) -> QRectF:
        plot = self._plot()
        width = plot.width() / max(1, len(self.days))
        bar = max(2.0, width * (1 - _GAP))
        return QRectF(plot.left() + index * width + (width - bar) / 2, plot.top(), bar,
                      plot.height())

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        plot, dark = self._plot(), theme.is_dark()
        words = metric_words(self.measure)
        top = _nice_ceiling(self.peak())
        grid = theme.mix(theme.base(), theme.text(), 0.1)
        painter.setFont(self.font())
        for step in range(5):  # gridlines at 0, 1/4 … of the scale, labelled on the left
            y = plot.bottom() - plot.height() * step / 4
            painter.setPen(grid)
            painter.drawLine(int(plot.left()), int(y), int(plot.right()), int(y))
            painter.setPen(theme.muted_text())
            painter.drawText(QRectF(0, y - 8, _LEFT - 8, 16),
                             int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
                             words(top * step / 4) if step else "0")
        if not self.days:
            painter.drawText(plot, int(Qt.AlignmentFlag.AlignCenter), "No turns in this period")
            painter.end()
            return
        painter.setPen(Qt.PenStyle.NoPen)
        for index, day in enumerate(self.days):
            slot, y = self._slot(index), plot.bottom()
            for segment in sorted(day.segments, key=lambda s: self.agents.index(s.agent)
                                  if s.agent in self.agents else 0):
                height = plot.height() * value_of(segment, self.measure) / top
                if height <= 0:
                    continue
                painter.setBrush(agent_color(segment.agent, self.agents, dark))
                painter.drawRect(QRectF(slot.left(), y - height, slot.width(), height))
                y -= height
        self._day_labels(painter, plot)
        painter.end()

    def _day_labels(self, painter: QPainter, plot: QRectF) -> None:
        """A few day labels under the bars (as many as fit), the last day always."""
        painter.setPen(theme.muted_text())
        metrics = self.fontMetrics()
        label_w = metrics.horizontalAdvance("12-31") + 12
        every = max(1, math.ceil(label_w / (plot.width() / len(self.days))))
        last = len(self.days) - 1
        for index, day in enumerate(self.days):
            if (last - index) % every:
                continue
            slot = self._slot(index)
            center = slot.center().x()
            painter.drawText(QRectF(center - label_w / 2, plot.bottom() + 4, label_w, 16),
                             int(Qt.AlignmentFlag.AlignHCenter), day.day[5:])

    def day_at(self, point: QPoint) -> Day | None:
        plot = self._plot()
        if not self.days or not plot.left() <= point.x() <= plot.right():
            return None
        index = int((point.x() - plot.left()) / (plot.width() / len(self.days)))
        return self.days[min(index, len(self.days) - 1)]

    def describe(self, day: Day) -> str:
        words = metric_words(self.measure)
        lines = [day.day]
        for segment in day.segments:
            lines.append(f"{self._names.get(segment.agent, segment.agent)}: "
                         f"{words(value_of(segment, self.measure))}")
        return "\n".join(lines) if day.segments else f"{day.day}: nothing"

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        day = self.day_at(event.position().toPoint())
        if day is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(event.globalPosition().toPoint(), self.describe(day), self)
        super().mouseMoveEvent(event)
