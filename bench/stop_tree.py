"""The tree bench/stop_latency.py stops, and how the bench sees it gone and cleans up after it.

``TREE_SCRIPT`` imitates an agent CLI (agent -> tool in a new session -> grandchild); the
``Monitor`` is a separate process that decides "every process is gone" independently of Tolaria
(pidfile pids polled with psutil, then a ``/proc/*/environ`` scan for the run's marker);
``Cleanup`` SIGKILLs whatever the bench learned of, also on Ctrl+C. Kept apart from the timing
and the report so each reads on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from tolaria.core.process import proctree

MARKER = "TOLARIA_STREAM_ID"
POLL_S = 0.001
#: How long a tree process sleeps: a last resort should the bench itself be SIGKILLed.
TREE_LIFETIME_S = 300
#: How long the bench waits for a tree to write its pidfile.
SPAWN_TIMEOUT_S = 20.0
ROLES = ("agent", "tool", "grandchild")

TREE_SCRIPT = r'''
"""Imitation of an agent CLI. argv: MODE PIDFILE [ROLE]; MODE is obey or ignore."""
import json, os, signal, subprocess, sys, time

mode, pidfile = sys.argv[1], sys.argv[2]
role = sys.argv[3] if len(sys.argv) > 3 else "agent"
LIFETIME = %(lifetime)d
if mode == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
elif mode != "obey":
    sys.exit("unknown mode " + mode)

if role == "agent":
    sys.stdout.write(json.dumps({"type": "system", "subtype": "init", "session_id": "b"},
                                separators=(",", ":")) + "\n")
    sys.stdout.flush()
    # The shell tool, in its own session like every real CLI's (setsid / PTY); its output is
    # captured by the agent through a pipe.
    subprocess.Popen([sys.executable, os.path.abspath(__file__), mode, pidfile, "tool"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                     start_new_session=True)
    time.sleep(LIFETIME)
elif role == "tool":
    # The command the tool runs (a dev server, a test runner...). SIG_IGN survives exec.
    child = subprocess.Popen(["sleep", str(LIFETIME)], stdin=subprocess.DEVNULL)
    tmp = pidfile + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"agent": os.getppid(), "tool": os.getpid(), "grandchild": child.pid}, fh)
    os.replace(tmp, pidfile)  # atomic: the pidfile is complete once it exists
    time.sleep(LIFETIME)
'''


#: The observer of "all gone": its own process, so Tolaria's blocking /proc scans on the run's loop
#: neither delay the observation nor are slowed by it. One request per stop, on stdin:
#: {"sid", "procs": [[pid, create_time]...], "limit"}; it answers one line once every process is
#: gone and no live process carries the marker: {"t": CLOCK_MONOTONIC seconds | null, "alive"}.
MONITOR_SCRIPT = r'''
import json, os, sys, time
import psutil

def gone(pid, ctime):
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - ctime) > 0.01 or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True

def marked(sid):
    needle, found = ("TOLARIA_STREAM_ID=" + sid).encode(), []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open("/proc/" + entry.name + "/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        found.append(int(entry.name))
            except OSError:
                pass
    return found

for line in sys.stdin:
    req = json.loads(line)
    procs = {pid: ctime for pid, ctime in req["procs"]}
    deadline = time.monotonic() + req["limit"]
    while True:
        now = time.monotonic()
        alive = [pid for pid, ctime in procs.items() if not gone(pid, ctime)]
        if not alive:
            extra = [pid for pid in marked(req["sid"]) if pid not in procs]
            if not extra:
                print(json.dumps({"t": now, "alive": []}), flush=True)
                break
            for pid in extra:
                try:
                    procs[pid] = psutil.Process(pid).create_time()
                except psutil.Error:
                    pass
            continue
        if now > deadline:
            print(json.dumps({"t": None, "alive": alive}), flush=True)
            break
        time.sleep(%(poll)s)
'''


class Monitor:
    def __init__(self, script: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, text=True)
        own_child(self.proc.pid)

    def watch(self, sid: str, procs: list[psutil.Process], limit_s: float) -> None:
        ident = [[p.pid, p.create_time()] for p in procs]
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"sid": sid, "procs": ident, "limit": limit_s}) + "\n")
        self.proc.stdin.flush()

    def result(self) -> dict[str, Any]:
        """The answer to the last ``watch`` (blocks; bounded by its ``limit_s``)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the monitor process died (returncode {self.proc.wait()})")
        return dict(json.loads(line))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def own_child(pid: int) -> None:
    """Tell Tolaria a child of ours is not an orphan it may claim (as the app must for its own).

    A Tolaria stop claims a child of this process as an adopted orphan of the run only when it
    carries neither a stream-id nor the app-child marker and was born after the agent; children
    started before the registry existed lack the app-child marker, so register them explicitly.
    """
    remember = getattr(proctree, "remember_own_child", None)
    if remember is not None:
        remember(pid)


def start_background(count: int, env: dict[str, str]) -> list[psutil.Process]:
    """``count`` idle processes that are NOT our children (like a desktop's other processes).

    A shell starts them in the background and exits, so they are re-parented to init: call this
    before this process becomes a child subreaper.
    """
    if count == 0:
        return []
    script = f"i=0; while [ $i -lt {count} ]; do sleep {TREE_LIFETIME_S} </dev/null " \
             ">/dev/null 2>&1 & echo $!; i=$((i+1)); done"
    out = subprocess.run(["sh", "-c", script], stdout=subprocess.PIPE, env=env, check=True)
    procs = []
    for pid in out.stdout.split():
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(int(pid)))
    return procs


class TreeNotUp(RuntimeError):
    """The tree died or never came up before the stop (e.g. killed from outside): retried."""


# -- cleanup ---------------------------------------------------------------------------------
class Cleanup:
    """Every process the bench learns of; leftovers are SIGKILLed (with their groups) at the end."""

    def __init__(self, run_prefix: str) -> None:
        self.run_prefix = run_prefix
        self.procs: dict[tuple[int, float], psutil.Process] = {}
        #: Pids asyncio/Popen wait for themselves: never waitpid'ed here while the bench runs.
        self.owned: set[int] = set()
        #: Processes meant to live until the end (--background): killed, not reported.
        self.expected: set[int] = set()

    def add_pid(self, pid: int) -> psutil.Process | None:
        try:
            proc = psutil.Process(pid)
            return self.procs.setdefault((proc.pid, proc.create_time()), proc)
        except psutil.Error:
            return None

    def kill(self, procs: list[psutil.Process], *, reap_all: bool = False) -> None:
        """SIGKILL the groups and pids of ``procs`` still alive, wait, reap adopted ones."""
        live = [p for p in procs if not gone(p)]
        own_pgid = os.getpgid(0)
        for proc in live:
            with contextlib.suppress(OSError):
                pgid = os.getpgid(proc.pid)
                # The process is alive and ours (create time checked), so its group is ours too.
                if pgid > 1 and pgid != own_pgid and not gone(proc):
                    os.killpg(pgid, signal.SIGKILL)
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and any(not gone(p) for p in live):
            time.sleep(POLL_S)
        self.reap(procs, reap_all=reap_all)

    def reap(self, procs: list[psutil.Process], *, reap_all: bool = False) -> None:
        me = os.getpid()
        for proc in procs:
            if proc.pid in self.owned and not reap_all:
                continue
            try:
                if proc.ppid() != me or proc.status() != psutil.STATUS_ZOMBIE:
                    continue
            except psutil.Error:
                continue
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(proc.pid, os.WNOHANG)

    def final(self) -> list[str]:
        """Kill all that is left (listed, or with this run's marker prefix); return what was hit."""
        for pid in marker_pids(self.run_prefix, prefix=True):
            self.add_pid(pid)
        leftovers = []
        for proc in self.procs.values():
            if not gone(proc) and proc.pid not in self.expected:
                with contextlib.suppress(psutil.Error):
                    leftovers.append(f"{proc.pid} {' '.join(proc.cmdline())}")
        self.kill(list(self.procs.values()), reap_all=True)
        return leftovers


def gone(proc: psutil.Process) -> bool:
    """True when the process exited (a zombie counts as gone) or its pid now names another one."""
    try:
        if not proc.is_running():  # compares the create time: a recycled pid is not ours
            return True
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def marker_pids(value: str, *, prefix: bool = False) -> list[int]:
    """Pids whose /proc/PID/environ holds ``TOLARIA_STREAM_ID=value`` (or a value starting so).

    A zombie has no environment left, so it is never listed.
    """
    needle = f"{MARKER}={value}".encode()
    me = os.getpid()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        for var in env.split(b"\0"):
            if var == needle or (prefix and var.startswith(needle)):
                found.append(int(entry.name))
                break
    return found


def alive_of(procs: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in procs if not gone(p)]


def describe(proc: psutil.Process, roles: dict[int, str]) -> str:
    with contextlib.suppress(psutil.Error):
        return f"{roles.get(proc.pid, 'other')}:{proc.name()}"
    return f"{roles.get(proc.pid, 'other')}:?"


# -- one tree ------------------------------------------------------------------------------
def read_pidfile(path: Path) -> dict[str, int] | None:
    """The pidfile's pids, or None while it does not exist (it appears complete, by rename)."""
    try:
        with open(path) as fh:
            return {k: int(v) for k, v in json.load(fh).items()}
    except FileNotFoundError:
        return None


async def wait_pidfile_async(path: Path, task: asyncio.Task[Any] | None) -> dict[str, int]:
    deadline = time.monotonic() + SPAWN_TIMEOUT_S
    while time.monotonic() < deadline:
        pids = read_pidfile(path)
        if pids is not None:
            return pids
        if task is not None and task.done():
            raise TreeNotUp(f"the run ended before the tree was up: {task.result()!r}")
        await asyncio.sleep(POLL_S)
    raise TreeNotUp(f"the tree did not write {path} within {SPAWN_TIMEOUT_S} s")


def tree_procs(pids: dict[str, int], cleanup: Cleanup,
               sid: str) -> tuple[list[psutil.Process], dict[int, str]]:
    """psutil handles for the pidfile's pids plus anything else carrying the marker."""
    roles = {pid: role for role, pid in pids.items()}
    procs = []
    for role in ROLES:
        proc = cleanup.add_pid(pids[role])
        if proc is None or gone(proc):
            raise TreeNotUp(f"{role} (pid {pids[role]}) is not alive before the stop")
        procs.append(proc)
    for pid in marker_pids(sid):
        if pid not in roles:
            proc = cleanup.add_pid(pid)
            if proc is not None:
                roles[pid] = "other"
                procs.append(proc)
    return procs, roles
