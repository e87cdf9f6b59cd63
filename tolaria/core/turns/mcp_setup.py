"""A run's MCP servers at spawn: planned, said, refused or rendered (ADR 0019).

Used where an agent process is spawned (``ProcessTurn.execute`` for a process per turn,
``KeptProcess._spawn`` for a kept agent): the servers of the request are checked against the
run's environment (``${VAR}`` set, the command found), what cannot go is said in the chat
(a notice) or, for a broken server (``${VAR}`` unset, command missing) with
``on_failure = "refuse"``, ends the turn before the agent starts; the rest is rendered in the agent's form with the marker of the process's stream id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tolaria.core.events import Diagnostic, EventCallback
from tolaria.core.mcp.forms import McpLaunch, McpPlan, launch, marker_of, plan
from tolaria.core.mcp.servers import NOTE
from tolaria.core.process import tracking
from tolaria.core.turns.request import RunRequest

REFUSE = "refuse"


@dataclass
class McpSetup:
    """The servers of one agent process: the plan, the marker they carry, what was launched."""

    plan: McpPlan = field(default_factory=McpPlan)
    marker: dict[str, str] = field(default_factory=dict)
    launched: McpLaunch = field(default_factory=McpLaunch)
    #: A run on a host: the private files (name -> text) the supervisor writes there
    #: (``mcp_remote``); the launch's args and env name their folder as ``FILES``.
    files: dict[str, str] = field(default_factory=dict)

    def close(self) -> None:
        self.launched.close()


def run_folder(stream_id: str) -> str:
    """The private folder of one agent process's MCP files: removed when it ends, or by the
    watchdog with its tracking file after a crash (tracking.files_for)."""
    return str(tracking.files_for(stream_id))


def prepare(request: RunRequest, env: Mapping[str, str], stream_id: str, mode: str,
            emit: EventCallback, run_stream_id: str) -> McpSetup | str:
    """The setup of the process whose environment is ``env`` (its marker: ``stream_id``'s),
    or the error that refuses the run. Left-out servers are said on ``run_stream_id``."""
    manifest = request.manifest
    setup = plan_and_say(request, env, manifest.name, emit, run_stream_id, check_commands=True)
    if isinstance(setup, str) or not setup.plan.passed:
        return setup
    try:
        setup.launched = launch(manifest, setup.plan.passed, setup.marker, mode=mode,
                                folder=Path(run_folder(stream_id)), environ=env)
    except OSError as exc:
        return f"cannot write the MCP configuration for {manifest.name}: {exc}"
    return setup


def plan_and_say(request: RunRequest, env: Mapping[str, str], agent: str, emit: EventCallback,
             run_stream_id: str, *, check_commands: bool) -> McpSetup | str:
    """The plan, its notes said; or the refusal (``on_failure = "refuse"``, a broken server)."""
    setup = McpSetup(marker=marker_of(env))
    if not request.mcp_servers:
        return setup
    setup.plan = plan(request.manifest, request.mcp_servers, env, check_commands=check_commands)
    notes = setup.plan.notes(agent)
    if setup.plan.broken and request.mcp_on_failure == REFUSE:
        broken = [n for n, (name, _) in zip(notes, setup.plan.left_out, strict=True)
                  if name in setup.plan.broken]
        return ("; ".join(broken) + ". The run is refused (settings: [mcp] on_failure = "
                "\"refuse\"; use \"continue\" to run without such servers)")
    for note in notes:
        emit(Diagnostic(run_stream_id, source=NOTE, message=note + "; the run goes on without it"))
    return setup
