"""Hostile process trees (issue 14 cases 1, 13, 14; issue 16 item 2), in this process.

The non-root half of these cases is tests/core/process/test_nonroot.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from helpers import (
    assert_run_gone,
    async_test,
    cli_env,
    fake_manifest,
    is_gone,
    marker_pids,
    pid_gone,
    portable_backend,
    reap_adopted,
    start_run,
    wait_pidfile,
    wait_until,
)

from tolaria.core.events import Done
from tolaria.core.process import procfs, proctree, watchdog
from tolaria.core.stream_id import new_stream_id

ROOT = Path(__file__).resolve().parents[3]
#: A grace period no stop below may come near, even on a loaded machine (the portable backend
#: took 1.4-1.7 s there): "without waiting the grace" is unambiguous.
LONG_GRACE = 15.0


def _kill_all(pids: list[int]) -> list[int]:
    """SIGKILL whichever of ``pids`` still live (cleanup); return those that did."""
    alive = [pid for pid in pids if not pid_gone(pid)]
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return alive


# --- pid hoppers (14.14) -------------------------------------------------------------------


@pytest.mark.usefixtures("process_backend")
@pytest.mark.parametrize("hidden", [False, True])
@async_test
async def test_a_pid_hopper_is_stopped_and_every_incarnation_is_gone(tmp_path: Path,
                                                                     hidden: bool) -> None:
    """On SIGTERM the tool forks a new-session child and exits, again and again. The child
    born during the stop outside the tree gets SIGKILL at once; none outlives ``done``."""
    pidfile, hoplog = tmp_path / "pids", tmp_path / "hops"
    env = {"FAKE_PIDFILE": str(pidfile), "FAKE_HOPLOG": str(hoplog),
           "FAKE_NONDUMPABLE": "1" if hidden else "0"}
    run = start_run(fake_manifest("hopper"), env=env, grace_s=LONG_GRACE)
    (first,) = await wait_pidfile(pidfile)
    await run.wait_for_kind("text_delta")
    started = time.monotonic()
    assert run.abort() is True
    done = await run.finish()
    elapsed = time.monotonic() - started
    hops = sorted({int(p) for p in hoplog.read_text().split()})
    alive = _kill_all(hops)
    assert done.stop_reason == "cancelled"
    assert alive == [], f"hoppers alive after done: {alive}; reported {done.survivors}"
    assert done.survivors == ()
    assert len(hops) >= 2, "the tool never hopped: the test proves nothing"
    assert elapsed < LONG_GRACE / 3, f"the stop took {elapsed:.2f} s: it waited for the grace"
    assert is_gone(first)
    assert_run_gone(run.stream_id)


# --- non-dumpable daemons (14.1; as root here, as a plain user in test_nonroot.py) --------------


async def _start_and_stop(mode: str, env: dict[str, str], pidfile: Path
                          ) -> tuple[str, Done, list[int]]:
    """Run fake MODE until its one reported process exists, stop it; return that process's
    name, the ``done`` event and the pids that outlived it (already SIGKILLed here)."""
    run = start_run(fake_manifest(mode), env={**env, "FAKE_PIDFILE": str(pidfile)}, grace_s=0.5)
    (daemon,) = await wait_pidfile(pidfile)
    await run.wait_for_kind("text_delta")
    # linux: adopted by us, the child subreaper; portable: no subreaper (found as root by its
    # marker, which root can read; as a plain user it is not: test_nonroot.py).
    assert (daemon.ppid() == os.getpid()) is not portable_backend()
    name = daemon.name()
    assert run.abort() is True
    done = await run.finish()
    return name, done, _kill_all([daemon.pid])


@pytest.mark.usefixtures("process_backend")
@async_test
async def test_a_non_dumpable_setsid_daemon_is_stopped(tmp_path: Path) -> None:
    _daemon, done, alive = await _start_and_stop("dumpable_daemon", {}, tmp_path / "pids")
    assert done.stop_reason == "cancelled"
    assert alive == [], f"the daemon survived; reported {done.survivors}"
    assert done.survivors == ()


@pytest.mark.usefixtures("process_backend")
@pytest.mark.skipif(shutil.which("ssh-agent") is None, reason="ssh-agent is not installed")
@async_test
async def test_ssh_agent_started_by_a_tool_is_stopped(tmp_path: Path) -> None:
    name, done, alive = await _start_and_stop(
        "ssh_agent", {"FAKE_SSH_SOCK": str(tmp_path / "agent.sock")}, tmp_path / "pids")
    assert name == "ssh-agent"
    assert done.stop_reason == "cancelled"
    assert alive == [], f"ssh-agent survived; reported {done.survivors}"
    assert done.survivors == ()


# --- known tree first (16.2) -------------------------------------------------------------------


@async_test
async def test_the_known_tree_is_signalled_before_all_of_proc_is_scanned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent and its tool (in its own session) are signalled from the kernel's children
    lists; the pass over every pid in /proc (markers, sessions) only comes after."""
    pidfile = tmp_path / "pids"
    run = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pidfile)}, grace_s=0.5)
    (tool,) = await wait_pidfile(pidfile)
    await run.wait_for_kind("text_delta")
    agent = tool.ppid()
    order: list[tuple[str, int]] = []
    real_pids, real_signal = procfs.pids, psutil.Process.send_signal

    def pids() -> list[int]:
        order.append(("scan", 0))
        return real_pids()

    def send_signal(proc: psutil.Process, sig: int) -> None:
        order.append(("signal", proc.pid))
        real_signal(proc, sig)

    monkeypatch.setattr(procfs, "pids", pids)
    monkeypatch.setattr(psutil.Process, "send_signal", send_signal)
    assert run.abort() is True
    done = await run.finish()
    assert done.survivors == ()
    first_scan = order.index(("scan", 0))
    signalled_first = {pid for kind, pid in order[:first_scan] if kind == "signal"}
    assert {agent, tool.pid} <= signalled_first, order
    assert_run_gone(run.stream_id, [tool])


# --- one stream id, two Tolaria processes in two homes (14.13) ----------------------------------


@contextlib.contextmanager
def _other_tolaria(home: Path, stream_id: str) -> Iterator[subprocess.Popen[bytes]]:
    """``tolaria run --stream-id ID --agent demo`` in ``home``: its tool sleeps 30 s."""
    home.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tolaria", "run", "--json", "--grace", "0.5", "--stream-id",
         stream_id, "--agent", "demo", "hello"],
        env=cli_env(home, TOLARIA_DEMO_TOOL_SECONDS="30"), cwd=home,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # its own Ctrl+C: it stops its tree, then exits
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        reap_adopted()  # what it left as zombies came back to us, the subreaper


@pytest.mark.usefixtures("process_backend")
@async_test
async def test_a_run_never_takes_another_tolarias_run_with_the_same_stream_id(
        tmp_path: Path) -> None:
    """Two Tolaria processes, two homes, one --stream-id: the end-of-run cleanup of one (its
    agent left a daemon) must not kill the other's agent and tool."""
    sid = new_stream_id()
    with _other_tolaria(tmp_path / "home-b", sid) as other:
        def others_tree() -> list[psutil.Process]:
            procs = []
            for pid in marker_pids(sid):
                with contextlib.suppress(psutil.Error):
                    proc = psutil.Process(pid)
                    if other.pid in (p.pid for p in proc.parents()):
                        procs.append(proc)
            return procs

        await wait_until(lambda: any(p.name() == "sleep" for p in others_tree()), within=30,
                         what="the other Tolaria's tool")
        theirs = others_tree()
        pidfile = tmp_path / "pids"
        run = start_run(fake_manifest("daemon"), stream_id=sid, grace_s=0.5,
                        env={"FAKE_PIDFILE": str(pidfile), "FAKE_EXIT_AFTER_DAEMON": "1"})
        done = await run.finish()
        (daemon,) = [int(p) for p in pidfile.read_text().split()]
        assert done.stop_reason == "end_turn"
        assert pid_gone(daemon), "our own daemon was left running"
        killed = [p.pid for p in theirs if is_gone(p)]
        assert killed == [], f"our cleanup killed the other Tolaria's processes {killed}"
        assert other.poll() is None


@pytest.mark.usefixtures("process_backend")
def test_the_watchdog_kills_only_its_own_apps_processes_of_a_stream_id() -> None:
    sid = new_stream_id()
    mine, theirs = "111:222", "333:444"
    procs = [subprocess.Popen(["sleep", "60"], start_new_session=True,
                              env={**os.environ, proctree.ENV_MARKER: sid,
                                   proctree.OWNER_MARKER: owner})
             for owner in (mine, theirs)]
    try:
        assert watchdog.kill_marked([sid.encode()], owner=mine.encode()) == 1
        assert procs[0].wait(5) == -signal.SIGKILL
        assert procs[1].poll() is None
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(5)


@pytest.mark.usefixtures("process_backend")
def test_a_runs_environment_names_its_owner() -> None:
    env = proctree.mark_env({proctree.APP_CHILD_MARKER: "1"}, "ai-agent-stream-x")
    pid, start = env[proctree.OWNER_MARKER].split(":")
    assert int(pid) == os.getpid()
    own = procfs.stat(os.getpid())
    assert own is not None and int(start) == own.start
    assert proctree.APP_CHILD_MARKER not in env
    assert watchdog.OWNER_MARKER == proctree.OWNER_MARKER  # spelled out there (no imports)


# --- /proc readers against real processes ----------------------------------------------------

_SIGTERM_AS = ("import signal, sys, time; h = {'ignore': signal.SIG_IGN, 'catch': lambda *a: None,"
               " 'default': signal.SIG_DFL}[sys.argv[1]]; signal.signal(signal.SIGTERM, h); "
               "print(flush=True); time.sleep(60)")


@pytest.mark.parametrize(("disposition", "ignores"),
                         [("ignore", True), ("catch", False), ("default", False)])
def test_sigign_is_read_from_proc(disposition: str, ignores: bool) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _SIGTERM_AS, disposition],
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # the disposition is set
        assert procfs.ignores_sigterm(proc.pid) is ignores
    finally:
        proc.kill()
        proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def test_children_lists_every_threads_children() -> None:
    """A child forked from another thread of ours is listed too (children are per thread)."""
    import threading

    box: list[subprocess.Popen[bytes]] = []
    thread = threading.Thread(target=lambda: box.append(subprocess.Popen(["sleep", "60"])))
    thread.start()
    thread.join()
    main = subprocess.Popen(["sleep", "60"])
    try:
        kids = procfs.children(os.getpid())
        assert kids is not None
        assert {box[0].pid, main.pid} <= set(kids)
        assert procfs.children(2**22 + 7) == []  # no such process
    finally:
        for proc in (box[0], main):
            proc.kill()
            proc.wait(5)
