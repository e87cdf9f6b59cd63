"""After a crash the watchdog ends what Stop would have ended (issue 22 item 10), not only the
processes that carry the environment marker: a daemon that cleared its environment (``env -i``)
and one whose environment is unreadable (non-dumpable) do not outlive a SIGKILL of their
``tolaria run``. The app tells the watchdog each run's processes (pid + start time), sessions
and groups while it runs (tolaria/core/process/tracking.py, aftercrash.py). As root here and as
the non-root user of tests/nonroot.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import cli_env, marker_pids
from nonroot import other_user_prefix, other_user_python, python_env, world_reachable_folder

from tolaria.core.process import aftercrash, freeze, procfs, tracking, watchdog
from tolaria.core.stream_id import new_stream_id

ROOT = Path(__file__).resolve().parents[3]
HOPPER = ROOT / "tests" / "fakes" / "hopper_agent.py"
#: The promise of test_watchdog.py: the run's processes are gone this soon after the crash.
GONE_WITHIN_S = 2.0
#: Several tracking intervals: by then the app has told the watchdog about the daemon.
TRACKED_AFTER_S = 5 * tracking.INTERVAL_S


def _alive(pid: int, start: int) -> bool:
    seen = freeze.look_proc(pid)
    return seen is not None and seen.start == start and not seen.gone


def _sleeper() -> subprocess.Popen[bytes]:
    """``sleep 60`` in a session of its own."""
    return subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, start_new_session=True)


# --- the records ------------------------------------------------------------------------------


def test_follow_keeps_what_the_app_said_of_each_live_run() -> None:
    lines = [b"+a\n", b"ba 100\n", b"pa 10:150\n", b"sa 10\n", b"ga 12\n", b"pa garbage\n",
             b"+b\n", b"pb 20:5\n", b"-b\n", b"pz 1:1\n", b"pa 11:160"]  # torn last line
    runs = aftercrash.follow(lines)
    assert set(runs) == {b"a"}
    record = runs[b"a"]
    assert (record.born, record.procs, record.sessions, record.groups) == (
        100, {(10, 150)}, {10}, {12})


def test_recorded_processes_are_matched_by_start_time_never_by_pid_alone() -> None:
    """A recorded pid that now names another process (pid reuse: the start time differs) is
    left alone, and so is a recorded session whose leader is a stranger."""
    stranger = _sleeper()
    try:
        st = procfs.stat(stranger.pid)
        assert st is not None
        record = aftercrash.RunRecord(count=1, born=st.start + 1000)
        record.procs.add((stranger.pid, st.start + 1))  # "the run's process" of that pid died
        record.sessions.add(stranger.pid)  # the session id is the stranger's own
        rows = aftercrash._rows()
        assert aftercrash.recorded_pids({b"x": record}, rows) == set()
        record.procs = {(stranger.pid, st.start)}
        assert aftercrash.recorded_pids({b"x": record}, rows) == {stranger.pid}
    finally:
        stranger.kill()
        stranger.wait(5)


def test_the_watchdog_ends_recorded_processes_and_session_members_at_eof() -> None:
    """A real watchdog: told of one process (empty environment, its own session), then its
    pipe closes (as when the app dies). The recorded process, a member of its session born
    after it, and their child go; a stranger with a recycled-looking record stays."""
    sid = new_stream_id()
    client = watchdog._Client()
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '60']);"
         " time.sleep(60)"], env={}, start_new_session=True, stdin=subprocess.DEVNULL)
    stranger = _sleeper()
    try:
        lst, sst = procfs.stat(leader.pid), procfs.stat(stranger.pid)
        assert lst is not None and sst is not None
        deadline = time.monotonic() + 10
        while not (procfs.children(leader.pid) or []) and time.monotonic() < deadline:
            time.sleep(0.01)
        (member,) = procfs.children(leader.pid) or []
        mst = procfs.stat(member)
        assert mst is not None and mst.sid == leader.pid
        client.run_started(sid)
        client.run_known(sid, lst.start, [(leader.pid, lst.start), (stranger.pid, sst.start + 7)],
                         [leader.pid], [])
        client.close()  # EOF: the watchdog ends the run, then exits (close waits for it)
        assert leader.wait(5) == -signal.SIGKILL
        assert not _alive(member, mst.start)
        assert stranger.poll() is None, "a process with a mismatching start time was killed"
    finally:
        for proc in (leader, stranger):
            proc.kill()
            proc.wait(5)


# --- a real `tolaria run`, SIGKILLed ------------------------------------------------------------


def _add_agent(home: Path) -> str:
    folder = home / "adapters"
    folder.mkdir(exist_ok=True, parents=True)
    (folder / "env-daemon.toml").write_text(
        'id = "env-daemon"\nname = "Daemon without environment"\nprotocol = "claude-stream-json"\n'
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(HOPPER))}, "
        '"env_daemon", "{prompt}"]\n')
    return "env-daemon"


def _read_pid(path: Path, within: float = 30.0) -> int:
    deadline = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)
    return int(path.read_text().split()[0])


@contextlib.contextmanager
def _killed_run(argv: list[str], env: dict[str, str], cwd: Path, pidfile: Path
                ) -> Iterator[tuple[int, int, subprocess.Popen[bytes]]]:
    """Start ``tolaria run`` (argv), wait for the daemon and a few tracking rounds, yield
    (daemon pid, its start ticks, the app). Whatever is left is killed afterwards."""
    app = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    daemon, start = 0, 0
    try:
        daemon = _read_pid(pidfile)
        st = procfs.stat(daemon)
        assert st is not None
        start = st.start
        time.sleep(TRACKED_AFTER_S)
        yield daemon, start, app
    finally:
        if app.poll() is None:
            app.kill()
        app.wait(10)
        if daemon and _alive(daemon, start):
            os.kill(daemon, signal.SIGKILL)


def _assert_gone_after_sigkill(app: subprocess.Popen[bytes], daemon: int, start: int) -> float:
    assert _alive(daemon, start), "the daemon is not running: the test proves nothing"
    app.kill()
    killed = time.monotonic()
    app.wait(10)
    while _alive(daemon, start):
        assert time.monotonic() - killed < GONE_WITHIN_S, \
            f"the daemon {daemon} outlived the SIGKILL of its run by > {GONE_WITHIN_S} s"
        time.sleep(0.005)
    return time.monotonic() - killed


@pytest.mark.parametrize("hidden", [False, True], ids=["env-cleared", "env-cleared-nondumpable"])
def test_a_daemon_without_environment_dies_with_its_killed_run(tolaria_home: Path,
                                                               tmp_path: Path,
                                                               hidden: bool) -> None:
    sid = new_stream_id()
    pidfile = tmp_path / "daemon.pid"
    env = cli_env(tolaria_home, FAKE_PIDFILE=str(pidfile),
                  FAKE_NONDUMPABLE="1" if hidden else "0")
    argv = [sys.executable, "-m", "tolaria", "run", "--json", "--stream-id", sid, "--agent",
            _add_agent(tolaria_home), "start a daemon"]
    with _killed_run(argv, env, tmp_path, pidfile) as (daemon, start, app):
        with open(f"/proc/{daemon}/environ", "rb") as fh:
            assert fh.read() == b"", "the daemon's environment is not empty"
        assert daemon not in marker_pids(sid)
        gone = _assert_gone_after_sigkill(app, daemon, start)
    print(f"daemon ({'non-dumpable' if hidden else 'env cleared'}) gone {gone * 1000:.0f} ms "
          "after the SIGKILL of tolaria run")


@pytest.mark.parametrize("hidden", [False, True], ids=["env-cleared", "env-cleared-nondumpable"])
def test_a_daemon_without_environment_dies_with_its_killed_run_as_non_root(hidden: bool) -> None:
    """The same as the user ``tolaria-test`` (setpriv): the app and its watchdog cannot read a
    non-dumpable daemon's /proc/PID/environ at all."""
    prefix = other_user_prefix()
    python = other_user_python()
    with world_reachable_folder(owner_is_other_user=True) as folder:
        home, pidfile = folder / "home", folder / "daemon.pid"
        manifest = (f'id = "env-daemon"\nname = "Daemon"\nprotocol = "claude-stream-json"\n'
                    f"command = [{json.dumps(python)}, {json.dumps(str(HOPPER))}, "
                    '"env_daemon", "{prompt}"]\n')
        subprocess.run([*prefix, "sh", "-c", 'mkdir -p "$1/adapters" && cat > "$1/adapters/'
                        'env-daemon.toml"', "sh", str(home)], input=manifest.encode(), check=True)
        env = python_env(home, FAKE_PIDFILE=str(pidfile), FAKE_NONDUMPABLE="1" if hidden else "0")
        argv = [*prefix, python, "-m", "tolaria", "run", "--json", "--stream-id",
                new_stream_id(), "--agent", "env-daemon", "start a daemon"]
        with _killed_run(argv, env, folder, pidfile) as (daemon, start, app):
            uid = procfs.real_uid(daemon)
            assert uid == os.getuid() if not prefix else uid != 0
            if hidden:  # root-owned: unreadable to the user who runs the app and the watchdog
                assert os.stat(f"/proc/{daemon}/environ").st_uid == 0
            gone = _assert_gone_after_sigkill(app, daemon, start)  # setpriv exec()s: app's pid
    print(f"as uid {uid}: daemon gone {gone * 1000:.0f} ms after the SIGKILL of tolaria run")


#: The window's process minus the clicking (as in test_watchdog.py): the app's composition root
#: sends one turn to the daemon-starting agent, prints the stream id, waits to be killed.
GUI_SCRIPT = """\
import asyncio, sys
from tolaria.app.main import Tolaria, make_qapplication
from tolaria.qt import loop

async def main() -> None:
    app = Tolaria(agent="env-daemon", cwd=sys.argv[1])
    await app.start()
    conversation = app.controller.conversations()[0]
    print(app.controller.send(conversation.id, "start a daemon"), flush=True)
    await asyncio.sleep(3600)

make_qapplication()
loop.run(main())
"""


def test_a_daemon_without_environment_dies_with_the_killed_window_process(
        tolaria_home: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    _add_agent(tolaria_home)
    env = cli_env(tolaria_home, FAKE_PIDFILE=str(pidfile), QT_QPA_PLATFORM="offscreen")
    argv = [sys.executable, "-c", GUI_SCRIPT, str(tmp_path)]
    with _killed_run(argv, env, tmp_path, pidfile) as (daemon, start, app):
        gone = _assert_gone_after_sigkill(app, daemon, start)
    print(f"daemon gone {gone * 1000:.0f} ms after the SIGKILL of the window's process")
