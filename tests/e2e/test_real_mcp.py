"""MCP servers of Tolaria's settings reach the real CLIs in their own form (ADR 0019).

The test server (tests/fakes/mcp_probe_server.py, written with the MCP SDK) has one tool that
writes a marker file and sleeps. The fake model calls it (``E2E-MCP-MARK`` / ``E2E-MCP-SLEEP``):
the marker proves the tool ran through the agent, and carries the run's stream id (the marker
Tolaria put into the server's own environment). A Stop during the tool leaves nothing (the
server included); a kept agent keeps its server over a Stop, and closing the chat ends it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from pathlib import Path

import psutil
import pytest
from e2e.clis import run_env
from e2e.e2ehelpers import TURN_S, installed_cli, manifest
from e2e.fake_model import MCP_TOOL, FakeModelServer
from helpers import Collector, async_test, marker_pids, pid_gone, wait_until

from tolaria.core.events import Diagnostic, Done, ToolDone, ToolStart
from tolaria.core.mcp.servers import HTTP, NOTE, McpServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.keeper import KeeperPool, close_kept
from tolaria.core.turns.mcp_setup import run_folder
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PROBE = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_probe_server.py")
AGENTS = ["claude", "codex"]
#: The same through ACP (session/new mcpServers).
ACP_AGENTS = ["claude-acp"]
STOP_S = 8.0


def probe(marker: Path, name: str = "probe", *extra: str) -> McpServer:
    return McpServer(name, command=sys.executable, args=(PROBE, *extra),
                     env=(("TOLARIA_TEST_MCP_MARKER", str(marker)),))


def marks(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class McpTurn:
    def __init__(self, agent: str, server: FakeModelServer, tmp: Path) -> None:
        self.cli = installed_cli(agent)
        self.manifest = manifest(agent)
        self.server = server
        self.env = run_env(self.cli, tmp / "home", server.url)
        # Claude defers MCP tools behind its ToolSearch tool, which the scripted model does not
        # use: offered directly, the model calls the tool at once.
        self.env["ENABLE_TOOL_SEARCH"] = "false"
        if agent == "qwen":  # likewise, in the user's own settings of the throwaway HOME
            (tmp / "home" / ".qwen").mkdir(exist_ok=True)
            (tmp / "home" / ".qwen" / "settings.json").write_text(
                json.dumps({"tools": {"toolSearch": {"enabled": False}}}))
        self.home = tmp / "home"
        self.cwd = tmp / "work"
        self.cwd.mkdir()
        self.marker = tmp / "marker.jsonl"
        self.registry = ProcessRegistry()
        self.stream_id = new_stream_id()
        self.events = Collector()

    def request(self, prompt: str, servers: tuple[McpServer, ...], **kw: object) -> RunRequest:
        return RunRequest(self.manifest, prompt, str(self.cwd), self.env, permission_mode="full",
                          mcp_servers=servers, **kw)  # type: ignore[arg-type]

    def start(self, prompt: str, servers: tuple[McpServer, ...]) -> asyncio.Task[Done]:
        return asyncio.ensure_future(stream_ai_agent(
            self.request(prompt, servers), self.stream_id, self.events, registry=self.registry))

    def explain(self) -> str:
        return "\n".join(repr(e)[:300] for e in self.events.events[-25:])

    def offered(self, since: int) -> set[str]:
        """The tool names the CLI offered the model (Codex: namespace::tool)."""
        names: set[str] = set()
        for seen in self.server.seen[since:]:
            for tool in seen.body.get("tools", []):
                if tool.get("type") == "namespace":
                    names.update(f"{tool['name']}::{t['name']}" for t in tool.get("tools", []))
                elif "name" in tool:
                    names.add(tool["name"])
        return names


async def assert_the_tool_runs_through(turn: McpTurn) -> None:
    done = await asyncio.wait_for(turn.start("E2E-MCP-MARK: call the probe",
                                             (probe(turn.marker),)), TURN_S)
    assert done.stop_reason == "end_turn", turn.explain()
    found = marks(turn.marker)
    assert found, f"the probe's tool never ran\n{turn.explain()}"
    # The run's marker reached the server through the generated configuration.
    assert found[0]["stream_id"] == turn.stream_id
    starts = [e for e in turn.events.events if isinstance(e, ToolStart)]
    # The card names the server: "probe · mark_and_sleep".
    assert any(e.server == "probe" and e.name == f"probe · {MCP_TOOL}" for e in starts), (
        turn.explain())
    dones = [e for e in turn.events.events if isinstance(e, ToolDone)]
    assert any("probe marked" in e.output for e in dones), turn.explain()
    assert not Path(run_folder(turn.stream_id)).exists(), "the private MCP files outlived the run"
    assert not marker_pids(turn.stream_id)
    assert pid_gone(int(str(found[0]["pid"])))


@pytest.mark.parametrize("agent", AGENTS + ACP_AGENTS)
@async_test
async def test_mcp_tool_runs_through_the_agent(agent: str, model_server: FakeModelServer,
                                               tmp_path: Path) -> None:
    await assert_the_tool_runs_through(McpTurn(agent, model_server, tmp_path))


@pytest.mark.parametrize("agent", ["gemini", "qwen", "opencode"])
@async_test
async def test_settings_file_forms_pass_the_server(agent: str, model_server: FakeModelServer,
                                                   tmp_path: Path) -> None:
    """Gemini: a private home; Qwen: a system-defaults settings file; opencode: its config
    content. Tolaria's data folder stays under /tmp (where the tests keep it): Gemini's checks
    of a system settings file's folders do not apply to its home."""
    await assert_the_tool_runs_through(McpTurn(agent, model_server, tmp_path))


@pytest.mark.usefixtures("process_backend")
@pytest.mark.parametrize("agent", AGENTS + ACP_AGENTS)
@async_test
async def test_stop_during_the_mcp_tool_leaves_nothing(agent: str, model_server: FakeModelServer,
                                                       tmp_path: Path) -> None:
    turn = McpTurn(agent, model_server, tmp_path)
    task = turn.start("E2E-MCP-SLEEP: call the slow probe", (probe(turn.marker),))
    await wait_until(lambda: marks(turn.marker) or task.done(), TURN_S, "the probe's tool")
    assert not task.done(), turn.explain()
    server = psutil.Process(int(str(marks(turn.marker)[0]["pid"])))
    assert server.pid in marker_pids(turn.stream_id), "the server carries the run's marker"
    t0 = time.monotonic()
    assert turn.registry.abort(turn.stream_id)
    done = await asyncio.wait_for(task, STOP_S)
    assert time.monotonic() - t0 < STOP_S
    assert done.stop_reason == "cancelled", turn.explain()
    assert not done.survivors, done.survivors
    assert pid_gone(server.pid), "the MCP server outlived the stop"
    assert not marker_pids(turn.stream_id)


@pytest.mark.parametrize("agent", ["claude", *ACP_AGENTS])
@async_test
async def test_a_kept_agent_keeps_its_server_over_a_stop_and_deleting_the_chat_ends_it(
        agent: str, model_server: FakeModelServer, tmp_path: Path) -> None:
    turn = McpTurn(agent, model_server, tmp_path)
    pool, key = KeeperPool(), "conversation-mcp"
    servers = (probe(turn.marker),)

    async def one(prompt: str, stop: bool = False) -> Done:
        sid, events = new_stream_id(), Collector()
        task = asyncio.ensure_future(stream_ai_agent(
            turn.request(prompt, servers, keep_key=key), sid, events, registry=turn.registry,
            keepers=pool))
        if stop:
            count = len(marks(turn.marker))
            await wait_until(lambda: len(marks(turn.marker)) > count or task.done(), TURN_S,
                             "the probe's tool")
            assert not task.done(), events.events[-10:]
            assert turn.registry.abort(sid)
            return await asyncio.wait_for(task, 15)
        return await asyncio.wait_for(task, TURN_S)

    kept_sid = None
    try:
        done = await one("E2E-MCP-MARK: call the probe")
        assert done.stop_reason == "end_turn"
        kept_sid = pool.stream_id(key)
        server_pid = int(str(marks(turn.marker)[0]["pid"]))
        assert marks(turn.marker)[0]["stream_id"] == kept_sid, "the keeper's marker, not a turn's"
        done = await one("E2E-MCP-SLEEP: call the slow probe", stop=True)
        assert done.stop_reason == "cancelled"
        assert not done.survivors
        assert pool.stream_id(key) == kept_sid, "the agent answered the stop and is kept"
        assert psutil.pid_exists(server_pid) and not pid_gone(server_pid), (
            "the kept agent's MCP server was ended by a stop that kept the agent")
        assert kept_sid is not None
        # Claude's --mcp-config file lives as long as the kept agent (ACP: no file).
        assert Path(run_folder(kept_sid)).exists() == (agent == "claude")
    finally:
        await close_kept(key, pool)  # what deleting the chat does
        await pool.close_all()
    assert kept_sid is not None
    assert pid_gone(server_pid), "deleting the chat left its MCP server running"
    assert not marker_pids(kept_sid)
    assert not Path(run_folder(kept_sid)).exists()


@async_test
async def test_the_users_own_servers_keep_working_alongside(model_server: FakeModelServer,
                                                            tmp_path: Path) -> None:
    """A server in the user's own ~/.claude.json is offered next to Tolaria's (the file is not
    touched)."""
    turn = McpTurn("claude", model_server, tmp_path)
    own = {"mcpServers": {"own": {"type": "stdio", "command": sys.executable, "args": [PROBE],
                                  "env": {"TOLARIA_TEST_MCP_MARKER": str(tmp_path / "own")}}}}
    config = turn.home / ".claude.json"
    config.write_text(json.dumps(own))
    before = config.read_text()
    since = len(model_server.seen)
    done = await asyncio.wait_for(turn.start("E2E-TEXT: hello", (probe(turn.marker),)), TURN_S)
    assert done.stop_reason == "end_turn", turn.explain()
    offered = turn.offered(since)
    assert {f"mcp__own__{MCP_TOOL}", f"mcp__probe__{MCP_TOOL}"} <= offered, offered
    assert json.loads(config.read_text())["mcpServers"] == json.loads(before)["mcpServers"]
    assert not marker_pids(turn.stream_id)


def _refusing_url() -> str:
    with socket.socket() as sock:  # a port nobody listens on once this is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize("agent", AGENTS)
@async_test
async def test_broken_servers_do_not_hang_the_run(agent: str, model_server: FakeModelServer,
                                                  tmp_path: Path) -> None:
    """A server that hangs at initialize, one that exits at once, one that prints garbage and a
    URL that refuses: the run still answers with the good server, and ends in bounded time."""
    turn = McpTurn(agent, model_server, tmp_path)
    servers = (probe(tmp_path / "hang", "hang", "--hang-at-initialize"),
               probe(tmp_path / "exit", "quits", "--exit"),
               probe(tmp_path / "garbage", "garbage", "--garbage"),
               McpServer("refused", transport=HTTP, url=_refusing_url()),
               probe(turn.marker))
    t0 = time.monotonic()
    done = await asyncio.wait_for(turn.start("E2E-MCP-MARK: call the probe", servers), TURN_S)
    took = time.monotonic() - t0
    assert done.stop_reason == "end_turn", turn.explain()
    assert marks(turn.marker), f"the good server's tool did not run\n{turn.explain()}"
    assert took < 75, f"the broken servers held the run for {took:.0f} s"
    assert not marker_pids(turn.stream_id), "a broken server outlived the run"
    said = "\n".join(e.message for e in turn.events.events if isinstance(e, Diagnostic))
    print(f"{agent}: {took:.1f} s; said:\n{said}")
    if agent == "claude":  # its init names the servers it could not connect to
        assert "'quits'" in said and "'refused'" in said, said


@async_test
async def test_a_missing_command_is_said_and_the_run_goes_on(model_server: FakeModelServer,
                                                             tmp_path: Path) -> None:
    turn = McpTurn("claude", model_server, tmp_path)
    missing = McpServer("ghost", command="tolaria-no-such-mcp-server")
    done = await asyncio.wait_for(turn.start("E2E-MCP-MARK: call the probe",
                                             (missing, probe(turn.marker))), TURN_S)
    assert done.stop_reason == "end_turn", turn.explain()
    notes = [e.message for e in turn.events.events
             if isinstance(e, Diagnostic) and e.source == NOTE]
    assert any("'ghost'" in n and "not found" in n for n in notes), notes
    assert marks(turn.marker)


@async_test
async def test_a_name_in_both_places_runs_tolarias_server(model_server: FakeModelServer,
                                                          tmp_path: Path) -> None:
    """The precedence docs/SETTINGS.md states for Claude: --mcp-config over ~/.claude.json."""
    turn = McpTurn("claude", model_server, tmp_path)
    theirs = tmp_path / "theirs.jsonl"
    (turn.home / ".claude.json").write_text(json.dumps({"mcpServers": {"probe": {
        "type": "stdio", "command": sys.executable, "args": [PROBE],
        "env": {"TOLARIA_TEST_MCP_MARKER": str(theirs)}}}}))
    done = await asyncio.wait_for(turn.start("E2E-MCP-MARK: call the probe",
                                             (probe(turn.marker),)), TURN_S)
    assert done.stop_reason == "end_turn", turn.explain()
    assert marks(turn.marker) and not marks(theirs)
