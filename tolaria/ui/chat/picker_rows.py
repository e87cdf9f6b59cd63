"""How a row of the agent picker is drawn: the agent's name, then its one-line hint, muted, with
the command to run (the part in backticks) in a monospace font, as Zed's and Cursor's agent
menus show a next step. Section headers and plain rows are drawn as Qt draws them."""

from __future__ import annotations

import re

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QFont, QFontDatabase, QPainter
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from tolaria.ui import theme

#: The agent's name, without its hint.
NAME_ROLE = Qt.ItemDataRole.UserRole + 12
#: The agent's one-line hint ("" when it is ready).
HINT_ROLE = Qt.ItemDataRole.UserRole + 13
_BACKTICKS = re.compile(r"`([^`]+)`")


def hint_parts(hint: str) -> list[tuple[str, bool]]:
    """``hint`` split into (text, is_command) runs: the backticked parts are commands."""
    parts: list[tuple[str, bool]] = []
    position = 0
    for match in _BACKTICKS.finditer(hint):
        if match.start() > position:
            parts.append((hint[position:match.start()], False))
        parts.append((match.group(1), True))
        position = match.end()
    if position < len(hint):
        parts.append((hint[position:], False))
    return parts


class PickerRow(QStyledItemDelegate):
    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        hint = str(index.data(HINT_ROLE) or "")
        if not hint:
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        enabled = bool(opt.state & QStyle.StateFlag.State_Enabled)
        pal = opt.palette
        fg = (pal.highlightedText().color() if selected else
              pal.text().color() if enabled else theme.muted_text())
        muted = fg if selected else theme.muted_text()
        painter.save()
        rect = opt.rect.adjusted(4, 0, -8, 0)  # where Qt draws a plain row's text
        painter.setPen(fg)
        painter.setFont(opt.font)
        name = str(index.data(NAME_ROLE) or "")
        painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, name)
        x = rect.left() + painter.fontMetrics().horizontalAdvance(name) + 14
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        mono.setPointSizeF(opt.font.pointSizeF() * 0.92)
        small = QFont(opt.font)
        small.setPointSizeF(opt.font.pointSizeF() * 0.92)
        for text, command in hint_parts(hint):
            if x >= rect.right():
                break
            painter.setFont(mono if command else small)
            painter.setPen(fg if command and enabled else muted)
            width = painter.fontMetrics().horizontalAdvance(text)
            room = QRect(x, rect.top(), rect.right() - x, rect.height())
            shown = painter.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight,
                                                     room.width())
            painter.drawText(room, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             shown)
            x += width
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem,
                 index: QModelIndex | QPersistentModelIndex) -> QSize:
        size = super().sizeHint(option, index)
        return QSize(size.width(), max(size.height(), option.fontMetrics.height() + 8))
