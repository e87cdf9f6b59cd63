"""The MCP servers of one run, in the form its agent takes (ADR 0019).

``plan`` says per server whether it goes to the agent and, if not, why (Preferences shows it,
the chat says it at run start). ``launch`` turns the passed servers into what the agent's
process needs: extra arguments, extra environment and private files (mode 0600 in a 0700
folder of Tolaria's own, removed when the run or the kept agent ends). The user's own MCP
configuration files are never written: each CLI is pointed at Tolaria's servers in a way that
adds to its own (docs/SETTINGS.md: precedence).

Every stdio server gets the run's marker (``TOLARIA_STREAM_ID`` and ``TOLARIA_OWNER``) in its
own environment: the CLIs start MCP servers with a cleaned environment (the MCP SDKs keep only
HOME, PATH and a few more; Codex forwards a whitelist), and the stop and the crash watchdog find
a run's processes by that marker even when a server leaves the tree (setsid, double fork).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.adapters.mcp_spec import (
    ACP_FORM,
    CLAUDE_JSON,
    CODEX_CONFIG,
    GEMINI_SETTINGS,
    NONE,
    OPENCODE_CONFIG,
)
from tolaria.core.mcp import private_home
from tolaria.core.mcp.servers import HTTP, SSE, STDIO, McpConfigError, McpServer, expand
from tolaria.core.process.treefind import ENV_MARKER, OWNER_MARKER
from tolaria.support import paths

#: In each stdio server's env: its name. A kept agent's Stop spares the topmost process that
#: carries it (keeper.mcp_server_top) even when it left the agent's process group.
SERVER_MARKER = "TOLARIA_MCP_SERVER"
#: Permission mode in which the tools of the servers Tolaria passes are allowed without asking
#: (in "safe" the agent's own rules apply: it asks, or a headless agent refuses).
TRUSTING_MODE = "full"
#: Codex: how long its first model request waits for the servers to be ready.
CODEX_STARTUP_GRACE_MS = 10_000


@dataclass(frozen=True)
class McpPlan:
    """What one agent gets of the servers meant for it."""

    #: Passed, with ``${VAR}`` expanded (ready to render).
    passed: tuple[McpServer, ...] = ()
    #: (server name, why it is not passed).
    left_out: tuple[tuple[str, str], ...] = ()
    #: The left-out servers that are broken (``${VAR}`` unset, command missing), as opposed to
    #: ones this agent cannot take: only these make ``on_failure = "refuse"`` refuse the run.
    broken: tuple[str, ...] = ()

    def notes(self, agent: str) -> list[str]:
        """One sentence per server left out, for the chat and ``tolaria run``."""
        return [f"MCP server {name!r} is not passed to {agent}: {why}"
                for name, why in self.left_out]


def plan(manifest: Manifest, servers: Sequence[McpServer], environ: Mapping[str, str],
         *, check_commands: bool = True) -> McpPlan:
    """Which of ``servers`` ``manifest``'s agent gets, and why not for the others.

    ``environ``: the environment ``${VAR}`` is read from and whose PATH a stdio ``command``
    is looked up on (a missing program is said now, not as a server the CLI silently drops).
    """
    mine = [s for s in servers if s.for_agent(manifest.id)]
    if not manifest.mcp.takes_servers:
        why = f"{manifest.name} cannot be given MCP servers by Tolaria (its own MCP settings apply)"
        return McpPlan(left_out=tuple((s.name, why) for s in mine))
    passed: list[McpServer] = []
    left_out: list[tuple[str, str]] = []
    broken: list[str] = []
    for server in mine:
        if server.transport not in manifest.mcp.transports:
            left_out.append((server.name, f"{manifest.name} takes only "
                                          f"{' and '.join(manifest.mcp.transports)} servers, "
                                          f"this one is {server.transport}"))
            continue
        verdict = _why_not(server, environ, check_commands)
        if isinstance(verdict, str):
            left_out.append((server.name, verdict))
            broken.append(server.name)
        else:
            passed.append(verdict)
    return McpPlan(tuple(passed), tuple(left_out), tuple(broken))


def _why_not(server: McpServer, environ: Mapping[str, str],
             check_commands: bool) -> McpServer | str:
    """``server`` ready to pass (``${VAR}`` expanded), or why it cannot start."""
    try:
        resolved = replace(
            server, env=tuple((k, expand(v, environ)) for k, v in server.env),
            headers=tuple((k, expand(v, environ)) for k, v in server.headers),
            args=tuple(expand(a, environ) for a in server.args))
    except McpConfigError as exc:
        return str(exc)
    if server.transport == STDIO and check_commands and _program(server.command, environ) is None:
        return f"its command {server.command!r} is not found (PATH of the run)"
    return resolved


def _program(command: str, environ: Mapping[str, str]) -> str | None:
    command = os.path.expanduser(command)
    if os.sep in command or (os.altsep and os.altsep in command):
        return command if os.path.isfile(command) and os.access(command, os.X_OK) else None
    return shutil.which(command, path=environ.get("PATH", os.defpath))


def marker_of(env: Mapping[str, str]) -> dict[str, str]:
    """The run's marker variables out of the agent's environment (spawn.build_env)."""
    return {k: env[k] for k in (ENV_MARKER, OWNER_MARKER) if k in env}


@dataclass
class McpLaunch:
    """What one agent process needs for its servers; ``close`` removes the private files."""

    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    folder: Path | None = None
    #: Gemini's private home and the user's real home: what Gemini created in the first is
    #: moved into the second before the folder goes (private_home.sync_back).
    home: tuple[Path, Path] | None = None

    def close(self) -> None:
        if self.home is not None:
            private_home.sync_back(*self.home)
            self.home = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def launch(manifest: Manifest, servers: Sequence[McpServer], marker: Mapping[str, str], *,
           mode: str, folder: Path, environ: Mapping[str, str],
           on_host: bool = False) -> McpLaunch:
    """Render ``servers`` (passed by ``plan``) for ``manifest``'s agent. ``folder``: where a
    private file goes (created 0700 here when one is needed; removed by ``close``);
    ``environ``: the agent's environment (a settings file of the user's it names is kept);
    ``on_host``: for a run on a host (files only: no private home of links to this machine)."""
    form = manifest.mcp.form
    if not servers or form in (NONE, ACP_FORM):
        return McpLaunch()
    trusted = mode == TRUSTING_MODE
    if form == CODEX_CONFIG:
        return _codex(servers, marker)
    if form == OPENCODE_CONFIG:
        # Inline (opencode merges it over its global and OPENCODE_CONFIG files): the user's own
        # OPENCODE_CONFIG stays in force; one of their OPENCODE_CONFIG_CONTENT is merged in.
        base = _json_text(environ.get("OPENCODE_CONFIG_CONTENT", ""))
        entries = {s.name: _opencode_entry(s, marker) for s in servers}
        merged = {**base, "mcp": {**(base.get("mcp") or {}), **entries}}
        return McpLaunch(env={"OPENCODE_CONFIG_CONTENT": json.dumps(merged)})
    out = McpLaunch(folder=_private_folder(folder))
    try:
        if form == CLAUDE_JSON:
            path = _write(out.folder, "claude-mcp.json", {"mcpServers": {
                s.name: _claude_entry(s, marker) for s in servers}})
            out.args = (f"--mcp-config={path}",)
            if trusted:
                out.args += (f"--allowedTools={','.join('mcp__' + s.name for s in servers)}",)
        elif form == GEMINI_SETTINGS and manifest.mcp.home_env and not on_host and _gemini_home(
                out, manifest.mcp.home_env, servers, marker, trusted, environ):
            pass
        elif form == GEMINI_SETTINGS:
            variable = manifest.mcp.settings_env
            base = _json_file(environ.get(variable, ""))
            entries = {s.name: _gemini_entry(s, marker, trusted) for s in servers}
            merged = {**base, "mcpServers": {**entries, **(base.get("mcpServers") or {})}}
            out.env[variable] = str(_write(out.folder, "settings.json", merged))
    except BaseException:
        out.close()
        raise
    return out


def _gemini_home(out: McpLaunch, home_env: str, servers: Sequence[McpServer],
                 marker: Mapping[str, str], trusted: bool, environ: Mapping[str, str]) -> bool:
    """Gemini CLI: a private home whose settings.json is the user's plus Tolaria's servers
    (``home_env`` names it; private_home says why not a system settings layer). False where
    no symlink can be made (Windows without the right): the settings file form is used."""
    assert out.folder is not None
    real = private_home.real_home(environ, home_env)
    base = private_home.user_settings(real)
    merged = None
    if base is not None:
        entries = {s.name: _gemini_entry(s, marker, trusted) for s in servers}
        own = base.get("mcpServers")
        merged = {**base, "mcpServers": {**entries, **(own if isinstance(own, dict) else {})}}
    try:
        home = private_home.build(out.folder, real, merged)
    except (OSError, NotImplementedError):
        if not private_home.links_refused(out.folder):
            raise
        shutil.rmtree(out.folder / private_home.HOME, ignore_errors=True)
        return False
    out.home = (home, real)
    out.env[home_env] = str(home)
    return True


def _private_folder(folder: Path) -> Path:
    paths.private_dir(folder.parent)
    folder.mkdir(mode=0o700)
    return folder


def _write(folder: Path | None, name: str, data: object) -> Path:
    assert folder is not None
    path = folder / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1)
    return path


def _json_file(path: str) -> dict[str, Any]:
    """A settings file the CLI would read in our file's place (kept in ours), or {}."""
    if not path:
        return {}
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return _json_text(Path(path).read_text(encoding="utf-8"))
    return {}


def _json_text(text: str) -> dict[str, Any]:
    with contextlib.suppress(ValueError, RecursionError):
        data = json.loads(text) if text.strip() else {}
        if isinstance(data, dict):
            return data
    return {}


def _stdio_env(server: McpServer, marker: Mapping[str, str]) -> dict[str, str]:
    return {**dict(server.env), **marker, SERVER_MARKER: server.name}


def _claude_entry(server: McpServer, marker: Mapping[str, str]) -> dict[str, Any]:
    if server.transport == STDIO:
        return {"type": "stdio", "command": server.command, "args": list(server.args),
                "env": _stdio_env(server, marker)}
    return {"type": server.transport, "url": server.url, "headers": dict(server.headers)}


def _gemini_entry(server: McpServer, marker: Mapping[str, str], trusted: bool) -> dict[str, Any]:
    entry: dict[str, Any]
    if server.transport == STDIO:
        entry = {"command": server.command, "args": list(server.args),
                 "env": _stdio_env(server, marker)}
    else:
        entry = {"httpUrl" if server.transport == HTTP else "url": server.url,
                 "headers": dict(server.headers)}
    if trusted:
        entry["trust"] = True
    return entry


def _opencode_entry(server: McpServer, marker: Mapping[str, str]) -> dict[str, Any]:
    if server.transport == STDIO:
        return {"type": "local", "command": [server.command, *server.args],
                "environment": _stdio_env(server, marker), "enabled": True}
    return {"type": "remote", "url": server.url, "headers": dict(server.headers),
            "enabled": True}


# -- Codex: ``-c mcp_servers.<name>={...}`` (a TOML inline table per server) ---------------------

def _toml(value: object) -> str:
    if isinstance(value, str):
        # A JSON string without \\u escapes of non-ASCII text is a TOML basic string.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _codex(servers: Sequence[McpServer], marker: Mapping[str, str]) -> McpLaunch:
    """Values go through Codex's own environment where it can forward them by name
    (``env_vars``, ``env_http_headers``), so secrets stay out of the command line; a variable
    two servers need with different values is written inline for the second one."""
    out = McpLaunch(args=("-c", f"mcp_optional_startup_grace_ms={CODEX_STARTUP_GRACE_MS}"))
    out.env.update(marker)
    for server in servers:
        table: dict[str, object]
        if server.transport == STDIO:
            inline: dict[str, str] = {SERVER_MARKER: server.name}
            forwarded = list(marker)
            for key, value in server.env:
                if out.env.get(key, value) == value and key not in marker:
                    out.env[key] = value
                    forwarded.append(key)
                else:
                    inline[key] = value
            table = {"command": server.command, "args": list(server.args),
                     "env_vars": forwarded, "env": inline}
        else:
            headers: dict[str, str] = {}
            for i, (key, value) in enumerate(server.headers):
                variable = f"TOLARIA_MCP_{server.name.upper().replace('-', '_')}_HEADER_{i}"
                out.env[variable] = value
                headers[key] = variable
            table = {"url": server.url}
            if headers:
                table["env_http_headers"] = headers
        out.args += ("-c", f"mcp_servers.{server.name}={_toml(table)}")
    return out


# -- ACP: ``mcpServers`` of session/new and session/load -----------------------------------------

def acp_servers(servers: Sequence[McpServer], marker: Mapping[str, str], *, http: bool,
                sse: bool) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The ``mcpServers`` entries for an ACP agent whose ``mcpCapabilities`` say ``http`` and
    ``sse``; and (name, why) of the servers it cannot take."""
    entries: list[dict[str, Any]] = []
    left_out: list[tuple[str, str]] = []
    for server in servers:
        if server.transport == STDIO:
            entries.append({"name": server.name, "command": server.command,
                            "args": list(server.args),
                            "env": [{"name": k, "value": v}
                                    for k, v in _stdio_env(server, marker).items()]})
        elif (server.transport == HTTP and http) or (server.transport == SSE and sse):
            entries.append({"type": server.transport, "name": server.name, "url": server.url,
                            "headers": [{"name": k, "value": v} for k, v in server.headers]})
        else:
            left_out.append((server.name, f"the agent does not support {server.transport} MCP "
                                          "servers (its mcpCapabilities)"))
    return entries, left_out
