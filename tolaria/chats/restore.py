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
``restore_point`` marker with it, so Undo (tolaria/chats/restore_undo.py; kept across restarts) gives
back the exact bytes - after checking that nothing changed since the restore, or with a yes.

Agents writing in the same repository (another chat of this process, another Tolaria process:
``writers``) are said in the plan and need a yes. Blocking (``asyncio.to_thread`` through
``TurnCheckpoints.in_order``); no Qt.
"""

from __future__ import annotations

import dataclasses
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
    current_limits,
    where_the_chat_is,
)
from tolaria.chats.restore_plan import (
    DELETE,
    MERGE,
    RESTORE,
    REVERT,
    REWIND,
    YES,
    FilePlan,
    RestorePlan,
    RestoreResult,
)
from tolaria.chats.restore_undo import (
    MARKER_HUNK_REVERTED,
    RestoreInputError,
    SafetyChanged,
    UndoAndHunks,
    blocker,
    signed,
)
from tolaria.core import checkpoints as ck
from tolaria.core import restore as rs

__all__ = ["MARKER_HUNK_REVERTED", "RestoreInputError", "TurnRestore", "describe_runs",
           "other_process_writers"]

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


class TurnRestore(UndoAndHunks):
    """Plans and carries out restores of one store's chats (see the module's docstring)."""

    def __init__(self, checkpoints: TurnCheckpoints,
                 writers: Callable[[Path], list[str]] | None = None) -> None:
        self.checkpoints = checkpoints
        self.store = checkpoints.store
        self.writers = writers or other_process_writers

    # -- entry points ---------------------------------------------------------------------------
    @where_the_chat_is
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

    @where_the_chat_is
    def run(self, conversation_id: int, turn_id: int, kind: str, paths: Sequence[str] = (),
            confirmed: str = "") -> RestoreResult:
        """Revert ``paths`` of the turn (all its files when empty) or rewind to before it.
        ``confirmed``: the plan's fingerprint the user said yes to, or YES for any."""
        if kind not in (REVERT, REWIND):
            raise ValueError(f"not a restore kind: {kind!r}")
        work = self._plan_revert if kind == REVERT else self._plan_rewind
        plan, steps, expected, repo = work(conversation_id, turn_id, list(paths))
        return self._go(conversation_id, plan, steps, expected, repo, confirmed)

    @where_the_chat_is
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
        nows = rs.states_now(repo, paths)
        for path in paths:
            now, want, base = nows[path], targets[path], bases[path]
            if now == want:
                continue
            later = ""
            if now != base:
                by = [str(numbers[t]) for t, fs in later_files if path in fs]
                later = "changed since this turn" + (f" (also by turn {', '.join(by)})"
                                                     if by else "")
            why = blocker(repo, path, now, want, before)
            step = rs.Step(path, source=before)
            action = RESTORE if want.exists else DELETE
            if later and not why and rs.FILE == now.kind == want.kind == base.kind:
                merged = rs.merge_out(repo, rs.blob(repo, base), rs.read_now(repo, path),
                                      rs.blob(repo, want))
                if merged is not None:
                    action, step = MERGE, rs.Step(path, data=merged, mode=now.mode)
            files.append(FilePlan(path, action, later, why))
            steps.append(step)
            expected[path] = now
        label = f"revert of {paths[0]}" if len(paths) == 1 else f"revert of {len(paths)} files"
        plan = RestorePlan(REVERT, turn_id, tuple(files), paths=tuple(paths),
                           writers=tuple(self.writers(repo)),
                           late=bool(record.get("late")), label=label)
        return signed(plan, expected), steps, expected, repo

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
        nows = rs.states_now(repo, inside)
        for path in inside:
            now, want = nows[path], targets[path]
            if now == want:
                continue
            later = "" if now == refs[path] else f"changed since turn {last[path][1]}"
            files.append(FilePlan(path, RESTORE if want.exists else DELETE, later,
                                  blocker(repo, path, now, want, first[path])))
            steps.append(rs.Step(path, source=first[path]))
            expected[path] = now
        start = self.checkpoints.checkpoints_of(conversation_id, turn_id)[0]
        kept = tuple(sorted(c.path for c in ck.changes(start, limits=current_limits())
                            if c.path not in first
                            and (scope is None or Path(c.path).is_relative_to(scope))))
        plan = RestorePlan(REWIND, turn_id, tuple(files), kept=kept, outside=outside,
                           writers=tuple(self.writers(repo)), late=late,
                           label=f"rewind ({len(files)} file{'s' if len(files) != 1 else ''})")
        return signed(plan, expected), steps, expected, repo

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
        except SafetyChanged:
            return RestoreResult(False, dataclasses.replace(plan, stale=True))
        try:
            written = rs.apply(repo, steps, safety)
        except ck.CheckpointError:
            rs.drop(safety)
            raise
        after = {p: s.as_json() for p, s in rs.states_now(repo, written).items()}
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
        if rs.states_now(repo, list(expected)) != expected:
            raise SafetyChanged
        try:
            return rs.take_safety(repo, ref, expected, current_limits())
        except rs.Changed as exc:
            raise SafetyChanged from exc

    def _point(self, conversation_id: int, plan: RestorePlan, repo: Path,
               safety: ck.Checkpoint, written: dict[str, list[str]]) -> int | None:
        marker = self.store.add_marker(conversation_id, MARKER_RESTORE_POINT,
                                       turn_id=plan.turn_id, data={
                                           "repo": str(repo), "safety": safety.commit,
                                           "ref": safety.ref, "kind": plan.kind,
                                           "label": plan.label, "written": written})
        return marker.id if marker is not None else None
