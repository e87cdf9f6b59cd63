"""What the watchdog knows of each run, and how it ends them after a crash (issue 22 item 10).

The environment marker alone misses what Stop finds by other means: a daemon that cleared its
environment (``env -i``, ``execve`` with an empty one) and one whose environment is unreadable
to its own user (non-dumpable, as ssh-agent). So while a run lives, the app tells the watchdog
what its tree finder saw (tracking.py): every process by pid *and start time*, the run's
sessions and process groups, and the start time of its agent. One line each on the pipe:

    +SID               a run started            -SID               it ended (forget it)
    bSID TICKS         its agent's start time   pSID PID:TICKS     one of its processes
    sSID SESSION       one of its sessions      gSID PGID          one of its process groups

After EOF (the app is gone) the watchdog ends, for each run still live: the processes carrying
its marker and the app's owner token; every recorded process still alive *with the recorded
start time* (a recycled pid is never hit); every member of a recorded session or group born
after the run's agent (a session id is a pid: one leader that is not the run's means the id was
reused, and it is skipped); and everything below those. They are frozen first and killed after
(freeze.py): a daemon cannot fork away while its parent is being killed.

Standard library only: the watchdog runs with ``python -S``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tolaria.core.process import freeze

#: How long the watchdog may spend freezing a crashed app's runs before it kills what it has.
BUDGET_S = 2.0


@dataclass
class RunRecord:
    """What the app told the watchdog about one live run."""

    count: int = 0  # starts minus ends: two registries of one app may reuse an id
    born: int = 0
    procs: set[tuple[int, int]] = field(default_factory=set)
    sessions: set[int] = field(default_factory=set)
    groups: set[int] = field(default_factory=set)


def follow(lines: Iterable[bytes]) -> dict[bytes, RunRecord]:
    """Follow the app's lines until EOF; return the runs still live then, with their records.

    A torn last line (the app died while writing it) is ignored, and so is any line that does
    not parse: the watchdog must never die of what it reads.
    """
    runs: dict[bytes, RunRecord] = {}
    for raw in lines:
        if not raw.endswith(b"\n"):
            break
        line = raw.strip()
        if not line:
            continue
        kind, rest = line[:1], line[1:]
        sid, _, value = rest.partition(b" ")
        if kind == b"+":
            runs.setdefault(sid, RunRecord()).count += 1
            continue
        record = runs.get(sid)
        if record is None:
            continue
        if kind == b"-":
            record.count -= 1
            if record.count <= 0:
                del runs[sid]
            continue
        try:
            if kind == b"p":
                pid, _, ticks = value.partition(b":")
                record.procs.add((int(pid), int(ticks)))
            elif kind == b"s":
                record.sessions.add(int(value))
            elif kind == b"g":
                record.groups.add(int(value))
            elif kind == b"b":
                record.born = int(value)
        except ValueError:
            continue
    return runs


@dataclass(frozen=True)
class _Row:
    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int
    zombie: bool


def _rows() -> dict[int, _Row]:
    rows = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                raw = fh.read()
            f = raw[raw.rfind(b")") + 2 :].split()
            rows[int(entry)] = _Row(int(entry), int(f[1]), int(f[2]), int(f[3]), int(f[19]),
                                    f[0] in (b"Z", b"X"))
        except (OSError, IndexError, ValueError):
            continue
    return rows


def recorded_pids(runs: Mapping[bytes, RunRecord], rows: Mapping[int, _Row]) -> set[int]:
    """The live processes the records name: by pid and start time, by session, by group."""
    me = os.getpid()
    own = freeze.own_ids()
    found: set[int] = set()
    for record in runs.values():
        procs = dict(record.procs)
        for pid, start in record.procs:
            row = rows.get(pid)
            if row is not None and row.start == start:
                found.add(pid)
        # A session or group id is its leader's pid: led by a process that is not the run's
        # (recorded with another start time, or born before the run), the id was reused.
        units = set()
        for unit in (record.sessions | record.groups) - own:
            leader = rows.get(unit)
            if leader is None or procs.get(unit) == leader.start or (
                    unit not in procs and leader.start >= record.born):
                units.add(unit)
        for row in rows.values():
            if row.start >= record.born and (row.sid in units or row.pgid in units):
                found.add(row.pid)
    found.discard(me)
    return found


def end_runs(runs: Mapping[bytes, RunRecord],
             find_marked: Callable[[], Iterable[int]] | None = None, *,
             quiet_sweeps: int = freeze.QUIET_SWEEPS) -> freeze.Outcome:
    """Freeze and kill every process of ``runs`` (see the module docstring).

    ``find_marked``: the pids carrying one of the runs' markers now (the watchdog's
    environment scan). The first sweep reads all of /proc; later ones only follow the
    children of what is frozen (a frozen process forks nothing, so nothing new can appear
    elsewhere but in flight). The watchdog runs it first with ``quiet_sweeps=0`` (one sweep,
    the kill at once), then again in full, which catches what was in flight.
    """
    me = os.getpid()
    passes = 0

    def candidates(frozen: Mapping[int, int]) -> set[int]:
        nonlocal passes
        passes += 1
        if passes > 1:
            found = freeze.descendants(frozen)
            found.discard(me)
            return found
        rows = _rows()
        seeds = recorded_pids(runs, rows)
        if find_marked is not None:
            seeds |= set(find_marked())
        children: dict[int, list[int]] = {}
        for row in rows.values():
            children.setdefault(row.ppid, []).append(row.pid)
        found = freeze.descendants(seeds, lambda pid: children.get(pid, ()))
        found.discard(me)
        return found

    return freeze.freeze_and_kill(candidates, freeze.look_proc, freeze.send_exact,
                                  budget_s=BUDGET_S, quiet_sweeps=quiet_sweeps)
