"""``tolaria abort ID`` from another process, the moment after ``tolaria run --stream-id ID`` was
launched (issue 22.1).

Before: the run listened on its control socket only ~200 ms after its process started, so an
abort sent earlier printed ``false`` and the run went on for ever (66 of 100 aborts lost at a
random moment in 0-300 ms). Now the run claims its socket in its first lines (an abort waits in
its listen queue) and the abort also finds a run that has not run a line of Tolaria yet by its
command line, then waits for it to listen. Every case: abort prints ``true`` once the run's tree
is gone, the run ends ``cancelled`` (exit 130), nothing of it is left.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli.test_cli import EXIT_CANCELLED, Background, tolaria
from cli.test_fast_commands import LAUNCH
from helpers import cli_env, marker_pids

from tolaria.core.process import claim, control_client
from tolaria.core.stream_id import new_stream_id

GATE_DIR = Path(__file__).resolve().parents[1] / "fakes" / "gate"


def _launch(home: Path, work: Path, stream_id: str, **env: str) -> Background:
    """``tolaria run --stream-id`` of the demo agent whose tool would sleep a minute."""
    return Background(["run", "--json", "--grace", "0.5", "--stream-id", stream_id,
                       "--agent", "demo", "hello"],
                      cli_env(home, TOLARIA_DEMO_TOOL_SECONDS="60", **env), work)


def _assert_stopped(runner: Background, stream_id: str, abort: subprocess.CompletedProcess[str],
                    ) -> None:
    assert (abort.returncode, abort.stdout.strip()) == (0, "true"), abort.stderr
    assert marker_pids(stream_id) == []  # answered once the tree was gone
    assert runner.finish() == EXIT_CANCELLED, "".join(runner.stderr)
    events = runner.events()
    assert events[-1]["kind"] == "done", events
    assert events[-1]["stop_reason"] == "cancelled"
    assert marker_pids(stream_id) == []


@pytest.mark.parametrize("delay_ms", [0, 5, 20, 50, 100, 200])
def test_an_abort_right_after_the_launch_stops_the_run(
        delay_ms: int, tolaria_home: Path, work: Path) -> None:
    stream_id = new_stream_id()
    runner = _launch(tolaria_home, work, stream_id)
    try:
        time.sleep(delay_ms / 1000)
        abort = tolaria("abort", stream_id, env=cli_env(tolaria_home), cwd=work)
        _assert_stopped(runner, stream_id, abort)
    finally:
        runner.kill()


def _stored_statuses(home: Path) -> list[str]:
    with sqlite3.connect(home / "data" / "tolaria.sqlite3") as db:
        return [str(row[0]) for row in db.execute("SELECT status FROM turns")]


def test_an_abort_before_the_run_has_run_a_line_of_tolaria(tolaria_home: Path,
                                                            work: Path) -> None:
    """The run's process exists (its command line names the id) but is held before Python
    runs any of Tolaria (a sitecustomize waits for a gate file): the abort finds it by its
    command line and waits; once the run goes on, it is stopped before its agent spawns."""
    gate = work.parent / "gate"
    stream_id = new_stream_id()
    runner = _launch(tolaria_home, work, stream_id, TOLARIA_TEST_GATE=str(gate),
                     PYTHONPATH=os.pathsep.join([str(GATE_DIR), cli_env(tolaria_home)
                                                 ["PYTHONPATH"]]))
    try:
        assert claim.find_runs(stream_id) == [runner.proc.pid]
        assert control_client.sockets() == []  # it does not listen: nothing of Tolaria ran
        result: list[subprocess.CompletedProcess[str]] = []
        asker = threading.Thread(target=lambda: result.append(
            tolaria("abort", stream_id, env=cli_env(tolaria_home), cwd=work)))
        asker.start()
        time.sleep(1.0)
        assert result == [], "abort answered before the run could be stopped"
        assert runner.proc.poll() is None
        gate.touch()
        asker.join(60)
        _assert_stopped(runner, stream_id, result[0])
        assert [e["kind"] for e in runner.events()] == ["done"]  # nothing was spawned
        assert _stored_statuses(tolaria_home) == ["cancelled"]  # the turn is kept, stopped
    finally:
        gate.touch()
        runner.kill()


def test_an_abort_of_a_run_that_fails_before_listening_is_false(tolaria_home: Path,
                                                                 work: Path) -> None:
    """The named run is launched but never comes to be (an unknown agent): the abort waits
    for it, sees its process end, and says false."""
    gate = work.parent / "gate"
    stream_id = new_stream_id()
    env = cli_env(tolaria_home, TOLARIA_TEST_GATE=str(gate),
                  PYTHONPATH=os.pathsep.join([str(GATE_DIR), cli_env(tolaria_home)
                                              ["PYTHONPATH"]]))
    runner = Background(["run", "--stream-id", stream_id, "--agent", "no-such-agent", "hi"],
                        env, work)
    try:
        result: list[subprocess.CompletedProcess[str]] = []
        asker = threading.Thread(target=lambda: result.append(
            tolaria("abort", stream_id, env=cli_env(tolaria_home), cwd=work)))
        asker.start()
        time.sleep(0.5)
        gate.touch()
        asker.join(60)
        assert runner.finish() == 2
        assert (result[0].returncode, result[0].stdout.strip()) == (1, "false")
        assert list((tolaria_home / "run").iterdir()) == []  # its early socket went with it
    finally:
        gate.touch()
        runner.kill()


def test_an_abort_waits_for_an_unclaimed_run_only_so_long(
        tolaria_home: Path, work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run held before it listens for longer than ``CLAIM_WAIT_S`` (at the gate, before any
    line of Tolaria): the abort gives up, false, instead of hanging; once the run goes on, an
    abort stops it as usual."""
    gate = work.parent / "gate"
    stream_id = new_stream_id()
    runner = _launch(tolaria_home, work, stream_id, TOLARIA_TEST_GATE=str(gate),
                     PYTHONPATH=os.pathsep.join([str(GATE_DIR), cli_env(tolaria_home)
                                                 ["PYTHONPATH"]]))
    try:
        monkeypatch.setattr(control_client, "CLAIM_WAIT_S", 0.5)
        started = time.monotonic()
        assert control_client.abort_remote(stream_id) is False
        assert 0.5 <= time.monotonic() - started < 5
        # Let it go: the usual abort stops it.
        gate.touch()
        abort = tolaria("abort", stream_id, env=cli_env(tolaria_home), cwd=work)
        _assert_stopped(runner, stream_id, abort)
    finally:
        gate.touch()
        runner.kill()


def test_an_abort_of_an_id_nobody_runs_is_false_while_other_runs_start(
        tolaria_home: Path, work: Path) -> None:
    other = new_stream_id()
    runner = _launch(tolaria_home, work, other)
    try:
        unknown = tolaria("abort", new_stream_id(), env=cli_env(tolaria_home), cwd=work)
        assert (unknown.returncode, unknown.stdout.strip()) == (1, "false")
        assert runner.proc.poll() is None  # the other run was not touched
        _assert_stopped(runner, other, tolaria("abort", other, env=cli_env(tolaria_home),
                                               cwd=work))
    finally:
        runner.kill()


def _claimed(home: Path) -> list[Path]:
    return sorted((home / "run").glob("*.claim")) if (home / "run").is_dir() else []


def test_a_ctrl_c_while_the_run_starts_cancels_it(tolaria_home: Path, work: Path) -> None:
    """SIGINT once the run has claimed its socket but long before it has a registry (it is
    held in its store's lock): the signal is kept, the run ends cancelled without spawning,
    no KeyboardInterrupt traceback. Meanwhile ``tolaria streams`` and the store's look at the
    live ids do not wait for the starting run (only an abort naming it does)."""
    stream_id = new_stream_id()
    (tolaria_home / "data").mkdir()
    db = sqlite3.connect(tolaria_home / "data" / "tolaria.sqlite3", isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")  # the run waits for the store (busy timeout) while starting
    runner = _launch(tolaria_home, work, stream_id)
    try:
        runner.wait_until(lambda: _claimed(tolaria_home), "the run's claimed socket")
        assert control_client.sockets() == []  # only an abort naming the run goes there
        started = time.monotonic()
        assert control_client.live_stream_ids(timeout=3.0) == set()
        assert control_client.list_streams(timeout=3.0) == []
        assert time.monotonic() - started < 2.5, "waited for the starting run's answer"
        os.kill(runner.proc.pid, signal.SIGINT)
        time.sleep(0.3)
        db.execute("ROLLBACK")
        assert runner.finish() == EXIT_CANCELLED, "".join(runner.stderr)
        assert "Traceback" not in "".join(runner.stderr)
        assert [e["kind"] for e in runner.events()] == ["done"]
        assert marker_pids(stream_id) == []
        assert _claimed(tolaria_home) == []
    finally:
        db.close()
        runner.kill()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_aborts_at_random_moments_are_never_lost(tolaria_home: Path, work: Path) -> None:
    """100 cycles, the abort at a random moment 0-300 ms after the launch, 4 cycles at once
    (which also slows every start-up, widening the window); each must end stopped."""
    rng = random.Random(2222)
    delays = [rng.uniform(0, 0.3) for _ in range(100)]
    failures: list[str] = []
    lock = threading.Lock()

    def cycle(delay: float) -> None:
        stream_id = new_stream_id()
        runner = _launch(tolaria_home, work, stream_id)
        try:
            time.sleep(delay)
            abort = tolaria("abort", stream_id, env=cli_env(tolaria_home), cwd=work)
            _assert_stopped(runner, stream_id, abort)
        except Exception as exc:  # a hung abort or run (TimeoutExpired) is lost too: in a
            with lock:  # thread it would only be a warning
                failures.append(f"abort at {delay * 1000:.0f} ms: {exc!r}"[:600])
        finally:
            runner.kill()

    for batch in range(0, len(delays), 4):
        threads = [threading.Thread(target=cycle, args=(d,)) for d in delays[batch:batch + 4]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads), "a cycle hung for 2 minutes"
    assert failures == [], f"{len(failures)} of {len(delays)} lost:\n" + "\n".join(failures)
    assert control_client.sockets() == []


def test_the_early_claim_costs_the_abort_nothing(tolaria_home: Path, work: Path) -> None:
    """An abort of an id nobody runs reads every command line once (no psutil, no asyncio):
    the answer is false and the import set stays the fast one (tests/cli/test_fast_commands.py
    holds the list; the timing is in docs/PERFORMANCE.md)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCH, "abort",
                             new_stream_id()], env=cli_env(tolaria_home), cwd=work,
                            capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout.strip()) == (1, "false")
    imported = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "tolaria.core.process.claim" in imported
    assert not {"asyncio", "psutil", "subprocess", "re"} & imported


#: ``tolaria`` as its script runs it, with an audit hook that logs imports and socket binds.
_AUDITED = """
import sys
def hook(event, args):
    if event == "import":
        print("import", args[0], file=sys.stderr)
    elif event == "socket.bind":
        print("bind", args[1], file=sys.stderr)
sys.addaudithook(hook)
from tolaria.cli.main import main
sys.exit(main())
"""


def test_the_run_claims_its_id_before_any_heavy_import(tolaria_home: Path, work: Path) -> None:
    """The order of events in a real ``tolaria run --stream-id``: the bind of ``<pid>.claim``
    comes before argparse, asyncio, sqlite3, psutil or any adapter is imported."""
    result = subprocess.run([sys.executable, "-c", _AUDITED, "run", "--stream-id",
                             new_stream_id(), "--agent", "no-such-agent", "hi"],
                            env=cli_env(tolaria_home), cwd=work, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr[-2000:]
    events = [line for line in result.stderr.splitlines() if line.startswith(("import ", "bind "))]
    (claimed,) = [i for i, e in enumerate(events) if e.startswith("bind ") and e.endswith(".claim")]
    heavy = ("argparse", "asyncio", "sqlite3", "psutil", "tolaria.core.adapters", "tolaria.chats")
    first_heavy = min(i for i, e in enumerate(events) if e.split()[1] in heavy)
    assert claimed < first_heavy, events[:claimed + 1]
    assert list((tolaria_home / "run").iterdir()) == []  # released when the run gave up
