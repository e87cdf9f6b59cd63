"""Each agent's MCP form (ADR 0019): what ``plan`` passes and says, what ``launch`` renders
(read back with the parser the CLI itself would use: JSON, TOML), and that the private files are
private and go with ``close``."""

from __future__ import annotations

import dataclasses
import json
import stat
import sys
import tomllib
from pathlib import Path

import pytest

from tolaria.core.adapters.manifest import (
    ManifestError,
    build_argv,
    load_adapters,
    parse_manifest,
)
from tolaria.core.adapters.mcp_spec import McpSpec
from tolaria.core.mcp.forms import acp_servers, launch, plan
from tolaria.core.mcp.servers import HTTP, SSE, McpServer
from tolaria.core.mcp.toolnames import split_prefixed, tool_start, with_server

MARKER = {"TOLARIA_STREAM_ID": "ai-agent-stream-" + "1" * 32, "TOLARIA_OWNER": "owner-1"}
ENV = {"PATH": str(Path(sys.executable).parent), "GIT_TOKEN": "s3cret"}
PY = sys.executable


def adapter(agent: str):  # type: ignore[no-untyped-def]
    adapters = load_adapters()
    return adapters.get(agent)


def stdio(name: str = "git", **kw: object) -> McpServer:
    fields: dict[str, object] = {"command": PY, "args": ("-m", "server", "{prompt}"),
                                 "env": (("TOKEN", "${GIT_TOKEN}"),)}
    fields.update(kw)
    return McpServer(name, **fields)  # type: ignore[arg-type]


def test_every_builtin_cli_takes_servers_in_its_own_form() -> None:
    forms = {a: adapter(a).mcp.form for a in
             ("claude", "codex", "gemini", "qwen", "opencode", "claude-acp", "gemini-acp")}
    assert forms == {"claude": "claude-json", "codex": "codex-config",
                     "gemini": "gemini-settings", "qwen": "gemini-settings",
                     "opencode": "opencode-config", "claude-acp": "acp", "gemini-acp": "acp"}
    assert adapter("aider").mcp.form == "none"


def test_plan_says_why_each_server_is_left_out() -> None:
    codex = adapter("codex")
    servers = (stdio(), stdio("ghost", command="tolaria-no-such-program"),
               stdio("tokenless", env=(("T", "${TOLARIA_UNSET_VAR}"),)),
               McpServer("events", transport=SSE, url="http://127.0.0.1:1/sse"),
               stdio("only-claude", agents=("claude",)), stdio("off", enabled=False))
    result = plan(codex, servers, ENV)
    assert [s.name for s in result.passed] == ["git"]
    assert result.passed[0].env == (("TOKEN", "s3cret"),)  # ${VAR} expanded at run time
    why = dict(result.left_out)
    assert set(why) == {"ghost", "tokenless", "events"}  # not for codex / disabled: not listed
    assert set(result.broken) == {"ghost", "tokenless"}  # "events": codex cannot take it
    assert "not found" in why["ghost"]
    assert "TOLARIA_UNSET_VAR" in why["tokenless"]
    assert "stdio and http" in why["events"] and "sse" in why["events"]
    notes = result.notes(codex.name)
    assert notes[0].startswith("MCP server 'ghost' is not passed to Codex:")


def test_an_agent_without_a_form_gets_none_and_says_so() -> None:
    aider = adapter("aider")
    result = plan(aider, (stdio(),), ENV)
    assert not result.passed
    assert "cannot be given MCP servers by Tolaria" in result.left_out[0][1]
    assert result.broken == ()  # said, never a reason to refuse a run of this agent


def test_claude_gets_a_private_file_with_the_marker(tmp_path: Path) -> None:
    claude = adapter("claude")
    passed = plan(claude, (stdio(), McpServer("web", transport=HTTP, url="https://x.test/mcp",
                                              headers=(("Authorization", "Bearer t"),))),
                  ENV).passed
    out = launch(claude, passed, MARKER, mode="full", folder=tmp_path / "mcp" / "run",
                 environ=ENV)
    try:
        assert out.args[0].startswith("--mcp-config=")
        path = Path(out.args[0].split("=", 1)[1])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        data = json.loads(path.read_text())["mcpServers"]
        assert data["git"]["env"] == {"TOKEN": "s3cret", **MARKER, "TOLARIA_MCP_SERVER": "git"}
        assert data["git"]["args"] == ["-m", "server", "{prompt}"]
        assert data["web"] == {"type": "http", "url": "https://x.test/mcp",
                               "headers": {"Authorization": "Bearer t"}}
        assert out.args[1] == "--allowedTools=mcp__git,mcp__web"  # "full": allowed
        # The file's arguments are never filled in: "{prompt}" stays as the user wrote it.
        argv = build_argv(claude, prompt="P", extra=out.args)
        assert argv[-2:] == list(out.args)
    finally:
        out.close()
    assert not path.parent.exists()
    safe = launch(claude, passed, MARKER, mode="safe", folder=tmp_path / "mcp" / "r2",
                  environ=ENV)
    assert len(safe.args) == 1  # "safe": the agent's own permission rules apply
    safe.close()


def test_codex_overrides_parse_as_toml_and_keep_secrets_off_the_command_line(
        tmp_path: Path) -> None:
    codex = adapter("codex")
    odd = stdio("odd", args=('quote " and \\ backslash', "ünï"), env=(("TOKEN", "other"),))
    web = McpServer("web", transport=HTTP, url="https://x.test/mcp",
                    headers=(("Authorization", "Bearer t"),))
    passed = plan(codex, (stdio(), odd, web), ENV).passed
    out = launch(codex, passed, MARKER, mode="full", folder=tmp_path / "x", environ=ENV)
    assert out.folder is None  # nothing written
    pairs = [out.args[i + 1] for i in range(0, len(out.args), 2)]
    assert all(out.args[i] == "-c" for i in range(0, len(out.args), 2))
    tables = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        tables[key] = tomllib.loads(f"v = {value}")["v"]
    assert tables["mcp_optional_startup_grace_ms"] == 10_000
    git = tables["mcp_servers.git"]
    assert git["command"] == PY and git["args"] == ["-m", "server", "{prompt}"]
    assert git["env_vars"] == ["TOLARIA_STREAM_ID", "TOLARIA_OWNER", "TOKEN"]
    assert "s3cret" not in " ".join(out.args)
    assert out.env["TOKEN"] == "s3cret" and out.env["TOLARIA_STREAM_ID"] == MARKER[
        "TOLARIA_STREAM_ID"]
    # The same variable with another value for a second server: inline for that one.
    assert tables["mcp_servers.odd"]["env"] == {"TOLARIA_MCP_SERVER": "odd", "TOKEN": "other"}
    assert tables["mcp_servers.git"]["env"] == {"TOLARIA_MCP_SERVER": "git"}
    assert tables["mcp_servers.odd"]["args"] == ['quote " and \\ backslash', "ünï"]
    header_var = tables["mcp_servers.web"]["env_http_headers"]["Authorization"]
    assert out.env[header_var] == "Bearer t"


@pytest.mark.parametrize(("agent", "variable", "on_host"), [
    ("qwen", "QWEN_CODE_SYSTEM_DEFAULTS_PATH", False),
    # Gemini locally: a private home (test_private_home.py); on a host this file is sent.
    ("gemini", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH", True)])
def test_gemini_settings_file_keeps_the_defaults_it_replaces(tmp_path: Path, agent: str,
                                                             variable: str, on_host: bool) -> None:
    gemini = adapter(agent)
    theirs = tmp_path / "system-defaults.json"
    theirs.write_text(json.dumps({"general": {"vimMode": True},
                                  "mcpServers": {"git": {"command": "their-git"}}}))
    environ = {**ENV, variable: str(theirs)}
    servers = (stdio(), stdio("other"), McpServer("h", transport=HTTP, url="http://127.0.0.1/m"))
    passed = plan(gemini, servers, environ).passed
    out = launch(gemini, passed, MARKER, mode="full", folder=tmp_path / "g", environ=environ,
                 on_host=on_host)
    assert set(out.env) == {variable}
    data = json.loads(Path(out.env[variable]).read_text())
    assert data["general"] == {"vimMode": True}
    assert data["mcpServers"]["git"] == {"command": "their-git"}  # theirs wins a name clash
    assert data["mcpServers"]["other"]["env"]["TOLARIA_STREAM_ID"] == MARKER["TOLARIA_STREAM_ID"]
    assert data["mcpServers"]["other"]["trust"] is True
    assert data["mcpServers"]["h"]["httpUrl"] == "http://127.0.0.1/m"
    out.close()
    assert json.loads(theirs.read_text())["mcpServers"] == {"git": {"command": "their-git"}}


def test_opencode_gets_inline_config_merged_with_the_users() -> None:
    opencode = adapter("opencode")
    environ = {**ENV, "OPENCODE_CONFIG_CONTENT": json.dumps({"model": "x/y", "mcp": {
        "mine": {"type": "remote", "url": "https://m"}}})}
    out = launch(opencode, plan(opencode, (stdio(),), environ).passed, MARKER, mode="safe",
                 folder=Path("/nonexistent/never-written"), environ=environ)
    data = json.loads(out.env["OPENCODE_CONFIG_CONTENT"])
    assert data["model"] == "x/y" and set(data["mcp"]) == {"mine", "git"}
    assert data["mcp"]["git"]["command"] == [PY, "-m", "server", "{prompt}"]
    assert data["mcp"]["git"]["environment"]["TOLARIA_OWNER"] == "owner-1"


def test_acp_entries_follow_the_agents_capabilities() -> None:
    servers = (stdio(env=(("A", "1"),)), McpServer("h", transport=HTTP, url="http://h"),
               McpServer("s", transport=SSE, url="http://s"))
    entries, left = acp_servers(servers, MARKER, http=True, sse=False)
    assert [e["name"] for e in entries] == ["git", "h"]
    assert {"name": "TOLARIA_STREAM_ID", "value": MARKER["TOLARIA_STREAM_ID"]} in entries[0]["env"]
    assert left == [("s", "the agent does not support sse MCP servers (its mcpCapabilities)")]
    from acp.schema import HttpMcpServer, McpServerStdio

    McpServerStdio.model_validate(entries[0])
    HttpMcpServer.model_validate(entries[1])


@pytest.mark.parametrize(("table", "key"), [
    ({"form": "yaml"}, "mcp.form"), ({"transports": ["ftp"]}, "mcp.transports"),
    ({"form": "gemini-settings"}, "mcp.settings_env"), ({"colour": 1}, "mcp.colour"),
    ({"form": "claude-json", "settings_env": "X"}, "mcp.settings_env"),
    ({"form": "claude-json", "home_env": "X"}, "mcp.home_env"),
    ({"form": "gemini-settings", "settings_env": "X", "home_env": "no such"}, "mcp.home_env"),
])
def test_a_broken_mcp_table_names_its_key(table: dict[str, object], key: str) -> None:
    data = {"id": "x", "protocol": "lines", "command": ["x"], "mcp": table}
    with pytest.raises(ManifestError) as info:
        parse_manifest(data)
    assert info.value.key == key


def test_an_acp_manifest_takes_servers_without_a_table() -> None:
    m = parse_manifest({"id": "a", "protocol": "acp", "command": ["a"]})
    assert m.mcp.form == "acp" and set(m.mcp.transports) == {"stdio", "http", "sse"}
    assert dataclasses.replace(m, mcp=McpSpec()).mcp.takes_servers is False


def test_mcp_tool_names_show_their_server() -> None:
    assert split_prefixed("mcp__probe__mark_and_sleep") == ("probe", "mark_and_sleep")
    assert split_prefixed("mcp__broken") is None and split_prefixed("Bash") is None
    start = tool_start("sid", "t1", "mcp__git__log", {"n": 1})
    assert (start.name, start.server) == ("git · log", "git")
    assert tool_start("sid", "t2", "Bash", {}).server == ""
    codexish = tool_start("sid", "t3", "log", {}, server="git")
    assert codexish.name == "git · log"
    gemini = with_server(tool_start("sid", "t4", "mcp_my_git_log_all", {}), ("my", "my_git"))
    assert (gemini.name, gemini.server) == ("my_git · log_all", "my_git")
    assert with_server(tool_start("sid", "t5", "read_file", {}), ("git",)).server == ""
    # A bare <server>_<tool> (opencode) only where the CLI spells it so: not Gemini's web_fetch.
    assert with_server(tool_start("sid", "t6", "web_fetch", {}), ("web",)).server == ""
    assert with_server(tool_start("sid", "t7", "web_get", {}), ("web",), bare=True).server == "web"
