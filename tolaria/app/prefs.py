"""Composition of the Preferences window: the dialog's intents to the settings controller, its
facts back to the dialog, the chat window and the chat controller (part of the composition root,
tolaria/app/main.py).

What a save changes takes effect at once for what comes next: shortcuts are re-bound, the
picker is refilled (disabled agents hidden), detection runs again with the overrides, and the
next run is built with the new overrides, grace period and polite window. Running runs keep
what they started with.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from tolaria.chats.service import agent_environment
from tolaria.config.agents import AgentOverrides, manifest_data
from tolaria.config.mcp import McpSettings
from tolaria.config.settings import Settings, settings_path
from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest
from tolaria.core.mcp.forms import plan as mcp_plan
from tolaria.core.mcp.servers import McpServer
from tolaria.qt.checkpoint_storage_control import CheckpointStorageControl
from tolaria.qt.controller import ChatController
from tolaria.qt.host_agents import HostAgentsControl
from tolaria.qt.hosts_control import HostsControl
from tolaria.qt.mcp_control import McpControl
from tolaria.qt.settings_controller import SettingsController
from tolaria.qt.tasks import TaskSet
from tolaria.ui.settings import SettingsDialog
from tolaria.ui.settings.dialog import open_file
from tolaria.ui.window.main_window import MainWindow

log = logging.getLogger(__name__)

#: Why an agent without an MCP form in its manifest gets no server from Tolaria.
NO_FORM = "Tolaria cannot hand them MCP servers (their own MCP settings apply)"


class Preferences:
    def __init__(self, window: MainWindow, chat: ChatController, settings: SettingsController,
                 tasks: TaskSet) -> None:
        self.window = window
        self.chat = chat
        self.settings = settings
        self.tasks = tasks
        self.dialog: SettingsDialog | None = None
        self.storage = CheckpointStorageControl(chat.store, tasks, self._on_turns_noted)
        self.mcp = McpControl(tasks, settings.registry)
        self.mcp.servers_changed.connect(self._on_mcp_servers_changed)
        self.mcp.server_saved.connect(self._on_mcp_server_saved)
        self.mcp.save_failed.connect(self._on_mcp_save_failed)
        self.mcp.test_finished.connect(self._on_mcp_test_finished)
        #: Which agents each host has (the picker of a chat on a host; Preferences' Test there).
        self.hosts = HostAgentsControl(tasks, self._effective_manifests)
        picker = window.header.agent_picker
        picker.host_agents_requested.connect(self.hosts.look)
        self.hosts.host_agents_found.connect(picker.set_host_agents)
        #: Preferences → Hosts: ``[hosts."NAME"]`` written at once.
        self.host_settings = HostsControl()
        self.host_settings.hosts_changed.connect(self._on_hosts_changed)
        self.host_settings.host_saved.connect(self._on_host_saved)
        self.host_settings.save_failed.connect(self._on_host_save_failed)
        self.apply_to_runs(settings.settings)
        chat.run_config.overrides = settings.overrides
        window.preferences_requested.connect(self.open)
        window.open_file_requested.connect(open_file)
        window.theme_change_requested.connect(self.choose_theme)
        window.header.agent_picker.popup_opened.connect(self._on_agent_picker_popup_opened)
        settings.settings_saved.connect(self._on_settings_saved)
        settings.save_failed.connect(self._on_save_failed)
        settings.agents_changed.connect(self._on_agents_changed)
        settings.detection_finished.connect(self._on_detection_finished)
        settings.test_finished.connect(self._on_test_finished)
        settings.models_listed.connect(self._on_models_listed)
        settings.custom_agent_saved.connect(self._on_custom_agent_saved)
        settings.custom_agent_failed.connect(self._on_custom_agent_failed)

    def apply_to_runs(self, values: Settings) -> None:
        self.chat.grace_s = values.grace_seconds
        self.chat.retry_limit_s = values.retry_limit_seconds
        self.chat.run_config.settings = values
        self.window.limit_defaults = values.run_limits()

    def _effective_manifests(self) -> list[Manifest]:
        """Every agent as its next run would start it (overrides applied)."""
        return [m for agent in self.settings.adapters.manifests
                if (m := self.settings.effective(agent)) is not None]

    def show_manifests(self) -> None:
        self.window.set_manifests(self.settings.manifests(), disabled=self.settings.disabled())

    async def detect_agents(self) -> None:
        """Detection for the picker, as the next run would find each program."""
        found = await self.settings.detect_all()
        self.chat.bridge.agents_detected.emit(found)

    def _on_agent_picker_popup_opened(self) -> None:
        if not self.settings.closed:
            self.tasks.spawn(self.detect_servers(), name="detect-servers")

    async def detect_servers(self) -> None:
        """The local model servers again: one started since (or stopped) shows so at once."""
        found = await self.settings.detect_servers()
        self.chat.bridge.agents_detected.emit(found)

    # -- the dialog ---------------------------------------------------------------------------
    def open(self) -> SettingsDialog:
        dialog = self.dialog
        if dialog is None:
            dialog = self.dialog = SettingsDialog(self.window)
            dialog.save_requested.connect(self._on_dialog_save_requested)
            dialog.custom_agent_save_requested.connect(self.settings.save_custom_agent)
            dialog.closed.connect(self.settings.cancel_tests)
            dialog.closed.connect(self.mcp.cancel_tests)
            dialog.theme_change_requested.connect(self.choose_theme)
            agents = dialog.agents
            agents.edit_requested.connect(self._on_agents_edit_requested)
            agents.duplicate_requested.connect(self.settings.duplicate)
            agents.remove_requested.connect(self.settings.remove)
            agents.reset_requested.connect(self.settings.reset)
            agents.detect_requested.connect(self.settings.detect)
            agents.test_requested.connect(self._on_agents_test_requested)
            agents.test_cancel_requested.connect(self.settings.cancel_test)
            agents.models_requested.connect(self.settings.list_models)
            dialog.hosts.save_requested.connect(self.host_settings.save)
            dialog.hosts.remove_requested.connect(self.host_settings.remove)
            servers = dialog.mcp
            servers.save_requested.connect(self.mcp.save)
            servers.remove_requested.connect(self.mcp.remove)
            servers.on_failure_requested.connect(self.mcp.set_on_failure)
            servers.test_requested.connect(self._on_mcp_test_requested)
            servers.test_cancel_requested.connect(self.mcp.cancel_test)
            page = dialog.checkpoints
            page.refresh_requested.connect(self.storage.refresh)
            page.prune_preview_requested.connect(self.storage.preview)
            page.prune_requested.connect(self.storage.prune)
            self.storage.usage_ready.connect(page.show_usage)
            self.storage.plan_ready.connect(page.show_prune_plan)
            self.storage.pruned.connect(page.show_pruned)
        if not dialog.isVisible():
            dialog.agents.discard_edits()
            dialog.mcp.discard_edits()
            dialog.hosts.discard_edits()
            self._fill_hosts(dialog)
            dialog.set_settings(self.settings.settings)
            self._fill_agents(dialog)
            self._fill_mcp(dialog, self.mcp.settings())
            dialog.show_file_problems(settings_path(), self.settings.file_problems())
            self.storage.refresh()
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def _fill_agents(self, dialog: SettingsDialog, select: str | None = None) -> None:
        manifests = self.settings.manifests()
        lists = {m.id for m in manifests if self.settings.can_list_models(m)}
        dialog.set_agents(manifests, self.settings.overrides, lists, select)

    def _fill_hosts(self, dialog: SettingsDialog, select: str | None = None) -> None:
        hosts, problem = self.host_settings.hosts()
        dialog.hosts.set_hosts(hosts, select)
        dialog.agents.editor.set_test_hosts(list(hosts))
        if problem:
            dialog.hosts.editor.general_error.show_message(problem)

    def _fill_mcp(self, dialog: SettingsDialog, servers: McpSettings,
                  select: str | None = None) -> None:
        """The MCP page: the servers in the file, and the agents one can be given (every agent
        with a program: a direct model chat runs no MCP client)."""
        agents = [(m.id, m.name) for m in self.settings.manifests()
                  if m.protocol != OPENAI_CHAT]
        dialog.mcp.test_timeout = self.mcp.timeout
        dialog.mcp.plan = self._mcp_plan
        dialog.mcp.set_servers(servers, agents, select)

    def _mcp_plan(self, server: McpServer) -> list[tuple[str, str]]:
        """Which agents get the server, by the rule a run applies (tolaria/core/mcp/forms.py
        ``plan``: the agent's form and transports, ``${VAR}`` set, the command found) over the
        environment each agent would start with; agents left out for the same reason share a
        line, so twenty agents make a few lines."""
        gets: list[str] = []
        why_not: dict[str, list[str]] = {}
        for manifest in self.settings.manifests():
            if manifest.protocol == OPENAI_CHAT or not server.for_agent(manifest.id):
                continue
            verdict = mcp_plan(manifest, [server], agent_environment(manifest))
            if verdict.passed:
                gets.append(manifest.name)
            elif not manifest.mcp.takes_servers:
                why_not.setdefault(NO_FORM, []).append(manifest.name)
            else:
                reason = verdict.left_out[0][1].replace(manifest.name, "it")
                why_not.setdefault(reason, []).append(manifest.name)
        lines = [("Gets it", ", ".join(gets))] if gets else []
        lines += [(f"Not passed to {', '.join(names)}", reason)
                  for reason, names in why_not.items()]
        return lines

    def close(self) -> None:
        """The app is closing: the window goes, Tests are cancelled, nothing new starts."""
        self.settings.shutdown()
        self.mcp.shutdown()
        self.hosts.shutdown()
        if self.dialog is not None:
            self.dialog.close()

    # -- intents ------------------------------------------------------------------------------
    def choose_theme(self, name: str) -> None:
        """View → Theme or Preferences → Behaviour: applied now (the View menu shows it) and
        kept as ``[appearance] theme`` at once, not on the dialog's Save."""
        self.window.view_menu.set_current(name)
        if name != self.settings.settings.theme:
            self.settings.save(replace(self.settings.settings, theme=name))

    def _on_dialog_save_requested(self, values: Settings,
                                  overrides: dict[str, AgentOverrides]) -> None:
        if not self.settings.save(values):
            return
        if overrides and not self.settings.save_overrides(overrides):
            return
        if self.dialog is not None:
            self.dialog.set_settings(self.settings.settings)  # as saved (with hand-edits)
            self.dialog.show_saved()

    def _on_agents_edit_requested(self, agent_id: str) -> None:
        manifest = self.settings.adapters.manifests.get(agent_id)
        if manifest is None or self.dialog is None:
            return
        self.dialog.open_custom_agent(manifest_data(manifest), agent_id)

    def _on_agents_test_requested(self, agent_id: str, overrides: AgentOverrides,
                                  host: str = "") -> None:
        self.settings.test(agent_id, overrides, overrides.cwd or self.window.default_cwd, host)

    def _on_mcp_test_requested(self, key: str, server: McpServer) -> None:
        # In the folder new chats start in: a server's relative paths mean the same there.
        self.mcp.test(key, server, self.window.default_cwd)

    # -- facts --------------------------------------------------------------------------------
    def _on_turns_noted(self, conversation_ids: set[int]) -> None:
        """A prune took some visible turns' checkpoints: their chats show the note now."""
        for conversation_id in conversation_ids:
            self.chat._announce_changes(conversation_id)

    def _on_settings_saved(self, values: Settings) -> None:
        problems = self.window.apply_settings(values)
        if problems:
            self.window.show_problems(problems)
        self.apply_to_runs(values)
        if self.dialog is not None:  # saved from elsewhere (the View menu): no stale copy there
            self.dialog.settings_changed(values)

    def _on_save_failed(self, message: str) -> None:
        if self.dialog is not None:
            self.dialog.show_save_failed(message)

    def _on_agents_changed(self, manifests: Sequence[Manifest],
                           overrides: dict[str, AgentOverrides]) -> None:
        self.chat.run_config.overrides = overrides
        self.show_manifests()
        self.hosts.forget()  # a program or its environment may have changed
        self.window.header.agent_picker.forget_hosts()
        if self.dialog is not None:
            self._fill_agents(self.dialog)
        if not self.settings.closed:
            self.tasks.spawn(self.detect_agents(), name="detect-agents")

    def _on_detection_finished(self, agent_id: str, found: object) -> None:
        if self.dialog is not None:
            self.dialog.show_detection(agent_id, found)  # type: ignore[arg-type]

    def _on_test_finished(self, agent_id: str, result: object) -> None:
        if self.dialog is not None:
            self.dialog.show_test_result(agent_id, result)

    def _on_models_listed(self, agent_id: str, models: list[str], error: str) -> None:
        if self.dialog is not None:
            self.dialog.show_models(agent_id, models, error)

    def _on_hosts_changed(self, hosts: object, select: object) -> None:
        """A host was written or removed: the page, the Test's hosts, and what each host was
        found to have (its programs or environment may differ now)."""
        self.hosts.forget()
        self.window.header.agent_picker.forget_hosts()
        if self.dialog is not None:
            self._fill_hosts(self.dialog, select if isinstance(select, str) else None)

    def _on_host_saved(self, name: str) -> None:
        if self.dialog is not None:
            self.dialog.hosts.show_saved(name)
            self.dialog.status.setText(f"Saved the host {name}. New runs there use it.")

    def _on_host_save_failed(self, problems: list[tuple[str, str]]) -> None:
        if self.dialog is not None:
            self.dialog.hosts.show_save_failed(problems)

    def _on_mcp_servers_changed(self, servers: McpSettings) -> None:
        if self.dialog is not None:
            self._fill_mcp(self.dialog, servers)

    def _on_mcp_server_saved(self, name: str) -> None:
        if self.dialog is not None:
            self.dialog.mcp.show_saved(name)
            self._fill_mcp(self.dialog, self.mcp.settings(), select=name)
            self.dialog.status.setText(f"Saved the MCP server {name}. New runs get it.")

    def _on_mcp_save_failed(self, message: str) -> None:
        if self.dialog is not None:
            self.dialog.mcp.show_save_failed(message)

    def _on_mcp_test_finished(self, key: str, result: object) -> None:
        if self.dialog is not None:
            self.dialog.mcp.show_test_result(key, result)

    def _on_custom_agent_saved(self, agent_id: str) -> None:
        if self.dialog is not None:
            self.dialog.custom_agent_saved(agent_id)

    def _on_custom_agent_failed(self, message: str) -> None:
        if self.dialog is not None:
            self.dialog.custom_agent_failed(message)
