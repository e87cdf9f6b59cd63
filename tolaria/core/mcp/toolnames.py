"""MCP tools in the transcript: a tool card names the server the tool comes from.

Each CLI spells an MCP tool its own way: Claude Code (and Claude through ACP)
``mcp__<server>__<tool>``, Codex an ``mcp_tool_call`` item with ``server`` and ``tool``, Gemini
and Qwen ``mcp_<server>_<tool>``, opencode ``<server>_<tool>``. The runtimes turn them
into one ``ToolStart`` with ``server`` set and ``name`` = ``"<server> · <tool>"``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tolaria.core.events import ToolStart

_PREFIX = "mcp__"
SEPARATOR = " · "


def display(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


def split_prefixed(name: str) -> tuple[str, str] | None:
    """(server, tool) of ``mcp__<server>__<tool>``, else None."""
    if not name.startswith(_PREFIX):
        return None
    server, sep, tool = name[len(_PREFIX):].partition("__")
    return (server, tool) if sep and server and tool else None


def tool_start(stream_id: str, tool_id: str, name: str, tool_input: Any,
               server: str = "") -> ToolStart:
    """The ``ToolStart`` of a tool call named ``name`` (``server``: when the CLI says it apart)."""
    if server:
        tool = name.removeprefix(f"{server}__") or name
        return ToolStart(stream_id, tool_id=tool_id, name=display(server, tool),
                         input=tool_input, server=server)
    split = split_prefixed(name)
    if split is None:
        return ToolStart(stream_id, tool_id=tool_id, name=name, input=tool_input)
    return ToolStart(stream_id, tool_id=tool_id, name=display(*split), input=tool_input,
                     server=split[0])


def with_server(event: ToolStart, servers: tuple[str, ...], *, bare: bool = False) -> ToolStart:
    """``event`` with its server named when the CLI's spelling is only clear once the run's
    server names are known (Gemini and Qwen: ``mcp_<server>_<tool>``, opencode
    ``<server>_<tool>``: only with ``bare``, since another CLI's own tool may start so, Gemini's
    ``web_fetch`` with a server "web"; server names may hold ``_``); unchanged otherwise."""
    if event.server or not servers:
        return event
    for server in sorted(servers, key=len, reverse=True):
        for prefix in (f"mcp_{server}_", f"{server}__", *([f"{server}_"] if bare else [])):
            if event.name.startswith(prefix) and len(event.name) > len(prefix):
                return replace(event, name=display(server, event.name[len(prefix):]),
                               server=server)
    return event
