"""Above the chat: the conversation's title, its agent and its working folder."""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QWidget,
)

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.programs.discovery import Detection
from tolaria.core.store.db import Conversation
from tolaria.ui.markdown import plain_tooltip

_VERSION_RE = re.compile(r"\d+\.\d+(?:\.\d+)?[\w.+-]*")


class AgentPicker(QComboBox):
    """The agents Tolaria knows; ones whose program is missing are greyed, with the install hint
    as their tooltip. Agents disabled in Preferences are left out (a chat that still uses one
    shows it greyed)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("agentPicker")
        self.setAccessibleName("Agent")
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self._manifests: dict[str, Manifest] = {}
        self._detections: dict[str, Detection] = {}
        self._hidden: set[str] = set()

    def set_manifests(self, manifests: Sequence[Manifest], hidden: Collection[str] = ()) -> None:
        self._manifests = {m.id: m for m in manifests}
        self._hidden = set(hidden)
        current = self.current_agent()
        self.blockSignals(True)
        self.clear()
        # The built-in demo first: it always works.
        for manifest in sorted(manifests, key=lambda m: (m.id != "demo", m.name.lower())):
            if manifest.id not in self._hidden:
                self.addItem(manifest.name, manifest.id)
        self.blockSignals(False)
        self._refresh()
        if current:
            self.select(current)

    def set_detections(self, detections: Sequence[Detection]) -> None:
        # Merged: an older, slower detection must not forget agents a newer one covered.
        self._detections.update({d.agent: d for d in detections})
        self._refresh()

    def _refresh(self) -> None:
        model = self.model()
        assert isinstance(model, QStandardItemModel)
        for row in range(self.count()):
            agent = self.itemData(row)
            manifest = self._manifests.get(agent)
            item = model.item(row)
            if manifest is None or item is None or agent in self._hidden:
                continue
            found = self._detections.get(agent)
            if found is None:
                text, tip, enabled = manifest.name, manifest.description or manifest.name, True
            elif found.path is None:
                hint = manifest.install_hint or "install it and restart Tolaria"
                text = f"{manifest.name} (not installed)"
                tip = f"{found.error or 'not found'}\nInstall: {hint}"
                enabled = False
            else:
                match = _VERSION_RE.search(found.version or "")
                text = f"{manifest.name} {match.group(0)}" if match else manifest.name
                tip = "\n".join(x for x in (manifest.description, found.version, found.path,
                                            found.error) if x)
                enabled = True
            item.setText(text)
            item.setToolTip(plain_tooltip(tip))  # --version output, paths
            item.setEnabled(enabled)

    def current_agent(self) -> str | None:
        value = self.currentData()
        return value if isinstance(value, str) else None

    def select(self, agent: str) -> None:
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
        found = self._detections.get(agent)
        return (agent in self._manifests and agent not in self._hidden
                and (found is None or found.path is not None))


class ChatHeader(QWidget):
    #: The user picked another agent for the current conversation: agent id.
    agent_change_requested = Signal(str)
    #: The user picked another working folder for the current conversation: path.
    cwd_change_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatHeader")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 12, 6)
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
        self.folder_button = QPushButton(self)
        self.folder_button.setObjectName("folderButton")
        self.folder_button.setAccessibleName("Working folder")
        self.folder_button.clicked.connect(self._on_folder_button_clicked)
        layout.addWidget(self.folder_button)
        self._cwd = ""
        self._dialog: QFileDialog | None = None

    def show_conversation(self, conversation: Conversation) -> None:
        self.title.setText(conversation.title)
        self.agent_picker.select(conversation.agent)
        self._cwd = conversation.cwd or os.getcwd()
        name = os.path.basename(self._cwd.rstrip(os.sep)) or self._cwd
        self.folder_button.setText(name)
        self.folder_button.setToolTip(plain_tooltip(f"Working folder: {self._cwd}\n"
                                                    "Click to change"))

    def _on_agent_picker_activated(self, index: int) -> None:
        agent = self.agent_picker.itemData(index)
        if isinstance(agent, str):
            self.agent_change_requested.emit(agent)

    def _on_folder_button_clicked(self) -> None:
        # open(), not exec(): a nested event loop would stall the asyncio tasks.
        dialog = QFileDialog(self, "Working folder for this chat", self._cwd)
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.fileSelected.connect(self._on_dialog_file_selected)
        self._dialog = dialog
        dialog.open()

    def _on_dialog_file_selected(self, path: str) -> None:
        self._dialog = None
        if path and os.path.isdir(path):
            self.cwd_change_requested.emit(path)
