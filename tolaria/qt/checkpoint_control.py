"""The controller's part for what a turn changed in its git folder: the user's "Revert file" /
"Rewind to before this turn" / Undo and a file's diff review (tolaria/chats/checkpoints.py).

The snapshots before and after each turn are the turn engine's (tolaria/chats/engine/
snapshots.py), which announces each change with ``turn_changes_changed`` (conversation id,
list[TurnChanges]). Revert / Rewind /
Undo (tolaria/chats/restore.py) are refused while the chat runs a turn (the agent could be
writing those files); one that needs a yes (later edits, another agent writing in the
repository, a turn recorded after a restart) or is blocked is kept as the turn's ``confirm``
(TurnCheckpoints.pending) until the user answers: a yes comes back with the plan's fingerprint. A file's diff and its hunks'
Accept / Revert (ReviewRequest, tolaria/chats/review.py) go the same way and answer with
``file_review_loaded``; a hunk's Revert is refused while a turn runs, Accept is not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from tolaria.chats.checkpoints import (
    CANCEL,
    UNDO_LAST,
    TurnCheckpoints,
    UndoRequest,
)
from tolaria.chats.engine import TurnEngine
from tolaria.chats.restore import TurnRestore, describe_runs, other_process_writers
from tolaria.chats.restore_plan import RestoreResult
from tolaria.chats.review import REVERT, FileReview, ReviewRequest, TurnReview
from tolaria.core.checkpoints import CheckpointError
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.restore import runs_in
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
    registry: ProcessRegistry
    engine: TurnEngine

    def undo(self, conversation_id: int, request: object) -> bool:
        """Revert a file of a turn, rewind to before it, undo its last restore, drop a shown
        confirm (an UndoRequest), or show, accept or revert one of a file's hunks (a
        ReviewRequest); False when refused (the chat runs a turn: the agent may be writing)."""
        if isinstance(request, ReviewRequest):
            return self._review(conversation_id, request)
        if not isinstance(request, UndoRequest):
            return False
        if request.kind == CANCEL:
            self.checkpoints.pending.pop((conversation_id, request.turn_id), None)
            self._announce_changes(conversation_id)
            return True
        if self.engine.running_stream(conversation_id) is not None:
            return False
        restore = TurnRestore(self.checkpoints, writers=self._writers_now(conversation_id))
        work = self.checkpoints.in_order(conversation_id, restore.handle, conversation_id,
                                         request)
        self.tasks.spawn(self._undo(conversation_id, request, work),
                         name=f"undo-{conversation_id}-{request.turn_id}")
        return True

    def _writers_now(self, conversation_id: int) -> Callable[[Path], list[str]]:
        """Who writes where, as of now: this process's runs (read here, on the loop) and, when
        asked (in the worker thread), every other Tolaria process's."""
        titles = {c.id: c.title for c in self.store.list_conversations()}
        local = []
        for run in self.registry.live():
            chat = self.engine.conversation_of(str(run["stream_id"]))
            if chat != conversation_id:
                local.append({**run, "chat": titles.get(chat, "") if chat else ""})

        def writers(repo: Path) -> list[str]:
            return describe_runs(runs_in(repo, local)) + other_process_writers(repo)

        return writers

    def _review(self, conversation_id: int, request: ReviewRequest) -> bool:
        if request.action == REVERT and self.engine.running_stream(conversation_id) is not None:
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
            if request.action == REVERT:  # a hunk revert is a restore point: Undo appears
                self._announce_changes(conversation_id)

    async def _undo(self, conversation_id: int, request: UndoRequest,
                    work: Awaitable[RestoreResult]) -> None:
        key = (conversation_id, request.turn_id)
        try:
            result = await work
        except (CheckpointError, OSError) as exc:
            self.checkpoints.pending.pop(key, None)
            what = {UNDO_LAST: "Undo"}.get(request.kind) or (
                "Rewind" if request.path is None else f"Revert of {request.path}")
            self.checkpoints.note(conversation_id, request.turn_id, f"{what} failed: {exc}")
        else:
            if result.done:
                self.checkpoints.pending.pop(key, None)
            else:
                self.checkpoints.pending[key] = result.plan
        self._announce_changes(conversation_id)

    def _announce_changes(self, conversation_id: int) -> None:
        self.engine.announce_changes(conversation_id)
