"""``tolaria run --host DEST``: the run's request sent to another machine (ADR 0026)."""

from __future__ import annotations

from tolaria.config.remote_hosts import on_host
from tolaria.core.turns.request import RunRequest


def with_host(request: RunRequest, destination: str, ssh_config: str | None,
              keep_running: bool = False) -> RunRequest | str:
    """``request`` run on ``destination`` (the settings' ``[remote]`` and ``[hosts."DEST"]``
    applied), or the one-line reason it cannot be. Headless: ssh may not ask anything (BatchMode),
    so an unknown host key or a passphrase is refused with ssh's own reason."""
    return on_host(request, destination, ssh_config=ssh_config, keep_running=keep_running)
