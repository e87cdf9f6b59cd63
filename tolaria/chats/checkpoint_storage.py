"""Checkpoint storage you can see and prune (issue 21 item 7), for Preferences and the CLI.

``survey`` lists each repository's store (size, checkpoints) and sorts its refs: those of chats
that no longer exist (deleted in the window, or never stored), and those of turns older than an
age of chats that still exist. ``prune`` always removes the first kind; the second only when
asked explicitly (``old_turns=True``): those turns are still visible with their files, and each
one pruned gets a note under it, so it never silently loses Revert and Rewind. No Qt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tolaria.chats.checkpoints import MARKER_CHECKPOINT_NOTICE, chat_ref_part
from tolaria.core.checkpoints import storage
from tolaria.core.checkpoints.storage import CheckpointRef, StoreUsage
from tolaria.core.store.db import Store

PRUNED_NOTE = ("Checkpoint pruned from storage: this turn's files can no longer be reverted or "
               "rewound")
DAY = 86_400.0


@dataclass(frozen=True)
class RepoCheckpoints:
    """One repository's store, sorted for pruning."""

    usage: StoreUsage
    #: Refs of chats that are not in the store (deleted chats): always prunable.
    orphaned: tuple[CheckpointRef, ...] = ()
    #: Refs of turns older than the age asked for, of chats that still exist: prunable only
    #: when asked (their turns are visible).
    old: tuple[CheckpointRef, ...] = ()
    #: (chat id, turn id) of those old turns.
    old_turns: frozenset[tuple[int, int]] = field(default_factory=frozenset)

    @property
    def label(self) -> str:
        repo = self.usage.repo
        return str(repo) if repo is not None else self.usage.store.name


def survey(store: Store, older_than_days: float | None = None) -> list[RepoCheckpoints]:
    """Every store with its refs sorted (``older_than_days`` None: no turn counts as old)."""
    chats = {chat_ref_part(c): c for c in store.list_conversations()}
    cutoff = time.time() - older_than_days * DAY if older_than_days is not None else None
    started: dict[int, float] = {}
    running: set[int] = set()
    seen: set[int] = set()
    found = []
    for path in storage.every_store():
        usage = storage.usage(path)
        orphaned, old, turns = [], [], set()
        for ref in usage.refs:
            chat = chats.get(ref.chat_part)
            if chat is None:
                orphaned.append(ref)
                continue
            if cutoff is None or ref.turn_id is None:
                continue
            if chat.id not in seen:
                seen.add(chat.id)
                for t in store.turns(chat.id):
                    started[t.id] = t.started_at
                    if t.status == "running":
                        running.add(t.id)
            when = started.get(ref.turn_id)
            if ref.turn_id in running:  # a turn running now needs its checkpoint
                continue
            if when is None:  # the turn is gone from its chat: nothing shows it
                orphaned.append(ref)
            elif when < cutoff:
                old.append(ref)
                turns.add((chat.id, ref.turn_id))
        found.append(RepoCheckpoints(usage, tuple(orphaned), tuple(old), frozenset(turns)))
    return found


@dataclass(frozen=True)
class StorageRow:
    """One repository's line in Preferences → Checkpoints."""

    repo: str
    size: str
    checkpoints: int
    of_deleted_chats: int
    note: str = ""


@dataclass(frozen=True)
class Pruned:
    refs_deleted: int
    bytes_freed: int
    turns_noted: int


def prune(store: Store, repos: list[RepoCheckpoints], *, old_turns: bool = False,
          grace_s: float = 600.0) -> Pruned:
    """Remove the orphaned refs (and with ``old_turns`` the old turns' refs, each such turn
    getting a note under it) and what no ref reaches any more."""
    deleted = freed = 0
    noted: set[tuple[int, int]] = set()
    for repo in repos:
        drop = {r.ref for r in repo.orphaned}
        if old_turns:
            drop |= {r.ref for r in repo.old}
        if not drop and not repo.usage.repo_missing:
            continue
        chosen = frozenset(drop)

        def picked(ref: CheckpointRef, chosen: frozenset[str] = chosen) -> bool:
            return ref.ref in chosen

        result = storage.prune(repo.usage.store, picked, grace_s=grace_s)
        deleted += result.refs_deleted
        freed += result.bytes_freed
        if old_turns:
            noted |= repo.old_turns
    for chat_id, turn_id in sorted(noted):
        store.add_marker(chat_id, MARKER_CHECKPOINT_NOTICE, turn_id=turn_id,
                         data={"text": PRUNED_NOTE})
    return Pruned(deleted, freed, len(noted))


def describe(repos: list[RepoCheckpoints], *, old_turns: bool) -> str:
    """What a prune would do, in one or two sentences (the inline confirm's text)."""
    orphaned = sum(len(r.orphaned) for r in repos)
    old = sum(len(r.old) for r in repos)
    turns = sum(len(r.old_turns) for r in repos)
    parts = []
    if orphaned:
        parts.append(f"{_n(orphaned, 'checkpoint')} of deleted chats")
    if old_turns and old:
        parts.append(f"{_n(old, 'checkpoint')} of {_n(turns, 'older turn')} still shown, which "
                     f"keep{'s' if turns == 1 else ''} {'its' if turns == 1 else 'their'} file "
                     "list but lose" + ("s" if turns == 1 else "") + " Revert and Rewind (a note "
                     "under each says so)")
    text = "Removes " + " and ".join(parts) + "." if parts else "Nothing to remove."
    kept = sum(len(r.usage.refs) for r in repos) - orphaned - (old if old_turns else 0)
    if kept:
        text += f" Kept: {kept} of chats still shown."
    return text


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
