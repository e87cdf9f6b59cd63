"""Freezing a run's processes before the kill, and reaping the orphans we adopted.

A "pid hopper" (a tool that answers SIGTERM by becoming a fork-and-exit chain: every generation
``setsid()``s, forks and exits, one process alive at a time, a new pid every ~ms) outruns any
scan-and-kill: by the time a scan has found a generation and signalled it, it has forked the
next one and exited. A *stopped* process cannot fork (a pending SIGSTOP makes a ``fork`` in
progress restart, and a stopped one runs no code), so the stop first sweeps the run's
processes with SIGSTOP, again and again, until a sweep finds nothing new, and only then
SIGKILLs them all. See docs/adr/0017-freezing-hoppers-and-crash-tracking.md.

A sweep is *clean* when every process it finds is already stopped (state ``T``, not merely
signalled: one that died before the SIGSTOP landed may have forked first) and no child of ours
that was born during the stop has just exited (the same evidence: it forked and exited). A
generation whose parent exited is re-parented to us (the child subreaper), so it is in our own
children list; one whose parent is stopped is in that parent's: both are read every sweep.
Two clean sweeps in a row, the last one over all of ``/proc``, end the freeze.

Reaping: a subreaper inherits every orphan's exit status. Nobody else waits for an adopted
orphan, so unless we ``waitpid`` it, each dead generation stays our zombie and holds a pid (a
hop chain produces a thousand a second; pid_max may be 32,768). ``reap_orphans`` reaps zombie
children of ours that we did not spawn: never our own children (agents, the watchdog:
treefind's ``remember_own_child``), never one in our own session (what the app or a library
started for itself stays there), and only ones born after a given moment (the stop, or the
run's agent). Outside a stop a background thread (``start_background_reaper``, started with
the subreaper) reaps a zombie only once it has stayed a zombie for a while, so a child someone
else spawned in a session of its own is left to its own waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import psutil

from tolaria.core.process import backend, procread
from tolaria.core.process.backend import ProcInfo


class TreeFinder(Protocol):
    """What a freeze uses of the run's finder (treefind.TreeFinder, which cannot be imported
    here: it starts the reaper below, and modules never import each other in a circle)."""

    stream_id: str
    root: psutil.Process | None

    def _add(self, pids: Iterable[int]) -> list[psutil.Process]: ...

    def _scan_proc(self) -> set[int]: ...

    def _marked(self, env: bytes) -> bool: ...

    def _claims_orphan(self, st: ProcInfo, env: bytes | None) -> bool: ...


#: Set by ``start_background_reaper`` (treefind's subreaper): whether orphans come back to us,
#: and which children we spawned on purpose (their exit status is someone else's).
_subreaper = False


def _every_child_is_own(pid: int) -> bool:
    return True  # until the subreaper is on: no child of ours was adopted


_is_own_child: Callable[[int], bool] = _every_child_is_own

#: Pause between two sweeps: a generation lives ~1 ms, a sweep of our children ~0.1 ms.
_SWEEP_PAUSE_S = 0.001
#: How long a zombie of ours must have stayed one before ``OrphanReaper`` reaps it outside a
#: stop: any waiter of its own (asyncio's child watcher, Popen.wait) has had its chance.
ZOMBIE_AGE_S = 0.5


def _is_stopped(pid: int, start: int) -> bool | None:
    """True: stopped; False: running; None: gone, a zombie, or another process now.

    Uninterruptible sleep (``D``) counts as stopped: such a process runs no code of its own,
    and stops (the SIGSTOP is pending) before it could reach user space and fork."""
    st = backend.current().info(pid)
    if st is None or st.start != start or st.zombie:
        return None
    return st.state in (b"T", b"t", b"D")


def catches(pid: int, sig: int) -> bool:
    """Whether ``pid`` has a handler for ``sig`` (SigCgt): only such a process can act on a
    SIGTERM, e.g. by forking away instead of exiting. False when unknown (the portable
    backend cannot read signal masks)."""
    if not backend.current().reads_signal_masks:
        return False
    raw = procread.read(f"/proc/{pid}/status", short=True)
    at = -1 if raw is None else raw.find(b"\nSigCgt:")
    if raw is None or at < 0:
        return False
    end = raw.find(b"\n", at + 1)
    try:
        return bool(int(raw[at + 8:end if end >= 0 else len(raw)].strip(), 16) & (1 << (sig - 1)))
    except ValueError:
        return False


async def confirm_no_hopper(finder: TreeFinder, since: int) -> bool:
    """After a stop looked settled: whether it really was, for a run in which some process
    could act on SIGTERM. A generation of a hopper that the last scan missed (it was listed
    alive, gone when read, its child born after the listing) forks and exits within moments:
    its zombie (re-parented to us) or its adopted live child shows up in our children list.
    A few looks over ~7 ms: the cost of one pass over our children each."""
    freezer = Freezer(finder, since)
    for delay in (0.001, 0.002, 0.004):
        await asyncio.sleep(delay)
        if reap_orphans(since):
            return False
        for pid in freezer._known_sweep():
            st = backend.current().info(pid)
            if st is not None and not st.zombie and st.start >= since:
                return False
    return True


def own_children() -> list[int]:
    """Our direct children (zombies included): the kernel's children lists of our threads, or
    one pass over every process where the backend has no such lists."""
    return _children_of(os.getpid())


def _children_of(pid: int) -> list[int]:
    be = backend.current()
    kids = be.adopted() if pid == os.getpid() else be.children(pid)
    if kids is None:
        kids = [found.pid for found in be.snapshot() if found.ppid == pid]
    return kids


def _adoptable(st: ProcInfo, born_after: int) -> bool:
    if sys.platform == "win32":  # no subreaper, no sessions: nothing is ever adopted
        return False
    return (_subreaper and not _is_own_child(st.pid) and st.sid != os.getsid(0)
            and st.start >= born_after)


def reap_orphans(born_after: int, only: Callable[[ProcInfo], bool] | None = None) -> int:
    """``waitpid`` every zombie child of ours adopted since ``born_after`` (clock ticks after
    boot; see the module docstring for which ones), and that ``only`` accepts when given;
    return how many were reaped."""
    if sys.platform == "win32":
        return 0
    reaped = 0
    for pid in own_children():
        st = backend.current().info(pid)
        if (st is None or not st.zombie or not _adoptable(st, born_after)
                or (only is not None and not only(st))):
            continue
        with contextlib.suppress(ChildProcessError, OSError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped += 1
    return reaped


class OrphanReaper:
    """Reaps the zombies a run's adopted orphans leave, outside a stop (a tool that forks and
    exits while the run goes on): a zombie is reaped once it has been one for ZOMBIE_AGE_S."""

    def __init__(self, born_after: int) -> None:
        self.born_after = born_after
        self._seen: dict[tuple[int, int], float] = {}

    def reap(self) -> int:
        if sys.platform == "win32":
            return 0
        now = time.monotonic()
        seen: dict[tuple[int, int], float] = {}
        reaped = 0
        for pid in own_children():
            st = backend.current().info(pid)
            if st is None or not st.zombie or not _adoptable(st, self.born_after):
                continue
            key = (pid, st.start)
            first = self._seen.get(key, now)
            if now - first < ZOMBIE_AGE_S:
                seen[key] = first
                continue
            with contextlib.suppress(ChildProcessError, OSError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    reaped += 1
        self._seen = seen
        return reaped


#: How often the background reaper looks (a hop chain run wild leaves ~1,000 zombies a second:
#: at most ~ZOMBIE_AGE_S + this worth of them wait for it).
REAP_EVERY_S = 0.25
_reaper_thread: threading.Thread | None = None
_reaper_lock = threading.Lock()


def start_background_reaper(is_own_child: Callable[[int], bool]) -> None:
    """Once per process, while it is a child subreaper: a daemon thread that reaps adopted
    orphans' zombies every REAP_EVERY_S (OrphanReaper: aged, never our own children, never
    one of our own session). Orphans come back to a subreaper at any time, with or without a
    run (a login shell's child killed with its shell, what an exited ``tolaria run`` left),
    and nothing else ever reaps them."""
    global _reaper_thread, _subreaper, _is_own_child
    with _reaper_lock:
        _subreaper, _is_own_child = True, is_own_child
        if _reaper_thread is not None and _reaper_thread.is_alive():
            return
        reaper = OrphanReaper(0)

        def loop() -> None:
            while True:
                time.sleep(REAP_EVERY_S)
                with contextlib.suppress(Exception):  # never let the reaper die of a /proc race
                    reaper.reap()

        _reaper_thread = threading.Thread(target=loop, name="tolaria-orphan-reaper", daemon=True)
        _reaper_thread.start()


class Freezer:
    """One freeze of a run's processes (``finder``: what the run's stop knows and can scan)."""

    def __init__(self, finder: TreeFinder, since: int) -> None:
        self.finder = finder
        #: Start of the stop (clock ticks): a zombie child of ours born after it is a hopper's.
        self.since = since
        #: (pid, start ticks) of every process this freeze stopped.
        self.stopped: set[tuple[int, int]] = set()
        self.sweeps = 0

    def _stop_new(self, pids: Iterable[int]) -> bool:
        """SIGSTOP each live process of ``pids`` not stopped yet; whether any was new."""
        if sys.platform == "win32":  # never called there (no /proc)
            return False
        new = False
        me = os.getpid()
        for pid in pids:
            st = backend.current().info(pid)
            if pid == me or st is None or st.zombie or (pid, st.start) in self.stopped:
                continue
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
                self.stopped.add((pid, st.start))
                new = True
        return new

    def _known_sweep(self) -> set[int]:
        """The fast half of a sweep, without reading all of /proc: our adopted children the run
        claims, the root, and the descendants of those and of what is stopped (the kernel's
        children lists). Nothing here reads every known process: a hopper makes thousands."""
        finder = self.finder
        seeds = [pid for pid, start in self.stopped if _is_stopped(pid, start) is not None]
        root = finder.root
        if root is not None:
            seeds.append(root.pid)
        be = backend.current()
        for pid in own_children():
            st = be.info(pid)
            if st is None or st.zombie or (pid, st.start) in self.stopped:
                continue
            env = be.environ(pid)
            if (env is not None and finder._marked(env)) or finder._claims_orphan(st, env):
                seeds.append(pid)
        found: set[int] = set()
        while seeds:
            pid = seeds.pop()
            if pid in found:
                continue
            found.add(pid)
            seeds.extend(_children_of(pid))
        return found

    def sweep(self, full: bool) -> bool:
        """One sweep; whether it was clean (nothing new, everything found already stopped)."""
        self.sweeps += 1
        pids = self._known_sweep()
        if full:
            pids |= self.finder._scan_proc()
        clean = not self._stop_new(pids)
        # A generation that exited after we saw it alive may have forked first.
        if reap_orphans(self.since):
            clean = False
        for pid, start in list(self.stopped):
            state = _is_stopped(pid, start)
            if state is None:
                self.stopped.discard((pid, start))
                clean = False
            elif not state:
                clean = False  # signalled, not stopped yet
        return clean

    async def freeze(self, timeout: float) -> bool:
        """Sweep until two clean sweeps in a row (the last over all of /proc); False if
        ``timeout`` ran out first (what was stopped is killed all the same)."""
        deadline = time.monotonic() + timeout
        clean_in_a_row = 0
        while time.monotonic() < deadline:
            if self.sweep(full=clean_in_a_row >= 1):
                clean_in_a_row += 1
                if clean_in_a_row >= 2:
                    return True
            else:
                clean_in_a_row = 0
            await asyncio.sleep(_SWEEP_PAUSE_S)
        return False

    def kill(self) -> None:
        """SIGKILL every process this freeze stopped (a stopped process dies of SIGKILL too),
        then reap the zombies of ours that leaves."""
        # Known to the run's stop first: its verify and its survivors then cover them.
        self.finder._add(pid for pid, _start in self.stopped)
        if sys.platform == "win32":  # never called there (no /proc)
            return
        for pid, start in self.stopped:
            if _is_stopped(pid, start) is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


#: How long a freeze waits for the processes it SIGKILLed to die, to reap them before ``done``.
KILLED_DIE_WITHIN_S = 0.5


async def freeze_and_kill(finder: TreeFinder, since: int, timeout: float) -> Freezer:
    """Freeze the run's processes (at most ``timeout`` s), SIGKILL them, reap what we adopted.

    A SIGKILL takes effect a moment after it is sent: the last frozen generations (often two,
    one caught mid-fork with its child) are not zombies yet right after ``kill``. Wait until
    each is dead (at most KILLED_DIE_WITHIN_S), then reap, so the stop leaves no zombie of a
    hopper behind (CI saw two at ``done``)."""
    freezer = Freezer(finder, since)
    await freezer.freeze(timeout)
    freezer.kill()
    deadline = time.monotonic() + KILLED_DIE_WITHIN_S
    while any(_is_stopped(pid, start) is not None for pid, start in freezer.stopped):
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.002)
    reap_orphans(since)
    return freezer
