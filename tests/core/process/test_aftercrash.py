"""After a crash the watchdog ends what Stop would have ended (issue 22 item 10), not only what
carries the environment marker: a daemon that double-forked, ``setsid()``ed and cleared its
environment (tests/fakes/fake_agent.py ``scrubbed_daemon``) is named by the run's tracking file
(tolaria/core/process/tracking.py) and ended by the watchdog (aftercrash.py) when the app that
owned the run is SIGKILLed: ``tolaria run``, or the process that owns the registry (as the
window's does). As a non-root user, with the daemon non-dumpable too: test_nonroot.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, add_fake_agent, cli_env, reap_after_watchdog, watchdogs_of

from tolaria.core.process import aftercrash, procfs
from tolaria.core.stream_id import new_stream_id

SCENARIO = ROOT / "tests" / "fakes" / "crash_scenario.py"
#: The promise: the daemon is gone this soon after the app is killed.
GONE_WITHIN_S = 2.0


def _gone_after_kill(app: subprocess.Popen[str], daemon: int) -> float:
    """SIGKILL ``app``; return how long until ``daemon`` was gone (fails after 2 s)."""
    start = procfs.stat(daemon)
    assert start is not None, "the daemon is not running"
    dogs = watchdogs_of(app.pid)
    assert len(dogs) == 1, "the app should run exactly one watchdog"
    app.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    app.wait(10)
    while True:
        now = procfs.stat(daemon)
        if now is None or now.zombie or now.start != start.start:
            break
        if time.monotonic() - killed > GONE_WITHIN_S:
            os.kill(daemon, signal.SIGKILL)
            pytest.fail(f"the scrubbed daemon outlived the killed app by > {GONE_WITHIN_S} s")
        time.sleep(0.01)
    gone = time.monotonic() - killed
    reap_after_watchdog(dogs)  # the app's processes came back to us (the subreaper) to die
    return gone


def _environment(pid: int) -> bytes | None:
    return procfs.environ(pid)


def _tracked(path: Path, pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if any(p == pid for p, _start in json.loads(path.read_text())["procs"]):
                return True
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.02)
    return False


def test_sigkill_of_tolaria_run_takes_a_daemon_without_environment_with_it(
        tolaria_home: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    sid = new_stream_id()
    agent = add_fake_agent(tolaria_home, "scrubbed_daemon")
    app = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--json", "--stream-id", sid,
                            "--agent", agent, "go"],
                           env=cli_env(tolaria_home, FAKE_PIDFILE=str(pidfile)), cwd=tmp_path,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists():
            assert time.monotonic() < deadline and app.poll() is None, "no daemon"
            time.sleep(0.01)
        daemon = int(pidfile.read_text().split()[0])
        assert _environment(daemon) == b"", "the daemon should have an empty environment"
        track = tolaria_home / "data" / "run" / f"{app.pid}-{sid}.track.json"
        assert _tracked(track, daemon), "the run never wrote the daemon down"
        assert track.stat().st_mode & 0o777 == 0o600  # private: it names the user's processes
        assert track.parent.stat().st_mode & 0o777 == 0o700
        gone = _gone_after_kill(app, daemon)
        print(f"daemon gone {gone * 1000:.0f} ms after SIGKILL of tolaria run")
        deadline = time.monotonic() + 5
        while track.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not track.exists(), "the watchdog left the tracking file behind"
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(10)


def test_sigkill_of_the_registry_owner_takes_a_daemon_without_environment_with_it(
        tolaria_home: Path, tmp_path: Path) -> None:
    """The process that owns the registry (the window's process, minus the window)."""
    app = subprocess.Popen([sys.executable, str(SCENARIO), "scrubbed_daemon", str(tmp_path)],
                           env=cli_env(tolaria_home), cwd=tmp_path, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None
        line = app.stdout.readline()
        assert line, app.stderr.read() if app.stderr else ""
        info = json.loads(line)
        assert _environment(info["daemon"]) == b""
        gone = _gone_after_kill(app, info["daemon"])
        print(f"daemon gone {gone * 1000:.0f} ms after SIGKILL of the registry's owner")
    finally:
        if app.poll() is None:
            app.kill()
        app.communicate(timeout=10)


# --- aftercrash itself --------------------------------------------------------------------------


def test_a_reused_pid_is_never_killed(tmp_path: Path) -> None:
    """A record whose pid now belongs to another process (another start time) is left alone,
    and so is a member of a recorded session born before the run."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        st = procfs.stat(other.pid)
        assert st is not None
        record = {"born": st.start + 1, "procs": [[other.pid, st.start - 1]],
                  "groups": [[st.pgid, st.start]], "sessions": [[st.sid, st.start]]}
        path = tmp_path / "x.track.json"
        path.write_text(json.dumps(record))
        assert aftercrash.end([str(path)], timeout=0.2) == 0
        assert other.poll() is None
        assert not path.exists()
    finally:
        other.kill()
        other.wait(5)


def test_recorded_processes_and_session_members_are_frozen_then_killed(tmp_path: Path) -> None:
    leader = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        st = procfs.stat(leader.pid)
        assert st is not None
        member = subprocess.Popen(["sh", "-c", f"exec sleep 61 # {tmp_path}"],
                                  process_group=0)  # our session, its own group: not recorded
        record = {"born": st.start, "procs": [[leader.pid, st.start]], "groups": [],
                  "sessions": [[st.sid, st.start]]}
        path = tmp_path / "y.track.json"
        path.write_text(json.dumps(record))
        assert aftercrash.end([str(path)]) == 1
        assert leader.wait(5) == -signal.SIGKILL
        assert member.poll() is None  # in our own session: never the run's
        member.kill()
        member.wait(5)
    finally:
        leader.kill()
        leader.wait(5)
