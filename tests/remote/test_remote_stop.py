"""Stop over the link: the stop test zoo run on the remote account through a real sshd.

The local side (turn, link, ssh) runs as the non-root ``tolaria-test`` user, the agents as
``tolaria-remote``: only the supervisor on the remote side can have ended them. Checked from
the remote's view (root reads every /proc entry): no process of the run is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from remote.remotehelpers import FAKE_AGENT, run_local
from remote.sshd import SshServer, remote_processes

from tolaria.core.stream_id import new_stream_id

ZOO = ["hang", "ignore_term", "tool", "grandchild_stdout", "daemon", "scrubbed_daemon",
       "catch_term", "tree3", "ignore_term_tree", "hopper"]


def test_runs_to_the_end_and_uploads_once(sshd: SshServer, shared: Path) -> None:
    sid = new_stream_id()
    result = run_local(sshd, shared, sid, mode="normal", cache_dir=str(shared / "cache"))
    assert result["stop_reason"] == "end_turn", result
    assert result["text"] == "Hello from fake" + "Finished."
    assert result["survivors"] == []
    cached = list((shared / "cache").glob("supervisor-*.pyz"))
    assert len(cached) == 1
    first = cached[0].stat().st_mtime_ns
    again = run_local(sshd, shared, new_stream_id(), mode="normal",
                      cache_dir=str(shared / "cache"))
    assert again["stop_reason"] == "end_turn", again
    assert cached[0].stat().st_mtime_ns == first  # found by its hash: not copied again


def test_a_damaged_cached_supervisor_is_replaced(sshd: SshServer, shared: Path) -> None:
    cache = shared / "cache"
    run_local(sshd, shared, new_stream_id(), mode="normal", cache_dir=str(cache))
    [cached] = cache.glob("supervisor-*.pyz")
    cached.write_text("raise SystemExit('tampered')\n")
    # A file of the one-file layout, even under the bundle's hash, is not used.
    cached.with_suffix(".py").write_text("raise SystemExit('old layout')\n")
    result = run_local(sshd, shared, new_stream_id(), mode="normal", cache_dir=str(cache))
    assert result["stop_reason"] == "end_turn", result
    assert b"tampered" not in cached.read_bytes()


@pytest.mark.parametrize("mode", ZOO)
def test_stop_leaves_nothing_on_the_remote(sshd: SshServer, shared: Path, mode: str) -> None:
    sid = new_stream_id()
    quiet = mode in ("hang", "ignore_term", "catch_term")  # no text: stopped after init
    result = run_local(sshd, shared, sid, mode=mode, action="stop",
                       wait_for="init" if quiet else "text_delta",
                       env={"FAKE_PIDFILE": str(shared / "pids"), "FAKE_HOPLOG":
                            str(shared / "hops")})
    left = result["remote_left"]  # at the scenario's end, before any cleanup of ours
    assert result["stop_reason"] == "cancelled", result
    assert result["survivors"] == [], result
    assert left == [], f"{mode}: left on the remote: {left}"
    pids = (shared / "pids").read_text().split() if (shared / "pids").exists() else []
    assert pids or quiet, "no pids reported"
    alive = [p for p in pids if Path(f"/proc/{p}").exists()
             and b") Z" not in Path(f"/proc/{p}/stat").read_bytes()]
    assert alive == [], f"{mode}: still alive: {alive}"


def test_disconnect_ends_the_tree_within_five_seconds(sshd: SshServer, shared: Path) -> None:
    sid = new_stream_id()
    result = run_local(sshd, shared, sid, mode="ignore_term_tree", action="disconnect",
                       env={"FAKE_PIDFILE": str(shared / "pids")})
    # The link noticed at once and said so; the remote tree went by the supervisor alone.
    assert result["stop_reason"] == "error", result
    assert any("connection" in e and "lost" in e for e in result["errors"]), result
    deadline = result["acted_at"] + 5.0
    while remote_processes(sid) and time.time() < deadline:
        time.sleep(0.05)
    assert remote_processes(sid) == [], "the remote tree outlived the connection by > 5 s"


def _watch_gone(sid: str, run: Callable[[], dict[str, Any]],
                act: Callable[[], None] | None = None) -> tuple[dict[str, Any], float]:
    """Run the scenario in a thread while the remote's view is watched: its result, and the
    moment (time.time()) the remote tree was last seen (after ``act``, if given)."""
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(run()))
    thread.start()
    deadline = time.monotonic() + 30
    while not remote_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert remote_processes(sid), "the agent never started on the host"
    if act is not None:
        time.sleep(0.3)
        act()
    last_seen = time.time()
    while remote_processes(sid) and time.monotonic() < deadline + 30:
        last_seen = time.time()
        time.sleep(0.02)
    thread.join(60)
    return out, last_seen


def test_a_silent_drop_ends_the_tree_by_the_heartbeat(sshd: SshServer, shared: Path) -> None:
    """ssh frozen: the TCP connection stays up, nothing passes (what a dropped network or a
    sleeping laptop looks like to sshd, which keeps the channel): the supervisor's heartbeat
    check ends the tree."""
    sid = new_stream_id()
    result, gone_at = _watch_gone(sid, lambda: run_local(
        sshd, shared, sid, mode="ignore_term_tree", action="freeze", hold=7.0, heartbeat_s=3.0))
    assert result["acted_at"] > 0, result
    assert gone_at - result["acted_at"] < 5.0, gone_at - result["acted_at"]
    assert remote_processes(sid) == []


def test_killing_the_remote_sshd_session_ends_the_tree(sshd: SshServer, shared: Path) -> None:
    sid = new_stream_id()
    killed: list[float] = []

    def kill_session() -> None:
        agent = remote_processes(sid)[0]
        supervisor = _ppid(agent)
        while _name(supervisor) != "sshd":  # the agent -> the supervisor -> the session's sshd
            supervisor = _ppid(supervisor)
        killed.append(time.time())
        os.kill(supervisor, signal.SIGKILL)

    result, gone_at = _watch_gone(sid, lambda: run_local(
        sshd, shared, sid, mode="ignore_term_tree", action="wait", heartbeat_s=30.0),
        kill_session)
    assert killed
    assert gone_at - killed[0] < 5.0
    assert result["stop_reason"] == "error", result
    assert any("lost" in e for e in result["errors"]), result


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])


def _name(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def test_stdin_and_a_flood_pass_the_link_intact(sshd: SshServer, shared: Path) -> None:
    prompt = "".join(f"line {i} of a long prompt\n" for i in range(20_000))  # ~0.5 MB
    result = run_local(sshd, shared, new_stream_id(), prompt=prompt,
                       command=["python3", str(FAKE_AGENT), "echo_stdin"])
    assert result["stop_reason"] == "end_turn", result
    assert result["text"] == prompt
    flood = run_local(sshd, shared, new_stream_id(), mode="flood",
                      env={"FAKE_FLOOD_LINES": "5000"})
    assert flood["stop_reason"] == "end_turn", flood
    assert flood["deltas"] == 5000 and flood["in_order"]


def test_tolaria_killed_with_9_ends_the_remote_tree(sshd: SshServer, shared: Path) -> None:
    """The local side dies at once (no stop, no watchdog in this scenario): its link notices it
    was orphaned and closes, and the supervisor ends the tree."""
    sid = new_stream_id()
    marker = f"TOLARIA_STREAM_ID={sid}".encode()  # the link carries the run's marker
    links: list[int] = []

    def kill_tolaria() -> None:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmd = (entry / "cmdline").read_bytes()
                    ours = marker in (entry / "environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"tolaria.core.remote.link" in cmd and ours:  # not another run's link
                    links.append(int(entry.name))
        assert links
        scenario = _ppid(links[0])
        killed.append(time.time())
        os.kill(scenario, signal.SIGKILL)

    killed: list[float] = []
    result, gone_at = _watch_gone(sid, lambda: _killed_run(sshd, shared, sid), kill_tolaria)
    assert killed and result.get("killed"), result
    assert gone_at - killed[0] < 5.0
    deadline = time.monotonic() + 10
    for link in links:  # orphaned to us (the test process is a subreaper) or to init
        while time.monotonic() < deadline and Path(f"/proc/{link}").exists() and \
                b") Z" not in Path(f"/proc/{link}/stat").read_bytes():
            time.sleep(0.05)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(link, 0)


def _killed_run(sshd: SshServer, shared: Path, sid: str) -> dict[str, Any]:
    try:
        run_local(sshd, shared, sid, mode="ignore_term_tree", action="wait", heartbeat_s=30.0)
    except AssertionError:  # the scenario died: that was the point
        return {"killed": True}
    return {"killed": False}


def test_an_acp_agent_on_the_host_is_cancelled_and_its_tool_ended(sshd: SshServer,
                                                                 shared: Path) -> None:
    """ACP's JSON-RPC passes the link both ways; the stop's session/cancel reaches the agent."""
    acp = str(FAKE_AGENT.parent / "fake_acp_agent.py")
    sid = new_stream_id()
    done = run_local(sshd, shared, new_stream_id(), protocol="acp",
                     command=["python3", acp, "normal"])
    assert done["stop_reason"] == "end_turn", done
    result = run_local(sshd, shared, sid, protocol="acp", command=["python3", acp, "normal"],
                       prompt="SLEEP now", action="stop", wait_for="tool_start",
                       env={"FAKE_PIDFILE": str(shared / "sleep.pid")})
    assert result["stop_reason"] == "cancelled", result
    assert result["survivors"] == []
    assert remote_processes(sid) == []
