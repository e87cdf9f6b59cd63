"""Preferences → Hosts: the machines chats can run on (issue 25), ``[hosts."NAME"]`` of
settings.toml, listed once: how each is reached (your ssh, or a command such as ``docker exec
-i``), and the per-host environment and agent programs. Add, edit and Remove (an inline
confirm) write the file at once through intents, like an MCP server; edits not saved yet are
kept per host while you switch between them."""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QListWidgetItem, QWidget

from tolaria.config.remote_hosts_edit import HostEntry
from tolaria.ui.settings.entry_list import EntryPage, empty_or_form, entry_column
from tolaria.ui.settings.host_editor import HostEditor

_KEY = Qt.ItemDataRole.UserRole
#: The key of a host being added (not in the file yet).
NEW = "+new"


def summary(entry: HostEntry) -> str:
    """One line under the host's name: how it is reached, what it overrides."""
    how = f"command: {entry.command}" if entry.command else "ssh"
    parts = [how if len(how) <= 40 else how[:39] + "…"]
    if entry.programs:
        parts.append(", ".join(agent for agent, _ in entry.programs))
    if entry.env:
        parts.append(f"{len(entry.env)} env")
    return " · ".join(parts)


class HostsPage(EntryPage):
    #: Write a host: HostEntry, the name it replaces (None: a new one).
    save_requested = Signal(object, object)
    #: Remove a saved host: its name.
    remove_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hostsPage")
        self._saved: dict[str, HostEntry] = {}
        self._pending: dict[str, HostEntry] = {}
        self._saving: str | None = None
        self._removing: str | None = None
        self._shown: str | None = None
        layout = QHBoxLayout(self)
        column = entry_column(self, list_name="hostList", accessible_name="Hosts",
                              prefix="host", add_text="Add host")
        self.list = column.list
        self.add_button = column.add_button
        self.remove_button = column.remove_button
        self.remove_confirm = column.remove_confirm
        layout.addLayout(column.layout)
        self.editor = HostEditor(self)
        self.editor.changed.connect(self._on_editor_changed)
        self.editor.save_requested.connect(self._on_editor_save_requested)
        self.stack, self.empty = empty_or_form(
            self, self.editor, empty_name="hostsEmpty",
            empty_text="No hosts set up yet.\n\nA chat can run on any host your ssh reaches (its "
            "Host menu → Other host…). Add one here to give it a name, its own ssh settings, "
            "environment or agent programs.")
        layout.addWidget(self.stack, 1)

    # -- facts --------------------------------------------------------------------------------
    def set_hosts(self, hosts: Mapping[str, HostEntry], select: str | None = None) -> None:
        """(Re)fill the list from the file; unsaved edits of hosts still there are kept."""
        current = select or self.current_key()
        self._keep_edits()
        self._saved = dict(hosts)
        self._pending = {k: v for k, v in self._pending.items() if k in self._saved or k == NEW}
        self._refill(current)

    def discard_edits(self) -> None:
        self._pending.clear()
        self._shown = None

    def show_saved(self, name: str) -> None:
        if self._saving is not None:
            self._pending.pop(self._saving, None)
            self._saving = None
            self._shown = None  # the form is what was saved: nothing of it to keep
        self.editor.general_error.show_message("")

    def show_save_failed(self, problems: list[tuple[str, str]]) -> None:
        self._saving = None
        self.editor.show_problems(problems)

    def current_key(self) -> str | None:
        item = self.list.currentItem()
        return str(item.data(_KEY)) if item is not None else None

    # -- internals ----------------------------------------------------------------------------
    def _keep_edits(self) -> None:
        """The shown form's edits stay with its host while another is shown."""
        key = self._shown
        if key is None:
            return
        entry = self.editor.entry()
        if key == NEW or entry != self._saved.get(key):
            self._pending[key] = entry

    def _refill(self, current: str | None) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        keys = [*self._saved, *([NEW] if NEW in self._pending else [])]
        for key in keys:
            entry = self._pending.get(key) or self._saved[key]
            name = entry.name or "New host" if key == NEW else key
            edited = " •" if key in self._pending and key != NEW else ""
            item = QListWidgetItem(f"{name}{edited}\n{summary(entry)}")
            item.setData(_KEY, key)
            self.list.addItem(item)
        self.list.blockSignals(False)
        self._shown = None
        if keys:
            row = keys.index(current) if current in keys else 0
            self.list.setCurrentRow(row)
            self._show(keys[row])
        else:
            self.stack.setCurrentIndex(0)
        self.remove_button.setEnabled(bool(keys))

    def _show(self, key: str) -> None:
        entry = self._pending.get(key) or self._saved.get(key) or HostEntry("")
        title = "New host" if key == NEW else key
        self.editor.set_entry(entry, title)
        self._shown = key
        self.stack.setCurrentIndex(1)

    def _on_list_current_item_changed(self, current: QListWidgetItem | None,
                                      _previous: QListWidgetItem | None) -> None:
        self._keep_edits()
        if current is not None:
            self._show(str(current.data(_KEY)))

    def _on_add_button_clicked(self) -> None:
        self._keep_edits()
        self._pending.setdefault(NEW, HostEntry(""))
        self._refill(NEW)
        self.editor.edits["name"].setFocus()

    def _on_editor_changed(self) -> None:
        key = self._shown
        if key is not None and key != NEW:
            item = self.list.currentItem()
            if item is not None:
                entry = self.editor.entry()
                edited = " •" if entry != self._saved.get(key) else ""
                item.setText(f"{key}{edited}\n{summary(entry)}")

    def _on_editor_save_requested(self) -> None:
        key = self._shown
        if key is None:
            return
        self._saving = key
        self._pending[key] = self.editor.entry()
        self.save_requested.emit(self.editor.entry(), None if key == NEW else key)

    def _on_remove_button_clicked(self) -> None:
        key = self.current_key()
        if key is None:
            return
        if key == NEW:  # never saved: nothing to ask
            self._pending.pop(NEW, None)
            self._shown = None
            self._refill(None)
            return
        self._removing = key
        self.remove_confirm.ask(f"Remove the host {key} from the settings? Chats on it keep "
                                "its name and reach it as a plain ssh destination.")

    def _on_remove_confirm_accepted(self) -> None:
        key, self._removing = self._removing, None
        if key is not None:
            self._pending.pop(key, None)
            self.remove_requested.emit(key)
