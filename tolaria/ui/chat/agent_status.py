"""What the window says about an agent: Ready, Needs setup or Not installed, in one line.

The picker groups agents by it and Preferences shows the same line with a Copy button, so the
first thing a new user reads is the command to run, not the list of folders that were searched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest
from tolaria.core.programs.discovery import Detection

READY = "Ready"
NEEDS_SETUP = "Needs setup"
NOT_INSTALLED = "Not installed"
GROUPS = (READY, NEEDS_SETUP, NOT_INSTALLED)
_BACKTICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class AgentStatus:
    group: str
    #: One line for the user ("" when the agent is ready).
    line: str = ""
    #: A command the user can copy and run ("" when there is none).
    command: str = ""


def install_command(manifest: Manifest) -> str:
    """The copyable part of the install hint (a web address alone is not a command)."""
    hint = manifest.install_hint.strip()
    if not hint:
        return ""
    if hint.startswith(("http://", "https://")):
        _url, _sep, rest = hint.partition("then:")
        return rest.strip()
    return hint


def agent_status(manifest: Manifest, found: Detection | None) -> AgentStatus:
    if found is None:  # not detected yet: assume it works, as the picker always has
        return AgentStatus(READY)
    if found.path is None:
        hint = manifest.install_hint or "install it, then restart Tolaria"
        return AgentStatus(NOT_INSTALLED, f"install: {hint}", install_command(manifest))
    if not found.error:
        return AgentStatus(READY)
    if manifest.protocol == OPENAI_CHAT:
        if manifest.api_key_env and manifest.api_key_env in found.error:
            return AgentStatus(NEEDS_SETUP, f"needs an API key: set {manifest.api_key_env}, or "
                               f"run `tolaria key set {manifest.id}`",
                               f"tolaria key set {manifest.id}")
        backticked = _BACKTICKED.search(found.error)
        return AgentStatus(NEEDS_SETUP, found.error, backticked.group(1) if backticked else "")
    # Installed, but its version check failed (a first-run setup, a missing node, ...).
    return AgentStatus(NEEDS_SETUP, f"installed, but {found.error}")
