"""Raw reads of Linux ``/proc`` with ``os`` alone: the part of procfs.py ``tolaria abort`` needs.

procfs.py (the tree kill) builds on these; claim.py uses them to find a ``tolaria run`` that does
not listen yet, on the abort's path, which imports nothing heavy (procfs's dataclasses and
signal cost it ~30 ms; tests/cli/test_fast_commands.py pins the import set). Every reader
returns None, never raises, for a process that vanished or hides.
"""

from __future__ import annotations

import os

#: A page: what one read of a ``cmdline`` or ``environ`` gives at most, and almost all fit.
_PAGE = 4096


def read(path: str, *, short: bool = False) -> bytes | None:
    """A whole /proc file, or None. Unbuffered ``os.read``: half the cost of ``open()``, which
    counts when a stop reads one file of every process on the machine. ``short``: a file the
    kernel hands over in one read (``stat``, ``status``): no second read to see the end."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if short:
            return os.read(fd, 16384)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_strings(path: str, limit: int = 1 << 20) -> bytes | None:
    """``cmdline`` or ``environ`` (NUL-separated strings, up to ``limit`` bytes), or None. One
    read for what fits in a page: the kernel fills every read of these files to its size, so a
    read shorter than a page is the end (a second read to see it would cost every process of a
    scan). Not for seq_file files (``children``): a read of those may stop short of the end."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        data = os.read(fd, _PAGE)
        while data and len(data) % _PAGE == 0 and len(data) < limit:  # a page full: more
            more = os.read(fd, 65536)
            if not more:
                break
            data += more
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


def pids() -> list[int]:
    """Every pid in ``/proc`` now."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def start_ticks(pid: int | str) -> int | None:
    """Field 22 of ``/proc/PID/stat``, the start time in clock ticks after boot: with the pid,
    a process's identity. None when the process is gone (or on a system without /proc)."""
    raw = read(f"/proc/{pid}/stat", short=True)
    try:
        # The command name (field 2) may hold spaces and parentheses: split after the last ")".
        return None if raw is None else int(raw[raw.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def env_value(env: bytes, name: bytes) -> bytes | None:
    """The value of ``name`` in a raw NUL-separated environment, or None if unset."""
    needle = name + b"="
    at = env.find(needle)
    while at > 0 and env[at - 1] != 0:
        at = env.find(needle, at + 1)
    if at < 0:
        return None
    end = env.find(b"\0", at)
    return env[at + len(needle) : end if end >= 0 else len(env)]


def cmdline(pid: int | str) -> list[str] | None:
    """The command line of ``pid`` (``/proc/PID/cmdline``), None when unreadable or empty (a
    kernel thread, a zombie)."""
    data = read_strings(f"/proc/{pid}/cmdline")
    if not data:
        return None
    return [os.fsdecode(a) for a in data.rstrip(b"\0").split(b"\0")]


def environ(pid: int | str) -> bytes | None:
    """The raw environment of ``pid`` (first MB), None when unreadable (gone, not dumpable)."""
    return read_strings(f"/proc/{pid}/environ")


def cwd(pid: int | str) -> str | None:
    """The working folder of ``pid``, None when unreadable."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def owner_uid(pid: int | str) -> int | None:
    """The owner of ``/proc/PID`` (the process's effective uid while it is dumpable)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
