"""The window's side of a git worktree per chat (tolaria/chats/worktrees.py): "New chat in a git
worktree" stores the new chat, makes its worktree off the event loop and only then announces the
chat, already in the worktree, so no prompt can be sent in the original folder; deleting a
chat whose user also asked to remove its worktree runs ``git worktree remove`` (never forced)
once the chat is gone, that is after its running turn was stopped and its tree is gone.

Each change is announced with ``worktree_changed`` (conversation id, worktree path or "", a
note for the user or ""): the sidebar's delete confirm offers the removal only for such chats,
and a refusal (uncommitted work) or a failure is said inline, never as a dialog.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tolaria.chats import worktrees
from tolaria.chats.titles import DEFAULT_TITLE
from tolaria.chats.worktrees import ChatWorktree, WorktreeError
from tolaria.core.checkpoints import CheckpointError
from tolaria.core.store.db import Store
from tolaria.qt.bridge import Bridge
from tolaria.qt.tasks import TaskSet

_FAILURES = (WorktreeError, CheckpointError, OSError, ValueError)


class WorktreeControl:
    def __init__(self, bridge: Bridge, store: Store, tasks: TaskSet) -> None:
        self.bridge = bridge
        self.store = store
        self.tasks = tasks
        #: Chats being deleted whose worktree goes too, read before the store forgets them.
        self._to_remove: dict[int, ChatWorktree] = {}

    def load(self) -> None:
        """Announce every chat's worktree (at start)."""
        for conversation_id, made in worktrees.every_recorded(self.store).items():
            self.bridge.worktree_changed.emit(conversation_id, str(made.path), "")

    def new_chat(self, agent: str, folder: str) -> int:
        """A new chat in a new worktree of ``folder``'s repository; announced (with
        ``conversation_saved``) once it is there, or in ``folder`` with a note why not."""
        conversation = self.store.create_conversation(DEFAULT_TITLE, agent, folder)
        self.tasks.spawn(self._create(conversation.id, folder),
                         name=f"worktree-add-{conversation.id}")
        return conversation.id

    async def _create(self, conversation_id: int, folder: str) -> None:
        try:
            made = await asyncio.to_thread(worktrees.create, Path(folder), conversation_id)
        except _FAILURES as exc:
            path, note = "", f"The new chat works in {folder}: {exc}"
        else:
            worktrees.record(self.store, conversation_id, made)
            self.store.update_conversation(conversation_id, cwd=str(made.folder))
            path = str(made.path)
            note = f"The new chat works in {made.path} on its own branch {made.branch}"
        conversation = self.store.get_conversation(conversation_id)
        if conversation is not None:
            self.bridge.conversation_saved.emit(conversation)
            self.bridge.worktree_changed.emit(conversation_id, path, note)

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
