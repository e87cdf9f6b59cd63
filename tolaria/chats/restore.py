"""Revert file / Revert hunk / Rewind / Undo of a chat's turns, without losing the user's work.

Each starts with a plan (tolaria/chats/restore_plan.py): every file is compared with the turn's
``after`` state (for a rewind, the after of the chat's last turn that changed it), so a file
changed since (the user's edits, another program's, a later turn's) is said and never
overwritten without a yes. Reverting such a file takes only the turn's change out of it when a
three-way merge can (the later lines stay); otherwise the confirm says the later edits go too.
A plan that needs a yes, or that a file blocks (a submodule, a file that became a folder, no
permission), changes nothing.

Rewind: the files the chat's turns from that one on changed, inside the chat's folder, each put
back as it was before the first of those turns that changed it. Files those turns did not touch
(the user's new files, edits elsewhere) are left alone and listed. It is all or nothing.

Every restore first takes a safety snapshot of the current state (tolaria/core/restore.py
``take_safety``: it must hold the exact bytes of each path about to change) and records a
``restore_point`` marker with it, so Undo (this module's ``undo``; kept across restarts) gives
back the exact bytes - after checking that nothing changed since the restore, or with a yes.

Agents writing in the same repository (another chat of this process, another Tolaria process:
``writers``) are said in the plan and need a yes. Blocking (``asyncio.to_thread`` through
``TurnCheckpoints.in_order``); no Qt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tolaria.chats.checkpoints import (
    CANCEL,
    MARKER_FILE_REVERTED,
    MARKER_RESTORE_POINT,
    MARKER_RESTORE_UNDONE,
    MARKER_TURNS_REWOUND,
    UNDO_LAST,
    TurnCheckpoints,
    UndoRequest,
    chat_ref_part,
)
from tolaria.chats.restore_plan import (
    DELETE,
    HUNK,
    MERGE,
    RESTORE,
    REVERT,
    REWIND,
    UNDO,
    YES,
    FilePlan,
    RestorePlan,
    RestoreResult,
)
from tolaria.core import checkpoints as ck
from tolaria.core import restore as rs

#: On a turn: ``{"path", "hunk", "point"}``, one hunk of a file undone in the working tree.
MARKER_HUNK_REVERTED = "hunk_reverted"


class RestoreInputError(ck.CheckpointError):
    """The request names nothing that can be restored (no such file in the turn, nothing to
    undo): bad input, not a safety refusal."""


class _Changed(Exception):
    """A file changed between the plan and the safety snapshot."""


def describe_runs(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Runs as the plan says them: agent, chat, stream id and owner."""
    out = []
    for run in runs:
        chat = f" in chat \"{run['chat']}\"" if run.get("chat") else ""
        owner = f", Tolaria process {run['owner_pid']}" if run.get("owner_pid") else ""
        out.append(f"{run.get('agent', 'an agent')}{chat} ({run.get('stream_id')}{owner})")
    return out


def other_process_writers(repo: Path) -> list[str]:
    """The runs of other Tolaria processes working inside ``repo`` (``tolaria`` commands have
    no runs of their own; the window adds its own registry's)."""
    return describe_runs(rs.runs_in(repo, rs.other_processes_runs()))


def _blocker(repo: Path, path: str, now: rs.State, want: rs.State,
             source: ck.Checkpoint) -> str:
    """Why ``path`` cannot go to ``want`` (from ``source``), or ""."""
    why = rs.why_not(repo, path, now, want)
    if not why and not want.exists and now.exists and rs.not_captured(source, path):
        why = "was left out of the snapshot it would go back to (too big or skipped): not deleted"
    return why


class TurnRestore:
    """Plans and carries out restores of one store's chats (see the module's docstring)."""

    def __init__(self, checkpoints: TurnCheckpoints,
                 writers: Callable[[Path], list[str]] | None = None) -> None:
        self.checkpoints = checkpoints
        self.store = checkpoints.store
        self.writers = writers or other_process_writers

    # -- entry points ---------------------------------------------------------------------------
    def handle(self, conversation_id: int, request: UndoRequest) -> RestoreResult:
        """Carry out an UndoRequest of the window (a plan to confirm when it may not go yet)."""
        if request.kind == CANCEL:
            raise RestoreInputError("a cancel is not carried out")
        if request.kind == UNDO_LAST:
            return self.undo(conversation_id, request.turn_id, request.confirmed)
        if request.path is None:
            return self.run(conversation_id, request.turn_id, REWIND, (), request.confirmed)
        return self.run(conversation_id, request.turn_id, REVERT, (request.path,),
                        request.confirmed)

    def run(self, conversation_id: int, turn_id: int, kind: str, paths: Sequence[str] = (),
            confirmed: str = "") -> RestoreResult:
        """Revert ``paths`` of the turn (all its files when empty) or rewind to before it.
        ``confirmed``: the plan's fingerprint the user said yes to, or YES for any."""
        if kind not in (REVERT, REWIND):
            raise ValueError(f"not a restore kind: {kind!r}")
        work = self._plan_revert if kind == REVERT else self._plan_rewind
        plan, steps, expected, repo = work(conversation_id, turn_id, list(paths))
        return self._go(conversation_id, plan, steps, expected, repo, confirmed)

    def plan(self, conversation_id: int, turn_id: int, kind: str,
             paths: Sequence[str] = ()) -> RestorePlan:
        """What ``run`` would do, without doing it."""
        work = self._plan_revert if kind == REVERT else self._plan_rewind
        return work(conversation_id, turn_id, list(paths))[0]

    # -- plans ----------------------------------------------------------------------------------
    def _plan_revert(self, conversation_id: int, turn_id: int, paths: list[str]
                     ) -> tuple[RestorePlan, list[rs.Step], dict[str, rs.State], Path]:
        record = self.checkpoints.turn_record(conversation_id, turn_id)
        before, after = self.checkpoints.checkpoints_of(conversation_id, turn_id)
        recorded = [str(p) for p, _s in record.get("files", ())]
        for path in paths:
            if path not in recorded:
                raise RestoreInputError(f"{path} is not a file this turn changed")
        paths = paths or recorded
        repo = before.repo
        numbers, later_files = self._later_turns(conversation_id, turn_id)
        targets, bases = rs.states_at(before, paths), rs.states_at(after, paths)
        files: list[FilePlan] = []
        steps: list[rs.Step] = []
        expected: dict[str, rs.State] = {}
        for path in paths:
            now, want, base = rs.state_now(repo, path), targets[path], bases[path]
            if now == want:
                continue
            later = ""
            if now != base:
                by = [str(numbers[t]) for t, fs in later_files if path in fs]
                later = "changed since this turn" + (f" (also by turn {', '.join(by)})"
                                                     if by else "")
            blocker = _blocker(repo, path, now, want, before)
            step = rs.Step(path, source=before)
            action = RESTORE if want.exists else DELETE
            if later and not blocker and rs.FILE == now.kind == want.kind == base.kind:
                merged = rs.merge_out(repo, rs.blob(repo, base), rs.read_now(repo, path),
                                      rs.blob(repo, want))
                if merged is not None:
                    action, step = MERGE, rs.Step(path, data=merged, mode=now.mode)
            files.append(FilePlan(path, action, later, blocker))
            steps.append(step)
            expected[path] = now
        label = f"revert of {paths[0]}" if len(paths) == 1 else f"revert of {len(paths)} files"
        plan = RestorePlan(REVERT, turn_id, tuple(files), paths=tuple(paths),
                           writers=tuple(self.writers(repo)),
                           late=bool(record.get("late")), label=label)
        return self._signed(plan, expected), steps, expected, repo

    def _plan_rewind(self, conversation_id: int, turn_id: int, _paths: list[str]
                     ) -> tuple[RestorePlan, list[rs.Step], dict[str, rs.State], Path]:
        record = self.checkpoints.turn_record(conversation_id, turn_id)
        repo = Path(str(record["repo"]))
        turns = self.store.turns(conversation_id)
        numbers = {t.id: n for n, t in enumerate(turns, 1)}
        first: dict[str, ck.Checkpoint] = {}
        last: dict[str, tuple[ck.Checkpoint, int]] = {}
        late = False
        records = self.checkpoints.turn_records(conversation_id)
        for turn in turns:
            data = records.get(turn.id)
            if turn.id < turn_id or data is None or Path(str(data["repo"])) != repo:
                continue
            before = ck.Checkpoint(repo, str(data["before"]), ref="")
            after = ck.Checkpoint(repo, str(data["after"]), ref="")
            late = late or bool(data.get("late"))
            for path, _status in data.get("files", ()):
                first.setdefault(str(path), before)
                last[str(path)] = (after, numbers[turn.id])
        scope = self._scope(conversation_id, repo)
        inside = sorted(p for p in first if scope is None or Path(p).is_relative_to(scope))
        outside = tuple(sorted(set(first) - set(inside)))
        targets = self._states(first, inside)
        refs = self._states({p: last[p][0] for p in inside}, inside)
        files: list[FilePlan] = []
        steps: list[rs.Step] = []
        expected: dict[str, rs.State] = {}
        for path in inside:
            now, want = rs.state_now(repo, path), targets[path]
            if now == want:
                continue
            later = "" if now == refs[path] else f"changed since turn {last[path][1]}"
            files.append(FilePlan(path, RESTORE if want.exists else DELETE, later,
                                  _blocker(repo, path, now, want, first[path])))
            steps.append(rs.Step(path, source=first[path]))
            expected[path] = now
        start = self.checkpoints.checkpoints_of(conversation_id, turn_id)[0]
        kept = tuple(sorted(c.path for c in ck.changes(start) if c.path not in first
                            and (scope is None or Path(c.path).is_relative_to(scope))))
        plan = RestorePlan(REWIND, turn_id, tuple(files), kept=kept, outside=outside,
                           writers=tuple(self.writers(repo)), late=late,
                           label=f"rewind ({len(files)} file{'s' if len(files) != 1 else ''})")
        return self._signed(plan, expected), steps, expected, repo

    def _states(self, sources: dict[str, ck.Checkpoint], paths: list[str]
                ) -> dict[str, rs.State]:
        by_commit: dict[str, tuple[ck.Checkpoint, list[str]]] = {}
        for path in paths:
            by_commit.setdefault(sources[path].commit, (sources[path], []))[1].append(path)
        found: dict[str, rs.State] = {}
        for checkpoint, some in by_commit.values():
            found.update(rs.states_at(checkpoint, some))
        return found

    def _scope(self, conversation_id: int, repo: Path) -> Path | None:
        """The chat's folder inside ``repo`` (None: the whole repository)."""
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None or not conversation.cwd:
            return None
        try:
            scope = Path(conversation.cwd).resolve().relative_to(repo.resolve())
        except (OSError, ValueError):
            return None
        return None if str(scope) == "." else scope

    def _later_turns(self, conversation_id: int, turn_id: int
                     ) -> tuple[dict[int, int], list[tuple[int, set[str]]]]:
        turns = self.store.turns(conversation_id)
        numbers = {t.id: n for n, t in enumerate(turns, 1)}
        records = self.checkpoints.turn_records(conversation_id)
        later = [(t.id, {str(p) for p, _s in records[t.id].get("files", ())})
                 for t in turns if t.id > turn_id and t.id in records]
        return numbers, later

    @staticmethod
    def _signed(plan: RestorePlan, expected: dict[str, rs.State]) -> RestorePlan:
        said = repr((plan.kind, plan.turn_id, plan.files, plan.writers, plan.late,
                     sorted((p, s.as_json()) for p, s in expected.items())))
        return dataclasses.replace(plan, fingerprint=hashlib.sha256(said.encode(
            errors="surrogateescape")).hexdigest()[:20])

    # -- carrying out ---------------------------------------------------------------------------
    def _go(self, conversation_id: int, plan: RestorePlan, steps: list[rs.Step],
            expected: dict[str, rs.State], repo: Path, confirmed: str,
            undoes: int | None = None) -> RestoreResult:
        if plan.blocked:
            return RestoreResult(False, plan)
        if plan.needs_confirm and confirmed not in (plan.fingerprint, YES):
            return RestoreResult(False, dataclasses.replace(plan, stale=bool(confirmed)))
        if not steps:
            if undoes is not None:
                self.store.add_marker(conversation_id, MARKER_RESTORE_UNDONE,
                                      turn_id=plan.turn_id, data={"point": undoes})
            return RestoreResult(True, plan)
        try:
            safety = self._safety(conversation_id, plan.turn_id, repo, expected)
        except _Changed:
            return RestoreResult(False, dataclasses.replace(plan, stale=True))
        try:
            written = rs.apply(repo, steps, safety)
        except ck.CheckpointError:
            rs.drop(safety)
            raise
        after = {p: rs.state_now(repo, p).as_json() for p in written}
        if undoes is not None:
            self.store.add_marker(conversation_id, MARKER_RESTORE_UNDONE, turn_id=plan.turn_id,
                                  data={"point": undoes, "safety": safety.commit,
                                        "repo": str(repo), "ref": safety.ref})
            return RestoreResult(True, plan, tuple(written))
        point = self._point(conversation_id, plan, repo, safety, after)
        if plan.kind == REWIND:
            later = [t.id for t in self.store.turns(conversation_id) if t.id >= plan.turn_id]
            self.store.add_marker(conversation_id, MARKER_TURNS_REWOUND, turn_id=plan.turn_id,
                                  data={"turn_ids": later, "files": written, "point": point})
        else:
            merged = {f.path for f in plan.files if f.action == MERGE}
            for path in written:
                self.store.add_marker(conversation_id, MARKER_FILE_REVERTED,
                                      turn_id=plan.turn_id, data={
                                          "path": path, "point": point,
                                          "merged": path in merged})
        return RestoreResult(True, plan, tuple(written))

    def _safety(self, conversation_id: int, turn_id: int, repo: Path,
                expected: dict[str, rs.State]) -> ck.Checkpoint:
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            raise RestoreInputError(f"no chat {conversation_id}")
        ref = ck.ref_name(chat_ref_part(conversation), str(turn_id), f"undo-{time.time_ns()}")
        if any(rs.state_now(repo, p) != s for p, s in expected.items()):
            raise _Changed
        try:
            return rs.take_safety(repo, ref, expected)
        except rs.Changed as exc:
            raise _Changed from exc

    def _point(self, conversation_id: int, plan: RestorePlan, repo: Path,
               safety: ck.Checkpoint, written: dict[str, list[str]]) -> int | None:
        marker = self.store.add_marker(conversation_id, MARKER_RESTORE_POINT,
                                       turn_id=plan.turn_id, data={
                                           "repo": str(repo), "safety": safety.commit,
                                           "ref": safety.ref, "kind": plan.kind,
                                           "label": plan.label, "written": written})
        return marker.id if marker is not None else None

    # -- a hunk -----------------------------------------------------------------------------------
    def revert_hunk(self, conversation_id: int, turn_id: int, path: str, hunk: ck.Hunk,
                    key: str, confirmed: str = "") -> RestoreResult:
        """Undo one hunk of the turn's change to ``path`` (git apply, so the file's other lines
        stay), after a safety snapshot. A turn recorded after a restart needs a yes. Raises
        CheckpointError when the hunk no longer applies (nothing changed)."""
        record = self.checkpoints.turn_record(conversation_id, turn_id)
        before = self.checkpoints.checkpoints_of(conversation_id, turn_id)[0]
        repo = before.repo
        now = rs.state_now(repo, path)
        plan = self._signed(RestorePlan(HUNK, turn_id, (FilePlan(path, MERGE),), paths=(path,),
                                        late=bool(record.get("late")),
                                        label=f"revert of a change in {path}"), {path: now})
        if plan.blocked or (plan.late and confirmed not in (plan.fingerprint, YES)):
            return RestoreResult(False, plan)
        try:
            safety = self._safety(conversation_id, turn_id, repo, {path: now})
        except _Changed:
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
                                  _blocker(repo, path, now, want, safety)))
            steps.append(rs.Step(path, source=safety))
            expected[path] = now
        plan = self._signed(RestorePlan(UNDO, point.turn_id or 0, tuple(files),
                                        writers=tuple(self.writers(repo)), label=label),
                            expected)
        return self._go(conversation_id, plan, steps, expected, repo, confirmed,
                        undoes=point.id)
