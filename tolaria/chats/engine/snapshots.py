"""The engine's part for checkpoints around a turn (tolaria/chats/checkpoints.py): a snapshot of
the chat's git folder before the agent starts and one after the turn ends, whatever the end.

The ``before`` snapshot is awaited by the run's task before the agent starts (a stop meanwhile
ends the turn without starting it: ``TurnEngine._run``); the ``after`` one is asked for the
moment the run ends, so the next turn's ``before`` waits for it. Each change of what a chat's
turns changed is announced with ``turn_changes_changed``. Crash recovery: a chat opened whose
turn's process ended mid-turn (a crash, a quit) gets that turn's after-state recorded now
(``late``). Deleting a chat deletes its refs, after its pending snapshots.
"""

from __future__ import annotations

from collections.abc import Awaitable

from tolaria.chats.checkpoints import MARKER_TURN_BEFORE, TurnCheckpoints
from tolaria.chats.engine.observer import TurnObserver
from tolaria.chats.inflight import Launch
from tolaria.core.process.control_client import live_stream_ids
from tolaria.core.store.db import Conversation, Store
from tolaria.support.tasks import TaskSet


class SnapshotPart:
    """Mixed into ``TurnEngine``, which provides the store, the observer and the tasks."""

    store: Store | None
    observer: TurnObserver
    tasks: TaskSet
    checkpoints: TurnCheckpoints | None

    def _snapshot_before(self, launch: Launch, turn_id: int) -> Awaitable[None] | None:
        if self.store is None or self.checkpoints is None:
            return None
        conversation = self.store.get_conversation(launch.conversation_id)
        if conversation is None:
            return None
        return self.checkpoints.before_turn(conversation, turn_id, launch.cwd)

    def _resume_before(self, launch: Launch, turn_id: int) -> None:
        """A turn reattached mid-run: its stored before-state, no new snapshot."""
        if self.checkpoints is not None:
            self.checkpoints.resume_before(launch.conversation_id, turn_id)

    def _snapshot_after(self, conversation_id: int, turn_id: int) -> None:
        if self.store is None or self.checkpoints is None:
            return
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            return
        pending = self.checkpoints.after_turn(conversation, turn_id)
        self.tasks.spawn(self._announce_after(conversation_id, pending),
                         name=f"checkpoint-after-{turn_id}")

    @staticmethod
    async def _await(pending: Awaitable[object]) -> None:
        await pending

    async def _announce_after(self, conversation_id: int, pending: Awaitable[object]) -> None:
        await pending
        self.announce_changes(conversation_id)

    def announce_changes(self, conversation_id: int) -> None:
        if self.store is None or self.checkpoints is None:
            return
        if self.store.get_conversation(conversation_id) is not None:
            self.observer.turn_changes_changed(conversation_id,
                                               self.checkpoints.changes(conversation_id))

    def open_changes(self, conversation_id: int) -> None:
        """A chat opened: show its turns' changes; a turn whose process ended mid-turn (a
        crash, a quit) gets its after-state recorded now (``late``), then shown too."""
        self.announce_changes(conversation_id)
        if self.store is None or self.checkpoints is None:
            return
        conversation = self.store.get_conversation(conversation_id)
        if conversation is not None and self.store.markers(conversation_id, MARKER_TURN_BEFORE):
            pending = self.checkpoints.in_order(conversation_id, self._recover, conversation)
            self.tasks.spawn(self._announce_after(conversation_id, pending),
                             name=f"checkpoint-recover-{conversation_id}")

    def _recover(self, conversation: Conversation) -> list[int]:
        assert self.checkpoints is not None
        return self.checkpoints.recover(conversation, live_stream_ids())

    def forget_checkpoints(self, conversation_id: int) -> None:
        """Before the chat is deleted: delete its refs in the background."""
        if self.store is None or self.checkpoints is None:
            return
        conversation = self.store.get_conversation(conversation_id)
        if conversation is not None:
            repos = self.checkpoints.repos(conversation)
            self.tasks.spawn(self._await(self.checkpoints.delete_chat(conversation, repos)),
                             name=f"checkpoints-delete-{conversation_id}")
