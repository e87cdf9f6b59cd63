"""Preferences → MCP servers: the servers every agent can be given, listed once (issue 28).

A list on the left (name, kind, which agents), the selected server's form on the right
(mcp_editor.py). Add, edit and Remove (an inline confirm) write ``settings.toml`` at once
through intents, like a custom agent's dialog; edits not saved yet are kept per server while
you switch between them. "If a server cannot start" is ``[mcp] on_failure``. Test runs the
form as it is (saved or not): elapsed time, Cancel, then the tools or the specific error.

Which servers each agent will really get (an agent that cannot take a remote server, say) is
the run-time plan of tolaria/core/mcp (the agents' forms); this page shows each server's own
agent selection; ``McpPage.plan`` is where that plan plugs in (one line per agent).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.mcp import CONTINUE, REFUSE, McpSettings
from tolaria.core.mcp.servers import STDIO, McpServer
from tolaria.ui import theme
from tolaria.ui.settings.entry_list import EntryPage, empty_or_form, entry_column
from tolaria.ui.settings.mcp_editor import McpEditor

_KEY = Qt.ItemDataRole.UserRole
#: The key of a server being added (not in the file yet).
NEW = "+new"


def summary(server: McpServer) -> str:
    """One line under the server's name: its kind, what it runs or where, who gets it."""
    if server.transport == STDIO:
        # The program's and its paths' last parts: the list is narrow, the form has the rest.
        what = " ".join(os.path.basename(a) if os.sep in a else a
                        for a in [server.command, *server.args])
        what = what if len(what) <= 48 else what[:47] + "…"
    else:
        what = f"{server.transport} · {server.url.split('://', 1)[-1].split('/', 1)[0]}"
    who = "every agent" if not server.agents else ", ".join(server.agents)
    return f"{what} · {who}" + ("" if server.enabled else " · off")


def result_text(result: Any) -> tuple[bool, str, tuple[tuple[str, str], ...]]:
    """(ok, the status line(s), the tools) of a core McpTestResult; None: cancelled."""
    if result is None:
        return False, "Test cancelled; nothing of it is left running.", ()
    ok = bool(getattr(result, "ok", False))
    elapsed = f"{float(getattr(result, 'elapsed', 0.0)):.1f} s"
    detail = str(getattr(result, "detail", "") or "").strip()
    tools = tuple(getattr(result, "tools", ()) or ())
    survivors = tuple(getattr(result, "survivors", ()) or ())
    if ok:
        lines = detail.splitlines()
        head = f"✓ Works ({elapsed})" + (f" — {lines[0]}" if lines else "")
        text = "\n".join([head, *lines[1:]])
        if not tools:
            text += "\nIt lists no tools."
    else:
        error = str(getattr(result, "error", "") or "the Test failed")
        text = f"✗ {error[:1].upper()}{error[1:]} ({elapsed})"
        tail = [line for line in detail.splitlines() if line and line not in error][-4:]
        if tail:
            text += "\nIts last output on stderr:\n" + "\n".join(tail)
    if survivors:
        text += "\n⚠ Still running after the Test: " + ", ".join(survivors)
    return ok, text, tools


class McpPage(EntryPage):
    #: Write a server: McpServer, the name it replaces (None: a new one), the server as this
    #: page loaded it (None: a new one; only the fields changed since are written).
    save_requested = Signal(object, object, object)
    #: Remove a saved server: its name.
    remove_requested = Signal(str)
    #: ``[mcp] on_failure``: "continue" or "refuse".
    on_failure_requested = Signal(str)
    #: Test a server as the form says: key (its saved name, or NEW), McpServer.
    test_requested = Signal(str, object)
    #: Stop a running Test: key.
    test_cancel_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mcpPage")
        self._saved: dict[str, McpServer] = {}
        self._pending: dict[str, McpServer] = {}
        self._agents: list[tuple[str, str]] = []
        self._testing: set[str] = set()
        self._results: dict[str, tuple[bool, str, tuple[tuple[str, str], ...]]] = {}
        self._saving: str | None = None
        self._removing: str | None = None
        self._filling = False
        #: What each agent will get of a server, as the runs will pass it: (agent name,
        #: "passed" or "not passed: why") per agent. Set by the composition root from the
        #: run-time plan (tolaria/core/mcp); None: only the server's own selection is shown.
        self.plan: Callable[[McpServer], Sequence[tuple[str, str]]] | None = None
        #: How long a Test waits for the server's answers (shown while it runs; the
        #: controller's own, set by the composition root).
        self.test_timeout = 20.0
        outer = QVBoxLayout(self)
        self.problems = QLabel(self)
        self.problems.setObjectName("mcpProblems")
        self.problems.setWordWrap(True)
        theme.follow_color(self.problems, theme.warning_color)
        self.problems.hide()
        outer.addWidget(self.problems)
        layout = QHBoxLayout()
        outer.addLayout(layout, 1)
        column = entry_column(self, list_name="mcpServerList", accessible_name="MCP servers",
                              prefix="mcp", add_text="Add server")
        self.list = column.list
        self.add_button = column.add_button
        self.remove_button = column.remove_button
        self.remove_confirm = column.remove_confirm
        layout.addLayout(column.layout)
        self.editor = McpEditor(self)
        self.editor.changed.connect(self._on_editor_changed)
        self.editor.save_requested.connect(self._on_editor_save_requested)
        self.editor.revert_requested.connect(self._on_editor_revert_requested)
        self.editor.test_requested.connect(self._on_editor_test_requested)
        self.editor.test_cancel_requested.connect(self._on_editor_test_cancel_requested)
        self.stack, self.empty = empty_or_form(
            self, self.editor, empty_name="mcpEmpty",
            empty_text="No MCP servers yet.\n\nAdd one here once, and every agent gets it in "
            "its own form: Claude Code, Codex, Gemini and the rest.")
        layout.addWidget(self.stack, 1)
        failure_row = QHBoxLayout()
        failure_row.addWidget(QLabel("If a server cannot start:", self))
        self.on_failure = QComboBox(self)
        self.on_failure.setObjectName("mcpOnFailure")
        self.on_failure.addItem("Start the run without it (the chat says why)", CONTINUE)
        self.on_failure.addItem("Do not start the run", REFUSE)
        self.on_failure.currentIndexChanged.connect(self._on_on_failure_changed)
        failure_row.addWidget(self.on_failure)
        failure_row.addStretch(1)
        outer.addLayout(failure_row)

    # -- facts --------------------------------------------------------------------------------
    def set_servers(self, settings: McpSettings, agents: Sequence[tuple[str, str]],
                    select: str | None = None) -> None:
        """(Re)fill the list from the file; unsaved edits of servers still there are kept.
        ``agents``: (id, name) of the agents a server can be given."""
        current = select or self.current_key()
        self._saved = {s.name: s for s in settings.servers}
        self._pending = {k: v for k, v in self._pending.items()
                         if k in self._saved or k == NEW}
        self._agents = list(agents)
        self.problems.setText("\n".join(f"⚠ {p}" for p in settings.problems))
        self.problems.setVisible(bool(settings.problems))
        self._filling = True
        self.on_failure.setCurrentIndex(max(self.on_failure.findData(settings.on_failure), 0))
        self._filling = False
        self._refill(current)

    def show_saved(self, name: str) -> None:
        """The server being saved is in the file now as ``name`` (set_servers follows)."""
        if self._saving is not None:
            self._pending.pop(self._saving, None)
            if self._saving in self._results:
                self._results[name] = self._results.pop(self._saving)
            self._saving = None
        self.editor.general_error.show_message("")

    def show_save_failed(self, message: str) -> None:
        self._saving = None
        self.editor.general_error.show_message(message)

    def show_test_result(self, key: str, result: Any) -> None:
        self._testing.discard(key)
        shown = result_text(result)
        if result is None:  # cancelled: nothing learnt about the server
            self._results.pop(key, None)
            if key == self.current_key():
                self.editor.show_test_result(*shown)
            return
        self._results[key] = shown
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item is not None and item.data(_KEY) == key:
                item.setText(self._label(key))
        if key == self.current_key():
            self.editor.show_test_result(*self._results[key])

    def stop_timers(self) -> None:
        self.editor.stop_timers()

    def discard_edits(self) -> None:
        """The window is opened afresh: unsaved edits and old results are forgotten."""
        self._pending.clear()
        self._results.clear()
        self._saving = None

    # -- queries ------------------------------------------------------------------------------
    def current_key(self) -> str | None:
        item = self.list.currentItem()
        value = item.data(_KEY) if item is not None else None
        return value if isinstance(value, str) else None

    def server_of(self, key: str) -> McpServer:
        return self._pending.get(key) or self._saved.get(key) or McpServer("", enabled=True)

    def testing(self, key: str) -> bool:
        return key in self._testing

    # -- internals ----------------------------------------------------------------------------
    def _keys(self) -> list[str]:
        return [*self._saved, *([NEW] if NEW in self._pending else [])]

    def _label(self, key: str) -> str:
        server = self.server_of(key)
        name = server.name or "New server"
        mark = " •" if key in self._pending and self._pending[key] != self._saved.get(key) \
            else ""
        status = ""
        if key in self._results:  # the last Test's outcome, as Zed's list shows it
            ok, _text, tools = self._results[key]
            status = f"  ✓ {len(tools)} tool{'' if len(tools) == 1 else 's'}" if ok else "  ✗ failed"
        return f"{name}{mark}{status}\n{summary(server)}"

    def _refill(self, current: str | None) -> None:
        keys = self._keys()
        self.list.blockSignals(True)
        self.list.clear()
        for key in keys:
            item = QListWidgetItem(self._label(key))
            item.setData(_KEY, key)
            self.list.addItem(item)
        self.list.blockSignals(False)
        self.stack.setCurrentIndex(1 if keys else 0)
        self.remove_button.setEnabled(bool(keys))
        if keys:
            row = keys.index(current) if current in keys else 0
            self.list.setCurrentRow(row)
            self._show(keys[row])

    def _show(self, key: str) -> None:
        server = self.server_of(key)
        saved = self._saved.get(key)
        title = server.name if saved is not None else "New MCP server"
        dirty = key in self._pending and self._pending[key] != saved
        self.editor.show_server(server, self._agents, title, dirty)
        self._show_plan(server)
        if key in self._testing:
            self.editor.show_testing(True)
        elif key in self._results:
            self.editor.show_test_result(*self._results[key])
        else:
            self.editor.show_testing(False)

    def _show_plan(self, server: McpServer) -> None:
        lines = self.plan(server) if self.plan is not None else ()
        self.editor.show_plan([f"{agent}: {line}" for agent, line in lines])

    def _on_list_current_item_changed(self, item: QListWidgetItem | None, *_: object) -> None:
        key = item.data(_KEY) if item is not None else None
        if isinstance(key, str):
            self.remove_confirm.hide()
            self._show(key)

    def _on_add_button_clicked(self) -> None:
        if NEW not in self._pending:
            self._pending[NEW] = McpServer("", command="")
        self._refill(NEW)
        self.editor.name.setFocus()

    def _on_editor_changed(self) -> None:
        key = self.current_key()
        if key is None:
            return
        server, _problems = self.editor.server()
        self._pending[key] = server
        item = self.list.currentItem()
        if item is not None:
            item.setText(self._label(key))
        self.editor.show_dirty(server != self._saved.get(key))
        self._show_plan(server)

    def _on_editor_save_requested(self) -> None:
        key = self.current_key()
        if key is None:
            return
        server, problems = self.editor.server()
        if problems:
            return
        self._pending[key] = server
        self._saving = key
        self.save_requested.emit(server, None if key == NEW else key, self._saved.get(key))

    def _on_editor_revert_requested(self) -> None:
        key = self.current_key()
        if key is None:
            return
        self._pending.pop(key, None)
        self._refill(key if key in self._saved else None)

    def _on_editor_test_requested(self) -> None:
        key = self.current_key()
        if key is None or key in self._testing:
            return
        server, problems = self.editor.server()
        if problems:
            return
        self._testing.add(key)
        self._results.pop(key, None)
        self.editor.show_test_started(self.test_timeout)
        self.test_requested.emit(key, server)

    def _on_editor_test_cancel_requested(self) -> None:
        key = self.current_key()
        if key is not None and key in self._testing:
            self.test_cancel_requested.emit(key)

    def _on_remove_button_clicked(self) -> None:
        key = self.current_key()
        if key is None:
            return
        if key == NEW:
            self._pending.pop(NEW, None)
            self._refill(None)
            return
        self._removing = key
        self.remove_confirm.ask(f"Remove the MCP server {key}? No agent gets it from the "
                                "next run on.")

    def _on_remove_confirm_accepted(self) -> None:
        key, self._removing = self._removing, None
        if key is not None:
            self._pending.pop(key, None)
            self.remove_requested.emit(key)

    def _on_on_failure_changed(self, _index: int) -> None:
        if not self._filling:
            self.on_failure_requested.emit(str(self.on_failure.currentData()))
