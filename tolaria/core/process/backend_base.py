"""The process backend interface (backend.py chooses one; ADR 0016): ``ProcInfo`` and
``ProcessBackend``. Light, like backend.py: no typing, no dataclasses."""

from __future__ import annotations

import abc
import os
import sys

#: Clock ticks per second: the unit of ``ProcInfo.start``.
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: The POSIX signal numbers a stop sends, spelled out (``signal`` is one import more on the
#: abort's path, and Windows has no SIGKILL to name).
SIGTERM = 15
SIGKILL = 9


class ProcInfo:
    """What a stop knows of one process at one moment: the fields of ``/proc/PID/stat`` it uses
    (or psutil's and POSIX's equivalents)."""

    __slots__ = ("pgid", "pid", "ppid", "sid", "start", "state")

    def __init__(self, pid: int, state: bytes, ppid: int, pgid: int, sid: int,
                 start: int) -> None:
        self.pid = pid
        #: ``stat``'s one-letter state (b"R", b"S", b"Z"...).
        self.state = state
        self.ppid = ppid
        self.pgid = pgid
        self.sid = sid
        #: Start time in clock ticks after boot: with the pid, a process's identity.
        self.start = start

    @property
    def zombie(self) -> bool:
        return self.state in (b"Z", b"X")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProcInfo) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash((self.pid, self.start))

    def __repr__(self) -> str:
        return (f"ProcInfo(pid={self.pid}, state={self.state!r}, ppid={self.ppid}, "
                f"pgid={self.pgid}, sid={self.sid}, start={self.start})")


class ProcessBackend(abc.ABC):
    """The platform needs of the stop engine. Readers never raise for a process that vanished
    or hides: they return None (or an empty answer)."""

    #: ``linux`` or ``portable``.
    name = ""
    #: Whether ``ignores_signal`` can know (the linux backend reads SigIgn; psutil cannot).
    reads_signal_masks = False

    # -- enumerate ---------------------------------------------------------------------------
    @abc.abstractmethod
    def pids(self) -> list[int]:
        """Every pid now."""

    @abc.abstractmethod
    def info(self, pid: int) -> ProcInfo | None:
        """Parent, group, session, start time and state of ``pid``; None when gone."""

    def snapshot(self) -> list[ProcInfo]:
        """``info`` of every process now (the ones that are gone by then left out)."""
        return [found for found in map(self.info, self.pids()) if found is not None]

    @abc.abstractmethod
    def children(self, pid: int) -> list[int] | None:
        """The direct children of ``pid`` when that is cheaper than a full scan, else None
        (the caller then scans every process once)."""

    @abc.abstractmethod
    def environ(self, pid: int) -> bytes | None:
        """The raw NUL-separated environment of ``pid``; None when unreadable (gone, another
        user's, or made non-dumpable)."""

    @abc.abstractmethod
    def real_uid(self, pid: int) -> int | None:
        """The real uid of ``pid`` (readable even when its environment is not)."""

    @abc.abstractmethod
    def ignores_signal(self, pid: int, sig: int) -> bool:
        """Whether ``pid`` has ``sig`` set to SIG_IGN now; False when that cannot be known
        (see ``reads_signal_masks``)."""

    @abc.abstractmethod
    def start_ticks(self, pid: int) -> int | None:
        """``info(pid).start`` alone, cheaply (``tolaria abort`` compares it)."""

    @abc.abstractmethod
    def now_ticks(self) -> int:
        """Clock ticks since boot now, on the clock of ``ProcInfo.start`` (0 when unknown)."""

    @abc.abstractmethod
    def cmdline(self, pid: int) -> list[str] | None:
        """The command line of ``pid``, None when unreadable."""

    @abc.abstractmethod
    def cwd(self, pid: int) -> str | None:
        """The working folder of ``pid``, None when unreadable."""

    # -- orphans -----------------------------------------------------------------------------
    @abc.abstractmethod
    def enable_subreaper(self) -> bool:
        """Become the reaper of orphans from our descendants where the platform can; returns
        whether that is in effect. Idempotent."""

    @abc.abstractmethod
    def subreaper_active(self) -> bool:
        """Whether orphans of our descendants come back to us (``enable_subreaper`` took)."""

    def group_and_session(self, pid: int) -> tuple[int, int] | None:
        """``(getpgid, getsid)`` of ``pid`` (0: this process); None when gone."""
        if sys.platform == "win32":
            return None
        try:
            return os.getpgid(pid), os.getsid(pid)
        except OSError:
            return None

    def adopted(self) -> list[int] | None:
        """Our own direct children (what a subreaper adopted among them), None when the
        caller has to scan."""
        return self.children(os.getpid())

    # -- signal ------------------------------------------------------------------------------
    def signal_group(self, pgid: int, sig: int) -> bool:
        """``killpg``; False when the group is gone or not ours to signal."""
        if sys.platform == "win32":
            return False
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def signal_pid(self, pid: int, sig: int) -> bool:
        """``kill`` by pid alone (callers that can hold a ``psutil.Process`` use it instead:
        it checks that the pid was not reused)."""
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def reap(self, pids: list[int]) -> None:
        """``waitpid`` the zombies among ``pids`` that are our children now (a subreaper's
        adoptees: the caller never passes a child another waiter owns)."""
        if sys.platform == "win32":
            return
        me = os.getpid()
        for pid in pids:
            found = self.info(pid)
            if found is None or found.ppid != me or not found.zombie:
                continue
            try:
                os.waitpid(pid, os.WNOHANG)
            except OSError:  # ChildProcessError: someone else reaped it
                continue

    def owner_token(self) -> str:
        """``<pid>:<start ticks>`` of this process: names it uniquely across homes and pid
        reuse. Both backends give the same token on Linux (same clock)."""
        me = os.getpid()
        cached = owner_cache.get(me)
        if cached is None:
            start = self.start_ticks(me)
            cached = owner_cache[me] = f"{me}:{start if start is not None else 0}"
        return cached


#: This process's owner token, by pid (a fork gets its own).
owner_cache: dict[int, str] = {}
