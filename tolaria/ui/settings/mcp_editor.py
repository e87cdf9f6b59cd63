"""The form of one MCP server: a local program (stdio: command, arguments, environment) or a
remote endpoint (streamable HTTP or SSE: URL, headers), enabled, which agents get it, and its
Test (elapsed time, Cancel, the tools it lists with their descriptions, or what is wrong).

Values of secret-looking environment variables and headers (a token, ``Authorization``) are
masked like the rest of Preferences (env_table.py). Arguments are typed on one line, split
like a shell would (never run by one). Every field is checked as you type and shows its own
message (tolaria/config/mcp_edit.py's ``server_problems``).
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.agents import join_args, mask, split_args
from tolaria.config.mcp_edit import server_problems
from tolaria.core.mcp.servers import HTTP, SSE, STDIO, McpServer
from tolaria.ui import theme
from tolaria.ui.settings.env_table import EnvTable
from tolaria.ui.settings.fields import (
    ErrorLabel,
    PathField,
    error_text_color,
    muted,
    title_label,
    with_error_label,
)

FIELDS = ("name", "command", "args", "env", "url", "headers", "agents")
_ID = Qt.ItemDataRole.UserRole
#: Under the agent selection while no per-agent plan is known.
AGENT_NOTE = ("Each agent gets it in its own form (its command-line flag or config); one that "
              "cannot take this kind of server says so before a run.")
#: Tools shown after a Test; the rest are counted.
_SHOWN_TOOLS = 60


class McpEditor(QWidget):
    #: A field was edited (the page keeps the pending server).
    changed = Signal()
    #: Write this server (the form is valid).
    save_requested = Signal()
    #: Forget the unsaved edits of this server.
    revert_requested = Signal()
    #: Test the server as the form says (saved or not).
    test_requested = Signal()
    #: Stop the running Test (the server's whole process tree).
    test_cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mcpEditor")
        self._filling = False
        self.errors: dict[str, ErrorLabel] = {}
        self._rows: dict[str, QWidget] = {}
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.title = title_label(self, "mcpTitle")
        outer.addWidget(self.title)
        self.form = QFormLayout()
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        outer.addLayout(self.form)
        self.name = QLineEdit(self)
        self.name.setObjectName("mcpName")
        self.name.setPlaceholderText("e.g. git (letters, digits, _ and -)")
        self.name.textEdited.connect(self._on_field_edited)
        self.form.addRow("Name", self._with_error(self.name, "name"))
        self.transport = QComboBox(self)
        self.transport.setObjectName("mcpTransport")
        self.transport.addItem("Local program (stdio)", STDIO)
        self.transport.addItem("Remote: streamable HTTP", HTTP)
        self.transport.addItem("Remote: SSE (older servers)", SSE)
        self.transport.currentIndexChanged.connect(self._on_transport_changed)
        self.form.addRow("Kind", self.transport)
        self.command = PathField("mcpCommand", "e.g. uvx, npx or /path/to/server",
                                 folder=False, parent=self)
        self.command.edited.connect(self._on_field_edited)
        self.form.addRow("Command", self._with_error(self.command, "command"))
        self.args = QLineEdit(self)
        self.args.setObjectName("mcpArgs")
        self.args.setPlaceholderText("e.g. mcp-server-git --repository . (split like a shell, "
                                     "never run by one)")
        self.args.textEdited.connect(self._on_field_edited)
        self.form.addRow("Arguments", self._with_error(self.args, "args"))
        self.env = EnvTable(self, name="mcpEnv")
        self.env.changed.connect(self._on_field_edited)
        self.form.addRow("Environment", self._with_error(self.env, "env"))
        self.url = QLineEdit(self)
        self.url.setObjectName("mcpUrl")
        self.url.setPlaceholderText("https://example.com/mcp")
        self.url.textEdited.connect(self._on_field_edited)
        self.form.addRow("URL", self._with_error(self.url, "url"))
        self.headers = EnvTable(self, name="mcpHeaders", what="HTTP headers",
                                add_text="Add header", masker=mask_header)
        self.headers.changed.connect(self._on_field_edited)
        self.form.addRow("Headers", self._with_error(self.headers, "headers"))
        self.enabled = QCheckBox("Give this server to the agents below", self)
        self.enabled.setObjectName("mcpEnabled")
        self.enabled.toggled.connect(self._on_field_edited)
        self.form.addRow("Enabled", self.enabled)
        self.form.addRow("Agents", self._with_error(self._agents_box(), "agents"))
        self.general_error = ErrorLabel("mcpGeneralError", self)
        outer.addWidget(self.general_error)
        self.errors["general"] = self.general_error
        outer.addLayout(self._buttons_row())
        # Under the buttons, the whole width: an error with the server's stderr needs it.
        self.test_status = QLabel(self)
        self.test_status.setObjectName("mcpTestStatus")
        self.test_status.setWordWrap(True)
        self.test_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.test_status)
        self.tools = QLabel(self)
        self.tools.setObjectName("mcpTools")
        self.tools.setTextFormat(Qt.TextFormat.RichText)
        self.tools.setWordWrap(True)
        self.tools.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tools.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        outer.addWidget(self.tools)
        outer.addStretch(1)
        self._test_started = 0.0
        self._test_timeout = 0.0
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._show_elapsed)
        self._show_fields(STDIO)

    def _with_error(self, field: QWidget, name: str) -> QWidget:
        box, self.errors[name] = with_error_label(self, field, name)
        self._rows[name] = box
        return box

    def _agents_box(self) -> QWidget:
        box = QWidget(self)
        column = QVBoxLayout(box)
        column.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.all_agents = QRadioButton("Every agent", box)
        self.all_agents.setObjectName("mcpAgentsAll")
        self.some_agents = QRadioButton("Only these:", box)
        self.some_agents.setObjectName("mcpAgentsSome")
        group = QButtonGroup(box)
        group.addButton(self.all_agents)
        group.addButton(self.some_agents)
        self.all_agents.toggled.connect(self._on_scope_toggled)
        row.addWidget(self.all_agents)
        row.addWidget(self.some_agents)
        row.addStretch(1)
        column.addLayout(row)
        self.agent_list = QListWidget(box)
        self.agent_list.setObjectName("mcpAgentList")
        self.agent_list.setAccessibleName("Agents that get this server")
        self.agent_list.setMaximumHeight(110)
        self.agent_list.hide()  # shown with "Only these"
        self.agent_list.itemChanged.connect(self._on_field_edited)
        column.addWidget(self.agent_list)
        self.agent_note = muted(QLabel(AGENT_NOTE, box))
        self.agent_note.setObjectName("mcpAgentNote")
        column.addWidget(self.agent_note)
        return box

    def _buttons_row(self) -> QHBoxLayout:
        """Test (and its Cancel) on the left, Revert and Save on the right; the Test's elapsed
        time, outcome and tools go under the row."""
        row = QHBoxLayout()
        self.test_button = QPushButton("Test", self)
        self.test_button.setObjectName("mcpTestButton")
        self.test_button.setAutoDefault(False)
        self.test_button.setToolTip("Start the server (or connect), list its tools, stop it")
        self.test_button.clicked.connect(self._on_test_button_clicked)
        row.addWidget(self.test_button)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setObjectName("mcpTestCancel")
        self.cancel_button.setAutoDefault(False)
        self.cancel_button.setToolTip("Stop the Test (the server's whole process tree)")
        self.cancel_button.clicked.connect(self.test_cancel_requested)
        self.cancel_button.hide()
        row.addWidget(self.cancel_button)
        row.addStretch(1)
        self.dirty = muted(QLabel(self))
        self.dirty.setObjectName("mcpDirty")
        self.dirty.setWordWrap(False)
        row.addWidget(self.dirty)
        self.revert_button = QPushButton("Revert", self)
        self.revert_button.setObjectName("mcpRevert")
        self.revert_button.setAutoDefault(False)
        self.revert_button.clicked.connect(self.revert_requested)
        row.addWidget(self.revert_button)
        self.save_button = QPushButton("Save server", self)
        self.save_button.setObjectName("mcpSave")
        self.save_button.setAutoDefault(False)
        self.save_button.setProperty("primary", True)
        self.save_button.setToolTip("Write it to settings.toml; the next runs get it")
        self.save_button.clicked.connect(self._on_save_button_clicked)
        row.addWidget(self.save_button)
        return row

    # -- facts --------------------------------------------------------------------------------
    def show_server(self, server: McpServer, agents: Sequence[tuple[str, str]], title: str,
                    dirty: bool) -> None:
        """Fill the form; ``agents``: (id, name) of the agents that can be chosen."""
        self._filling = True
        self.title.setText(title)
        self.name.setText(server.name)
        self.transport.setCurrentIndex(max(self.transport.findData(server.transport), 0))
        self.command.set_text(server.command)
        self.args.setText(join_args(list(server.args)))
        self.env.set_env(dict(server.env))
        self.url.setText(server.url)
        self.headers.set_env(dict(server.headers))
        self.enabled.setChecked(server.enabled)
        self.agent_list.clear()
        names = dict(agents)
        for agent_id in [*names, *[a for a in server.agents if a not in names]]:
            label = names.get(agent_id, f"{agent_id} (not installed)")
            item = QListWidgetItem(label)
            item.setData(_ID, agent_id)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if agent_id in server.agents
                               else Qt.CheckState.Unchecked)
            self.agent_list.addItem(item)
        (self.some_agents if server.agents else self.all_agents).setChecked(True)
        self.agent_list.setVisible(bool(server.agents))
        self._show_fields(server.transport)
        self._filling = False
        self.show_dirty(dirty)
        self.validate()

    def show_plan(self, lines: Sequence[str]) -> None:
        """What each agent will get of this server (one line per agent), or the general
        note when nothing is known."""
        self.agent_note.setText("\n".join(lines) if lines else AGENT_NOTE)

    def show_dirty(self, dirty: bool) -> None:
        self.dirty.setText("Unsaved" if dirty else "")
        self.revert_button.setEnabled(dirty)

    def show_test_started(self, timeout: float) -> None:
        self._test_started = time.monotonic()
        self._test_timeout = timeout
        self.tools.clear()
        self._show_testing(True)
        self._show_elapsed()

    def show_testing(self, testing: bool) -> None:
        """The page switched to a server whose Test is (or is not) running."""
        if testing:
            self._show_testing(True)
            self._show_elapsed()
        else:
            self._show_testing(False)
            self.test_status.clear()
            self.tools.clear()

    def show_test_result(self, ok: bool, text: str, tools: Sequence[tuple[str, str]]) -> None:
        self._show_testing(False)
        theme.follow_color(self.test_status, theme.success_color if ok else error_text_color)
        self.test_status.setText(text)
        self.tools.setText(tools_html(tools))

    def stop_timers(self) -> None:
        self._clock.stop()

    # -- the form's value ---------------------------------------------------------------------
    def server(self) -> tuple[McpServer, list[tuple[str, str]]]:
        """What the form says, and its problems as (field, message)."""
        problems: list[tuple[str, str]] = []
        transport = str(self.transport.currentData() or STDIO)
        args: tuple[str, ...] = ()
        if transport == STDIO:
            try:
                args = split_args(self.args.text())
            except ValueError as exc:
                problems.append(("args", str(exc)))
        agents: tuple[str, ...] = ()
        if self.some_agents.isChecked():
            agents = tuple(str(item.data(_ID)) for item in self._agent_items()
                           if item.checkState() == Qt.CheckState.Checked)
            if not agents:
                problems.append(("agents", "tick at least one agent, or choose Every agent"))
        stdio = transport == STDIO
        server = McpServer(
            name=self.name.text().strip(), transport=transport,
            command=self.command.text() if stdio else "", args=args,
            env=tuple(self.env.env()) if stdio else (),
            url=self.url.text().strip() if not stdio else "",
            headers=tuple(self.headers.env()) if not stdio else (),
            enabled=self.enabled.isChecked(), agents=agents)
        return server, problems + server_problems(server)

    def validate(self) -> bool:
        _server, problems = self.server()
        messages: dict[str, list[str]] = {}
        for key, message in problems:
            messages.setdefault(key if key in self.errors else "general", []).append(message)
        for name, label in self.errors.items():
            label.show_message("\n".join(messages.get(name, [])))
        self.save_button.setEnabled(not problems)
        self.test_button.setEnabled(self.cancel_button.isHidden() and not problems)
        return not problems

    # -- internals ----------------------------------------------------------------------------
    def _agent_items(self) -> list[QListWidgetItem]:
        return [item for row in range(self.agent_list.count())
                if (item := self.agent_list.item(row)) is not None]

    def _show_fields(self, transport: str) -> None:
        stdio = transport == STDIO
        for name in ("command", "args", "env"):
            self.form.setRowVisible(self._rows[name], stdio)
        for name in ("url", "headers"):
            self.form.setRowVisible(self._rows[name], not stdio)

    def _show_testing(self, testing: bool) -> None:
        self.cancel_button.setVisible(testing)
        self.test_button.setText("Testing…" if testing else "Test")
        self.test_button.setEnabled(not testing)
        if testing:
            theme.follow(self.test_status, str)
            self._clock.start()
        else:
            self._clock.stop()
            self.validate()

    def _show_elapsed(self) -> None:
        elapsed = int(time.monotonic() - self._test_started)
        what = ("starting it" if self.transport.currentData() == STDIO else "connecting")
        self.test_status.setText(f"Testing… {elapsed} s — {what}, then initialize and "
                                 f"tools/list (gives up at {self._test_timeout:g} s)")

    def _on_transport_changed(self, _index: int) -> None:
        self._show_fields(str(self.transport.currentData() or STDIO))
        self._on_field_edited()

    def _on_scope_toggled(self, every: bool) -> None:
        self.agent_list.setVisible(not every)
        self._on_field_edited()

    def _on_field_edited(self, *_: object) -> None:
        if self._filling:
            return
        self.validate()
        self.changed.emit()

    def _on_save_button_clicked(self) -> None:
        if self.validate():
            self.save_requested.emit()

    def _on_test_button_clicked(self) -> None:
        if self.validate():
            self.test_requested.emit()


_SCHEME_REFERENCE = re.compile(r"(?:Bearer|Basic|Token|token|bearer)\s+\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def mask_header(value: str) -> str:
    """A secret header's value as shown: ``Bearer ${TOKEN}`` names the secret without holding
    it, so it stays readable (like a bare ``${TOKEN}``); anything else is masked."""
    return value if _SCHEME_REFERENCE.fullmatch(value.strip()) else mask(value)


def tools_html(tools: Sequence[tuple[str, str]]) -> str:
    """The tools a Test listed: each name in bold with its description."""
    lines = [f"<b>{html.escape(name)}</b>"
             + (f" — {html.escape(description)}" if description else "")
             for name, description in tools[:_SHOWN_TOOLS]]
    if len(tools) > _SHOWN_TOOLS:
        lines.append(f"… and {len(tools) - _SHOWN_TOOLS} more")
    return "<br>".join(lines)
