"""The Checkpoints page of Preferences: what the turns' checkpoints take on disk per repository,
and Prune (issue 21 item 7).

Prune always takes the checkpoints of deleted chats; "also turns older than N days" adds those of
older turns still shown in chats, which then lose Revert and Rewind. Nothing is removed on the
first click: the page asks the controller what a prune would do, says it inline (what goes, what
stays) and removes only on "Remove". It emits intents; tolaria/qt/checkpoint_storage_control.py
answers with facts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tolaria.chats.checkpoint_storage import StorageRow
from tolaria.ui import theme


def shown_path(path: str) -> str:
    """A repository as the user knows it: under the home folder as ``~/...``."""
    home = str(Path.home())
    return "~" + path[len(home):] if path == home or path.startswith(home + os.sep) else path


class CheckpointsPage(QWidget):
    #: Measure again.
    refresh_requested = Signal()
    #: What would a prune remove? The age in days (or None: deleted chats only).
    prune_preview_requested = Signal(object)
    #: Remove: the same age as the preview the user confirmed.
    prune_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("checkpointsPage")
        layout = QVBoxLayout(self)
        intro = QLabel("Each turn in a git folder keeps a checkpoint before and after it, so its "
                       "changes can be reviewed and undone. They live in Tolaria's data folder, "
                       "never in your repository, and borrow the objects git already has.", self)
        intro.setWordWrap(True)
        theme.follow_color(intro, theme.muted_text)
        layout.addWidget(intro)
        self.table = QTableWidget(0, 4, self)
        self.table.setObjectName("checkpointsTable")
        self.table.setHorizontalHeaderLabels(["Repository", "Size", "Checkpoints",
                                              "Of deleted chats"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setShowGrid(False)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.setSizeAdjustPolicy(QAbstractItemView.SizeAdjustPolicy.AdjustToContents)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        header = self.table.horizontalHeader()
        header.setHighlightSections(False)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        # As tall as its rows (a scroll bar past a screenful), not a big empty box.
        layout.addWidget(self.table)
        self.total = QLabel(self)
        self.total.setObjectName("checkpointsTotal")
        layout.addWidget(self.total)
        row = QHBoxLayout()
        self.older = QCheckBox("Also turns older than", self)
        self.older.setObjectName("pruneOlderTurns")
        self.days = QSpinBox(self)
        self.days.setObjectName("pruneDays")
        self.days.setRange(0, 3650)
        self.days.setValue(30)
        self.days.setSuffix(" days")
        self.days.setEnabled(False)
        self.older.toggled.connect(self.days.setEnabled)
        self.older.toggled.connect(self._hide_confirm)
        self.days.valueChanged.connect(self._hide_confirm)
        self.prune_button = QPushButton("Prune…", self)
        self.prune_button.setObjectName("pruneCheckpoints")
        self.prune_button.setAutoDefault(False)
        self.prune_button.clicked.connect(self._on_prune_button_clicked)
        refresh = QPushButton("Refresh", self)
        refresh.setObjectName("refreshCheckpoints")
        refresh.setAutoDefault(False)
        refresh.clicked.connect(self.refresh_requested)
        row.addWidget(QLabel("Prune removes the checkpoints of deleted chats.", self))
        row.addWidget(self.older)
        row.addWidget(self.days)
        row.addStretch(1)
        row.addWidget(refresh)
        row.addWidget(self.prune_button)
        layout.addLayout(row)
        # The inline confirm: what goes, what stays; nothing is removed before "Remove".
        self.confirm = QWidget(self)
        self.confirm.setObjectName("pruneConfirm")
        confirm_row = QHBoxLayout(self.confirm)
        confirm_row.setContentsMargins(8, 6, 8, 6)
        self.confirm_text = QLabel(self.confirm)
        self.confirm_text.setObjectName("pruneConfirmText")
        self.confirm_text.setWordWrap(True)
        confirm_row.addWidget(self.confirm_text, 1)
        self.remove_button = QPushButton("Remove", self.confirm)
        self.remove_button.setObjectName("pruneRemove")
        self.remove_button.setAutoDefault(False)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        cancel = QPushButton("Cancel", self.confirm)
        cancel.setObjectName("pruneCancel")
        cancel.setAutoDefault(False)
        cancel.clicked.connect(self._hide_confirm)
        confirm_row.addWidget(self.remove_button)
        confirm_row.addWidget(cancel)
        theme.follow(self.confirm, lambda: (
            f"#pruneConfirm {{ border: 1px solid {theme.css(theme.warning_color())};"
            " border-radius: 6px; }"))
        self.confirm.setVisible(False)
        layout.addWidget(self.confirm)
        self.result = QLabel(self)
        self.result.setObjectName("pruneResult")
        self.result.setWordWrap(True)
        theme.follow_color(self.result, theme.muted_text)
        layout.addWidget(self.result)
        layout.addStretch(1)
        self._asked: object = None

    # -- facts --------------------------------------------------------------------------------
    def show_usage(self, rows: Sequence[StorageRow], total: str) -> None:
        self.table.setRowCount(len(rows))
        for n, row in enumerate(rows):
            name = shown_path(row.repo) + (f"  ({row.note})" if row.note else "")
            values = (name, row.size, str(row.checkpoints), str(row.of_deleted_chats))
            for column, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setToolTip(row.repo)
                if column:  # sizes and counts line up on the right, as numbers do
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(n, column, item)
        self.table.setVisible(bool(rows))
        self.table.setMaximumHeight(self.table.horizontalHeader().height()
                                    + 28 * min(max(len(rows), 1), 12) + 8)
        self.total.setText(f"{len(rows)} repositor{'y' if len(rows) == 1 else 'ies'}, {total} "
                           "in all." if rows else "No checkpoints yet.")

    def show_prune_plan(self, text: str, removable: int) -> None:
        """The controller's answer to a preview: say it and offer Remove (when any)."""
        self.confirm_text.setText(text)
        self.remove_button.setVisible(removable > 0)
        self.confirm.setVisible(True)
        self.result.clear()

    def show_pruned(self, text: str) -> None:
        self._hide_confirm()
        self.result.setText(text)

    # -- intents ------------------------------------------------------------------------------
    def age(self) -> int | None:
        return self.days.value() if self.older.isChecked() else None

    def _on_prune_button_clicked(self) -> None:
        self._asked = self.age()
        self.prune_preview_requested.emit(self._asked)

    def _on_remove_button_clicked(self) -> None:
        if self._asked == self.age():
            self.prune_requested.emit(self._asked)
            self.remove_button.setEnabled(False)

    def _hide_confirm(self) -> None:
        self.confirm.setVisible(False)
        self.remove_button.setEnabled(True)
