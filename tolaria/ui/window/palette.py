"""The command palette (Ctrl+K or Ctrl+Shift+P): every window action with its shortcut, a fuzzy filter, Enter runs.

A popup, like Zed's and VS Code's: typing narrows the list, Up/Down move, Enter runs the action
after the popup has closed (so the action sees the keyboard free), Esc or a click outside closes
it. Disabled actions are listed greyed, so the palette also says what cannot be done right now.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QAction, QFont, QKeyEvent, QPainter
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from tolaria.ui import theme
from tolaria.ui.window.actions import plain_text, shortcut_text

_ACTION_ROLE = Qt.ItemDataRole.UserRole
_NAME_ROLE = Qt.ItemDataRole.UserRole + 1
_KEYS_ROLE = Qt.ItemDataRole.UserRole + 2
#: Rows shown before the list scrolls.
_ROWS = 10


def fuzzy_score(query: str, text: str) -> int | None:
    """``None`` unless every character of ``query`` appears in ``text`` in order; higher is a
    better match (consecutive characters and word starts count more, as in editors' palettes)."""
    query = query.lower().replace(" ", "")
    text_l = text.lower()
    if not query:
        return 0
    score = 0
    position = -1
    previous = -2
    for char in query:
        found = text_l.find(char, position + 1)
        if found < 0:
            return None
        score += 1
        if found == previous + 1:
            score += 3
        if found == 0 or not text_l[found - 1].isalnum():
            score += 2
        previous = position = found
    return score - len(text_l) // 20


class _Row(QStyledItemDelegate):
    """A command's name on the left, its shortcut on the right in a muted key cap."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        enabled = bool(opt.state & QStyle.StateFlag.State_Enabled)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if selected:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(opt.palette.highlight())
            painter.drawRoundedRect(opt.rect.adjusted(2, 1, -2, -1), 6, 6)
        fg = (opt.palette.highlightedText().color() if selected else
              opt.palette.text().color() if enabled else theme.muted_text())
        rect = opt.rect.adjusted(12, 0, -12, 0)
        keys = str(index.data(_KEYS_ROLE) or "")
        keys_width = 0
        if keys:
            small = QFont(opt.font)
            small.setPointSizeF(small.pointSizeF() * 0.9)
            painter.setFont(small)
            metrics = painter.fontMetrics()
            keys_width = metrics.horizontalAdvance(keys) + 14
            cap = QRect(rect.right() - keys_width, rect.center().y() - metrics.height() // 2 - 2,
                        keys_width, metrics.height() + 4)
            painter.setPen(fg if selected else theme.muted_text())
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(cap, 4, 4)
            painter.drawText(cap, Qt.AlignmentFlag.AlignCenter, keys)
            painter.setFont(opt.font)
        painter.setPen(fg)
        name_rect = rect.adjusted(0, 0, -(keys_width + 12), 0)
        name = painter.fontMetrics().elidedText(str(index.data(_NAME_ROLE) or ""),
                                                Qt.TextElideMode.ElideRight, name_rect.width())
        painter.drawText(name_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         name)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem,
                 index: QModelIndex | QPersistentModelIndex) -> QSize:
        return QSize(200, option.fontMetrics.height() + 14)


class CommandPalette(QFrame):
    """A popup listing ``actions``; runs the chosen one."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("commandPalette")
        self.setAccessibleName("Command palette")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        theme.follow(self, lambda: (
            f"#commandPalette {{ border: 1px solid {theme.css(theme.muted_text())}; "
            f"border-radius: 8px; }}"
            "#paletteField { padding: 6px 8px; border-radius: 6px; }"
            "#paletteList { border: none; }"))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        self.field = QLineEdit(self)
        self.field.setObjectName("paletteField")
        self.field.setAccessibleName("Type a command")
        self.field.setPlaceholderText("Type a command…")
        self.field.textChanged.connect(self._on_field_text_changed)
        self.field.installEventFilter(self)
        layout.addWidget(self.field)
        self.list = QListWidget(self)
        self.list.setObjectName("paletteList")
        self.list.setAccessibleName("Commands")
        self.list.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.list.setItemDelegate(_Row(self.list))
        self.list.setUniformItemSizes(True)
        self.list.itemActivated.connect(self._on_list_item_activated)
        self.list.itemClicked.connect(self._on_list_item_activated)
        layout.addWidget(self.list, 1)
        self.empty = QLabel("No command matches.", self)
        self.empty.setObjectName("paletteEmpty")
        theme.follow_color(self.empty, theme.muted_text)
        self.empty.hide()
        layout.addWidget(self.empty)
        self._actions: list[QAction] = []

    def open_with(self, actions: Sequence[QAction]) -> None:
        """Show the palette over the top of the parent window, listing ``actions``."""
        self._actions = [a for a in actions if a.isVisible()]
        self.field.blockSignals(True)
        self.field.clear()
        self.field.blockSignals(False)
        self._fill("")
        parent = self.parentWidget()
        assert parent is not None
        width = min(560, max(360, parent.width() - 80))
        self.resize(width, self.sizeHint().height())
        top_left = parent.mapToGlobal(parent.rect().topLeft())
        self.move(top_left.x() + (parent.width() - width) // 2, top_left.y() + 60)
        self.show()
        self.field.setFocus()

    def visible_texts(self) -> list[str]:
        """The listed commands as "name<TAB>shortcut", best match first."""
        return [self.list.item(i).text() for i in range(self.list.count())]

    def sizeHint(self) -> QSize:
        """As tall as ten rows, so the palette does not jump while you type."""
        layout = self.layout()
        extra = 16
        if layout is not None:
            margins = layout.contentsMargins()
            extra = margins.top() + margins.bottom() + layout.spacing()
        row = self.list.fontMetrics().height() + 14
        return QSize(560, self.field.sizeHint().height() + row * _ROWS + extra + 8)

    def _fill(self, query: str) -> None:
        scored: list[tuple[int, int, QAction]] = []
        for order, action in enumerate(self._actions):
            score = fuzzy_score(query, plain_text(action))
            if score is not None:
                scored.append((-score, order, action))
        scored.sort(key=lambda entry: (entry[0], entry[1]))
        self.list.clear()
        for _score, _order, action in scored:
            keys = shortcut_text(action)
            item = QListWidgetItem(f"{plain_text(action)}\t{keys}" if keys else plain_text(action))
            item.setData(_ACTION_ROLE, action)
            item.setData(_NAME_ROLE, plain_text(action))
            item.setData(_KEYS_ROLE, keys)
            item.setData(Qt.ItemDataRole.AccessibleTextRole,
                         f"{plain_text(action)}, {keys}" if keys else plain_text(action))
            if not action.isEnabled():
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
                item.setToolTip("Not available right now")
            self.list.addItem(item)
        self.empty.setVisible(not scored)
        self._select_first_enabled(0, 1)

    def _select_first_enabled(self, start: int, step: int) -> None:
        row = start
        while 0 <= row < self.list.count():
            if self.list.item(row).flags() & Qt.ItemFlag.ItemIsEnabled:
                self.list.setCurrentRow(row)
                return
            row += step

    def _on_field_text_changed(self, text: str) -> None:
        self._fill(text)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.field and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            key = event.key()
            if key in (Qt.Key.Key_Down, Qt.Key.Key_Up):
                step = 1 if key == Qt.Key.Key_Down else -1
                self._select_first_enabled(self.list.currentRow() + step, step)
                return True
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                item = self.list.currentItem()
                if item is not None:
                    self._on_list_item_activated(item)
                return True
            if key == Qt.Key.Key_Escape:
                self.hide()
                return True
        return super().eventFilter(watched, event)

    def _on_list_item_activated(self, item: QListWidgetItem) -> None:
        action = item.data(_ACTION_ROLE)
        if not isinstance(action, QAction) or not action.isEnabled():
            return
        self.hide()  # first: the action must find the keyboard free of popups
        action.trigger()
