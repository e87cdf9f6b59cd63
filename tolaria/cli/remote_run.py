"""``tolaria run --host DEST``: the run's request sent to another machine (ADR 0026)."""

from __future__ import annotations

import dataclasses

from tolaria.config.remote_hosts import load_target
from tolaria.core.remote.hosts import BadDestination
from tolaria.core.turns.request import RunRequest


def with_host(request: RunRequest, destination: str, ssh_config: str | None) -> RunRequest | str:
    """``request`` run on ``destination`` (the settings' ``[remote]`` and ``[hosts."DEST"]``
    applied), or the one-line reason it cannot be. Headless: ssh may not ask anything (BatchMode),
    so an unknown host key or a passphrase is refused with ssh's own reason."""
    try:
        target = load_target(destination, ssh_config=ssh_config)
    except BadDestination as exc:
        return str(exc)
    return dataclasses.replace(request, target=target)
