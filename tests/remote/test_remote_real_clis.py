"""Real Claude Code and Codex run on the host (the remote account, through a real sshd) against
the loopback fake model, stopped while their shell tool runs ``sleep 300``.

The CLIs are the e2e tier's pinned packages, put where the remote account can run them
(tests/remote/remoteclis.py); the local side (turn, link, ssh) runs as the non-root
``tolaria-test`` user, so only the supervisor on the host can have ended the tree. Checked from
the remote's view (root reads every /proc entry): no process of the run is left there.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from e2e.fake_model import FakeModelServer
from remote.remoteclis import remote_bin, remote_env
from remote.remotehelpers import run_local
from remote.sshd import SshServer, remote_processes

from tolaria.core.stream_id import new_stream_id

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(360)]

#: A cold node CLI start over ssh on 2 loaded cores, then the model's tool call.
TURN_S = 180.0


def _remote_sleeps(sid: str) -> list[int]:
    """The run's ``sleep 300`` (the tool's) on the remote account."""
    out = []
    for pid in remote_processes(sid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", b"300"]:
            out.append(pid)
    return out


def _alive(pid: int) -> bool:
    try:
        return b") Z" not in Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_real_cli_stopped_on_the_host_leaves_nothing(
        agent: str, sshd: SshServer, shared: Path, model_server: FakeModelServer) -> None:
    cli, bin_folder = remote_bin(agent)
    env = remote_env(cli, bin_folder, shared / f"{agent}-home", model_server.url)
    work = shared / "work"
    work.mkdir()
    work.chmod(0o777)
    sid = new_stream_id()
    go = shared / "go"  # made once the tool's sleep runs there: the scenario stops then
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out.update(run_local(sshd, shared, sid, timeout=TURN_S + 60, agent=agent,
                                 permission_mode="full", prompt="E2E-SLEEP: run the slow command",
                                 env=env, cwd=str(work), action="stop", wait_file=str(go),
                                 wait_s=TURN_S, settle=0.2, heartbeat_s=10.0))
        except AssertionError as exc:
            out["failed"] = str(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + TURN_S
    while not _remote_sleeps(sid) and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    sleeps = _remote_sleeps(sid)
    tree = remote_processes(sid)
    go.touch()
    thread.join(TURN_S)
    assert sleeps, f"the tool's sleep never ran on the host: {out}"
    assert not thread.is_alive(), "the stopped turn did not end"
    assert "failed" not in out, out["failed"]
    assert out["stop_reason"] == "cancelled", out
    assert out["survivors"] == [], out
    assert "I'll run it." in out["text"], out  # the partial output is kept
    assert out["remote_left"] == [], f"left on the remote: {out['remote_left']}"
    assert [p for p in tree if _alive(p)] == [], f"{agent}: still alive: {tree}"
    assert len(tree) >= 3, tree  # the CLI, the tool's shell and its sleep at least
