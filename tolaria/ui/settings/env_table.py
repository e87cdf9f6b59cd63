"""An agent's extra environment variables as a two-column table.

Values of secret-looking names (``is_secret_name``: KEY, TOKEN, SECRET, PASSWORD...) are shown
masked and read-only until "Show secret values" is ticked; the real value lives only in the
item's data, never in a log line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.agents import is_secret_name, mask

_VALUE = Qt.ItemDataRole.UserRole


class EnvTable(QWidget):
    #: A name or value was edited, or a row added or removed.
    changed = Signal()

    def __init__(self, parent: QWidget | None = None, *, name: str = "env",
                 what: str = "Environment variables", add_text: str = "Add variable",
                 masker: Callable[[str], str] = mask) -> None:
        """``name``: the object names' stem (``envTable``, ``envAddButton``...); ``what``
        and ``add_text``: the table's accessible name and its Add button (HTTP headers use
        the same table); ``masker``: how a secret value is shown."""
        super().__init__(parent)
        self._mask = masker
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, 2, self)
        self.table.setObjectName(f"{name}Table")
        self.table.setAccessibleName(what)
        self.table.setHorizontalHeaderLabels(["Name", "Value (may use ${VAR})"])
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setColumnWidth(0, 180)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 10)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setMinimumHeight(96)
        self.table.setMaximumHeight(150)
        self.table.itemChanged.connect(self._on_table_item_changed)
        layout.addWidget(self.table)
        row = QHBoxLayout()
        self.add_button = QPushButton(add_text, self)
        self.add_button.setObjectName(f"{name}AddButton")
        self.add_button.setAutoDefault(False)
        self.add_button.clicked.connect(self._on_add_button_clicked)
        self.remove_button = QPushButton("Remove", self)
        self.remove_button.setObjectName(f"{name}RemoveButton")
        self.remove_button.setAutoDefault(False)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.reveal = QCheckBox("Show secret values", self)
        self.reveal.setObjectName(f"{name}Reveal")
        self.reveal.toggled.connect(self._on_reveal_toggled)
        row.addWidget(self.add_button)
        row.addWidget(self.remove_button)
        row.addStretch(1)
        row.addWidget(self.reveal)
        layout.addLayout(row)
        self._filling = False

    # -- facts --------------------------------------------------------------------------------
    def set_env(self, env: Mapping[str, str]) -> None:
        self._filling = True
        self.table.setRowCount(0)
        for name, value in env.items():
            self._append(name, value)
        self._filling = False

    def env(self) -> list[tuple[str, str]]:
        """Every row as typed (names stripped), in order; validation happens elsewhere."""
        rows = []
        for row in range(self.table.rowCount()):
            name_item, value_item = self.table.item(row, 0), self.table.item(row, 1)
            name = name_item.text().strip() if name_item is not None else ""
            value = value_item.data(_VALUE) if value_item is not None else ""
            if name or value:
                rows.append((name, str(value or "")))
        return rows

    def displayed_value(self, row: int) -> str:
        item = self.table.item(row, 1)
        return item.text() if item is not None else ""

    # -- internals ----------------------------------------------------------------------------
    def _append(self, name: str, value: str) -> int:
        row = self.table.rowCount()
        self.table.insertRow(row)
        self.table.setItem(row, 0, QTableWidgetItem(name))
        value_item = QTableWidgetItem()
        value_item.setData(_VALUE, value)
        self.table.setItem(row, 1, value_item)
        self._render(row)
        return row

    def _render(self, row: int) -> None:
        name_item, value_item = self.table.item(row, 0), self.table.item(row, 1)
        if name_item is None or value_item is None:
            return
        value = str(value_item.data(_VALUE) or "")
        hidden = is_secret_name(name_item.text().strip()) and not self.reveal.isChecked()
        was = self._filling
        self._filling = True
        value_item.setText(self._mask(value) if hidden and value else value)
        flags = value_item.flags()
        if hidden:
            flags &= ~Qt.ItemFlag.ItemIsEditable
            value_item.setToolTip("Secret-looking name: tick \"Show secret values\" to edit")
        else:
            flags |= Qt.ItemFlag.ItemIsEditable
            value_item.setToolTip("")
        value_item.setFlags(flags)
        self._filling = was

    def _on_table_item_changed(self, item: QTableWidgetItem) -> None:
        if self._filling:
            return
        if item.column() == 1:
            item.setData(_VALUE, item.text())
        self._render(item.row())
        self.changed.emit()

    def _on_add_button_clicked(self) -> None:
        self._filling = True
        row = self._append("", "")
        self._filling = False
        self.table.setCurrentCell(row, 0)
        item = self.table.item(row, 0)
        if item is not None:
            self.table.editItem(item)

    def _on_remove_button_clicked(self) -> None:
        rows = sorted({index.row() for index in self.table.selectedIndexes()}, reverse=True)
        if not rows and self.table.currentRow() >= 0:
            rows = [self.table.currentRow()]
        for row in rows:
            self.table.removeRow(row)
        if rows:
            self.changed.emit()

    def _on_reveal_toggled(self, _on: bool) -> None:
        for row in range(self.table.rowCount()):
            self._render(row)
