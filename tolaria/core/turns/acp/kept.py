"""An ACP turn on the conversation's kept agent process (docs/adr/0009).

As ``AcpTurn`` (ADR 0006), except that the process, its SDK connection and its session are the
keeper's: ``initialize`` and ``session/new`` (or ``session/load`` of the session to resume) run
once per process, each turn is one ``session/prompt``. Stop answers pending permission requests,
sends ``session/cancel`` and waits the polite window: answered, the turn ends ``cancelled`` and
the agent stays for the next turn; unanswered, the keeper's whole tree is killed, and the next
turn starts a fresh agent that loads the session when it can.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any, cast

from tolaria.core.events import Done, EventCallback, Init, Survivor, Usage
from tolaria.core.process.registry import ProcessRegistry, Run
from tolaria.core.turns.acp.turn import AcpTurn
from tolaria.core.turns.keeper import Keeper, KeeperPool
from tolaria.core.turns.kept_turn import KeptProcess
from tolaria.core.turns.process_turn import exit_code_of
from tolaria.core.turns.request import RunRequest
from tolaria.core.turns.spawn import ExitProtocol

if TYPE_CHECKING:
    from acp import Client
    from acp.schema import PermissionOption, RequestPermissionResponse, ToolCallUpdate


class _KeptClient:
    """What the SDK calls into, for the whole process life: routed to the current turn."""

    def __init__(self, keeper: Keeper) -> None:
        self._keeper = keeper

    def _turn(self) -> AcpTurn | None:
        sink = self._keeper.sink
        return sink if isinstance(sink, AcpTurn) else None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        turn = self._turn()
        if turn is not None:  # between turns: belongs to no run
            turn.on_update(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def request_permission(self, session_id: str, tool_call: ToolCallUpdate,
                                 options: list[PermissionOption],
                                 **kwargs: Any) -> RequestPermissionResponse:
        turn = self._turn()
        if turn is not None:
            return await turn.on_permission(tool_call, options)
        from acp.schema import DeniedOutcome, RequestPermissionResponse

        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


class KeptAcpTurn(AcpTurn):
    """One ``session/prompt`` on a kept ACP agent."""

    owns_process = False

    def __init__(self, run: Run, request: RunRequest, emit: EventCallback,
                 registry: ProcessRegistry, grace_s: float, max_line: int,
                 keepers: KeeperPool) -> None:
        super().__init__(run, request, emit, registry, grace_s, max_line)
        # The SDK's connection reads stdout; initialize and session/new come with the first
        # turn, so a process stopped before it is not kept.
        self.kept = KeptProcess(self, keepers, reads_stdout=False, ready_when_spawned=False,
                                on_spawned=self._connect)

        #: The agent's cumulative session cost when this turn began (None: not known yet).
        self._cost_base: float | None = None

    async def execute(self) -> Done:
        return await self.kept.execute(self._supervise_kept)

    def on_update(self, update: dict[str, Any]) -> None:
        keeper = self.kept.keeper
        for event in self.mapper.feed(update):
            if isinstance(event, Usage) and event.cost_usd is not None and keeper is not None:
                event = self._turn_share(event, keeper)
            self.emit(event)

    def _turn_share(self, usage: Usage, keeper: Keeper) -> Usage:
        """ACP's ``usage_update.cost`` is the session's running total: the turn's row holds
        its own share (the total minus the total when the turn began), so a chat's cost is not
        counted once per turn. A total below the one before means the agent counts per prompt."""
        total = usage.cost_usd or 0.0
        if self._cost_base is None:
            self._cost_base = keeper.cost_usd
        keeper.cost_usd = total
        base = self._cost_base
        return dataclasses.replace(usage, cost_usd=total - base if total >= base else total)

    def _connect(self, keeper: Keeper) -> None:
        import acp

        proc = keeper.proc
        assert proc.stdin is not None and proc.stdout is not None
        keeper.conn = acp.connect_to_agent(cast("Client", _KeptClient(keeper)),
                                           proc.stdin, proc.stdout)

    async def _supervise_kept(self, keeper: Keeper, cwd: str, fresh: bool) -> Done:
        protocol = keeper.protocol
        if not fresh:  # known at once, so a Stop from now on can cancel the prompt
            self.session_id = keeper.session_id
        self._conn = keeper.conn
        self._converse = converse = asyncio.ensure_future(self._converse_kept(keeper, cwd, fresh))
        stop = asyncio.ensure_future(self.run.stop_event.wait())
        exited = asyncio.ensure_future(protocol.exited.wait())
        exited_alone, cancelled, task_cancelled = await self._settle({converse, stop, exited},
                                                                     protocol)
        stop.cancel()
        exited.cancel()
        exit_code = exit_code_of(keeper.proc.returncode) if exited_alone else None
        return self._report(self._final(converse, cancelled, exit_code), task_cancelled)

    # -- the wind down's steps (ProcessTurn._wind_down) ------------------------------------------
    async def _ask_to_stop(self, protocol: ExitProtocol) -> bool:
        await super()._ask_to_stop(protocol)  # session/cancel
        return self._agent_stays()

    def _agent_stays(self) -> bool:
        keeper = self.kept.keeper
        return (self._converse is not None and self._answered(self._converse)
                and keeper is not None and keeper.alive)

    def _exit_moment(self, cancelled: bool) -> float:
        return 0.0 if cancelled else 0.5

    async def _end_processes(self, keep: bool, cancelled: bool) -> list[Survivor]:
        return await self.kept.end_turn(keep, root_had_grace=cancelled)

    def _answered(self, converse: asyncio.Future[dict[str, Any]]) -> bool:
        """Whether the agent ended the turn itself (result or protocol error) with a session."""
        from acp import RequestError

        if not converse.done() or converse.cancelled() or self.session_id is None:
            return False
        exc = converse.exception()
        return exc is None or isinstance(exc, RequestError)

    async def _converse_kept(self, keeper: Keeper, cwd: str, fresh: bool) -> dict[str, Any]:
        if fresh:
            keeper.session_id = await self._open_session(keeper.conn, cwd, keeper.session_id)
            keeper.prompt_caps = self.prompt_caps
        else:
            self.prompt_caps = keeper.prompt_caps
            self.emit(Init(self.run.stream_id, agent=self.manifest.id,
                           session_id=keeper.session_id))
        assert keeper.session_id is not None
        return await self._send_prompt(keeper.conn, keeper.session_id)
