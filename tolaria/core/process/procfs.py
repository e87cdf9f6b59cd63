"""Reading Linux ``/proc`` directly, for the tree kill (proctree.py).

Why not psutil here: a stop reads a few small files of every process it considers, and what it
needs (parent, session, group, start time, ignored signals, the environment) is one ``read`` each.
These readers never raise for a process that vanished or hides: they return None.

What a user can read about their own processes: ``stat`` and ``status`` always; ``environ`` only
while the process is *dumpable*. A daemon that calls ``prctl(PR_SET_DUMPABLE, 0)`` (ssh-agent,
gpg-agent) makes its ``/proc`` files root-owned, so its environment (our marker) is unreadable
to the very user who started it. Such a process is recognised by what stays readable: its
parentage (adopted by us, the subreaper), its session, its start time and its owner.
"""

from __future__ import annotations

import os

from tolaria.core.process.backend_base import ProcInfo, owner_cache

# Re-exported: the raw readers are shared with the light abort path (procread's docstring).
from tolaria.core.process.procread import env_value as env_value
from tolaria.core.process.procread import pids as pids
from tolaria.core.process.procread import read as _read

HAS_PROC = os.path.isdir("/proc")
#: Whether the kernel lists children (CONFIG_PROC_CHILDREN); without it the full scan has to do.
_HAS_CHILDREN_FILE = HAS_PROC and os.path.exists(f"/proc/self/task/{os.getpid()}/children")
#: SIGTERM's number (POSIX: 15), spelled out: ``signal`` is one import more on the abort's path.
_SIGTERM = 15
#: SigIgn / SigCgt in /proc/PID/status are hex masks with bit (N - 1) for signal N.
SIGTERM_BIT = 1 << (_SIGTERM - 1)
#: The fields of ``/proc/PID/stat`` a stop uses (the seam's record: backend.py).
Stat = ProcInfo


def stat(pid: int | str) -> Stat | None:
    """``/proc/PID/stat``, or None if the process is gone."""
    raw = _read(f"/proc/{pid}/stat", short=True)
    if raw is None:
        return None
    try:
        # The command name (field 2) may hold spaces and parentheses: split after the last ")".
        fields = raw[raw.rfind(b")") + 2 :].split()
        return Stat(int(pid), fields[0], int(fields[1]), int(fields[2]), int(fields[3]),
                    int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def children(pid: int) -> list[int] | None:
    """Direct children of ``pid`` (every thread's), or None if the kernel cannot tell.

    ``/proc/PID/task/TID/children`` lists the children *that thread* forked, so all threads are
    read. A vanished process (or thread) has no children.
    """
    if not _HAS_CHILDREN_FILE:
        return None
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        raw = _read(f"/proc/{pid}/task/{tid}/children")
        if raw is not None:
            out.extend(int(c) for c in raw.split())
    return out


def _status_field(pid: int, name: bytes) -> bytes | None:
    raw = _read(f"/proc/{pid}/status", short=True)
    at = -1 if raw is None else raw.find(b"\n" + name)
    if raw is None or at < 0:
        return None
    end = raw.find(b"\n", at + 1)
    return raw[at + 1 + len(name) : end if end >= 0 else len(raw)].strip()


def ignores_sigterm(pid: int) -> bool:
    """Whether ``pid`` has SIGTERM set to SIG_IGN: a SIGTERM can do nothing to it.

    A process that *catches* SIGTERM (SigCgt) is not an ignorer: it may be cleaning up.
    """
    return ignores_signal(pid, _SIGTERM)


def ignores_signal(pid: int, sig: int) -> bool:
    """Whether ``pid`` has ``sig`` set to SIG_IGN now: the kernel discards such a signal, so
    the process cannot act on it (a polite stop need not wait for it). False when unknown."""
    mask = _status_field(pid, b"SigIgn:")
    try:
        return mask is not None and bool(int(mask, 16) & (1 << (sig - 1)))
    except ValueError:
        return False


def real_uid(pid: int) -> int | None:
    """The real uid of ``pid`` (``status`` stays readable for a non-dumpable process)."""
    uids = _status_field(pid, b"Uid:")
    try:
        return int(uids.split()[0]) if uids else None
    except (ValueError, IndexError):
        return None


def environ(pid: int | str) -> bytes | None:
    """The raw environment of ``pid``, or None when unreadable (gone, or not dumpable)."""
    return _read(f"/proc/{pid}/environ")


def owner_token() -> str:
    """This process's ``<pid>:<start ticks>``, as ``ProcessBackend.owner_token`` gives it (one
    cache): for the linux-only modules that read /proc themselves."""
    me = os.getpid()
    cached = owner_cache.get(me)
    if cached is None:
        own = stat(me)
        cached = owner_cache[me] = f"{me}:{own.start if own is not None else 0}"
    return cached


CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def now_ticks() -> int:
    """Clock ticks since boot now, on the clock of ``Stat.start`` (0 without /proc)."""
    try:
        with open("/proc/uptime", "rb") as fh:
            return int(float(fh.read().split()[0]) * CLK_TCK)
    except (OSError, ValueError, IndexError):
        return 0
