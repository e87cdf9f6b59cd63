"""One agent turn in a stream scope: spawn, stream events, stop for real, report ``done``.

``stream_ai_agent`` is the only entry point that starts agent processes. The run is registered
under its stream id before anything is spawned, so ``abort_ai_agent_stream`` can reach it at any
moment: before the spawn (nothing is spawned), during it (the child is killed as soon as it
exists), while it streams, or as it exits on its own (too late: abort returns False). See
docs/adr/0002-stop-strategy.md.

The runner is the one place that chooses the turn kind, so it imports every kind and no turn
module imports it (tests/test_layers.py: no import cycle). What a request is lives in
``request.py``, re-exported here for callers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from tolaria.core.adapters.manifest import ACP, OPENAI_CHAT
from tolaria.core.events import (
    STOP_CANCELLED,
    STOP_ERROR,
    Diagnostic,
    Done,
    Error,
    Event,
    EventCallback,
    redacted,
)
from tolaria.core.linereader import DEFAULT_MAX_LINE
from tolaria.core.process import proctree
from tolaria.core.process.registry import ProcessRegistry, Run, default_registry
from tolaria.core.stream_id import validate_stream_id
from tolaria.core.turns import attach_setup
from tolaria.core.turns.acp.kept import KeptAcpTurn
from tolaria.core.turns.acp.turn import AcpTurn
from tolaria.core.turns.cli_turn import CliTurn
from tolaria.core.turns.keeper import KeeperPool, default_keepers, keepable
from tolaria.core.turns.kept_claude import KeptStreamTurn
from tolaria.core.turns.process_turn import ProcessTurn
from tolaria.core.turns.request import DEFAULT_GRACE_S, DEFAULT_RETRY_LIMIT_S, RunRequest
from tolaria.core.turns.stream_input import StreamInputTurn

if TYPE_CHECKING:
    from tolaria.core.turns.model_turn import ChatTurn

__all__ = ["DEFAULT_GRACE_S", "DEFAULT_RETRY_LIMIT_S", "RunRequest", "abort_ai_agent_stream",
           "stream_ai_agent"]

log = logging.getLogger(__name__)


#: The events ``redacted`` may change (checked here first: the emitter runs for every event).
_MASKED = frozenset((Error, Diagnostic))


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
        if type(event) in _MASKED:
            event = redacted(event)  # errors and stderr lines without secrets
        try:
            self._callback(event)
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
    run: Run | None = None,
) -> Done:
    """Run one agent turn; every event goes to ``on_event`` (on this loop), ``done`` last.

    Raises InvalidStreamId for a bad id and DuplicateStreamError when the id is already live;
    everything that goes wrong *in* the run is reported as events instead. With
    ``request.keep_key``, the agent process is kept in ``keepers`` (default: the process-wide
    pool) for the next turn of that key. ``run``: the run ``registry.reserve`` registered
    for ``stream_id`` earlier (a stop may already have reached it: nothing is spawned then).
    """
    validate_stream_id(stream_id)
    registry = registry or default_registry()
    proctree.enable_child_subreaper()
    if run is None:
        run = Run(stream_id, request.manifest.id, asyncio.get_running_loop(), cwd=request.cwd)
        registry.register(run)
    elif run.stream_id != stream_id:
        raise ValueError(f"run {run.stream_id} reserved for another stream than {stream_id}")
    emit = _Emitter(on_event)
    prepared = attach_setup.prepare(request, stream_id, emit)
    if isinstance(prepared, str):  # refused before the agent starts (ADR 0028)
        try:
            emit(Error(stream_id, message=prepared))
            done = Done(stream_id, stop_reason=STOP_ERROR)
            emit(done)
            return done
        finally:
            registry.unregister(run)
    request, staged = prepared
    try:
        return await _execute(request, stream_id, emit, run, registry, grace_s, max_line,
                              keepers)
    finally:
        staged.close()


async def _execute(request: RunRequest, stream_id: str, emit: _Emitter, run: Run,
                   registry: ProcessRegistry, grace_s: float, max_line: int,
                   keepers: KeeperPool | None) -> Done:
    turn: ProcessTurn | ChatTurn
    # A remote agent is not kept between turns (yet): one supervisor per turn.
    if request.keep_key is not None and request.target is None and keepable(request.manifest):
        # One long-lived agent process per conversation (ADR 0009).
        keepers = keepers or default_keepers()
        if request.manifest.protocol == ACP:
            turn = KeptAcpTurn(run, request, emit, registry, grace_s, max_line, keepers)
        else:
            turn = KeptStreamTurn(run, request, emit, registry, grace_s, max_line, keepers)
    elif request.manifest.protocol == OPENAI_CHAT:
        # No CLI: Tolaria runs the model's tool loop itself, registered like any other run.
        from tolaria.core.turns.model_turn import ChatTurn  # (needs httpx: imported when used)

        turn = ChatTurn(run, request, emit, registry, grace_s)
    elif request.manifest.protocol == ACP:
        # JSON-RPC over the agent's stdio, with a cooperative cancel (session/cancel).
        turn = AcpTurn(run, request, emit, registry, grace_s, max_line)
    elif request.manifest.input == "claude-stream-json":  # prompt + interrupt on stdin (ADR 0007)
        turn = StreamInputTurn(run, request, emit, registry, grace_s, max_line)
    else:
        turn = CliTurn(run, request, emit, registry, grace_s, max_line)
    try:
        done = await turn.execute()
        run.survivors = done.survivors  # for abort_and_report, before ``finished``
        emit(done)
        return done
    except asyncio.CancelledError:
        done = turn._done(STOP_CANCELLED)
        run.survivors = done.survivors
        emit(done)  # no-op when the stop path already reported done
        raise
    finally:
        registry.unregister(run)


def abort_ai_agent_stream(stream_id: str, registry: ProcessRegistry | None = None) -> bool:
    """Stop the run of ``stream_id``: True if a live run was stopped, False if none was live.

    Safe from any thread; never blocks; idempotent. Raises InvalidStreamId for a bad id.
    """
    return (registry or default_registry()).abort(stream_id)
