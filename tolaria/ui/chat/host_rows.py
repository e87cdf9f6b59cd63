"""What the agent picker shows for a chat on another machine (issue 25 item 5, ADR 0034).

The agents are grouped under their host: "On devbox" with what a look at devbox found (version
when ready; "installed there, but …"; not found there greyed with the reason), then "This
computer" with the model endpoints (a direct model chat is reached from here, wherever the chat's
folder is). Before the host has answered its agents stay choosable without a version; a host
that could not be reached says why on a row of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest
from tolaria.core.programs.discovery import Detection
from tolaria.core.remote.discover import HostAgents
from tolaria.ui.chat.agent_status import (
    NEEDS_SETUP,
    NOT_INSTALLED,
    READY,
    AgentStatus,
    agent_status,
    install_command,
)

THIS_COMPUTER = "This computer"
_ORDER = {READY: 0, NEEDS_SETUP: 1, NOT_INSTALLED: 2}


@dataclass(frozen=True)
class Section:
    """One heading of the picker and the agents under it."""

    heading: str
    agents: list[tuple[Manifest, AgentStatus]]
    #: A line under the heading when the host could not be asked ("" otherwise).
    problem: str = ""


def remote_status(manifest: Manifest, found: Detection | None, host: str) -> AgentStatus:
    """``agent_status`` for an agent on ``host``: the hint names the host."""
    if found is None:  # not looked at yet: choosable, as locally before detection
        return AgentStatus(READY)
    if found.path is None:
        command = install_command(manifest)
        there = f"; install there: `{command}`" if command else ""
        program = found.error.split(" ", 1)[0] if found.error else manifest.name
        reason = ("not an executable file there" if found.error and "not an executable" in
                  found.error else f"no {program} on PATH or through the login shell there")
        return AgentStatus(NOT_INSTALLED, f"not on {host}: {reason}{there}", command)
    if found.error:
        return AgentStatus(NEEDS_SETUP, f"installed on {host}, but {found.error}")
    return AgentStatus(READY)


def host_heading(host: str, found: HostAgents | None) -> str:
    if found is None:
        return f"On {host} · looking for agents…"
    if found.error:
        return f"On {host} · not reached"
    return f"On {host}"


def sections(host: str, manifests: Sequence[Manifest], found: HostAgents | None,
             local: dict[str, Detection]) -> list[Section]:
    """The picker's headings for a chat on ``host``: its agents, then this computer's
    endpoints (their local detections in ``local``)."""
    remote: list[tuple[Manifest, AgentStatus]] = []
    here: list[tuple[Manifest, AgentStatus]] = []
    reached = found if found is not None and not found.error else None
    for manifest in manifests:
        if manifest.protocol == OPENAI_CHAT:
            here.append((manifest, agent_status(manifest, local.get(manifest.id))))
        else:
            detection = reached.get(manifest.id) if reached is not None else None
            remote.append((manifest, remote_status(manifest, detection, host)))
    remote.sort(key=lambda pair: _ORDER[pair[1].group])
    out = [Section(host_heading(host, found), remote,
                   found.error if found is not None and found.error else "")]
    if here:
        out.append(Section(THIS_COMPUTER, here))
    return out
