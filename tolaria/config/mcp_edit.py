"""Writing the MCP servers of ``settings.toml`` (Preferences → MCP servers): add, replace,
rename or remove one ``[mcp.servers.<name>]`` table, and set ``[mcp] on_failure``.

Every write goes through :func:`tolaria.support.tomlfile.edit`: atomic, comments and hand
edits kept (also inside the edited table: only its changed keys are touched), and a broken file
is never written over (SettingsFileError). A server that cannot be used is refused before
anything is written, with McpConfigError naming the field.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import tomlkit

from tolaria.config.mcp import ON_FAILURE
from tolaria.config.settings import settings_path
from tolaria.core.mcp.servers import (
    NAME_RE,
    STDIO,
    TRANSPORTS,
    McpConfigError,
    McpServer,
    from_table,
    to_table,
)
from tolaria.support import tomlfile
from tolaria.support.tomlfile import SettingsFileError

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: An HTTP header name (RFC 9110 token characters).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: Tables written inline (``env = { TOKEN = "${TOKEN}" }``): one line per server reads best.
_INLINE = ("env", "headers")


def server_problems(server: McpServer) -> list[tuple[str, str]]:
    """(field, message) for each value of ``server`` that cannot be saved; empty when valid.
    Fields: name, command, args, env, url, headers, agents."""
    found: list[tuple[str, str]] = []
    if not NAME_RE.match(server.name):
        found.append(("name", "use 1-64 letters, digits, '_' or '-' (it becomes a key in "
                              "every agent's own configuration)"))
    if server.transport == STDIO:
        if not server.command.strip():
            found.append(("command", "a stdio server needs a command (the program to start)"))
        elif any(c in server.command for c in "\0\n\r"):
            found.append(("command", "must be one line"))
        if any("\0" in a for a in server.args):
            found.append(("args", "must not contain NUL characters"))
    elif not re.match(r"^https?://[^\s/]+", server.url.strip()):
        found.append(("url", "needs an http:// or https:// URL"))
    elif any(c.isspace() for c in server.url.strip()):
        found.append(("url", "must not contain spaces"))
    for key, pairs, pattern, what in (
            ("env", server.env, _ENV_NAME, "an environment variable name (letters, digits and "
                                           "_, not starting with a digit)"),
            ("headers", server.headers, _HEADER_NAME, "a header name")):
        seen: set[str] = set()
        for name, value in pairs:
            if not name:
                found.append((key, "every row needs a name"))
            elif not pattern.fullmatch(name):
                found.append((key, f"{name!r} is not {what}"))
            elif name in seen:
                found.append((key, f"{name} is listed twice"))
            elif any(c in value for c in "\0\n\r"):
                found.append((key, f"{name}: the value must be one line, without NUL"))
            seen.add(name)
    if server.transport not in TRANSPORTS:
        found.append(("transport", f"must be one of {', '.join(TRANSPORTS)}"))
    return found


def validate_server(server: McpServer) -> McpServer:
    """``server`` as it will be read back; McpConfigError names the field that is wrong."""
    problems = server_problems(server)
    if problems:
        raise McpConfigError("; ".join(f"{field}: {message}" for field, message in problems))
    return from_table(server.name, to_table(server))


def _servers(root: Any, new_table: tomlfile.TableFactory, path: Path, create: bool) -> Any:
    """The ``mcp.servers`` table of ``root`` (made when ``create``), or None."""
    mcp = root.get("mcp")
    if mcp is None:
        if not create:
            return None
        root["mcp"] = new_table(root, True)
        mcp = root["mcp"]
    if not isinstance(mcp, MutableMapping):
        raise SettingsFileError(path, None, "mcp must be a table ([mcp]) to save MCP servers "
                                            "into it; fix or remove it")
    servers = mcp.get("servers")
    if servers is None:
        if not create:
            return None
        mcp["servers"] = new_table(mcp, True)
        servers = mcp["servers"]
    if not isinstance(servers, MutableMapping):
        raise SettingsFileError(path, None, "mcp.servers must be a table ([mcp.servers.<name>])"
                                            "; fix or remove it")
    return servers


def _unwrap(value: Any) -> Any:
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if unwrap else value


def _fill(table: Any, wanted: dict[str, object], toml: bool) -> None:
    """Make ``table`` say ``wanted``: changed keys set, others removed; the rest untouched."""
    for key in [k for k in table if k not in wanted]:
        del table[key]
    for key, value in wanted.items():
        if key in table and _unwrap(table[key]) == value:
            continue
        if key in _INLINE and toml:
            inline = tomlkit.inline_table()
            inline.update(value)  # type: ignore[call-overload]
            table[key] = inline
        else:
            table[key] = value


_FIELDS = ("transport", "command", "args", "env", "url", "headers", "enabled", "agents")


def _merge(saved: McpServer, base: McpServer | None, table: Any) -> McpServer:
    """``saved`` where the user changed a field since ``base`` (what the window loaded), the
    file's value elsewhere: a key edited by hand meanwhile is kept."""
    if base is None or not isinstance(table, MutableMapping):
        return saved
    try:
        current = from_table(saved.name, _unwrap(table))
    except McpConfigError:  # broken by hand: the form's whole value repairs it
        return saved
    changed = {f: getattr(saved, f) for f in _FIELDS if getattr(saved, f) != getattr(base, f)}
    return dataclasses.replace(current, name=saved.name, **changed)


def save_server(server: McpServer, replace: str | None = None,
                path: Path | None = None, *, base: McpServer | None = None) -> McpServer:
    """Write ``server``: a new one (``replace`` None), or instead of the server ``replace``
    (renamed when the names differ, in its place in the file when they do not). With ``base``
    (the server as the window loaded it) only the fields changed since are written. Returns
    the server as saved. McpConfigError: invalid, or its name is taken; SettingsFileError: the
    file is broken (nothing written in either case)."""
    validate_server(server)
    path = path or settings_path()
    merged: list[McpServer] = []

    def change(root: Any, new_table: tomlfile.TableFactory) -> bool:
        servers = _servers(root, new_table, path, create=True)
        if server.name != replace and server.name in servers:
            raise McpConfigError(f"name: a server named {server.name!r} already exists")
        if not merged:  # decided once, on the file's data; the same edit is then made twice
            merged.append(validate_server(_merge(
                server, base, servers.get(replace) if replace is not None else None)))
        saved = merged[0]
        if replace is not None and replace != saved.name:
            servers.pop(replace, None)
        toml = isinstance(root, tomlkit.TOMLDocument)
        table = servers.get(saved.name)
        if not isinstance(table, MutableMapping):
            servers[saved.name] = new_table(servers, False)
            table = servers[saved.name]
        _fill(table, to_table(saved), toml)
        return True

    tomlfile.edit(path, change)
    return merged[0] if merged else validate_server(server)


def remove_server(name: str, path: Path | None = None) -> bool:
    """Remove ``[mcp.servers.<name>]``; False when it was not there. SettingsFileError: the
    file is broken (nothing written)."""
    path = path or settings_path()

    def change(root: Any, new_table: tomlfile.TableFactory) -> bool:
        servers = _servers(root, new_table, path, create=False)
        if servers is None or name not in servers:
            return False
        del servers[name]
        # No empty tables left behind (an empty [mcp.servers] would not even be written).
        if not servers:
            del root["mcp"]["servers"]
            if not root["mcp"]:
                del root["mcp"]
        return True

    return tomlfile.edit(path, change)


def set_on_failure(value: str, path: Path | None = None) -> bool:
    """Set ``[mcp] on_failure``: what a run does when one of its servers cannot start."""
    if value not in ON_FAILURE:
        raise McpConfigError(f"on_failure: must be {' or '.join(repr(v) for v in ON_FAILURE)}")
    path = path or settings_path()

    def change(root: Any, new_table: tomlfile.TableFactory) -> bool:
        mcp = root.get("mcp")
        if mcp is None:
            root["mcp"] = new_table(root, False)
            mcp = root["mcp"]
        if not isinstance(mcp, MutableMapping):
            raise SettingsFileError(path, None, "mcp must be a table ([mcp]); fix or remove it")
        if mcp.get("on_failure") == value:
            return False
        mcp["on_failure"] = value
        return True

    return tomlfile.edit(path, change)
