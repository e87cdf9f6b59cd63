"""Background tasks with strong references and logged exceptions.

``asyncio`` keeps only a weak reference to a task, so a fire-and-forget task can be garbage
collected mid-flight; and an exception in a task nobody awaits is reported only when the task is
collected, if ever. ``TaskSet`` fixes both for every task the window and the turn engine start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class TaskSet:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._on_done)
        return task

    def _on_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("task %s failed", task.get_name(), exc_info=exc)

    def __len__(self) -> int:
        return len(self._tasks)

    async def wait(self, timeout: float | None = None) -> None:
        """Wait until every task (including ones started meanwhile) has finished."""
        while self._tasks:
            _done, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
            if pending and timeout is not None:
                return

    async def cancel_all(self) -> None:
        """Cancel every task and wait for them to unwind (they may clean up on cancellation)."""
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
