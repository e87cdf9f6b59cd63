"""Which process is an MCP server Tolaria passed to an agent (ADR 0019): a kept agent's Stop
spares its servers, even one that left the agent's process group (daemonized)."""

from __future__ import annotations

from tolaria.core.mcp.forms import SERVER_MARKER
from tolaria.core.process import backend


def mcp_server_top(pid: int) -> bool:
    """Whether ``pid`` is an MCP server Tolaria passed to the agent: it carries
    ``TOLARIA_MCP_SERVER`` (forms.SERVER_MARKER, in the generated config) and its parent does
    not (the server's own children, a tool call's processes, carry it too)."""
    be = backend.current()
    env = be.environ(pid)
    if env is None or not _has(env, SERVER_MARKER):
        return False
    info = be.info(pid)
    parent = be.environ(info.ppid) if info is not None else None
    return parent is None or not _has(parent, SERVER_MARKER)


def _has(environ: bytes, name: str) -> bool:
    return (b"\0" + environ).find(b"\0" + name.encode() + b"=") >= 0
