"""Hosts in settings.toml: how Tolaria reaches other machines (ADR 0026).

```toml
[remote]                          # for every host
ssh_command = "ssh"               # the user's own ssh (PATH), or another one, with options
ssh_config = "~/.ssh/config"      # ssh -F FILE (ssh reads ~/.ssh of the passwd entry, not $HOME)
python = "python3"                # runs the supervisor there (3.8 or newer)
disconnect_seconds = 3            # silence after which the supervisor ends the run's tree
keep_seconds = 86400              # keep-running chats: how long a run goes on unattended
keep_buffer_mb = 8                # keep-running chats: output kept there for a reattach
cache_dir = "~/.cache/tolaria/remote"

[hosts."devbox"]                  # per host (the destination as given to --host): the same
python = "/usr/bin/python3.12"    # keys, and
command = "docker exec -i box"    # a command target instead of ssh (item 8)
env = { PATH = "/opt/node/bin:/usr/bin:/bin" }
programs = { claude = "/home/me/.local/bin/claude" }   # agent id -> program there
```

Read here; Preferences → Hosts writes through config/remote_hosts_edit.py; every bad value
is a ``BadDestination`` naming the key: a run never goes elsewhere than configured.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tolaria.core.remote.hosts import (
    DEFAULT_HEARTBEAT_S,
    BadDestination,
    Target,
    parse_destination,
    parse_prefix,
)
from tolaria.core.turns.request import RunRequest
from tolaria.support import tomlfile
from tolaria.support.tomlfile import SettingsFileError

_TEXT_KEYS = ("ssh_command", "ssh_config", "python", "cache_dir")


def _text(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadDestination(f"{where}: must be a non-empty string")
    return value


def _table(where: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
        raise BadDestination(f"{where}: must be a table of strings")
    return dict(value)


def _options(where: str, table: Mapping[str, Any]) -> dict[str, Any]:
    known = {*_TEXT_KEYS, "disconnect_seconds", "command", "env", "programs", "keep_seconds",
             "keep_buffer_mb"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise BadDestination(f"{where}.{unknown[0]}: unknown setting (known: "
                             f"{', '.join(sorted(known))})")
    out: dict[str, Any] = {}
    for key in _TEXT_KEYS:
        if key in table:
            value = _text(f"{where}.{key}", table[key])
            out[key] = os.path.expanduser(value) if key == "ssh_config" else value
    if "disconnect_seconds" in table:
        value = table["disconnect_seconds"]
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or not 0.5 <= value <= 3600:
            raise BadDestination(f"{where}.disconnect_seconds: must be a number of seconds "
                                 "from 0.5 to 3600")
        out["heartbeat_s"] = float(value)
    for key, field, low, high, scale in (("keep_seconds", "keep_s", 1, 30 * 86400, 1),
                                         ("keep_buffer_mb", "buffer_bytes", 1, 1024, 1 << 20)):
        if key in table:
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or not low <= value <= high:
                raise BadDestination(f"{where}.{key}: must be a number from {low} to {high}")
            out[field] = int(value * scale) if field == "buffer_bytes" else float(value)
    if "command" in table:
        out["prefix"] = parse_prefix(_text(f"{where}.command", table["command"]))
    for key in ("env", "programs"):
        if key in table:
            out[key] = _table(f"{where}.{key}", table[key])
    return out


def check_options(where: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Target`` fields a ``[remote]`` or ``[hosts."NAME"]`` table gives; BadDestination
    names the first bad key (``where.key: why``). Preferences' Hosts page checks with it."""
    return _options(where, table)


def load_target(destination: str, path: Path | None = None, *, interactive: bool = False,
                **given: Any) -> Target:
    """The target for ``destination`` with the settings' ``[remote]`` and ``[hosts."DEST"]``
    (and ``given`` options, e.g. ``ssh_config`` from the command line, over both)."""
    from tolaria.config.settings import settings_path

    data: dict[str, Any] = {}
    where = path or settings_path()
    try:
        found = tomlfile.read(where)
    except SettingsFileError as exc:
        raise BadDestination(str(exc)) from None
    if found is not None:
        data = found[1]
    remote = data.get("remote", {})
    hosts = data.get("hosts", {})
    if not isinstance(remote, dict) or not isinstance(hosts, dict):
        raise BadDestination(f"{where}: [remote] and [hosts.\"NAME\"] must be tables")
    options = _options(f"{where}: remote", remote)
    options.pop("prefix", None)  # a command prefix belongs to one host
    host = hosts.get(destination)
    if host is not None:
        if not isinstance(host, dict):
            raise BadDestination(f"{where}: hosts.{destination}: must be a table")
        options.update(_options(f"{where}: hosts.{destination}", host))
    options.update({k: v for k, v in given.items() if v is not None})
    options.setdefault("heartbeat_s", DEFAULT_HEARTBEAT_S)
    prefix = options.pop("prefix", None)
    if prefix is not None:
        return Target(prefix=prefix, interactive=interactive, name=destination, **options)
    return parse_destination(destination, interactive=interactive, **options)


def configured_hosts(path: Path | None = None) -> list[str]:
    """The names of the settings' ``[hosts."NAME"]`` tables, sorted (none when the file is
    missing or cannot be read: the window's host menu still offers "Other host…")."""
    from tolaria.config.settings import settings_path

    try:
        found = tomlfile.read(path or settings_path())
    except SettingsFileError:
        return []
    hosts = found[1].get("hosts", {}) if found is not None else {}
    return sorted(name for name, table in hosts.items()
                  if isinstance(hosts, dict) and isinstance(table, dict))


def on_host(request: RunRequest, destination: str, *, ssh_config: str | None = None,
            interactive: bool = False, path: Path | None = None,
            keep_running: bool = False) -> RunRequest | str:
    """``request`` run on ``destination`` (the settings' ``[remote]`` and ``[hosts."DEST"]``
    applied), or the one-line reason it cannot be: ``tolaria run --host`` and a window chat's
    host both go through here. Not ``interactive``: ssh may not ask anything (BatchMode), so an
    unknown host key or a passphrase is refused with ssh's own reason."""
    try:
        target = load_target(destination, path, interactive=interactive, ssh_config=ssh_config,
                             keep_running=keep_running or None)
    except BadDestination as exc:
        return str(exc)
    return dataclasses.replace(request, target=target)
