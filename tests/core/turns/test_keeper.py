"""Kept Claude processes: one stream-json process per conversation (docs/adr/0008).

Drives tests/fakes/fake_claude_stream.py (a real process replaying the real capture, its tool a
``sleep 300`` in its own session) through several turns on one process, Stop with an answered
and an unanswered interrupt, leftovers of a turn, close and the idle timeout. Every test closes
its keepers, so the leak fixture still finds no process behind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

import psutil
import pytest
from helpers import Collector, async_test, is_gone, marker_pids, pid_gone, wait_pidfile, wait_until
from keepers import chat

from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.events import Diagnostic, Error, Init, Usage
from tolaria.core.process import proctree
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.keeper import (
    KeeperPool,
    close_all_kept,
    close_kept,
    default_keepers,
    keepable,
)
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

FAKE = Path(__file__).resolve().parents[2] / "fakes" / "fake_claude_stream.py"
SESSION = "f01a032f-daed-4fdc-bf93-95fc1f53f8d3"
KEY = "conversation-1"


def claude(*flags: str, window_ms: int = 400, polite: str = "interrupt") -> Manifest:
    return Manifest(id="fake-claude-stream", name="Fake Claude (stream input)",
                    protocol="claude-stream-json", input="claude-stream-json",
                    command=(sys.executable, str(FAKE), *flags),
                    stop=StopPolicy(polite=polite, polite_window_ms=window_ms),
                    resume=("--resume", "{session_id}"))


def test_only_agents_that_can_end_a_turn_alive_are_kept() -> None:
    assert keepable(claude())
    assert not keepable(claude(polite="sigint"))
    acp = Manifest(id="a", name="a", protocol="acp", command=("x",))
    assert keepable(acp)
    assert not keepable(Manifest(id="c", name="c", protocol="claude-stream-json",
                                 command=("claude", "{prompt}")))


@async_test
async def test_two_turns_reuse_the_same_process_and_report_their_own_cost(tmp_path: Path) -> None:
    async with chat(claude(), tmp_path) as c:
        first, events1 = await c.turn("hello")
        pid = c.pid()
        second, events2 = await c.turn("again")
        assert first.stop_reason == second.stop_reason == "end_turn"
        assert c.pid() == pid, "the second turn must run in the same process"
        assert events1.text() == "You said: hello" and events2.text() == "You said: again"
        assert first.exit_code is None and second.exit_code is None  # still running
        # Cumulative in the process (0.00056, 0.00112): each turn reports its own share.
        # The last Usage is the turn's total (those before it: per API message, no cost).
        cost1 = [e.cost_usd for e in events1.events if isinstance(e, Usage)][-1]
        cost2 = [e.cost_usd for e in events2.events if isinstance(e, Usage)][-1]
        assert cost1 == pytest.approx(0.00056) and cost2 == pytest.approx(0.00056)
        assert [json.loads(line)["type"] for line in
                (tmp_path / "stdin.jsonl").read_text().splitlines()] == ["user", "user"]
        assert "--resume" not in c.argv()
        assert c.pool.session_id(c.key) == SESSION
        assert c.marked() == [pid]
    assert psutil.pid_exists(pid) is False or is_gone(psutil.Process(pid))


@async_test
async def test_stop_during_a_tool_cancels_the_turn_and_keeps_the_process(tmp_path: Path) -> None:
    async with chat(claude(window_ms=2000), tmp_path) as c:
        sid, collector, task = c.start("RUN_SLEEP")
        agent, tool = await wait_pidfile(tmp_path / "pids")
        await wait_until(lambda: "tool_start" in collector.kinds(), what="the tool")
        assert agent.pid == c.pid()
        assert c.registry.abort(sid)
        done = await asyncio.wait_for(task, 10)
        assert done.stop_reason == "cancelled" and done.survivors == ()
        assert collector.text() == "I'll run it."
        assert is_gone(tool), "the tool must be gone"
        assert not is_gone(agent) and c.pid() == agent.pid, "the agent stays for the next turn"
        assert not [d for d in collector.of("diagnostic") if "interrupt" in str(d)]
        assert marker_pids(sid) == [] and not c.registry.abort(sid)
        nxt, events = await c.turn("and now?")
        assert nxt.stop_reason == "end_turn" and events.text() == "You said: and now?"
        assert c.pid() == agent.pid
        written = [json.loads(line)["type"] for line in
                   (tmp_path / "stdin.jsonl").read_text().splitlines()]
        assert written == ["user", "control_request", "user"]


@async_test
async def test_ignored_interrupt_kills_the_tree_and_the_next_turn_resumes(tmp_path: Path) -> None:
    async with chat(claude("--ignore-interrupt", "--ignore-sigint", window_ms=200),
                    tmp_path) as c:
        sid, collector, task = c.start("RUN_SLEEP")
        agent, tool = await wait_pidfile(tmp_path / "pids")
        await wait_until(lambda: "tool_start" in collector.kinds(), what="the tool")
        old_marker = c.pool.stream_id(c.key)
        assert old_marker is not None
        assert c.registry.abort(sid)
        done = await asyncio.wait_for(task, 10)
        assert done.stop_reason == "cancelled" and done.survivors == ()
        assert is_gone(agent) and is_gone(tool)
        assert marker_pids(old_marker) == [], "the keeper's whole tree is gone"
        assert c.pool.get(c.key) is None
        assert c.pool.session_id(c.key) == SESSION  # remembered for the next process
        nxt, events = await c.turn("hello again")
        assert nxt.stop_reason == "end_turn"
        assert c.pid() != agent.pid
        assert c.argv()[-2:] == ["--resume", SESSION]
        assert events.of("init")[0] == Init(events.events[0].stream_id,
                                            agent="fake-claude-stream", session_id=SESSION)


@async_test
async def test_close_kills_the_whole_tree_with_the_keepers_marker(tmp_path: Path) -> None:
    async with chat(claude(), tmp_path) as c:
        await c.turn("START_HELPER")  # a helper in the agent's own group stays with the agent
        agent, helper = await wait_pidfile(tmp_path / "pids")
        marker = c.pool.stream_id(c.key)
        assert marker is not None and sorted(marker_pids(marker)) == sorted([agent.pid, helper.pid])
        assert await c.pool.close(c.key) == []
        assert marker_pids(marker) == []
        assert is_gone(agent) and is_gone(helper)
        assert c.pool.get(c.key) is None and c.pool.session_id(c.key) is None
        assert proctree.kept_count() == 0


@async_test
async def test_a_tool_left_running_by_a_turn_ends_with_the_turn(tmp_path: Path) -> None:
    """ADR 0002: a run owns everything it started, even when the agent process is kept."""
    async with chat(claude(), tmp_path) as c:
        done, _ = await c.turn("RUN_BG")
        agent, background = await wait_pidfile(tmp_path / "pids")
        assert done.stop_reason == "end_turn"
        assert is_gone(background), "the turn's background tool must end with the turn"
        assert not is_gone(agent) and c.marked() == [agent.pid]


@async_test
async def test_idle_keeper_is_closed_after_the_timeout(tmp_path: Path) -> None:
    async with chat(claude(), tmp_path, idle_timeout_s=0.3) as c:
        await c.turn("hello")
        agent = psutil.Process(c.pid())
        marker = c.pool.stream_id(c.key)
        assert marker is not None
        await wait_until(lambda: c.pool.get(c.key) is None, within=5, what="the idle close")
        await wait_until(lambda: is_gone(agent) and not marker_pids(marker), within=5,
                         what="the idle keeper's tree to end")
        done, _ = await c.turn("later")  # a fresh process, continuing the session
        assert done.stop_reason == "end_turn" and c.pid() != agent.pid
        assert c.argv()[-2:] == ["--resume", SESSION]


@async_test
async def test_another_folder_or_agent_gets_a_fresh_process(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    async with chat(claude(), tmp_path) as c:
        await c.turn("hello")
        first = c.pid()
        await c.turn("elsewhere", cwd=other)
        second = c.pid()
        assert second != first and pid_gone(first)
        await c.turn("new agent", manifest=claude(window_ms=999))
        assert c.pid() != second and pid_gone(second)


@async_test
async def test_a_kept_process_starts_with_its_permission_mode_and_a_new_mode_replaces_it(
        tmp_path: Path) -> None:
    """A kept agent gets the mode's flags and variables like a one-shot run ("safe" Claude:
    no shell even where the user's own settings allow it); Preferences switching the mode
    gives the next turn a fresh process, never the old one with the old rights."""
    manifest = dataclasses.replace(
        claude(), permissions="safe",
        permission_args={"safe": ("--disallowedTools", "Bash"), "full": ("--allowedTools", "Bash")},
        permission_env={"safe": {"FAKE_MODE": "safe"}, "full": {"FAKE_MODE": "full"}})
    async with chat(manifest, tmp_path) as c:
        done, _ = await c.turn("hello")
        assert done.stop_reason == "end_turn"
        safe = c.pid()
        assert c.argv()[-2:] == ["--disallowedTools", "Bash"]
        assert psutil.Process(safe).environ()["FAKE_MODE"] == "safe"
        await c.turn("again", permission_mode="safe")
        assert c.pid() == safe, "the same mode keeps the process"
        done, _ = await c.turn("now with a shell", permission_mode="full")
        assert done.stop_reason == "end_turn"
        assert c.pid() != safe and pid_gone(safe)
        assert c.argv()[-2:] == ["--allowedTools", "Bash"]
        assert "--disallowedTools" not in c.argv()
        assert psutil.Process(c.pid()).environ()["FAKE_MODE"] == "full"


@async_test
async def test_without_a_keep_key_the_process_is_per_turn(tmp_path: Path) -> None:
    pool = KeeperPool()
    request = RunRequest(claude(), "hello", str(tmp_path), {"FAKE_LOG": str(tmp_path)})
    done = await stream_ai_agent(request, new_stream_id(), Collector(), registry=ProcessRegistry(),
                                 keepers=pool)
    assert done.stop_reason == "end_turn" and done.exit_code == 0
    assert pool.keys() == []


@async_test
async def test_a_crashed_keeper_is_replaced_on_the_next_turn(tmp_path: Path) -> None:
    async with chat(claude(), tmp_path) as c:
        await c.turn("hello")
        agent = psutil.Process(c.pid())
        agent.kill()
        await wait_until(lambda: c.pool.get(c.key) is None, within=5, what="the keeper to go")
        done, _ = await c.turn("still there?")
        assert done.stop_reason == "end_turn" and c.pid() != agent.pid
        assert c.argv()[-2:] == ["--resume", SESSION]


@async_test
async def test_stop_as_a_turn_starts_keeps_the_agent(tmp_path: Path) -> None:
    async with chat(claude(), tmp_path) as c:
        await c.turn("hello")
        agent = c.pid()
        sid, collector, task = c.start("RUN_SLEEP")
        await asyncio.sleep(0)
        assert c.registry.abort(sid)
        done = await asyncio.wait_for(task, 10)
        assert done.stop_reason == "cancelled" and collector.events[-1] is done
        assert c.pid() == agent
        nxt, events = await c.turn("next")
        assert nxt.stop_reason == "end_turn" and events.text() == "You said: next"
        assert c.pid() == agent


@async_test
async def test_agent_crashing_mid_turn_is_an_error_and_its_tree_is_ended(tmp_path: Path) -> None:
    async with chat(claude("--crash"), tmp_path) as c:
        done, collector = await c.turn("hello")
        assert done.stop_reason == "error" and done.exit_code == 3
        error, = collector.of("error")
        assert "exited with code 3 without a final result" in str(error)
        # Its tree was ended with the turn (the leak fixture also checks no process is left).
        assert c.pool.get(c.key) is None and proctree.kept_count() == 0


@async_test
async def test_the_default_pool_and_its_close_functions(tmp_path: Path) -> None:
    key = f"default-pool-{new_stream_id()}"
    request = RunRequest(claude(), "hello", str(tmp_path), keep_key=key)
    try:
        done = await stream_ai_agent(request, new_stream_id(), Collector(),
                                     registry=ProcessRegistry())
        assert done.stop_reason == "end_turn"
        marker = default_keepers().stream_id(key)
        assert marker is not None and marker_pids(marker)
        assert await close_kept(key) == []
        assert marker_pids(marker) == [] and default_keepers().get(key) is None
        assert await close_kept(key) == []  # nothing left: a no-op
    finally:
        await close_all_kept()


@async_test
async def test_retry_cut_off_applies_on_a_kept_process(tmp_path: Path) -> None:
    """A kept Claude that keeps retrying its model is cut off like a one-shot run: the turn ends
    ``error`` with the "could not reach the model" message; the agent answered the interrupt,
    so it stays kept for the next turn."""
    async with chat(claude(), tmp_path) as c:
        events = Collector()
        request = RunRequest(c.manifest, "RETRY_FOREVER", str(tmp_path), c.env, keep_key=c.key,
                             retry_limit_s=0.5)
        done = await asyncio.wait_for(stream_ai_agent(
            request, new_stream_id(), events, registry=c.registry, grace_s=0.5,
            keepers=c.pool), 15)
        assert done.stop_reason == "error", events.kinds()
        errors = [e for e in events.events if isinstance(e, Error)]
        assert errors and "could not reach the model" in errors[-1].message, errors
        assert errors[-1].category == "unreachable"
        assert any(isinstance(e, Diagnostic) and e.source == "retry" for e in events.events)
        pid = c.pid()
        done, _ = await c.turn("hello again")
        assert done.stop_reason == "end_turn" and c.pid() == pid
