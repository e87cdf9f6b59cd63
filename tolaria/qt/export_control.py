"""The window's File → Export…: ``export_to_file`` (tolaria/chats/export) on a worker thread, so
a long chat never freezes the window, then ``export_finished`` with the file or why not.

The same export as ``tolaria export`` (tolaria/cli/export_cmd.py): atomic, secrets masked.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from tolaria.chats.export import ChatNotFound, ExportError, export_to_file
from tolaria.core.store.db import Store
from tolaria.qt.bridge import Bridge
from tolaria.qt.tasks import TaskSet


class ChatExport:
    """Runs the window's exports (several may run at once: each writes its own file)."""

    def __init__(self, bridge: Bridge, store: Store, tasks: TaskSet) -> None:
        self.bridge = bridge
        self.store = store
        self.tasks = tasks

    def start(self, conversation_id: int, fmt: str, path: str) -> None:
        self.tasks.spawn(self._run(conversation_id, fmt, Path(path)), name="export-chat")

    async def _run(self, conversation_id: int, fmt: str, path: Path) -> None:
        try:
            written = await asyncio.to_thread(export_to_file, self.store, conversation_id, fmt,
                                              path)
        except ChatNotFound:
            self.bridge.export_finished.emit("", "the chat was deleted")
        except (ExportError, ValueError) as exc:
            self.bridge.export_finished.emit("", str(exc))
        except sqlite3.Error as exc:
            self.bridge.export_finished.emit("", f"the store could not be read: {exc}")
        else:
            self.bridge.export_finished.emit(str(written), "")
