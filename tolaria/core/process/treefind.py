"""Finding every process of a run (the tree kill itself is proctree.py).

A run's processes are found four ways:

1. descendants of the agent (the kernel's children lists, or one pass over /proc);
2. every process whose environment carries ``TOLARIA_STREAM_ID=<id>`` *and*
   ``TOLARIA_OWNER=<this process>`` (inherited by everything the agent starts, even after
   ``setsid`` + double fork, unless a process clears it; the owner keeps two Tolaria processes
   that use one stream id, in two homes say, apart);
3. on Linux, orphans re-parented to this process because it is a child subreaper, including
   ones whose environment is unreadable (non-dumpable daemons such as ssh-agent): judged by
   what stays readable (parentage, uid, session, start time);
4. every member of a session one of the run's processes belongs to.

Each found process is kept as a ``psutil.Process`` (pid + create time), so a recycled pid is
never signalled.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import psutil

from tolaria.core.process import backend
from tolaria.core.process.backend import ProcInfo
from tolaria.core.process.fdspare import with_spare_fd
from tolaria.core.process.procread import env_value

ENV_MARKER = "TOLARIA_STREAM_ID"
#: ``<pid>:<start ticks>`` of the Tolaria process that started the run (backend.owner_token).
OWNER_MARKER = "TOLARIA_OWNER"
#: Set in this process's own environment once it is a subreaper, so everything it (or Qt, or a
#: library) starts for itself inherits it; agents' environments drop it. An adopted orphan
#: carrying it (a browser started through xdg-open, say) is never taken for a run's process.
APP_CHILD_MARKER = "TOLARIA_APP_CHILD"
#: Children this process spawned on purpose (agents, probes): never taken for adopted orphans.
_own_children: set[int] = set()


def remember_own_child(pid: int) -> None:
    _own_children.add(pid)


def forget_own_child(pid: int) -> None:
    _own_children.discard(pid)


def is_own_child(pid: int) -> bool:
    """Whether this process spawned ``pid`` on purpose (its exit status is someone's)."""
    return pid in _own_children


#: Kept agent processes alive now (docs/adr/0009). While one lives, an adopted orphan without a
#: marker could be its, so no run counts as the "sole run" that may claim such orphans.
_kept_alive = 0


def keeper_started() -> None:
    global _kept_alive
    _kept_alive += 1


def keeper_ended() -> None:
    global _kept_alive
    _kept_alive = max(0, _kept_alive - 1)


def kept_count() -> int:
    return _kept_alive


_CLK_TCK = backend.CLK_TCK
_ENV_NEEDLE = ENV_MARKER.encode()
_OWNER_NEEDLE = OWNER_MARKER.encode()
_APP_NEEDLE = APP_CHILD_MARKER.encode()


def enable_child_subreaper() -> bool:
    """Make this process the reaper of orphans from its descendants (the linux backend only).

    A tool that double-forks out of the agent's tree is then re-parented to us instead of to
    PID 1, so it stays findable as our child. Idempotent; returns whether it is in effect.
    """
    enabled = backend.current().enable_subreaper()
    if enabled:
        os.environ[APP_CHILD_MARKER] = str(os.getpid())
    return enabled


def mark_env(env: dict[str, str], stream_id: str) -> dict[str, str]:
    """Give a run's environment its markers (and drop the app's own); returns ``env``.

    The owner marker scopes the stream id to this Tolaria process: two ``tolaria run`` with the
    same ``--stream-id`` (in two homes, say) never take each other's processes for their own.
    """
    env.pop(APP_CHILD_MARKER, None)
    env[ENV_MARKER] = stream_id
    env[OWNER_MARKER] = backend.current().owner_token()
    return env


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _descendants(seeds: Iterable[int], children: Callable[[int], Iterable[int]]) -> set[int]:
    found: set[int] = set()
    stack = list(seeds)
    me = os.getpid()
    while stack:
        pid = stack.pop()
        if pid in found or pid == me:
            continue
        found.add(pid)
        stack.extend(children(pid))
    return found


class _NoChildrenFile(Exception):
    """The backend has no cheap children lists (no /proc/PID/task/TID/children, or the
    portable backend): the full scan has to do."""


def _children_or_raise(pid: int) -> list[int]:
    kids = backend.current().children(pid)
    if kids is None:
        raise _NoChildrenFile
    return kids


@dataclass
class TreeFinder:
    """The processes of one run: found (see the module docstring), remembered by pid and
    create time, with their process groups and sessions.

    ``root`` is the agent's own process (may already be gone). Instances are used on the event
    loop thread of the run only.
    """

    stream_id: str
    root: psutil.Process | None
    #: Wall-clock start of the run, whose processes all descend from ``root``: none is older
    #: than the agent. 0: not so (a chat's tool commands share one marker over many roots), so
    #: no process is ruled out by its age.
    since: float = 0.0
    #: Whether this is the only live run, so an adopted orphan without a marker is surely ours.
    sole_run: Callable[[], bool] = lambda: True
    known: dict[tuple[int, float], psutil.Process] = field(default_factory=dict)
    groups: set[int] = field(default_factory=set)
    #: Sessions of the run's processes (never ours): every member of one is the run's, even one
    #: whose environment is unreadable or scrubbed.
    sessions: set[int] = field(default_factory=set)
    _born: int | None = field(default=None, repr=False)

    # -- finding ---------------------------------------------------------------------------
    @with_spare_fd  # a process out of fds must still find the run's processes
    def snapshot(self) -> list[psutil.Process]:
        """Add every currently visible process of the run to ``known``; return the live ones."""
        self._add(self._scan_proc())
        return self.alive()

    @with_spare_fd  # psutil reads /proc/stat for a create time
    def _add(self, pids: Iterable[int]) -> list[psutil.Process]:
        """Remember ``pids`` (with their groups and sessions); return the ones new to us."""
        me = os.getpid()
        be = backend.current()
        own_pgid, own_sid = be.group_and_session(0) or (0, 0)
        new = []
        for pid in pids:
            if pid == me:
                continue
            try:
                proc = self.root if self.root is not None and self.root.pid == pid else psutil.Process(pid)
                key = (pid, proc.create_time())
            except psutil.Error:
                continue
            if key not in self.known:
                self.known[key] = proc
                new.append(proc)
            pgid, sid = be.group_and_session(pid) or (0, 0)
            if pgid > 1 and pgid != own_pgid:
                self.groups.add(pgid)
            if sid > 1 and sid != own_sid:
                self.sessions.add(sid)
        return new

    def __post_init__(self) -> None:
        self._born_ticks()  # now, while the agent surely lives: its own start time

    def _born_ticks(self) -> int:
        """Start time (clock ticks after boot) before which no process can be the run's."""
        if self._born is None and self.since <= 0:
            self._born = 0
        if self._born is None:
            alive = self.root is not None and _alive(self.root)
            st = backend.current().info(self.root.pid) if self.root is not None and alive else None
            if st is not None:
                self._born = st.start
            elif self.root is not None:  # gone already: psutil's clock, a tick of slack
                with contextlib.suppress(psutil.Error):
                    born = (self.root.create_time() - psutil.boot_time()) * _CLK_TCK
                    self._born = max(0, int(born) - 1)
            if self._born is None:
                # psutil's clock (boot time + start ticks), with a second of slack.
                self._born = max(0, int((self.since - 1.0 - psutil.boot_time()) * _CLK_TCK))
        return self._born

    def _marked(self, env: bytes) -> bool:
        """Whether a raw environment carries this run's stream id *and* this process's owner."""
        return (env_value(env, _ENV_NEEDLE) == self.stream_id.encode()
                and env_value(env, _OWNER_NEEDLE) == backend.current().owner_token().encode())

    def _claims_orphan(self, st: ProcInfo, env: bytes | None) -> bool:
        """Whether a child re-parented to us (we are subreaper) is one of the run's.

        Marked ones are found by their marker. Unmarked: one in our own session, or that
        carries the app-child or another run's marker, is not the run's; one whose environment
        is unreadable (it made itself non-dumpable, as ssh-agent does) is judged by what stays
        readable: it must be our own user's, and either sit in one of the run's sessions, or be
        born after the agent while this is the only run (then nobody else can have left it).
        """
        # Agents always get a session of their own: a process in ours (what xdg-open left,
        # say) was started by the app, not by a run.
        be = backend.current()
        if (st.pid in _own_children or not be.subreaper_active() or st.zombie
                or st.sid == (be.group_and_session(0) or (0, 0))[1]):
            return False
        if env is not None:
            if any(env_value(env, n) is not None for n in (_ENV_NEEDLE, _APP_NEEDLE)):
                return False
        elif be.real_uid(st.pid) != be.real_uid(os.getpid()):
            return False
        if st.sid in self.sessions:
            return True
        return st.start >= self._born_ticks() and self.sole_run()

    @with_spare_fd  # a process out of fds must still find the run's processes
    def _scan_known(self) -> set[int]:
        """The known tree, without reading all of /proc: the root, what is known, adopted
        orphans, and their descendants (from the kernel's children lists). Its cost grows with
        the tree, not with the machine's process count."""
        be = backend.current()
        seeds = [p.pid for p in self.alive()]
        if self.root is not None and _alive(self.root):
            seeds.append(self.root.pid)
        try:
            adopted = be.adopted()
            if adopted is None:
                raise _NoChildrenFile
            for pid in adopted:
                if pid in _own_children:
                    continue
                st = be.info(pid)
                env = be.environ(pid)
                if st is not None and ((env is not None and self._marked(env))
                                       or self._claims_orphan(st, env)):
                    seeds.append(pid)
            return _descendants(seeds, _children_or_raise)
        except _NoChildrenFile:
            return self._scan_proc()

    def _scan_proc(self) -> set[int]:
        """One pass over /proc: the root's and marked processes' descendants, adopted orphans,
        and every member of the run's sessions.

        A process started before the agent cannot carry its marker, so only younger ones have
        their environment read: a pass costs one small read per unrelated process.
        """
        me = os.getpid()
        be = backend.current()
        own_sid = (be.group_and_session(0) or (0, 0))[1]
        born = self._born_ticks()
        children: dict[int, list[int]] = {}
        young: dict[int, ProcInfo] = {}
        seeds: set[int] = set()
        for st in be.snapshot():
            pid = st.pid
            children.setdefault(st.ppid, []).append(pid)
            if st.zombie or pid == me or st.start < born:
                continue
            young[pid] = st
            env = be.environ(pid)
            if ((env is not None and self._marked(env))
                    or (st.ppid == me and self._claims_orphan(st, env))):
                seeds.add(pid)
        if self.root is not None and _alive(self.root):
            seeds.add(self.root.pid)
        found = _descendants(seeds, lambda pid: children.get(pid, ()))
        sessions = {young[p].sid for p in found if p in young} | self.sessions
        sessions -= {own_sid, 0, 1}
        members = {pid for pid, st in young.items() if st.sid in sessions} - found
        return found | _descendants(members, lambda pid: children.get(pid, ()))

    @with_spare_fd  # a process out of fds must still find the run's processes
    def alive(self) -> list[psutil.Process]:
        return [p for p in self.known.values() if _alive(p)]
