"""Undo and hunk reverts for tolaria/chats/restore.py's ``TurnRestore`` (split off for size).

Undo takes the chat's (or a turn's) last restore point (a ``restore_point`` marker: the safety
snapshot and each path's state right after the restore) and gives back the exact bytes from the
snapshot, after checking that nothing changed since (else its plan asks). A hunk revert applies
the hunk in reverse after a safety snapshot of its own, so Undo covers it too. No Qt.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tolaria.chats.checkpoints import MARKER_RESTORE_POINT, TurnCheckpoints, where_the_chat_is
from tolaria.chats.restore_plan import (
    DELETE,
    HUNK,
    MERGE,
    RESTORE,
    UNDO,
    YES,
    FilePlan,
    RestorePlan,
    RestoreResult,
)
from tolaria.core import checkpoints as ck
from tolaria.core import restore as rs
from tolaria.core.store.db import Store

#: On a turn: ``{"path", "hunk", "point"}``, one hunk of a file undone in the working tree.
MARKER_HUNK_REVERTED = "hunk_reverted"


class RestoreInputError(ck.CheckpointError):
    """The request names nothing that can be restored (no such file in the turn, nothing to
    undo): bad input, not a safety refusal."""


class SafetyChanged(Exception):
    """A file changed between the plan and the safety snapshot."""


def blocker(repo: Path, path: str, now: rs.State, want: rs.State,
            source: ck.Checkpoint) -> str:
    """Why ``path`` cannot go to ``want`` (from ``source``), or ""."""
    why = rs.why_not(repo, path, now, want)
    if not why and not want.exists and now.exists and rs.not_captured(source, path):
        why = "was left out of the snapshot it would go back to (too big or skipped): not deleted"
    return why


def signed(plan: RestorePlan, expected: dict[str, rs.State]) -> RestorePlan:
    """``plan`` with its fingerprint: what it says and every path's state it was made from."""
    said = repr((plan.kind, plan.turn_id, plan.files, plan.writers, plan.late,
                 sorted((p, s.as_json()) for p, s in expected.items())))
    return dataclasses.replace(plan, fingerprint=hashlib.sha256(said.encode(
        errors="surrogateescape")).hexdigest()[:20])


class UndoAndHunks:
    """Mixed into TurnRestore, which provides the planning and writing parts declared here."""

    checkpoints: TurnCheckpoints
    store: Store
    writers: Callable[[Path], list[str]]

    def _go(self, conversation_id: int, plan: RestorePlan, steps: list[rs.Step],
            expected: dict[str, rs.State], repo: Path, confirmed: str,
            undoes: int | None = None) -> RestoreResult:
        raise NotImplementedError

    def _safety(self, conversation_id: int, turn_id: int, repo: Path,
                expected: dict[str, rs.State]) -> ck.Checkpoint:
        raise NotImplementedError

    def _point(self, conversation_id: int, plan: RestorePlan, repo: Path,
               safety: ck.Checkpoint, written: dict[str, list[str]]) -> int | None:
        raise NotImplementedError

    # -- a hunk -----------------------------------------------------------------------------------
    @where_the_chat_is
    def revert_hunk(self, conversation_id: int, turn_id: int, path: str, hunk: ck.Hunk,
                    key: str, confirmed: str = "") -> RestoreResult:
        """Undo one hunk of the turn's change to ``path`` (git apply, so the file's other lines
        stay), after a safety snapshot. A turn recorded after a restart needs a yes. Raises
        CheckpointError when the hunk no longer applies (nothing changed)."""
        record = self.checkpoints.turn_record(conversation_id, turn_id)
        before = self.checkpoints.checkpoints_of(conversation_id, turn_id)[0]
        repo = before.repo
        now = rs.state_now(repo, path)
        plan = signed(RestorePlan(HUNK, turn_id, (FilePlan(path, MERGE),), paths=(path,),
                                        late=bool(record.get("late")),
                                        label=f"revert of a change in {path}"), {path: now})
        if plan.blocked or (plan.late and confirmed not in (plan.fingerprint, YES)):
            return RestoreResult(False, plan)
        try:
            safety = self._safety(conversation_id, turn_id, repo, {path: now})
        except SafetyChanged:
            return RestoreResult(False, dataclasses.replace(plan, stale=True))
        try:
            ck.revert_hunk(before, path, hunk)
        except ck.CheckpointError:
            rs.drop(safety)
            raise
        point = self._point(conversation_id, plan, repo, safety,
                            {path: rs.state_now(repo, path).as_json()})
        self.store.add_marker(conversation_id, MARKER_HUNK_REVERTED, turn_id=turn_id,
                              data={"path": path, "hunk": key, "point": point})
        return RestoreResult(True, plan, (path,))

    # -- undo -------------------------------------------------------------------------------------
    def last_point(self, conversation_id: int, turn_id: int | None = None) -> Any:
        """The chat's (or the turn's) last restore not undone yet (a Marker), or None."""
        undone = self.checkpoints.undone_points(conversation_id)
        points = [m for m in self.store.markers(conversation_id, MARKER_RESTORE_POINT)
                  if m.id not in undone and isinstance(m.data, dict)
                  and (turn_id is None or m.turn_id == turn_id)]
        return points[-1] if points else None

    @where_the_chat_is
    def undo(self, conversation_id: int, turn_id: int | None = None,
             confirmed: str = "") -> RestoreResult:
        """Put back the exact bytes the last restore of the chat (or of ``turn_id``) replaced.
        A file changed since that restore is said and needs a yes."""
        point = self.last_point(conversation_id, turn_id)
        if point is None:
            raise RestoreInputError("nothing to undo: no revert or rewind of this chat is left "
                                    "to take back")
        data = point.data
        repo = Path(str(data["repo"]))
        safety = ck.Checkpoint(repo, str(data["safety"]), ref=str(data.get("ref") or ""))
        written = {str(p): rs.State.from_json(s) for p, s in dict(data["written"]).items()}
        targets = rs.states_at(safety, written)
        files: list[FilePlan] = []
        steps: list[rs.Step] = []
        expected: dict[str, rs.State] = {}
        label = str(data.get("label") or "restore")
        for path, was in sorted(written.items()):
            now, want = rs.state_now(repo, path), targets[path]
            if now == want:
                continue
            later = "" if now == was else f"changed since the {label.split(' ')[0]}"
            files.append(FilePlan(path, RESTORE if want.exists else DELETE, later,
                                  blocker(repo, path, now, want, safety)))
            steps.append(rs.Step(path, source=safety))
            expected[path] = now
        plan = signed(RestorePlan(UNDO, point.turn_id or 0, tuple(files),
                                        writers=tuple(self.writers(repo)), label=label),
                            expected)
        return self._go(conversation_id, plan, steps, expected, repo, confirmed,
                        undoes=point.id)
