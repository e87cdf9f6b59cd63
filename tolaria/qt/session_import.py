"""The window's "Import sessions from CLIs…": ``import_sessions`` (tolaria/chats/importing.py)
off the event loop, then every imported chat announced so the sidebar shows it, and the report
(or why it failed) with ``sessions_imported``.

The same import as ``tolaria import`` (tolaria/cli/importing.py); the home folder is read when
the user asks (``~`` of this process), so a test points ``HOME`` at a copy of real CLI files.
Only one import runs at a time: asking again meanwhile is ignored (the first one's report comes).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

from tolaria.chats.importing import ImportReport, import_sessions
from tolaria.core.store.db import Store
from tolaria.qt.bridge import Bridge
from tolaria.qt.tasks import TaskSet


class SessionImport:
    """Runs one import at a time for the window."""

    def __init__(self, bridge: Bridge, store: Store, tasks: TaskSet) -> None:
        self.bridge = bridge
        self.store = store
        self.tasks = tasks
        self.running = False

    def start(self, home: Path | None = None) -> bool:
        """Import what the CLIs stored under ``home`` (default: ``~``); False when one runs."""
        if self.running:
            return False
        self.running = True
        where = home if home is not None else Path(os.path.expanduser("~"))
        self.tasks.spawn(self._run(where), name="import-sessions")
        return True

    async def _run(self, home: Path) -> None:
        report: ImportReport | None = None
        error = ""
        try:
            if not home.is_dir():
                error = f"{home} is not a folder"
            else:
                # Reading and storing many sessions takes a while: never on the GUI thread.
                report = await asyncio.to_thread(import_sessions, self.store, home)
        except (OSError, ValueError, sqlite3.Error) as exc:
            error = f"the import failed: {exc}"
        finally:
            self.running = False
        if report is not None:
            for item in report.imported:
                conversation = self.store.get_conversation(item.conversation_id)
                if conversation is not None:
                    self.bridge.conversation_saved.emit(conversation)
        self.bridge.sessions_imported.emit(report, error)
