"""Pid hoppers (issue 22 item 2): a tool that answers SIGTERM by turning into a fork-and-exit
chain (tests/fakes/hopper_agent.py ``chain``: a new session and a new pid every ~2 ms, one
process alive at any instant, for two minutes) must be gone within 2 s of the abort, and the
abort must not answer before it is. In this process through the registry, and from a second
process with ``tolaria abort`` against a real ``tolaria run``; with and without the
TOLARIA_STREAM_ID marker. As a non-root user: tests/core/process/test_nonroot.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import async_test, cli_env, start_run, wait_pidfile

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.process import freeze
from tolaria.core.stream_id import new_stream_id

ROOT = Path(__file__).resolve().parents[3]
HOPPER = ROOT / "tests" / "fakes" / "hopper_agent.py"
#: The issue's promise: no generation of the chain lives this long after the abort.
GONE_WITHIN_S = 2.0
#: Longer than any stop here may take: a stop that waited for it has failed.
GRACE_S = 5.0


def hopper_manifest(mode: str) -> Manifest:
    return Manifest(id=f"hopper-{mode.replace('_', '-')}", name=f"Hopper ({mode})",
                    protocol="claude-stream-json",
                    command=(sys.executable, str(HOPPER), mode, "{prompt}"))


class Chain:
    """The files of one chain: its log (``pid unix-time`` per generation) and its stop file."""

    def __init__(self, folder: Path, *, marked: bool) -> None:
        self.folder = folder
        self.log, self.pidfile, self.stopfile = folder / "hops", folder / "pids", folder / "stop"
        self.env = {"FAKE_PIDFILE": str(self.pidfile), "FAKE_HOPLOG": str(self.log),
                    "FAKE_HOP_STOPFILE": str(self.stopfile), "FAKE_HOP_SECONDS": "120",
                    "FAKE_HOP_UNMARKED": "0" if marked else "1"}

    def generations(self) -> list[tuple[int, float]]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            pid, _, when = line.partition(" ")
            with contextlib.suppress(ValueError):
                out.append((int(pid), float(when)))
        return out

    def alive(self) -> list[int]:
        """Generations alive now. pid_max may be small (32768 here): a logged pid counts only
        while it still runs the chain's tool."""
        out = []
        for pid in {pid for pid, _ in self.generations()}:
            seen = freeze.look_proc(pid)
            if seen is None or seen.gone:
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if b"--chain-tool" in fh.read():
                        out.append(pid)
            except OSError:
                continue
        return out

    def end(self) -> None:
        """Cleanup whatever happened: the chain ends at the next generation once the stop file
        exists; a stopped (frozen) one is killed."""
        self.stopfile.touch()
        deadline = time.monotonic() + 5
        while (alive := self.alive()) and time.monotonic() < deadline:
            for pid in alive:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)


@pytest.fixture
def chain_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "chain"
    folder.mkdir()
    return folder


def _assert_ended(chain: Chain, aborted_at: float, answered_at: float, alive: list[int]) -> None:
    gens = chain.generations()
    hopped = [pid for pid, when in gens if when >= aborted_at]
    assert hopped, "the chain never began after the abort: the test proves nothing"
    assert alive == [], f"generations alive after the abort answered: {alive}"
    took = answered_at - aborted_at
    assert took < GONE_WITHIN_S, f"the stop took {took:.2f} s"
    print(f"chain ended {took * 1000:.0f} ms after the abort; {len(hopped) - 1} generations "
          "born after the abort")


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
@async_test
async def test_a_fork_and_exit_chain_is_ended_within_2s_of_the_abort(chain_dir: Path,
                                                                      marked: bool) -> None:
    chain = Chain(chain_dir, marked=marked)
    try:
        run = start_run(hopper_manifest("chain"), env=chain.env, grace_s=GRACE_S)
        await wait_pidfile(chain.pidfile)
        await run.wait_for_kind("text_delta")
        aborted_at = time.time()
        assert run.abort() is True
        done = await run.finish(within=30)
        answered_at = time.time()
        alive = chain.alive()
    finally:
        chain.end()
    assert done.stop_reason == "cancelled"
    assert done.survivors == ()
    _assert_ended(chain, aborted_at, answered_at, alive)


def _add_agent(home: Path) -> str:
    folder = home / "adapters"
    folder.mkdir(exist_ok=True)
    (folder / "hopper.toml").write_text(
        'id = "hopper"\nname = "Hopper"\nprotocol = "claude-stream-json"\n'
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(HOPPER))}, "
        '"chain", "{prompt}"]\n')
    return "hopper"


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_tolaria_abort_from_another_process_ends_a_chain_before_it_answers(
        tolaria_home: Path, chain_dir: Path, marked: bool) -> None:
    """A real ``tolaria run``; ``tolaria abort`` from a second process. Its ``true`` means the
    chain is gone: checked the moment it answers."""
    chain = Chain(chain_dir, marked=marked)
    sid = new_stream_id()
    env = cli_env(tolaria_home, **chain.env)
    app = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--json", "--grace",
                            str(GRACE_S), "--stream-id", sid, "--agent", _add_agent(tolaria_home),
                            "go"], env=env, cwd=chain_dir, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert app.stdout is not None
        for line in app.stdout:  # the agent said the tool runs (its pidfile exists by then)
            if b"hopper tool started" in line:
                break
        aborted_at = time.time()
        abort = subprocess.run([sys.executable, "-m", "tolaria", "abort", sid], env=env,
                               capture_output=True, text=True, timeout=30, check=False)
        answered_at = time.time()
        alive = chain.alive()
        assert app.wait(30) == 130
    finally:
        chain.end()
        if app.poll() is None:
            app.kill()
            app.wait(10)
        if app.stdout is not None:
            app.stdout.close()
    assert (abort.returncode, abort.stdout.strip()) == (0, "true"), abort.stderr
    _assert_ended(chain, aborted_at, answered_at, alive)
