"""Listing a host's folders for the remote folder picker (tolaria/ui/chat/remote_folders.py):
``tolaria.core.remote.folders.list_folder`` in a thread (it runs ssh and waits, with a time
limit), its answer handed back to the dialog on the GUI thread. Each request is one task; the
dialog ignores answers to requests it no longer waits for."""

from __future__ import annotations

import asyncio
from typing import Protocol

from tolaria.config.remote_hosts import load_target
from tolaria.core.remote.folders import Listing, list_folder
from tolaria.core.remote.hostcall import HostError
from tolaria.core.remote.hosts import BadDestination
from tolaria.support.tasks import TaskSet


class FolderView(Protocol):
    def show_listing(self, asked: str, listing: Listing) -> None: ...

    def show_error(self, asked: str, message: str) -> None: ...


class FolderLister:
    """Answers one dialog's listing requests for ``host`` (a chat's host as stored)."""

    def __init__(self, host: str, view: FolderView, tasks: TaskSet | None = None) -> None:
        self.host = host
        self.view = view
        self.tasks = tasks or TaskSet()

    def request(self, path: str) -> None:
        """List ``path`` on the host off the GUI thread (a slot for ``listing_requested``)."""
        self.tasks.spawn(self._list(path), name=f"remote-folders-{self.host}")

    async def _list(self, path: str) -> None:
        try:
            target = load_target(self.host)
            listing = await asyncio.to_thread(list_folder, target, path)
        except (BadDestination, HostError) as exc:
            self.view.show_error(path, str(exc))
            return
        self.view.show_listing(path, listing)
