"""Freeze, then kill: ending processes that fork away faster than they can be signalled.

A "pid hopper" (issue 22 item 2) answers SIGTERM by becoming a fork-and-exit chain: each
generation forks the next (in a new session) and exits, so one process lives at any instant and
a new pid appears every ~ms. A SIGKILL aimed at the generation a scan saw lands on a process
that has already handed over to its child; a scan of all of ``/proc`` takes longer than one hop,
so it may see none at all and call the run gone while the chain runs on for minutes.

What cannot be outrun can be stopped: SIGSTOP freezes a process at once (it cannot be caught,
blocked or ignored), and a frozen process can neither fork nor exit. So a sweep SIGSTOPs every
candidate it sees; a child forked in the moment before the stop landed is seen by the next
sweep (as the child of a frozen process, or as our adopted orphan when its parent was already
exiting). The sweeps repeat until one finds nothing new while every frozen process is really
stopped (state ``T``), and only then does everything frozen get SIGKILL, which ends a stopped
process too. Freezing first means no kill is ever aimed at a pid that moved on.

The cgroup freezer would do the same in one write, but only for a run that has a cgroup of its
own: Tolaria's runs do not (the app's processes and its runs share one cgroup, on this machine
``/`` of the v1 freezer hierarchy; a non-root user has no delegated cgroup to create one in),
and freezing the shared one would freeze Tolaria itself. ADR 0016 has the measurements.

Written against three primitives, so it serves a stop in the app (proctree.py, from what its
tree finder sees) and the watchdog after a crash (watchdog.py, from a bare ``/proc`` scan):
``candidates(frozen)`` (pids that may belong to what is being ended, now; it is given the frozen
set, whose children are candidates too), ``look(pid)`` (start time and state, or None when gone)
and ``send(pid, start, signal)`` (signal that very process, never a recycled pid). Imports
nothing but the standard library: the watchdog runs it with ``python -S``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

if sys.platform == "win32":  # neither signal exists there; nothing here runs without /proc
    SIGSTOP = SIGKILL = 0
else:
    SIGSTOP, SIGKILL = signal.SIGSTOP, signal.SIGKILL
#: Sweeps in a row that must find nothing new (with every frozen process stopped) to be done.
QUIET_SWEEPS = 3
#: How long one ``freeze_and_kill`` may sweep before it gives up (the caller scans again later).
BUDGET_S = 0.25


@dataclass(frozen=True)
class Seen:
    """What a sweep needs to know of one process."""

    start: int  # start time (clock ticks after boot): with the pid, the process's identity
    state: bytes  # /proc/PID/stat's state letter

    @property
    def stopped(self) -> bool:
        return self.state in (b"T", b"t")

    @property
    def gone(self) -> bool:
        return self.state in (b"Z", b"X", b"x")


Look = Callable[[int], "Seen | None"]
Send = Callable[[int, int, int], bool]
Candidates = Callable[[Mapping[int, int]], Iterable[int]]


@dataclass
class Outcome:
    #: pid -> start ticks of every process frozen (and then sent SIGKILL).
    frozen: dict[int, int] = field(default_factory=dict)
    sweeps: int = 0
    #: Whether the sweeps came to rest (False: the budget ran out first; what was frozen so far
    #: was killed all the same).
    settled: bool = False


def freeze_and_kill(candidates: Candidates, look: Look, send: Send, *,
                    budget_s: float = BUDGET_S, quiet_sweeps: int = QUIET_SWEEPS) -> Outcome:
    """SIGSTOP every candidate, sweep until nothing new appears, then SIGKILL all of them.

    ``quiet_sweeps=0``: one sweep, then the kill at once, without waiting for the stops to
    land (for a caller that verifies with another call: the watchdog, whose processes are
    not racing anybody and should die as soon as possible)."""
    out = Outcome()
    if quiet_sweeps <= 0:
        out.sweeps = 1
        _sweep(candidates, look, send, out.frozen)
        for pid, start in out.frozen.items():
            send(pid, start, SIGKILL)
        return out
    quiet = 0
    deadline = time.monotonic() + budget_s
    while True:
        out.sweeps += 1
        new = _sweep(candidates, look, send, out.frozen)
        # A SIGSTOP is delivered when the target next runs: until it shows as stopped it may
        # still fork, so a sweep only counts as quiet once every frozen process is at rest.
        resting = all(_at_rest(look, pid, start) for pid, start in out.frozen.items())
        quiet = quiet + 1 if not new and resting else 0
        if quiet >= quiet_sweeps:
            out.settled = True
            break
        if time.monotonic() >= deadline:
            break
        if not new and not resting:
            time.sleep(0.0002)  # let the stops land
    for pid, start in out.frozen.items():
        send(pid, start, SIGKILL)
    return out


def _sweep(candidates: Candidates, look: Look, send: Send, frozen: dict[int, int]) -> bool:
    new = False
    for pid in candidates(frozen):
        seen = look(pid)
        if seen is None or seen.gone:
            continue
        if frozen.get(pid) == seen.start:
            if not seen.stopped:  # someone sent SIGCONT (another process of the run?)
                send(pid, seen.start, SIGSTOP)
            continue
        if send(pid, seen.start, SIGSTOP):
            frozen[pid] = seen.start
            new = True
    return new


def _at_rest(look: Look, pid: int, start: int) -> bool:
    seen = look(pid)
    return seen is None or seen.start != start or seen.stopped or seen.gone


class _Stat(Protocol):
    @property
    def zombie(self) -> bool: ...
    @property
    def start(self) -> int: ...
    @property
    def sid(self) -> int: ...


@dataclass
class HopTraces:
    """The zombies a hopper leaves with us, the child subreaper: proof that it still hops.

    Each generation of a chain exits as soon as it has forked the next, and its parent has
    exited before it, so it dies as *our* child: a zombie we never reap (it is no process we
    know). One pass over /proc can miss every generation (each lives for less than the pass),
    but not their zombies. So a stop is not over while new ones keep appearing: a zombie among
    our children, born after the stop began, in a session not ours and not a child we spawned.
    """

    seen: set[tuple[int, int]] = field(default_factory=set)

    def new(self, children: Iterable[int], stat: Callable[[int], _Stat | None], since: int,
            own_sid: int, own_children: Container[int]) -> bool:
        """Whether ``children`` (ours) hold such a zombie not seen before."""
        found = False
        for pid in children:
            st = stat(pid)
            if (st is None or not st.zombie or st.start < since or st.sid == own_sid
                    or pid in own_children or (pid, st.start) in self.seen):
                continue
            self.seen.add((pid, st.start))
            found = True
        return found


# --- the primitives on Linux /proc ------------------------------------------------------------


def look_proc(pid: int) -> Seen | None:
    """``/proc/PID/stat``'s start time and state, or None if gone."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        fields = raw[raw.rfind(b")") + 2 :].split()
        return Seen(int(fields[19]), fields[0])
    except (IndexError, ValueError):
        return None


def send_exact(pid: int, start: int, sig: int, look: Look = look_proc) -> bool:
    """Signal ``pid`` only if it is still the process that started at ``start``.

    With a pidfd (Linux 5.3+) there is no window at all: the fd names one process, the start
    time read *after* opening it proves which, and the signal goes through the fd. Without one,
    the window is the few microseconds between the check and ``kill``.
    """
    fd: int | None = None
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            fd = pidfd_open(pid)
        except ProcessLookupError:
            return False
        except OSError:
            fd = None  # an old kernel (ENOSYS), a sandbox: fall back to kill()
    try:
        seen = look(pid)
        if seen is None or seen.start != start:
            return False
        if fd is not None and sys.platform == "linux":
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
        return True
    except OSError:
        return False
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def own_ids() -> set[int]:
    """Our own session and process group (never a run's), with 0 and 1."""
    if sys.platform == "win32":
        return {0, 1}
    return {os.getsid(0), os.getpgid(0), 0, 1}


def children_proc(pid: int) -> list[int]:
    """Direct children of ``pid`` from the kernel's per-thread lists ([] when unknown)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def descendants(seeds: Iterable[int], children: Callable[[int], Iterable[int]] = children_proc
                ) -> set[int]:
    """``seeds`` and everything below them."""
    found: set[int] = set()
    stack = list(seeds)
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children(pid))
    return found
