"""The engine's part for the chats themselves: announce them at start (after the crash recovery
of their queues), create, rename, change a chat's agent or folder (which closes its kept agent
process, docs/adr/0009), and delete one (a running turn is stopped, its tree gone, first)."""

from __future__ import annotations

from collections.abc import Callable

from tolaria.chats.attachments import delete_chat
from tolaria.chats.engine.gate import StreamGate
from tolaria.chats.engine.observer import PermissionDesk, TurnObserver
from tolaria.chats.inflight import MessageQueues
from tolaria.chats.titles import DEFAULT_TITLE
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import ORIGIN_WINDOW, Conversation, Store
from tolaria.core.turns.keeper import KeeperPool
from tolaria.support.tasks import TaskSet


class ConversationPart:
    """Mixed into ``TurnEngine`` (after ``QueuePart`` and ``SnapshotPart``, whose parts it
    calls), which provides the store, the observer and the runs."""

    observer: TurnObserver
    registry: ProcessRegistry
    tasks: TaskSet
    gate: StreamGate
    keepers: KeeperPool | None
    queues: MessageQueues | None
    permissions: PermissionDesk | None
    _running: dict[int, str]
    _deleting: set[int]
    restore_queues: Callable[[], list[int]]
    queue_target_changed: Callable[[int], None]
    forget_checkpoints: Callable[[int], None]
    keep_key: Callable[[int], str]
    reattach_kept: Callable[[], list[str]]

    @property
    def db(self) -> Store:
        raise NotImplementedError

    def load(self) -> list[Conversation]:
        """At start: pause the queues a crash left unpaused, then announce every stored
        conversation (oldest first, so the newest ends up on top)."""
        found = self.db.list_conversations()
        self.restore_queues()
        for conversation in reversed(found):
            self.observer.conversation_saved(conversation)
        self.reattach_kept()
        return found

    def new_conversation(self, agent: str, cwd: str | None, *, title: str = DEFAULT_TITLE,
                         origin: str = ORIGIN_WINDOW, host: str | None = None) -> Conversation:
        conversation = self.db.create_conversation(title, agent, cwd, origin=origin, host=host)
        self.observer.conversation_saved(conversation)
        return conversation

    def rename(self, conversation_id: int, title: str) -> None:
        title = " ".join(title.split())
        if not title:
            return
        self._save(lambda: self.db.rename_conversation(conversation_id, title))

    def set_agent(self, conversation_id: int, agent: str) -> None:
        before = self.db.get_conversation(conversation_id)
        self._save(lambda: self.db.update_conversation(conversation_id, agent=agent))
        if before is not None and before.agent != agent:
            self._close_kept(conversation_id)
            self.queue_target_changed(conversation_id)  # a queued image may wait or go now

    def set_cwd(self, conversation_id: int, cwd: str) -> None:
        before = self.db.get_conversation(conversation_id)
        self._save(lambda: self.db.update_conversation(conversation_id, cwd=cwd))
        if before is not None and before.cwd != cwd:
            self._close_kept(conversation_id)

    def set_host(self, conversation_id: int, host: str | None, cwd: str | None) -> str | None:
        """Run the chat's next turns on ``host`` (None: this machine) in ``cwd`` (a folder
        there; None: the host's home, or this machine's current folder). Refused, with the
        line to show, while a turn of the chat runs: its agent stays where it is."""
        if conversation_id in self._running:
            return "Stop the running turn before changing the host: it keeps running where it is."
        before = self.db.get_conversation(conversation_id)
        if before is None:
            return None
        self._save(lambda: self.db.set_conversation_host(conversation_id, host or None, cwd))
        if before.host != (host or None) or before.cwd != cwd:
            self._close_kept(conversation_id)
        if before.host != (host or None):
            self.queue_target_changed(conversation_id)
        return None

    def set_keep_running(self, conversation_id: int, keep: bool) -> None:
        """The chat's "keep running when disconnected" (ADR 0032), from its next turn on."""
        self._save(lambda: self.db.set_conversation_keep_running(conversation_id, keep))

    def _close_kept(self, conversation_id: int, *, deleted: bool = False) -> None:
        """Close the chat's kept process in the background (its settings changed, or it is
        deleted). With a turn running, the next turn's own check replaces the process instead."""
        key = self.keep_key(conversation_id)
        if self.keepers is None or self.keepers.get(key) is None or (
                conversation_id in self._running and not deleted):
            return
        self.tasks.spawn(self.keepers.close(key), name=f"close-kept-{conversation_id}")

    def _save(self, change: Callable[[], Conversation]) -> None:
        try:
            conversation = change()
        except KeyError:
            return  # deleted meanwhile
        self.observer.conversation_saved(conversation)

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
            self.gate.mark_stopping(stream_id)
            await self.registry.abort_and_wait(stream_id)
            self._delete_now(conversation_id)
        finally:
            self._deleting.discard(conversation_id)

    def _delete_now(self, conversation_id: int) -> None:
        self._close_kept(conversation_id, deleted=True)
        self.forget_checkpoints(conversation_id)
        if self.queues is not None:
            self.queues.forget(conversation_id)
        if self.permissions is not None:
            self.permissions.forget(conversation_id)
        delete_chat(self.db, conversation_id)  # with its attachments' private copies
        self.observer.conversation_deleted(conversation_id)
