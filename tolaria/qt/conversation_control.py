"""The controller's part for the chats themselves: announce them, open one (its newest page,
markers, queue and changes), new, rename, change its agent or folder (which closes its kept
agent process, docs/adr/0009), and delete (a running turn is stopped, tree gone, first)."""

from __future__ import annotations

from collections.abc import Callable

from tolaria.chats.inflight import MessageQueues
from tolaria.chats.titles import DEFAULT_TITLE
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import Conversation, Store
from tolaria.core.store.pages import FIRST_PAGE_TURNS
from tolaria.core.turns.keeper import KeeperPool
from tolaria.qt.bridge import Bridge
from tolaria.qt.permissions import PermissionBroker
from tolaria.qt.tasks import TaskSet


class ConversationControl:
    """Mixed into ``ChatController`` (after ``QueueControl`` and ``CheckpointControl``, whose
    parts it calls), which provides the store, the bridge and the runs."""

    bridge: Bridge
    store: Store
    registry: ProcessRegistry
    tasks: TaskSet
    keepers: KeeperPool
    queues: MessageQueues
    permissions: PermissionBroker
    _running: dict[int, str]
    _deleting: set[int]
    restore_queues: Callable[[], list[int]]
    _announce_queue: Callable[[int], None]
    _open_changes: Callable[[int], None]
    _forget_checkpoints: Callable[[int], None]

    def load(self) -> list[Conversation]:
        """Announce every stored conversation (oldest first, so the newest ends up on top)."""
        found = self.store.list_conversations()
        self.restore_queues()
        for conversation in reversed(found):
            self.bridge.conversation_saved.emit(conversation)
        return found

    def new_conversation(self, agent: str, cwd: str | None) -> Conversation:
        conversation = self.store.create_conversation(DEFAULT_TITLE, agent, cwd)
        self.bridge.conversation_saved.emit(conversation)
        return conversation

    def open_conversation(self, conversation_id: int) -> None:
        """Send the newest page of a conversation's stored turns to its (new) view; the view
        asks for older pages as the user scrolls (tolaria/qt/pages.py)."""
        self.bridge.history_loaded.emit(conversation_id, self.store.turns_page(
            conversation_id, limit=FIRST_PAGE_TURNS))
        self.bridge.markers_loaded.emit(conversation_id, self.store.markers(conversation_id))
        self._announce_queue(conversation_id)
        self._open_changes(conversation_id)

    def rename(self, conversation_id: int, title: str) -> None:
        title = " ".join(title.split())
        if not title:
            return
        self._save(lambda: self.store.rename_conversation(conversation_id, title))

    def set_agent(self, conversation_id: int, agent: str) -> None:
        before = self.store.get_conversation(conversation_id)
        self._save(lambda: self.store.update_conversation(conversation_id, agent=agent))
        if before is not None and before.agent != agent:
            self._close_kept(conversation_id)

    def set_cwd(self, conversation_id: int, cwd: str) -> None:
        before = self.store.get_conversation(conversation_id)
        self._save(lambda: self.store.update_conversation(conversation_id, cwd=cwd))
        if before is not None and before.cwd != cwd:
            self._close_kept(conversation_id)

    @staticmethod
    def keep_key(conversation_id: int) -> str:
        """The key of a conversation's kept agent process."""
        return f"conversation-{conversation_id}"

    def _close_kept(self, conversation_id: int, *, deleted: bool = False) -> None:
        """Close the chat's kept process in the background (its settings changed, or it is
        deleted). With a turn running, the next turn's own check replaces the process instead."""
        key = self.keep_key(conversation_id)
        if self.keepers.get(key) is None or (conversation_id in self._running and not deleted):
            return
        self.tasks.spawn(self.keepers.close(key), name=f"close-kept-{conversation_id}")

    def _save(self, change: Callable[[], Conversation]) -> None:
        try:
            conversation = change()
        except KeyError:
            return  # deleted meanwhile
        self.bridge.conversation_saved.emit(conversation)

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation; a running turn is stopped (tree gone) first."""
        if conversation_id in self._deleting:
            return
        stream_id = self._running.get(conversation_id)
        if stream_id is None:
            self._delete_now(conversation_id)
            return
        self._deleting.add(conversation_id)
        self.tasks.spawn(self._delete_after_stop(conversation_id, stream_id),
                         name=f"delete-{conversation_id}")

    async def _delete_after_stop(self, conversation_id: int, stream_id: str) -> None:
        try:
            self.bridge.mark_stopping(stream_id)
            await self.registry.abort_and_wait(stream_id)
            self._delete_now(conversation_id)
        finally:
            self._deleting.discard(conversation_id)

    def _delete_now(self, conversation_id: int) -> None:
        self._close_kept(conversation_id, deleted=True)
        self._forget_checkpoints(conversation_id)
        self.queues.forget(conversation_id)
        self.permissions.forget(conversation_id)
        self.store.delete_conversation(conversation_id)
        self.bridge.conversation_deleted.emit(conversation_id)
