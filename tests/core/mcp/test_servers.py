"""The shared model of an MCP server entry: parsed from its settings table, written back,
and every bad entry refused with a message that names the server and the key."""

from __future__ import annotations

from pathlib import Path

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


def test_the_settings_file_lists_good_servers_and_names_the_broken_ones(tmp_path: Path) -> None:
    from tolaria.config.mcp import REFUSE, load_mcp
    from tolaria.config.settings import load_settings

    path = tmp_path / "settings.toml"
    path.write_text('[mcp]\non_failure = "refuse"\n\n'
                    '[mcp.servers.git]\ncommand = "uvx"\nargs = ["mcp-server-git"]\n\n'
                    '[mcp.servers.broken]\ntransport = "sse"\n\n'
                    '[mcp.servers.web]\ntransport = "http"\nurl = "http://127.0.0.1:9/mcp"\n'
                    'agents = ["codex"]\n')
    found = load_mcp(path)
    assert [s.name for s in found.servers] == ["git", "web"]
    assert found.on_failure == REFUSE
    assert [s.name for s in found.for_agent("claude")] == ["git"]
    assert len(found.problems) == 1
    assert f"{path}:8: MCP server 'broken'" in found.problems[0]
    assert "needs an http:// or https:// url; left out" in found.problems[0]
    # The rest of the settings does not call [mcp] an unknown table.
    assert load_settings(path)[1] == []


def test_a_settings_file_that_does_not_parse_gives_no_servers_and_says_why(
        tmp_path: Path) -> None:
    from tolaria.config.mcp import load_mcp

    path = tmp_path / "settings.toml"
    path.write_text("[mcp.servers.git\n")
    found = load_mcp(path)
    assert found.servers == ()
    assert "no MCP servers are used" in found.problems[0]
