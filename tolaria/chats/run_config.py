"""What Preferences change about the next run: the agent's overrides and the stop settings.

The chat controller asks ``configure`` for each new run (``prepare_run``, the same entry point
as ``tolaria run``); runs already started keep the manifest and request they were built with,
so a change never touches them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tolaria.config.agents import AgentOverrides, prepare_run
from tolaria.config.settings import Settings
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.turns.request import RunRequest

log = logging.getLogger(__name__)

_REQUEST_FIELDS = frozenset(f.name for f in fields(RunRequest))


@dataclass
class RunConfig:
    settings: Settings = field(default_factory=Settings)
    overrides: Mapping[str, AgentOverrides] = field(default_factory=dict)

    def configure(self, manifest: Manifest) -> tuple[Manifest, dict[str, Any]]:
        """The manifest the next run uses and the extra ``RunRequest`` keyword arguments.

        Raises ``AgentSettingsError`` (a ValueError) when the agent is disabled or its
        overrides cannot be used: a run never runs differently than configured.
        """
        prepared = prepare_run(manifest, settings=self.settings, overrides=self.overrides)
        options = dict(prepared.options)
        unknown = sorted(set(options) - _REQUEST_FIELDS)
        if unknown:  # a run option this version of the runner does not take
            log.warning("run options not supported by this runner: %s", ", ".join(unknown))
            options = {k: v for k, v in options.items() if k in _REQUEST_FIELDS}
        return prepared.manifest, options
