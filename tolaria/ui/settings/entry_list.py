"""The left column and the right stack that Preferences' list pages share (Hosts, MCP servers):
a list of entries with Add and Remove (an inline confirm) under it, and on the right either a
muted "nothing here yet" text or the selected entry's form, scrolled."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QLabel,
    QListWidget,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from tolaria.ui import theme
from tolaria.ui.settings.fields import column_button, scrolled
from tolaria.ui.window.inline_confirm import InlineConfirm


@dataclass(frozen=True)
class EntryColumn:
    layout: QVBoxLayout
    list: QListWidget
    add_button: QPushButton
    remove_button: QPushButton
    remove_confirm: InlineConfirm


class EntryPage(QWidget):
    """What a list page answers: the list's current item changed, Add, Remove, and Remove
    confirmed."""

    _on_list_current_item_changed: Callable[..., None]
    _on_add_button_clicked: Callable[[], None]
    _on_remove_button_clicked: Callable[[], None]
    _on_remove_confirm_accepted: Callable[[], None]


def entry_column(page: EntryPage, *, list_name: str, accessible_name: str, prefix: str,
                 add_text: str) -> EntryColumn:
    """The list (``list_name``) with "``add_text``" and Remove under it, connected to the page's
    handlers; the buttons and the confirm are named ``{prefix}AddButton``,
    ``{prefix}RemoveButton``, ``{prefix}RemoveConfirm``."""
    parent: QWidget = page
    column = QVBoxLayout()
    entries = QListWidget(parent)
    entries.setObjectName(list_name)
    entries.setAccessibleName(accessible_name)
    entries.setMinimumWidth(220)
    entries.setMaximumWidth(280)
    entries.setWordWrap(True)
    column.addWidget(entries, 1)
    add = column_button(parent, add_text, f"{prefix}AddButton", column)
    remove = column_button(parent, "Remove", f"{prefix}RemoveButton", column)
    confirm = InlineConfirm(f"{prefix}RemoveConfirm", "Remove", parent=parent)
    column.addWidget(confirm)
    entries.currentItemChanged.connect(page._on_list_current_item_changed)
    add.clicked.connect(page._on_add_button_clicked)
    remove.clicked.connect(page._on_remove_button_clicked)
    confirm.accepted.connect(page._on_remove_confirm_accepted)
    return EntryColumn(column, entries, add, remove, confirm)


def empty_or_form(parent: QWidget, form: QWidget, *, empty_text: str,
                  empty_name: str) -> tuple[QStackedWidget, QLabel]:
    """A stack showing the muted ``empty_text`` (index 0) or ``form`` scrolled (index 1)."""
    empty = QLabel(empty_text, parent)
    empty.setObjectName(empty_name)
    empty.setWordWrap(True)
    empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
    theme.follow_color(empty, theme.muted_text)
    stack = QStackedWidget(parent)
    stack.addWidget(empty)
    stack.addWidget(scrolled(form, parent))
    return stack, empty
