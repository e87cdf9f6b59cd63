"""Ending every process of a run. See docs/adr/0002-stop-strategy.md.

Real agent CLIs run their shell tool in a *new session*, and some tools double-fork, so neither
"kill the child" nor "kill the child's process group" is enough: the run's processes are found
as treefind.py describes (the agent's descendants, marked processes, adopted orphans, members
of the run's sessions).

A stop signals the known tree first (descendants and adopted orphans, whose cost grows with the
tree only), then scans all of /proc for the rest. SIGTERM goes only where it can help: a process
that ignores it (SigIgn) gets SIGKILL at once, and so does one that forks away during the stop
(a "pid hopper"); the run is then frozen with SIGSTOP sweeps before the SIGKILL, as it is when
the grace runs out (freeze.py, ADR 0017). Zombies count as gone. We never ``waitpid`` a child asyncio owns; only pids
that were *adopted* (re-parented to us) are reaped here.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

from tolaria.core.events import Survivor
from tolaria.core.process import backend, freeze
from tolaria.core.process.backend import SIGKILL, SIGTERM
from tolaria.core.process.fdspare import with_spare_fd
from tolaria.core.process.treefind import (
    APP_CHILD_MARKER,
    ENV_MARKER,
    OWNER_MARKER,
    TreeFinder,
    forget_own_child,
    is_own_child,
    keeper_ended,
    keeper_started,
    kept_count,
    mark_env,
    remember_own_child,
)
from tolaria.core.process.treefind import _alive as _alive  # keeper.py uses it
from tolaria.core.process.treefind import enable_child_subreaper as _enable_child_subreaper

__all__ = ["APP_CHILD_MARKER", "ENV_MARKER", "OWNER_MARKER", "TreeKiller", "enable_child_subreaper",
           "forget_own_child", "keeper_ended", "keeper_started", "kept_count", "mark_env",
           "reap_adopted", "remember_own_child"]


def enable_child_subreaper() -> bool:
    """treefind's ``enable_child_subreaper``, and the background reaper of the orphans that
    come back to us from then on (freeze.py): adopted orphans must always be reaped."""
    enabled = _enable_child_subreaper()
    if enabled:
        freeze.start_background_reaper(is_own_child)
    return enabled


#: How often a stop re-scans for processes forked while it waits (known pids are polled faster).
_RESCAN_S = 0.05
#: The first look after a signal (then doubling up to the poll interval).
_FIRST_POLL_S = 0.001


@dataclass
class TreeKiller(TreeFinder):
    """Snapshot, signal, poll and verify the processes of one run."""

    #: Start time of the first signal (clock ticks after boot): a process born after it outside
    #: the known tree (an orphan, or a new session: a "pid hopper" escaping) gets SIGKILL.
    _stop_ticks: int | None = field(default=None, repr=False)
    #: Set once a process of the run is seen forking away during the stop (born during it
    #: outside the tree, or a child of ours born during it that already exited): the stop then
    #: freezes the run before the kill (freeze.py) instead of chasing new pids.
    hopping: bool = field(default=False, repr=False)
    #: Whether a process sent SIGTERM had a handler for it: only then can one hop away.
    _catchers: bool = field(default=False, repr=False)

    # -- signalling ------------------------------------------------------------------------
    @with_spare_fd  # a process out of fds must still stop the run
    def signal_all(self, sig: int) -> None:
        """Signal every remembered group, then every remembered live pid."""
        self._signal_groups(sig)
        for proc in self.alive():
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)

    @with_spare_fd  # psutil checks pid reuse by reading /proc/PID/stat
    def _signal_groups(self, sig: int) -> None:
        be = backend.current()
        own_pgid = (be.group_and_session(0) or (0, 0))[0]
        alive_groups = {_pgid_of(p) for p in self.alive()}
        for pgid in self.groups:
            # A group is only signalled while one of *our* processes still leads or belongs to
            # it, so a recycled pgid of a stranger is never hit.
            if pgid == own_pgid or pgid not in alive_groups:
                continue
            be.signal_group(pgid, sig)

    @with_spare_fd  # psutil checks pid reuse by reading /proc/PID/stat
    def _terminate(self, procs: Iterable[psutil.Process], *, groups: bool) -> None:
        """SIGTERM, except where it can do nothing: SIGKILL at once to a process that ignores
        SIGTERM (SigIgn) and to one that escaped after the first signal (a pid hopper).
        Catchers (SigCgt) get SIGTERM and their grace."""
        if groups:
            self._signal_groups(SIGTERM)
        live = {p.pid for p in self.alive()}  # once: a hopper makes thousands of known pids
        for proc in procs:
            sig = SIGKILL if self._hopeless(proc, live) else SIGTERM
            if sig == SIGTERM and not self._catchers:
                self._catchers = freeze.catches(proc.pid, SIGTERM)
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
        if self._stop_ticks is None:
            self._stop_ticks = backend.current().now_ticks()

    def _hopeless(self, proc: psutil.Process, live: set[int]) -> bool:
        """Whether SIGTERM cannot end ``proc`` or it is running from the stop."""
        be = backend.current()
        if be.ignores_signal(proc.pid, SIGTERM):
            return True
        st = be.info(proc.pid)
        if self._stop_ticks is None or st is None or st.start < self._stop_ticks:
            return False
        # Born during the stop and already orphaned, or in a session of its own: it forked
        # away from a signalled process instead of exiting.
        hopper = st.ppid not in live or st.sid == proc.pid
        self.hopping = self.hopping or hopper
        return hopper

    async def kill(self, grace: float, verify: float = 2.0, poll: float = 0.005, *,
                   root_had_grace: bool = False) -> list[Survivor]:
        """SIGTERM everything, SIGKILL what is left after ``grace`` s; return survivors.

        The known tree is signalled first (its cost does not grow with the machine's process
        count), then all of /proc is scanned for the rest (markers, sessions, orphans).
        Processes that ignore SIGTERM get SIGKILL at once; so do processes that appear during
        the stop outside the tree (pid hoppers). New processes spawned while we wait are
        picked up by re-snapshotting on every poll. ``root_had_grace``: the agent was already
        asked to stop (its polite window ran out), so it gets SIGKILL at once instead of a
        second grace period; its tools still get SIGTERM first. (Measured: Qwen Code cancels
        its tool on SIGTERM, then takes ~7 s to exit.)
        """
        self._add(self._scan_known())  # before any signal: a dead parent hides its children
        if root_had_grace and self.root is not None and _alive(self.root):
            with contextlib.suppress(psutil.Error):
                self.root.send_signal(SIGKILL)
        self._terminate(self.alive(), groups=True)
        # The rest of /proc (markers, sessions) is scanned by _wait_gone: as soon as the known
        # tree is gone, or after _RESCAN_S. A stop of an obeying tree costs one pass over /proc.
        settled = await self._wait_gone(SIGTERM, grace, poll)
        if settled and not self.hopping and not await self._hopper_missed():
            return self._finish()
        # Grace over, or a pid hopper: freeze what is left (a stopped process cannot fork),
        # then SIGKILL it all; the hopper's dead generations are reaped as they appear.
        await freeze.freeze_and_kill(self, self._stop_ticks or 0, verify)
        self.signal_all(SIGKILL)
        await self._wait_gone(SIGKILL, verify, poll)
        return self._finish()

    async def _hopper_missed(self) -> bool:
        """Whether a process that could act on SIGTERM left a hopper the scans missed."""
        if not self._catchers:
            return False
        return not await freeze.confirm_no_hopper(self, self._stop_ticks or 0)

    async def _wait_gone(self, sig: int, timeout: float, poll: float) -> bool:
        """Poll the known processes; every ~50 ms rescan for new ones and signal them too.

        Returns True once nothing of the run is alive and a rescan begun *after* that finds
        nothing new: a process that was already gone cannot fork behind the scan's back, so a
        hopper's last child is either seen by it or never born.
        """
        deadline = time.monotonic() + timeout
        next_scan = time.monotonic() + _RESCAN_S
        # An obeying process is gone a millisecond or two after SIGTERM: look again after
        # 1 ms, then 2, 4... up to ``poll`` (a flat 5 ms poll added ~2.5 ms to every stop).
        delay = min(poll, _FIRST_POLL_S)
        while True:
            settled = not self.alive()
            if settled or time.monotonic() >= next_scan:
                if not self._resnapshot_and_resignal(sig) and settled:
                    return True
                next_scan = time.monotonic() + _RESCAN_S
            if self.hopping and sig != SIGKILL:
                return False  # the caller freezes the run: no point chasing new pids
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(delay)
            delay = min(poll, delay * 2)

    @with_spare_fd  # a process out of fds must still stop the run
    def _resnapshot_and_resignal(self, sig: int) -> bool:
        """Scan once more; signal what is new; return whether anything new was found.

        Only live processes count as new: a zombie cannot fork. But a zombie child of ours
        born during the stop is a generation of a pid hopper that forked and exited: it is
        reaped at once (or they pile up by the thousand) and the stop turns to freezing."""
        if self._stop_ticks is not None and freeze.reap_orphans(self._stop_ticks):
            self.hopping = True
        new = [p for p in self._add(self._scan_proc()) if _alive(p)]
        if new and sig == SIGKILL:
            self.signal_all(sig)
        elif new:
            self._terminate(new, groups=True)
        return bool(new)

    @with_spare_fd
    @with_spare_fd  # a process out of fds must still stop the run
    def _finish(self) -> list[Survivor]:
        reap_adopted(p.pid for p in self.known.values() if p is not self.root)
        if self._stop_ticks is not None:
            freeze.reap_orphans(self._stop_ticks)  # born during the stop: a hopper's
        # The run's own that died after they were last looked at (a tool whose zombie came to
        # us only when its parent, the agent, exited).
        known = {p.pid for p in self.known.values()}
        freeze.reap_orphans(self._born_ticks(), lambda st: (
            st.pid in known or st.sid in self.sessions or st.pgid in self.groups))
        survivors = []
        for proc in self.alive():
            try:
                survivors.append(Survivor(pid=proc.pid, name=proc.name()))
            except psutil.Error:
                continue
        return survivors


def _pgid_of(proc: psutil.Process) -> int | None:
    found = backend.current().group_and_session(proc.pid)
    return None if found is None else found[0]


def reap_adopted(pids: Iterable[int]) -> None:
    """``waitpid`` zombies among ``pids`` that were re-parented to us (we are subreaper).

    Only pids we did not spawn ourselves reach here (the agent process itself, which asyncio
    waits for, is excluded by the caller), so no other waiter's exit status is stolen.
    """
    backend.current().reap(list(pids))
