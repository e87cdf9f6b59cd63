"""What every turn that spawns an agent process shares (CLI runtimes, stream input, ACP, and
their kept-process variants).

Spawning (tolaria/core/turns/spawn.py, the program located by ``locate``), and the end of a
turn: wait for the agent or a stop, decide under the registry lock whether it was stopped, then
run the one wind down (``_wind_down``: ask to stop, end the processes, stop reading) in a
shielded task so that even a cancelled caller never leaves the tree alive, and report ``done``
exactly once. Each turn kind fills in the wind down's steps; none writes its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

from tolaria.core.adapters.manifest import PERMISSION_MODES, build_argv
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_ERROR,
    Diagnostic,
    Done,
    Error,
    EventCallback,
    Survivor,
)
from tolaria.core.process import backend, proctree, tracking
from tolaria.core.process.fdspare import with_spare_fd
from tolaria.core.process.registry import FINISHING, RUNNING, STOPPING, ProcessRegistry, Run
from tolaria.core.programs import locate
from tolaria.core.remote.launch import RemoteLaunch, link_note
from tolaria.core.turns import mcp_setup
from tolaria.core.turns.mcp_remote import planned_quietly, prepare_remote
from tolaria.core.turns.request import RunRequest
from tolaria.core.turns.spawn import ExitProtocol, build_env, spawn_agent

STDERR_TAIL = 20
#: How long readers may take to reach EOF once every process of the run is gone.
_DRAIN_S = 1.0


def exit_code_of(returncode: int | None) -> int | None:
    """A process's return code as a shell reports it: killed by signal N is 128 + N."""
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


@with_spare_fd  # out of fds, psutil's read of /proc/PID/stat fails with EMFILE (an OSError)
def _bind_once(pid: int) -> psutil.Process:
    return psutil.Process(pid)


def bind_process(pid: int) -> psutil.Process | None:
    """A ``psutil.Process`` bound to the agent (pid + create time), None when it is already
    gone or cannot be read even with the spare fd (the stop then works by marker)."""
    try:
        return _bind_once(pid)
    except (psutil.Error, OSError):
        return None


class ProcessTurn:
    """Base of one turn whose agent is a child process. Subclasses write ``_supervise`` and the
    hooks of the one wind down (``_wind_down``)."""

    #: ACP wants an absolute working folder; CLIs take it as given.
    absolute_cwd = False
    #: Whether the agent process ends with the turn (and is waited for here) or belongs to the
    #: conversation's keeper, whose ``end`` waits for it (ADR 0009).
    owns_process = True

    def __init__(self, run: Run, request: RunRequest, emit: EventCallback,
                 registry: ProcessRegistry, grace_s: float, max_line: int) -> None:
        self.run = run
        self.request = request
        self.manifest = request.manifest
        self.emit = emit
        self.registry = registry
        self.grace_s = grace_s
        self.max_line = max_line
        self.started = time.monotonic()
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self.survivors: list[Survivor] = []
        #: Set by ``_supervise`` for the wind down: the agent, its tree, our pipe readers.
        self._proc: asyncio.subprocess.Process | None = None
        self._tree: proctree.TreeKiller | None = None
        #: Writes the run's processes down for the watchdog while it lives (tracking.py).
        self._tracker: tracking.RunTracker | None = None
        self._readers: list[asyncio.Task[None]] = []
        #: The MCP servers of the agent process this turn talks to (ACP: for session/new).
        self.mcp = mcp_setup.McpSetup()
        #: The link of a run on another machine (request.target; ADR 0026), else None.
        self._remote: RemoteLaunch | None = None
        self._spawned_exited = asyncio.Event()  # the spawned process's exit (ExitProtocol.exited)

    def _done(self, stop_reason: str, exit_code: int | None = None) -> Done:
        return Done(self.run.stream_id, stop_reason=stop_reason, exit_code=exit_code,
                    duration_ms=int((time.monotonic() - self.started) * 1000),
                    survivors=tuple(self.survivors))

    @property
    def permission_mode(self) -> str:
        """The run's permission mode: the request's, else the manifest's default."""
        return self.request.permission_mode or self.manifest.permissions

    def _fail(self, message: str) -> Done:
        self.emit(Error(self.run.stream_id, message=message))
        return self._done(STOP_ERROR)

    # -- hooks ---------------------------------------------------------------------------------
    def _stdin(self) -> int:
        return asyncio.subprocess.PIPE

    def _not_ready(self) -> str | None:
        """A reason the turn cannot start (checked before spawning), or None."""
        return None

    async def _supervise(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol,
                         cwd: str) -> Done:
        raise NotImplementedError

    def _on_stdout(self, line: str) -> None:
        """A line of the agent's stdout (never called where a protocol library reads it)."""

    # -- the turn --------------------------------------------------------------------------------
    def _start(self) -> str | Done:
        """The turn's working folder, or the ``done`` that ends the turn before anything runs
        (stopped already, no such folder, not ready)."""
        target = self.request.target
        if self.run.stop_requested and (target is None or target.attach_offset is None):
            # (A kept run taken back is attached all the same: the stop goes with the attach.)
            return self._done(STOP_CANCELLED)
        if target is not None:  # a folder on the host: checked there
            return self.request.cwd or ""
        cwd = self.request.cwd or os.getcwd()
        if not Path(cwd).is_dir():
            return self._fail(f"working folder {cwd} does not exist or is not a folder")
        if self.absolute_cwd:
            cwd = str(Path(cwd).resolve())
        problem = self._not_ready()
        if problem:
            return self._fail(problem)
        return cwd

    async def execute(self) -> Done:
        cwd = self._start()
        if isinstance(cwd, Done):
            return cwd
        manifest, sid, mode = self.manifest, self.run.stream_id, self.permission_mode
        if mode not in PERMISSION_MODES:
            return self._fail(f"unknown permission mode {mode!r} "
                              f"(known: {', '.join(PERMISSION_MODES)})")
        env = build_env(manifest, sid, {**manifest.permission_env.get(mode, {}),
                                        **self.request.env})
        target = self.request.target
        if target is None:
            mcp = mcp_setup.prepare(self.request, env, sid, mode, self.emit, sid)
        else:  # a kept run taken back (attach) has its servers already: only named
            mcp = (planned_quietly(self.request, env) if target.attach_offset is not None
                   else prepare_remote(self.request, env, sid, mode, self.emit, target.label))
        if isinstance(mcp, str):
            return self._fail(mcp)
        self.mcp = mcp
        try:
            argv = build_argv(manifest, prompt=self.request.prompt, cwd=cwd,
                              session_id=self.request.session_id, mode=mode,
                              extra=mcp.launched.args + self.request.extra_args)
            env.update(mcp.launched.env)
            if self.request.target is not None:
                self._remote = RemoteLaunch(self.request.target, sid, self.grace_s)
                argv, env = self._remote.prepare(manifest.id, argv, cwd or None, env,
                                                 files=mcp.files, exact=mcp.launched.env)
                cwd = self._remote.local_cwd
            else:
                found = await self._find_program(argv[0], env)
                if isinstance(found, Done):
                    return found
                argv, env = found.argv(argv[1:]), found.environment(env)
            try:
                proc, protocol, transport = await spawn_agent(argv, cwd=cwd, env=env,
                                                              stdin=self._stdin())
            except OSError as exc:
                return self._cannot_start(argv[0], exc)
            self._spawned_exited = protocol.exited
            try:
                return await self._supervise(proc, protocol, cwd)
            finally:
                await self._stop_tracking()
                proctree.forget_own_child(proc.pid)
                transport.close()
        finally:
            mcp.close()  # the agent (and so its servers) is gone: its private files go too
            if self._remote is not None:
                self._remote.close()

    async def _find_program(self, program: str, env: Mapping[str, str]
                            ) -> locate.Location | Done:
        """Find the program beyond PATH (login shell, nvm, Homebrew...; a wrapper script gives
        way to its native binary), or the ``done`` that ends the turn: not found, or a stop came
        first (asking the login shell can take seconds, a stop must not wait for it)."""
        lookup = asyncio.ensure_future(locate.find_program(program, env))
        stopped = asyncio.ensure_future(self.run.stop_event.wait())
        try:
            await asyncio.wait({lookup, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not lookup.done():
                lookup.cancel()
        if not lookup.done():
            return self._done(STOP_CANCELLED)
        try:
            found = lookup.result()
        except locate.ProgramNotFound as exc:
            manifest = self.manifest
            hint = f"; install it with: {manifest.install_hint}" if manifest.install_hint else ""
            return self._fail(f"{manifest.name}: {exc}{hint}")
        return self._done(STOP_CANCELLED) if self.run.stop_requested else found

    def _cannot_start(self, program: str, exc: OSError) -> Done:
        return self._fail(f"{self.manifest.name}: cannot start {program}: {exc.strerror or exc}")

    def _killer(self, proc: asyncio.subprocess.Process) -> proctree.TreeKiller:
        """The run's tree killer; from here an abort is handled by the stop path (an abort
        that came during the spawn has already set stop_event, so the child goes at once)."""
        root = bind_process(proc.pid)
        self.registry.transition(self.run, RUNNING)
        self._proc = proc
        self._tree = proctree.TreeKiller(self.run.stream_id, root, since=self.run.started_at,
                                         sole_run=lambda: (self.registry.live_count() == 1
                                                           and proctree.kept_count() == 0))
        target = self.request.target
        if self._remote is not None and target is not None and (
                target.keep_running or target.attach_offset is not None):
            # A kept run can be let go at quit: the link closes without a stop (ADR 0032).
            remote, exited = self._remote, self._spawned_exited
            self.run.let_go = lambda: remote.let_go(proc.pid, exited)
        if self.run.track_path is not None:
            self._tracker = tracking.RunTracker(self._tree, self.run.track_path)
            self._tracker.start()
        return self._tree

    async def _stop_tracking(self) -> None:
        """The stop takes over from the tracker (its file stays until the run is unregistered)."""
        tracker, self._tracker = self._tracker, None
        if tracker is not None:
            await tracker.stop()

    async def _settle(self, first: set[asyncio.Future[Any]], protocol: ExitProtocol
                      ) -> tuple[bool, bool, bool]:
        """Wait for any of ``first`` (the agent ended, or a stop came), then wind down.

        Returns (the agent exited by itself, stopped by the user, our own task was cancelled).
        The wind down runs shielded: whoever awaits this turn may be cancelled (shutdown, a
        closed chat), the tree still goes first.
        """
        task_cancelled = False
        try:
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self.registry.force_stop(self.run)
            task_cancelled = True
        # Decide under the registry lock: either a stop got in first, or it is now too late.
        cancelled = self.registry.transition(self.run, FINISHING) == STOPPING
        task = asyncio.ensure_future(self._wind_down(protocol, cancelled))
        while True:
            try:
                await asyncio.shield(task)
                break
            except asyncio.CancelledError:
                task_cancelled = True
                if task.done():
                    break
        return task.result(), cancelled, task_cancelled

    def _report(self, done: Done, task_cancelled: bool) -> Done:
        """Return ``done``; if our task was cancelled, emit it here and re-raise instead."""
        if task_cancelled:
            self.emit(done)
            raise asyncio.CancelledError
        return done

    # -- the end of a turn: one wind down, the kinds fill in its steps ---------------------------
    async def _wind_down(self, protocol: ExitProtocol, cancelled: bool) -> bool:
        """End the turn, stopped or finished; True if the agent exited by itself (before any
        kill of ours: its own exit code is the one to report).

        A stop asks first, in the kind's own way. Then the run, which owns everything it
        started, ends it: the agent (unless a kept agent answered and stays) and the leftovers
        (a tool in its own session, a daemon). Only then are the pipe readers given up on.
        """
        await self._stop_tracking()
        if cancelled and self._remote is not None:  # a stop that came with the spawn
            await self._remote.ready(self._spawned_exited)
        keep = await self._ask_to_stop(protocol) if cancelled else self._agent_stays()
        moment = 0.0 if keep else self._exit_moment(cancelled)
        if moment:
            # The pipe closes a moment before the exit is reported: give it that moment, so
            # an agent that exited by itself is reported with its own code, not our kill's.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(protocol.exited.wait()), moment)
        exited_alone = protocol.exited.is_set()
        # Let go (a kept remote run at quit): the link has closed its connection and ended its
        # ssh; a tree kill here would find the run's marker on a host that is this machine.
        self.survivors = [] if self.run.detached else await self._end_processes(keep, cancelled)
        await self._stop_reading()
        if self.owns_process:
            # Not proc.wait(): on 3.11 it also waits for the pipes, which a survivor may hold.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(protocol.exited.wait(), timeout=5)
        return exited_alone

    async def _signal_and_wait(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol,
                               sig: int, window: float) -> None:
        """A polite signal, then up to ``window`` seconds for the agent to exit. Not waited for
        when the agent cannot act on it (gone, or ignoring that signal: the kernel drops it):
        the tree kill then follows at once instead of after the whole polite window."""
        if protocol.exited.is_set():
            return
        be = backend.current()
        found = be.info(proc.pid)
        if found is None or found.zombie:
            return  # gone (its exit is being reported): nothing can answer the signal
        # Only where signal masks are readable (the linux backend); elsewhere the whole polite
        # window is given.
        if be.ignores_signal(proc.pid, sig):
            self.emit(Diagnostic(self.run.stream_id, source="tolaria",
                                 message=f"{self.manifest.name} ignores "
                                         f"{signal.Signals(sig).name}; ending its processes "
                                         "without waiting"))
            return
        # ValueError: no such signal to send on Windows; the tree kill follows anyway.
        with contextlib.suppress(ProcessLookupError, ValueError):
            proc.send_signal(sig)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(protocol.exited.wait()), window)

    async def _ask_to_stop(self, protocol: ExitProtocol) -> bool:
        """The kind's polite stop (a signal, the interrupt, session/cancel); True if the agent
        answered and stays for the next turn (a kept process)."""
        return False

    def _agent_stays(self) -> bool:
        """Not stopped: whether the agent is still there for the next turn (a kept process)."""
        return False

    def _exit_moment(self, cancelled: bool) -> float:
        """Seconds to give an agent that is not kept to report its own exit before the kill."""
        return 0.0

    async def _end_processes(self, keep: bool, cancelled: bool) -> list[Survivor]:
        """End the run's whole tree. After a polite request that the agent did not finish
        within its window, the agent gets no second grace period (its tools still do)."""
        assert self._tree is not None
        remote: list[Survivor] = []
        if self._remote is not None and self._proc is not None:
            # The remote tree first, by the supervisor there; then what is left here (ssh).
            await self._remote.end(self._proc.pid, self._spawned_exited)
            remote = self._remote.survivors()
        return remote + await self._tree.kill(
            self.grace_s, root_had_grace=cancelled and self.manifest.stop.polite != "none")

    def _remote_error(self) -> str | None:
        """Why a run on another machine could not start or lost its link (None: local, or
        it ran)."""
        return self._remote.error if self._remote is not None else None

    async def _stop_reading(self) -> None:
        """Once the processes are gone: let the readers reach EOF."""
        await self._drain(self._readers, "output pipe")

    async def _drain(self, readers: list[asyncio.Task[None]], pipe: str) -> set[asyncio.Task[None]]:
        """Wait for ``readers`` to reach EOF; the ones a survivor still holds open are returned
        (and noted): they are not waited for."""
        if not readers:
            return set()
        _, pending = await asyncio.wait(readers, timeout=_DRAIN_S)
        if pending:
            self.emit(Diagnostic(self.run.stream_id, source="tolaria",
                                 message=f"{pipe} still held open after the run ended; "
                                         "stopped reading it"))
        return pending

    # -- stderr ----------------------------------------------------------------------------------
    def _on_stderr(self, line: str) -> None:
        line = line[:4096]
        if self._remote is not None and link_note(line):  # "reconnecting...": for the chat
            self.emit(Diagnostic(self.run.stream_id, source="notice", message=line[9:]))
            return
        self.stderr_tail.append(line)
        self.emit(Diagnostic(self.run.stream_id, source="stderr", message=line))

    def _on_oversized_err(self, size: int) -> None:
        self.emit(Diagnostic(self.run.stream_id, source="stderr",
                             message=f"dropped a stderr line of {size} bytes (limit {self.max_line})"))
