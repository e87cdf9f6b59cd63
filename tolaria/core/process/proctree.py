"""Finding and ending every process of a run. See docs/adr/0002-stop-strategy.md.

Real agent CLIs run their shell tool in a *new session*, and some tools double-fork, so neither
"kill the child" nor "kill the child's process group" is enough. A run's processes are found
three ways, before anything is signalled:

1. descendants of the agent (psutil, recursively);
2. every process whose environment carries ``TOLARIA_STREAM_ID=<id>`` (inherited by everything
   the agent starts, even after ``setsid`` + double fork, unless a process clears it);
3. on Linux, orphans re-parented to this process because it is a child subreaper.

Each found process is kept as a ``psutil.Process`` (pid + create time), so a recycled pid is
never signalled. Zombies count as gone. We never ``waitpid`` a child asyncio owns; only pids
that were *adopted* (re-parented to us) are reaped here.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import psutil

from tolaria.core.events import Survivor
from tolaria.core.process.fdspare import with_spare_fd

ENV_MARKER = "TOLARIA_STREAM_ID"
#: Set in this process's own environment once it is a subreaper, so everything it (or Qt, or a
#: library) starts for itself inherits it; agents' environments drop it. An adopted orphan
#: carrying it (a browser started through xdg-open, say) is never taken for a run's process.
APP_CHILD_MARKER = "TOLARIA_APP_CHILD"
#: Children this process spawned on purpose (agents, probes): never taken for adopted orphans.
_own_children: set[int] = set()


def remember_own_child(pid: int) -> None:
    _own_children.add(pid)


def forget_own_child(pid: int) -> None:
    _own_children.discard(pid)


#: Kept agent processes alive now (docs/adr/0009). While one lives, an adopted orphan without a
#: marker could be its, so no run counts as the "sole run" that may claim such orphans.
_kept_alive = 0


def keeper_started() -> None:
    global _kept_alive
    _kept_alive += 1


def keeper_ended() -> None:
    global _kept_alive
    _kept_alive = max(0, _kept_alive - 1)


def kept_count() -> int:
    return _kept_alive


_PR_SET_CHILD_SUBREAPER = 36
#: How often a stop re-scans for processes forked while it waits (known pids are polled faster).
_RESCAN_S = 0.05
_subreaper_enabled: bool | None = None


def enable_child_subreaper() -> bool:
    """Make this process the reaper of orphans from its descendants (Linux only).

    A tool that double-forks out of the agent's tree is then re-parented to us instead of to
    PID 1, so it stays findable as our child. Idempotent; returns whether it is in effect.
    """
    global _subreaper_enabled
    if _subreaper_enabled is not None:
        return _subreaper_enabled
    _subreaper_enabled = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _subreaper_enabled = bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
            if _subreaper_enabled:
                os.environ[APP_CHILD_MARKER] = str(os.getpid())
        except (OSError, AttributeError):
            _subreaper_enabled = False
    return _subreaper_enabled


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


_HAS_PROC = os.path.isdir("/proc")


def _env_value(env: bytes, needle: bytes) -> bytes | None:
    at = env.find(needle)
    while at > 0 and env[at - 1] != 0:
        at = env.find(needle, at + 1)
    if at < 0:
        return None
    end = env.find(b"\0", at)
    return env[at + len(needle) : end if end >= 0 else len(env)]


def _read_markers(entry: str, needle: bytes, app_needle: bytes) -> tuple[bytes | None, bool]:
    """(TOLARIA_STREAM_ID value, whether TOLARIA_APP_CHILD is set) of /proc/<entry>/environ."""
    try:
        with open(f"/proc/{entry}/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        return None, True  # unreadable: never claim it as an orphan
    return _env_value(env, needle), _env_value(env, app_needle) is not None


def processes_with_marker(stream_id: str) -> list[psutil.Process]:
    """Live processes whose environment holds ``TOLARIA_STREAM_ID=stream_id`` (Linux /proc)."""
    if not os.path.isdir("/proc"):
        return []
    needle = f"{ENV_MARKER}={stream_id}".encode()
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(pid))
    return found


@dataclass
class TreeKiller:
    """Snapshot, signal, poll and verify the processes of one run.

    ``root`` is the agent's own process (may already be gone). Instances are used on the event
    loop thread of the run only.
    """

    stream_id: str
    root: psutil.Process | None
    #: Wall-clock start of the run: an adopted orphan older than this is not the run's.
    since: float = 0.0
    #: Whether this is the only live run, so an adopted orphan without a marker is surely ours.
    sole_run: Callable[[], bool] = lambda: True
    known: dict[tuple[int, float], psutil.Process] = field(default_factory=dict)
    groups: set[int] = field(default_factory=set)

    @with_spare_fd  # a process out of fds must still find the run's processes
    def snapshot(self) -> list[psutil.Process]:
        """Add every currently visible process of the run to ``known``; return the live ones."""
        pids = self._scan_proc() if _HAS_PROC else self._scan_psutil()
        me = os.getpid()
        own_pgid = os.getpgid(0)
        for pid in pids:
            if pid == me:
                continue
            try:
                proc = self.root if self.root is not None and self.root.pid == pid else psutil.Process(pid)
                key = (pid, proc.create_time())
            except psutil.Error:
                continue
            self.known.setdefault(key, proc)
            with contextlib.suppress(OSError):
                pgid = os.getpgid(pid)
                if pgid > 1 and pgid != own_pgid:
                    self.groups.add(pgid)
        return self.alive()

    def _scan_proc(self) -> set[int]:
        """One pass over /proc: the root's and marked processes' descendants, and adopted orphans.

        Reading each process's stat and environ once keeps a snapshot at a few milliseconds
        even on a desktop with hundreds of processes.
        """
        me = os.getpid()
        needle = ENV_MARKER.encode() + b"="
        mine = self.stream_id.encode()
        app_needle = APP_CHILD_MARKER.encode() + b"="
        children: dict[int, list[int]] = {}
        seeds: set[int] = set()
        orphans: list[int] = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read()
                fields = stat[stat.rfind(b")") + 2 :].split()
                state, ppid = fields[0], int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(pid)
            if state == b"Z" or pid == me:
                continue
            marker, app_child = _read_markers(entry, needle, app_needle)
            if marker == mine:
                seeds.add(pid)
            elif ppid == me and marker is None and not app_child and pid not in _own_children:
                orphans.append(pid)
        if self.root is not None and _alive(self.root):
            seeds.add(self.root.pid)
        if _subreaper_enabled and orphans and self.sole_run():
            # Compare on psutil's clock (boot time + start ticks): an orphan born before the
            # agent itself cannot be the run's.
            born = self.since - 1.0
            with contextlib.suppress(psutil.Error, AttributeError):
                born = self.root.create_time() if self.root is not None else born
            for pid in orphans:
                with contextlib.suppress(psutil.Error):
                    if psutil.Process(pid).create_time() >= born:
                        seeds.add(pid)
        found: set[int] = set()
        stack = list(seeds)
        while stack:
            pid = stack.pop()
            if pid in found or pid == me:
                continue
            found.add(pid)
            stack.extend(children.get(pid, ()))
        return found

    def _scan_psutil(self) -> set[int]:
        """Portable fallback (no /proc): descendants of the root."""
        found: set[int] = set()
        if self.root is not None and _alive(self.root):
            found.add(self.root.pid)
            with contextlib.suppress(psutil.Error):
                found.update(c.pid for c in self.root.children(recursive=True))
        return found

    @with_spare_fd
    def alive(self) -> list[psutil.Process]:
        return [p for p in self.known.values() if _alive(p)]

    @with_spare_fd
    def signal_all(self, sig: int) -> None:
        """Signal every remembered group, then every remembered live pid."""
        own_pgid = os.getpgid(0)
        for pgid in self.groups:
            if pgid == own_pgid:
                continue
            # A group is only signalled while one of *our* processes still leads or belongs to
            # it, so a recycled pgid of a stranger is never hit.
            if not any(_pgid_of(p) == pgid for p in self.alive()):
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        for proc in self.alive():
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)

    async def kill(self, grace: float, verify: float = 2.0, poll: float = 0.005, *,
                   root_had_grace: bool = False) -> list[Survivor]:
        """SIGTERM everything, SIGKILL what is left after ``grace`` s; return survivors.

        New processes spawned while we wait (a parent that ignores SIGTERM and keeps forking)
        are picked up by re-snapshotting on every poll. ``root_had_grace``: the agent was
        already asked to stop (its polite window ran out), so it gets SIGKILL at once instead of
        a second grace period; its tools still get SIGTERM first. (Measured: Qwen Code cancels
        its tool on SIGTERM, then takes ~7 s to exit.)
        """
        self.snapshot()
        self.signal_all(signal.SIGTERM)
        if root_had_grace and self.root is not None and _alive(self.root):
            with contextlib.suppress(psutil.Error):
                self.root.send_signal(signal.SIGKILL)
        if await self._wait_gone(signal.SIGTERM, grace, poll):
            return self._finish()
        self.signal_all(signal.SIGKILL)
        await self._wait_gone(signal.SIGKILL, verify, poll)
        return self._finish()

    async def _wait_gone(self, sig: int, timeout: float, poll: float) -> bool:
        """Poll the known processes; every ~50 ms rescan for new ones and signal them too.

        Returns True once nothing of the run is alive and a final rescan finds nothing new.
        """
        deadline = time.monotonic() + timeout
        next_scan = time.monotonic() + _RESCAN_S
        while True:
            if not self.alive() or time.monotonic() >= next_scan:
                if not self._resnapshot_and_resignal(sig):
                    return True
                next_scan = time.monotonic() + _RESCAN_S
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(poll)

    def _resnapshot_and_resignal(self, sig: int) -> bool:
        before = set(self.known)
        alive = self.snapshot()
        if set(self.known) - before:
            self.signal_all(sig)
        return bool(alive)

    @with_spare_fd
    def _finish(self) -> list[Survivor]:
        reap_adopted(p.pid for p in self.known.values() if p is not self.root)
        survivors = []
        for proc in self.alive():
            try:
                survivors.append(Survivor(pid=proc.pid, name=proc.name()))
            except psutil.Error:
                continue
        return survivors


def _pgid_of(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except OSError:
        return None


def reap_adopted(pids: Iterable[int]) -> None:
    """``waitpid`` zombies among ``pids`` that were re-parented to us (we are subreaper).

    Only pids we did not spawn ourselves reach here (the agent process itself, which asyncio
    waits for, is excluded by the caller), so no other waiter's exit status is stolen.
    """
    me = os.getpid()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.ppid() != me or proc.status() != psutil.STATUS_ZOMBIE:
                continue
        except psutil.Error:
            continue
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
