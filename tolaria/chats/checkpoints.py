"""Checkpoints of a chat's turns: what each turn changed in a git working folder, and undoing it.

Before each turn whose folder is in a git work tree the folder is snapshotted into private refs
(tolaria/core/checkpoints.py: ``refs/tolaria/<chat>/<turn>/before``), and again ``after`` the
turn however it ended (completed, stopped, failed); the changed files are recorded on the turn as
a store marker (``turn_changes``). The before-snapshot is stored at once (``turn_before``), so a
turn whose process died mid-turn gets its after-state at the next start (``recover``, marked
``late``). Reverting, rewinding and Undo are tolaria/chats/restore.py's (they never lose what
the user wrote since); this module reads their markers into ``TurnChanges``. Deleting the chat
deletes its refs.

Git runs off the event loop (``asyncio.to_thread``), one operation at a time per chat, in the
order they were asked for: the snapshot after turn N is taken before the one before turn N + 1,
so no change leaks from one turn into another's list. A failed snapshot never blocks a turn: it
becomes a notice under the turn. A folder outside git gets one muted notice per chat and nothing
that could lose work.

No Qt: the turn engine (tolaria/chats/engine/snapshots.py) of the window and ``tolaria run``,
and the window's Revert / Rewind / Undo (tolaria/qt/checkpoint_control.py) use this.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from tolaria.config.remote_hosts import load_target
from tolaria.config.settings import load_settings
from tolaria.core import checkpoints as ck
from tolaria.core.checkpoints.hosted import on_host
from tolaria.core.process.registry import Run
from tolaria.core.remote.hosts import BadDestination
from tolaria.core.store.db import Conversation, Store

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


class _HasCheckpoints(Protocol):
    checkpoints: TurnCheckpoints


S = TypeVar("S", bound=_HasCheckpoints)


def where_the_chat_is(method: Callable[Concatenate[S, int, P], T]
                      ) -> Callable[Concatenate[S, int, P], T]:
    """A restore or review method (its first argument the chat's id) run with the chat's
    folder where it is: this machine or the chat's host (``TurnCheckpoints.on_chat``)."""
    def wrapper(self: S, conversation_id: int, /, *args: P.args, **kwargs: P.kwargs) -> T:
        with self.checkpoints.on_chat(conversation_id):
            return method(self, conversation_id, *args, **kwargs)

    wrapper.__doc__ = method.__doc__
    wrapper.__name__ = method.__name__
    return wrapper

#: On a turn: ``{"repo", "before", "after", "files": [[path, status], ...]}``.
MARKER_TURN_CHANGES = "turn_changes"
#: On a turn: ``{"text"}``, a muted note (not a git folder; a snapshot that failed).
MARKER_CHECKPOINT_NOTICE = "checkpoint_notice"
#: On a turn: ``{"path"}``, one of its files put back as it was before the turn.
MARKER_FILE_REVERTED = "file_reverted"
#: On the turn rewound to: ``{"turn_ids": [...], "files": [...]}``, the turns whose changes
#: were undone (that turn and every later one) and the files restored.
MARKER_TURNS_REWOUND = "turns_rewound"
#: On a turn, the moment its ``before`` snapshot exists: ``{"repo", "before"}`` (a crash or quit
#: mid-turn then still finds it: ``recover`` records the after-state at the next start, ``late``).
MARKER_TURN_BEFORE = "turn_before"
#: On a turn: ``{"repo", "folder", "safety", "kind", "label", "written": {path: state}}``, a
#: revert / rewind / hunk revert with the safety snapshot taken just before it (Undo's source)
#: and each path's state right after it (Undo checks nothing changed since). The action's own
#: markers name it as ``"point"``; tolaria/chats/restore.py writes both.
MARKER_RESTORE_POINT = "restore_point"
#: On a turn: ``{"point": id}``, that restore point undone (its action markers no longer count).
MARKER_RESTORE_UNDONE = "restore_undone"

NOT_GIT = "Not a git folder: changes are not tracked"
TOO_WIDE = ("The home folder or / is too wide to track: changes are not tracked (open the chat "
            "on a project folder)")
_FAILURES = (ck.CheckpointError, OSError, ValueError)
_TURN_MARKERS = (MARKER_TURN_CHANGES, MARKER_FILE_REVERTED, MARKER_CHECKPOINT_NOTICE,
                 MARKER_RESTORE_POINT)


@dataclass(frozen=True)
class TurnChanges:
    """What the window shows under one turn: its changed files and what was undone."""

    turn_id: int
    stream_id: str
    files: tuple[ck.FileChange, ...] = ()
    reverted: frozenset[str] = frozenset()
    #: Its changes were undone by "Rewind to before" this or an earlier turn.
    rewound: bool = False
    #: A muted note instead of (or besides) the files.
    notice: str | None = None
    #: Its after-state was recorded at a later start: it may hold the user's own edits.
    late: bool = False
    #: A revert / rewind waiting for the user's go-ahead, or refused (a RestorePlan).
    confirm: Any = None
    #: The last revert / rewind / hunk revert on this turn that Undo can take back ("" none).
    undo: str = ""


#: UndoRequest kinds besides revert (``path`` given) and rewind (None).
UNDO_LAST, CANCEL = "undo", "cancel"


@dataclass(frozen=True)
class UndoRequest:
    """Put files of a turn back (``path``; ``paths`` for several), rewind the folder to before
    it (None), undo the turn's last restore (``kind`` UNDO_LAST), or drop a shown confirm
    (CANCEL). ``confirmed``: the fingerprint of the plan the user said yes to."""

    turn_id: int
    path: str | None = None
    kind: str = ""
    confirmed: str = ""


def chat_ref_part(conversation: Conversation) -> str:
    """The chat's ref folder: its id and creation time, so another Tolaria home's chat with the
    same id never shares (or deletes) its refs."""
    return f"{conversation.id}-{int(conversation.created_at * 1000)}"


async def until_stopped(pending: Awaitable[object], run: Run) -> None:
    """Await ``pending`` (a ``before`` snapshot) unless ``run`` is stopped first: then return at
    once (the caller cancels the snapshot, whose git is killed in its thread)."""
    task = asyncio.ensure_future(pending)
    if run.stop_requested:
        return
    stop = asyncio.ensure_future(run.stop_event.wait())
    try:
        await asyncio.wait([task, stop], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()


def too_wide(folder: Path) -> bool:
    """The home folder or ``/``: snapshotting it would hash everything the user has."""
    try:
        real = folder.resolve()
        return real == Path(real.anchor) or real == Path.home().resolve()
    except (OSError, RuntimeError):
        return False


def current_limits() -> ck.Limits:
    """What a snapshot may take of untracked files, from settings.toml ``[checkpoints]``."""
    settings, _problems = load_settings()
    return ck.Limits(max_file_bytes=int(settings.checkpoint_max_file_mb * ck.MB),
                     max_files=settings.checkpoint_max_files,
                     max_bytes=int(settings.checkpoint_max_total_mb * ck.MB),
                     time_budget_s=settings.checkpoint_time_budget_seconds)


class TurnCheckpoints:
    """Snapshots around turns, per chat in order; reads and writes their markers in ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: The last operation asked for per chat: the next one waits for it.
        self._tails: dict[int, asyncio.Future[Any]] = {}
        #: turn id -> its ``before`` checkpoint, until the ``after`` one is recorded.
        self._before: dict[int, ck.Checkpoint] = {}
        #: turn id -> the cancel of its ``before`` snapshot while it is taken (a Stop kills it).
        self._cancels: dict[int, ck.Cancel] = {}
        #: (chat, turn) -> the RestorePlan shown as a confirm under that turn (the window's).
        self.pending: dict[tuple[int, int], Any] = {}

    # -- around a turn (blocking: ``tolaria run`` calls these directly) -------------------------
    def take_before(self, conversation: Conversation, turn_id: int, cwd: str) -> None:
        """Snapshot ``cwd`` before the turn runs. Never raises for git's sake: a failure
        becomes a notice on the turn. ``cancel_before(turn_id)`` kills it (a Stop)."""
        cancel = self._cancels.setdefault(turn_id, ck.Cancel())
        try:
            with self.on_chat(conversation.id):
                self._take_before(conversation, turn_id, cwd, cancel)
        except ck.CheckpointCancelled:
            return  # stopped before the agent started: nothing to track
        except _FAILURES as exc:
            self.note(conversation.id, turn_id, f"Could not record this turn's checkpoint: {exc}")
        finally:
            self._cancels.pop(turn_id, None)

    def _take_before(self, conversation: Conversation, turn_id: int, cwd: str,
                     cancel: ck.Cancel) -> None:
        if (not cwd and conversation.host) or too_wide(Path(cwd)):
            self._notice_once(conversation.id, turn_id, TOO_WIDE)
            return
        repo = ck.find_repo(Path(cwd))
        if repo is None:
            self._notice_once(conversation.id, turn_id, NOT_GIT)
            return
        if too_wide(repo):
            self._notice_once(conversation.id, turn_id, TOO_WIDE)
            return
        ref = ck.ref_name(chat_ref_part(conversation), str(turn_id), "before")
        self._before[turn_id] = ck.snapshot(Path(cwd), ref, limits=current_limits(),
                                            cancel=cancel)
        self._store_before(conversation.id, turn_id, self._before[turn_id])

    def resume_before(self, conversation_id: int, turn_id: int) -> bool:
        """A turn taken back mid-run (a kept remote run reattached: ADR 0032) keeps the
        before-state stored when it started. A snapshot taken now would hide what the turn
        changed before, and replace the ref that keeps the pre-turn files. False when the turn
        had none (not a git folder, the snapshot failed: its notice was said then)."""
        if turn_id in self._before:
            return True
        stored = [m.data for m in self.store.markers(conversation_id, MARKER_TURN_BEFORE)
                  if m.turn_id == turn_id and isinstance(m.data, dict)]
        if not stored:
            return False
        self._before[turn_id] = ck.Checkpoint(Path(str(stored[-1]["repo"])),
                                              str(stored[-1]["before"]), ref="")
        return True

    def cancel_before(self, turn_id: int) -> None:
        """Kill the turn's ``before`` snapshot now (from any thread); a snapshot not yet begun
        is skipped."""
        self._cancels.setdefault(turn_id, ck.Cancel()).set()

    def record_after(self, conversation: Conversation, turn_id: int) -> TurnChanges | None:
        """Snapshot after the turn ended (any end) and record its changed files; None when it
        had no checkpoint before (or the snapshot failed: a notice says why)."""
        self._cancels.pop(turn_id, None)  # a Stop's cancel for a snapshot that never began
        before = self._before.pop(turn_id, None)
        if before is None or not self._record(conversation, turn_id, before):
            return None
        return next((c for c in self.changes(conversation.id) if c.turn_id == turn_id), None)

    def _record(self, conversation: Conversation, turn_id: int, before: ck.Checkpoint, *,
                late: bool = False) -> bool:
        """Snapshot the after-state (with the settings' limits), record the changed files and
        say what either snapshot left out; False (and a notice) when git failed."""
        try:
            with self.on_chat(conversation.id):
                after, files, skipped = self._after(conversation, turn_id, before)
        except _FAILURES as exc:
            self.note(conversation.id, turn_id, f"Could not record what this turn changed: {exc}")
            return False
        return self._keep(conversation, turn_id, before, after, files, skipped, late)

    def _after(self, conversation: Conversation, turn_id: int, before: ck.Checkpoint
               ) -> tuple[ck.Checkpoint, list[ck.FileChange], ck.Skipped]:
        after = ck.snapshot(before.repo,
                            ck.ref_name(chat_ref_part(conversation), str(turn_id), "after"),
                            limits=current_limits())
        files = ck.changes(before, after)
        skipped = ck.skipped_of(before).merged(ck.skipped_of(after))
        return after, files, skipped

    def _keep(self, conversation: Conversation, turn_id: int, before: ck.Checkpoint,
              after: ck.Checkpoint, files: list[ck.FileChange], skipped: ck.Skipped,
              late: bool) -> bool:
        data: dict[str, Any] = {
            "repo": str(before.repo), "before": before.commit, "after": after.commit,
            "files": [[f.path, f.status] for f in files], "skipped": skipped.to_json()}
        if late:
            data["late"] = True
        self.store.add_marker(conversation.id, MARKER_TURN_CHANGES, turn_id=turn_id, data=data)
        if skipped:
            self.note(conversation.id, turn_id, skipped.summary())
        return True

    # -- the same off the event loop, in order per chat -----------------------------------------
    def before_turn(self, conversation: Conversation, turn_id: int, cwd: str) -> Awaitable[None]:
        """``take_before`` in a thread; await it before starting the agent."""
        return self._serial(conversation.id, self.take_before, conversation, turn_id, cwd)

    def after_turn(self, conversation: Conversation, turn_id: int) -> Awaitable[TurnChanges | None]:
        """``record_after`` in a thread. Call it at once when the turn ends (the order
        matters: the next turn's ``before`` waits for it)."""
        return self._serial(conversation.id, self.record_after, conversation, turn_id)

    def _store_before(self, conversation_id: int, turn_id: int, before: ck.Checkpoint) -> None:
        self.store.add_marker(conversation_id, MARKER_TURN_BEFORE, turn_id=turn_id,
                              data={"repo": str(before.repo), "before": before.commit})

    def recover(self, conversation: Conversation, live: set[str] | None = None) -> list[int]:
        """Record the after-state of the chat's turns whose before-snapshot was stored but
        whose process ended (crash, quit) before the after one: taken now, marked ``late``
        (the user may have edited files since). ``live``: stream ids other processes still
        run (left alone). Returns the turns recorded; a failure becomes a notice."""
        recorded = {m.turn_id for m in self.store.markers(conversation.id, MARKER_TURN_CHANGES)}
        turns = {t.id: t for t in self.store.turns(conversation.id)}
        done = []
        for marker in self.store.markers(conversation.id, MARKER_TURN_BEFORE):
            turn = turns.get(marker.turn_id or -1)
            if (turn is None or turn.id in recorded or turn.id in self._before
                    or turn.status == "running" or turn.stream_id in (live or set())
                    or not isinstance(marker.data, dict)):
                continue
            before = ck.Checkpoint(Path(str(marker.data["repo"])), str(marker.data["before"]),
                                   ref="")
            recorded.add(turn.id)
            if self._record(conversation, turn.id, before, late=True):
                done.append(turn.id)
        return done

    # -- a chat ------------------------------------------------------------------------------------
    def changes(self, conversation_id: int) -> list[TurnChanges]:
        """Every turn of the chat with recorded changes, a notice or a rewind, oldest first,
        with the confirm waiting on it (``pending``) and the restore Undo can take back."""
        streams = {t.id: t.stream_id for t in self.store.turns(conversation_id)}
        markers = self.store.markers(conversation_id)
        undone = self.undone_points(conversation_id, markers)
        found: dict[int, TurnChanges] = {}
        rewound: set[int] = set()
        for marker in markers:
            data = marker.data if isinstance(marker.data, dict) else {}
            if data.get("point") in undone or (marker.kind == MARKER_RESTORE_POINT
                                               and marker.id in undone):
                continue
            if marker.kind == MARKER_TURNS_REWOUND:
                rewound.update(i for i in data.get("turn_ids", ()) if isinstance(i, int))
                continue
            turn_id = marker.turn_id
            if turn_id not in streams or marker.kind not in _TURN_MARKERS:
                continue
            current = found.get(turn_id) or TurnChanges(turn_id, streams[turn_id])
            if marker.kind == MARKER_TURN_CHANGES:
                files = tuple(ck.FileChange(str(p), str(s)) for p, s in data.get("files", ()))
                current = dataclasses.replace(current, files=files,
                                              late=bool(data.get("late")))
            elif marker.kind == MARKER_FILE_REVERTED:
                current = dataclasses.replace(
                    current, reverted=current.reverted | {str(data.get("path"))})
            elif marker.kind == MARKER_RESTORE_POINT:
                current = dataclasses.replace(current, undo=str(data.get("label") or "restore"))
            else:
                current = dataclasses.replace(current, notice=str(data.get("text")))
            found[turn_id] = current
        for turn_id in rewound & streams.keys():
            current = found.get(turn_id) or TurnChanges(turn_id, streams[turn_id])
            found[turn_id] = dataclasses.replace(current, rewound=True)
        for (chat, turn_id), plan in self.pending.items():
            if chat == conversation_id and turn_id in streams:
                current = found.get(turn_id) or TurnChanges(turn_id, streams[turn_id])
                found[turn_id] = dataclasses.replace(current, confirm=plan)
        return [found[k] for k in sorted(found)]

    def undone_points(self, conversation_id: int, markers: list[Any] | None = None) -> set[int]:
        """The ids of the chat's restore points that were undone."""
        return {int(m.data["point"]) for m in (markers or self.store.markers(conversation_id))
                if m.kind == MARKER_RESTORE_UNDONE and isinstance(m.data, dict)
                and isinstance(m.data.get("point"), int)}

    def turn_record(self, conversation_id: int, turn_id: int) -> dict[str, Any]:
        """The turn's ``turn_changes`` marker data; CheckpointError when it has none."""
        record = self.turn_records(conversation_id).get(turn_id)
        if record is None:
            raise ck.CheckpointError("this turn has no checkpoint")
        return record

    def turn_records(self, conversation_id: int) -> dict[int, dict[str, Any]]:
        """Every turn's latest ``turn_changes`` marker data, by turn id."""
        return {m.turn_id: dict(m.data)
                for m in self.store.markers(conversation_id, MARKER_TURN_CHANGES)
                if m.turn_id is not None and isinstance(m.data, dict)}

    def repos(self, conversation: Conversation) -> set[Path]:
        """The git folders that hold the chat's refs (ask before the chat is deleted)."""
        repos = {Path(str(m.data.get("repo"))) for m in self.store.markers(
            conversation.id, MARKER_TURN_CHANGES) if isinstance(m.data, dict)}
        if conversation.cwd:
            repos.add(Path(conversation.cwd))
        return repos

    def delete_chat(self, conversation: Conversation, repos: set[Path]) -> Awaitable[int]:
        """Delete the chat's refs in each folder, after its pending snapshots (so none comes
        back); returns how many went. Best effort: a folder gone or no longer git is skipped."""
        return self._serial(conversation.id, self._delete_refs, conversation, repos)

    def delete_chat_now(self, conversation: Conversation, repos: set[Path]) -> int:
        """``delete_chat`` in the caller's thread (``tolaria chats --delete``)."""
        return self._delete_refs(conversation, repos)

    def _delete_refs(self, conversation: Conversation, repos: set[Path]) -> int:
        prefix = ck.REF_PREFIX + chat_ref_part(conversation) + "/"
        deleted = 0
        for folder in repos:
            try:
                with self.on_chat(conversation.id):
                    repo = ck.find_repo(folder)
                    if repo is not None:
                        deleted += ck.delete(repo, prefix)
            except _FAILURES:
                log.exception("could not delete the checkpoints of chat %s in %s",
                              conversation.id, folder)
        return deleted

    # -- internals ---------------------------------------------------------------------------------
    def _serial(self, conversation_id: int, work: Callable[..., T], *args: Any) -> Awaitable[T]:
        """Run ``work(*args)`` in a thread once the chat's previous operation has ended."""
        previous = self._tails.get(conversation_id)

        async def run() -> T:
            if previous is not None:
                await asyncio.wait([previous])  # its outcome is its own caller's business
            return await asyncio.to_thread(self._on_chat_do, conversation_id, work, *args)

        task = asyncio.ensure_future(run())
        self._tails[conversation_id] = task
        return task

    def _on_chat_do(self, conversation_id: int, work: Callable[..., T], *args: Any) -> T:
        with self.on_chat(conversation_id):
            return work(*args)

    @contextlib.contextmanager
    def on_chat(self, conversation_id: int) -> Iterator[None]:
        """Within it, checkpoints and restores work where the chat's folder is: this machine,
        or the chat's host (git runs there: tolaria/core/checkpoints/hosted.py)."""
        conversation = self.store.get_conversation(conversation_id)
        host = conversation.host if conversation is not None else None
        if not host:
            yield
            return
        try:
            target = load_target(host)
        except BadDestination as exc:
            raise ck.CheckpointError(f"the chat's host {host}: {exc}") from exc
        with on_host(target):
            yield

    def in_order(self, conversation_id: int, work: Callable[..., T], *args: Any) -> Awaitable[T]:
        """Run ``work(*args)`` in a thread after the chat's pending git operations (the diff
        review, tolaria/chats/review.py, queues behind the snapshots this way)."""
        return self._serial(conversation_id, work, *args)

    def checkpoints_of(self, conversation_id: int, turn_id: int
                       ) -> tuple[ck.Checkpoint, ck.Checkpoint]:
        """The turn's ``before`` and ``after`` checkpoints; CheckpointError when it has none."""
        data = self.turn_record(conversation_id, turn_id)
        repo = Path(str(data["repo"]))
        return (ck.Checkpoint(repo, str(data["before"]), ref=""),
                ck.Checkpoint(repo, str(data["after"]), ref=""))

    def recorded_paths(self, conversation_id: int, turn_id: int) -> set[str]:
        """The files the turn changed, as recorded after it."""
        return self._recorded_paths(conversation_id, turn_id)

    def _recorded_paths(self, conversation_id: int, turn_id: int) -> set[str]:
        for change in self.changes(conversation_id):
            if change.turn_id == turn_id:
                return {f.path for f in change.files}
        return set()

    def note(self, conversation_id: int, turn_id: int, text: str) -> None:
        """A muted note under the turn (a failed undo, a failed snapshot)."""
        self.store.add_marker(conversation_id, MARKER_CHECKPOINT_NOTICE, turn_id=turn_id,
                              data={"text": text})

    def _notice_once(self, conversation_id: int, turn_id: int, text: str) -> None:
        said = self.store.markers(conversation_id, MARKER_CHECKPOINT_NOTICE)
        if not any(isinstance(m.data, dict) and m.data.get("text") == text for m in said):
            self.note(conversation_id, turn_id, text)

