"""The process registry: validated stream id -> the run (and its processes).

This is the only way to stop a run. It is keyed by stream id; pids are data it keeps to itself.
``abort`` is safe from any thread, never blocks, and is idempotent: the first call on a live run
returns True and schedules the stop on the run's own event loop; any later call, or a call for
an unknown or finished id, returns False. An abort that lands before the agent process exists is
remembered: the run then never spawns, or kills the child the moment it appears.

A caller that does work of its own before the turn (the window's git snapshot, ``tolaria run``'s
signal handlers and control socket) ``reserve``s the run first, at the moment it hands out the
stream id: from then on every stop (button, Esc, stop all, ``tolaria abort``, Ctrl+C, quit)
reaches the run, and a run stopped that early ends ``cancelled`` without ever spawning.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tolaria.core.events import Survivor
from tolaria.core.process import proctree, tracking, watchdog
from tolaria.core.stream_id import validate_stream_id

PENDING = "pending"  # registered, agent not spawned yet
RUNNING = "running"  # agent spawned
STOPPING = "stopping"  # stop requested (by abort)
FINISHING = "finishing"  # agent exited on its own; cleaning up, too late to abort
FINISHED = "finished"


class DuplicateStreamError(RuntimeError):
    """A stream id may carry one live run at a time."""


@dataclass(eq=False)
class Run:
    """Book-keeping of one live run. Mutated under ``ProcessRegistry._lock`` only."""

    stream_id: str
    agent: str
    loop: asyncio.AbstractEventLoop
    cwd: str | None = None
    started_at: float = field(default_factory=time.time)
    state: str = PENDING
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    finished: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    #: What the run's stop could not end (its ``done.survivors``), set before ``finished``.
    survivors: tuple[Survivor, ...] = ()
    #: Where the run writes down its processes for the watchdog (tracking.py), set on register.
    track_path: str | None = None
    #: How to let the run go without stopping it (a kept remote run's link, set by its turn
    #: once spawned; ADR 0032's Quit), and whether that was asked (``detach``).
    let_go: Callable[[], None] | None = None
    detached: bool = False

    @property
    def stop_requested(self) -> bool:
        return self.state == STOPPING

    def info(self) -> dict[str, Any]:
        return {
            "stream_id": self.stream_id,
            "agent": self.agent,
            "state": self.state,
            "cwd": self.cwd,
            "started_at": self.started_at,
        }


class ProcessRegistry:
    def __init__(self) -> None:
        # Become subreaper now, before anything is spawned, so every child the app starts for
        # itself inherits the app-child marker and is never mistaken for a run's orphan.
        proctree.enable_child_subreaper()
        self._lock = threading.Lock()
        self._runs: dict[str, Run] = {}

    # -- used by the runner -------------------------------------------------------------------
    def register(self, run: Run) -> None:
        with self._lock:
            if run.stream_id in self._runs:
                raise DuplicateStreamError(f"stream {run.stream_id} already has a live run")
            self._runs[run.stream_id] = run
        run.track_path = str(tracking.path_for(run.stream_id))
        # Before anything is spawned: should the app die from here on, its watchdog ends the run
        # (what carries its marker, and what its tracking file names).
        watchdog.run_started(run.stream_id, run.track_path)

    def reserve(self, stream_id: str, agent: str, cwd: str | None = None) -> Run:
        """Register a PENDING run of ``stream_id`` on the running loop, before its turn starts;
        hand it to ``stream_ai_agent(run=...)``. Whoever reserves a run must ``unregister`` it
        if the turn never starts (the runner unregisters the ones it runs)."""
        validate_stream_id(stream_id)
        run = Run(stream_id, agent, asyncio.get_running_loop(), cwd=cwd)
        self.register(run)
        return run

    def unregister(self, run: Run) -> None:
        with self._lock:
            run.state = FINISHED
            mine = self._runs.get(run.stream_id) is run
            if mine:
                del self._runs[run.stream_id]
        if mine:
            watchdog.run_ended(run.stream_id)
            if run.track_path is not None:
                tracking.forget(run.track_path)
        if not run.finished.done():
            run.finished.set_result(None)

    def transition(self, run: Run, new_state: str) -> str:
        """Move a run to RUNNING or FINISHING unless a stop got there first; return the state."""
        with self._lock:
            if run.state != STOPPING:
                run.state = new_state
            return run.state

    def force_stop(self, run: Run) -> None:
        """The run's task was cancelled: treat it as a stop unless it is already finishing."""
        with self._lock:
            if run.state in (PENDING, RUNNING):
                run.state = STOPPING

    def live_count(self) -> int:
        with self._lock:
            return len(self._runs)

    # -- public -------------------------------------------------------------------------------
    def abort(self, stream_id: str) -> bool:
        """Request the stop of ``stream_id``'s run. Raises InvalidStreamId for a bad id."""
        validate_stream_id(stream_id)
        with self._lock:
            run = self._runs.get(stream_id)
            if run is None or run.state not in (PENDING, RUNNING) or run.detached:
                return False
            run.state = STOPPING
        try:
            run.loop.call_soon_threadsafe(run.stop_event.set)
        except RuntimeError:
            # The run's loop is closed: the run cannot be alive any more.
            return False
        return True

    def detach(self, stream_id: str) -> bool:
        """Let a running run go without a stop (Tolaria quits, the run is kept on its host:
        ADR 0032): its turn ends here, its processes there go on; no abort reaches it after.
        False when the run cannot be let go (not spawned yet, ending, not a remote link)."""
        with self._lock:
            run = self._runs.get(stream_id)
            if run is None or run.state != RUNNING or run.let_go is None or run.detached:
                return False
            run.detached = True
            let_go = run.let_go
        try:
            run.loop.call_soon_threadsafe(let_go)
        except RuntimeError:
            return False
        return True

    def can_let_go(self, stream_id: str) -> bool:
        """Whether ``detach`` would let the run go now."""
        with self._lock:
            run = self._runs.get(stream_id)
            return run is not None and run.state == RUNNING and run.let_go is not None \
                and not run.detached

    async def abort_and_wait(self, stream_id: str) -> bool:
        """``abort``, then wait until the run has finished (tree gone, ``done`` emitted);
        True only if this stopped it and nothing of it survived."""
        stopped, _survivors = await self.abort_and_report(stream_id)
        return stopped

    async def abort_and_report(self, stream_id: str) -> tuple[bool, tuple[Survivor, ...]]:
        """``abort_and_wait``, with what survived the stop: a stop is never reported done
        while a process of the run lives (``tolaria abort`` prints false then)."""
        validate_stream_id(stream_id)
        with self._lock:
            run = self._runs.get(stream_id)
        stopped = self.abort(stream_id)
        if run is None:
            return stopped, ()
        await asyncio.wrap_future(run.finished)
        survivors = run.survivors if stopped else ()
        return stopped and not survivors, survivors

    def abort_all(self) -> list[str]:
        """Stop every live run; return the ids a stop was requested for."""
        with self._lock:
            ids = list(self._runs)
        return [sid for sid in ids if self.abort(sid)]

    async def abort_all_and_wait(self) -> list[str]:
        with self._lock:
            runs = list(self._runs.values())
        stopped = self.abort_all()
        for run in runs:
            await asyncio.wrap_future(run.finished)
        return stopped

    def live(self) -> list[dict[str, Any]]:
        with self._lock:
            return [run.info() for run in self._runs.values()]

    def is_live(self, stream_id: str) -> bool:
        with self._lock:
            return stream_id in self._runs


_default: ProcessRegistry | None = None
_default_lock = threading.Lock()


def default_registry() -> ProcessRegistry:
    global _default
    with _default_lock:
        if _default is None:
            _default = ProcessRegistry()
        return _default
