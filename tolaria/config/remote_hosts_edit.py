"""Writing the hosts of ``settings.toml`` (Preferences → Hosts): add, replace, rename or remove
one ``[hosts."NAME"]`` table (its keys: config/remote_hosts.py).

A host is checked by the same parsers a run uses (``hosts.parse_host`` for an ssh destination,
``remote_hosts`` for every key) before anything is written; each problem names its field, so
the page can say it beside that field. Writes go through :func:`tolaria.support.tomlfile.edit`:
atomic, comments and hand edits kept, a broken file never written over (SettingsFileError).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shlex
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from tolaria.config.remote_hosts import check_options
from tolaria.config.settings import settings_path
from tolaria.core.remote.hosts import BadDestination, parse_host
from tolaria.support import tomlfile
from tolaria.support.tomlfile import SettingsFileError

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_AGENT_ID = re.compile(r"[a-z0-9][a-z0-9_-]*")
#: The text fields of a host, in the order the page shows them.
TEXT_FIELDS = ("command", "ssh_command", "ssh_config", "python", "cache_dir")


class HostConfigError(ValueError):
    """A host that cannot be saved: (field, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{f}: {m}" for f, m in problems))
        self.problems = problems


@dataclass(frozen=True)
class HostEntry:
    """One ``[hosts."NAME"]`` as the page edits it: text as typed ("" = not set)."""

    #: The destination as ``--host`` and the chat's Host menu take it (an ssh alias,
    #: ``user@host``, ``ssh://user@host:port``), or a command target's name.
    name: str
    #: A command prefix (``docker exec -i box``): the host is reached through it, not ssh.
    command: str = ""
    ssh_command: str = ""
    ssh_config: str = ""
    python: str = ""
    cache_dir: str = ""
    disconnect_seconds: str = ""
    env: tuple[tuple[str, str], ...] = ()
    #: agent id -> the program's path on the host.
    programs: tuple[tuple[str, str], ...] = ()


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def from_table(name: str, table: Mapping[str, Any]) -> HostEntry:
    """The page's view of a table as the file has it (even a broken one: shown to be fixed)."""
    seconds = table.get("disconnect_seconds")
    pairs = {key: tuple((str(k), _text(v)) for k, v in value.items())
             if isinstance(value := table.get(key), Mapping) else ()
             for key in ("env", "programs")}
    texts = {k: _text(table.get(k)) for k in TEXT_FIELDS}
    return HostEntry(name, **texts,
                     disconnect_seconds="" if seconds is None else f"{seconds:g}"
                     if isinstance(seconds, int | float) else _text(seconds),
                     env=pairs["env"], programs=pairs["programs"])


def read_hosts(path: Path | None = None) -> dict[str, HostEntry]:
    """Every ``[hosts."NAME"]`` of the file, in its order. SettingsFileError: it cannot be read."""
    found = tomlfile.read(path or settings_path())
    hosts = found[1].get("hosts", {}) if found is not None else {}
    if not isinstance(hosts, Mapping):
        return {}
    return {name: from_table(name, table) for name, table in hosts.items()
            if isinstance(table, Mapping)}


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0.5 <= value <= 3600 else None


def host_problems(entry: HostEntry) -> list[tuple[str, str]]:
    """(field, message) for each value that cannot be saved; empty when the host is valid.
    Fields: name, the TEXT_FIELDS, disconnect_seconds, env, programs."""
    found: list[tuple[str, str]] = []
    name = entry.name.strip()
    if not name:
        found.append(("name", "give the host's destination (an ssh alias, user@host or "
                              "ssh://user@host:port) or, with a command, a name"))
    elif not entry.command.strip():
        try:
            parse_host(name)
        except BadDestination as exc:
            found.append(("name", str(exc)))
    elif name.startswith("-") or any(not c.isprintable() for c in name):
        found.append(("name", "must be printable and not start with '-'"))
    for key in TEXT_FIELDS:
        value = getattr(entry, key)
        if not value.strip():
            continue
        if any(c in value for c in "\0\n\r"):
            found.append((key, "must be one line"))
            continue
        try:
            check_options("host", {key: value})
            if key == "ssh_command" and not shlex.split(value):
                raise BadDestination("host.ssh_command: must name a program")
        except (BadDestination, ValueError) as exc:
            found.append((key, str(exc).removeprefix(f"host.{key}: ")))
            continue
        if key == "ssh_config" and not os.path.isfile(os.path.expanduser(value.strip())):
            found.append((key, f"no such file on this computer: {value.strip()}"))
    if entry.disconnect_seconds.strip() and _seconds(entry.disconnect_seconds.strip()) is None:
        found.append(("disconnect_seconds", "must be a number of seconds from 0.5 to 3600"))
    for key, pairs, pattern, what in (
            ("env", entry.env, _ENV_NAME, "an environment variable name (letters, digits and "
                                          "_, not starting with a digit)"),
            ("programs", entry.programs, _AGENT_ID, "an agent id (lowercase letters, digits, "
                                                    "'-' and '_')")):
        seen: set[str] = set()
        for item, value in pairs:
            if not item:
                found.append((key, "every row needs a name"))
            elif not pattern.fullmatch(item):
                found.append((key, f"{item!r} is not {what}"))
            elif item in seen:
                found.append((key, f"{item} is listed twice"))
            elif any(c in value for c in "\0\n\r"):
                found.append((key, f"{item}: the value must be one line"))
            elif key == "programs" and not value.strip():
                found.append((key, f"{item}: give the program's path on the host"))
            seen.add(item)
    return found


def to_table(entry: HostEntry) -> dict[str, Any]:
    """The table that says ``entry`` (unset fields left out)."""
    table: dict[str, Any] = {}
    for key in TEXT_FIELDS:
        value = getattr(entry, key).strip()
        if value:
            table[key] = value
    seconds = _seconds(entry.disconnect_seconds.strip()) if entry.disconnect_seconds else None
    if seconds is not None:
        table["disconnect_seconds"] = int(seconds) if seconds.is_integer() else seconds
    for key in ("env", "programs"):
        pairs = dict(getattr(entry, key))
        if pairs:
            table[key] = pairs
    return table


def _hosts(root: Any, new_table: tomlfile.TableFactory, path: Path, create: bool) -> Any:
    hosts = root.get("hosts")
    if hosts is None:
        if not create:
            return None
        root["hosts"] = new_table(root, True)
        hosts = root["hosts"]
    if not isinstance(hosts, MutableMapping):
        raise SettingsFileError(path, None, 'hosts must be a table ([hosts."NAME"]) to save '
                                            "hosts into it; fix or remove it")
    return hosts


def _unwrap(value: Any) -> Any:
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if unwrap else value


def save_host(entry: HostEntry, replace: str | None = None, path: Path | None = None) -> HostEntry:
    """Write ``entry``: a new host (``replace`` None) or instead of ``replace`` (renamed when
    the names differ). HostConfigError: a value is wrong or the name is taken;
    SettingsFileError: the file is broken. Nothing is written in either case."""
    entry = dataclasses.replace(entry, name=entry.name.strip())
    problems = host_problems(entry)
    if problems:
        raise HostConfigError(problems)
    path = path or settings_path()
    wanted = to_table(entry)

    def change(root: Any, new_table: tomlfile.TableFactory) -> bool:
        hosts = _hosts(root, new_table, path, create=True)
        if entry.name != replace and entry.name in hosts:
            raise HostConfigError([("name", f"a host named {entry.name!r} is already set up")])
        if replace is not None and replace != entry.name:
            hosts.pop(replace, None)
        table = hosts.get(entry.name)
        if not isinstance(table, MutableMapping):
            hosts[entry.name] = new_table(hosts, False)
            table = hosts[entry.name]
        toml = isinstance(root, tomlkit.TOMLDocument)
        for key in [k for k in table if k not in wanted]:
            del table[key]
        for key, value in wanted.items():
            if key in table and _unwrap(table[key]) == value:
                continue  # unchanged: its layout and comments stay
            if isinstance(value, dict) and toml:
                inline = tomlkit.inline_table()
                inline.update(value)
                table[key] = inline
            else:
                table[key] = value
        return True

    tomlfile.edit(path, change)
    return entry


def remove_host(name: str, path: Path | None = None) -> bool:
    """Remove ``[hosts."NAME"]``; False when it was not there. SettingsFileError: the file is
    broken (nothing written)."""
    path = path or settings_path()

    def change(root: Any, new_table: tomlfile.TableFactory) -> bool:
        hosts = _hosts(root, new_table, path, create=False)
        if hosts is None or name not in hosts:
            return False
        del hosts[name]
        if not hosts:
            del root["hosts"]
        return True

    return tomlfile.edit(path, change)
