"""A kept agent process per conversation (ADR 0009) with the real programs: Claude Code in its
stream-json input mode, and the ACP agents (claude-agent-acp, ``gemini --acp``, ``qwen --acp``,
``opencode acp``). Turns run on the same agent
process; Stop during ``sleep 300`` is answered by the agent itself (interrupt / session/cancel):
the turn ends ``cancelled``, the ``sleep`` is gone, the agent stays alive and the next turn runs on
it; closing the conversation leaves nothing.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psutil
import pytest
from e2e.clis import run_env
from e2e.e2ehelpers import TURN_S, installed_cli, manifest, sleep_pids
from e2e.fake_model import TEXT_REPLY, FakeModelServer
from helpers import Collector, async_test, marker_pids, pid_gone, wait_until

from tolaria.core.events import Done
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.keeper import KeeperPool
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

#: adapter id -> the pinned CLIs it needs
AGENTS = {"claude": ("claude",), "claude-acp": ("claude-acp", "claude"),
          "gemini-acp": ("gemini",), "qwen-acp": ("qwen",), "opencode-acp": ("opencode",)}
KEY = "conversation-e2e"


@pytest.mark.usefixtures("process_backend")  # both stop engines
@pytest.mark.parametrize("agent", list(AGENTS))
@async_test
async def test_kept_agent_survives_a_stop_and_serves_the_next_turn(
        agent: str, model_server: FakeModelServer, tmp_path: Path) -> None:
    cli = installed_cli(AGENTS[agent][0])
    for extra in AGENTS[agent][1:]:
        installed_cli(extra)
    m = manifest(agent)
    env = run_env(cli, tmp_path / "home", model_server.url)
    cwd = tmp_path / "work"
    cwd.mkdir()
    registry, pool = ProcessRegistry(), KeeperPool()

    def kept() -> str:
        """The kept agent's own stream id: its processes (tools included) carry it."""
        return pool.stream_id(KEY) or "ai-agent-stream-" + "0" * 32

    async def turn(prompt: str, stop: bool = False) -> tuple[Done, Collector, float]:
        sid, events = new_stream_id(), Collector()
        request = RunRequest(m, prompt, str(cwd), env, permission_mode="full", keep_key=KEY)
        task = asyncio.ensure_future(stream_ai_agent(request, sid, events, registry=registry,
                                                     keepers=pool))
        took = 0.0
        if stop:
            await wait_until(lambda: sleep_pids(kept()) or task.done(), TURN_S, "the tool's sleep")
            assert not task.done(), events.events[-10:]
            sleeper = psutil.Process(sleep_pids(kept())[0])
            t0 = time.monotonic()
            assert registry.abort(sid)
            done = await asyncio.wait_for(task, 15)
            took = time.monotonic() - t0
            await wait_until(lambda: pid_gone(sleeper.pid), 5, "the sleep to go")
        else:
            done = await asyncio.wait_for(task, TURN_S)
        return done, events, took

    try:
        done, events, _ = await turn("E2E-TEXT: say hello")
        assert done.stop_reason == "end_turn", events.events[-10:]
        assert TEXT_REPLY in events.text()
        agent_pid = pool.pid(KEY)
        assert agent_pid is not None

        done, events, took = await turn("E2E-SLEEP: run the slow command", stop=True)
        assert done.stop_reason == "cancelled", events.events[-10:]
        assert not done.survivors
        assert took < 5, f"stop took {took:.1f} s"
        assert pool.pid(KEY) == agent_pid, "the agent answered the stop and is kept alive"
        assert psutil.pid_exists(agent_pid)

        done, events, _ = await turn("E2E-TEXT: still there?")
        assert done.stop_reason == "end_turn", events.events[-10:]
        assert pool.pid(KEY) == agent_pid, "the next turn ran on the same agent process"
    finally:
        kept_sid = pool.stream_id(KEY)
        await pool.close_all()
    assert kept_sid is None or not marker_pids(kept_sid)
    assert pool.pid(KEY) is None
