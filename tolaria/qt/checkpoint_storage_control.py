"""Preferences → Checkpoints: measures the checkpoint stores and prunes them off the event loop
(tolaria/chats/checkpoint_storage.py), answering the page with facts.

A preview and the prune it confirms are computed fresh each time (a chat deleted meanwhile, a
turn that started meanwhile), and a prune never takes the checkpoint of a running turn. Turns that
lost theirs get a note, announced to their chats (``on_turns_noted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from tolaria.chats import checkpoint_storage as cs
from tolaria.core.checkpoints import CheckpointError
from tolaria.core.store.db import Store
from tolaria.qt.tasks import TaskSet


class CheckpointStorageControl(QObject):
    #: list[StorageRow], the total size as text.
    usage_ready = Signal(object, str)
    #: The inline confirm's text, how many checkpoints it would remove.
    plan_ready = Signal(str, int)
    #: What was done (or why not).
    pruned = Signal(str)

    def __init__(self, store: Store, tasks: TaskSet,
                 on_turns_noted: Callable[[set[int]], None] | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.tasks = tasks
        self.on_turns_noted = on_turns_noted

    def refresh(self) -> None:
        self.tasks.spawn(self._refresh(), name="checkpoint-usage")

    def preview(self, days: object) -> None:
        self.tasks.spawn(self._preview(_age(days)), name="checkpoint-prune-preview")

    def prune(self, days: object) -> None:
        self.tasks.spawn(self._prune(_age(days)), name="checkpoint-prune")

    async def _refresh(self) -> None:
        repos = await asyncio.to_thread(cs.survey, self.store, None)
        rows = [cs.StorageRow(r.label, cs.human_size(r.usage.size_bytes), len(r.usage.refs),
                           len(r.orphaned), "repository gone" if r.usage.repo_missing else "")
                for r in repos]
        self.usage_ready.emit(rows, cs.human_size(sum(r.usage.size_bytes for r in repos)))

    async def _preview(self, days: float | None) -> None:
        repos = await asyncio.to_thread(cs.survey, self.store, days)
        removable = sum(len(r.orphaned) + len(r.old) for r in repos)
        self.plan_ready.emit(cs.describe(repos, old_turns=days is not None), removable)

    async def _prune(self, days: float | None) -> None:
        try:
            repos = await asyncio.to_thread(cs.survey, self.store, days)
            said = cs.describe(repos, old_turns=days is not None)
            done = await asyncio.to_thread(cs.prune, self.store, repos,
                                           old_turns=days is not None)
        except (CheckpointError, OSError) as exc:
            self.pruned.emit(f"Prune failed: {exc}")
            return
        chats = {chat for r in repos for chat, _turn in r.old_turns} if days is not None else set()
        if chats and self.on_turns_noted is not None:
            self.on_turns_noted(chats)
        self.pruned.emit(f"Done: removed {done.refs_deleted} checkpoints, freed "
                         f"{cs.human_size(done.bytes_freed)}. ({said})")
        await self._refresh()


def _age(days: object) -> float | None:
    return float(days) if isinstance(days, int | float) else None
