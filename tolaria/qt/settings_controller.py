"""Turns the Preferences window's intents into settings-file and adapter calls; reports facts.

Every write goes through :mod:`tolaria.config.settings` and :mod:`tolaria.config.agents` (atomic, keeps
hand-edits). After a write the adapters are reloaded *in place* (the chat controller and the
fan-out controller hold the same ``AdapterSet``), so the next run uses them; running runs keep
the manifest they started with. Detection and the Test button run as tasks; a test is
cancelled (its process tree stopped by the runner) when the window closes.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, Signal

from tolaria.config import agents as agent_config
from tolaria.config.agents import AgentOverrides
from tolaria.config.probe import TestResult
from tolaria.config.remote_hosts import load_target
from tolaria.config.settings import Settings, SettingsFileError, load_settings, save_settings
from tolaria.core.adapters.manifest import (
    OPENAI_CHAT,
    AdapterSet,
    Manifest,
    ManifestError,
    load_adapters,
)
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.programs import discovery
from tolaria.core.remote.hosts import BadDestination
from tolaria.qt.tasks import TaskSet

log = logging.getLogger(__name__)


def _model_lister() -> Callable[..., list[str]] | None:
    """``list_models`` when this install has it (tolaria/core/modelchat/models_list.py), else None."""
    try:
        module = importlib.import_module("tolaria.core.modelchat.models_list")
    except ImportError:
        return None
    found = getattr(module, "list_models", None)
    return found if callable(found) else None


def file_error_text(exc: SettingsFileError) -> str:
    where = f"{exc.path}, line {exc.line}" if exc.line else str(exc.path)
    return f"Not saved: {where}: {exc.problem}. Fix the file (or move it away) and save again."


class SettingsController(QObject):
    #: The settings were written (and are in effect for the window): Settings.
    settings_saved = Signal(object)
    #: A write was refused or failed; nothing was changed: message.
    save_failed = Signal(str)
    #: The adapters or their overrides changed: list[Manifest], dict[str, AgentOverrides].
    agents_changed = Signal(object, object)
    #: A custom agent was written: its id.
    custom_agent_saved = Signal(str)
    #: Writing a custom agent was refused: message.
    custom_agent_failed = Signal(str)
    #: Detection of one agent finished: agent id, Detection.
    detection_finished = Signal(str, object)
    #: A Test run finished: agent id, TestResult (or None when cancelled).
    test_finished = Signal(str, object)
    #: The model list of an openai-chat agent: agent id, list[str], error message ("" if none).
    models_listed = Signal(str, object, str)

    def __init__(self, adapters: AdapterSet, tasks: TaskSet, settings: Settings,
                 registry: ProcessRegistry | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        #: Test runs are registered like chat runs (``tolaria streams`` lists them; shutdown
        #: stops them).
        self.registry = registry
        self.adapters = adapters
        self.tasks = tasks
        self.settings = settings
        self.overrides, self.override_problems = agent_config.load_overrides()
        self._tests: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    # -- queries ------------------------------------------------------------------------------
    def manifests(self) -> list[Manifest]:
        return sorted(self.adapters.manifests.values(),
                      key=lambda m: (not m.builtin, m.id != "demo", m.name.lower()))

    def overrides_of(self, agent_id: str) -> AgentOverrides:
        return self.overrides.get(agent_id, AgentOverrides())

    def default_cwd(self, agent_id: str) -> str | None:
        """The agent's default working folder for new chats, when set and still a folder."""
        cwd = self.overrides_of(agent_id).cwd
        folder = os.path.expanduser(cwd) if cwd else None
        return folder if folder and os.path.isdir(folder) else None

    @property
    def closed(self) -> bool:
        return self._closed

    def disabled(self) -> set[str]:
        return {agent for agent, o in self.overrides.items() if not o.enabled}

    def can_list_models(self, manifest: Manifest) -> bool:
        return manifest.protocol == OPENAI_CHAT and _model_lister() is not None

    def file_problems(self) -> list[str]:
        """Problems of the settings file on disk now (a broken file refuses every save)."""
        return load_settings()[1]

    # -- settings -----------------------------------------------------------------------------
    def save(self, settings: Settings) -> bool:
        try:
            # Only what the user changed in the window is written: a value edited by hand
            # meanwhile survives (and is read back below).
            save_settings(settings, base=self.settings)
        except SettingsFileError as exc:
            self.save_failed.emit(file_error_text(exc))
            return False
        except (OSError, ValueError) as exc:  # SettingsValueError: a value it cannot store
            self.save_failed.emit(f"Not saved: {exc}")
            return False
        reread, problems = load_settings()
        self.settings = settings if problems else reread
        self.settings_saved.emit(self.settings)
        return True

    def save_overrides(self, changed: dict[str, AgentOverrides]) -> bool:
        try:
            for agent_id, overrides in changed.items():
                agent_config.save_overrides(agent_id, overrides)
        except SettingsFileError as exc:
            self.save_failed.emit(file_error_text(exc))
            return False
        except (OSError, ValueError) as exc:
            self.save_failed.emit(f"Not saved: {exc}")
            return False
        self.reload()
        return True

    # -- custom agents ------------------------------------------------------------------------
    def save_custom_agent(self, data: dict[str, Any], replace_id: str | None) -> None:
        try:
            agent_config.write_custom_agent(data, replace_id=replace_id)
        except (ManifestError, OSError, ValueError) as exc:
            self.custom_agent_failed.emit(str(exc))
            return
        self.reload()
        self.custom_agent_saved.emit(str(data.get("id", "")))

    def duplicate(self, agent_id: str, new_id: str, new_name: str) -> None:
        manifest = self.adapters.manifests.get(agent_id)
        if manifest is None:
            return
        try:
            agent_config.duplicate_agent(manifest, new_id, new_name)
        except (ManifestError, OSError, ValueError) as exc:
            self.save_failed.emit(f"Could not duplicate {manifest.name}: {exc}")
            return
        self.reload()
        self.custom_agent_saved.emit(new_id)

    def remove(self, agent_id: str) -> None:
        try:
            agent_config.remove_custom_agent(agent_id)
        except (ManifestError, OSError, ValueError, SettingsFileError) as exc:
            self.save_failed.emit(f"Could not remove {agent_id}: {exc}")
            return
        self.reload()

    def reset(self, agent_id: str) -> None:
        try:
            agent_config.reset_builtin(agent_id)
        except SettingsFileError as exc:
            self.save_failed.emit(file_error_text(exc))
            return
        except (ManifestError, OSError, ValueError) as exc:
            self.save_failed.emit(f"Could not reset {agent_id}: {exc}")
            return
        self.reload()

    def reload(self) -> None:
        """Re-read adapters and overrides; the chat controller sees them at its next run."""
        fresh = load_adapters()
        self.adapters.manifests.clear()
        self.adapters.manifests.update(fresh.manifests)
        self.adapters.errors[:] = fresh.errors
        self.overrides, self.override_problems = agent_config.load_overrides()
        self.agents_changed.emit(self.manifests(), dict(self.overrides))

    # -- async: detection, test, models -------------------------------------------------------
    def effective(self, agent_id: str, overrides: AgentOverrides | None = None) -> Manifest | None:
        manifest = self.adapters.manifests.get(agent_id)
        if manifest is None:
            return None
        try:
            return agent_config.apply_overrides(manifest, overrides or self.overrides_of(agent_id))
        except ValueError:  # AgentSettingsError: shown by the form; detect the agent as shipped
            return manifest

    def detect(self, agent_id: str, overrides: AgentOverrides | None = None) -> None:
        manifest = self.effective(agent_id, overrides)
        if manifest is not None:
            self._spawn(self._detect(agent_id, manifest), name=f"detect-{agent_id}")

    async def _detect(self, agent_id: str, manifest: Manifest) -> None:
        found = await discovery.detect(manifest)
        self.detection_finished.emit(agent_id, found)

    async def detect_all(self) -> list[discovery.Detection]:
        """Every agent as its next run would find it (overrides applied), for the picker."""
        manifests = [m for agent in self.adapters.manifests
                     if (m := self.effective(agent)) is not None]
        found = await discovery.detect_all(manifests)
        for detection in found:
            self.detection_finished.emit(detection.agent, detection)
        return found

    async def detect_servers(self) -> list[discovery.Detection]:
        """Only the model endpoints (a cached TCP connect each, no process): is the local
        server up now? Cheap enough to ask whenever the picker opens."""
        manifests = [m for agent in self.adapters.manifests
                     if (m := self.effective(agent)) is not None and m.protocol == OPENAI_CHAT]
        return await discovery.detect_all(manifests)

    def test(self, agent_id: str, overrides: AgentOverrides, cwd: str, host: str = "") -> None:
        """The agent's Test, here or on ``host`` (a destination, its settings applied)."""
        manifest = self.adapters.manifests.get(agent_id)
        if manifest is None or agent_id in self._tests:
            return
        task = self._spawn(self._test(agent_id, manifest, overrides, cwd, host),
                           name=f"test-{agent_id}")
        if task is None:
            return
        self._tests[agent_id] = task
        task.add_done_callback(lambda _t: self._tests.pop(agent_id, None))

    async def _test(self, agent_id: str, manifest: Manifest, overrides: AgentOverrides,
                    cwd: str, host: str = "") -> None:
        try:
            target = load_target(host) if host else None
        except BadDestination as exc:
            self.test_finished.emit(agent_id, TestResult(False, None, str(exc)))
            return
        try:
            result = await agent_config.test_agent(manifest, overrides, cwd,
                                                   registry=self.registry,
                                                   grace_s=self.settings.grace_seconds,
                                                   target=target)
        except asyncio.CancelledError:
            self.test_finished.emit(agent_id, None)
            raise
        self.test_finished.emit(agent_id, result)

    def shutdown(self) -> None:
        """The app is closing: cancel Tests, start no more tasks (the loop is about to end)."""
        self._closed = True
        self.cancel_tests()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None] | None:
        if self._closed:
            coro.close()
            return None
        return self.tasks.spawn(coro, name=name)

    def cancel_tests(self) -> None:
        for task in list(self._tests.values()):
            task.cancel()

    def cancel_test(self, agent_id: str) -> None:
        """Stop one agent's Test (its run is aborted, its tree ended, before it reports)."""
        task = self._tests.get(agent_id)
        if task is not None:
            task.cancel()

    def testing(self, agent_id: str) -> bool:
        return agent_id in self._tests

    def list_models(self, agent_id: str, overrides: AgentOverrides) -> None:
        manifest = self.effective(agent_id, replace(overrides, model=None))
        lister = _model_lister()
        if manifest is None or lister is None:
            return
        self._spawn(self._list_models(agent_id, manifest, lister), name=f"models-{agent_id}")

    async def _list_models(self, agent_id: str, manifest: Manifest,
                           lister: Callable[..., list[str]]) -> None:
        try:
            models = await asyncio.to_thread(lister, manifest)
        except Exception as exc:  # ModelListError and friends: the message is for the user
            self.models_listed.emit(agent_id, [], str(exc) or type(exc).__name__)
            return
        self.models_listed.emit(agent_id, list(models), "")
