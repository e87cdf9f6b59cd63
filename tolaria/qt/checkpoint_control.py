"""The controller's part for checkpoints: a snapshot of the chat's git folder before and after
each turn, and the user's "Revert file" / "Rewind to before this turn" (tolaria/chats/checkpoints.py).

The ``before`` snapshot is awaited by the run's task before the agent starts (a Stop meanwhile
ends the turn without starting it: see ``ChatController._run``); the ``after`` one is asked for
the moment the run ends, whatever the end. Each change of what a chat's turns changed is
announced with ``turn_changes_changed`` (conversation id, list[TurnChanges]). Undo is refused
while the chat runs a turn: the agent could be writing those files. A file's diff and its hunks'
Accept / Revert (ReviewRequest, tolaria/chats/review.py) go the same way and answer with
``file_review_loaded``; a hunk's Revert is refused while a turn runs, Accept is not.
"""

from __future__ import annotations

from collections.abc import Awaitable

from tolaria.chats.checkpoints import TurnCheckpoints, UndoRequest
from tolaria.chats.inflight import Launch
from tolaria.chats.review import REVERT, FileReview, ReviewRequest, TurnReview
from tolaria.core.checkpoints import CheckpointError
from tolaria.core.store.db import Store
from tolaria.qt.bridge import Bridge
from tolaria.qt.tasks import TaskSet


class CheckpointControl:
    """Mixed into ``ChatController``, which provides the store, the bridge and the runs."""

    bridge: Bridge
    store: Store
    tasks: TaskSet
    checkpoints: TurnCheckpoints
    review: TurnReview
    _running: dict[int, str]

    def _snapshot_before(self, launch: Launch, turn_id: int) -> Awaitable[None] | None:
        conversation = self.store.get_conversation(launch.conversation_id)
        if conversation is None:
            return None
        return self.checkpoints.before_turn(conversation, turn_id, launch.cwd)

    def _snapshot_after(self, conversation_id: int, turn_id: int) -> None:
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
        self._announce_changes(conversation_id)

    def undo(self, conversation_id: int, request: object) -> bool:
        """Revert a file of a turn or rewind to before it, or show, accept or revert one of a
        file's hunks (a ReviewRequest); False when refused (a turn runs and it would write)."""
        if isinstance(request, ReviewRequest):
            return self._review(conversation_id, request)
        if not isinstance(request, UndoRequest) or conversation_id in self._running:
            return False
        work: Awaitable[object]
        if request.path is None:
            work = self.checkpoints.rewind(conversation_id, request.turn_id)
        else:
            work = self.checkpoints.revert_file(conversation_id, request.turn_id, request.path)
        self.tasks.spawn(self._undo(conversation_id, request, work),
                         name=f"undo-{conversation_id}-{request.turn_id}")
        return True

    def _review(self, conversation_id: int, request: ReviewRequest) -> bool:
        if request.action == REVERT and conversation_id in self._running:
            return False
        self.tasks.spawn(self._announce_review(conversation_id, request),
                         name=f"review-{conversation_id}-{request.turn_id}")
        return True

    async def _announce_review(self, conversation_id: int, request: ReviewRequest) -> None:
        try:
            review = await self.review.handle(conversation_id, request)
        except (CheckpointError, OSError) as exc:
            review = FileReview(request.turn_id, request.path, error=str(exc))
        if self.store.get_conversation(conversation_id) is not None:
            self.bridge.file_review_loaded.emit(conversation_id, review)

    async def _undo(self, conversation_id: int, request: UndoRequest,
                    work: Awaitable[object]) -> None:
        try:
            await work
        except (CheckpointError, OSError) as exc:
            what = "Rewind" if request.path is None else f"Revert of {request.path}"
            self.checkpoints.note(conversation_id, request.turn_id, f"{what} failed: {exc}")
        self._announce_changes(conversation_id)

    def _announce_changes(self, conversation_id: int) -> None:
        if self.store.get_conversation(conversation_id) is not None:
            self.bridge.turn_changes_changed.emit(conversation_id,
                                                  self.checkpoints.changes(conversation_id))

    def _forget_checkpoints(self, conversation_id: int) -> None:
        """Before the chat is deleted: delete its refs in the background."""
        conversation = self.store.get_conversation(conversation_id)
        if conversation is not None:
            repos = self.checkpoints.repos(conversation)
            self.tasks.spawn(self._await(self.checkpoints.delete_chat(conversation, repos)),
                             name=f"checkpoints-delete-{conversation_id}")
