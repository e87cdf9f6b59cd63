"""The list of conversations: new, rename, delete, a running badge and the last activity."""

from __future__ import annotations

import time

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction, QKeySequence, QPainter
from PySide6.QtWidgets import (
    QInputDialog,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from tolaria.core.store.db import ORIGIN_COMMAND_LINE, Conversation
from tolaria.ui import theme
from tolaria.ui.markdown import plain_tooltip

ID_ROLE = Qt.ItemDataRole.UserRole
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


class _Delegate(QStyledItemDelegate):
    """Two lines per conversation: the title (with a running badge) and the last activity."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
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
        title = painter.fontMetrics().elidedText(str(index.data(Qt.ItemDataRole.DisplayRole)),
                                                 Qt.TextElideMode.ElideRight, title_rect.width())
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
        return QSize(180, option.fontMetrics.height() * 2 + 14)


class Sidebar(QWidget):
    #: The user wants a new conversation.
    new_chat_requested = Signal()
    #: The user selected a conversation: id.
    open_requested = Signal(int)
    #: The user pressed Enter on a conversation (go to its composer): id.
    activate_requested = Signal(int)
    #: Rename a conversation: id, new title.
    rename_requested = Signal(int, str)
    #: Delete a conversation (confirmed by the user): id.
    delete_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 0, 8)
        self.new_button = QPushButton("New chat", self)
        self.new_button.setObjectName("newChatButton")
        self.new_button.setAccessibleName("New chat")
        self.new_button.setToolTip(f"New chat ({QKeySequence(QKeySequence.StandardKey.New).toString(QKeySequence.SequenceFormat.NativeText)})")
        self.new_button.clicked.connect(self.new_chat_requested)
        layout.addWidget(self.new_button)
        self.list = QListWidget(self)
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Conversations")
        self.list.setItemDelegate(_Delegate(self.list))
        self.list.setUniformItemSizes(True)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._on_list_custom_context_menu_requested)
        self.list.currentItemChanged.connect(self._on_list_current_item_changed)
        self.list.itemActivated.connect(self._on_list_item_activated)
        layout.addWidget(self.list, 1)
        self.rename_action = QAction("&Rename…", self.list)
        self.rename_action.setShortcut(QKeySequence(Qt.Key.Key_F2))
        self.rename_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        self.rename_action.triggered.connect(self._on_rename_action_triggered)
        self.delete_action = QAction("&Delete…", self.list)
        self.delete_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        self.delete_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        self.delete_action.triggered.connect(self._on_delete_action_triggered)
        self.list.addAction(self.rename_action)
        self.list.addAction(self.delete_action)
        self._items: dict[int, QListWidgetItem] = {}
        self._conversations: dict[int, Conversation] = {}
        self._running: dict[int, int] = {}
        self._dialog: QWidget | None = None
        self._menu: QMenu | None = None
        self._clock = QTimer(self)
        self._clock.setInterval(30_000)
        self._clock.timeout.connect(self._refresh_all)
        self._clock.start()

    # -- facts ----------------------------------------------------------------------------------
    def conversation_saved(self, conversation: Conversation) -> None:
        item = self._items.get(conversation.id)
        if item is None:
            item = QListWidgetItem()
            item.setData(ID_ROLE, conversation.id)
            self._items[conversation.id] = item
            self.list.blockSignals(True)
            self.list.insertItem(0, item)
            self.list.blockSignals(False)
        self._conversations[conversation.id] = conversation
        self._refresh(conversation.id)

    def conversation_deleted(self, conversation_id: int) -> None:
        item = self._items.pop(conversation_id, None)
        self._conversations.pop(conversation_id, None)
        self._running.pop(conversation_id, None)
        if item is not None:
            self.list.takeItem(self.list.row(item))

    def set_running(self, conversation_id: int, running: bool) -> None:
        count = self._running.get(conversation_id, 0) + (1 if running else -1)
        if count > 0:
            self._running[conversation_id] = count
        else:
            self._running.pop(conversation_id, None)
        self._refresh(conversation_id)

    def _refresh_all(self) -> None:
        for conversation_id in self._items:
            self._refresh(conversation_id)

    def _refresh(self, conversation_id: int) -> None:
        item = self._items.get(conversation_id)
        conversation = self._conversations.get(conversation_id)
        if item is None or conversation is None:
            return
        running = conversation_id in self._running
        when = relative_time(conversation.updated_at)
        subtitle = f"{when} · {conversation.agent}"
        item.setText(conversation.title)
        item.setData(SUBTITLE_ROLE, subtitle)
        item.setData(RUNNING_ROLE, running)
        headless = conversation.origin == ORIGIN_COMMAND_LINE
        item.setData(COMMAND_LINE_ROLE, headless)
        origin = "\nstarted from the command line (tolaria run)" if headless else ""
        item.setToolTip(plain_tooltip(
            f"{conversation.title}\n{subtitle}\n{conversation.cwd or ''}".strip() + origin))
        item.setData(Qt.ItemDataRole.AccessibleTextRole,
                     f"{conversation.title}, {'running' if running else 'last activity ' + when}"
                     + (", from the command line" if headless else ""))

    # -- selection ------------------------------------------------------------------------------
    def select(self, conversation_id: int) -> None:
        item = self._items.get(conversation_id)
        if item is not None and self.list.currentItem() is not item:
            self.list.setCurrentItem(item)

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return int(item.data(ID_ROLE)) if item is not None else None

    def ids(self) -> list[int]:
        return [int(self.list.item(i).data(ID_ROLE)) for i in range(self.list.count())]

    def _on_list_current_item_changed(self, current: QListWidgetItem | None,
                                      _previous: QListWidgetItem | None) -> None:
        if current is not None:
            self.open_requested.emit(int(current.data(ID_ROLE)))

    def _on_list_item_activated(self, item: QListWidgetItem) -> None:
        self.activate_requested.emit(int(item.data(ID_ROLE)))

    # -- rename / delete (dialogs use open(): never a nested event loop) -----------------------
    def _on_list_custom_context_menu_requested(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        self.list.setCurrentItem(item)
        menu = QMenu(self)
        menu.addAction(self.rename_action)
        menu.addAction(self.delete_action)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self._menu = menu
        menu.popup(self.list.viewport().mapToGlobal(pos))

    def _on_rename_action_triggered(self) -> None:
        conversation_id = self.current_id()
        conversation = self._conversations.get(conversation_id) if conversation_id else None
        if conversation is None:
            return
        dialog = QInputDialog(self)
        dialog.setObjectName("renameDialog")
        dialog.setWindowTitle("Rename chat")
        dialog.setLabelText("New name:")
        dialog.setTextValue(conversation.title)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.textValueSelected.connect(
            lambda title: self.rename_requested.emit(conversation.id, title))
        self._dialog = dialog
        dialog.open()

    def _on_delete_action_triggered(self) -> None:
        conversation_id = self.current_id()
        conversation = self._conversations.get(conversation_id) if conversation_id else None
        if conversation is None:
            return
        box = QMessageBox(QMessageBox.Icon.Question, "Delete chat",
                          f"Delete “{conversation.title}” and its transcript?", parent=self)
        box.setObjectName("deleteDialog")
        box.setTextFormat(Qt.TextFormat.PlainText)  # the title is prompt text
        if conversation.id in self._running:
            box.setInformativeText("Its running turn will be stopped first.")
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def on_finished(_result: int) -> None:
            if box.clickedButton() is delete:
                self.delete_requested.emit(conversation.id)

        box.finished.connect(on_finished)
        self._dialog = box
        box.open()
