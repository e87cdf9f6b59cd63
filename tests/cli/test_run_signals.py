"""``tolaria run`` stopped by Ctrl+C / SIGTERM the moment it starts: the signal handlers go in
with the run already reserved in the registry, so a signal while the control socket starts (or
the agent spawns) ends the run ``cancelled``, tree gone, long before the agent would finish."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from cli.test_cli import EXIT_CANCELLED, Background, json_lines
from helpers import cli_env, marker_pids

from tolaria.cli.run_cmd import RunOutput as _RunOutput
from tolaria.cli.run_cmd import run_with_control as _run_with_control
from tolaria.cli.tty import make_printer
from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.events import STOP_CANCELLED, Done
from tolaria.core.process import control, control_client
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.request import RunRequest

SIGNALS = pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM],
                                  ids=["SIGINT", "SIGTERM"])


@SIGNALS
def test_a_signal_as_the_run_starts_cancels_it(
        sig: signal.Signals, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    request = RunRequest(load_adapters().get("demo"), "hello", cwd=str(tmp_path))
    stream_id = new_stream_id()
    printer = make_printer(True)

    real_start = control.ControlServer.start

    async def slow_start(server: control.ControlServer) -> None:
        # The signal comes while the control socket starts (slow: stale sockets to clear),
        # before the agent is spawned: the window in which a stop used to be lost.
        os.kill(os.getpid(), sig)
        await asyncio.sleep(0.1)
        await real_start(server)

    monkeypatch.setattr(control.ControlServer, "start", slow_start)

    async def run() -> Done:
        return await _run_with_control(request, stream_id, _RunOutput(printer, printer, None),
                                       0.5)

    started = time.monotonic()
    done = asyncio.run(run())
    assert done.stop_reason == STOP_CANCELLED
    assert time.monotonic() - started < 8
    assert marker_pids(stream_id) == []
    events = json_lines(capsys.readouterr().out)
    assert [e["kind"] for e in events].count("done") == 1
    assert events[-1]["stop_reason"] == STOP_CANCELLED


@SIGNALS
def test_a_signal_right_after_the_run_is_listed_cancels_it(
        sig: signal.Signals, tolaria_home: Path, work: Path) -> None:
    stream_id = new_stream_id()
    runner = Background(["run", "--json", "--grace", "0.5", "--stream-id", stream_id,
                         "--agent", "demo", "hello"],
                        cli_env(tolaria_home, TOLARIA_DEMO_TOOL_SECONDS="60"), work)
    try:
        # The first moment another terminal can name the run: its control socket answers.
        runner.wait_until(control_client.sockets, "the run's control socket")
        os.kill(runner.proc.pid, sig)
        assert runner.finish() == EXIT_CANCELLED
        events = runner.events()
        assert events[-1]["kind"] == "done"
        assert events[-1]["stop_reason"] == STOP_CANCELLED
        assert marker_pids(stream_id) == []
    finally:
        runner.kill()
