"""The Agents page: every built-in and custom agent on the left, its form on the right.

Edits are kept per agent until the window's Save writes them (``pending``), so switching agents
loses nothing. Detection runs again (debounced) when the program or environment changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.agents import AgentOverrides
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.programs.discovery import Detection
from tolaria.ui.settings.agent_editor import AgentEditor
from tolaria.ui.settings.fields import column_button, scrolled
from tolaria.ui.window.inline_confirm import InlineConfirm

_ID = Qt.ItemDataRole.UserRole
_DETECT_DELAY_MS = 400


def unique_copy_id(agent_id: str, taken: Sequence[str]) -> str:
    base = f"{agent_id}-copy"[:60]
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


class AgentsPage(QWidget):
    #: Something on the page was edited.
    changed = Signal()
    #: Open "Add custom agent".
    add_requested = Signal()
    #: Edit a custom agent's manifest: agent id.
    edit_requested = Signal(str)
    #: Copy an agent as a new custom agent: agent id, new id, new name.
    duplicate_requested = Signal(str, str, str)
    #: Delete a custom agent's file: agent id.
    remove_requested = Signal(str)
    #: Forget a built-in's overrides: agent id.
    reset_requested = Signal(str)
    #: Find the agent's program with these overrides: agent id, AgentOverrides.
    detect_requested = Signal(str, object)
    #: Run the Test: agent id, AgentOverrides, the host ("" for this computer).
    test_requested = Signal(str, object, str)
    #: Stop the running Test of an agent: agent id.
    test_cancel_requested = Signal(str)
    #: Fetch an openai-chat agent's models: agent id, AgentOverrides.
    models_requested = Signal(str, object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("agentsPage")
        self._manifests: dict[str, Manifest] = {}
        self._saved: dict[str, AgentOverrides] = {}
        self._pending: dict[str, AgentOverrides] = {}
        self._invalid: set[str] = set()
        self._detections: dict[str, Detection] = {}
        self._testing: set[str] = set()
        self._model_lists: set[str] = set()
        self._removing: str | None = None
        layout = QHBoxLayout(self)
        left = QVBoxLayout()
        self.list = QListWidget(self)
        self.list.setObjectName("agentList")
        self.list.setAccessibleName("Agents")
        self.list.setMinimumWidth(200)
        self.list.setMaximumWidth(260)
        self.list.currentItemChanged.connect(self._on_list_current_item_changed)
        left.addWidget(self.list, 1)
        self.add_button = column_button(self, "Add custom agent…", "addAgentButton", left)
        self.add_button.clicked.connect(self.add_requested)
        self.duplicate_button = column_button(self, "Duplicate", "duplicateAgentButton", left)
        self.duplicate_button.clicked.connect(self._on_duplicate_button_clicked)
        self.remove_button = column_button(self, "Remove", "removeAgentButton", left)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.reset_button = column_button(self, "Reset to defaults", "resetAgentButton", left)
        self.reset_button.clicked.connect(self._on_reset_button_clicked)
        self.remove_confirm = InlineConfirm("removeAgentConfirm", "Remove", parent=self)
        self.remove_confirm.accepted.connect(self._on_remove_confirm_accepted)
        left.addWidget(self.remove_confirm)
        layout.addLayout(left)
        self.editor = AgentEditor(self)
        self.editor.changed.connect(self._on_editor_changed)
        self.editor.test_requested.connect(self._on_editor_test_requested)
        self.editor.test_cancel_requested.connect(self._on_editor_test_cancel_requested)
        self.editor.models_requested.connect(self._on_editor_models_requested)
        self.editor.edit_requested.connect(self._on_editor_edit_requested)
        scroll = scrolled(self.editor, self)
        layout.addWidget(scroll, 1)
        self._detect_timer = QTimer(self)
        self._detect_timer.setSingleShot(True)
        self._detect_timer.setInterval(_DETECT_DELAY_MS)
        self._detect_timer.timeout.connect(self._on_detect_timer_timeout)

    # -- facts --------------------------------------------------------------------------------
    def set_agents(self, manifests: Sequence[Manifest], overrides: Mapping[str, AgentOverrides],
                   model_lists: set[str], select: str | None = None) -> None:
        """(Re)fill the list; pending edits of agents that still exist are kept."""
        current = select or self.current_agent()
        self._manifests = {m.id: m for m in manifests}
        self._saved = {m.id: overrides.get(m.id, AgentOverrides()) for m in manifests}
        self._pending = {k: v for k, v in self._pending.items() if k in self._manifests}
        self._invalid &= set(self._manifests)
        self._model_lists = set(model_lists)
        self.list.blockSignals(True)
        self.list.clear()
        for manifest in manifests:
            item = QListWidgetItem(self._label(manifest.id))
            item.setData(_ID, manifest.id)
            self.list.addItem(item)
        self.list.blockSignals(False)
        ids = [m.id for m in manifests]
        row = ids.index(current) if current in ids else 0
        if ids:
            self.list.setCurrentRow(row)
            self._show(ids[row])

    def _label(self, agent_id: str) -> str:
        manifest = self._manifests[agent_id]
        tags = [] if manifest.builtin else ["custom"]
        if not self.overrides_of(agent_id).enabled:
            tags.append("off")
        return manifest.name + (f"  ({', '.join(tags)})" if tags else "")

    def show_detection(self, agent_id: str, found: Detection) -> None:
        self._detections[agent_id] = found
        if agent_id == self.current_agent():
            self.editor.show_detection(found)

    def show_test_result(self, agent_id: str, ok: bool | None, text: str) -> None:
        self._testing.discard(agent_id)
        if agent_id == self.current_agent():
            if ok is None:
                self.editor.show_test_result(False, "Test cancelled.")
            else:
                self.editor.show_test_result(ok, text)

    def show_models(self, agent_id: str, models: Sequence[str], error: str) -> None:
        if agent_id == self.current_agent():
            self.editor.show_models(models, error)

    def stop_timers(self) -> None:
        """The window closed: no late detection request."""
        self._detect_timer.stop()

    def discard_edits(self) -> None:
        """Forget unsaved edits and earlier detections (the window is opened afresh)."""
        self._pending.clear()
        self._invalid.clear()
        self._detections.clear()

    def select(self, agent_id: str) -> None:
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item is not None and item.data(_ID) == agent_id:
                self.list.setCurrentRow(row)
                return

    # -- queries ------------------------------------------------------------------------------
    def current_agent(self) -> str | None:
        item = self.list.currentItem()
        value = item.data(_ID) if item is not None else None
        return value if isinstance(value, str) else None

    def agent_ids(self) -> list[str]:
        return list(self._manifests)

    def overrides_of(self, agent_id: str) -> AgentOverrides:
        return self._pending.get(agent_id) or self._saved.get(agent_id, AgentOverrides())

    def pending(self) -> dict[str, AgentOverrides]:
        """Edited agents whose overrides differ from what is saved."""
        return {k: v for k, v in self._pending.items() if v != self._saved.get(k)}

    def is_valid(self) -> bool:
        return not self._invalid

    def mark_saved(self) -> None:
        self._saved.update(self._pending)
        self._pending.clear()

    # -- internals ----------------------------------------------------------------------------
    def _show(self, agent_id: str) -> None:
        manifest = self._manifests[agent_id]
        self.editor.show_agent(manifest, self.overrides_of(agent_id),
                               agent_id in self._model_lists, agent_id in self._testing)
        self.editor.show_detection(self._detections.get(agent_id))
        self.remove_button.setEnabled(not manifest.builtin)
        self.reset_button.setEnabled(manifest.builtin)
        if agent_id not in self._detections:
            self.detect_requested.emit(agent_id, self.overrides_of(agent_id))

    def _on_list_current_item_changed(self, item: QListWidgetItem | None, *_: object) -> None:
        agent_id = item.data(_ID) if item is not None else None
        if isinstance(agent_id, str) and agent_id in self._manifests:
            self._show(agent_id)

    def _on_editor_changed(self) -> None:
        agent_id = self.current_agent()
        if agent_id is None:
            return
        overrides, problems = self.editor.overrides()
        before = self.overrides_of(agent_id)
        self._pending[agent_id] = overrides
        if problems:
            self._invalid.add(agent_id)
        else:
            self._invalid.discard(agent_id)
        item = self.list.currentItem()
        if item is not None:
            item.setText(self._label(agent_id))
        if (overrides.path, dict(overrides.env)) != (before.path, dict(before.env)):
            self._detect_timer.start()
        self.changed.emit()

    def _on_detect_timer_timeout(self) -> None:
        agent_id = self.current_agent()
        if agent_id is not None and agent_id not in self._invalid:
            self._detections.pop(agent_id, None)
            self.editor.show_detection(None)
            self.detect_requested.emit(agent_id, self.overrides_of(agent_id))

    def _on_editor_test_cancel_requested(self) -> None:
        agent_id = self.current_agent()
        if agent_id is not None and agent_id in self._testing:
            self.test_cancel_requested.emit(agent_id)

    def _on_editor_test_requested(self) -> None:
        agent_id = self.current_agent()
        if agent_id is None or agent_id in self._testing:
            return
        self._testing.add(agent_id)
        self.editor.show_test_started()
        self.test_requested.emit(agent_id, self.overrides_of(agent_id),
                                 str(self.editor.test_host.currentData() or ""))

    def _on_editor_models_requested(self) -> None:
        agent_id = self.current_agent()
        if agent_id is not None:
            self.models_requested.emit(agent_id, self.overrides_of(agent_id))

    def _on_editor_edit_requested(self) -> None:
        agent_id = self.current_agent()
        if agent_id is not None:
            self.edit_requested.emit(agent_id)

    def _on_duplicate_button_clicked(self) -> None:
        agent_id = self.current_agent()
        if agent_id is None:
            return
        manifest = self._manifests[agent_id]
        new_id = unique_copy_id(agent_id, list(self._manifests))
        self.duplicate_requested.emit(agent_id, new_id, f"{manifest.name} (copy)")

    def _on_remove_button_clicked(self) -> None:
        agent_id = self.current_agent()
        if agent_id is None or self._manifests[agent_id].builtin:
            return
        manifest = self._manifests[agent_id]
        self._removing = agent_id
        self.remove_confirm.ask(f"Remove the custom agent {manifest.name}? Its file is deleted.")
        self.remove_confirm.setToolTip(str(manifest.source or ""))

    def _on_remove_confirm_accepted(self) -> None:
        agent_id, self._removing = self._removing, None
        if agent_id is not None:
            self.remove_requested.emit(agent_id)

    def _on_reset_button_clicked(self) -> None:
        agent_id = self.current_agent()
        if agent_id is None:
            return
        self._pending.pop(agent_id, None)
        self._invalid.discard(agent_id)
        self.reset_requested.emit(agent_id)
