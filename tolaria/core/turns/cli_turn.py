"""The turn of a CLI agent whose stdout a runtime parses line by line (tolaria/core/runtimes).

The base of the stream-input turn (stream_input.py) and of its kept-process variant
(kept_claude.py); ``stream_ai_agent`` runs it for every other CLI manifest.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time

from tolaria.core.adapters.mcp_spec import OPENCODE_CONFIG
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_END_TURN,
    STOP_ERROR,
    Diagnostic,
    Done,
    Error,
    EventCallback,
    ToolStart,
)
from tolaria.core.linereader import read_lines
from tolaria.core.mcp.toolnames import with_server
from tolaria.core.process.registry import ProcessRegistry, Run
from tolaria.core.runtimes import make_runtime
from tolaria.core.turns.diagnose import UNKNOWN, Agent, Diagnosis, diagnose, retry_cutoff
from tolaria.core.turns.process_turn import ProcessTurn, exit_code_of
from tolaria.core.turns.request import RunRequest
from tolaria.core.turns.spawn import ExitProtocol

_SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM}


class CliTurn(ProcessTurn):
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
        self.runtime.agent_env = {**self.manifest.env, **request.env}
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
        self._killer(proc)
        assert proc.stdout is not None and proc.stderr is not None
        self._readers = [
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
        _, cancelled, task_cancelled = await self._settle({exited, stop}, protocol)
        self._stop_retry_clock()
        for task in (exited, stop, feeder, *self._readers):
            if task is not None and not task.done():
                task.cancel()
        # After a stop this is our kill's code (reported with "cancelled").
        return self._report(self._final(proc.returncode, cancelled), task_cancelled)

    async def _feed_stdin(self, stdin: asyncio.StreamWriter) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(self.request.prompt.encode())
            await stdin.drain()
            stdin.close()

    async def _ask_to_stop(self, protocol: ExitProtocol) -> bool:
        assert self._proc is not None
        await self._polite_stop(self._proc, protocol)
        return False

    async def _polite_stop(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol) -> None:
        """The manifest's signal, then its polite window for the agent to exit."""
        sig = _SIGNALS.get(self.manifest.stop.polite)
        if sig is not None:
            await self._signal_and_wait(proc, protocol, sig,
                                        self.manifest.stop.polite_window_ms / 1000)

    def _final(self, returncode: int | None, cancelled: bool) -> Done:
        exit_code = exit_code_of(returncode)
        for event in self.runtime.finish():
            self.emit(event)
        remote_error = self._remote_error()
        if remote_error is not None and not cancelled:
            # The link's line already says what failed on the way to the host (ssh, the
            # supervisor); the agent's advice ("could not reach the model API") would mislead.
            self._emit_error(remote_error, diagnosis=Diagnosis(UNKNOWN, ""))
            return self._done(STOP_ERROR, exit_code)
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
        runtime = self.runtime
        passed = self.mcp.plan.passed
        for event in runtime.feed(line):
            if passed and isinstance(event, ToolStart):
                event = with_server(event, tuple(s.name for s in passed),
                                    bare=self.manifest.mcp.form == OPENCODE_CONFIG)
            self.emit(event)
        if runtime.retrying is not None or self._retry_since is not None:  # (once per line)
            self._watch_retries()

    def _on_stderr(self, line: str) -> None:
        super()._on_stderr(line)
        self.runtime.feed_stderr(line)
        self._watch_retries()

    def _on_oversized(self, size: int) -> None:
        self.emit(Diagnostic(self.run.stream_id, source="stdout",
                             message=f"dropped an output line of {size} bytes (limit {self.max_line})"))
