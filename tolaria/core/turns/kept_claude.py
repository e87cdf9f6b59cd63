"""A Claude stream-json turn on the conversation's kept process (docs/adr/0009).

As ``StreamInputTurn`` (ADR 0007), except that the process is the keeper's: the user message is
written to its open stdin, the ``result`` line ends the turn and stdin stays open for the next
one. Stop writes the interrupt; answered within the polite window, the turn ends ``cancelled``
and the process stays; unanswered (or refused), SIGINT so Claude saves its session, then the
keeper's whole tree is killed and the next turn starts a process with ``--resume``.

``total_cost_usd`` is cumulative per process: a turn reports the difference.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

from tolaria.core.events import Done, Event, EventCallback, Init, Survivor, Usage
from tolaria.core.process.registry import FINISHING, ProcessRegistry, Run
from tolaria.core.turns.keeper import Keeper, KeeperPool
from tolaria.core.turns.kept_turn import KeptProcess
from tolaria.core.turns.request import RunRequest
from tolaria.core.turns.spawn import ExitProtocol
from tolaria.core.turns.stream_input import _CONTROL_RESPONSE, StreamInputTurn, user_message


class KeptStreamTurn(StreamInputTurn):
    """A ``claude-stream-json`` turn written to a kept Claude process."""

    owns_process = False

    def __init__(self, run: Run, request: RunRequest, emit: EventCallback,
                 registry: ProcessRegistry, grace_s: float, max_line: int,
                 keepers: KeeperPool) -> None:
        super().__init__(run, request, emit, registry, grace_s, max_line)
        self.kept = KeptProcess(self, keepers, reads_stdout=True, ready_when_spawned=True)

    async def execute(self) -> Done:
        return await self.kept.execute(self._supervise_kept)

    async def _supervise_kept(self, keeper: Keeper, cwd: str, fresh: bool) -> Done:
        proc, protocol = keeper.proc, keeper.protocol
        self._exited = protocol.exited
        self._stdin_writer = proc.stdin
        if proc.stdin is not None and not proc.stdin.is_closing():
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(user_message(self.request.prompt,
                                               self.request.content_blocks))
                self._user_sent = True
                await proc.stdin.drain()
        waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._result.wait()),
                                             asyncio.ensure_future(protocol.exited.wait()),
                                             asyncio.ensure_future(self.run.stop_event.wait())}
        exited_alone, cancelled, task_cancelled = await self._settle(waiters, protocol)
        for waiter in waiters:
            waiter.cancel()
        code = proc.returncode if exited_alone else None
        return self._report(self._final(code, cancelled), task_cancelled)

    # -- the wind down's steps (ProcessTurn._wind_down) ------------------------------------------
    async def _ask_to_stop(self, protocol: ExitProtocol) -> bool:
        assert self.kept.keeper is not None
        return await self._stop_kept(self.kept.keeper)

    def _agent_stays(self) -> bool:
        return self._result.is_set()

    def _exit_moment(self, cancelled: bool) -> float:
        # An agent that exited mid-turn: its exit is given a moment, so the turn reports the
        # agent's own code, not our kill's.
        return 0.2

    async def _end_processes(self, keep: bool, cancelled: bool) -> list[Survivor]:
        return await self.kept.end_turn(keep, root_had_grace=cancelled)

    async def _stop_kept(self, keeper: Keeper) -> bool:
        """The interrupt; True if Claude ended the turn and is still alive to keep."""
        protocol = keeper.protocol
        if protocol.exited.is_set():
            return False
        if not self._user_sent or self._result.is_set():
            return True  # no turn running in Claude: nothing to interrupt
        window = self.manifest.stop.polite_window_ms / 1000
        if await self._interrupt(protocol, window) and not protocol.exited.is_set():
            return True
        if not protocol.exited.is_set():
            # Unanswered or refused: SIGINT lets Claude save its session for --resume.
            await self._sigint(keeper.proc, protocol, window)
        return False

    # -- stdout ----------------------------------------------------------------------------------
    def _on_stdout(self, line: str) -> None:
        keeper = self.kept.keeper
        for event in self.runtime.feed(line):
            if keeper is not None:
                event = _per_turn(event, keeper)
            self.emit(event)
        self._watch_retries()  # as CliTurn._on_stdout does: the retry cut-off applies here too
        if not self._result.is_set() and self.runtime.outcome() is not None:
            self._on_result()
        elif self._interrupt_sent and _CONTROL_RESPONSE in line:
            self._on_control_response(line)

    def _on_result(self) -> None:
        """The turn is over by the protocol (a Stop is too late now); the process stays."""
        self._result.set()
        self.registry.transition(self.run, FINISHING)


def _per_turn(event: Event, keeper: Keeper) -> Event:
    """Note the session; turn Claude's cumulative ``total_cost_usd`` into this turn's cost."""
    if isinstance(event, Init) and event.session_id:
        keeper.session_id = event.session_id
    if isinstance(event, Usage) and event.cost_usd is not None:
        total = event.cost_usd
        event = dataclasses.replace(event, cost_usd=max(0.0, total - keeper.cost_usd))
        keeper.cost_usd = total
    return event

