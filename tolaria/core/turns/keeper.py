"""Kept agent processes: one long-lived agent per conversation (docs/adr/0009-kept-agent-processes.md).

A *keeper* is an agent process owned by a conversation key, not by a turn. It carries its own
stream id as ``TOLARIA_STREAM_ID`` (never a turn's), registered with the watchdog while it lives,
so an app crash still kills its tree. Each turn on it is an ordinary run in the registry under
the turn's own stream id (``kept_claude.py``, ``acp/kept.py``); Stop works as for any run.

A turn ends with the keeper alive when the agent answered (the turn's end, or the polite stop);
processes born during the turn outside the agent's own process group (a tool in its own session,
a daemon) are then ended: the run still owns everything it started (ADR 0002). An unanswered
stop, an agent that exits, ``close``, an idle timeout or a change of agent/folder/environment
end the keeper's whole tree; the next turn then spawns a fresh process that resumes the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import psutil

from tolaria.core.adapters.manifest import ACP, Manifest
from tolaria.core.events import Survivor
from tolaria.core.linereader import DEFAULT_MAX_LINE, read_lines
from tolaria.core.mcp.procs import mcp_server_top
from tolaria.core.mcp.servers import McpServer
from tolaria.core.process import proctree, tracking, watchdog
from tolaria.core.turns.mcp_setup import McpSetup
from tolaria.core.turns.request import DEFAULT_GRACE_S
from tolaria.core.turns.spawn import ExitProtocol
from tolaria.support import platforms

log = logging.getLogger(__name__)

#: A kept process idle this long is closed (memory: a Claude process holds a few hundred MB).
IDLE_TIMEOUT_S = 600.0
#: ``close``: how long the agent may take to leave by itself once its stdin is closed (Claude
#: saves its session and exits in 0.1-1 s) before its tree is killed.
CLOSE_WINDOW_S = 1.0
_DRAIN_S = 1.0


def keepable(manifest: Manifest) -> bool:
    """Whether a turn of ``manifest`` can end (even by Stop) with the process still usable.

    ACP agents answer ``session/cancel``; Claude's stream-json input answers its interrupt.
    A signal as the polite stop ends the process, so such an agent is never kept.
    """
    if manifest.protocol == ACP:
        return True
    return manifest.input == "claude-stream-json" and manifest.stop.polite == "interrupt"


class TurnSink(Protocol):
    """The turn a keeper's output currently belongs to."""

    def _on_stdout(self, line: str) -> None: ...

    def _on_stderr(self, line: str) -> None: ...


@dataclass(eq=False)
class Keeper:
    """One kept agent process. Used on the event loop that spawned it only."""

    key: str
    stream_id: str
    #: (manifest, cwd, extra env, MCP servers): a turn asking for anything else gets a fresh
    #: process.
    signature: tuple[object, ...]
    proc: asyncio.subprocess.Process
    protocol: ExitProtocol
    transport: asyncio.SubprocessTransport
    root: psutil.Process | None
    started_at: float = field(default_factory=time.time)
    #: The agent's session id (from its ``init`` / ``session/new``): resumed after a tree kill.
    session_id: str | None = None
    #: Claude: ``total_cost_usd`` so far (cumulative per process); a turn reports the difference.
    cost_usd: float = 0.0
    #: ACP: the SDK's connection (stdin/stdout belong to it).
    conn: Any = None
    #: ACP: the agent's ``promptCapabilities`` (which attachments it takes; ADR 0028).
    prompt_caps: Any = None
    sink: TurnSink | None = None
    busy: bool = False
    max_line: int = DEFAULT_MAX_LINE
    readers: list[asyncio.Task[None]] = field(default_factory=list)
    idle_timer: asyncio.TimerHandle | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    closing: bool = False
    #: Its tracking file (tracking.py): what the watchdog ends after a crash, marker or not.
    track_path: str | None = None
    tracker: tracking.RunTracker | None = None
    #: Its MCP servers (their private files go when the keeper ends; ADR 0019).
    mcp: McpSetup = field(default_factory=McpSetup)

    @property
    def alive(self) -> bool:
        return not self.closing and not self.protocol.exited.is_set()

    def start_readers(self, stdout: bool) -> None:
        """Read stderr (and stdout, unless the ACP SDK owns it) for the whole process life."""
        if stdout and self.proc.stdout is not None:
            self.readers.append(asyncio.ensure_future(read_lines(
                self.proc.stdout, self._on_stdout, self._on_oversized, self.max_line)))
        if self.proc.stderr is not None:
            self.readers.append(asyncio.ensure_future(read_lines(
                self.proc.stderr, self._on_stderr, self._on_oversized, self.max_line)))

    def _on_stdout(self, line: str) -> None:
        if self.sink is not None:
            self.sink._on_stdout(line)
        else:  # between turns: belongs to no run
            log.debug("kept %s: stdout between turns: %.200s", self.stream_id, line)

    def _on_stderr(self, line: str) -> None:
        if self.sink is not None:
            self.sink._on_stderr(line)
        else:
            log.debug("kept %s: stderr between turns: %.200s", self.stream_id, line)

    def _on_oversized(self, size: int) -> None:
        log.warning("kept %s: dropped a line of %d bytes", self.stream_id, size)

    def start_tracking(self) -> None:
        """Write the keeper's processes down while it lives, turns and idle time alike."""
        if self.track_path is not None and self.tracker is None:
            self.tracker = tracking.RunTracker(self.killer(), self.track_path)
            self.tracker.start()

    # -- what a turn started ---------------------------------------------------------------------
    def killer(self) -> proctree.TreeKiller:
        # sole_run False: an adopted orphan *without* our marker is never claimed for a keeper
        # (several keepers and runs may live at once); marked ones are found by the marker.
        return proctree.TreeKiller(self.stream_id, self.root, since=self.started_at,
                                   sole_run=lambda: False)

    def snapshot(self) -> set[tuple[int, float]]:
        """(pid, create time) of every live process of the keeper now: taken at turn start."""
        killer = self.killer()
        killer.snapshot()
        return {key for key, proc in killer.known.items() if proctree._alive(proc)}

    async def end_leftovers(self, before: set[tuple[int, float]], grace_s: float) -> list[Survivor]:
        """End what the turn started and left behind, keeping the agent and its own helpers.

        Ended: processes of the keeper not alive at turn start (told apart by pid *and* create
        time) and outside the agent's process group (tools in their own session, setsid
        daemons, adopted orphans with our marker), with their descendants. Kept: the agent, what
        was alive before the turn, and what the agent started in its own group (MCP servers,
        language servers: helpers it manages and expects to keep).
        """
        if sys.platform == "win32":  # process groups: POSIX; Windows refuses runs (ADR 0014)
            raise NotImplementedError(platforms.RUNS_REFUSED_ON_WINDOWS)
        killer = self.killer()
        killer.snapshot()
        own_group = self.root.pid if self.root is not None else None
        with contextlib.suppress(OSError):
            own_group = os.getpgid(self.proc.pid)
        spared = {own_group}
        seeds = []
        for key, proc in killer.known.items():
            if key in before or proc is self.root or not proctree._alive(proc):
                continue
            with contextlib.suppress(OSError):
                if os.getpgid(proc.pid) == own_group:
                    continue
            if mcp_server_top(proc.pid):
                # The agent's MCP server, left the group (daemonized): it belongs to the kept
                # agent, not to the turn (ADR 0019). Its own new children are still ended.
                with contextlib.suppress(OSError):
                    spared.add(os.getpgid(proc.pid))
                continue
            seeds.append(proc)
        if not seeds:
            return []
        leftovers = _LeftoverKiller(self.stream_id, None, seeds=seeds, spare_groups=spared)
        return await leftovers.kill(grace_s)

    # -- the end -------------------------------------------------------------------------------
    async def end(self, grace_s: float, *, polite: bool, root_had_grace: bool = False
                  ) -> list[Survivor]:
        """End the keeper's whole tree (idempotent; a second caller waits for the first)."""
        if self.closing:
            await self.closed.wait()
            return []
        self.closing = True
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        try:
            if self.tracker is not None:
                await self.tracker.stop()
            if polite and not self.protocol.exited.is_set():
                await self._leave_politely()
            survivors = await self.killer().kill(grace_s, root_had_grace=root_had_grace)
            if self.conn is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.conn.close(), 1)
            if self.readers:
                _, pending = await asyncio.wait(self.readers, timeout=_DRAIN_S)
                for reader in pending:
                    reader.cancel()
            # Not proc.wait(): on 3.11 it also waits for the pipes, which a survivor may hold.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.protocol.exited.wait(), timeout=5)
            return survivors
        finally:
            proctree.forget_own_child(self.proc.pid)
            proctree.keeper_ended()
            self.transport.close()
            watchdog.run_ended(self.stream_id)
            if self.track_path is not None:
                tracking.forget(self.track_path)
            self.mcp.close()
            self.closed.set()

    async def _leave_politely(self) -> None:
        """Close stdin: Claude saves its session and exits, ACP agents leave at EOF."""
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.close(), 0.5)
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.protocol.exited.wait(), CLOSE_WINDOW_S)


@dataclass
class _LeftoverKiller(proctree.TreeKiller):
    """A tree kill limited to some processes of a keeper and their descendants."""

    seeds: list[psutil.Process] = field(default_factory=list)
    #: Never signalled as groups: the agent's own, its daemonized MCP servers'.
    spare_groups: set[int | None] = field(default_factory=set)

    def _scan_proc(self) -> set[int]:
        found: set[int] = set()
        for proc in self.seeds:
            if not proctree._alive(proc):
                continue
            found.add(proc.pid)
            with contextlib.suppress(psutil.Error):
                found.update(child.pid for child in proc.children(recursive=True))
        return found

    _scan_known = _scan_proc

    def _add(self, pids: Iterable[int]) -> list[psutil.Process]:
        new = super()._add(pids)
        self.groups.difference_update(g for g in self.spare_groups if g is not None)
        return new


class KeeperPool:
    """The kept processes of one app (or one test), by conversation key."""

    def __init__(self, *, idle_timeout_s: float = IDLE_TIMEOUT_S,
                 grace_s: float = DEFAULT_GRACE_S) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.grace_s = grace_s
        self._keepers: dict[str, Keeper] = {}
        #: key -> session id of a keeper whose tree was killed: the next process resumes it.
        self._resume: dict[str, str] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Keepers taken out of the pool whose tree may still be ending: ``close_all`` waits.
        self._ending: set[Keeper] = set()

    # -- queries ---------------------------------------------------------------------------------
    def get(self, key: str) -> Keeper | None:
        return self._keepers.get(key)

    def keys(self) -> list[str]:
        return list(self._keepers)

    def stream_id(self, key: str) -> str | None:
        """The keeper's own stream id (its processes' ``TOLARIA_STREAM_ID``), if one lives."""
        keeper = self._keepers.get(key)
        return keeper.stream_id if keeper is not None else None

    def pid(self, key: str) -> int | None:
        keeper = self._keepers.get(key)
        return keeper.proc.pid if keeper is not None and keeper.alive else None

    def session_id(self, key: str) -> str | None:
        """The agent session the next turn of ``key`` continues (kept or to be resumed)."""
        keeper = self._keepers.get(key)
        if keeper is not None and keeper.session_id:
            return keeper.session_id
        return self._resume.get(key)

    # -- used by kept turns ----------------------------------------------------------------------
    def add(self, keeper: Keeper) -> None:
        assert keeper.key not in self._keepers, f"{keeper.key} already has a keeper"
        self._keepers[keeper.key] = keeper
        self._resume.pop(keeper.key, None)
        self._spawn(self._watch(keeper), f"keeper-watch-{keeper.stream_id}")

    def acquire(self, keeper: Keeper, sink: TurnSink) -> None:
        if keeper.idle_timer is not None:
            keeper.idle_timer.cancel()
            keeper.idle_timer = None
        keeper.busy = True
        keeper.sink = sink

    def release(self, keeper: Keeper) -> None:
        keeper.busy = False
        keeper.sink = None
        if keeper.alive and self._keepers.get(keeper.key) is keeper:
            keeper.idle_timer = asyncio.get_running_loop().call_later(
                self.idle_timeout_s, self._on_idle, keeper)

    async def kill(self, keeper: Keeper, grace_s: float, *, root_had_grace: bool = False
                   ) -> list[Survivor]:
        """End ``keeper``'s tree now (no polite EOF): an unanswered stop, a crashed agent."""
        self._forget(keeper)
        return await keeper.end(grace_s, polite=False, root_had_grace=root_had_grace)

    # -- closing ---------------------------------------------------------------------------------
    async def close(self, key: str) -> list[Survivor]:
        """Close the kept process of ``key`` (stdin closed, then the tree killed); [] if none."""
        keeper = self._keepers.get(key)
        self._resume.pop(key, None)
        if keeper is None:
            return []
        self._forget(keeper, resume=False)
        return await keeper.end(self.grace_s, polite=True)

    async def close_all(self) -> list[Survivor]:
        """Close every kept process (at quit, after the runs were stopped)."""
        self._resume.clear()
        done = await asyncio.gather(*(self.close(key) for key in list(self._keepers)))
        ending = list(self._ending)
        await asyncio.gather(*(keeper.closed.wait() for keeper in ending))
        self._ending.difference_update(ending)
        return [s for survivors in done for s in survivors]

    def _forget(self, keeper: Keeper, resume: bool = True) -> None:
        if self._keepers.get(keeper.key) is keeper:
            del self._keepers[keeper.key]
            self._ending = {k for k in self._ending if not k.closed.is_set()}
            self._ending.add(keeper)
            if resume and keeper.session_id:
                self._resume[keeper.key] = keeper.session_id

    def _on_idle(self, keeper: Keeper) -> None:
        if not keeper.busy and self._keepers.get(keeper.key) is keeper:
            log.info("closing kept %s of %s after %g s idle", keeper.stream_id, keeper.key,
                     self.idle_timeout_s)
            self._forget(keeper)
            self._spawn(keeper.end(self.grace_s, polite=True), f"keeper-idle-{keeper.stream_id}")

    async def _watch(self, keeper: Keeper) -> None:
        """An idle agent that exits by itself: end what is left of its tree, resume next time."""
        await keeper.protocol.exited.wait()
        if not keeper.busy and not keeper.closing:
            self._forget(keeper)
            await keeper.end(self.grace_s, polite=False)

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("keeper task %s failed", task.get_name(), exc_info=task.exception())


def signature_of(manifest: Manifest, cwd: str, env: Mapping[str, str],
                 mcp_servers: tuple[McpServer, ...] = (),
                 permission_mode: str = "") -> tuple[object, ...]:
    """What a kept process was started with: a turn that asks for anything else (another
    folder, variables, MCP servers or permission mode) gets a fresh process."""
    return (manifest, cwd, dict(env), mcp_servers, permission_mode)


_default: KeeperPool | None = None
_default_lock = threading.Lock()


def default_keepers() -> KeeperPool:
    global _default
    with _default_lock:
        if _default is None:
            _default = KeeperPool()
        return _default


async def close_kept(key: str, pool: KeeperPool | None = None) -> list[Survivor]:
    """Close the kept agent process of conversation ``key`` (tree gone when this returns)."""
    return await (pool or default_keepers()).close(key)


async def close_all_kept(pool: KeeperPool | None = None) -> list[Survivor]:
    """Close every kept agent process (trees gone when this returns)."""
    return await (pool or default_keepers()).close_all()

