"""The header of a message: who speaks (an initial in a circle, the name), when (relative on
hover), and the message's actions (flat text buttons: Copy, Edit, Retry)."""

from __future__ import annotations

import time
import zlib
from datetime import datetime

from PySide6.QtCore import QEvent, QRect, Qt
from PySide6.QtGui import QColor, QFont, QHelpEvent, QPainter, QPaintEvent, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QToolTip, QWidget

from tolaria.ui import theme
from tolaria.ui.transcript.cards.style import bold_font, set_tone, small_font

AVATAR_PX = 20
#: Hues of agent avatars (a stable pick per name); "You" uses the accent colour.
_HUES = (210, 265, 160, 25, 330, 190, 45, 290)


def relative_time(then: float, now: float | None = None) -> str:
    """'just now', '5 minutes ago', 'yesterday', '3 days ago', or the date."""
    seconds = max(0.0, (time.time() if now is None else now) - then)
    if seconds < 45:
        return "just now"
    for unit, size in (("minute", 60), ("hour", 3600)):
        count = round(seconds / size)
        if count < (60 if unit == "minute" else 24):
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    days = round(seconds / 86400)
    if days == 1:
        return "yesterday"
    if days < 7:
        return f"{days} days ago"
    return datetime.fromtimestamp(then).strftime("%-d %b %Y")


def short_time(then: float, now: float | None = None) -> str:
    """The clock time today, else the day and time."""
    moment, today = datetime.fromtimestamp(then), datetime.fromtimestamp(
        time.time() if now is None else now)
    if moment.date() == today.date():
        return moment.strftime("%H:%M")
    return moment.strftime("%-d %b, %H:%M")


class Avatar(QWidget):
    """An initial on a coloured disc: who speaks, without icon files."""

    def __init__(self, name: str, parent: QWidget | None = None, *, user: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("avatar")
        self.setFixedSize(AVATAR_PX, AVATAR_PX)
        self.name = name
        self.user = user

    def color(self) -> QColor:
        if self.user:
            return theme.accent()
        hue = _HUES[zlib.crc32(self.name.encode()) % len(_HUES)]
        return QColor.fromHsl(hue, 150, 95 if theme.is_dark() else 110)

    def paintEvent(self, _event: QPaintEvent) -> None:
        # One picture per look (palette, name's colour and initial, font, screen scale), made
        # once: a transcript shows the same few avatars on every turn, painted every frame.
        initial = (self.name.strip()[:1] or "?").upper()
        font = self.font()
        ratio = self.devicePixelRatioF()
        key = ("avatar", self.user, self.name if not self.user else "", initial, font.key(),
               ratio)
        picture = theme.derived(key, lambda: self._picture(initial, ratio))
        painter = QPainter(self)
        painter.drawPixmap(0, 0, picture)
        painter.end()

    def _picture(self, initial: str, ratio: float) -> QPixmap:
        picture = QPixmap(round(AVATAR_PX * ratio), round(AVATAR_PX * ratio))
        picture.setDevicePixelRatio(ratio)
        picture.fill(Qt.GlobalColor.transparent)
        painter = QPainter(picture)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(self.color())
        painter.drawEllipse(QRect(0, 0, AVATAR_PX, AVATAR_PX))
        font = QFont(self.font())
        font.setBold(True)
        font.setPointSizeF(max(6.0, theme.body_point_size() * 0.8))
        painter.setFont(font)
        painter.setPen(QColor("#ffffff"))
        painter.drawText(QRect(0, 0, AVATAR_PX, AVATAR_PX), Qt.AlignmentFlag.AlignCenter, initial)
        painter.end()
        return picture


class TimeLabel(QLabel):
    """The time of a message; hovering says how long ago, worked out at that moment."""

    def __init__(self, when: float, parent: QWidget | None = None) -> None:
        super().__init__(short_time(when), parent)
        self.setObjectName("when")
        self.when = when
        self.setFont(small_font(self))
        set_tone(self, "muted")

    def tooltip_text(self) -> str:
        stamp = datetime.fromtimestamp(self.when).strftime("%A %-d %B %Y, %H:%M:%S")
        return f"{relative_time(self.when)} · {stamp}"

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            QToolTip.showText(event.globalPos(), self.tooltip_text(), self)
            return True
        return super().event(event)


class MessageHeader(QWidget):
    """Avatar, name, time, then the actions at the right."""

    def __init__(self, name: str, when: float, parent: QWidget | None = None, *,
                 user: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("messageHeader")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.avatar = Avatar(name, self, user=user)
        row.addWidget(self.avatar)
        self.name = QLabel(name, self)
        self.name.setObjectName("author")
        self.name.setTextFormat(Qt.TextFormat.PlainText)
        self.name.setFont(bold_font(self.name))
        row.addWidget(self.name)
        self.time = TimeLabel(when, self)
        row.addWidget(self.time)
        row.addStretch(1)
        self._row = row

    def action(self, text: str, tip: str, name: str) -> QToolButton:
        """A flat text action at the right of the header."""
        button = QToolButton(self)
        button.setObjectName(name)
        button.setText(text)
        button.setToolTip(tip)
        button.setAccessibleName(tip)
        button.setAutoRaise(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        set_tone(button, "muted")
        self._row.addWidget(button)
        return button
