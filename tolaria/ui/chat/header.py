"""Above the chat: the conversation's title, its agent, its host and its working folder."""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest
from tolaria.core.programs.discovery import Detection
from tolaria.core.remote.discover import HostAgents
from tolaria.core.store.db import Conversation
from tolaria.qt.remote_folders import FolderLister
from tolaria.ui import theme
from tolaria.ui.chat.agent_status import (
    GROUPS,
    NOT_INSTALLED,
    READY,
    AgentStatus,
    agent_status,
)
from tolaria.ui.chat.host_control import (
    HOST_PLACEHOLDER,
    AgentRow,
    HostButton,
    InlineEntry,
    host_problem,
)
from tolaria.ui.chat.host_rows import remote_status, sections
from tolaria.ui.chat.picker_rows import HINT_ROLE, NAME_ROLE, PickerRow
from tolaria.ui.chat.remote_folders import RemoteFolderDialog
from tolaria.ui.transcript.markdown import plain_tooltip

_VERSION_RE = re.compile(r"\d+\.\d+(?:\.\d+)?[\w.+-]*")
#: Set on a section header row of the picker (not an agent).
HEADER_ROLE = Qt.ItemDataRole.UserRole + 10
#: The agent's group (READY, NEEDS_SETUP, NOT_INSTALLED).
GROUP_ROLE = Qt.ItemDataRole.UserRole + 11
#: Set on the "Look again on HOST" row (an action, not an agent).
REFRESH_ROLE = Qt.ItemDataRole.UserRole + 14


class AgentPicker(QComboBox):
    """The agents Tolaria knows, grouped Ready / Needs setup / Not installed under section
    headers (the demo first). A not-installed agent is greyed with its one-line install hint; one
    that needs setup says what to do (start the local server, set the key) and stays choosable.
    Agents disabled in Preferences are left out (a chat that still uses one shows it greyed).
    For a chat on another machine the agents are those found there, under the host's heading
    (``host_rows``), with a row to look again."""

    #: The list was opened: worth asking the local model servers again.
    popup_opened = Signal()
    #: The chat is on a host whose agents are not known yet, or the user asked to look again:
    #: host, whether to look afresh (not the cached answer).
    host_agents_requested = Signal(str, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("agentPicker")
        self.setAccessibleName("Agent")
        # The hints make long rows: the list is wide, the closed box stays compact.
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(22)
        self.view().setMinimumWidth(460)
        self.setItemDelegate(PickerRow(self))
        self._manifests: dict[str, Manifest] = {}
        self._detections: dict[str, Detection] = {}
        self._hidden: set[str] = set()
        #: The shown chat's host ("" for this computer) and what each host was found to have.
        self._host = ""
        self._host_agents: dict[str, HostAgents] = {}
        self._chosen: str | None = None
        self.activated.connect(self._on_activated)

    def showPopup(self) -> None:
        self.popup_opened.emit()
        if self._host and self._host not in self._host_agents:
            self.host_agents_requested.emit(self._host, False)
        super().showPopup()

    @property
    def host(self) -> str:
        """The shown chat's host ("" for this computer)."""
        return self._host

    def set_host(self, host: str) -> None:
        """The shown chat's host: its agents are listed (asked for when not known yet)."""
        if host == self._host:
            return
        self._host = host
        self._rebuild()
        if host and host not in self._host_agents:
            self.host_agents_requested.emit(host, False)

    def set_host_agents(self, host: str, found: HostAgents) -> None:
        """What a look at ``host`` found (or why it could not look)."""
        self._host_agents[host] = found
        if host == self._host:
            self._rebuild()

    def forget_hosts(self) -> None:
        """The hosts' settings changed: what was found may no longer hold."""
        self._host_agents.clear()
        self._rebuild()
        if self._host:
            self.host_agents_requested.emit(self._host, True)

    def set_manifests(self, manifests: Sequence[Manifest], hidden: Collection[str] = ()) -> None:
        self._manifests = {m.id: m for m in manifests}
        self._hidden = set(hidden)
        self._rebuild()

    def set_detections(self, detections: Sequence[Detection]) -> None:
        # Merged: an older, slower detection must not forget agents a newer one covered.
        fresh = {d.agent: d for d in detections if self._detections.get(d.agent) != d}
        if fresh:  # unchanged answers (the picker asks again each time it opens) keep the list
            self._detections.update(fresh)
            self._rebuild()

    def status(self, agent: str) -> AgentStatus | None:
        manifest = self._manifests.get(agent)
        if manifest is None:
            return None
        found = self._host_agents.get(self._host)
        if self._host and manifest.protocol != OPENAI_CHAT:
            reached = found is not None and not found.error
            return remote_status(manifest, found.get(agent) if reached and found else None,
                                 self._host)
        return agent_status(manifest, self._detections.get(agent))

    def headers(self) -> list[str]:
        """The section headers shown, top to bottom."""
        return [self.itemText(row) for row in range(self.count())
                if self.itemData(row, HEADER_ROLE)]

    def _rebuild(self) -> None:
        if self._host:
            self._rebuild_for_host()
            return
        current = self.current_agent()
        groups: dict[str, list[tuple[Manifest, AgentStatus]]] = {g: [] for g in GROUPS}
        # The built-in demo first: it always works.
        for manifest in sorted(self._manifests.values(),
                               key=lambda m: (m.id != "demo", m.name.lower())):
            if manifest.id not in self._hidden:
                status = agent_status(manifest, self._detections.get(manifest.id))
                groups[status.group].append((manifest, status))
        shown = [g for g in GROUPS if groups[g]]
        model = self.model()
        assert isinstance(model, QStandardItemModel)
        self.blockSignals(True)
        self.clear()
        for group in shown:
            if len(shown) > 1:
                self._add_header(model, group)
            for manifest, status in groups[group]:
                self._add_agent(model, manifest, status)
        self.blockSignals(False)
        if current:
            self.select(current)

    def _rebuild_for_host(self) -> None:
        current = self.current_agent() or self._chosen
        shown = [m for m in sorted(self._manifests.values(), key=lambda m: m.name.lower())
                 if m.id not in self._hidden]
        model = self.model()
        assert isinstance(model, QStandardItemModel)
        self.blockSignals(True)
        self.clear()
        for section in sections(self._host, shown, self._host_agents.get(self._host),
                                self._detections):
            self._add_header(model, section.heading, upper=False)
            if section.problem:
                self.addItem(section.problem, None)
                item = model.item(self.count() - 1)
                item.setData(True, HEADER_ROLE)
                item.setFlags(Qt.ItemFlag.NoItemFlags)
                item.setForeground(theme.error_colors()[2])
                item.setToolTip(plain_tooltip(section.problem))
            for manifest, status in section.agents:
                self._add_agent(model, manifest, status)
        self.addItem(f"↻ Look again on {self._host}", None)
        item = model.item(self.count() - 1)
        item.setData(True, REFRESH_ROLE)
        item.setToolTip(f"Ask {self._host} again which agents it has (through your ssh)")
        self.blockSignals(False)
        if current:
            self.select(current)

    def _on_activated(self, index: int) -> None:
        if self.itemData(index, REFRESH_ROLE):
            self.host_agents_requested.emit(self._host, True)
            self._host_agents.pop(self._host, None)
            self._rebuild()  # "looking for agents…"; the chat's agent stays chosen
            return
        agent = self.itemData(index)
        if isinstance(agent, str):
            self._chosen = agent

    def _add_header(self, model: QStandardItemModel, group: str, upper: bool = True) -> None:
        self.addItem(group.upper() if upper else group, None)
        item = model.item(self.count() - 1)
        item.setData(True, HEADER_ROLE)
        item.setFlags(Qt.ItemFlag.NoItemFlags)
        font = QFont(self.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 0.85)
        item.setFont(font)
        item.setForeground(theme.muted_text())
        item.setData(group, Qt.ItemDataRole.AccessibleTextRole)

    def remote_agents(self) -> set[str]:
        """The agents that can run on a host (not the model endpoints), not disabled."""
        return {m.id for m in self._manifests.values()
                if m.protocol != OPENAI_CHAT and m.id not in self._hidden}

    def menu_rows(self, host: str) -> list[AgentRow] | None:
        """The agents the Host menu lists under ``host`` ("": this computer), with versions;
        None while ``host`` has not been looked at."""
        shown = [m for m in sorted(self._manifests.values(), key=lambda m: m.name.lower())
                 if m.id not in self._hidden]
        if not host:
            pairs = [(m, agent_status(m, self._detections.get(m.id))) for m in shown]
        elif host not in self._host_agents:
            return None
        else:
            found = self._host_agents[host]
            if found.error:
                return [AgentRow("", f"not reached: {found.error}", False)]
            pairs = sections(host, shown, found, self._detections)[0].agents
        rows = []
        # Ready first, as in the picker; the menu says in a word what the picker says in full
        # (the whole line is the row's tooltip).
        for manifest, status in sorted(pairs, key=lambda pair: GROUPS.index(pair[1].group)):
            text, tip = self._row_text(manifest, status, host)
            if status.group != READY:
                word = status.group.lower()
                if status.group == NOT_INSTALLED and host:
                    word = f"not on {host}"
                text = f"{manifest.name} — {word}"
            rows.append(AgentRow(manifest.id, text, status.group != NOT_INSTALLED, tip))
        return rows

    def _row_text(self, manifest: Manifest, status: AgentStatus, host: str) -> tuple[str, str]:
        """An agent's row: its name with the version found (or what is wrong), and its tip."""
        found = self._detections.get(manifest.id)
        there = self._host_agents.get(host) if host else None
        if host and manifest.protocol != OPENAI_CHAT:
            found = there.get(manifest.id) if there is not None else None
        text = manifest.name
        if status.group == READY and found is not None:
            match = _VERSION_RE.search(found.version or "")
            text = f"{manifest.name} {match.group(0)}" if match else manifest.name
        elif status.line:
            text = f"{manifest.name} — {status.line}"
        tip = "\n".join(x for x in (manifest.description, status.line,
                                    found.version if found else None,
                                    found.path if found and found.path else None) if x)
        return text, tip or manifest.name

    def _add_agent(self, model: QStandardItemModel, manifest: Manifest,
                   status: AgentStatus) -> None:
        text, tip = self._row_text(manifest, status, self._host)
        self.addItem(text, manifest.id)
        item = model.item(self.count() - 1)
        item.setToolTip(plain_tooltip(tip))  # --version output, paths
        item.setData(status.group, GROUP_ROLE)
        item.setData(manifest.name, NAME_ROLE)
        item.setData(status.line if status.group != READY else "", HINT_ROLE)
        item.setEnabled(status.group != NOT_INSTALLED)

    def current_agent(self) -> str | None:
        value = self.currentData()
        return value if isinstance(value, str) else None

    def select(self, agent: str) -> None:
        self._chosen = agent
        index = self.findData(agent)
        if index < 0:
            # An agent this install no longer has, or one disabled: show it, unusable.
            manifest = self._manifests.get(agent)
            self.addItem(f"{manifest.name} (disabled)" if manifest is not None
                         else f"{agent} (unknown)", agent)
            index = self.count() - 1
            model = self.model()
            assert isinstance(model, QStandardItemModel)
            item = model.item(index)
            if item is not None:
                item.setEnabled(False)
        self.blockSignals(True)
        self.setCurrentIndex(index)
        self.blockSignals(False)

    def is_available(self, agent: str) -> bool:
        status = self.status(agent)
        return (status is not None and agent not in self._hidden
                and status.group != NOT_INSTALLED)


class ChatHeader(QWidget):
    #: The user picked another agent for the current conversation: agent id.
    agent_change_requested = Signal(str)
    #: The user picked another working folder for the current conversation: path (on the
    #: chat's host for a remote chat, as typed).
    cwd_change_requested = Signal(str)
    #: The user picked another host for the current conversation ("" for this computer).
    host_change_requested = Signal(str)
    #: "Keep running when disconnected" switched for the chat on its host (ADR 0032).
    keep_running_change_requested = Signal(bool)
    #: The user picked an agent under a host in the Host menu: host ("": here), agent id.
    host_agent_change_requested = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatHeader")
        rows = QVBoxLayout(self)
        rows.setContentsMargins(12, 6, 12, 6)
        rows.setSpacing(0)
        layout = QHBoxLayout()
        layout.setContentsMargins(0, 0, 0, 0)
        rows.addLayout(layout)
        #: Where "Other host…" and a remote chat's folder are typed, with their error.
        self.entry = InlineEntry(self)
        rows.addWidget(self.entry)
        self.title = QLabel(self)
        self.title.setObjectName("chatTitle")
        self.title.setTextFormat(Qt.TextFormat.PlainText)  # a title is prompt text
        font = self.title.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.1)
        self.title.setFont(font)
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.title, 1)
        agent_label = QLabel("&Agent", self)
        self.agent_picker = AgentPicker(self)
        agent_label.setBuddy(self.agent_picker)
        self.agent_picker.activated.connect(self._on_agent_picker_activated)
        layout.addWidget(agent_label)
        layout.addWidget(self.agent_picker)
        self.host_button = HostButton(self)
        self.host_button.host_picked.connect(self.host_change_requested.emit)
        self.host_button.other_requested.connect(self._ask_host)
        self.host_button.keep_running_toggled.connect(self.keep_running_change_requested.emit)
        self.host_button.host_agent_picked.connect(self.host_agent_change_requested.emit)
        self.host_button.agent_rows = self.agent_picker.menu_rows
        self.host_button.look_requested.connect(
            lambda host: self.agent_picker.host_agents_requested.emit(host, True))
        layout.addWidget(self.host_button)
        self.folder_button = QPushButton(self)
        self.folder_button.setObjectName("folderButton")
        self.folder_button.setAccessibleName("Working folder")
        self.folder_button.clicked.connect(self._on_folder_button_clicked)
        layout.addWidget(self.folder_button)
        self._cwd = ""
        self._host = ""
        self._conversation_id: int | None = None
        self._dialog: QFileDialog | None = None
        #: The host's folder picker last opened, and what lists the host's folders for it.
        self.remote_dialog: RemoteFolderDialog | None = None
        self._lister: FolderLister | None = None

    @property
    def host(self) -> str:
        """The shown chat's host ("" for this computer)."""
        return self._host

    def show_conversation(self, conversation: Conversation) -> None:
        if conversation.id != self._conversation_id:
            self.entry.close_entry()  # typed for another chat
        self._conversation_id = conversation.id
        self.title.setText(conversation.title)
        self.agent_picker.set_host(conversation.host or "")  # its agents, before choosing
        self.agent_picker.select(conversation.agent)
        self._host = conversation.host or ""
        self.host_button.set_host(self._host)
        self.host_button.keep_running = conversation.keep_running
        if self._host:  # a folder on the host, as typed; none: its home
            self._cwd = conversation.cwd or ""
            name = self._cwd.rstrip("/").rpartition("/")[2] or self._cwd or "~"
            tip = (f"Folder on {self._host}: {self._cwd or '~ (the home folder there)'}\n"
                   "Click to type another")
        else:
            self._cwd = conversation.cwd or os.getcwd()
            name = os.path.basename(self._cwd.rstrip(os.sep)) or self._cwd
            tip = f"Working folder: {self._cwd}\nClick to change"
        self.folder_button.setText(name)
        self.folder_button.setToolTip(plain_tooltip(tip))

    def show_host_error(self, message: str) -> None:
        """A host change that cannot be made, said on the entry line."""
        if not self.entry.isVisible():
            self.entry.ask("Host:", self._host, HOST_PLACEHOLDER, host_problem,
                           self.host_change_requested.emit)
        self.entry.show_error(message)

    def _ask_host(self) -> None:
        self.entry.ask("Host:", self._host, HOST_PLACEHOLDER, host_problem,
                       self.host_change_requested.emit)

    def _on_agent_picker_activated(self, index: int) -> None:
        agent = self.agent_picker.itemData(index)
        if isinstance(agent, str):
            self.agent_change_requested.emit(agent)

    def _on_folder_button_clicked(self) -> None:
        if self._host:  # the host's folders, listed there through ssh (ADR 0035)
            self._browse_host()
            return
        # open(), not exec(): a nested event loop would stall the asyncio tasks.
        dialog = QFileDialog(self, "Working folder for this chat", self._cwd)
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.fileSelected.connect(self._on_dialog_file_selected)
        self._dialog = dialog
        dialog.open()

    def _browse_host(self) -> None:
        dialog = RemoteFolderDialog(self._host, self._cwd, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        lister = FolderLister(self._host, dialog)
        dialog.listing_requested.connect(lister.request)
        dialog.folder_chosen.connect(self.cwd_change_requested.emit)
        self.remote_dialog, self._lister = dialog, lister
        dialog.start()

    def _on_dialog_file_selected(self, path: str) -> None:
        self._dialog = None
        if path and os.path.isdir(path):
            self.cwd_change_requested.emit(path)
