"""Quitting with a kept run (ADR 0032, "Quit"), through a real sshd.

The engine, as the window's Quit runs it, with a keep-running chat and a plain chat live on the
host: the plain run is stopped as always (its tree gone, its turn cancelled); the kept run's link
closes without a stop, so its tree goes on there and its stored turn stays running, with what
it had said, and no local process of it is left. A second process (the next start) takes it
back with the whole output and stops it with 0 survivors; the user may delete the chat while
it is taken back; a host that no longer has the run ends the turn with that said.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nonroot import as_other_user, other_user_python, python_env
from remote.remotehelpers import ENGINE, engine_home
from remote.sshd import ALIAS, SshServer, kill_remote, remote_account, remote_processes


def _engine(home: Path, phase: str, cfg: dict[str, Any]) -> dict[str, Any]:
    done = as_other_user([other_user_python(), str(ENGINE), phase, json.dumps(cfg)],
                         env=python_env(home), cwd=home, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _stored(db: str, stream_id: str) -> tuple[str, str | None, int]:
    with sqlite3.connect(db) as conn:
        status, reason, turn_id = conn.execute(
            "SELECT status, stop_reason, id FROM turns WHERE stream_id = ?", (stream_id,)).fetchone()
        events = conn.execute("SELECT COUNT(*) FROM events WHERE turn_id = ?",
                              (turn_id,)).fetchone()[0]
    return status, reason, events


def _local_links(stream_id: str) -> list[int]:
    """Local processes of the run (its link, its ssh): the local account's, by marker."""
    needle = f"TOLARIA_STREAM_ID={stream_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"tolaria.core.remote.link" in \
                    (entry / "cmdline").read_bytes() and \
                    needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _lose(stream_id: str) -> None:
    """Kill the run's kept supervisor, its watcher and its tree on the remote account (-9)."""
    tree = set(remote_processes(stream_id))
    uid = next(iter(os.stat(f"/proc/{pid}").st_uid for pid in tree))
    for pid in list(tree):
        with contextlib.suppress(OSError, IndexError, ValueError):
            while True:  # up through the supervisor and its watcher, the account's own
                pid = int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
                if pid <= 1 or os.stat(f"/proc/{pid}").st_uid != uid or \
                        b"sshd" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    break
                tree.add(pid)
    for pid in tree:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _quit(sshd: SshServer, shared: Path, run_for: float = 1.5
          ) -> Iterator[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """The engine's quit with a kept and a plain run live (``run_for`` seconds after the kept
    link is spawned); whatever happens after, neither run is left on the host."""
    home, cfg = engine_home(sshd, shared)
    out = _engine(home, "quit", {**cfg, "run_for": run_for})
    try:
        yield home, cfg, out
    finally:
        kill_remote(out["kept"])
        kill_remote(out["plain"])


def _until(done: Callable[[], object], within: float = 10) -> None:
    deadline = time.monotonic() + within
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_quit_leaves_the_kept_run_on_the_host_and_the_next_start_takes_it_back(
        sshd: SshServer, shared: Path) -> None:
    with _quit(sshd, shared) as (home, cfg, out):
        kept, plain = out["kept"], out["plain"]
        assert out["kept_at_quit"] == {kept: ALIAS}, out
        assert remote_processes(plain) == [], "the plain run outlived the quit"
        assert _stored(cfg["db"], plain)[:2] == ("cancelled", "cancelled")
        assert remote_processes(kept), "the kept run was stopped by the quit"
        status, reason, events = _stored(cfg["db"], kept)
        assert (status, reason) == ("running", None), "the kept turn was ended by the quit"
        assert events > 0, "what the kept run had said before the quit is not stored"
        assert _local_links(kept) == [], "the kept run's link outlived the quit"
        assert out["quit_s"] < 8, out  # no wait for a stop that never comes
        time.sleep(1.5)  # past the supervisor's heartbeat: it has let the link go
        assert remote_processes(kept), "the kept run ended once the link was gone"
        again = _engine(home, "reattach", {**cfg, "stream_id": kept, "stop_after": 1.0})
    assert again["reattached"], again
    assert (again["status"], again["stop_reason"]) == ("cancelled", "cancelled"), again
    assert again["survivors"] == [], again
    ticks = [int(line.split()[1]) for line in again["text"].splitlines()
             if line.startswith("tick")]
    assert len(ticks) > 200 and ticks == list(range(len(ticks))), ticks[:5]
    assert remote_processes(kept) == []


def test_a_quit_while_the_link_still_connects_keeps_the_run_all_the_same(
        sshd: SshServer, shared: Path) -> None:
    """Quit the moment the kept run's link is spawned (ssh connecting, the supervisor brought):
    its START goes first, then the link lets go; the run is there to be taken back."""
    with _quit(sshd, shared, run_for=0.0) as (home, cfg, out):
        kept = out["kept"]
        assert out["kept_at_quit"] == {kept: ALIAS}, out
        assert _stored(cfg["db"], kept)[:2] == ("running", None)
        _until(lambda: remote_processes(kept))
        assert remote_processes(kept), "the run was not started on the host"
        again = _engine(home, "reattach", {**cfg, "stream_id": kept, "stop_after": 0.5})
    assert (again["status"], again["survivors"]) == ("cancelled", []), again
    assert again["text"].startswith("tick 0\n"), again["text"][:100]
    assert remote_processes(kept) == []


def test_deleting_the_chat_while_it_is_taken_back_ends_the_run_there(
        sshd: SshServer, shared: Path) -> None:
    with _quit(sshd, shared) as (home, cfg, out):
        kept = out["kept"]
        assert remote_processes(kept), "the kept run was stopped by the quit"
        again = _engine(home, "reattach", {**cfg, "stream_id": kept, "delete": True})
        assert again["deleted"], again
        _until(lambda: not remote_processes(kept))
        assert remote_processes(kept) == [], "the deleted chat's run goes on on the host"


def test_a_kept_run_the_host_no_longer_has_ends_with_that_said(
        sshd: SshServer, shared: Path) -> None:
    with _quit(sshd, shared) as (home, cfg, out):
        kept = out["kept"]
        _lose(kept)  # the host lost it meanwhile (rebooted, its supervisor killed)
        _until(lambda: not remote_processes(kept))
        again = _engine(home, "reattach", {**cfg, "stream_id": kept, "stop_after": 0.5})
    assert (again["status"], again["stop_reason"]) == ("failed", "error"), again
    assert any("gone" in e for e in again["errors"]), again["errors"]


def test_a_kept_turn_taken_back_keeps_the_checkpoint_of_its_first_start(
        sshd: SshServer, shared: Path) -> None:
    """What the agent changed on the host while Tolaria was closed is the turn's change: the
    turn taken back keeps the before-state of its start (no new snapshot mid-run, which would
    hide those changes from review and Revert and replace the pre-turn files' ref)."""
    account = remote_account()
    repo = shared / "repo"
    repo.mkdir()
    (repo / "kept.txt").write_text("there before the turn\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home, cfg = engine_home(sshd, shared)
    cfg["cwd"] = str(repo)

    def owned_by_the_host_account() -> None:
        for path in [repo, *repo.rglob("*")]:
            os.lchown(path, account.pw_uid, account.pw_gid)

    owned_by_the_host_account()
    out = _engine(home, "quit", {**cfg, "run_for": 1.0})
    try:
        assert remote_processes(out["kept"]), "the kept run was stopped by the quit"
        (repo / "while-away.txt").write_text("written while Tolaria was closed\n")
        owned_by_the_host_account()
        again = _engine(home, "reattach", {**cfg, "stream_id": out["kept"],
                                           "stop_after": 0.5, "changes": True})
    finally:
        kill_remote(out["kept"])
        kill_remote(out["plain"])
    assert again["reattached"], again
    assert again["befores"] == 1, again
    assert "while-away.txt" in again["changed"], again
    assert "kept.txt" not in again["changed"], again
