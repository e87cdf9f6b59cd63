"""The window's side of a git worktree per chat (tolaria/chats/worktrees.py): "New chat in a git
worktree" makes one for the new chat off the event loop and moves the chat into it; deleting a
chat whose user also asked to remove its worktree runs ``git worktree remove`` (never forced)
once the chat is gone, that is after its running turn was stopped and its tree is gone.

Each change is announced with ``worktree_changed`` (conversation id, worktree path or "", a
note for the user or ""): the sidebar's delete confirm offers the removal only for such chats,
and a refusal (uncommitted work) or a failure is said inline, never as a dialog.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from tolaria.chats import worktrees
from tolaria.chats.worktrees import ChatWorktree, WorktreeError
from tolaria.core.checkpoints import CheckpointError
from tolaria.core.store.db import Store
from tolaria.qt.bridge import Bridge
from tolaria.qt.tasks import TaskSet

_FAILURES = (WorktreeError, CheckpointError, OSError, ValueError)


class WorktreeControl:
    def __init__(self, bridge: Bridge, store: Store, tasks: TaskSet,
                 set_cwd: Callable[[int, str], None]) -> None:
        self.bridge = bridge
        self.store = store
        self.tasks = tasks
        self._set_cwd = set_cwd
        #: Chats being deleted whose worktree goes too, read before the store forgets them.
        self._to_remove: dict[int, ChatWorktree] = {}

    def load(self) -> None:
        """Announce every chat's worktree (at start)."""
        for conversation_id, made in worktrees.every_recorded(self.store).items():
            self.bridge.worktree_changed.emit(conversation_id, str(made.path), "")

    def create_for(self, conversation_id: int, folder: str) -> None:
        """Make the chat's worktree from ``folder``'s repository and work there."""
        self.tasks.spawn(self._create(conversation_id, folder),
                         name=f"worktree-add-{conversation_id}")

    async def _create(self, conversation_id: int, folder: str) -> None:
        try:
            made = await asyncio.to_thread(worktrees.create, Path(folder), conversation_id)
        except _FAILURES as exc:
            self.bridge.worktree_changed.emit(
                conversation_id, "", f"The new chat works in {folder}: {exc}")
            return
        if self.store.get_conversation(conversation_id) is None:
            return  # deleted meanwhile: the worktree stays, as any with unknown content would
        worktrees.record(self.store, conversation_id, made)
        self._set_cwd(conversation_id, str(made.folder))
        self.bridge.worktree_changed.emit(
            conversation_id, str(made.path),
            f"The new chat works in {made.path} on its own branch {made.branch}")

    def remove_with(self, conversation_id: int) -> None:
        """The user asked to remove the chat's worktree with the chat (done once it is gone)."""
        made = worktrees.recorded(self.store, conversation_id)
        if made is not None:
            self._to_remove[conversation_id] = made

    def on_conversation_deleted(self, conversation_id: int) -> None:
        made = self._to_remove.pop(conversation_id, None)
        if made is not None:
            self.tasks.spawn(self._remove(conversation_id, made),
                             name=f"worktree-remove-{conversation_id}")

    async def _remove(self, conversation_id: int, made: ChatWorktree) -> None:
        try:
            await asyncio.to_thread(worktrees.remove, made)
        except _FAILURES as exc:
            note = f"{str(exc)[:1].upper()}{str(exc)[1:]}"
        else:
            note = f"Removed the worktree {made.path}; its branch {made.branch} is kept"
        self.bridge.worktree_changed.emit(conversation_id, "", note)
