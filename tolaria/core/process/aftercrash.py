"""After the app died: end what its runs' stops would have ended, from their tracking files.

Run by the watchdog (watchdog.py) once its pipe reads EOF, for each run still live then. A
tracking file (tracking.py) names the run's processes as (pid, start ticks), its process groups
and its sessions. What is ended:

- each recorded process whose start ticks still match (a pid the kernel gave to another
  process since has another start time: it is never touched);
- every member of a recorded session or group born after the run's agent (a session or group
  id cannot be reused while it has members, so a member is the run's, unless the id was freed
  and taken again: then its leader's start ticks differ and only members born after the run
  are taken, as a Stop takes them);
- the descendants of all of those (what they forked since the last look).

As a Stop does with a pid hopper (freeze.py), everything found is SIGSTOPped first, sweep after
sweep until a sweep finds nothing new, then SIGKILLed. The file is removed afterwards.

Imports only ``os``, ``json``, ``signal``, ``time`` and procfs's readers: the watchdog imports
this only after EOF, so its start-up (reading its pipe within ~50 ms) is not slowed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tolaria.core.process import procfs
from tolaria.core.process.backend_base import ProcInfo

#: At most this long for the sweeps of one crash (then whatever is stopped is killed anyway).
SWEEP_TIMEOUT_S = 1.5
_SWEEP_PAUSE_S = 0.001


@dataclass
class Leftovers:
    """What the tracking files of a dead app's live runs name."""

    procs: dict[int, int] = field(default_factory=dict)  # pid -> start ticks
    #: id -> (leader's start ticks or None, born: the run's agent start ticks)
    groups: dict[int, tuple[int | None, int]] = field(default_factory=dict)
    sessions: dict[int, tuple[int | None, int]] = field(default_factory=dict)

    def add(self, record: dict[str, Any]) -> None:
        born = int(record.get("born") or 0)
        for pid, start in record.get("procs", ()):
            self.procs[int(pid)] = int(start)
        for kind, into in (("groups", self.groups), ("sessions", self.sessions)):
            for ident, leader in record.get(kind, ()):
                if int(ident) > 1:
                    into[int(ident)] = (None if leader is None else int(leader), born)


def read(paths: Iterable[str | bytes]) -> Leftovers:
    """The records of ``paths`` (missing or damaged files are skipped)."""
    found = Leftovers()
    for path in paths:
        try:
            with open(path, "rb") as fh:
                record = json.loads(fh.read(1 << 20))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            with contextlib.suppress(TypeError, ValueError):
                found.add(record)
    return found


def _member(st: ProcInfo, ident: int, known: dict[int, tuple[int | None, int]]) -> bool:
    """Whether ``st`` belongs to the recorded session or group ``ident`` (see the docstring)."""
    leader, born = known[ident]
    if st.start < born:
        return False
    if leader is None:
        return True
    now = procfs.stat(ident)
    # The leader is alive and the same, or gone (the id is held by its members alone).
    return now is None or now.start == leader


def _candidates(left: Leftovers, stopped: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """(pid, start) of every live process of the runs now, found as the docstring says."""
    if sys.platform == "win32":  # the watchdog finds marked processes only there (psutil)
        return set()
    me = os.getpid()
    own = {os.getpgid(0), os.getsid(0)}
    children: dict[int, list[ProcInfo]] = {}
    found: dict[int, ProcInfo] = {}
    for pid in procfs.pids():
        st = procfs.stat(pid)
        if st is None or st.zombie or pid == me:
            continue
        children.setdefault(st.ppid, []).append(st)
        if (left.procs.get(pid) == st.start
                or (st.sid in left.sessions and st.sid not in own
                    and _member(st, st.sid, left.sessions))
                or (st.pgid in left.groups and st.pgid not in own
                    and _member(st, st.pgid, left.groups))):
            found[pid] = st
    stack = list(found.values()) + [procfs.stat(pid) for pid, _start in stopped]
    while stack:
        st = stack.pop()
        if st is None:
            continue
        for child in children.get(st.pid, ()):
            if child.pid not in found:
                found[child.pid] = child
                stack.append(child)
    return {(pid, st.start) for pid, st in found.items()}


def end(paths: Iterable[str | bytes], timeout: float = SWEEP_TIMEOUT_S) -> int:
    """Freeze and SIGKILL what the tracking files at ``paths`` name; remove the files; return
    how many processes were killed."""
    paths = list(paths)
    if sys.platform == "win32":
        return 0
    left = read(paths)
    stopped: set[tuple[int, int]] = set()
    if procfs.HAS_PROC and (left.procs or left.groups or left.sessions):
        deadline = time.monotonic() + timeout
        quiet = 0
        while quiet < 2 and time.monotonic() < deadline:
            new = _candidates(left, stopped) - stopped
            for pid, _start in new:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGSTOP)
            stopped |= new
            quiet = 0 if new else quiet + 1
            time.sleep(_SWEEP_PAUSE_S)
        for pid, start in stopped:
            st = procfs.stat(pid)
            if st is not None and st.start == start:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)
        _remove_files(os.fsdecode(path))
    return len(stopped)


def _remove_files(track: str) -> None:
    """The run's private files (tracking.FILES_SUFFIX, next to its tracking file): an MCP
    configuration may hold a server's token."""
    if not track.endswith(".track.json"):
        return
    folder = track[: -len(".track.json")] + ".files"
    if os.path.isdir(folder) and not os.path.islink(folder):
        shutil.rmtree(folder, ignore_errors=True)
