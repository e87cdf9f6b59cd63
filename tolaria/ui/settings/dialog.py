"""The Preferences window (Ctrl+,): Agents, MCP servers, Hosts, Shortcuts, Behaviour and
Checkpoints pages and one Save (Checkpoints has its own Prune; it saves nothing; MCP servers and
Hosts write each entry with its own Save, like a custom agent).

Non-modal (``show()``), so chats keep running and the chat window stays usable while it is
open. It emits intents; ``tolaria.qt.settings_controller`` writes the files and answers with
facts. Save is disabled while any field is invalid or shortcuts conflict; a broken settings
file on disk is named (file, line, problem) and never saved over.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from tolaria.config.agents import AgentOverrides
from tolaria.config.settings import Settings
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.programs.discovery import Detection
from tolaria.support import paths
from tolaria.ui import theme
from tolaria.ui.settings.agents_page import AgentsPage
from tolaria.ui.settings.behaviour_page import BehaviourPage
from tolaria.ui.settings.checkpoints_page import CheckpointsPage
from tolaria.ui.settings.custom_agent_dialog import CustomAgentDialog
from tolaria.ui.settings.fields import ErrorLabel
from tolaria.ui.settings.hosts_page import HostsPage
from tolaria.ui.settings.mcp_page import McpPage
from tolaria.ui.settings.shortcuts_page import ShortcutsPage


def open_file(path: Path) -> None:
    """Open a settings file in the user's editor (whatever the desktop has for .toml)."""
    QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))


class SettingsDialog(QDialog):
    #: Write the settings and the edited agents' overrides: Settings, dict[str, AgentOverrides].
    save_requested = Signal(object, object)
    #: Write a custom agent's manifest: data, the id it replaces (or None).
    custom_agent_save_requested = Signal(object, object)
    #: The user picked a theme on the Behaviour page (apply and keep it now): name.
    theme_change_requested = Signal(str)
    #: The window closed: running Tests are cancelled.
    closed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        self.setWindowTitle("Preferences — Tolaria")
        self.setModal(False)
        self.resize(860, 640)
        self._settings = Settings()
        self._file: Path | None = None
        self.custom_dialog: CustomAgentDialog | None = None
        layout = QVBoxLayout(self)
        banner_row = QHBoxLayout()
        self.file_problem = ErrorLabel("settingsFileProblem", self)
        theme.follow_color(self.file_problem, theme.warning_color)
        banner_row.addWidget(self.file_problem, 1)
        self.open_file_button = QPushButton("Open the file", self)
        self.open_file_button.setObjectName("openSettingsFile")
        self.open_file_button.setAutoDefault(False)
        self.open_file_button.setVisible(False)
        self.open_file_button.clicked.connect(self._on_open_file_button_clicked)
        banner_row.addWidget(self.open_file_button)
        layout.addLayout(banner_row)
        self.tabs = QTabWidget(self)
        self.tabs.setObjectName("settingsTabs")
        self.agents = AgentsPage(self)
        self.mcp = McpPage(self)
        self.hosts = HostsPage(self)
        self.shortcuts = ShortcutsPage(self)
        self.behaviour = BehaviourPage(self)
        self.checkpoints = CheckpointsPage(self)
        self.tabs.addTab(self.agents, "&Agents")
        self.tabs.addTab(self.mcp, "&MCP servers")
        self.tabs.addTab(self.hosts, "&Hosts")
        self.tabs.addTab(self.shortcuts, "&Shortcuts")
        self.tabs.addTab(self.behaviour, "&Behaviour")
        self.tabs.addTab(self.checkpoints, "Chec&kpoints")
        layout.addWidget(self.tabs, 1)
        self.save_error = ErrorLabel("settingsSaveError", self)
        layout.addWidget(self.save_error)
        buttons = QHBoxLayout()
        self.status = QLabel(self)
        self.status.setObjectName("settingsStatus")
        theme.follow_color(self.status, theme.muted_text)
        buttons.addWidget(self.status, 1)
        self.save_button = QPushButton("Save", self)
        self.save_button.setObjectName("settingsSave")
        self.save_button.setAutoDefault(False)
        self.save_button.setToolTip("Changes apply to the next run; running chats are unaffected")
        self.save_button.clicked.connect(self._on_save_button_clicked)
        self.save_button.setProperty("primary", True)
        close = QPushButton("Close", self)
        close.setObjectName("settingsClose")
        close.setAutoDefault(False)
        close.clicked.connect(self.close)
        buttons.addWidget(self.save_button)
        buttons.addWidget(close)
        layout.addLayout(buttons)
        # Flat, themed controls (no raised grey buttons or stock tabs): the chat's look.
        theme.follow(self, preferences_css)
        for page in (self.agents, self.shortcuts, self.behaviour):
            page.changed.connect(self._on_page_changed)
        self.agents.add_requested.connect(self._on_agents_add_requested)
        self.tabs.currentChanged.connect(self._on_tabs_current_changed)
        self.behaviour.theme_chosen.connect(self.theme_change_requested)

    # -- facts --------------------------------------------------------------------------------
    def set_settings(self, settings: Settings) -> None:
        self._settings = settings
        self.shortcuts.set_settings(settings)
        self.behaviour.set_settings(settings)
        self._refresh_save()

    def settings_changed(self, settings: Settings) -> None:
        """The settings were saved from elsewhere while this window is open (View → Theme):
        they become the base of the next Save, and the user's unsaved edits here are kept, so
        a Save never writes back a value this window holds stale."""
        edited = self.edited_settings()
        pending = {f.name: getattr(edited, f.name) for f in fields(Settings)
                   if getattr(edited, f.name) != getattr(self._settings, f.name)}
        self._settings = settings
        shown = replace(settings, **pending)
        self.shortcuts.set_settings(shown)
        self.behaviour.set_settings(shown)
        self._refresh_save()

    def set_agents(self, manifests: Sequence[Manifest], overrides: Mapping[str, AgentOverrides],
                   model_lists: set[str], select: str | None = None) -> None:
        self.agents.set_agents(manifests, overrides, model_lists, select)
        self._refresh_save()

    def show_file_problems(self, path: Path, problems: Sequence[str]) -> None:
        """The settings file is broken: say where and why; saving will be refused."""
        self._file = path
        text = ("\n".join(f"⚠ {p}" for p in problems)
                + "\nSaving is refused until the file is fixed (it is never overwritten)."
                if problems else "")
        self.file_problem.show_message(text)
        self.open_file_button.setVisible(bool(problems))

    def show_saved(self) -> None:
        self.save_error.show_message("")
        self.agents.mark_saved()
        self.status.setText("Saved. New runs use these settings.")
        self._refresh_save()

    def show_save_failed(self, message: str) -> None:
        self.status.clear()
        self.save_error.show_message(message)
        self.open_file_button.setVisible(self._file is not None)

    def show_detection(self, agent_id: str, found: Detection) -> None:
        self.agents.show_detection(agent_id, found)

    def show_test_result(self, agent_id: str, result: Any) -> None:
        if result is None:
            self.agents.show_test_result(agent_id, None, "")
            return
        ok = bool(getattr(result, "ok", False))
        version = getattr(result, "version", None)
        message = str(getattr(result, "message", "") or "")
        detail = str(getattr(result, "detail", "") or "")
        if ok:
            # One line of the agent's answer: markdown heading marks say nothing here.
            reply = " ".join(re.sub(r"#{1,6}\s", " ", detail).split())
            reply = reply if len(reply) <= 160 else reply[:159] + "…"
            text = "✓ Works" + (f": {version}" if version else "") + (
                f" — {message}" if message else "") + (
                f"\nIts reply: “{reply}”" if reply else "\nIt answered with no text.")
        else:
            text = "✗ " + (message or "The test failed") + (f"\n{detail}" if detail else "")
        self.agents.show_test_result(agent_id, ok, text)

    def show_models(self, agent_id: str, models: Sequence[str], error: str) -> None:
        self.agents.show_models(agent_id, models, error)

    def open_custom_agent(self, data: dict[str, Any] | None, replace_id: str | None) -> None:
        if self.custom_dialog is not None:
            self.custom_dialog.close()
        dialog = CustomAgentDialog(data, replace_id, frozenset(self.agents.agent_ids()), self)
        dialog.save_requested.connect(self.custom_agent_save_requested)
        dialog.finished.connect(self._on_custom_dialog_finished)
        self.custom_dialog = dialog
        dialog.open()

    def custom_agent_saved(self, agent_id: str) -> None:
        if self.custom_dialog is not None:
            self.custom_dialog.accept()
        self.status.setText(f"Saved the agent {agent_id}.")
        self.agents.select(agent_id)

    def custom_agent_failed(self, message: str) -> None:
        if self.custom_dialog is not None:
            self.custom_dialog.show_failure(message)

    # -- queries ------------------------------------------------------------------------------
    def edited_settings(self) -> Settings:
        return self.behaviour.apply(self.shortcuts.apply(self._settings))

    def can_save(self) -> bool:
        return (self.shortcuts.validate() and self.agents.is_valid()
                and self.behaviour.is_valid())

    # -- intents ------------------------------------------------------------------------------
    def _refresh_save(self) -> None:
        self.save_button.setEnabled(self.can_save())

    def _on_page_changed(self) -> None:
        self.status.clear()
        self._refresh_save()

    def _on_save_button_clicked(self) -> None:
        if self.can_save():
            self.save_requested.emit(self.edited_settings(), self.agents.pending())

    def _on_tabs_current_changed(self, _index: int) -> None:
        # MCP servers saves each server with its own button: one Save there, not two.
        self.save_button.setVisible(self.tabs.currentWidget() is not self.mcp)
        # The chosen tab's title is bold, so wider: the bar is laid out again for it (else the
        # last tab no longer fits and the bar shows scroll arrows).
        self.tabs.tabBar().updateGeometry()

    def _on_agents_add_requested(self) -> None:
        self.open_custom_agent(None, None)

    def _on_custom_dialog_finished(self, _result: int) -> None:
        self.custom_dialog = None

    def _on_open_file_button_clicked(self) -> None:
        if self._file is not None:
            open_file(self._file)

    def done(self, result: int) -> None:
        # Every way out ends here: Close, the title bar (closeEvent -> reject) and Esc.
        was_visible = self.isVisible()
        self.agents.stop_timers()
        self.mcp.stop_timers()
        super().done(result)
        if was_visible:
            self.closed.emit()


def preferences_css() -> str:
    """The Preferences window's style sheet, from the current theme's colours."""
    c = theme.css
    border, accent, base, text = (c(theme.border()), c(theme.accent()), c(theme.base()),
                                  c(theme.text()))
    hover, muted, card = c(theme.hover_background()), c(theme.muted_text()), c(
        theme.card_background())
    # The combo boxes' arrow: a chevron in a grey that reads on both themes (Fusion's own
    # arrow box has square corners inside the rounded field).
    chevron = (paths.package_data("resources") / "icons" / "chevron-down.svg").as_posix()
    return (
        f"QTabWidget::pane {{ border: 1px solid {border}; border-radius: 8px; top: -1px; }}"
        f" QTabBar::tab {{ background: transparent; border: none; padding: 6px 14px;"
        f" color: {muted}; border-bottom: 2px solid transparent; }}"
        f" QTabBar::tab:selected {{ color: {text}; border-bottom: 2px solid {accent};"
        f" font-weight: 600; }}"
        f" QTabBar::tab:hover {{ color: {text}; }}"
        f" QListWidget, QTableWidget {{ background: {base}; border: 1px solid {border};"
        f" border-radius: 6px; padding: 2px; }}"
        f" QListWidget::item {{ padding: 4px 6px; border-radius: 4px; }}"
        f" QListWidget::item:selected {{ background: {accent}; color: #ffffff; }}"
        f" QListWidget::item:hover:!selected {{ background: {hover}; }}"
        f" QPushButton {{ background: {base}; border: 1px solid {border}; color: {text};"
        f" border-radius: 6px; padding: 4px 12px; }}"
        f" QPushButton:hover {{ background: {hover}; }}"
        f" QPushButton:disabled {{ color: {muted}; background: {card}; }}"
        f" QPushButton[primary=\"true\"] {{ background: {accent}; border-color: {accent};"
        f" color: #ffffff; font-weight: 600; }}"
        f" QLineEdit, QComboBox {{ background: {base}; border: 1px solid {border};"
        f" border-radius: 6px; padding: 3px 6px; }}"
        f" QLineEdit:focus, QComboBox:focus {{ border-color: {accent}; }}"
        f" QComboBox::drop-down {{ border: none; width: 20px; }}"
        f" QComboBox::down-arrow {{ image: url(\"{chevron}\"); width: 10px; height: 10px; }}"
        f" QHeaderView {{ background: {base}; border: none; }}"
        f" QHeaderView::section {{ background: {base}; border: none;"
        f" border-bottom: 1px solid {border}; padding: 4px 6px; color: {muted};"
        f" font-weight: 600; }}"
        f" QTableWidget::item {{ padding: 4px 6px; }}"
        + theme.indicator_css()
    )
