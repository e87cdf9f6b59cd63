"""A run's MCP servers when its agent runs on a host (ADR 0019, "On a host"; ADR 0026).

The same plan, notes and refusal as a local run (``mcp_setup``), said as "... is not passed to
Claude Code on devbox: why"; ``${VAR}`` is expanded from the local environment, as locally. The
servers are rendered in the agent's form as locally; a private file the form needs (Claude's
``--mcp-config``, the Gemini/Qwen settings file) is not left here but sent in the supervisor's
START (``files``): the supervisor writes it into the run's private folder on the host (0700,
files 0600, removed when the run ends there, also when the link dies) and puts that folder's
path where ``FILES`` stands in the agent's argv and environment.

A stdio server's command runs on the host: it is not looked up here (the local PATH says
nothing of the host's) but passed as it is; a command missing there is the agent's to report
(Claude's init status becomes a notice), and the run's start notice says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tolaria.core.events import Diagnostic, EventCallback
from tolaria.core.mcp.forms import McpLaunch, launch, plan
from tolaria.core.mcp.servers import NOTE, STDIO
from tolaria.core.remote.supervisor import FILES
from tolaria.core.turns.mcp_setup import McpSetup, plan_and_say, run_folder
from tolaria.core.turns.request import RunRequest


def prepare_remote(request: RunRequest, env: Mapping[str, str], stream_id: str, mode: str,
                   emit: EventCallback, host: str) -> McpSetup | str:
    """The servers of an agent run on ``host`` (its label), or the error that refuses the run.
    ``env``: the agent's environment as built here (``${VAR}`` is read from it)."""
    manifest = request.manifest
    agent = f"{manifest.name} on {host}"
    setup = plan_and_say(request, env, agent, emit, stream_id, check_commands=False)
    if isinstance(setup, str) or not setup.plan.passed:
        return setup
    commands = sorted({s.command for s in setup.plan.passed if s.transport == STDIO})
    if commands:
        emit(Diagnostic(stream_id, source=NOTE, message=(
            f"MCP server command{'s' if len(commands) > 1 else ''} {', '.join(commands)} "
            f"run{'' if len(commands) > 1 else 's'} on {host}: not checked here; if missing "
            f"there, {manifest.name} says so")))
    # The user's own settings file named in the local environment means nothing on the host.
    local = {k: v for k, v in env.items() if k != manifest.mcp.settings_env}
    try:
        rendered = launch(manifest, setup.plan.passed, setup.marker, mode=mode,
                          folder=Path(run_folder(stream_id)), environ=local, on_host=True)
    except OSError as exc:
        return f"cannot write the MCP configuration for {manifest.name}: {exc}"
    try:
        setup.launched, setup.files = _for_host(rendered)
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read the MCP configuration for {manifest.name}: {exc}"
    finally:
        rendered.close()  # nothing of it stays here: the host has its own copy
    return setup


def _for_host(rendered: McpLaunch) -> tuple[McpLaunch, dict[str, str]]:
    """``rendered`` with its local folder's path replaced by ``FILES``, and its files' texts."""
    if rendered.folder is None:
        return McpLaunch(args=rendered.args, env=dict(rendered.env)), {}
    local = str(rendered.folder)
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted(rendered.folder.iterdir())}
    return (McpLaunch(args=tuple(a.replace(local, FILES) for a in rendered.args),
                      env={k: v.replace(local, FILES) for k, v in rendered.env.items()}),
            files)


def planned_quietly(request: RunRequest, env: Mapping[str, str]) -> McpSetup:
    """A kept run taken back on its host: its servers run there since its start; only the plan
    (tool cards name their server), nothing said again, nothing refused, nothing sent."""
    if not request.mcp_servers:
        return McpSetup()
    return McpSetup(plan=plan(request.manifest, request.mcp_servers, env, check_commands=False))
