"""Preferences → MCP servers, the backend side: writes ``[mcp]`` of settings.toml
(tolaria/config/mcp_edit.py) and runs each server's Test as a task (tolaria/core/mcp/
servertest.py), cancelled by Cancel, by the window closing and by the app's shutdown (the
server's whole tree is ended before the Test reports).
"""

from __future__ import annotations

import asyncio
import logging
import os

from PySide6.QtCore import QObject, Signal

from tolaria.config.mcp import McpSettings, load_mcp
from tolaria.config.mcp_edit import remove_server, save_server, set_on_failure
from tolaria.core.mcp.servers import DEFAULT_TEST_TIMEOUT_S, McpConfigError, McpServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.qt.settings_controller import file_error_text
from tolaria.qt.tasks import TaskSet
from tolaria.support.tomlfile import SettingsFileError

log = logging.getLogger(__name__)


class McpControl(QObject):
    #: The servers in the file changed (saved here, or re-read): McpSettings.
    servers_changed = Signal(object)
    #: A server was written: its name.
    server_saved = Signal(str)
    #: A write was refused; nothing was written: message.
    save_failed = Signal(str)
    #: A Test ended: key, McpTestResult (None when cancelled).
    test_finished = Signal(str, object)

    def __init__(self, tasks: TaskSet, registry: ProcessRegistry | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        #: Tests are registered like runs: ``tolaria streams`` lists them, stop all ends them.
        self.registry = registry
        #: How long a Test waits for the server's answers.
        self.timeout = DEFAULT_TEST_TIMEOUT_S
        self.grace_s = 2.0
        self._tests: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    def settings(self) -> McpSettings:
        return load_mcp()

    # -- writing ------------------------------------------------------------------------------
    def save(self, server: McpServer, replace: str | None, base: McpServer | None = None
             ) -> None:
        try:
            saved = save_server(server, replace, base=base)
        except SettingsFileError as exc:
            self.save_failed.emit(file_error_text(exc))
            return
        except (McpConfigError, OSError) as exc:
            self.save_failed.emit(f"Not saved: {exc}")
            return
        self.server_saved.emit(saved.name)  # the window re-reads the file then

    def remove(self, name: str) -> None:
        try:
            remove_server(name)
        except SettingsFileError as exc:
            self.save_failed.emit(file_error_text(exc))
            return
        except OSError as exc:
            self.save_failed.emit(f"Not removed: {exc}")
            return
        self.servers_changed.emit(load_mcp())

    def set_on_failure(self, value: str) -> None:
        try:
            set_on_failure(value)
        except SettingsFileError as exc:
            self.save_failed.emit(file_error_text(exc))
        except (McpConfigError, OSError) as exc:
            self.save_failed.emit(f"Not saved: {exc}")
        self.servers_changed.emit(load_mcp())  # what the file says now, saved or not

    # -- the Test -----------------------------------------------------------------------------
    def test(self, key: str, server: McpServer, cwd: str | None = None) -> None:
        if self._closed or key in self._tests:
            return
        task = self.tasks.spawn(self._test(key, server, cwd), name=f"mcp-test-{key}")
        self._tests[key] = task
        task.add_done_callback(lambda _t: self._tests.pop(key, None))

    async def _test(self, key: str, server: McpServer, cwd: str | None) -> None:
        # The MCP SDK (and the web stack it brings) is imported for a Test only: at start-up
        # it would cost the window ~30 MB for a page most sessions never open.
        from tolaria.core.mcp.servertest import test_server

        folder = cwd if cwd and os.path.isdir(cwd) else None
        try:
            result = await test_server(server, timeout=self.timeout, cwd=folder,
                                       registry=self.registry, grace=self.grace_s)
        except asyncio.CancelledError:
            self.test_finished.emit(key, None)
            raise
        self.test_finished.emit(key, result)

    def testing(self, key: str) -> bool:
        return key in self._tests

    def cancel_test(self, key: str) -> None:
        task = self._tests.get(key)
        if task is not None:
            task.cancel()

    def cancel_tests(self) -> None:
        for task in list(self._tests.values()):
            task.cancel()

    def shutdown(self) -> None:
        """The app is closing: cancel the Tests, start no more."""
        self._closed = True
        self.cancel_tests()
