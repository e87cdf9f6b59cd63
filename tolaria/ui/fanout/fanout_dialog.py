"""The "Ask several agents…" dialog: pick agents and type one prompt for all of them (a fan-out job).

Where the job's agents run: "Run on" (default this computer), the hosts the "New chat on" menu
offers and "Other host…" typed under it, checked by the same parser (``host_problem``); the
agents listed are those of the chosen host (found there, with versions, as the Host menu shows).

Non-modal (shown, never ``exec()``-ed: a nested loop inside the qasync loop would deadlock the
running turns); confirming emits an intent and hides the dialog.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.ui import theme
from tolaria.ui.chat.host_control import HOST_PLACEHOLDER, InlineEntry, host_problem
from tolaria.ui.settings.limit_fields import LimitFields

OTHER_HOST = "Other host…"


def agents_of(picker: QComboBox) -> list[tuple[str, str, bool]]:
    """(agent id, shown name, usable) of the header's agent picker: the same list, names and
    detection results (an agent that is not installed is listed, not usable)."""
    model = picker.model()
    agents = []
    for row in range(picker.count()):
        agent = picker.itemData(row)
        usable = bool(model.flags(model.index(row, 0)) & Qt.ItemFlag.ItemIsEnabled)
        if isinstance(agent, str):
            agents.append((agent, picker.itemText(row), usable))
    return agents


class FanOutDialog(QDialog):
    #: Send one prompt to several agents at once: prompt, list of agent ids, the job's budget
    #: (RunLimits; all None: no budget), the host its agents run on ("" this computer).
    fan_out_requested = Signal(str, object, object, str)
    #: Another host was chosen: its agents are wanted (``set_agents``): host ("" here).
    host_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fanOutDialog")
        self.setWindowTitle("Ask several agents")
        self.setModal(False)
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        run_on = QLabel("&Run on:", self)
        self.hosts = QComboBox(self)
        self.hosts.setObjectName("fanOutHost")
        self.hosts.setAccessibleName("Run the agents on")
        self.hosts.setToolTip("Where the job's agents run: this computer, or another machine "
                              "through your ssh")
        run_on.setBuddy(self.hosts)
        self.hosts.activated.connect(self._on_hosts_activated)
        row.addWidget(run_on)
        row.addWidget(self.hosts, 1)
        layout.addLayout(row)
        #: "Other host…" is typed here, its problem beside it.
        self.host_entry = InlineEntry(self)
        layout.addWidget(self.host_entry)
        self._host = ""
        self.set_hosts([("", "This computer")])
        layout.addWidget(QLabel("Agents:", self))
        self.agents = QListWidget(self)
        self.agents.setObjectName("fanOutAgents")
        self.agents.itemChanged.connect(self._refresh)
        layout.addWidget(self.agents)
        layout.addWidget(QLabel("Prompt (sent to each agent in its own new chat):", self))
        self.prompt = QPlainTextEdit(self)
        self.prompt.setObjectName("fanOutPrompt")
        self.prompt.textChanged.connect(self._refresh)
        layout.addWidget(self.prompt, 1)
        layout.addWidget(QLabel("Budget of the whole job (all its runs together; a run that "
                                "reaches it stops them all):", self))
        self.budget = LimitFields(self)
        self.budget.setObjectName("fanOutBudget")
        self.budget.hide_time()
        layout.addWidget(self.budget)
        buttons = QDialogButtonBox(self)
        self.ask_button = QPushButton("Ask", self)
        self.ask_button.setObjectName("fanOutAskButton")
        self.ask_button.setDefault(True)
        buttons.addButton(self.ask_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._on_buttons_accepted)
        buttons.rejected.connect(self.hide)
        layout.addWidget(buttons)
        self.resize(480, 420)
        self._refresh()
        # The list's check boxes in the theme of the moment (Fusion's own vanish on dark).
        theme.follow(self.agents, theme.indicator_css)

    def host(self) -> str:
        """Where the job's agents run ("" this computer)."""
        return self._host

    def set_hosts(self, choices: Sequence[tuple[str, str]]) -> None:
        """(destination, text) as the "New chat on" menu offers them; the chosen one stays."""
        shown = list(choices)
        if self._host and self._host not in dict(shown):
            shown.append((self._host, self._host))
        self.hosts.blockSignals(True)
        self.hosts.clear()
        for host, text in shown:
            self.hosts.addItem(text, host)
        self.hosts.addItem(OTHER_HOST, None)
        self.hosts.setCurrentIndex(max(0, self.hosts.findData(self._host)))
        self.hosts.blockSignals(False)

    def choose_host(self, host: str) -> None:
        self.host_entry.close_entry()
        if self.hosts.findData(host) < 0:
            self.hosts.insertItem(self.hosts.count() - 1, host, host)
        self.hosts.setCurrentIndex(self.hosts.findData(host))
        if host != self._host:
            self._host = host
            self.host_chosen.emit(host)
        self._refresh()

    def _on_hosts_activated(self, index: int) -> None:
        host = self.hosts.itemData(index)
        if isinstance(host, str):
            self.choose_host(host)
            return
        self.hosts.setCurrentIndex(max(0, self.hosts.findData(self._host)))  # until typed
        self.host_entry.ask("Host:", "", HOST_PLACEHOLDER, host_problem, self.choose_host)

    def set_agents(self, agents: Sequence[tuple[str, str, bool]]) -> None:
        """(agent id, shown name, usable); unusable agents are listed but cannot be checked."""
        checked = set(self.selected_agents())
        self.agents.blockSignals(True)
        self.agents.clear()
        for agent, name, usable in agents:
            item = QListWidgetItem(name, self.agents)
            item.setData(Qt.ItemDataRole.UserRole, agent)
            flags = Qt.ItemFlag.ItemIsUserCheckable
            if usable:
                flags |= Qt.ItemFlag.ItemIsEnabled
            item.setFlags(flags)
            item.setCheckState(Qt.CheckState.Checked if usable and agent in checked
                               else Qt.CheckState.Unchecked)
        self.agents.blockSignals(False)
        self._refresh()

    def set_checked(self, agents: Sequence[str]) -> None:
        for row in range(self.agents.count()):
            item = self.agents.item(row)
            usable = bool(item.flags() & Qt.ItemFlag.ItemIsEnabled)
            wanted = usable and item.data(Qt.ItemDataRole.UserRole) in agents
            item.setCheckState(Qt.CheckState.Checked if wanted else Qt.CheckState.Unchecked)

    def selected_agents(self) -> list[str]:
        return [str(item.data(Qt.ItemDataRole.UserRole))
                for item in (self.agents.item(r) for r in range(self.agents.count()))
                if item.checkState() == Qt.CheckState.Checked
                and item.flags() & Qt.ItemFlag.ItemIsEnabled]

    def _refresh(self) -> None:
        self.ask_button.setEnabled(bool(self.prompt.toPlainText().strip())
                                   and bool(self.selected_agents()))

    def _on_buttons_accepted(self) -> None:
        prompt = self.prompt.toPlainText()
        agents = self.selected_agents()
        if not prompt.strip() or not agents:
            return
        problem = host_problem(self._host) if self._host else None
        if problem is not None:  # the settings changed since it was chosen
            self.host_entry.ask("Host:", self._host, HOST_PLACEHOLDER, host_problem,
                                self.choose_host)
            self.host_entry.show_error(problem)
            return
        self.hide()
        self.prompt.clear()
        self.fan_out_requested.emit(prompt, agents, self.budget.limits().effective(),
                                    self._host)
