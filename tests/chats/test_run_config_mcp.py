"""The MCP servers of settings.toml reach a run's request (ADR 0019): read when the run is
prepared (window and ``tolaria run`` alike), only those meant for the agent, with on_failure."""

from __future__ import annotations

from pathlib import Path

from tolaria.chats.run_config import RunConfig, prepare_run
from tolaria.config.mcp import McpSettings
from tolaria.config.settings import Settings, settings_path
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.mcp.servers import McpServer


def _write(text: str) -> Path:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_run_takes_the_servers_meant_for_its_agent(tolaria_home: Path) -> None:
    _write('[mcp]\non_failure = "refuse"\n'
           '[mcp.servers.git]\ncommand = "uvx"\nargs = ["mcp-server-git"]\n'
           '[mcp.servers.codex-only]\ncommand = "x"\nagents = ["codex"]\n'
           '[mcp.servers.off]\ncommand = "x"\nenabled = false\n'
           '[mcp.servers.broken]\ntransport = "ftp"\n')
    claude = load_adapters().get("claude")
    options = prepare_run(claude)
    request = options.request("hi")
    assert [s.name for s in request.mcp_servers] == ["git"]
    assert request.mcp_servers[0].args == ("mcp-server-git",)
    assert request.mcp_on_failure == "refuse"
    assert any("broken" in w for w in options.warnings), options.warnings
    codex = prepare_run(load_adapters().get("codex")).request("hi")
    assert [s.name for s in codex.mcp_servers] == ["git", "codex-only"]


def test_the_window_reads_what_is_saved_now_unless_given(tolaria_home: Path) -> None:
    claude = load_adapters().get("claude")
    config = RunConfig(settings=Settings())
    assert config.configure(claude).request("hi").mcp_servers == ()
    _write('[mcp.servers.later]\ncommand = "x"\n')
    assert [s.name for s in config.configure(claude).request("hi").mcp_servers] == ["later"]
    given = RunConfig(settings=Settings(), mcp=McpSettings((McpServer("mine", command="y"),)))
    assert [s.name for s in given.configure(claude).request("hi").mcp_servers] == ["mine"]
