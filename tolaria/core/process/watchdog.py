"""Agents die with the app: a tiny watchdog process that outlives a killed Tolaria by moments.

A Stop can only be honoured while Tolaria lives. If Tolaria itself is SIGKILLed (or crashes, or
the OOM killer picks it), nothing in it runs any more, and its runs' agents (each in its own
session, so no terminal hangup or group signal reaches them) would run on. So each Tolaria
process starts one watchdog child on the first run: ``python -m tolaria.core.process.watchdog``, in a
new session, its stdin the read end of a pipe whose only write end Tolaria holds. Tolaria writes
``+<stream id>`` (with a tab and the run's tracking file, tracking.py) when a run starts and
``-<stream id>`` when it has ended (tree gone). When the watchdog reads EOF, Tolaria is gone,
however it died (the kernel closes the pipe). The watchdog then ends what each run still in its
live set had written down in its tracking file (aftercrash.py: processes by pid and start time,
members of its sessions and groups, frozen first, then SIGKILLed: daemons that scrubbed their
environment too), then SIGKILLs every process whose environment carries ``TOLARIA_STREAM_ID`` of
such a run *and* whose ``TOLARIA_OWNER`` names the app (so another Tolaria's run that reuses a
stream id is never hit): their process groups and pids, a few rounds to catch forks in flight.

On a clean exit Tolaria has already stopped its runs, so the set is empty: the pipe is closed at
interpreter exit and the watchdog leaves without touching anything.

Why not ``PR_SET_PDEATHSIG``: it only covers the direct child, and real agents put their tools in
new sessions and double-fork. The watchdog finds them by the same marker a Stop uses.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from tolaria.core.process import backend

log = logging.getLogger(__name__)

#: Set in the watchdog's environment: leak checks recognise it by this.
ENV_WATCHDOG = "TOLARIA_WATCHDOG"
#: proctree.ENV_MARKER, spelled out: the watchdog process imports nothing heavy (psutil, asyncio)
#: so it is reading its pipe within ~50 ms of being started.
ENV_MARKER = "TOLARIA_STREAM_ID"
#: proctree.OWNER_MARKER, spelled out likewise; the app passes its own value in ENV_OWNER.
OWNER_MARKER = "TOLARIA_OWNER"
ENV_OWNER = "TOLARIA_WATCHDOG_OWNER"
#: Rounds of scan-and-kill after EOF, and the pause between them (forks in flight get caught).
KILL_ROUNDS = 5
ROUND_PAUSE_S = 0.05


# --- the watchdog process ---------------------------------------------------------------------


def _owned(env: bytes, owner: bytes | None) -> bool:
    """Whether a raw environment names ``owner`` in TOLARIA_OWNER (any, when None)."""
    return owner is None or (b"\0" + OWNER_MARKER.encode() + b"=" + owner + b"\0") in b"\0" + env + b"\0"


def _marked(stream_ids: set[bytes], owner: bytes | None = None) -> list[tuple[int, bytes]]:
    """(pid, stream id) of live processes whose TOLARIA_STREAM_ID is one of ``stream_ids`` (and
    whose TOLARIA_OWNER is ``owner``, when given)."""
    prefix = ENV_MARKER.encode() + b"="
    me = os.getpid()
    be = backend.current()  # linux: /proc read directly; portable: psutil's environ
    found: list[tuple[int, bytes]] = []
    for pid in be.pids():
        if pid == me:
            continue
        env = be.environ(pid)
        if env is None or prefix not in env or not _owned(env, owner):
            continue
        for item in env.split(b"\0"):
            if item.startswith(prefix) and item[len(prefix):] in stream_ids:
                found.append((pid, item[len(prefix):]))
                break
    return found


def kill_marked(stream_ids: Iterable[bytes], rounds: int = KILL_ROUNDS,
                pause: float = ROUND_PAUSE_S, owner: bytes | None = None) -> int:
    """SIGKILL every process of the given runs (of ``owner``'s, when given), groups first;
    return how many pids were hit."""
    wanted = set(stream_ids)
    if not wanted:
        return 0
    be = backend.current()
    own_pgid = (be.group_and_session(0) or (0, 0))[0]
    hit: set[int] = set()
    for _ in range(rounds):
        found = _marked(wanted, owner)
        if not found:
            break
        pids = {pid for pid, _sid in found}
        for pid in pids:
            pgid = (be.group_and_session(pid) or (0, 0))[0]
            # A group is killed only when one of the run's own processes leads it, so a
            # stranger's group is never hit (a marked process may sit in someone's group).
            if pgid in pids and pgid not in (own_pgid, 0, 1):
                be.signal_group(pgid, backend.SIGKILL)
        for pid in pids:
            be.signal_pid(pid, backend.SIGKILL)
        hit |= pids
        time.sleep(pause)
    return len(hit)


def follow(stdin: Iterable[bytes]) -> dict[bytes, list[bytes]]:
    """Follow the ``+id[<TAB>tracking file]`` / ``-id`` lines until EOF; return the runs still
    live at EOF, each with the tracking files (tracking.py) its live registrations named."""
    live: dict[bytes, list[bytes]] = {}  # a list: two registries of one app may reuse an id
    for raw in stdin:
        if not raw.endswith(b"\n"):
            break  # a torn last line: the app died while writing it
        line = raw.rstrip(b"\r\n")
        sid, _tab, track = line[1:].partition(b"\t")
        if line.startswith(b"+"):
            live.setdefault(sid, []).append(track)
        elif line.startswith(b"-") and sid in live:
            live[sid].pop(0)
            if not live[sid]:
                del live[sid]
    return live


def serve(stdin: Iterable[bytes]) -> set[bytes]:
    """Follow the lines until EOF; return the runs still live at EOF."""
    return set(follow(stdin))


def main() -> int:
    # Signals meant for the app's terminal or group never reach us (new session), but be sure:
    # only EOF (or SIGKILL) ends the watchdog.
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):  # no SIGHUP on Windows
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    live = follow(sys.stdin.buffer)
    tracks = [path for paths in live.values() for path in paths if path]
    if tracks:
        # What a Stop would have ended, from the runs' own records: daemons without a marker
        # (a scrubbed or unreadable environment) too. Imported only now (start-up stays fast).
        from tolaria.core.process import aftercrash

        with contextlib.suppress(Exception):
            aftercrash.end(tracks)
    owner = os.environ.get(ENV_OWNER)
    kill_marked(set(live), owner=owner.encode() if owner else None)
    return 0


# --- the app's side -------------------------------------------------------------------------


class _Client:
    """The app's end: one watchdog per process, started on the first run, fed under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = 0  # pid that started it (a fork must start its own)
        self._failed = False
        self._registered_atexit = False

    def _ensure(self) -> int | None:
        """The write fd of this process's watchdog, starting it if needed (lock held)."""
        if self._proc is not None and self._owner == os.getpid():
            return self._proc.stdin.fileno() if self._proc.stdin is not None else None
        if self._failed:
            return None
        be = backend.current()
        env = dict(os.environ)
        env.pop(ENV_MARKER, None)
        env.pop(OWNER_MARKER, None)
        env[ENV_WATCHDOG] = "1"
        env[ENV_OWNER] = be.owner_token()
        # The app's backend, whether the environment or the setting chose it.
        env[backend.ENV_VAR] = be.name
        # Importable from wherever the app was started (a source checkout is not on sys.path
        # of a fresh interpreter by itself).
        root = str(Path(__file__).resolve().parents[3])  # the folder that holds the tolaria package
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        try:
            # -S (no site-packages, with the linux backend, where /proc does the job of
            # psutil): the watchdog reads its pipe ~100 ms sooner, so a clean exit of the app
            # is not held up by it.
            fast = ["-S"] if be.name == "linux" else []
            proc = subprocess.Popen(
                [sys.executable, *fast, "-m", "tolaria.core.process.watchdog"],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env, close_fds=True,
                # A new session: a Ctrl+C or a signal to the app's group must not take the
                # watchdog with the app; it is what has to survive the app.
                start_new_session=True,
            )
        except OSError as exc:
            self._failed = True
            log.warning("could not start the watchdog (agents may outlive a crash): %s", exc)
            return None
        assert proc.stdin is not None
        # Never block a run's loop on a stuck watchdog: a full pipe drops the line instead.
        if sys.platform != "win32":  # never started there (runs are refused: ADR 0014)
            os.set_blocking(proc.stdin.fileno(), False)
        from tolaria.core.process import proctree

        proctree.remember_own_child(proc.pid)
        self._proc, self._owner = proc, os.getpid()
        if not self._registered_atexit:
            atexit.register(self.close)
            self._registered_atexit = True
        return proc.stdin.fileno()

    def _send(self, line: str) -> None:
        with self._lock:
            fd = self._ensure()
            if fd is None:
                return
            try:
                os.write(fd, line.encode())
            except OSError as exc:  # BlockingIOError, BrokenPipeError: the watchdog is stuck/gone
                log.warning("watchdog did not take %r: %s", line.strip(), exc)

    def run_started(self, stream_id: str, track: str | None = None) -> None:
        """A run is live; ``track``: its tracking file (tracking.py), read after a crash."""
        # A tab or a newline in the path would break the line: the marker still covers the run.
        path = track if track and not any(c in track for c in "\t\r\n") else ""
        self._send(f"+{stream_id}\t{path}\n" if path else f"+{stream_id}\n")

    def run_ended(self, stream_id: str) -> None:
        with self._lock:
            if self._proc is None or self._owner != os.getpid():
                return
        self._send(f"-{stream_id}\n")

    def pid(self) -> int | None:
        with self._lock:
            return self._proc.pid if self._proc is not None and self._owner == os.getpid() else None

    def close(self, timeout: float = 2.0) -> None:
        """Close the pipe (the watchdog kills what is still live, then exits) and reap it."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is None or self._owner != os.getpid():
                return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("watchdog %d did not exit within %s s", proc.pid, timeout)
        from tolaria.core.process import proctree

        proctree.forget_own_child(proc.pid)


_client = _Client()
run_started = _client.run_started
run_ended = _client.run_ended
watchdog_pid = _client.pid
close = _client.close


if __name__ == "__main__":
    sys.exit(main())
