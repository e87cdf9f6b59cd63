"""Reviewing one file a turn changed, hunk by hunk: Accept (reviewed) or Revert (undone).

The diff is the turn's own change (its ``before`` to its ``after`` checkpoint), so it does not
move when the user or a later turn edits the file. Accepting a hunk only marks it reviewed (a
store marker, so it survives a restart); reverting one applies it in reverse to the working tree
after a safety snapshot, with Undo (tolaria/chats/restore.py ``revert_hunk``); it refuses with a
clear reason when the file changed since so that the hunk no longer applies: the view then
offers "Revert whole file…", which shows its plan (and what it would do to the later edits)
before anything is written. A turn recorded after a restart asks before a hunk is reverted.

Git runs through ``TurnCheckpoints.in_order``: off the event loop, one operation per chat at a
time, after that chat's pending snapshots. No Qt.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Awaitable
from dataclasses import dataclass

from tolaria.chats.checkpoints import TurnCheckpoints, where_the_chat_is
from tolaria.chats.restore import MARKER_HUNK_REVERTED, TurnRestore
from tolaria.core import checkpoints as ck

#: On a turn: ``{"path", "hunk"}``, one hunk of a file marked reviewed.
MARKER_HUNK_ACCEPTED = "hunk_accepted"
__all__ = ["MARKER_HUNK_ACCEPTED", "MARKER_HUNK_REVERTED", "FileReview", "ReviewRequest",
           "TurnReview", "hunk_key"]

SHOW, ACCEPT, REVERT = "show", "accept", "revert"
_HUNK_CONFIRM_LATE = ("This turn's changes were recorded after a restart: this part may be "
                      "your own edit, made while Tolaria was closed. Revert it anyway? "
                      "(Undo brings it back.)")
_HUNK_CONFIRM_STALE = "The file changed while it was being copied: nothing was changed. Try again?"
_ACTIONS = (SHOW, ACCEPT, REVERT)


@dataclass(frozen=True)
class ReviewRequest:
    """Show a file's diff (``show``), or accept / revert one of its hunks (by ``hunk_key``)."""

    turn_id: int
    path: str
    action: str = SHOW
    hunk: str = ""
    #: Revert: the fingerprint of the confirm the user said yes to (a late-recorded turn).
    confirmed: str = ""

    def __post_init__(self) -> None:
        if self.action not in _ACTIONS:
            raise ValueError(f"not a review action: {self.action!r} (one of {_ACTIONS})")


@dataclass(frozen=True)
class FileReview:
    """One file's diff as the turn left it, and what the user did with its hunks."""

    turn_id: int
    path: str
    hunks: tuple[ck.Hunk, ...] = ()
    accepted: frozenset[str] = frozenset()
    reverted: frozenset[str] = frozenset()
    #: The whole file was put back (Revert file or a rewind): nothing left to act on.
    file_reverted: bool = False
    #: The hunk an action failed on, and why (the core's message).
    failed: str = ""
    error: str = ""
    #: Git said the file is binary: no text diff to show.
    binary: bool = False
    #: A hunk's Revert waits for a yes (``confirm`` says why; ``confirm_key`` is the plan's
    #: fingerprint to send back).
    confirm_hunk: str = ""
    confirm: str = ""
    confirm_key: str = ""


def hunk_key(hunk: ck.Hunk) -> str:
    """A hunk's stable name: its text's digest (the diff of a turn never changes)."""
    return hashlib.sha256(hunk.patch.encode(errors="surrogateescape")).hexdigest()[:16]


class TurnReview:
    """Loads file reviews and records Accept / Revert, through a chat's ordered git queue."""

    def __init__(self, checkpoints: TurnCheckpoints, restore: TurnRestore | None = None) -> None:
        self.checkpoints = checkpoints
        self.restore = restore or TurnRestore(checkpoints)

    def handle(self, conversation_id: int, request: ReviewRequest) -> Awaitable[FileReview]:
        """Carry out ``request`` off the event loop; the file's review as it is afterwards."""
        return self.checkpoints.in_order(conversation_id, self.handle_now, conversation_id,
                                         request)

    @where_the_chat_is
    def handle_now(self, conversation_id: int, request: ReviewRequest) -> FileReview:
        """The blocking twin of ``handle`` (its thread runs this)."""
        before, after = self.checkpoints.checkpoints_of(conversation_id, request.turn_id)
        if request.path not in self.checkpoints.recorded_paths(conversation_id, request.turn_id):
            raise ck.CheckpointError(f"{request.path} is not a file this turn changed")
        diff = ck.file_diff_bytes(before, after, request.path)  # bytes end to end: a Latin-1
        hunks = ck.hunks(diff)  # file's hunk reverts exactly
        failed = error = ""
        asked: tuple[str, str, str] = ("", "", "")
        if request.action != SHOW:
            hunk = next((h for h in hunks if hunk_key(h) == request.hunk), None)
            if hunk is None:
                raise ck.CheckpointError(f"that part of {request.path} is not in this turn's diff")
            if request.action == ACCEPT:
                self._mark(conversation_id, request, MARKER_HUNK_ACCEPTED)
            else:
                try:
                    done = self.restore.revert_hunk(conversation_id, request.turn_id,
                                                    request.path, hunk, request.hunk,
                                                    request.confirmed)
                except ck.CheckpointError as exc:
                    failed, error = request.hunk, (
                        f"{exc}. \"Revert whole file…\" first shows what it would do to the "
                        "later edits.")
                else:
                    if not done.done:
                        asked = (request.hunk, _HUNK_CONFIRM_STALE if done.plan.stale
                                 else _HUNK_CONFIRM_LATE, done.plan.fingerprint)
        review = self._review(conversation_id, request, tuple(hunks), diff, failed, error)
        return dataclasses.replace(review, confirm_hunk=asked[0], confirm=asked[1],
                                   confirm_key=asked[2])

    def _mark(self, conversation_id: int, request: ReviewRequest, kind: str) -> None:
        self.checkpoints.store.add_marker(conversation_id, kind, turn_id=request.turn_id,
                                          data={"path": request.path, "hunk": request.hunk})

    def _review(self, conversation_id: int, request: ReviewRequest, hunks: tuple[ck.Hunk, ...],
                diff: bytes, failed: str, error: str) -> FileReview:
        done: dict[str, set[str]] = {MARKER_HUNK_ACCEPTED: set(), MARKER_HUNK_REVERTED: set()}
        markers = self.checkpoints.store.markers(conversation_id)
        undone = self.checkpoints.undone_points(conversation_id, markers)
        for marker in markers:
            data = marker.data if isinstance(marker.data, dict) else {}
            if data.get("point") in undone:
                continue
            if (marker.kind in done and marker.turn_id == request.turn_id
                    and data.get("path") == request.path):
                done[marker.kind].add(str(data.get("hunk")))
        change = next((c for c in self.checkpoints.changes(conversation_id)
                       if c.turn_id == request.turn_id), None)
        file_reverted = change is not None and (change.rewound or request.path in change.reverted)
        return FileReview(request.turn_id, request.path, hunks,
                          frozenset(done[MARKER_HUNK_ACCEPTED]),
                          frozenset(done[MARKER_HUNK_REVERTED]), file_reverted, failed, error,
                          binary=not hunks and b"Binary files" in diff)
