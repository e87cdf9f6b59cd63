"""Keeping the watchdog informed of what each live run started (issue 22 item 10).

After a crash of the app nothing in it can find a run's processes any more; the watchdog can
only kill what it can recognise. The marker covers most of a run, but not a daemon that cleared
its environment or made it unreadable: Stop finds those as members of the run's sessions or as
orphans re-parented to us (treefind.py), and only a live app can do that. So while a run lives,
its tree finder looks at the known tree every ``INTERVAL_S`` (the agent's descendants and our
adopted orphans, from the kernel's children lists: no pass over all of /proc, so the cost grows
with the run's tree, not with the machine) and tells the watchdog what is new: processes with
their start times (immune to pid reuse), sessions, process groups (aftercrash.py).

A process that appears and hides within one interval before the crash can still escape; so can
an orphan that is not ours to claim (several runs at once, the same limit as Stop's).
"""

from __future__ import annotations

import asyncio
import logging

from tolaria.core.process import freeze, procfs, watchdog
from tolaria.core.process.treefind import TreeFinder

log = logging.getLogger(__name__)

#: How often a live run's tree is looked at for the watchdog.
INTERVAL_S = 0.2


class RunTracker:
    """What of one run the watchdog has been told; ``look`` tells it the rest."""

    def __init__(self, finder: TreeFinder) -> None:
        self.finder = finder
        self._procs: set[tuple[int, int]] = set()  # sent
        self._live: set[tuple[int, int]] = set()  # alive at the last look: the next one's seeds
        self._sessions: set[int] = set()
        self._groups: set[int] = set()
        self._born_sent = False

    def look(self) -> int:
        """Look at the run's known tree once; send what is new; return how many processes."""
        finder = self.finder
        seeds = [pid for pid, start in self._live if _same(pid, start)]
        if finder.root is not None and finder.root.is_running():  # (pid reuse: checked)
            seeds.append(finder.root.pid)
        own = freeze.own_ids()
        procs: set[tuple[int, int]] = set()
        sessions: set[int] = set()
        groups: set[int] = set()
        live: set[tuple[int, int]] = set()
        for pid in finder.look_again(seeds):
            st = procfs.stat(pid)
            if st is None or st.zombie:
                continue
            live.add((pid, st.start))
            if (pid, st.start) not in self._procs:
                procs.add((pid, st.start))
            if st.sid not in own and st.sid not in self._sessions:
                sessions.add(st.sid)
            if st.pgid not in own and st.pgid not in self._groups:
                groups.add(st.pgid)
        self._live = live
        if procs:
            finder.remember(pid for pid, _start in procs)
        if procs or sessions or groups or not self._born_sent:
            watchdog.run_known(finder.stream_id, finder.born_ticks(), sorted(procs),
                               sorted(sessions), sorted(groups))
            self._born_sent = True
            self._procs |= procs
            self._sessions |= sessions
            self._groups |= groups
        return len(procs)

    async def follow(self, interval: float = INTERVAL_S) -> None:
        """``look`` now and every ``interval`` until cancelled."""
        while True:
            try:
                self.look()
            except Exception:  # never let tracking break a run
                log.exception("tracking %s for the watchdog failed", self.finder.stream_id)
            await asyncio.sleep(interval)


def _same(pid: int, start: int) -> bool:
    st = procfs.stat(pid)
    return st is not None and st.start == start and not st.zombie


def start(finder: TreeFinder) -> asyncio.Task[None] | None:
    """Follow ``finder``'s run for the watchdog on the running loop (None without /proc)."""
    if not procfs.HAS_PROC:
        return None
    return asyncio.ensure_future(RunTracker(finder).follow())


def stop(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
