"""The shared model of an MCP server entry: parsed from its settings table, written back,
and every bad entry refused with a message that names the server and the key."""

from __future__ import annotations

import pytest

from tolaria.core.mcp.servers import (
    HTTP,
    STDIO,
    McpConfigError,
    McpServer,
    expand,
    from_table,
    to_table,
)


def test_a_stdio_server_round_trips_through_its_table() -> None:
    table = {"transport": "stdio", "command": "uvx", "args": ["mcp-server-git", "--repo", "."],
             "env": {"GIT_TOKEN": "${MY_TOKEN}"}, "agents": ["claude", "codex"]}
    server = from_table("git", table)
    assert server == McpServer("git", STDIO, "uvx", ("mcp-server-git", "--repo", "."),
                               (("GIT_TOKEN", "${MY_TOKEN}"),), agents=("claude", "codex"))
    assert to_table(server) == table
    assert server.for_agent("claude")
    assert not server.for_agent("gemini")


def test_a_remote_server_defaults_to_every_agent_and_a_disabled_one_to_none() -> None:
    server = from_table("docs", {"transport": "http", "url": "https://example.test/mcp",
                                 "headers": {"Authorization": "Bearer ${T}"}})
    assert server.remote
    assert server.transport == HTTP
    assert server.for_agent("anything")
    off = from_table("docs", {"transport": "http", "url": "http://127.0.0.1:9/mcp",
                              "enabled": False})
    assert not off.for_agent("claude")
    assert to_table(off)["enabled"] is False


@pytest.mark.parametrize(("name", "table", "words"), [
    ("bad name", {"command": "x"}, "use 1-64 letters"),
    ("s", {"transport": "websocket", "url": "ws://x"}, "transport must be one of"),
    ("s", {"transport": "stdio"}, "needs a command"),
    ("s", {"transport": "sse", "url": "ftp://x"}, "http:// or https://"),
    ("s", {"command": "x", "args": "--flag"}, "args must be a list"),
    ("s", {"command": "x", "env": {"A": 1}}, "env.A must be a string"),
    ("s", {"command": "x", "enabled": "yes"}, "enabled must be true or false"),
    ("s", {"command": "x", "colour": "red"}, "unknown key 'colour'"),
])
def test_a_bad_entry_is_refused_naming_the_server_and_the_key(
        name: str, table: dict[str, object], words: str) -> None:
    with pytest.raises(McpConfigError, match=words):
        from_table(name, table)


def test_references_expand_from_the_environment_and_a_missing_one_is_named() -> None:
    assert expand("Bearer ${TOKEN}/${TOKEN}", {"TOKEN": "abc"}) == "Bearer abc/abc"
    assert expand("$HOME stays", {}) == "$HOME stays"
    with pytest.raises(McpConfigError, match=r"\$\{NOPE\} is not set"):
        expand("x${NOPE}", {})
