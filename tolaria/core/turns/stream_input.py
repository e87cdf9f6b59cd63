"""Claude Code's streaming input (``--input-format stream-json``): the prompt as a user message on
stdin, stdin kept open while the turn runs, and an in-band ``interrupt`` as the polite stop.

Why: ``control_request {subtype: "interrupt"}`` stops Claude's running tool within ~30 ms,
answers ``control_response``, ends the turn with a ``result`` (``error_during_execution``,
``terminal_reason`` ``aborted_tools``), and lets Claude exit on its own so the session is saved
for ``--resume``. SIGINT also works but needs the signal to reach the right pid; the interrupt is
part of the protocol. See docs/adr/0007-claude-stream-input.md.

One process per turn: the user message is written, stdin stays open (closing it mid-turn does
*not* end a Claude turn: measured, the tool is moved to the background and Claude never exits),
and stdin is closed at the ``result`` line, after which Claude exits. Continuing a conversation
uses the manifest's ``resume`` arguments in a new process, as for every CLI.

Stop: write the interrupt; wait up to ``stop.polite_window_ms`` for the ``result``; then for
Claude's own exit (stdin is closed by then). If it did not answer, SIGINT, one more window. The
core's tree kill and verification always follow (``ProcessTurn._wind_down``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import uuid
from collections.abc import Sequence
from typing import Any

from tolaria.core.events import Diagnostic, Done
from tolaria.core.process.registry import FINISHING
from tolaria.core.turns.cli_turn import CliTurn
from tolaria.core.turns.spawn import ExitProtocol

#: Claude's answer to a control request (here: our interrupt).
_CONTROL_RESPONSE = "control_response"


def user_message(prompt: str, blocks: Sequence[dict[str, Any]] = ()) -> bytes:
    """The stdin line that starts a turn: exactly the shape Claude Code documents and prints.

    ``blocks``: attachments' content blocks (an image as a base64 ``image`` block, ADR 0028):
    the content becomes a list, the prompt's ``text`` block first.
    ``json.dumps`` escapes quotes, newlines and lone surrogates; nothing goes through a shell.
    """
    content: str | list[dict[str, Any]] = (
        [{"type": "text", "text": prompt}, *blocks] if blocks else prompt)
    line = json.dumps({"type": "user", "message": {"role": "user", "content": content},
                       "parent_tool_use_id": None, "session_id": ""},
                      separators=(",", ":"))
    return (line + "\n").encode()


def interrupt_request(request_id: str) -> bytes:
    """The stdin line that stops the running turn (and its tool), keeping the process."""
    line = json.dumps({"type": "control_request", "request_id": request_id,
                       "request": {"subtype": "interrupt"}}, separators=(",", ":"))
    return (line + "\n").encode()


class StreamInputTurn(CliTurn):
    """A ``claude-stream-json`` turn whose prompt goes to stdin as a stream-json user message."""

    #: After the ``result`` line stdin is closed and Claude exits on its own (0.1-1 s measured);
    #: one that lingers longer is ended by the tree kill (the turn keeps its status).
    exit_after_result_s = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stdin_writer: asyncio.StreamWriter | None = None
        self._user_sent = False
        self._result = asyncio.Event()
        #: Set when Claude refuses our interrupt (a ``control_response`` with an error).
        self._refused = asyncio.Event()
        self._interrupt_id = f"tolaria-interrupt-{uuid.uuid4().hex[:12]}"
        self._interrupt_sent = False
        self._exited: asyncio.Event | None = None
        self._linger: asyncio.TimerHandle | None = None

    def _stdin(self) -> int:
        return asyncio.subprocess.PIPE

    async def _supervise(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol,
                         cwd: str) -> Done:
        self._exited = protocol.exited
        try:
            return await super()._supervise(proc, protocol, cwd)
        finally:
            if self._linger is not None:
                self._linger.cancel()

    async def _feed_stdin(self, stdin: asyncio.StreamWriter) -> None:
        # Not closed here: the interrupt may still have to be written. Closed at ``result``.
        self._stdin_writer = stdin
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(user_message(self.request.prompt, self.request.content_blocks))
            self._user_sent = True
            await stdin.drain()

    def _close_stdin(self) -> None:
        if self._stdin_writer is not None and not self._stdin_writer.is_closing():
            self._stdin_writer.close()

    # -- stdout --------------------------------------------------------------------------------
    def _on_stdout(self, line: str) -> None:
        super()._on_stdout(line)
        if not self._result.is_set() and self.runtime.outcome() is not None:
            self._on_result()
        elif self._interrupt_sent and _CONTROL_RESPONSE in line:
            self._on_control_response(line)

    def _on_result(self) -> None:
        """The turn is over by the protocol: a Stop from now on is too late (abort -> False)."""
        self._result.set()
        self.registry.transition(self.run, FINISHING)
        self._close_stdin()  # ... so Claude exits
        self._linger = asyncio.get_running_loop().call_later(self.exit_after_result_s,
                                                             self._end_lingering)

    def _end_lingering(self) -> None:
        if self.run.stop_event.is_set() or (self._exited is not None and self._exited.is_set()):
            return  # already winding down
        self.emit(Diagnostic(self.run.stream_id, source="tolaria",
                             message=f"{self.manifest.name} did not exit within "
                                     f"{self.exit_after_result_s:g} s of its result; "
                                     "ending its processes"))
        # Only wakes the supervisor: the run is FINISHING, so this is not a user stop and the
        # turn keeps the status its result line gave it.
        self.run.stop_event.set()

    def _on_control_response(self, line: str) -> None:
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            return
        response = data.get("response") if isinstance(data, dict) else None
        if (not isinstance(response, dict) or data.get("type") != _CONTROL_RESPONSE
                or response.get("request_id") != self._interrupt_id):
            return
        if response.get("subtype") != "success":
            self.emit(Diagnostic(self.run.stream_id, source="tolaria",
                                 message=f"{self.manifest.name} refused the interrupt: "
                                         f"{str(response.get('error') or response)[:300]}"))
            self._refused.set()

    # -- stop ----------------------------------------------------------------------------------
    async def _polite_stop(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol) -> None:
        if self.manifest.stop.polite != "interrupt":
            # sigint/sigterm/none still work with stream input; then stdin is no longer needed.
            self._close_stdin()
            await super()._polite_stop(proc, protocol)
            return
        if protocol.exited.is_set() or not self._user_sent:
            return  # gone already, or no turn was started: the tree kill is all there is to do
        window = self.manifest.stop.polite_window_ms / 1000
        if not self._result.is_set() and not await self._interrupt(protocol, window):
            await self._sigint(proc, protocol, window)
            return
        # Answered: stdin is closed, so Claude saves its session and exits by itself.
        await _wait_any([protocol.exited], window)

    async def _interrupt(self, protocol: ExitProtocol, window: float) -> bool:
        """Write the interrupt; True once the turn's ``result`` came (or the agent exited)."""
        writer = self._stdin_writer
        if writer is None or writer.is_closing():
            return False
        try:
            writer.write(interrupt_request(self._interrupt_id))
            self._interrupt_sent = True
            await asyncio.wait_for(writer.drain(), window)
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            return protocol.exited.is_set()
        await _wait_any([self._result, self._refused, protocol.exited], window)
        if self._result.is_set() or protocol.exited.is_set():
            return True
        if not self._refused.is_set():
            self.emit(Diagnostic(self.run.stream_id, source="tolaria",
                                 message=f"{self.manifest.name} did not end the turn within "
                                         f"{window * 1000:.0f} ms of the interrupt; "
                                         "sending SIGINT"))
        return False

    async def _sigint(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol,
                      window: float) -> None:
        self._close_stdin()
        await self._signal_and_wait(proc, protocol, signal.SIGINT, window)


async def _wait_any(events: list[asyncio.Event], timeout: float) -> None:
    """Wait until one of ``events`` is set, for ``timeout`` seconds at most."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
