"""What a run's stop would end, written down while the run lives: for the watchdog after a crash.

Stop finds a run's processes four ways (treefind.py); after a crash of the app only one of them
is left to the watchdog: the environment marker. A daemon that double-forked, ``setsid()``ed
and cleared its environment (or made it unreadable, as ssh-agent does) carries no marker, and
once the app is dead it is not our adopted orphan any more either: it is re-parented to init.
So while a run lives, its ``RunTracker`` looks at what the stop would look at first (the
agent's descendants and the orphans adopted by us that the run claims: ``_scan_known``) every
``POLL_S``, and writes what it saw to a small file: each process as (pid, start ticks), the
process groups and sessions with their leader's start ticks. The file is replaced atomically
(temp file, rename) whenever something new is seen, and removed when the run ends. The watchdog
(aftercrash.py) reads it after the app died and ends those whose start time still matches (so a
reused pid is never hit), with the members of those sessions and groups.

See docs/adr/0017-freezing-hoppers-and-crash-tracking.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tolaria.core.process import backend

if TYPE_CHECKING:
    from tolaria.core.process.treefind import TreeFinder

log = logging.getLogger(__name__)

#: How often a live run's processes are looked at (a daemon started and the app killed within
#: this window is left to the marker).
POLL_S = 0.2
FORMAT = 1


def folder() -> Path:
    """Where the runs of this user's Tolaria processes keep their files: ``<data>/run``."""
    from tolaria.support import paths

    return paths.data_dir() / "run"


TRACK_SUFFIX = ".track.json"
#: A run's private files (its agent's MCP configuration, ADR 0019) sit next to its tracking file,
#: so the watchdog removes them with it after a crash (aftercrash.end).
FILES_SUFFIX = ".files"


def path_for(stream_id: str) -> Path:
    """The file of this process's run ``stream_id``."""
    return folder() / f"{os.getpid()}-{stream_id}{TRACK_SUFFIX}"


def files_for(stream_id: str) -> Path:
    """The private folder of this process's run ``stream_id`` (not created here)."""
    return folder() / f"{os.getpid()}-{stream_id}{FILES_SUFFIX}"


def _leader_start(pid: int) -> int | None:
    st = backend.current().info(pid)
    return None if st is None else st.start


class RunTracker:
    """Follows one run's processes while it lives and keeps its file up to date."""

    def __init__(self, finder: TreeFinder, path: str | Path) -> None:
        self.finder = finder
        self.path = Path(path)
        self.procs: dict[int, int] = {}  # pid -> start ticks
        self.groups: dict[int, int | None] = {}
        self.sessions: dict[int, int | None] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._follow())

    async def stop(self) -> None:
        """Stop following (the stop itself takes over); the file stays until ``forget``."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow(self) -> None:
        while True:
            try:
                self.look()
            except Exception:  # a look that fails must never end the run
                log.exception("tracking %s", self.finder.stream_id)
            await asyncio.sleep(POLL_S)

    def look(self) -> bool:
        """One look at the run's processes; whether something new was written down."""
        finder = self.finder
        finder._add(finder._scan_known())
        changed = False
        be = backend.current()
        for proc in finder.alive():
            st = be.info(proc.pid)
            if st is None or st.zombie or self.procs.get(st.pid) == st.start:
                continue
            self.procs[st.pid] = st.start
            changed = True
        for pgid in finder.groups - self.groups.keys():
            self.groups[pgid] = _leader_start(pgid)
            changed = True
        for sid in finder.sessions - self.sessions.keys():
            self.sessions[sid] = _leader_start(sid)
            changed = True
        if changed:
            self._write()
        return changed

    def record(self) -> dict[str, Any]:
        return {"format": FORMAT, "owner": backend.current().owner_token(), "stream_id": self.finder.stream_id,
                "born": self.finder._born_ticks(), "procs": sorted(self.procs.items()),
                "groups": sorted(self.groups.items(), key=lambda kv: kv[0]),
                "sessions": sorted(self.sessions.items(), key=lambda kv: kv[0])}

    def _write(self) -> None:
        """Replace the file at once (a crash mid-write leaves the previous one): no fsync, it
        only has to outlive the app, not the machine."""
        data = json.dumps(self.record()).encode()
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        from tolaria.support import paths

        try:
            paths.private_dir(self.path.parent)  # 0700, and so is each parent it creates
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                         0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not write %s (a crash may leave this run's daemons): %s",
                        self.path, exc)
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def forget(path: str | Path) -> None:
    """The run is over (its stop ended everything): its file goes."""
    with contextlib.suppress(OSError):
        os.unlink(path)
