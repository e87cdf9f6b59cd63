"""The Shortcuts page: stop, stop all, send and new chat are recorded here (conflicts shown as you
record); every other shortcut of the window is listed below them, read-only, so this page is the
one place that answers "what is the key for…"."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QKeySequenceEdit,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.settings import Settings, shortcut_conflicts
from tolaria.ui import theme
from tolaria.ui.settings.fields import ErrorLabel
from tolaria.ui.window import keymap
from tolaria.ui.window.actions import FIXED_SHORTCUTS

#: (Settings attribute, label, object name) of the recorded shortcuts.
_KEYS = (("stop_shortcut", "Stop the current chat", "stopShortcut"),
         ("stop_all_shortcut", "Stop every chat", "stopAllShortcut"),
         ("new_chat_shortcut", "New chat", "newChatShortcut"))
SEND_KEYS = ("Enter", "Ctrl+Enter")


class ShortcutsPage(QWidget):
    #: A shortcut was changed.
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("shortcutsPage")
        self._settings = Settings()
        layout = QVBoxLayout(self)
        form = QFormLayout()
        layout.addLayout(form)
        self.edits: dict[str, QKeySequenceEdit] = {}
        for attr, label, name in _KEYS:
            row = QHBoxLayout()
            edit = QKeySequenceEdit(self)
            edit.setObjectName(name)
            edit.setAccessibleName(label)
            edit.setMaximumSequenceLength(1)
            edit.setClearButtonEnabled(True)
            edit.keySequenceChanged.connect(self._on_edit_changed)
            edit.setFixedWidth(220)
            row.addWidget(edit)
            default = QPushButton("Default", self)
            default.setObjectName(f"{name}Default")
            default.setAutoDefault(False)
            default.setToolTip(f"Use {getattr(Settings(), attr)}")
            default.clicked.connect(lambda _=False, a=attr: self._set_key(
                a, getattr(Settings(), a)))
            row.addWidget(default)
            row.addStretch(1)
            form.addRow(label, row)
            self.edits[attr] = edit
        self.send = QComboBox(self)
        self.send.setObjectName("sendShortcut")
        self.send.setAccessibleName("Send")
        self.send.addItem("Enter sends, Shift+Enter adds a line", "Enter")
        self.send.addItem("Ctrl+Enter sends, Enter adds a line", "Ctrl+Enter")
        self.send.currentIndexChanged.connect(self._on_edit_changed)
        send_row = QHBoxLayout()
        send_row.addWidget(self.send)
        send_row.addStretch(1)
        form.addRow("Send", send_row)
        hint = QLabel("Click a field and press the keys. Stop shortcuts act in the chat window "
                      "whenever no menu or dialog has the keyboard.", self)
        hint.setWordWrap(True)
        theme.follow_color(hint, theme.muted_text)
        layout.addWidget(hint)
        self.conflicts = ErrorLabel("shortcutConflicts", self)
        layout.addWidget(self.conflicts)
        fixed_label = QLabel("Other shortcuts (these cannot be changed)", self)
        fixed_label.setStyleSheet("font-weight: 600;")
        layout.addWidget(fixed_label)
        self.fixed = QTableWidget(len(FIXED_SHORTCUTS), 2, self)
        self.fixed.setObjectName("fixedShortcuts")
        self.fixed.setAccessibleName("Other shortcuts")
        self.fixed.setHorizontalHeaderLabels(["Action", "Keys"])
        self.fixed.verticalHeader().setVisible(False)
        self.fixed.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.fixed.horizontalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignLeft
                                                          | Qt.AlignmentFlag.AlignVCenter)
        self.fixed.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.fixed.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.fixed.setShowGrid(False)
        header = self.fixed.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        for line, fixed in enumerate(FIXED_SHORTCUTS):
            self.fixed.setItem(line, 0, QTableWidgetItem(fixed.label))
            self.fixed.setItem(line, 1, QTableWidgetItem(keymap.native(fixed.keys)))
        layout.addWidget(self.fixed, 1)

    def set_settings(self, settings: Settings) -> None:
        self._settings = settings
        for attr, edit in self.edits.items():
            edit.blockSignals(True)
            edit.setKeySequence(QKeySequence(getattr(settings, attr)))
            edit.blockSignals(False)
        self.send.blockSignals(True)
        self.send.setCurrentIndex(max(self.send.findData(settings.send_shortcut), 0))
        self.send.blockSignals(False)
        self.validate()

    def _set_key(self, attr: str, text: str) -> None:
        self.edits[attr].setKeySequence(QKeySequence(text))

    def apply(self, settings: Settings) -> Settings:
        """``settings`` with this page's values."""
        def key(attr: str) -> str:
            return self.edits[attr].keySequence().toString(
                QKeySequence.SequenceFormat.PortableText)

        send = self.send.currentData()
        return replace(settings, stop_shortcut=key("stop_shortcut"),
                       stop_all_shortcut=key("stop_all_shortcut"),
                       new_chat_shortcut=key("new_chat_shortcut"),
                       send_shortcut=send if isinstance(send, str) else "Enter")

    def problems(self) -> list[str]:
        settings = self.apply(self._settings)
        empty = [label for attr, label, _ in _KEYS if not getattr(settings, attr)]
        return [f"{label}: press a key (a shortcut cannot be empty)" for label in empty] + list(
            shortcut_conflicts(settings))

    def validate(self) -> bool:
        problems = self.problems()
        self.conflicts.show_message("\n".join(problems))
        return not problems

    def _on_edit_changed(self, *_: object) -> None:
        self.validate()
        self.changed.emit()
