"""Kept ACP agents: one agent process per conversation (docs/adr/0008, issue 8 items 1 and 4).

Drives tests/fakes/fake_acp_agent.py (JSON-RPC on stdio, its tool a ``sleep 300`` in a new
session): turns share one process and one session; an answered ``session/cancel`` keeps the
agent; an unanswered one kills the tree, and the next turn loads the session in a new process.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from helpers import async_test, is_gone, marker_pids, wait_pidfile, wait_until
from keepers import chat

from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.events import Init, ToolDone, Usage

pytest.importorskip("acp")

FAKE_ACP = Path(__file__).resolve().parents[3] / "fakes" / "fake_acp_agent.py"


def acp(mode: str = "normal", window_ms: int = 1000) -> Manifest:
    return Manifest(id="fake-acp", name="Fake ACP", protocol="acp",
                    command=(sys.executable, str(FAKE_ACP), mode),
                    stop=StopPolicy(polite_window_ms=window_ms))


def requests(tmp_path: Path) -> list[tuple[int, str]]:
    lines = (tmp_path / "acp.jsonl").read_text().splitlines()
    return [(entry["pid"], entry["method"]) for entry in map(json.loads, lines)]


@async_test
async def test_turns_share_one_agent_and_one_session(tmp_path: Path) -> None:
    async with chat(acp(), tmp_path) as c:
        first, events1 = await c.turn("one")
        pid = c.pid()
        second, events2 = await c.turn("two")
        assert first.stop_reason == second.stop_reason == "end_turn"
        assert c.pid() == pid
        assert events2.text().endswith("from the fake agent: two")
        assert "one" not in events2.text()
        # initialize and session/new once per process; a prompt per turn.
        assert requests(tmp_path) == [(pid, "initialize"), (pid, "session/new"),
                                      (pid, "session/prompt"), (pid, "session/prompt")]
        for events in (events1, events2):
            init, = events.of("init")
            assert isinstance(init, Init) and init.session_id == "fake-acp-session"


@async_test
async def test_each_turn_stores_its_share_of_the_sessions_running_cost(tmp_path: Path) -> None:
    # The agent reports 0.5, then 1.0, then 1.5 (the session's total): each turn costs 0.5.
    async with chat(acp(), tmp_path) as c:
        costs = []
        for prompt in ("one", "two", "three"):
            _, events = await c.turn(prompt)
            costs.append([u.cost_usd for u in events.of("usage")
                          if isinstance(u, Usage) and u.cost_usd is not None])
        assert costs == [[0.5], [0.5], [0.5]]


@async_test
async def test_answered_cancel_keeps_the_agent_for_the_next_turn(tmp_path: Path) -> None:
    async with chat(acp(), tmp_path) as c:
        sid, collector, task = c.start("SLEEP please")
        tool, = await wait_pidfile(tmp_path / "pids")
        await wait_until(lambda: "tool_start" in collector.kinds(), what="the tool")
        agent = c.pid()
        assert c.registry.abort(sid)
        done = await asyncio.wait_for(task, 10)
        assert done.stop_reason == "cancelled" and done.survivors == ()
        assert is_gone(tool), "session/cancel ends the tool"
        assert c.pid() == agent, "the agent stays alive"
        tool_done, = collector.of("tool_done")
        assert isinstance(tool_done, ToolDone) and tool_done.is_error
        assert not [d for d in collector.of("diagnostic") if "did not end the turn" in str(d)]
        nxt, events = await c.turn("next")
        assert nxt.stop_reason == "end_turn" and c.pid() == agent
        assert "from the fake agent: next" in events.text()
        assert [m for _, m in requests(tmp_path)].count("initialize") == 1


@async_test
async def test_unanswered_cancel_kills_the_tree_and_the_next_turn_loads_the_session(
        tmp_path: Path) -> None:
    async with chat(acp(window_ms=300), tmp_path) as c:
        sid, collector, task = c.start("DEAF")
        tool, = await wait_pidfile(tmp_path / "pids")
        await wait_until(lambda: "tool_start" in collector.kinds(), what="the tool")
        agent, marker = c.pid(), c.pool.stream_id(c.key)
        assert marker is not None
        assert c.registry.abort(sid)
        done = await asyncio.wait_for(task, 10)
        assert done.stop_reason == "cancelled" and done.survivors == ()
        assert any("did not end the turn within 300 ms of session/cancel" in str(d)
                   for d in collector.of("diagnostic"))
        assert is_gone(tool) and marker_pids(marker) == []
        assert c.pool.get(c.key) is None
        nxt, events = await c.turn("after the kill")
        assert nxt.stop_reason == "end_turn"
        new = c.pid()
        assert new != agent
        assert [m for p, m in requests(tmp_path) if p == new] == [
            "initialize", "session/load", "session/prompt"]
        assert "OLD ANSWER" not in events.text()  # the replayed history is not news
        assert events.of("init")[0] == Init(events.events[0].stream_id, agent="fake-acp",
                                            session_id="fake-acp-session")


@async_test
async def test_close_ends_the_agent_and_everything_with_its_marker(tmp_path: Path) -> None:
    async with chat(acp(), tmp_path) as c:
        await c.turn("hello")
        marker, agent = c.pool.stream_id(c.key), c.pid()
        assert marker is not None and marker_pids(marker) == [agent]
        await c.pool.close(c.key)
        assert marker_pids(marker) == [] and c.pool.get(c.key) is None


@async_test
async def test_stop_before_initialize_never_keeps_an_unready_agent(tmp_path: Path) -> None:
    async with chat(acp("hang_init", window_ms=200), tmp_path) as c:
        sid, collector, task = c.start("hello")
        await wait_until(lambda: c.pool.get(c.key) is not None, what="the spawn")
        marker = c.pool.stream_id(c.key)
        assert marker is not None
        await wait_until(lambda: any("starting very slowly" in str(d)
                                     for d in collector.of("diagnostic")), what="stderr")
        assert c.registry.abort(sid)
        done = await asyncio.wait_for(task, 10)
        assert done.stop_reason == "cancelled"
        assert c.pool.get(c.key) is None and marker_pids(marker) == []
