"""Limits with a model endpoint (the loopback fake OpenAI server) that reports tokens and cost in
each request's usage: the model chat reports the turn's totals, and ``tolaria run``'s engine
stops the tool loop at the cost or token limit, ending ``cancelled`` with the limit named."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")

from fakes.fake_openai_server import FakeOpenAIServer, Reply, text_reply, tool_reply
from helpers import RecordingPrinter

from tolaria.cli.run_cmd import RunOutput as _RunOutput
from tolaria.cli.run_cmd import run_with_control as _run_with_control
from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN, Diagnostic, Done, Usage
from tolaria.core.limits import RunLimits
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.runner import RunRequest


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    yield srv
    srv.stop()


def costly_step(n: int) -> Reply:
    """A tool call (listing the folder), then the request's usage with its cost."""
    reply = tool_reply((f"call_{n}", "list_directory", {"path": "."}))
    usage: dict[str, Any] = {"prompt_tokens": 100, "completion_tokens": 20, "cost": 0.5}
    return Reply([*reply.chunks, {"choices": [], "usage": usage}])


def run(server: FakeOpenAIServer, tmp_path: Path, limits: RunLimits) -> tuple[Done, RecordingPrinter]:
    manifest = Manifest(id="fake-chat", name="Fake chat", protocol="openai-chat", command=(),
                        base_url=server.base_url, model="fake-model", permissions="full")
    request = RunRequest(manifest, "look around", str(tmp_path))
    printer = RecordingPrinter()

    async def go() -> Done:
        return await asyncio.wait_for(_run_with_control(
            request, new_stream_id(), _RunOutput(printer, printer, None), 0.5,
            limits=(limits, RunLimits())), 30)

    return asyncio.run(go()), printer


def test_a_cost_limit_stops_the_model_chats_tool_loop(server: FakeOpenAIServer,
                                                      tmp_path: Path) -> None:
    server.script(*[costly_step(n) for n in range(1, 7)])
    done, printer = run(server, tmp_path, RunLimits(max_cost_usd=1.25))
    assert done.stop_reason == STOP_CANCELLED
    assert (done.limit, done.limit_value) == ("cost", 1.25)
    usage = [e for e in printer.seen if isinstance(e, Usage)]
    # Each request reports its own usage; the run's Usage is the total so far.
    assert [(u.input_tokens, u.output_tokens, u.cost_usd) for u in usage] == [
        (100, 20, 0.5), (200, 40, 1.0), (300, 60, 1.5)]
    assert len(server.requests) == 3, "no request after the limit"
    warnings = [e.message for e in printer.seen
                if isinstance(e, Diagnostic) and e.source == "limit"]
    assert warnings == ["80 % of the $1.25 limit used"]


def test_a_token_limit_and_a_run_within_it(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(costly_step(1), costly_step(2), text_reply("all seen", usage=(50, 10)))
    done, _printer = run(server, tmp_path, RunLimits(max_tokens=1000))
    assert (done.stop_reason, done.limit) == (STOP_END_TURN, None)
    server.script(*[costly_step(n) for n in range(1, 7)])
    done, _printer = run(server, tmp_path, RunLimits(max_tokens=300))
    assert (done.stop_reason, done.limit, done.limit_value) == (STOP_CANCELLED, "tokens", 300)
