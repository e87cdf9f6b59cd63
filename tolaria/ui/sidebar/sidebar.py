"""The list of conversations: new, search, rename in place, delete with an inline confirm, a
running badge and the last activity.

No stock dialogs: rename edits the title where it is (Enter commits, Esc cancels) and delete asks
in a bar under the list, the way Zed and Claude desktop do it.
"""

from __future__ import annotations

from PySide6.QtCore import (
    QEvent,
    QObject,
    QPoint,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence, QMouseEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QBoxLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.core.store.db import ORIGIN_COMMAND_LINE, Conversation
from tolaria.ui import theme
from tolaria.ui.chat.host_control import InlineEntry
from tolaria.ui.sidebar.new_chat_host import NewChatHostButton
from tolaria.ui.sidebar.sidebar_groups import ID_ROLE, SidebarGroups
from tolaria.ui.sidebar.sidebar_hosts import HOST_ROLE, SidebarHosts
from tolaria.ui.sidebar.sidebar_rows import (  # re-exported: the list's API
    COMMAND_LINE_ROLE,
    RUNNING_ROLE,
    SUBTITLE_ROLE,
    RowDelegate,
    relative_time,
)
from tolaria.ui.transcript.markdown import plain_tooltip
from tolaria.ui.window.actions import DELETE_SHORTCUT, RENAME_SHORTCUT, focus_is_editable
from tolaria.ui.window.inline_confirm import DeleteConfirm

__all__ = ["COMMAND_LINE_ROLE", "RUNNING_ROLE", "SUBTITLE_ROLE", "Sidebar", "relative_time"]


class Sidebar(SidebarHosts, SidebarGroups, QWidget):
    #: The user wants a new conversation.
    new_chat_requested = Signal()
    #: The user wants a new conversation on this host ("" for this computer).
    new_chat_on_host_requested = Signal(str)
    #: The user selected a conversation: id.
    open_requested = Signal(int)
    #: The user pressed Enter on a conversation (go to its composer): id.
    activate_requested = Signal(int)
    #: Rename a conversation: id, new title.
    rename_requested = Signal(int, str)
    #: Delete a conversation (confirmed by the user): id.
    delete_requested = Signal(int)
    #: Remove a chat's git worktree with it (emitted just before its delete_requested): id.
    remove_worktree_requested = Signal(int)
    #: Stop showing an inline confirm and give the keys back to the chat.
    confirm_closed = Signal()
    #: A host's group was folded or unfolded: the folded hosts (kept across restarts).
    folding_changed = Signal(list)

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
        # "▾": a new chat on another host (or this computer), typed in the line under it.
        self.new_host_entry = InlineEntry(self)
        entry_layout = self.new_host_entry.layout()
        if isinstance(entry_layout, QBoxLayout):  # narrow column: label, field, error
            entry_layout.setDirection(QBoxLayout.Direction.TopToBottom)
        self.new_host_button = NewChatHostButton(self.new_host_entry, self)
        self.new_host_button.new_chat_on_host_requested.connect(self.new_chat_on_host_requested)
        top = QHBoxLayout()
        top.setSpacing(2)
        top.addWidget(self.new_button, 1)
        top.addWidget(self.new_host_button)
        layout.addLayout(top)
        layout.addWidget(self.new_host_entry)
        self.search = QLineEdit(self)
        self.search.setObjectName("chatSearch")
        self.search.setAccessibleName("Search chats")
        self.search.setPlaceholderText("Search chats")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._on_search_text_changed)
        self.search.returnPressed.connect(self._on_search_return_pressed)
        self.search.installEventFilter(self)
        layout.addWidget(self.search)
        self.list = QListWidget(self)
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Conversations")
        self.list.setItemDelegate(RowDelegate(self, self.list))
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.list.setUniformItemSizes(True)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._on_list_custom_context_menu_requested)
        self.list.currentItemChanged.connect(self._on_list_current_item_changed)
        self.list.itemActivated.connect(self._on_list_item_activated)
        self.list.viewport().installEventFilter(self)  # a click on a host heading folds it
        self.list.installEventFilter(self)  # Left / Right / Space on a host heading
        self._init_hosts()
        layout.addWidget(self.list, 1)
        self.no_match = QLabel("No chat matches.", self)
        self.no_match.setObjectName("noChatMatches")
        theme.follow_color(self.no_match, theme.muted_text)
        self.no_match.hide()
        layout.addWidget(self.no_match)
        self.confirm = DeleteConfirm(self)
        #: chat id -> its git worktree (tolaria/chats/worktrees.py).
        self._worktrees: dict[int, str] = {}
        self.confirm.confirmed.connect(self._on_confirm_confirmed)
        self.confirm.cancelled.connect(self.confirm_closed)
        layout.addWidget(self.confirm)
        # Window-wide: F2 and Del work wherever the focus is (Del only outside text fields).
        self.rename_action = QAction("&Rename…", self.list)
        self.rename_action.setShortcut(QKeySequence(RENAME_SHORTCUT))
        self.rename_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.rename_action.triggered.connect(self._on_rename_action_triggered)
        self.delete_action = QAction("&Delete…", self.list)
        self.delete_action.setShortcut(QKeySequence(DELETE_SHORTCUT))
        self.delete_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.delete_action.triggered.connect(self._on_delete_action_triggered)
        self.list.addAction(self.rename_action)
        self.list.addAction(self.delete_action)
        self._items: dict[int, QListWidgetItem] = {}
        self._conversations: dict[int, Conversation] = {}
        self._running: dict[int, int] = {}
        #: (label, member conversation ids) of each group (fan-out job), oldest first.
        self._groups: list[tuple[str, list[int]]] = []
        self._headers: list[QListWidgetItem] = []
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
        self._conversations[conversation.id] = conversation
        self._place(conversation.id, conversation.host or "")  # new, or its host changed
        self._refresh(conversation.id)
        self._apply_filter()

    def conversation_deleted(self, conversation_id: int) -> None:
        item = self._items.pop(conversation_id, None)
        self._conversations.pop(conversation_id, None)
        self._running.pop(conversation_id, None)
        if item is not None:
            self.list.takeItem(self.list.row(item))
            self._forget_host(conversation_id)
        if any(conversation_id in ids for _label, ids in self._groups):
            self.set_groups(self._groups)
        if self.confirm.conversation_id == conversation_id:
            self.confirm.hide()
        self._apply_filter()

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
        if conversation.host:  # runs on another machine
            subtitle += f" · on {conversation.host}"
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
        chat = item.data(ID_ROLE) if item is not None else None  # a host heading: none
        return int(chat) if chat is not None else None

    def ids(self) -> list[int]:
        return [int(item.data(ID_ROLE)) for item in self._rows() if item.data(ID_ROLE) is not None]

    def visible_ids(self) -> list[int]:
        """The chats the search leaves shown, top to bottom (Ctrl+Tab and Ctrl+1..9 use them)."""
        return [int(item.data(ID_ROLE)) for item in self._rows()
                if item.data(ID_ROLE) is not None and not item.isHidden()]

    # -- search ---------------------------------------------------------------------------------
    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """In the search field: Down goes into the list; Esc clears the search (rather than
        stopping the chat's run) while there is something to clear."""
        kind = event.type()
        if watched is self.list.viewport() and kind == QEvent.Type.MouseButtonPress:
            assert isinstance(event, QMouseEvent)
            item = self.list.itemAt(event.position().toPoint())
            if item is not None and item.data(HOST_ROLE):
                return True  # the chat shown stays the current row; the release folds
        if watched is self.list.viewport() and kind == QEvent.Type.MouseButtonRelease:
            assert isinstance(event, QMouseEvent)
            if event.button() == Qt.MouseButton.LeftButton \
                    and self._host_header_clicked(event.position().toPoint()):
                return True
        if watched is self.list and kind == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            if self._host_key(event):
                return True
        if watched is self.search and kind in (QEvent.Type.KeyPress,
                                               QEvent.Type.ShortcutOverride):
            assert isinstance(event, QKeyEvent)
            if event.key() == Qt.Key.Key_Escape and self.search.text():
                event.accept()
                if kind == QEvent.Type.KeyPress:
                    self.search.clear()
                    self.activate_requested.emit(self.current_id() or -1)
                return True
            if event.key() == Qt.Key.Key_Down and kind == QEvent.Type.KeyPress:
                shown = self.visible_ids()
                if shown:
                    self.select(shown[0])
                    self.list.setFocus(Qt.FocusReason.TabFocusReason)
                return True
        return super().eventFilter(watched, event)

    def _on_search_text_changed(self, _text: str) -> None:
        self._apply_filter()

    def _apply_filter(self) -> None:
        words = self.search.text().lower().split()
        shown = 0
        for conversation_id, item in self._items.items():
            conversation = self._conversations.get(conversation_id)
            title = (conversation.title if conversation else item.text()).lower()
            hide = not all(word in title for word in words)
            item.setHidden(hide)
            shown += not hide
        for header in self._headers:
            header.setHidden(all(m.isHidden() for m in self._members_under(header)))
        self._filter_hosts(bool(words))
        self.no_match.setVisible(bool(words) and shown == 0)

    def _on_search_return_pressed(self) -> None:
        """Enter in the search field opens the first match and goes to its composer."""
        shown = self.visible_ids()
        if shown:
            self.select(shown[0])
            self.activate_requested.emit(shown[0])

    def _on_list_current_item_changed(self, current: QListWidgetItem | None,
                                      _previous: QListWidgetItem | None) -> None:
        if current is not None and current.data(ID_ROLE) is not None:  # not a host heading
            self.open_requested.emit(int(current.data(ID_ROLE)))

    def _on_list_item_activated(self, item: QListWidgetItem) -> None:
        if item.data(ID_ROLE) is not None:
            self.activate_requested.emit(int(item.data(ID_ROLE)))

    def _folding_changed(self) -> None:
        self.folding_changed.emit(self.folded_hosts())

    # -- rename / delete (dialogs use open(): never a nested event loop) -----------------------
    def _on_list_custom_context_menu_requested(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None or item.data(ID_ROLE) is None:  # a heading (job, host): no chat menu
            return
        self.list.setCurrentItem(item)
        menu = QMenu(self)
        menu.addAction(self.rename_action)
        menu.addAction(self.delete_action)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self._menu = menu
        menu.popup(self.list.viewport().mapToGlobal(pos))

    def _on_rename_action_triggered(self) -> None:
        item = self.list.currentItem()
        if item is None or item.data(ID_ROLE) is None:  # a host heading is not renamed
            return
        if item.isHidden():  # filtered away by the search: show it again to edit it in place
            self.search.clear()
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
        self.list.scrollToItem(item)
        self.list.editItem(item)

    def renaming(self) -> QLineEdit | None:
        """The in-place rename field, while it is open."""
        editor = self.list.findChild(QLineEdit, "renameEditor")
        return editor if editor is not None and editor.isVisible() else None

    def commit_rename(self, conversation_id: int, title: str) -> None:
        conversation = self._conversations.get(conversation_id)
        title = " ".join(title.split())
        if conversation is not None and title and title != conversation.title:
            self.rename_requested.emit(conversation_id, title)

    def _on_delete_action_triggered(self) -> None:
        if focus_is_editable():  # Del in a text field deletes a character, never a chat
            return
        conversation_id = self.current_id()
        conversation = self._conversations.get(conversation_id) if conversation_id else None
        if conversation is None:
            return
        self.confirm.ask_delete(conversation, running=conversation.id in self._running,
                                worktree=self._worktrees.get(conversation.id, ""))

    def set_worktree(self, conversation_id: int, path: str) -> None:
        """The chat's git worktree ("" none): its delete confirm offers to remove it."""
        if path:
            self._worktrees[conversation_id] = path
        else:
            self._worktrees.pop(conversation_id, None)

    def _on_confirm_confirmed(self, conversation_id: int) -> None:
        if self.confirm.remove_worktree.isVisibleTo(self.confirm) \
                and self.confirm.remove_worktree.isChecked():
            self.remove_worktree_requested.emit(conversation_id)
        self.delete_requested.emit(conversation_id)
        self.confirm_closed.emit()
