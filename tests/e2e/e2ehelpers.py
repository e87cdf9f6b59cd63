"""Shared by the end-to-end tests: the installed CLI (or a loud skip), its adapter, the tool's
``sleep`` and the time a real turn may take.

The conftest reports ``SKIPPED`` at the end of the run, so this list must be the one module
object every test imports (``e2e.e2ehelpers``, the same name mypy checks).
"""

from __future__ import annotations

import warnings

import psutil
import pytest
from e2e.clis import CLIS, Cli, RegistryUnreachable, install
from helpers import marker_pids

from tolaria.core.adapters.manifest import Manifest, load_adapters

#: Time a turn may take end to end (a cold node CLI start is a few seconds on 2 cores).
TURN_S = 90.0
#: Why the end-to-end tier was skipped, reported in red at the end of the run.
SKIPPED: list[str] = []


def manifest(agent: str) -> Manifest:
    adapters = load_adapters()
    assert not adapters.errors, adapters.errors
    return adapters.get(agent)


def sleep_pids(stream_id: str) -> list[int]:
    """The run's ``sleep 300`` (the tool), found by the run's environment marker."""
    found = []
    for pid in marker_pids(stream_id):
        try:
            if psutil.Process(pid).cmdline()[:2] == ["sleep", "300"]:
                found.append(pid)
        except psutil.Error:
            continue
    return found


def installed_cli(agent: str) -> Cli:
    """The pinned CLI for ``agent``, installed (once) into the cache; skip loudly without npm."""
    cli = CLIS[agent]
    try:
        install(cli)
    except RegistryUnreachable as exc:
        message = (f"END-TO-END TIER SKIPPED for {cli.spec}: the npm registry cannot be reached "
                   f"({exc}); the real CLIs were NOT tested")
        if message not in SKIPPED:
            SKIPPED.append(message)
            warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    return cli
