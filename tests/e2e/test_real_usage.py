"""Usage with the real CLIs against the loopback fake model (which reports cache tokens): a
``tolaria run`` of Claude Code and of Codex as real subprocesses, then ``tolaria usage --json``:
the tokens, the cache, Claude's cost, and the context window each CLI says (Claude in its
result's ``modelUsage``, Codex in its own session file) reach the store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from e2e.clis import run_env
from e2e.e2ehelpers import TURN_S, installed_cli
from e2e.fake_model import CACHE_ANTHROPIC, CACHED_OPENAI, FakeModelServer
from helpers import cli_env

from tolaria.core.store.db import Store

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def _tolaria(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tolaria", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=TURN_S + 30, check=False)


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_real_turn_reports_its_usage_and_context(agent: str, model_server: FakeModelServer,
                                                   tmp_path: Path) -> None:
    cli = installed_cli(agent)
    env = {**cli_env(tmp_path / "tolaria"), **run_env(cli, tmp_path / "home", model_server.url)}
    work = tmp_path / "work"
    work.mkdir()
    ran = _tolaria("run", "--agent", agent, "E2E-TEXT: say hello", env=env, cwd=work)
    assert ran.returncode == 0, ran.stderr[-2000:]

    done = _tolaria("usage", "--json", "--since", "today", env=env, cwd=work)
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)["rows"]
    assert row["key"] == agent and row["turns"] == 1
    assert row["input_tokens"] > 0 and row["output_tokens"] > 0 and row["agent_seconds"] > 0
    if agent == "claude":
        assert row["cache_read_tokens"] >= CACHE_ANTHROPIC["cache_read_input_tokens"]
        assert row["cache_write_tokens"] >= CACHE_ANTHROPIC["cache_creation_input_tokens"]
        assert row["cost_usd"] is not None
    else:
        assert row["cache_read_tokens"] >= CACHED_OPENAI
        assert row["cost_usd"] is None  # Codex reports no cost

    [db] = (tmp_path / "tolaria").rglob("*.sqlite3")
    store = Store(db)
    try:
        context = store.chat_context(1)
    finally:
        store.close()
    assert context is not None and context.agent == agent
    assert context.context_window and context.context_window >= 100_000, context
    assert context.context_tokens and 0 < context.context_tokens < context.context_window
