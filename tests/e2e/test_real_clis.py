"""Each real CLI, run through Tolaria's own built-in adapter, against the loopback fake model:
a text turn, a tool turn (``echo hi``), a Stop while its tool runs ``sleep 300`` (zero processes
of the run left, the ``sleep`` included), and a turn with an invalid key (a clear error).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import psutil
import pytest
from e2e.clis import run_env
from e2e.e2ehelpers import TURN_S, installed_cli, manifest, sleep_pids
from e2e.fake_model import ECHO_COMMAND, TEXT_REPLY, FakeModelServer
from helpers import Collector, async_test, marker_pids, pid_gone, wait_until

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import Done, Error, Init, ToolDone, ToolStart
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest, stream_ai_agent

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

AGENTS = ["claude", "codex", "gemini", "qwen", "opencode"]
#: Stop to ``done`` (the polite window, the grace period and the tree kill).
STOP_S = 6.0


def request(m: Manifest, prompt: str, cwd: Path, env: dict[str, str],
            mode: str = "full") -> RunRequest:
    return RunRequest(m, prompt, str(cwd), env, permission_mode=mode)


class Turn:
    def __init__(self, agent: str, server: FakeModelServer, tmp: Path, key: str | None = None):
        self.cli = installed_cli(agent)
        self.manifest = manifest(agent)
        self.server = server
        kwargs = {"key": key} if key else {}
        self.env = run_env(self.cli, tmp / "home", server.url, **kwargs)
        self.cwd = tmp / "work"
        self.cwd.mkdir()
        self.registry = ProcessRegistry()
        self.stream_id = new_stream_id()
        self.events = Collector()

    def start(self, prompt: str, mode: str = "full") -> asyncio.Task[Done]:
        return asyncio.ensure_future(stream_ai_agent(
            request(self.manifest, prompt, self.cwd, self.env, mode), self.stream_id, self.events,
            registry=self.registry))

    def errors(self) -> str:
        return "\n".join(e.message for e in self.events.events if isinstance(e, Error))

    def explain(self) -> str:
        return "\n".join(repr(e)[:300] for e in self.events.events[-25:])


@pytest.mark.parametrize("agent", AGENTS)
@async_test
async def test_text_turn(agent: str, model_server: FakeModelServer, tmp_path: Path) -> None:
    turn = Turn(agent, model_server, tmp_path)
    done = await asyncio.wait_for(turn.start("E2E-TEXT: say hello"), TURN_S)
    assert done.stop_reason == "end_turn", turn.explain()
    assert TEXT_REPLY in turn.events.text(), turn.explain()
    inits = [e for e in turn.events.events if isinstance(e, Init)]
    assert inits and inits[0].session_id, turn.explain()
    assert not marker_pids(turn.stream_id)


@pytest.mark.parametrize("agent", AGENTS)
@async_test
async def test_tool_turn(agent: str, model_server: FakeModelServer, tmp_path: Path) -> None:
    turn = Turn(agent, model_server, tmp_path)
    done = await asyncio.wait_for(turn.start("E2E-ECHO: run echo hi"), TURN_S)
    assert done.stop_reason == "end_turn", turn.explain()
    starts = [e for e in turn.events.events if isinstance(e, ToolStart)]
    dones = [e for e in turn.events.events if isinstance(e, ToolDone)]
    assert starts and ECHO_COMMAND in str(starts[0].input), turn.explain()
    assert dones and "hi" in dones[0].output and not dones[0].is_error, turn.explain()
    assert "The command printed" in turn.events.text(), turn.explain()


@pytest.mark.usefixtures("process_backend")  # the linux and the portable stop engine alike
@pytest.mark.parametrize("agent", AGENTS)
@async_test
async def test_stop_while_tool_sleeps(agent: str, model_server: FakeModelServer,
                                      tmp_path: Path) -> None:
    turn = Turn(agent, model_server, tmp_path)
    task = turn.start("E2E-SLEEP: run the slow command")
    await wait_until(lambda: sleep_pids(turn.stream_id) or task.done(), TURN_S, "the tool's sleep")
    assert not task.done(), turn.explain()
    sleeper = psutil.Process(sleep_pids(turn.stream_id)[0])
    tree = marker_pids(turn.stream_id)
    stopped_at = time.monotonic()
    assert turn.registry.abort(turn.stream_id)
    done = await asyncio.wait_for(task, STOP_S)
    took = time.monotonic() - stopped_at
    assert done.stop_reason == "cancelled", turn.explain()
    assert not done.survivors, done.survivors
    assert pid_gone(sleeper.pid), f"the tool's sleep {sleeper.pid} outlived the stop"
    left = [p for p in tree if not pid_gone(p)]
    assert not left and not marker_pids(turn.stream_id), f"left alive: {left}"
    assert "I'll run it." in turn.events.text(), turn.explain()
    assert took < STOP_S
    # A second stop is harmless: the run is over.
    assert not turn.registry.abort(turn.stream_id)


@pytest.mark.parametrize("agent", AGENTS)
@async_test
async def test_invalid_key(agent: str, model_server: FakeModelServer, tmp_path: Path) -> None:
    turn = Turn(agent, model_server, tmp_path, key="not-a-valid-key")
    done = await asyncio.wait_for(turn.start("E2E-TEXT: say hello"), TURN_S)
    assert done.stop_reason == "error", turn.explain()
    text = turn.errors().lower()
    assert any(word in text for word in ("401", "api key", "unauthorized", "unauthenticated")), (
        turn.explain())
    # ...mapped to an actionable hint that names the agent.
    errors = [e for e in turn.events.events if isinstance(e, Error)]
    assert any(e.category == "auth" and turn.manifest.name in e.hint for e in errors), (
        turn.explain())
    assert not marker_pids(turn.stream_id)
    assert os.environ.get("TOLARIA_E2E_KEY") is None


@pytest.mark.parametrize("agent", ["claude", "gemini", "qwen", "opencode"])
@async_test
async def test_safe_mode_offers_no_shell(agent: str, model_server: FakeModelServer,
                                         tmp_path: Path) -> None:
    """Permission mode "safe" maps to the CLI's own flags: the model is offered no shell tool, so
    the scripted model cannot ask for one. (Codex has no shell-free mode: its "safe" is its
    workspace-write sandbox; see docs/ADAPTERS.md.)"""
    turn = Turn(agent, model_server, tmp_path)
    done = await asyncio.wait_for(turn.start("E2E-ECHO: run echo hi", mode="safe"), TURN_S)
    assert done.stop_reason == "end_turn", turn.explain()
    assert "No shell tool was offered" in turn.events.text(), turn.explain()
    assert not [e for e in turn.events.events if isinstance(e, ToolStart)], turn.explain()


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "qwen"])
@async_test
async def test_model_setting_reaches_the_model_api(agent: str, model_server: FakeModelServer,
                                                   tmp_path: Path) -> None:
    """The Settings "model" of an agent goes through its manifest's ``model_args``: the CLI asks
    the model API for exactly that model."""
    from tolaria.config.agents import AgentOverrides, apply_overrides

    turn = Turn(agent, model_server, tmp_path)
    wanted = f"tolaria-e2e-model-{agent}"
    turn.manifest = apply_overrides(turn.manifest, AgentOverrides(model=wanted))
    seen_before = len(model_server.seen)
    done = await asyncio.wait_for(turn.start("E2E-TEXT: which model?"), TURN_S)
    assert done.stop_reason == "end_turn", turn.explain()
    asked = [s.body.get("model") or s.path for s in model_server.seen[seen_before:]]
    assert any(wanted in str(m) for m in asked), asked
