"""Ending a run's tree: frozen, then SIGTERM, SIGKILL to what ignores it, SIGKILL after the
grace; what is still alive is reported."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import Callable

# POSIX only: the imports follow the assert, so that mypy --platform win32 skips them too.
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (its frames: any)"

from .procs import Tree, _ignores, _name, _send, _stat  # noqa: E402

#: After SIGKILL, how long a process may take to go before it counts as a survivor.
_KILL_WAIT_S = 2.0


def _survivor_json(tree: Tree, alive: dict[int, tuple[str, int, int, int]]) -> list[list[object]]:
    return [[pid, _name(pid)] for pid in sorted(alive)]


def end_tree(tree: Tree, grace: float, reap: Callable[[], None],
             agent_alive: bool = True) -> list[list[object]]:
    """End every process of the run: frozen, then SIGTERM (SIGKILL at once to what ignores it
    or appears meanwhile), SIGKILL after ``grace``; what is still alive after that is
    returned."""
    termed: set[int] = set()
    start = time.monotonic()
    killing = False
    frozen = freeze(tree)
    first: set[int] | None = None
    if agent_alive:
        # The agent's own group, in one call, before the per-pid sweep.
        with contextlib.suppress(OSError):
            os.killpg(tree.agent_pid, signal.SIGTERM)
    known, scanned = set(frozen), time.monotonic()
    while True:
        reap()
        # A /proc scan costs ~10-20 ms on a loaded host: the frozen tree is known, so its pids
        # are checked one by one; the whole table is read when they are gone (to find what
        # was born meanwhile, a hopper's next incarnation, and to confirm the end) and now
        # and then while they are not.
        alive = {pid: st for pid in known if (st := _stat(pid)) and st[0] not in "ZX"}
        if not alive or time.monotonic() - scanned >= 0.05:
            alive, scanned = tree.members(), time.monotonic()
        if not alive:
            return []
        known = set(alive)
        waited = time.monotonic() - start
        if waited > grace + _KILL_WAIT_S:
            return _survivor_json(tree, tree.members())
        killing = killing or waited >= grace
        if first is None:
            first = set(alive)
        for pid in alive:
            # SIGKILL at once: what ignores SIGTERM, and what was born during the stop (a
            # hopper's next incarnation, a tool started while its agent ends) - no grace
            # is owed to a process that did not exist when the stop began.
            if killing or pid not in first or _ignores(pid, signal.SIGTERM):
                _send(pid, signal.SIGKILL)
            elif pid not in termed:
                termed.add(pid)
                _send(pid, signal.SIGTERM)
        for pid in frozen:  # the SIGTERM (or SIGKILL) waits for each: it goes on waking
            _send(pid, signal.SIGCONT)
        frozen = set()
        time.sleep(0.002 if waited < 0.05 else 0.01)  # most go within ms of the SIGTERM


def freeze(tree: Tree) -> set[int]:
    """SIGSTOP every process of the run, sweep after sweep until no new one appears: a pid
    hopper (a process that forks and exits, again and again) outruns a kill sweep, not a
    stopped tree. Continued once signalled (end_tree)."""
    stopped: set[int] = set()
    for _ in range(50):
        new = [pid for pid in tree.members() if pid not in stopped]
        if not new:
            break
        for pid in new:
            _send(pid, signal.SIGSTOP)
            stopped.add(pid)
    return stopped

