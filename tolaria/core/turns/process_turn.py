"""What every turn that spawns an agent process shares (CLI runtimes and ACP).

Spawning (own session, the run's environment marker, the program located by ``locate``),
and the end of a turn: wait for the agent or a stop, decide under the registry lock whether it
was stopped, then wind down in a shielded task so that even a cancelled caller never leaves the
tree alive, and report ``done`` exactly once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psutil

from tolaria.core.adapters.manifest import PERMISSION_MODES, Manifest, build_argv, no_nul
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_ERROR,
    Diagnostic,
    Done,
    Error,
    EventCallback,
    Survivor,
)
from tolaria.core.process import proctree
from tolaria.core.process.registry import FINISHING, RUNNING, STOPPING, ProcessRegistry, Run
from tolaria.core.programs import locate

if TYPE_CHECKING:
    from tolaria.core.turns.runner import RunRequest

T = TypeVar("T")
STDERR_TAIL = 20


class ExitProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Tells us the moment the agent exits, even while a grandchild still holds its stdout.

    (On Python 3.11 ``Process.wait()`` only returns once every pipe is closed.)
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


def build_env(manifest: Manifest, stream_id: str, extra: Mapping[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(proctree.APP_CHILD_MARKER, None)
    env.update({k: os.path.expandvars(v) for k, v in manifest.env.items()})
    env.update(extra)
    # Every process of the run inherits this marker, so the tree can be found even after a
    # tool leaves it with setsid + double fork, and leak checks can name the run.
    env[proctree.ENV_MARKER] = stream_id
    return {no_nul(k): no_nul(v) for k, v in env.items()}  # a TOML "\u0000" must not crash


def resolve_program(program: str, env: Mapping[str, str]) -> str | None:
    """``program`` on ``env``'s PATH only (or as given, with a folder); see ``locate`` for the
    full search that spawning uses."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) and os.path.isfile(program) else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


class ProcessTurn:
    """Base of one turn whose agent is a child process. Subclasses write ``_supervise``."""

    #: ACP wants an absolute working folder; CLIs take it as given.
    absolute_cwd = False

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

    # -- the turn --------------------------------------------------------------------------------
    def _start(self) -> str | Done:
        """The turn's working folder, or the ``done`` that ends the turn before anything runs
        (stopped already, no such folder, not ready)."""
        if self.run.stop_requested:
            return self._done(STOP_CANCELLED)
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
        argv = build_argv(manifest, prompt=self.request.prompt, cwd=cwd,
                          session_id=self.request.session_id, mode=mode)
        env = build_env(manifest, sid, {**manifest.permission_env.get(mode, {}),
                                        **self.request.env})
        try:
            found = await self._locate(argv[0], env)
        except locate.ProgramNotFound as exc:
            hint = f"; install it with: {manifest.install_hint}" if manifest.install_hint else ""
            return self._fail(f"{manifest.name}: {exc}{hint}")
        if found is None:
            return self._done(STOP_CANCELLED)
        argv, env = found.argv(argv[1:]), found.environment(env)
        if self.run.stop_requested:
            return self._done(STOP_CANCELLED)
        loop = asyncio.get_running_loop()
        try:
            # start_new_session: the agent gets its own session and process group, so a Ctrl+C
            # in our terminal does not reach it and its group can be signalled as a whole.
            transport, protocol = await loop.subprocess_exec(
                lambda: ExitProtocol(limit=2**16, loop=loop), *argv,
                stdin=self._stdin(), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
        except OSError as exc:
            return self._fail(f"{manifest.name}: cannot start {argv[0]}: {exc.strerror or exc}")
        proc = asyncio.subprocess.Process(transport, protocol, loop)
        proctree.remember_own_child(proc.pid)
        try:
            return await self._supervise(proc, protocol, cwd)
        finally:
            proctree.forget_own_child(proc.pid)
            transport.close()

    async def _locate(self, program: str, env: Mapping[str, str]) -> locate.Location | None:
        """Find the program beyond PATH (login shell, nvm, Homebrew...; a wrapper script gives
        way to its native binary). None if a stop came first: asking the login shell can take
        seconds, a stop must not wait for it."""
        lookup = asyncio.ensure_future(locate.find_program(program, env))
        stopped = asyncio.ensure_future(self.run.stop_event.wait())
        try:
            await asyncio.wait({lookup, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not lookup.done():
                lookup.cancel()
        return lookup.result() if lookup.done() else None

    def _killer(self, proc: asyncio.subprocess.Process) -> proctree.TreeKiller:
        """The run's tree killer; from here an abort is handled by the stop path (an abort
        that came during the spawn has already set stop_event, so the child goes at once)."""
        try:
            root: psutil.Process | None = psutil.Process(proc.pid)
        except psutil.Error:
            root = None
        self.registry.transition(self.run, RUNNING)
        return proctree.TreeKiller(self.run.stream_id, root, since=self.run.started_at,
                                   sole_run=lambda: (self.registry.live_count() == 1
                                                    and proctree.kept_count() == 0))

    async def _settle(self, first: set[asyncio.Future[Any]],
                      wind_down: Callable[[bool], Coroutine[Any, Any, T]]) -> tuple[T, bool, bool]:
        """Wait for any of ``first`` (the agent ended, or a stop came), then wind down.

        Returns (wind-down result, stopped by the user, our own task was cancelled). The wind
        down runs shielded: whoever awaits this turn may be cancelled (shutdown, a closed chat),
        the tree still goes first.
        """
        task_cancelled = False
        try:
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self.registry.force_stop(self.run)
            task_cancelled = True
        # Decide under the registry lock: either a stop got in first, or it is now too late.
        cancelled = self.registry.transition(self.run, FINISHING) == STOPPING
        task = asyncio.ensure_future(wind_down(cancelled))
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

    # -- stderr ----------------------------------------------------------------------------------
    def _on_stderr(self, line: str) -> None:
        line = line[:4096]
        self.stderr_tail.append(line)
        self.emit(Diagnostic(self.run.stream_id, source="stderr", message=line))

    def _on_oversized_err(self, size: int) -> None:
        self.emit(Diagnostic(self.run.stream_id, source="stderr",
                             message=f"dropped a stderr line of {size} bytes (limit {self.max_line})"))
