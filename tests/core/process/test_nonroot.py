"""The hostile-tree zoo as a NON-root user (issue 14, cases 1 and 14).

As root every ``/proc/PID/environ`` is readable, so a daemon that makes itself non-dumpable
(ssh-agent, gpg-agent: ``prctl(PR_SET_DUMPABLE, 0)``) still shows its TOLARIA_STREAM_ID marker.
As the user who started it, it does not: before the fix it survived Stop, unreported. The suite
runs as root in CI, so these tests become the unprivileged user of tests/nonroot.py (with
``setpriv``) and run tests/fakes/stop_scenario.py, which stops one run through the real registry
and prints what it saw. Not root: the scenario runs as the current user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import psutil
import pytest
from helpers import reap_after_watchdog, settle_orphans, watchdogs_of
from nonroot import (
    USER,
    candidate_pythons,
    first_runnable_python,
    other_uid_gid,
    other_user_prefix,
)

from tolaria.core.process import proctree

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "tests" / "fakes" / "stop_scenario.py"
_PROBE = ("import subprocess, sys, psutil, tolaria.core.process; "
          "subprocess.run([sys.executable, '-c', ''], check=True)")


@dataclass(frozen=True)
class AsUser:
    """How to run the scenario as the unprivileged user: prefix, interpreter, PYTHONPATH."""

    prefix: tuple[str, ...]
    python: str
    path: str
    scenario: Path
    uid: int
    gid: int


def _readable_copy(to: Path) -> str:
    """The package, the fakes and the scenario's libraries copied where any user can read them
    (a checkout under /root is out of reach); returns the PYTHONPATH for them."""
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "tolaria", to / "tolaria", ignore=skip)
    shutil.copytree(SCENARIO.parent, to / "tests" / "fakes", ignore=skip)
    for module in (psutil, platformdirs):
        where = Path(module.__file__ or "").resolve().parent
        shutil.copytree(where, to / "site" / where.name, ignore=skip)
    for folder, _dirs, _files in os.walk(to):
        os.chmod(folder, 0o755)
    return os.pathsep.join([str(to), str(to / "site")])


def _first_runnable(path: str) -> str | None:
    # The scenario starts more of itself (the agent, the watchdog) from sys.executable.
    return first_runnable_python(_PROBE, {"PYTHONPATH": path, "PATH": os.defpath})


@pytest.fixture(scope="module")
def as_user() -> Iterator[AsUser]:
    site = str(Path(psutil.__file__).resolve().parents[1])  # where psutil is installed
    path = os.pathsep.join([str(ROOT), site])
    if os.getuid() != 0:
        yield AsUser((), sys.executable, path, SCENARIO, os.getuid(), os.getgid())
        return
    uid, gid = other_uid_gid()
    prefix = tuple(other_user_prefix())
    python = _first_runnable(path)
    if python is not None:
        yield AsUser(prefix, python, path, SCENARIO, uid, gid)
        return
    copy = Path(tempfile.mkdtemp(prefix="tolaria-nonroot-code-", dir="/tmp"))
    try:
        path = _readable_copy(copy)
        python = _first_runnable(path)
        if python is None:
            pytest.skip(f"NOT TESTED AS NON-ROOT: no Python {sys.version_info[:2]} that {USER} "
                        f"can run with tolaria and psutil (tried {candidate_pythons()})")
        yield AsUser(prefix, python, path, copy / "tests" / "fakes" / SCENARIO.name, uid, gid)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


@pytest.fixture
def workdir(as_user: AsUser) -> Iterator[Path]:
    """A private folder the user owns (pytest's tmp_path lies under a folder only root enters)."""
    work = Path(tempfile.mkdtemp(prefix="tolaria-nonroot-", dir="/tmp"))
    (work / "home").mkdir()
    for path in (work, work / "home"):
        os.chown(path, as_user.uid, as_user.gid)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _leftovers(uid: int, work: Path) -> list[psutil.Process]:
    """Live processes of ``uid`` that came from this scenario: below us (orphans come back to
    us, the subreaper) or carrying its TOLARIA_HOME (other tests may use the same user)."""
    home = f"TOLARIA_HOME={work / 'home'}".encode()
    below = {p.pid for p in psutil.Process().children(recursive=True)}
    out = []
    for proc in psutil.process_iter(["uids", "status"]):
        info = proc.info
        if info["uids"] is None or info["uids"].real != uid or info["status"] == "zombie":
            continue
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as fh:
                ours = home in fh.read().split(b"\0")
        except OSError:
            ours = False
        if ours or proc.pid in below:
            out.append(proc)
    return out


def run_scenario(as_user: AsUser, work: Path, mode: str) -> dict[str, Any]:
    # Orphans of a scenario that died half-way come back to us, where the leak fixture sees them.
    proctree.enable_child_subreaper()
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(work / "home"),
           "TOLARIA_HOME": str(work / "home"), "PYTHONPATH": as_user.path}
    if "TOLARIA_PROCESS_BACKEND" in os.environ:  # conftest's process_backend
        env["TOLARIA_PROCESS_BACKEND"] = os.environ["TOLARIA_PROCESS_BACKEND"]
    done = subprocess.run([*as_user.prefix, as_user.python, str(as_user.scenario), mode, str(work)],
                          env=env, cwd=work, capture_output=True, text=True, timeout=90,
                          check=False)
    leftovers = _leftovers(as_user.uid, work) if as_user.prefix else []
    for proc in leftovers:
        proc.kill()
    settle_orphans()  # its watchdog (and what else it left) came back to us to die
    assert not leftovers, f"processes of {USER} outlived the scenario: {leftovers}"
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result, done.stderr[-2000:]
    assert result["uid"] == as_user.uid
    return result


def _assert_stopped(result: dict[str, Any]) -> None:
    assert result["stop_reason"] == "cancelled"
    assert result["pids"], "the fake reported no process"
    # The promise: when done arrives every process is gone; and if one were not, done says so.
    assert result["alive"] == [], result
    assert result["survivors"] == [], result


def _assert_not_found(result: dict[str, Any]) -> None:
    """The portable backend's limit (docs/RELIABILITY.md): a process that left the run's tree
    and sessions and hides its environment, with no subreaper to bring it back, is not found,
    so it is not reported either (the window says "Stopped"); the scenario then kills it."""
    assert result["stop_reason"] == "cancelled"
    assert result["alive"], "the portable backend found it: update docs/RELIABILITY.md"
    assert result["survivors"] == [], result


def _hidden_from_portable(as_user: AsUser) -> bool:
    return as_user.uid != 0 and os.environ.get("TOLARIA_PROCESS_BACKEND") == "portable"


@pytest.mark.usefixtures("process_backend")
def test_non_dumpable_daemon_is_stopped_as_non_root(as_user: AsUser, workdir: Path) -> None:
    result = run_scenario(as_user, workdir, "dumpable_daemon")
    if as_user.uid != 0:
        assert result["environ_readable"] is False, "the daemon's environment was readable"
    if _hidden_from_portable(as_user):
        _assert_not_found(result)
    else:
        _assert_stopped(result)


@pytest.mark.usefixtures("process_backend")
def test_double_fork_setsid_daemon_is_stopped_as_non_root(as_user: AsUser, workdir: Path) -> None:
    _assert_stopped(run_scenario(as_user, workdir, "daemon"))


@pytest.mark.usefixtures("process_backend")
@pytest.mark.parametrize("mode", ["hopper", "hopper_hidden"])
def test_pid_hopper_is_stopped_as_non_root(as_user: AsUser, workdir: Path, mode: str) -> None:
    result = run_scenario(as_user, workdir, mode)
    if mode == "hopper_hidden" and _hidden_from_portable(as_user):
        # Each hop forks a new session and exits: the new one is an orphan of PID 1 with an
        # unreadable environment before a rescan sees its parent (5 runs out of 5 here).
        assert result["survivors"] == [], result
        assert set(result["alive"]) <= set(result["pids"])
    else:
        _assert_stopped(result)
    assert len(result["pids"]) >= 1


@pytest.mark.parametrize("mode", ["hopper_chain", "hopper_chain_bare"])
def test_a_minutes_long_hop_chain_is_stopped_as_non_root(as_user: AsUser, workdir: Path,
                                                         mode: str) -> None:
    """Issue 22 item 2 without root's reach: frozen (SIGSTOP sweeps), then killed, within 2 s
    of the abort; none of its generations (every one is in the log) is alive at ``done``."""
    result = run_scenario(as_user, workdir, mode)
    _assert_stopped(result)
    assert len(result["pids"]) >= 2, "the tool never hopped: the test proves nothing"
    assert result["stop_ms"] < 2000, result["stop_ms"]
    print(f"{mode} as uid {result['uid']}: stopped in {result['stop_ms']:.0f} ms, "
          f"{len(result['pids'])} generations")


def test_a_crash_takes_a_hidden_daemon_without_environment_with_it_as_non_root(
        as_user: AsUser, workdir: Path) -> None:
    """Issue 22 item 10 without root's reach: the process owning the registry (as the window's
    does) is SIGKILLed while its run's tool left a daemon that double-forked, cleared its
    environment and made itself non-dumpable: no marker anyone could read. The watchdog ends it
    from the run's tracking file."""
    proctree.enable_child_subreaper()  # what the killed scenario leaves comes back to us
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(workdir / "home"),
           "TOLARIA_HOME": str(workdir / "home"), "PYTHONPATH": as_user.path,
           "FAKE_NONDUMPABLE": "1"}
    scenario = as_user.scenario.parent / "crash_scenario.py"
    app = subprocess.Popen([*as_user.prefix, as_user.python, str(scenario), "scrubbed_daemon",
                            str(workdir)], env=env, cwd=workdir, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None and app.stderr is not None
        line = app.stdout.readline()
        assert line, app.stderr.read()[-2000:]
        info = json.loads(line)
        assert info["uid"] == as_user.uid
        if as_user.uid != 0:
            assert info["environ_readable"] is False, "the daemon's environment was readable"
        daemon = psutil.Process(info["daemon"])
        dogs = watchdogs_of(app.pid)
        assert len(dogs) == 1, "the scenario should run exactly one watchdog"
        app.kill()
        app.wait(10)
        killed = time.monotonic()
        while daemon.is_running() and daemon.status() != psutil.STATUS_ZOMBIE:
            if time.monotonic() - killed > 2.0:
                daemon.kill()
                pytest.fail("the hidden daemon outlived the crash of its run by > 2 s")
            time.sleep(0.01)
        print(f"hidden daemon (uid {info['uid']}) gone {(time.monotonic() - killed) * 1000:.0f}"
              " ms after the SIGKILL")
        reap_after_watchdog(dogs)
    finally:
        if app.poll() is None:
            app.kill()
        app.communicate(timeout=10)
        leftovers = _leftovers(as_user.uid, workdir) if as_user.prefix else []
        for proc in leftovers:
            proc.kill()
        settle_orphans()
    assert not leftovers, f"processes of {USER} outlived the crash: {leftovers}"


@pytest.mark.usefixtures("process_backend")
@pytest.mark.skipif(shutil.which("ssh-agent") is None, reason="ssh-agent is not installed")
def test_ssh_agent_is_stopped_as_non_root(as_user: AsUser, workdir: Path) -> None:
    result = run_scenario(as_user, workdir, "ssh_agent")
    if as_user.uid != 0:
        assert result["environ_readable"] is False, "ssh-agent's environment was readable"
    if _hidden_from_portable(as_user):
        _assert_not_found(result)
    else:
        _assert_stopped(result)
