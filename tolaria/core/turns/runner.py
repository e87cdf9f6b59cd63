"""One agent turn in a stream scope: spawn, stream events, stop for real, report ``done``.

``stream_ai_agent`` is the only entry point that starts agent processes. The run is registered
under its stream id before anything is spawned, so ``abort_ai_agent_stream`` can reach it at any
moment: before the spawn (nothing is spawned), during it (the child is killed as soon as it
exists), while it streams, or as it exits on its own (too late: abort returns False). See
docs/adr/0002-stop-strategy.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tolaria.core.adapters.manifest import ACP, OPENAI_CHAT, Manifest
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    STOP_ERROR,
    Diagnostic,
    Done,
    Error,
    Event,
    EventCallback,
    redacted,
)
from tolaria.core.linereader import DEFAULT_MAX_LINE, read_lines
from tolaria.core.process import proctree
from tolaria.core.process.registry import (
    ProcessRegistry,
    Run,
    default_registry,
)
from tolaria.core.runtimes import make_runtime
from tolaria.core.stream_id import validate_stream_id
from tolaria.core.turns.diagnose import Agent, Diagnosis, diagnose, retry_cutoff
from tolaria.core.turns.keeper import KeeperPool, default_keepers, keepable
from tolaria.core.turns.process_turn import ExitProtocol, ProcessTurn

if TYPE_CHECKING:
    from tolaria.core.turns.acp.kept import KeptAcpTurn
    from tolaria.core.turns.acp.turn import AcpTurn
    from tolaria.core.turns.acp.updates import PermissionCallback
    from tolaria.core.turns.kept_claude import KeptStreamTurn
    from tolaria.core.turns.model_turn import ChatTurn

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = 2.0
#: Seconds an agent may keep retrying its model requests before the run is cut off.
DEFAULT_RETRY_LIMIT_S = 60.0
#: How long readers may take to reach EOF once every process of the run is gone.
_DRAIN_S = 1.0
_SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM}


@dataclass(frozen=True)
class RunRequest:
    manifest: Manifest
    prompt: str
    cwd: str | None = None
    #: Extra environment for this run only (on top of the manifest's ``[env]``).
    env: Mapping[str, str] = field(default_factory=dict)
    #: Continue this agent session (only used when the manifest has ``resume`` arguments).
    session_id: str | None = None
    #: ACP agents with ``permissions = "safe"``: asked for each permission request (the chosen
    #: option id, or None to cancel it); without it "safe" rejects. Answered None on Stop.
    on_permission: PermissionCallback | None = None
    #: CLI agents: once the agent has been retrying its model requests (as its runtime reports)
    #: for this many seconds, the run is stopped like a Stop and reported as an error. None or
    #: 0: never. An agent that retries *silently* is not cut off (see docs/retries.md).
    retry_limit_s: float | None = DEFAULT_RETRY_LIMIT_S
    #: "safe" or "full" for this run (tolaria.core.adapters.manifest.PERMISSION_MODES); None uses the
    #: manifest's ``permissions``. Picks the manifest's ``[permission_args]`` for a CLI and
    #: how an ACP agent's permission requests are answered.
    permission_mode: str | None = None
    #: Protocol ``openai-chat``: use this model instead of the manifest's ``model``.
    model: str | None = None
    #: Keep the agent process for the next turn of this conversation key (docs/adr/0009): only
    #: for agents that can end a turn without exiting (ACP, Claude's stream-json input with the
    #: interrupt). None (one-shot callers: ``tolaria run``, fan-out): one process per turn.
    keep_key: str | None = None


class _Emitter:
    """Delivers events to the callback: nothing after ``done``; callback errors never kill a run."""

    def __init__(self, callback: EventCallback) -> None:
        self._callback = callback
        self.closed = False

    def __call__(self, event: Event) -> None:
        if self.closed:
            return
        if isinstance(event, Done):
            self.closed = True
        try:
            self._callback(redacted(event))  # errors and stderr lines without secrets
        except Exception:
            log.exception("event callback failed for %s", event.kind)


async def stream_ai_agent(
    request: RunRequest,
    stream_id: str,
    on_event: EventCallback,
    *,
    registry: ProcessRegistry | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    max_line: int = DEFAULT_MAX_LINE,
    keepers: KeeperPool | None = None,
) -> Done:
    """Run one agent turn; every event goes to ``on_event`` (on this loop), ``done`` last.

    Raises InvalidStreamId for a bad id and DuplicateStreamError when the id is already live;
    everything that goes wrong *in* the run is reported as events instead. With
    ``request.keep_key``, the agent process is kept in ``keepers`` (default: the process-wide
    pool) for the next turn of that key.
    """
    validate_stream_id(stream_id)
    registry = registry or default_registry()
    proctree.enable_child_subreaper()
    run = Run(stream_id, request.manifest.id, asyncio.get_running_loop(), cwd=request.cwd)
    registry.register(run)
    emit = _Emitter(on_event)
    turn: _Turn | ChatTurn | AcpTurn
    if request.keep_key is not None and keepable(request.manifest):
        # One long-lived agent process per conversation (ADR 0009).
        turn = _kept_turn(run, request, emit, registry, grace_s, max_line,
                          keepers or default_keepers())
    elif request.manifest.protocol == OPENAI_CHAT:
        # No CLI: Tolaria runs the model's tool loop itself, registered like any other run.
        from tolaria.core.turns.model_turn import ChatTurn  # (needs httpx)

        turn = ChatTurn(run, request, emit, registry, grace_s)
    elif request.manifest.protocol == ACP:
        # JSON-RPC over the agent's stdio, with a cooperative cancel (session/cancel).
        from tolaria.core.turns.acp.turn import AcpTurn

        turn = AcpTurn(run, request, emit, registry, grace_s, max_line)
    elif request.manifest.input == "claude-stream-json":  # prompt + interrupt on stdin (ADR 0007)
        from tolaria.core.turns.stream_input import StreamInputTurn

        turn = StreamInputTurn(run, request, emit, registry, grace_s, max_line)
    else:
        turn = _Turn(run, request, emit, registry, grace_s, max_line)
    try:
        done = await turn.execute()
        emit(done)
        return done
    except asyncio.CancelledError:
        emit(turn._done(STOP_CANCELLED))  # no-op when the stop path already reported done
        raise
    finally:
        registry.unregister(run)


def _kept_turn(run: Run, request: RunRequest, emit: EventCallback, registry: ProcessRegistry,
               grace_s: float, max_line: int, keepers: KeeperPool) -> _Turn | AcpTurn:
    turn: KeptStreamTurn | KeptAcpTurn
    if request.manifest.protocol == ACP:
        from tolaria.core.turns.acp.kept import KeptAcpTurn

        turn = KeptAcpTurn(run, request, emit, registry, grace_s, max_line)
    else:
        from tolaria.core.turns.kept_claude import KeptStreamTurn

        turn = KeptStreamTurn(run, request, emit, registry, grace_s, max_line)
    turn.keepers = keepers
    return turn


class _Turn(ProcessTurn):
    """A CLI agent whose stdout a runtime parses line by line.

    Failures are reported with a category and an actionable hint (tolaria.core.turns.diagnose). When
    the runtime reports that the agent is retrying, a ``retry`` diagnostic says so at once, and
    if it is still retrying ``request.retry_limit_s`` later the run is stopped through the
    registry, exactly like a Stop, then reported as an error rather than as cancelled.
    """

    def __init__(self, run: Run, request: RunRequest, emit: EventCallback,
                 registry: ProcessRegistry, grace_s: float, max_line: int) -> None:
        super().__init__(run, request, emit, registry, grace_s, max_line)
        self.runtime = make_runtime(self.manifest.protocol, run.stream_id, self.manifest.id)
        self.agent = Agent(self.manifest.id, self.manifest.name, self.manifest.protocol,
                           self.manifest.install_hint)
        self._retry_since: float | None = None
        self._retry_detail = ""
        self._retry_timer: asyncio.TimerHandle | None = None
        #: Set when the retry limit stopped the run: the error to report instead of "cancelled".
        self._cut_off: tuple[str, Diagnosis] | None = None

    def _stdin(self) -> int:
        return (asyncio.subprocess.PIPE if self.manifest.takes_prompt_on_stdin
                else asyncio.subprocess.DEVNULL)

    async def _supervise(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol,
                         cwd: str) -> Done:
        killer = self._killer(proc)
        assert proc.stdout is not None and proc.stderr is not None
        readers = [
            asyncio.ensure_future(read_lines(proc.stdout, self._on_stdout, self._on_oversized,
                                             self.max_line)),
            asyncio.ensure_future(read_lines(proc.stderr, self._on_stderr, self._on_oversized_err,
                                             self.max_line)),
        ]
        feeder = None
        if proc.stdin is not None:
            feeder = asyncio.ensure_future(self._feed_stdin(proc.stdin))
        exited = asyncio.ensure_future(protocol.exited.wait())
        stop = asyncio.ensure_future(self.run.stop_event.wait())

        async def wind_down(cancelled: bool) -> None:
            if cancelled:
                await self._polite_stop(proc, protocol)
            # Whether stopped or finished on its own, the run owns everything it started:
            # leftovers (a tool in its own session, a daemon) are ended with it.
            # After a polite request that the agent did not finish within its window, the
            # agent gets no second grace period (its tools still do).
            self.survivors = await killer.kill(
                self.grace_s, root_had_grace=cancelled and self.manifest.stop.polite != "none")
            await self._drain(readers)
            # Not proc.wait(): on 3.11 it also waits for the pipes, which a survivor may hold.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(protocol.exited.wait(), timeout=5)

        _, cancelled, task_cancelled = await self._settle({exited, stop}, wind_down)
        self._stop_retry_clock()
        for task in (exited, stop, feeder, *readers):
            if task is not None and not task.done():
                task.cancel()
        return self._report(self._final(proc.returncode, cancelled), task_cancelled)

    async def _feed_stdin(self, stdin: asyncio.StreamWriter) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(self.request.prompt.encode())
            await stdin.drain()
            stdin.close()

    async def _polite_stop(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol) -> None:
        sig = _SIGNALS.get(self.manifest.stop.polite)
        if sig is None or protocol.exited.is_set():
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(protocol.exited.wait(), self.manifest.stop.polite_window_ms / 1000)

    async def _drain(self, readers: list[asyncio.Task[None]]) -> None:
        _, pending = await asyncio.wait(readers, timeout=_DRAIN_S)
        if pending:
            self.emit(Diagnostic(self.run.stream_id, source="tolaria",
                                 message="output pipe still held open after the run ended; "
                                         "stopped reading it"))

    def _final(self, returncode: int | None, cancelled: bool) -> Done:
        exit_code = None if returncode is None else (128 - returncode if returncode < 0 else returncode)
        for event in self.runtime.finish():
            self.emit(event)
        if cancelled:
            if self._cut_off is not None:
                message, diagnosis = self._cut_off
                self._emit_error(message, diagnosis=diagnosis)
                return self._done(STOP_ERROR, exit_code)
            return self._done(STOP_CANCELLED, exit_code)
        outcome = self.runtime.outcome()
        if outcome is not None:
            if outcome.error:
                self._emit_error(outcome.error, exit_code)
            return self._done(outcome.stop_reason, exit_code)
        if self.runtime.trusts_exit_code and exit_code == 0:
            return self._done(STOP_END_TURN, exit_code)
        tail = "\n".join(self.stderr_tail)
        reason = (f"{self.manifest.name} exited with code {exit_code}"
                  if self.runtime.trusts_exit_code
                  else f"{self.manifest.name} exited with code {exit_code} without a final result")
        if self.runtime.retrying:
            reason += f" while retrying ({self.runtime.retrying})"
        self._emit_error(f"{reason}\n{tail}" if tail else reason, exit_code)
        return self._done(STOP_ERROR, exit_code)

    def _fail(self, message: str) -> Done:
        self._emit_error(message)
        return self._done(STOP_ERROR)

    def _emit_error(self, message: str, exit_code: int | None = None, *,
                    diagnosis: Diagnosis | None = None) -> None:
        if diagnosis is None:
            diagnosis = diagnose(message, self.agent, list(self.stderr_tail), exit_code)
        self.emit(Error(self.run.stream_id, message=message, category=diagnosis.category,
                        hint=diagnosis.hint))

    # -- retries -------------------------------------------------------------------------------
    def _watch_retries(self) -> None:
        """After each line: start, keep or end the retry clock as the runtime reports."""
        if self._cut_off is not None:  # being stopped for it: what follows changes nothing
            return
        detail = self.runtime.retrying
        sid, name = self.run.stream_id, self.manifest.name
        if detail is None:
            if self._retry_since is not None:
                took = time.monotonic() - self._retry_since
                self._stop_retry_clock()
                self.emit(Diagnostic(sid, source="retry",
                                     message=f"{name} got through after retrying for "
                                             f"{took:.0f} s."))
            return
        self._retry_detail = detail
        if self._retry_since is not None:
            return
        self._retry_since = time.monotonic()
        limit = self.request.retry_limit_s or 0.0
        note = f" Tolaria stops it if it is still retrying after {limit:g} s." if limit > 0 else ""
        self.emit(Diagnostic(sid, source="retry", message=f"{name} is retrying: {detail}.{note}"))
        if limit > 0:
            self._retry_timer = asyncio.get_running_loop().call_later(
                limit, self._on_retry_limit, limit)

    def _on_retry_limit(self, limit: float) -> None:
        self._retry_timer = None
        if self._retry_since is None or self._cut_off is not None:
            return
        self._cut_off = retry_cutoff(self.agent, limit, self._retry_detail)
        # The one stop path: the registry decides under its lock whether the run is still
        # running (then _settle sees a stop and winds the tree down) or already ending.
        if not self.registry.abort(self.run.stream_id):
            self._cut_off = None

    def _stop_retry_clock(self) -> None:
        self._retry_since = None
        if self._retry_timer is not None:
            self._retry_timer.cancel()
            self._retry_timer = None

    # -- readers -------------------------------------------------------------------------------
    def _on_stdout(self, line: str) -> None:
        for event in self.runtime.feed(line):
            self.emit(event)
        self._watch_retries()

    def _on_stderr(self, line: str) -> None:
        super()._on_stderr(line)
        self.runtime.feed_stderr(line)
        self._watch_retries()

    def _on_oversized(self, size: int) -> None:
        self.emit(Diagnostic(self.run.stream_id, source="stdout",
                             message=f"dropped an output line of {size} bytes (limit {self.max_line})"))


def abort_ai_agent_stream(stream_id: str, registry: ProcessRegistry | None = None) -> bool:
    """Stop the run of ``stream_id``: True if a live run was stopped, False if none was live.

    Safe from any thread; never blocks; idempotent. Raises InvalidStreamId for a bad id.
    """
    return (registry or default_registry()).abort(stream_id)
