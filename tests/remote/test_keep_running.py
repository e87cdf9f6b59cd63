"""Keep running when disconnected (ADR 0032), through a real sshd.

The local side (turn, link, ssh) runs as the non-root user, the agent on the remote account. The
link is cut (its ssh killed with -9, the link itself held still so it cannot reconnect at once,
or the whole local process killed): the remote tree goes on, its output kept in the supervisor's
ring; the link (or a second process, after a "restart") reattaches, gets what it missed from its
offset on - no gap, no duplicate - and Stop ends the tree there with 0 survivors.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nonroot import as_other_user, other_user_prefix, other_user_python, python_env
from remote.remotehelpers import ENGINE, engine_home, run_local
from remote.sshd import SshServer, kill_remote, remote_processes

from tolaria.core.stream_id import new_stream_id


def _in_thread(run: Callable[[], dict[str, Any]]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out.update(run())
        except AssertionError as exc:
            out["failed"] = str(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, out


def _wait_file(path: Path, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), f"{path.name} never appeared"


def _kept(shared: Path, **cfg: Any) -> dict[str, Any]:
    return {"mode": "ticker", "keep_running": True, "heartbeat_s": 1.0,
            "cache_dir": str(shared / "cache"), "hold_file": str(shared / "held"),
            "env": {"FAKE_PIDFILE": str(shared / "pids"), "FAKE_TICK_S": "0.01"}, **cfg}


def test_killed_ssh_reattaches_replays_without_gap_and_stops(sshd: SshServer,
                                                             shared: Path) -> None:
    sid = new_stream_id()
    thread, out = _in_thread(lambda: run_local(sshd, shared, sid, **_kept(
        shared, action="drop_hold", wait_for="text_delta", hold=3.5, stop_after=1.5)))
    try:
        _wait_file(shared / "held")
        time.sleep(2.5)  # past the supervisor's heartbeat: it has let the link go
        assert remote_processes(sid), "the kept run was ended on a dead link"
        sock = shared / "cache" / "runs" / f"{sid}.sock"
        assert stat.S_ISSOCK(sock.stat().st_mode)
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    finally:
        thread.join(90)
    assert "failed" not in out, out
    assert out["stop_reason"] == "cancelled", out
    assert out["survivors"] == [], out
    ticks = out["ticks"]
    assert len(ticks) > 300, len(ticks)  # ~0.5 s before, 3.5 s held, 1.5 s after
    assert ticks == list(range(len(ticks))), "a gap or a duplicate in the replayed output"
    assert sum("reconnecting to" in n for n in out["notes"]) == 1, out["notes"]
    assert any("reattached to" in n and "replayed" in n for n in out["notes"]), out["notes"]
    assert not any("dropped" in n for n in out["notes"]), out["notes"]
    assert remote_processes(sid) == []
    assert not sock.exists()


def test_a_stop_asked_while_reconnecting_ends_the_tree_once_attached(sshd: SshServer,
                                                                     shared: Path) -> None:
    """Stop comes as the link wakes to a dead connection (held, or written into the dead one):
    it is delivered with the reattach, and the tree ends there with 0 survivors."""
    sid = new_stream_id()
    out = run_local(sshd, shared, sid, **_kept(shared, action="drop_hold", wait_for="text_delta",
                                               hold=2.0, stop_after=0.0))
    said = {k: out.get(k) for k in ("stop_reason", "survivors", "notes", "errors", "stop_ms")}
    assert out["stop_reason"] == "cancelled", said
    assert out["survivors"] == [], said
    assert out["stop_ms"] < 8000, said  # not the link's local kill after the wait for a report
    assert remote_processes(sid) == []


def test_an_overflowing_buffer_says_what_was_dropped(sshd: SshServer, shared: Path) -> None:
    sid = new_stream_id()
    cfg = _kept(shared, action="drop_hold", wait_for="text_delta", hold=3.0, stop_after=1.0,
                buffer_bytes=65536)
    cfg["env"].update(FAKE_TICK_PAD="2000", FAKE_TICK_S="0.005")
    out = run_local(sshd, shared, sid, **cfg)
    assert out["stop_reason"] == "cancelled", out
    assert out["survivors"] == [], out
    dropped = [n for n in out["notes"] if "bytes of output were dropped while disconnected" in n]
    assert dropped, out["notes"]
    ticks = out["ticks"]
    assert ticks == sorted(set(ticks)), "a duplicate in the replayed output"
    assert any(b - a > 1 for a, b in itertools.pairwise(ticks)), "no gap despite the drop"
    assert remote_processes(sid) == []


def test_nobody_attached_in_time_ends_the_tree(sshd: SshServer, shared: Path) -> None:
    sid = new_stream_id()
    thread, out = _in_thread(lambda: run_local(sshd, shared, sid, **_kept(
        shared, action="drop_hold", wait_for="text_delta", hold=9.0, keep_s=2.0,
        grace=0.5)))
    try:
        _wait_file(shared / "held")
        held = time.monotonic()
        while remote_processes(sid) and time.monotonic() - held < 8.5:
            time.sleep(0.05)
        gone_after = time.monotonic() - held
        assert remote_processes(sid) == [], "the unattended run outlived its keep time"
        assert gone_after > 2.0, gone_after  # not before the keep time
    finally:
        thread.join(90)
    assert out.get("stop_reason") == "error", out
    assert any("gone" in e for e in out["errors"]), out["errors"]


def test_after_a_restart_another_process_reattaches_and_stops(sshd: SshServer,
                                                              shared: Path) -> None:
    """The first local process is killed with -9 mid-run (its link closes the connection):
    the kept run goes on; a second process attaches with the stream id from offset 0, gets the
    whole output, and its Stop leaves nothing on the remote."""
    sid = new_stream_id()
    try:
        thread, first = _in_thread(lambda: run_local(sshd, shared, sid, keep_remote=True,
                                                     **_kept(shared, action="wait")))
        _wait_file(shared / "pids")
        time.sleep(0.5)
        links = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                 and b"tolaria.core.remote.link" in _read(p / "cmdline")
                 and f"TOLARIA_STREAM_ID={sid}".encode() in _read(p / "environ").split(b"\0")]
        assert links
        os.kill(_ppid(links[0]), signal.SIGKILL)  # the "window", killed with -9
        thread.join(60)
        assert "failed" in first, first
        for link in links:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(link, 0)
        time.sleep(2.0)  # the first link is gone, and so is its connection
        assert remote_processes(sid), "the kept run did not survive Tolaria's death"
        second = run_local(sshd, shared, sid, **_kept(shared, action="finish", stop_after=1.0,
                                                      attach_offset=0))
    finally:
        kill_remote(sid)
    assert second["stop_reason"] == "cancelled", second
    assert second["survivors"] == [], second
    ticks = second["ticks"]
    assert len(ticks) > 100 and ticks == list(range(len(ticks))), ticks[:5]
    assert remote_processes(sid) == []


def test_attaching_to_a_run_that_is_gone_says_so(sshd: SshServer, shared: Path) -> None:
    out = run_local(sshd, shared, new_stream_id(), **_kept(shared, attach_offset=0))
    assert out["stop_reason"] == "error", out
    assert any("gone" in e for e in out["errors"]), out["errors"]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])


def test_the_window_killed_mid_turn_reattaches_at_its_next_start(sshd: SshServer,
                                                                  shared: Path) -> None:
    """The engine as the window runs it: a keep-running chat on the host, its process killed
    with -9 mid-turn; the next engine's start (crash recovery) reattaches the turn instead of
    marking it interrupted, the stored output is the whole run (replayed), Stop ends it there."""
    home, cfg = engine_home(sshd, shared)
    argv = [*other_user_prefix(), other_user_python(), str(ENGINE), "start"]
    first = subprocess.Popen([*argv, json.dumps(cfg)], env=python_env(home), cwd=home,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sid = ""
    try:
        assert first.stdout is not None
        sid = json.loads(first.stdout.readline())["stream_id"]
        _wait_file(shared / "pids")
        time.sleep(0.5)
        first.kill()  # the window, killed with -9
        first.communicate(timeout=30)
        _reap_links(sid)
        time.sleep(2.0)
        assert remote_processes(sid), "the kept run did not survive the window"
        done = as_other_user([other_user_python(), str(ENGINE), "reattach",
                              json.dumps({**cfg, "stream_id": sid})],
                             env=python_env(home), cwd=home, timeout=90)
        assert done.returncode == 0, done.stderr[-3000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        if sid:
            kill_remote(sid)
    assert out["reattached"], out
    assert (out["status"], out["stop_reason"]) == ("cancelled", "cancelled"), out
    assert out["survivors"] == [], out
    ticks = [int(line.split()[1]) for line in out["text"].splitlines() if line.startswith("tick")]
    assert len(ticks) > 100 and ticks == list(range(len(ticks))), ticks[:5]
    assert remote_processes(sid) == []


def _reap_links(sid: str) -> None:
    """The killed process's link closes the connection and exits (orphaned to us, a
    subreaper, or to init): reaped here so no process is left."""
    deadline = time.monotonic() + 10
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and b"tolaria.core.remote.link" in _read(entry / "cmdline") \
                and f"TOLARIA_STREAM_ID={sid}".encode() in _read(entry / "environ").split(b"\0"):
            pid = int(entry.name)
            while time.monotonic() < deadline and entry.exists() and \
                    b") Z" not in _read(entry / "stat"):
                time.sleep(0.05)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
