"""How a row of the conversation list looks: a chat's two lines (title with a running badge, last
activity with a "command line" tag) or a fan-out job's header, and the in-place rename field
over the title. The list itself (tolaria/ui/sidebar/sidebar.py) only fills the rows' roles.
"""

from __future__ import annotations

import time
from typing import Protocol

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QFont, QPainter
from PySide6.QtWidgets import QLineEdit, QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from tolaria.ui import theme
from tolaria.ui.sidebar.sidebar_groups import GROUP_ROLE, ID_ROLE, MEMBER_ROLE
from tolaria.ui.sidebar.sidebar_hosts import COLLAPSED_ROLE, COUNT_ROLE, HOST_ROLE


class Renamer(Protocol):
    """The list the delegate edits in (``Sidebar``): told the title the user committed."""

    def commit_rename(self, conversation_id: int, title: str) -> None: ...


SUBTITLE_ROLE = Qt.ItemDataRole.UserRole + 1
RUNNING_ROLE = Qt.ItemDataRole.UserRole + 2
#: True for a chat started by ``tolaria run`` (drawn with a "command line" badge).
COMMAND_LINE_ROLE = Qt.ItemDataRole.UserRole + 3
COMMAND_LINE_BADGE = "command line"


def relative_time(timestamp: float, now: float | None = None) -> str:
    delta = max(0.0, (now or time.time()) - timestamp)
    if delta < 60:
        return "just now"
    if delta < 3600:
        return f"{int(delta // 60)} min ago"
    if delta < 86400:
        return f"{int(delta // 3600)} h ago"
    if delta < 2 * 86400:
        return "yesterday"
    return time.strftime("%d %b %Y", time.localtime(timestamp))


class RowDelegate(QStyledItemDelegate):
    """Two lines per conversation: the title (with a running badge) and the last activity.

    Its editor is the in-place rename field over the title line; committing emits a rename
    intent instead of writing the model (the store's saved conversation updates the row)."""

    def __init__(self, sidebar: Renamer, parent: QWidget) -> None:
        super().__init__(parent)
        self._sidebar = sidebar

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem,
                     index: QModelIndex | QPersistentModelIndex) -> QWidget:
        editor = QLineEdit(parent)
        editor.setObjectName("renameEditor")
        editor.setAccessibleName("Chat name")
        editor.setFrame(True)
        font = QFont(option.font)
        font.setBold(True)  # as the title it replaces
        editor.setFont(font)
        return editor

    def setEditorData(self, editor: QWidget, index: QModelIndex | QPersistentModelIndex) -> None:
        if isinstance(editor, QLineEdit):
            editor.setText(str(index.data(Qt.ItemDataRole.DisplayRole) or ""))
            editor.selectAll()

    def setModelData(self, editor: QWidget, model: QAbstractItemModel,
                     index: QModelIndex | QPersistentModelIndex) -> None:
        if isinstance(editor, QLineEdit):
            self._sidebar.commit_rename(int(index.data(ID_ROLE)), editor.text())

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem,
                             index: QModelIndex | QPersistentModelIndex) -> None:
        line = option.fontMetrics.height()
        top = option.rect.top() + 2
        editor.setGeometry(option.rect.left() + 6, top, option.rect.width() - 12, line + 8)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        if index.data(GROUP_ROLE):
            _paint_group_header(painter, opt, str(index.data(GROUP_ROLE)))
            return
        if index.data(HOST_ROLE):
            _paint_host_header(painter, opt, str(index.data(HOST_ROLE)),
                               bool(index.data(COLLAPSED_ROLE)), int(index.data(COUNT_ROLE) or 0))
            return
        if index.data(MEMBER_ROLE):
            opt.rect = opt.rect.adjusted(14, 0, 0, 0)
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, opt, painter, widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        pal = opt.palette
        fg = pal.highlightedText().color() if selected else pal.text().color()
        muted = fg if selected else theme.muted_text()
        rect = opt.rect.adjusted(10, 5, -10, -5)
        line = opt.fontMetrics.height()
        running = bool(index.data(RUNNING_ROLE))
        painter.save()
        badge_width = 0
        if running:
            small = painter.font()
            small.setPointSizeF(small.pointSizeF() * 0.85)
            painter.setFont(small)
            label = "running"
            width = painter.fontMetrics().horizontalAdvance(label) + 12
            badge = QRect(rect.right() - width, rect.top() + 1, width, line - 2)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(Qt.PenStyle.NoPen)
            # On a selected (highlight-coloured) row the badge swaps its colours to stay visible.
            badge_fill = pal.highlightedText().color() if selected else theme.accent()
            badge_text = theme.accent() if selected else pal.highlightedText().color()
            painter.setBrush(badge_fill)
            painter.drawRoundedRect(badge, 7, 7)
            painter.setPen(badge_text)
            painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, label)
            badge_width = width + 6
            painter.setFont(opt.font)
        title_font = opt.font
        title_font.setBold(True)
        painter.setFont(title_font)
        painter.setPen(fg)
        title_rect = QRect(rect.left(), rect.top(), rect.width() - badge_width, line)
        title = str(index.data(Qt.ItemDataRole.DisplayRole))
        if index.data(MEMBER_ROLE) and " · " in title:  # under its job's header: the agent
            title = title.rsplit(" · ", 1)[1]
        title = painter.fontMetrics().elidedText(title, Qt.TextElideMode.ElideRight,
                                                 title_rect.width())
        painter.drawText(title_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         title)
        title_font.setBold(False)
        painter.setFont(title_font)
        painter.setPen(muted)
        sub_rect = QRect(rect.left(), rect.top() + line + 2, rect.width(), line)
        if index.data(COMMAND_LINE_ROLE):  # an outlined tag, quieter than the running badge
            small = painter.font()
            small.setPointSizeF(small.pointSizeF() * 0.8)
            painter.setFont(small)
            width = painter.fontMetrics().horizontalAdvance(COMMAND_LINE_BADGE) + 10
            tag = QRect(sub_rect.right() - width, sub_rect.top() + 1, width, line - 2)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(tag, 6, 6)
            painter.drawText(tag, Qt.AlignmentFlag.AlignCenter, COMMAND_LINE_BADGE)
            painter.setFont(title_font)
            sub_rect.setRight(tag.left() - 6)
        subtitle = painter.fontMetrics().elidedText(str(index.data(SUBTITLE_ROLE) or ""),
                                                    Qt.TextElideMode.ElideRight, sub_rect.width())
        painter.drawText(sub_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         subtitle)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem,
                 index: QModelIndex | QPersistentModelIndex) -> QSize:
        if index.data(HOST_ROLE):
            return QSize(180, option.fontMetrics.height() + 16)
        if index.data(GROUP_ROLE):
            return QSize(180, option.fontMetrics.height() + 10)
        return QSize(180, option.fontMetrics.height() * 2 + 14)


def _paint_heading(painter: QPainter, opt: QStyleOptionViewItem, text: str, *,
                   scale: float, top: int, tail: str = "") -> None:
    """A heading row's small, muted, bold text (elided), and ``tail`` at its right."""
    font = QFont(opt.font)
    font.setPointSizeF(font.pointSizeF() * scale)
    font.setBold(True)
    painter.setFont(font)
    painter.setPen(theme.muted_text())
    rect = opt.rect.adjusted(10, top, -10, 0)
    tail_width = painter.fontMetrics().horizontalAdvance(tail) + 4 if tail else 0
    shown = painter.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight,
                                             rect.width() - tail_width)
    painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, shown)
    if tail:
        painter.drawText(rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, tail)


def _paint_group_header(painter: QPainter, opt: QStyleOptionViewItem, label: str) -> None:
    """A fan-out job's header row: small, muted, the job's prompt, agents and status."""
    painter.save()
    _paint_heading(painter, opt, f"JOB · {label}", scale=0.85, top=4)
    painter.restore()


def _paint_host_header(painter: QPainter, opt: QStyleOptionViewItem, host: str,
                       collapsed: bool, count: int) -> None:
    """A host's heading: a fold arrow, the host's name, and (folded) how many chats it holds;
    a thin rule above it separates it from the chats before."""
    painter.save()
    if opt.state & QStyle.StateFlag.State_HasFocus:  # the keyboard is on it (Left/Right fold)
        painter.setPen(opt.palette.highlight().color())
        painter.drawRoundedRect(opt.rect.adjusted(4, 4, -5, -1), 4, 4)
    painter.setPen(theme.border())
    painter.drawLine(opt.rect.left() + 8, opt.rect.top() + 2, opt.rect.right() - 8,
                     opt.rect.top() + 2)
    _paint_heading(painter, opt, f"{'▸' if collapsed else '▾'}  {host}", scale=0.9, top=6,
                   tail=f"{count}" if collapsed and count else "")
    painter.restore()
