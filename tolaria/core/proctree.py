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

ENV_MARKER = "TOLARIA_STREAM_ID"
#: Children this process spawned on purpose (agents, probes): never taken for adopted orphans.
_own_children: set[int] = set()


def remember_own_child(pid: int) -> None:
    _own_children.add(pid)


def forget_own_child(pid: int) -> None:
    _own_children.discard(pid)
_PR_SET_CHILD_SUBREAPER = 36
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
        except (OSError, AttributeError):
            _subreaper_enabled = False
    return _subreaper_enabled


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


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

    def snapshot(self) -> list[psutil.Process]:
        """Add every currently visible process of the run to ``known``; return the live ones."""
        candidates: list[psutil.Process] = []
        if self.root is not None and _alive(self.root):
            candidates.append(self.root)
            with contextlib.suppress(psutil.Error):
                candidates.extend(self.root.children(recursive=True))
        candidates.extend(processes_with_marker(self.stream_id))
        candidates.extend(self._adopted_orphans())
        # Descendants of anything known (a marker-less grandchild of a daemon, say).
        for proc in list(candidates):
            with contextlib.suppress(psutil.Error):
                candidates.extend(proc.children(recursive=True))
        own_pgid = os.getpgid(0)
        for proc in candidates:
            try:
                key = (proc.pid, proc.create_time())
            except psutil.Error:
                continue
            if proc.pid == os.getpid():
                continue
            self.known.setdefault(key, proc)
            with contextlib.suppress(OSError, psutil.Error):
                pgid = os.getpgid(proc.pid)
                if pgid > 1 and pgid != own_pgid:
                    self.groups.add(pgid)
        return self.alive()

    def _adopted_orphans(self) -> list[psutil.Process]:
        """Our own children that we did not spawn: orphans re-parented to us (subreaper).

        One that carries this run's marker was found already; one that carries another run's
        marker is not ours; one whose environment was scrubbed is claimed only while this is
        the only live run (it cannot belong to another) and it was born after the run started.
        """
        if not _subreaper_enabled:
            return []
        found = []
        try:
            children = psutil.Process().children()
        except psutil.Error:
            return []
        for child in children:
            if child.pid in _own_children or not _alive(child):
                continue
            try:
                if child.create_time() < self.since - 1.0:
                    continue
                with open(f"/proc/{child.pid}/environ", "rb") as fh:
                    env = fh.read().split(b"\0")
            except (OSError, psutil.Error):
                continue
            if any(v.startswith(ENV_MARKER.encode() + b"=") for v in env):
                continue
            if self.sole_run():
                found.append(child)
        return found

    def alive(self) -> list[psutil.Process]:
        return [p for p in self.known.values() if _alive(p)]

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

    async def kill(self, grace: float, verify: float = 2.0, poll: float = 0.005) -> list[Survivor]:
        """SIGTERM everything, SIGKILL what is left after ``grace`` s; return survivors.

        New processes spawned while we wait (a parent that ignores SIGTERM and keeps forking)
        are picked up by re-snapshotting on every poll.
        """
        self.snapshot()
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not self._resnapshot_and_resignal(signal.SIGTERM):
                return self._finish()
            await asyncio.sleep(poll)
        self.signal_all(signal.SIGKILL)
        deadline = time.monotonic() + verify
        while time.monotonic() < deadline:
            if not self._resnapshot_and_resignal(signal.SIGKILL):
                return self._finish()
            await asyncio.sleep(poll)
        return self._finish()

    def _resnapshot_and_resignal(self, sig: int) -> bool:
        before = set(self.known)
        alive = self.snapshot()
        if set(self.known) - before:
            self.signal_all(sig)
        return bool(alive)

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
