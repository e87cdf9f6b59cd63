"""The supervisor itself killed with -9 on the host, mid-run: its watcher ends the tree.

Killed as the remote account (as a user's `kill -9` there, or an OOM killer, would): the agent
and the daemon it left behind are orphans then; the watcher (the supervisor's parent, a
subreaper) ends them, checked from the remote's view, and the local run ends with one clear
line instead of hanging.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from remote.remotehelpers import run_local
from remote.sshd import ALIAS, SshServer, remote_processes

from tolaria.core.stream_id import new_stream_id


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    try:
        return b") Z" not in Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False


def _kill_as_remote(sshd: SshServer, pid: int) -> None:
    """``kill -9 PID`` as the remote account, as a user there would."""
    account = sshd.account
    subprocess.run(["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}",
                    "--clear-groups", "kill", "-9", str(pid)], check=True)


def _kill_mid_run(sshd: SshServer, shared: Path, mode: str,
                  pick: Callable[[int], int]) -> tuple[dict[str, Any], int]:
    """A run of ``mode`` (a daemonizing tree) on the host; once its daemon runs, ``pick(the
    supervisor's pid)`` is killed with -9 as the remote account. Asserts that nothing of the
    run is left there within 5 s and that the local run ends; its result and the supervisor."""
    sid = new_stream_id()
    pidfile = shared / "pids"
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(run_local(
        sshd, shared, sid, mode=mode, action="wait", heartbeat_s=30.0,
        env={"FAKE_PIDFILE": str(pidfile)})))
    thread.start()
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pidfile.exists(), "the daemon never started on the host"
    time.sleep(0.3)
    daemons = [int(p) for p in pidfile.read_text().split()]
    marked = remote_processes(sid)
    [supervisor] = {_ppid(pid) for pid in marked} - set(marked)
    _kill_as_remote(sshd, pick(supervisor))
    killed = time.monotonic()
    while (remote_processes(sid) or any(map(_alive, daemons))) and \
            time.monotonic() - killed < 5.0:
        time.sleep(0.02)
    left = remote_processes(sid) + [p for p in daemons if _alive(p)]
    assert left == [], f"left on the remote 5 s after the kill: {left}"
    thread.join(30)
    assert not thread.is_alive(), "the local run hung"
    return out, supervisor


@pytest.mark.parametrize("mode", ["daemon", "scrubbed_daemon"])
def test_the_supervisor_killed_with_9_leaves_nothing(sshd: SshServer, shared: Path,
                                                     mode: str) -> None:
    out, supervisor = _kill_mid_run(sshd, shared, mode, lambda supervisor: supervisor)
    assert not _alive(supervisor)
    assert out["stop_reason"] == "error", out
    assert any(f"the supervisor on {ALIAS} was killed (signal 9); its tree was "
               "ended" in e for e in out["errors"]), out


def test_the_watcher_killed_ends_the_tree_too(sshd: SshServer, shared: Path) -> None:
    """The other way round: a `kill -9` of the watcher (the process sshd started) ends the ssh
    session; the supervisor sees its link close and ends the tree, as on any disconnect."""
    out, _ = _kill_mid_run(sshd, shared, "daemon", _ppid)
    assert out["stop_reason"] == "error", out
    assert any("lost" in e for e in out["errors"]), out
