"""One MCP server as the user lists it once for every agent: the shared model of the settings
(``[mcp.servers.<name>]`` in settings.toml, tolaria/config), Preferences' Test and the run-time
forms each agent takes.

A server is either a local program spoken to over stdio (``command``, ``args``, ``env``) or a
remote endpoint (``url``, ``headers``) over streamable HTTP (``http``) or SSE (``sse``). Values of
``env`` and ``headers`` may reference ``${VAR}`` (read from Tolaria's environment when a run or a
Test starts, so a secret need not sit in the file). ``agents`` empty means every agent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

STDIO, HTTP, SSE = "stdio", "http", "sse"
#: ``Diagnostic.source`` of what a run says about its MCP servers (left out, failed to start):
#: a note the window shows in the turn (ui NOTICE_SOURCE) and ``tolaria run`` prints.
NOTE = "notice"
TRANSPORTS = (STDIO, HTTP, SSE)

#: A server's name: a key in every CLI's own format (Codex's ``-c mcp_servers.<name>``, Claude's
#: JSON, tool names like ``mcp__<name>__<tool>``), so letters, digits, ``_`` and ``-`` only.
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


#: How long Preferences' Test waits for a server's answers (core/mcp/servertest.py).
DEFAULT_TEST_TIMEOUT_S = 20.0

class McpConfigError(ValueError):
    """A server entry that cannot be used, said specifically (which server, which key, why)."""


@dataclass(frozen=True)
class McpServer:
    name: str
    transport: str = STDIO
    #: stdio: the program and its arguments (an argv: never through a shell).
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    #: http / sse: the endpoint and extra request headers.
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    enabled: bool = True
    #: The agent ids that get this server; empty: every agent.
    agents: tuple[str, ...] = field(default=())

    def for_agent(self, agent_id: str) -> bool:
        return self.enabled and (not self.agents or agent_id in self.agents)

    @property
    def remote(self) -> bool:
        return self.transport in (HTTP, SSE)


def expand(value: str, environ: Mapping[str, str]) -> str:
    """``value`` with each ``${VAR}`` replaced from ``environ``; McpConfigError names a missing
    variable (a server started without its token would fail later and less clearly)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise McpConfigError(f"${{{name}}} is not set in Tolaria's environment")
        return environ[name]

    return _REFERENCE.sub(one, value)


def _pairs(name: str, key: str, value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise McpConfigError(f"MCP server {name!r}: {key} must be a table of strings")
    out = []
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str) or not k:
            raise McpConfigError(f"MCP server {name!r}: {key}.{k} must be a string")
        out.append((k, v))
    return tuple(out)


def _strings(name: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise McpConfigError(f"MCP server {name!r}: {key} must be a list of strings")
    return tuple(value)


def from_table(name: str, table: Mapping[str, object]) -> McpServer:
    """The server of one ``[mcp.servers.<name>]`` table; McpConfigError says what is wrong."""
    if not NAME_RE.match(name):
        raise McpConfigError(f"MCP server name {name!r}: use 1-64 letters, digits, '_' or '-'")
    transport = table.get("transport", STDIO)
    if transport not in TRANSPORTS:
        raise McpConfigError(f"MCP server {name!r}: transport must be one of "
                             f"{', '.join(TRANSPORTS)} (not {transport!r})")
    known = {"transport", "command", "args", "env", "url", "headers", "enabled", "agents"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise McpConfigError(f"MCP server {name!r}: unknown key {unknown[0]!r}")
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise McpConfigError(f"MCP server {name!r}: enabled must be true or false")
    command = table.get("command", "")
    url = table.get("url", "")
    if not isinstance(command, str) or not isinstance(url, str):
        raise McpConfigError(f"MCP server {name!r}: command and url must be strings")
    server = McpServer(
        name=name, transport=str(transport), command=command.strip(),
        args=_strings(name, "args", table.get("args", [])),
        env=_pairs(name, "env", table.get("env", {})), url=url.strip(),
        headers=_pairs(name, "headers", table.get("headers", {})), enabled=enabled,
        agents=_strings(name, "agents", table.get("agents", [])))
    if server.transport == STDIO and not server.command:
        raise McpConfigError(f"MCP server {name!r}: a stdio server needs a command")
    if server.remote and not re.match(r"^https?://[^\s/]+", server.url):
        raise McpConfigError(f"MCP server {name!r}: a {server.transport} server needs an "
                             "http:// or https:// url")
    return server


def to_table(server: McpServer) -> dict[str, object]:
    """The ``[mcp.servers.<name>]`` table of ``server`` (only what is set, for a tidy file)."""
    table: dict[str, object] = {"transport": server.transport}
    if server.transport == STDIO:
        table["command"] = server.command
        if server.args:
            table["args"] = list(server.args)
        if server.env:
            table["env"] = dict(server.env)
    else:
        table["url"] = server.url
        if server.headers:
            table["headers"] = dict(server.headers)
    if not server.enabled:
        table["enabled"] = False
    if server.agents:
        table["agents"] = list(server.agents)
    return table
