"""A kept agent's MCP servers belong to the kept process, not to a turn (ADR 0019, ADR 0009).

tests/fakes/fake_claude_stream.py starts the servers of Tolaria's generated ``--mcp-config``
as Claude does (cleaned environment). The server here is the adversarial one: it daemonizes
(leaves the agent's process group and session) and ignores SIGTERM. A turn's end and a Stop
that keeps the agent keep the server while the turn's own tool dies; closing the chat (and so
quit) ends the server, and its private configuration goes with it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import psutil
import pytest
from helpers import Collector, async_test, is_gone, marker_pids, wait_until
from keepers import Chat

from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.adapters.mcp_spec import McpSpec
from tolaria.core.events import Done
from tolaria.core.mcp.servers import McpServer
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.keeper import KeeperPool
from tolaria.core.turns.mcp_setup import run_folder
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

FAKES = Path(__file__).resolve().parents[2] / "fakes"
PROBE = FAKES / "mcp_probe_server.py"


def claude() -> Manifest:
    """tests/fakes/fake_claude_stream.py, kept (interrupt), taking a --mcp-config file."""
    return Manifest(id="fake-claude-stream", name="Fake Claude (stream input)",
                    protocol="claude-stream-json", input="claude-stream-json",
                    command=(sys.executable, str(FAKES / "fake_claude_stream.py")),
                    stop=StopPolicy(polite="interrupt", polite_window_ms=400),
                    mcp=McpSpec(form="claude-json"))


@pytest.mark.usefixtures("process_backend")
@async_test
async def test_a_kept_agents_daemonized_server_lives_until_the_chat_closes(
        tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.json"
    manifest = claude()
    pool = KeeperPool()
    chat = Chat(manifest, tmp_path, pool)
    server = McpServer("daemon", command=sys.executable, args=(str(PROBE), "--daemon"),
                       env=(("TOLARIA_TEST_MCP_DAEMON", str(pidfile)),))
    daemon = None
    keeper_sid = None
    try:
        # The first turn starts the agent, and so its server; Stop while the turn's tool runs
        # and the server has left the agent's group: the tool dies, the server stays.
        sid, _, task = _start(chat, "RUN_SLEEP now", server)
        await wait_until(lambda: (tmp_path / "pids").exists() or task.done(), 15, "the tool")
        await wait_until(pidfile.exists, 15, "the daemonized MCP server")
        data = json.loads(pidfile.read_text())
        daemon = psutil.Process(data["pid"])
        keeper_sid = pool.stream_id(chat.key)
        assert data["environ"]["TOLARIA_STREAM_ID"] == keeper_sid
        assert daemon.pid in marker_pids(keeper_sid or "")
        assert os.getpgid(daemon.pid) != os.getpgid(chat.pid()), "it left the agent's group"
        tool = int((tmp_path / "pids").read_text().split()[-1])
        assert chat.registry.abort(sid)
        done = await task
        assert done.stop_reason == "cancelled" and not done.survivors
        await wait_until(lambda: not psutil.pid_exists(tool) or is_gone(psutil.Process(tool)),
                         5, "the turn's tool to go")
        assert pool.stream_id(chat.key) == keeper_sid, "the agent answered and is kept"
        assert not is_gone(daemon), "a Stop that kept the agent ended its MCP server"
        # The next turn runs on the same agent, with the same server.
        done = await asyncio.wait_for(_start(chat, "hello", server)[2], 15)
        assert done.stop_reason == "end_turn"
        assert pool.stream_id(chat.key) == keeper_sid and not is_gone(daemon)
        assert Path(run_folder(keeper_sid or "")).is_dir()
    finally:
        await pool.close_all()
    assert daemon is not None and is_gone(daemon), "closing the chat left its MCP server"
    assert not marker_pids(keeper_sid or "")
    assert not Path(run_folder(keeper_sid or "")).exists()


def _start(chat: Chat, prompt: str, server: McpServer
           ) -> tuple[str, Collector, asyncio.Task[Done]]:
    sid, collector = new_stream_id(), Collector()
    request = RunRequest(chat.manifest, prompt, str(chat.tmp_path), chat.env, keep_key=chat.key,
                         mcp_servers=(server,))
    task = asyncio.ensure_future(stream_ai_agent(request, sid, collector, registry=chat.registry,
                                                 grace_s=0.5, keepers=chat.pool))
    return sid, collector, task

