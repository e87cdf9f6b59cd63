"""Limits with the real Claude Code against the loopback fake model: the token limit counts the
usage Claude prints per API message, so a run asked to ``sleep 300`` is stopped as soon as its
first message exceeds the limit, through ``tolaria run``'s engine (polite, then the tree): the
``sleep`` is gone, what Claude said is kept, and the done event names the limit. A run within
its limits ends by itself with Claude's reported cost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from e2e.clis import run_env
from e2e.e2ehelpers import TURN_S, installed_cli, manifest
from e2e.fake_model import FakeModelServer
from helpers import RecordingPrinter, marker_pids

from tolaria.cli.run_cmd import RunOutput as _RunOutput
from tolaria.cli.run_cmd import run_with_control as _run_with_control
from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN, Done, Usage
from tolaria.core.limits import RunLimits
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def run_claude(server: FakeModelServer, tmp_path: Path, prompt: str,
               limits: RunLimits) -> tuple[Done, RecordingPrinter, str]:
    cli = installed_cli("claude")
    env = run_env(cli, tmp_path / "home", server.url)
    work = tmp_path / "work"
    work.mkdir()
    request = RunRequest(manifest("claude"), prompt, str(work), env, permission_mode="full")
    stream_id = new_stream_id()
    printer = RecordingPrinter()

    async def run() -> Done:
        return await asyncio.wait_for(_run_with_control(
            request, stream_id, _RunOutput(printer, printer, None), 1.0,
            limits=(limits, RunLimits())), TURN_S)

    return asyncio.run(run()), printer, stream_id


def test_a_token_limit_stops_real_claude_during_its_tool(
        model_server: FakeModelServer, tmp_path: Path) -> None:
    done, printer, stream_id = run_claude(model_server, tmp_path,
                                          "E2E-SLEEP: run the slow command",
                                          RunLimits(max_tokens=10))
    assert done.stop_reason == STOP_CANCELLED, printer.seen[-10:]
    assert (done.limit, done.limit_value) == ("tokens", 10)
    assert not done.survivors
    assert marker_pids(stream_id) == [], "the tool's sleep 300 and Claude must be gone"
    usage = [e for e in printer.seen if isinstance(e, Usage)]
    assert usage and (usage[0].input_tokens or 0) + (usage[0].output_tokens or 0) >= 10


def test_real_claude_within_its_limits_ends_with_its_cost(
        model_server: FakeModelServer, tmp_path: Path) -> None:
    done, printer, _stream_id = run_claude(model_server, tmp_path, "E2E-TEXT: say hello",
                                           RunLimits(max_tokens=1_000_000, max_cost_usd=100.0,
                                                     max_time_s=TURN_S))
    assert done.stop_reason == STOP_END_TURN, printer.seen[-10:]
    assert done.limit is None
    costs = [e.cost_usd for e in printer.seen if isinstance(e, Usage) and e.cost_usd is not None]
    assert costs, "Claude reports the turn's cost in its result"
