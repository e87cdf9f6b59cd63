"""The ``portable`` process backend: psutil's cross-platform API and POSIX calls.

What macOS and the BSDs use (no ``/proc`` there), and what ``TOLARIA_PROCESS_BACKEND=portable``
forces on Linux so that it is proven there (docs/adr/0016-process-backend-seam.md). Tolaria's
own code opens nothing under ``/proc`` here; psutil does on Linux, as it does its work.

What it cannot do, and what follows (docs/RELIABILITY.md, "The portable backend"):

- no child subreaper: an orphan goes to PID 1 (launchd), so a double-forked process that also
  scrubbed its environment is not found (one that kept its marker, or stayed in the run's
  session, still is);
- no signal masks: a process that ignores SIGTERM is only known as such when the grace ends,
  so it gets its SIGKILL then (the stop takes the grace period), and a polite signal to an
  agent that ignores it gets its whole window;
- no children lists: finding descendants is one pass over every process (psutil's), so the
  known tree costs what a full scan costs.
"""

from __future__ import annotations

import os
import sys
import time

import psutil

from tolaria.core.process.backend_base import ProcessBackend, ProcInfo

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: psutil's status names as ``stat``'s one-letter states (ProcInfo.state).
_STATES = {psutil.STATUS_ZOMBIE: b"Z", psutil.STATUS_DEAD: b"X", psutil.STATUS_RUNNING: b"R",
           psutil.STATUS_SLEEPING: b"S", psutil.STATUS_DISK_SLEEP: b"D",
           psutil.STATUS_STOPPED: b"T"}


def _ticks(create_time: float) -> int:
    """psutil's create time (wall clock) as clock ticks after boot: ``stat``'s clock on Linux
    (psutil computes its create time from it), so both backends agree there."""
    return max(0, round((create_time - psutil.boot_time()) * _CLK_TCK))


def _environ_bytes(env: dict[str, str]) -> bytes:
    return b"\0".join(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items())


def _info(pid: int, ppid: int, status: str, created: float) -> ProcInfo | None:
    state = _STATES.get(status, b"S")
    if sys.platform == "win32":  # no groups, no sessions (runs are refused there: ADR 0014)
        return ProcInfo(pid, state, ppid, 0, 0, _ticks(created))
    try:
        pgid, sid = os.getpgid(pid), os.getsid(pid)
    except OSError:
        if state not in (b"Z", b"X"):
            return None  # gone between the two reads
        pgid = sid = 0  # a zombie may have no group to ask about any more
    return ProcInfo(pid, state, ppid, pgid, sid, _ticks(created))


class PortableBackend(ProcessBackend):
    name = "portable"
    reads_signal_masks = False

    def pids(self) -> list[int]:
        try:
            return psutil.pids()
        except OSError:
            return []

    def info(self, pid: int) -> ProcInfo | None:
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                ppid, status, created = proc.ppid(), proc.status(), proc.create_time()
        except (psutil.Error, OSError):
            return None
        return _info(pid, ppid, status, created)

    def snapshot(self) -> list[ProcInfo]:
        # process_iter keeps its Process objects from one call to the next: one read of each
        # process per scan, not two (a stop scans every ~50 ms).
        found = []
        try:
            for proc in psutil.process_iter(["ppid", "status", "create_time"]):
                d = proc.info
                if d["ppid"] is None or d["create_time"] is None:
                    continue  # gone or hidden (AccessDenied leaves None)
                got = _info(proc.pid, d["ppid"], d["status"], d["create_time"])
                if got is not None:
                    found.append(got)
        except OSError:
            pass
        return found

    def children(self, pid: int) -> list[int] | None:
        # psutil finds children by a pass over every process: the caller's one scan is cheaper.
        return None

    def adopted(self) -> list[int] | None:
        try:
            return [c.pid for c in psutil.Process().children()]
        except (psutil.Error, OSError):
            return []

    def environ(self, pid: int) -> bytes | None:
        try:
            return _environ_bytes(psutil.Process(pid).environ())
        except (psutil.Error, OSError):
            return None

    def real_uid(self, pid: int) -> int | None:
        if sys.platform == "win32":
            return None
        try:
            return int(psutil.Process(pid).uids().real)
        except (psutil.Error, OSError):
            return None

    def ignores_signal(self, pid: int, sig: int) -> bool:
        return False  # psutil cannot read signal dispositions

    def start_ticks(self, pid: int) -> int | None:
        try:
            return _ticks(psutil.Process(pid).create_time())
        except (psutil.Error, OSError):
            return None

    def now_ticks(self) -> int:
        return _ticks(time.time())

    def cmdline(self, pid: int) -> list[str] | None:
        try:
            return psutil.Process(pid).cmdline() or None
        except (psutil.Error, OSError):
            return None

    def cwd(self, pid: int) -> str | None:
        try:
            return psutil.Process(pid).cwd() or None
        except (psutil.Error, OSError):
            return None

    def enable_subreaper(self) -> bool:
        return False  # no such thing off Linux; on Linux this backend stands for them

    def subreaper_active(self) -> bool:
        return False
