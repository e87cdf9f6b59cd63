"""The list that floats over the composer while ``@`` or ``/`` is typed: files and folders to
mention, or commands to run.

It never takes the focus (the composer keeps it and forwards Up, Down, Enter, Tab and Esc), so
typing goes on while it shows. Painted by hand: a title, up to ``VISIBLE_ROWS`` rows (a main
text, and a muted second text: a file's folder, a command's description), a key hint.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRect, QRectF, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QMouseEvent, QPainter, QPaintEvent, QWheelEvent
from PySide6.QtWidgets import QWidget

from tolaria.ui import theme

VISIBLE_ROWS = 8
_PAD = 6
_RADIUS = 8.0


@dataclass(frozen=True)
class Suggestion:
    #: What the row shows first (a file's name, ``/stop``).
    text: str
    #: Muted, after it (a file's folder, a command's description).
    detail: str = ""
    #: ``file``, ``folder``, ``tolaria`` (a command of Tolaria's) or ``agent`` (the agent's).
    kind: str = "file"
    #: What choosing the row means (a path, a command name).
    value: str = ""
    #: A short tag at the right edge (``project``, ``user``...).
    tag: str = ""


_GLYPHS = {"file": "▢", "folder": "▸", "tolaria": "›", "agent": "/"}


class SuggestionList(QWidget):
    #: A row was clicked: its index.
    activated = Signal(int)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("suggestionList")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setMouseTracking(True)
        self._rows: list[Suggestion] = []
        self._current = 0
        self._top = 0
        self._title = ""
        self._hint = ""
        self._empty = ""
        self.hide()

    # -- content --------------------------------------------------------------------------------
    def set_rows(self, rows: list[Suggestion], title: str, hint: str = "",
                 empty: str = "No matches") -> None:
        self._rows = rows
        self._title = title
        self._hint = hint
        self._empty = empty
        self._current = 0
        self._top = 0
        self.setAccessibleName(title)
        self.update()

    def rows(self) -> list[Suggestion]:
        return list(self._rows)

    @property
    def current(self) -> int:
        return self._current

    def current_row(self) -> Suggestion | None:
        return self._rows[self._current] if 0 <= self._current < len(self._rows) else None

    def move(self, by: int) -> None:  # type: ignore[override]
        """Select the row ``by`` rows down (up when negative), wrapping round."""
        if not self._rows:
            return
        self._current = (self._current + by) % len(self._rows)
        if self._current < self._top:
            self._top = self._current
        elif self._current >= self._top + VISIBLE_ROWS:
            self._top = self._current - VISIBLE_ROWS + 1
        self.update()

    # -- geometry -------------------------------------------------------------------------------
    def _row_height(self) -> int:
        return QFontMetrics(self.font()).height() + 10

    def _small(self) -> QFont:
        font = QFont(self.font())
        font.setPointSizeF(max(6.0, theme.body_point_size() * 0.88))
        return font

    def _band(self) -> int:
        return QFontMetrics(self._small()).height() + 8

    def wanted_height(self) -> int:
        shown = max(1, min(VISIBLE_ROWS, len(self._rows)))
        return 2 * _PAD + 2 * self._band() + shown * self._row_height()

    def place_over(self, anchor: QWidget) -> None:
        """Show just above ``anchor`` (the composer), as wide as it."""
        parent = self.parentWidget()
        if parent is None:
            return
        top_left = anchor.mapTo(parent, QPoint(0, 0))
        height = min(self.wanted_height(), max(80, top_left.y() - 8))
        self.setGeometry(top_left.x(), top_left.y() - height - 6, anchor.width(), height)
        self.raise_()
        self.show()

    def _row_rect(self, shown: int) -> QRect:
        y = _PAD + self._band() + shown * self._row_height()
        return QRect(_PAD, y, self.width() - 2 * _PAD, self._row_height())

    # -- painting and mouse ---------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = theme.palette()
        dark = theme.is_dark(pal)
        fill = theme.card_background() if not dark else theme.mix(theme.base(), theme.text(), 0.06)
        painter.setPen(theme.border())
        painter.setBrush(fill)
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5),
                                _RADIUS, _RADIUS)
        small = self._small()
        band = self._band()
        painter.setFont(small)
        painter.setPen(theme.muted_text())
        painter.drawText(QRect(_PAD + 6, _PAD, self.width() - 2 * _PAD - 12, band),
                         Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                         self._title)
        if not self._rows:
            painter.drawText(self._row_rect(0).adjusted(8, 0, 0, 0),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                             self._empty)
        for shown, index in enumerate(range(self._top, min(len(self._rows),
                                                              self._top + VISIBLE_ROWS))):
            self._paint_row(painter, self._rows[index], self._row_rect(shown),
                            index == self._current)
        painter.setFont(small)
        painter.setPen(theme.muted_text())
        painter.drawText(QRect(_PAD + 6, self.height() - _PAD - band, self.width() - 2 * _PAD - 12,
                               band), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                         self._hint)

    def _paint_row(self, painter: QPainter, row: Suggestion, rect: QRect, current: bool) -> None:
        if current:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.mix(theme.base(), theme.accent(), 0.18))
            painter.drawRoundedRect(QRectF(rect), 5, 5)
        metrics = QFontMetrics(self.font())
        x = rect.x() + 8
        glyph = _GLYPHS.get(row.kind, "")
        painter.setFont(self.font())
        painter.setPen(theme.accent() if row.kind in ("folder", "tolaria", "agent")
                       else theme.muted_text())
        painter.drawText(QRect(x, rect.y(), 16, rect.height()), Qt.AlignmentFlag.AlignCenter,
                         glyph)
        x += 22
        tag_width = 0
        if row.tag:
            small = self._small()
            painter.setFont(small)
            tag_width = QFontMetrics(small).horizontalAdvance(row.tag) + 12
            painter.setPen(theme.muted_text())
            painter.drawText(QRect(rect.right() - tag_width, rect.y(), tag_width - 6,
                                   rect.height()),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, row.tag)
            painter.setFont(self.font())
        room = rect.right() - tag_width - x - 6
        main = metrics.elidedText(row.text, Qt.TextElideMode.ElideMiddle, room)
        painter.setPen(theme.text())
        painter.drawText(QRect(x, rect.y(), room, rect.height()),
                         Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, main)
        used = metrics.horizontalAdvance(main) + 12
        if row.detail and room - used > 30:
            painter.setPen(theme.muted_text())
            detail = metrics.elidedText(row.detail, Qt.TextElideMode.ElideLeft
                                        if row.kind in ("file", "folder")
                                        else Qt.TextElideMode.ElideRight, room - used)
            painter.drawText(QRect(x + used, rect.y(), room - used, rect.height()),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, detail)

    def _index_at(self, pos: QPoint) -> int:
        for shown in range(min(VISIBLE_ROWS, len(self._rows) - self._top)):
            if self._row_rect(shown).contains(pos):
                return self._top + shown
        return -1

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        index = self._index_at(event.position().toPoint())
        if index >= 0 and index != self._current:
            self._current = index
            self.update()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        index = self._index_at(event.position().toPoint())
        if index >= 0:
            self.activated.emit(index)
        event.accept()

    def wheelEvent(self, event: QWheelEvent) -> None:
        self.move(-1 if event.angleDelta().y() > 0 else 1)
        event.accept()
