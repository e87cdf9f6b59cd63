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
import contextlib
from typing import TYPE_CHECKING, Any, cast

from tolaria.core.events import Done, Init
from tolaria.core.process.registry import RUNNING
from tolaria.core.turns.acp.turn import AcpTurn
from tolaria.core.turns.keeper import Keeper
from tolaria.core.turns.kept_turn import KeptTurnMixin

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


class KeptAcpTurn(KeptTurnMixin, AcpTurn):
    """One ``session/prompt`` on a kept ACP agent."""

    keeper_reads_stdout = False  # the SDK's connection reads it
    ready_when_spawned = False  # initialize and session/new come with the first turn

    def _on_stdout(self, line: str) -> None:
        """Never called: stdout is the SDK's (here for ``TurnSink``)."""

    def _on_new_keeper(self, keeper: Keeper) -> None:
        import acp

        proc = keeper.proc
        assert proc.stdin is not None and proc.stdout is not None
        keeper.conn = acp.connect_to_agent(cast("Client", _KeptClient(keeper)),
                                           proc.stdin, proc.stdout)

    async def _supervise_kept(self, keeper: Keeper, cwd: str, fresh: bool) -> Done:
        before = keeper.snapshot()
        self.registry.transition(self.run, RUNNING)
        conn, protocol = keeper.conn, keeper.protocol
        if not fresh:  # known at once, so a Stop from now on can cancel the prompt
            self.session_id = keeper.session_id
        converse = asyncio.ensure_future(self._converse_kept(keeper, cwd, fresh))
        stop = asyncio.ensure_future(self.run.stop_event.wait())
        exited = asyncio.ensure_future(protocol.exited.wait())

        async def wind_down(cancelled: bool) -> int | None:
            if cancelled:
                await self._polite_stop(conn, converse)
            keep = self._answered(converse) and keeper.alive
            if not keep and not cancelled:
                # The pipe closes a moment before the exit is reported: give it that moment,
                # so a crash is reported with its own exit code rather than our kill's.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(protocol.exited.wait()), 0.5)
            exited_alone = protocol.exited.is_set()
            self.survivors = await self._end_turn(keeper, before, keep, root_had_grace=cancelled)
            if not converse.done():
                converse.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(converse), 1)
            code = keeper.proc.returncode
            if not exited_alone or code is None:
                return None
            return 128 - code if code < 0 else code

        exit_code, cancelled, task_cancelled = await self._settle({converse, stop, exited},
                                                                  wind_down)
        stop.cancel()
        exited.cancel()
        return self._report(self._final(converse, cancelled, exit_code), task_cancelled)

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
        else:
            self.emit(Init(self.run.stream_id, agent=self.manifest.id,
                           session_id=keeper.session_id))
        assert keeper.session_id is not None
        return await self._send_prompt(keeper.conn, keeper.session_id)
