"""Which agents each host has, for the window (issue 25 item 5, ADR 0034): a look runs as a task
on the window's loop (an ssh client is a child process read asynchronously: the window never
waits on a host), one look per host at a time, its answer kept per host until the user looks
again or the hosts' settings change."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from tolaria.config.remote_hosts import load_target
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.remote.askpass_desk import DEFAULT_TIMEOUT_S
from tolaria.core.remote.discover import DISCOVERY_TIMEOUT_S, HostAgents, discover
from tolaria.core.remote.hosts import BadDestination
from tolaria.qt.askpass_control import EnvFor, asking
from tolaria.qt.tasks import TaskSet


class HostAgentsControl(QObject):
    #: A look at a host ended: the host (as the chat names it), HostAgents.
    host_agents_found = Signal(str, object)

    def __init__(self, tasks: TaskSet, manifests: Callable[[], Sequence[Manifest]],
                 settings_file: Callable[[], Path | None] = lambda: None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.manifests = manifests
        self.settings_file = settings_file
        self._found: dict[str, HostAgents] = {}
        self._looking: dict[str, asyncio.Task[None]] = {}
        self._closed = False
        #: The window's askpass (``AskpassControl.env_for``: conversation id, ssh command,
        #: host): a look may ask ssh's questions too (ADR 0033). None: BatchMode (a refusal).
        self.askpass: EnvFor | None = None
        #: Which chat asks for a look at a host: the chat shown when it is on that host, else
        #: 0 (the question then opens in a dialog).
        self.asker: Callable[[str], int] = lambda _host: 0

    def cached(self, host: str) -> HostAgents | None:
        return self._found.get(host)

    def look(self, host: str, refresh: bool = False) -> None:
        """Say what ``host`` has: the kept answer, or a new look (``refresh``: always)."""
        if not host or self._closed:
            return
        if not refresh and host in self._found:
            self.host_agents_found.emit(host, self._found[host])
            return
        if host in self._looking:
            return
        task = self.tasks.spawn(self._look(host), name=f"host-agents-{host}")
        self._looking[host] = task
        task.add_done_callback(lambda _t: self._looking.pop(host, None))

    async def _look(self, host: str) -> None:
        try:
            target = load_target(host, self.settings_file())
        except BadDestination as exc:
            found = HostAgents(host, error=str(exc))
        else:
            target, asks = asking(target, self.askpass, self.asker(host), host)
            # ssh may wait for the user's answer: the look waits as long as the question.
            timeout = DISCOVERY_TIMEOUT_S + (DEFAULT_TIMEOUT_S if asks else 0)
            found = dataclasses.replace(
                await discover(target, list(self.manifests()), timeout=timeout), host=host)
        if self._closed:
            return
        self._found[host] = found
        self.host_agents_found.emit(host, found)

    def forget(self) -> None:
        """The hosts' settings or the agents changed: the next look is a new one."""
        self._found.clear()

    def shutdown(self) -> None:
        """The app is closing: looks are cancelled (their ssh clients killed and reaped)."""
        self._closed = True
        for task in list(self._looking.values()):
            task.cancel()

    async def aclose(self) -> None:
        """``shutdown``, then wait until every look's ssh client is killed and reaped."""
        tasks = list(self._looking.values())
        self.shutdown()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
