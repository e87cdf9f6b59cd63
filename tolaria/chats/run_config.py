"""What the settings files change about the next run: one entry point, ``prepare_run``, for the
window and ``tolaria run``.

The agent's overrides (program path, extra arguments, environment, model, permission mode,
default folder) and the behaviour settings (polite-stop window, grace period, retry limit) turn
a manifest into a typed :class:`RunOptions`; ``RunOptions.request`` builds the ``RunRequest``.
Nothing is skipped silently: a disabled agent, or overrides that cannot be applied, raise
``AgentSettingsError`` with a sentence saying what to change.

The window's ``RunConfig`` holds the Preferences currently saved: runs already started keep the
manifest and request they were built with, so a change never touches them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tolaria.chats.mentions.forms import find_mentions, render_mentions
from tolaria.config.mcp import McpSettings, load_mcp
from tolaria.config.overrides import (
    AgentOverrides,
    AgentSettingsError,
    apply_overrides,
    read_overrides,
    validate_overrides,
)
from tolaria.config.settings import Settings, load_settings, settings_path
from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.limits import RunLimits
from tolaria.core.process import backend
from tolaria.core.turns.request import RunRequest

if TYPE_CHECKING:
    from tolaria.chats.mentions.hosted import HostedMentions
    from tolaria.core.permissions import PermissionCallback


@dataclass(frozen=True)
class RunOptions:
    """What a run of one agent uses, from its manifest and the settings files."""

    #: The manifest with the agent's overrides and the polite-stop window applied.
    manifest: Manifest
    overrides: AgentOverrides
    #: "safe" / "full" for this run, or None for the manifest's own ``permissions``.
    permission_mode: str | None
    #: The model override, or None for the manifest's own.
    model: str | None
    #: The agent's default working folder, if the user set one (expanded).
    cwd: str | None
    #: ``grace_s`` for ``stream_ai_agent``.
    grace_s: float
    #: ``RunRequest.retry_limit_s`` (``[behaviour] retry_limit_seconds``; 0 = never cut off).
    retry_limit_s: float
    #: Problems in the settings files that do not stop this run (shown as warnings).
    warnings: tuple[str, ...] = ()
    #: ``[mcp]``: the servers (all of them; each run takes the ones for its agent, ADR 0019).
    mcp: McpSettings = field(default_factory=McpSettings)
    #: The ``[limits]`` defaults of the run (tolaria/core/limits.py).
    limits: RunLimits = field(default_factory=RunLimits)

    def request(self, prompt: str, *, cwd: str | None = None, session_id: str | None = None,
                on_permission: PermissionCallback | None = None,
                keep_key: str | None = None, hosted: HostedMentions | None = None,
                ) -> RunRequest:
        """The ``RunRequest`` of one turn with these options; ``cwd`` defaults to the agent's.
        Its ``@path`` mentions become what this agent understands (chats/mentions/forms.py);
        ``hosted``: the folder is on a host, what is there is its listing's (nothing local)."""
        cwd = cwd or self.cwd
        folder = cwd or os.getcwd()
        links: tuple[str, ...] = ()
        if hosted is not None:
            # Here, not at the top: what reads the store only (``tolaria usage``, ``chats``)
            # must not load the listing and checkpoint code it brings.
            from tolaria.chats.mentions.hosted import render_on_host

            prompt, links = render_on_host(prompt, self.manifest.protocol, folder, hosted)
        else:
            if self.manifest.protocol == "acp":  # each mentioned file as a resource_link too
                links = tuple(dict.fromkeys(
                    full for m in find_mentions(prompt, folder)
                    if os.path.isfile(full := os.path.join(folder, m.path))))
            prompt = render_mentions(prompt, self.manifest.protocol, folder)
        return RunRequest(manifest=self.manifest, prompt=prompt, cwd=cwd, mention_links=links,
                          session_id=session_id, on_permission=on_permission,
                          retry_limit_s=self.retry_limit_s, permission_mode=self.permission_mode,
                          model=self.model, keep_key=keep_key,
                          mcp_servers=self.mcp.for_agent(self.manifest.id),
                          mcp_on_failure=self.mcp.on_failure)


def prepare_run(manifest: Manifest, *, settings: Settings | None = None,
                overrides: Mapping[str, AgentOverrides] | None = None,
                path: Path | None = None, mcp: McpSettings | None = None) -> RunOptions:
    """Apply the settings to ``manifest`` for one run (the window and ``tolaria run`` alike).

    Reads ``settings.toml`` for what is not passed in. Raises AgentSettingsError when the
    agent is disabled or its overrides are invalid: never runs it differently than configured.
    """
    path = path or settings_path()
    warnings: list[str] = []
    if settings is None:
        settings, problems = load_settings(path)
        warnings += problems
    if overrides is None:
        loaded, problems, by_agent = read_overrides(path)
        if manifest.id in by_agent:
            raise AgentSettingsError(f"agent {manifest.id} has invalid settings: "
                                     + "; ".join(by_agent[manifest.id]))
        warnings += [p for p in problems if p not in warnings]
        overrides = loaded
    warnings += _apply_backend(settings.process_backend)
    o = overrides.get(manifest.id, AgentOverrides())
    if not o.enabled:
        raise AgentSettingsError(f"agent {manifest.id} is disabled in settings (enable it in "
                                 f"Preferences > Agents, or set enabled = true under "
                                 f"[agents.{manifest.id}] in {path})")
    invalid = validate_overrides(o, manifest)
    if invalid:
        raise AgentSettingsError(f"agent {manifest.id} cannot run as configured in {path}: "
                                 + "; ".join(f"{n}: {m}" for n, m in invalid))
    applied = apply_overrides(manifest, o)
    if settings.polite_window_ms is not None:
        stop: StopPolicy = dataclasses.replace(applied.stop,
                                               polite_window_ms=settings.polite_window_ms)
        applied = dataclasses.replace(applied, stop=stop)
    cwd = os.path.expanduser(o.cwd) if o.cwd else None
    if mcp is None:  # read with the run: the servers saved now (Preferences writes the file)
        mcp = load_mcp(path)
        warnings += [p for p in mcp.problems if p not in warnings]
    return RunOptions(applied, o, o.permission_mode, o.model, cwd, settings.grace_seconds,
                      settings.retry_limit_seconds, tuple(warnings), mcp=mcp,
                      limits=settings.run_limits())


def _apply_backend(choice: str) -> list[str]:
    """Put the ``process_backend`` setting in force for the runs to come (a warning when it
    cannot be used here). Raises AgentSettingsError when TOLARIA_PROCESS_BACKEND names no
    usable backend: a run never runs with another stop engine than the one asked for."""
    warnings = []
    try:
        backend.configure(choice)
    except backend.BackendChoiceError as exc:  # linux on a system without /proc
        backend.configure("auto")
        warnings.append(f"{exc}; using auto")
    problem = backend.problem()
    if problem is not None:
        raise AgentSettingsError(problem)
    return warnings


@dataclass
class RunConfig:
    """The window's saved Preferences, applied to each new run."""

    settings: Settings = field(default_factory=Settings)
    overrides: Mapping[str, AgentOverrides] = field(default_factory=dict)
    #: ``[mcp]``; None: read from settings.toml at each ``configure`` (what is saved now).
    mcp: McpSettings | None = None

    def configure(self, manifest: Manifest) -> RunOptions:
        """The options of the next run of ``manifest``.

        Raises ``AgentSettingsError`` (a ValueError) when the agent is disabled or its
        overrides cannot be used: a run never runs differently than configured.
        """
        return prepare_run(manifest, settings=self.settings, overrides=self.overrides,
                           mcp=self.mcp)
