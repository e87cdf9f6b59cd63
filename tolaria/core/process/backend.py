"""The stop engine's one seam to the platform (docs/adr/0016-process-backend-seam.md).

Everything a stop needs from the operating system goes through one ``ProcessBackend``: list the
processes with their parent, session, group, start time, owner, state and environment marker
(and the ignored signals where they can be read), signal a process or a group, find the
children adopted by this process. Two backends:

- ``linux`` (linux_backend.py): reads ``/proc`` directly (procfs.py, procread.py) and makes the
  app a child subreaper, so a double-forked daemon comes back to it.
- ``portable`` (portable_backend.py): psutil's cross-platform API and POSIX calls
  (``os.getpgid``, ``os.getsid``, ``os.killpg``); no subreaper, and no ``/proc`` read of
  Tolaria's own (psutil reads it on Linux: that is its business). What macOS and the BSDs use,
  and what ``TOLARIA_PROCESS_BACKEND=portable`` forces on Linux, to prove it there.

The choice: ``TOLARIA_PROCESS_BACKEND`` (``linux``, ``portable``, ``auto``), else the
``[behaviour] process_backend`` setting (``configure``), else automatic (linux where ``/proc``
is, portable elsewhere). Light on purpose: ``tolaria abort`` imports this (no typing, no
dataclasses: tests/cli/test_fast_commands.py pins its imports).
"""

from __future__ import annotations

import abc
import os
import sys

#: The environment variable that forces a backend (for tests, and for users).
ENV_VAR = "TOLARIA_PROCESS_BACKEND"
CHOICES = ("auto", "linux", "portable")
#: Clock ticks per second: the unit of ``ProcInfo.start``.
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: The POSIX signal numbers a stop sends, spelled out (``signal`` is one import more on the
#: abort's path, and Windows has no SIGKILL to name).
SIGTERM = 15
SIGKILL = 9
#: What the ``[behaviour] process_backend`` setting chose (``configure``): auto until then.
_configured = "auto"
_instances: dict[str, ProcessBackend] = {}


class BackendChoiceError(ValueError):
    """An unknown or unusable backend name; its text is one line for the user."""


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
        cached = _owner.get(me)
        if cached is None:
            start = self.start_ticks(me)
            cached = _owner[me] = f"{me}:{start if start is not None else 0}"
        return cached


#: This process's owner token, by pid (a fork gets its own).
_owner: dict[int, str] = {}


def auto_name() -> str:
    """The backend a platform gets by default: linux where /proc is, portable elsewhere."""
    return "linux" if sys.platform.startswith("linux") and os.path.isdir("/proc/self") else "portable"


def _check(value: str, where: str) -> str:
    choice = value.strip().lower() or "auto"
    if choice not in CHOICES:
        raise BackendChoiceError(f"{where}={value!r} is not a process backend (one of "
                                 f"{', '.join(CHOICES)})")
    if choice == "linux" and auto_name() != "linux":
        raise BackendChoiceError(f"{where}=linux needs Linux with /proc; use portable or auto")
    return auto_name() if choice == "auto" else choice


def name() -> str:
    """The backend in force: the environment variable, else the setting, else automatic.
    Raises BackendChoiceError for an unknown or unusable name."""
    forced = os.environ.get(ENV_VAR)
    if forced:
        return _check(forced, ENV_VAR)
    return _check(_configured, "[behaviour] process_backend")


def configure(choice: str) -> None:
    """Apply the ``[behaviour] process_backend`` setting (the environment variable still wins).
    Raises BackendChoiceError, leaving the choice as it was, for a bad value."""
    global _configured
    _check(choice, "[behaviour] process_backend")
    _configured = choice


def problem() -> str | None:
    """The one-line complaint about the backend choice, None when it is fine."""
    try:
        name()
    except BackendChoiceError as exc:
        return str(exc)
    return None


def current() -> ProcessBackend:
    """The backend in force (one instance per name). An unusable choice falls back to the
    automatic one: a stop must still work; ``problem`` says what was wrong."""
    try:
        chosen = name()
    except BackendChoiceError:
        chosen = auto_name()
    found = _instances.get(chosen)
    if found is None:
        if chosen == "linux":
            from tolaria.core.process.linux_backend import LinuxBackend

            found = LinuxBackend()
        else:
            from tolaria.core.process.portable_backend import PortableBackend

            found = PortableBackend()
        _instances[chosen] = found
    return found
