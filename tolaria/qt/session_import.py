"""The window's "Import sessions from CLIs…": ``import_sessions`` (tolaria/chats/importing.py)
off the event loop, then every imported chat announced so the sidebar shows it, and the report
(or why it failed) with ``sessions_imported``.

The same import as ``tolaria import`` (tolaria/cli/importing.py); the home folder is read when
the user asks (``~`` of this process), so a test points ``HOME`` at a copy of real CLI files.
Only one import runs at a time: asking again meanwhile is ignored (the first one's report comes).
A session that grew since the last import adds its new turns to a chat the window may have open:
those chats are reloaded (``reload``, the controller's ``open_conversation``), which appends the
new turns to an open view and is ignored by a chat that is not open. A session whose unfinished
turn the CLI went on with (tolaria/chats/importing.py reopened it) rebuilds an open view around
that turn, so it shows its new end.

``start_on_host`` imports a host's sessions instead (tolaria/chats/host_import.py): the same
report, the chats on that host; ssh's questions go to the window's askpass (ADR 0033) and
``cancel`` kills the ssh client (the report then says it was cancelled).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tolaria.chats.host_import import import_from_host
from tolaria.chats.importing import ImportReport, import_sessions
from tolaria.config.remote_hosts import load_target
from tolaria.core.checkpoints.gitrun import Cancel
from tolaria.core.remote.hostcall import Cancelled, HostError
from tolaria.core.remote.hosts import BadDestination, Target
from tolaria.core.store.db import Store
from tolaria.qt.askpass_control import EnvFor, asking
from tolaria.qt.bridge import Bridge
from tolaria.qt.tasks import TaskSet


class SessionImport:
    """Runs one import at a time for the window."""

    def __init__(self, bridge: Bridge, store: Store, tasks: TaskSet,
                 reload: Callable[[int], None] | None = None) -> None:
        self.bridge = bridge
        self.store = store
        self.tasks = tasks
        #: Sends a conversation's stored turns to its view again (history_loaded).
        self.reload = reload
        self.running = False
        #: The window's askpass (``AskpassControl.env_for``: conversation id, ssh command,
        #: host): an import from a host may ask ssh's questions (in a dialog). None: BatchMode.
        self.askpass: EnvFor | None = None
        self._cancel: Cancel | None = None
        self._on_host: asyncio.Task[None] | None = None

    def start(self, home: Path | None = None) -> bool:
        """Import what the CLIs stored under ``home`` (default: ``~``); False when one runs."""
        if self.running:
            return False
        self.running = True
        where = home if home is not None else Path(os.path.expanduser("~"))
        self.tasks.spawn(self._run(where), name="import-sessions")
        return True

    def start_on_host(self, host: str) -> bool:
        """Import what the CLIs stored on ``host``; False when an import runs."""
        if self.running or not host:
            return False
        self.running = True
        self._cancel = Cancel()
        self._on_host = self.tasks.spawn(self._run_on_host(host, self._cancel),
                                         name="import-sessions-host")
        return True

    async def aclose(self) -> None:
        """At quit: an import from a host is cancelled (ssh killed) and waited for, so the
        store is not closed under it."""
        task = self._on_host
        self.cancel()
        if task is not None and not task.done():
            await asyncio.gather(task, return_exceptions=True)

    def cancel(self) -> None:
        """The running import from a host stops: its ssh client is killed (from any thread)."""
        if self._cancel is not None:
            self._cancel.set()

    async def _run_on_host(self, host: str, cancel: Cancel) -> None:
        report: ImportReport | None = None
        known: set[int] = set()
        error = ""
        try:
            target = load_target(host)
            target, _asks = asking(target, self.askpass, 0, host)  # 0: asked in a dialog
            known, report = await asyncio.to_thread(self._import_there, host, target, cancel)
        except Cancelled:
            error = "cancelled"
        except (BadDestination, HostError) as exc:
            error = str(exc)
        except (OSError, ValueError, sqlite3.Error) as exc:
            error = f"the import failed: {exc}"
        finally:
            self.running = False
            self._cancel = None
        self._announce(report, known, error)

    def _import_there(self, host: str, target: Target,
                      cancel: Cancel) -> tuple[set[int], ImportReport]:
        known = {c.id for c in self.store.list_conversations()}
        return known, import_from_host(self.store, host, target, cancel=cancel)

    async def _run(self, home: Path) -> None:
        report: ImportReport | None = None
        known: set[int] = set()
        error = ""
        try:
            if not home.is_dir():
                error = f"{home} is not a folder"
            else:
                # Reading and storing many sessions takes a while: never on the GUI thread.
                known, report = await asyncio.to_thread(self._import, home)
        except (OSError, ValueError, sqlite3.Error) as exc:
            error = f"the import failed: {exc}"
        finally:
            self.running = False
        self._announce(report, known, error)

    def _announce(self, report: ImportReport | None, known: set[int], error: str) -> None:
        if report is not None:
            for item in report.imported:
                conversation = self.store.get_conversation(item.conversation_id)
                if conversation is not None:
                    self.bridge.conversation_saved.emit(conversation)
                if item.conversation_id not in known:
                    continue
                if item.continued:
                    self._show_again(item.conversation_id, item.continued[0])
                elif self.reload is not None and item.turns_added:  # grew: maybe open
                    self.reload(item.conversation_id)
        self.bridge.sessions_imported.emit(report, error)

    def _show_again(self, conversation_id: int, stream_id: str) -> None:
        """A turn an open view already shows was continued: the view is rebuilt around it (a
        page around a turn replaces the view's turns, as a search jump does; a chat that is not
        open ignores it)."""
        turn = self.store.turn_by_stream(stream_id)
        if turn is not None:
            self.bridge.history_loaded.emit(conversation_id,
                                            self.store.turns_around(conversation_id, turn.id))
            self.bridge.markers_loaded.emit(conversation_id, self.store.markers(conversation_id))

    def _import(self, home: Path) -> tuple[set[int], ImportReport]:
        """The chats there were before, and the import's report (on a worker thread)."""
        known = {c.id for c in self.store.list_conversations()}
        return known, import_sessions(self.store, home)
