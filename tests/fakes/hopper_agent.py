"""Fake agents whose tools escape a stop on purpose: ``python hopper_agent.py MODE [PROMPT]``.

Claude-stream-json output like fake_agent.py (issue 22 items 2 and 10):

``chain``
    Starts a tool in a new session that, on SIGTERM, turns into a fork-and-exit chain: each
    generation forks the next, which calls ``setsid`` (a session of its own), and exits, so
    one process is alive at any instant and a new pid appears every ~ms, for
    ``FAKE_HOP_SECONDS`` (default 120) or until ``FAKE_HOP_STOPFILE`` exists (the tests'
    cleanup). ``FAKE_HOP_UNMARKED=1``: the tool is started with an environment without
    ``TOLARIA_*`` (no marker to find it by). Every generation is noted in ``FAKE_HOPLOG`` by
    its parent (``pid unix-time``) right after the fork, and the tool notes itself once more
    when the chain begins. ``FAKE_PIDFILE`` gets the tool's pid
    once its handler is in place.
``env_daemon``
    Double-forks a daemon in a new session that ``execve``s itself with an *empty*
    environment (no marker, nothing), as ``env -i`` does; with ``FAKE_NONDUMPABLE=1`` it
    also makes itself non-dumpable (its environment unreadable to its own user, as
    ssh-agent does). The daemon writes its pid to ``FAKE_PIDFILE`` (passed in argv, since
    its environment is empty) once it is in place, then sleeps ``FAKE_DAEMON_SECONDS``
    (default 120). The agent then says so and hangs.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # mypy knows this folder as ``fakes`` under tests/, the tests' import root
    from fakes import fake_agent as fa
else:
    import fake_agent as fa  # (this folder is on sys.path: the script's own)

ME = os.path.abspath(__file__)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TOLARIA_")}


# --- chain -------------------------------------------------------------------------------------


def chain_tool(log: str, stopfile: str, seconds: float, pidfile: str) -> None:
    """The tool: idle until SIGTERM, then hop (see the module docstring)."""

    def note(pid: int) -> None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"{pid} {time.time():.6f}\n".encode())
        os.close(fd)

    def hop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # no nested chains
        note(os.getpid())  # the chain begins (a stop may end it before the first fork)
        end = time.monotonic() + seconds
        while True:
            try:
                child = os.fork()
            except OSError:  # out of pids for a moment: try again
                continue
            if child:
                note(child)
                os._exit(0)
            os.setsid()
            if time.monotonic() > end or os.path.exists(stopfile):
                os._exit(0)

    signal.signal(signal.SIGTERM, hop)
    note(os.getpid())
    with open(pidfile + ".tmp", "w") as fh:
        fh.write(f"{os.getpid()}\n")
    os.replace(pidfile + ".tmp", pidfile)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.05)


def chain(prompt: str) -> None:
    fa.init()
    env = _clean_env() if os.environ.get("FAKE_HOP_UNMARKED") == "1" else dict(os.environ)
    pidfile = os.environ["FAKE_PIDFILE"]
    subprocess.Popen([sys.executable, ME, "--chain-tool", os.environ["FAKE_HOPLOG"],
                      os.environ.get("FAKE_HOP_STOPFILE", "/nonexistent"),
                      os.environ.get("FAKE_HOP_SECONDS", "120"), pidfile],
                     env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    fa._wait_file(pidfile)
    fa.text("hopper tool started")
    fa.hang()


# --- env_daemon ----------------------------------------------------------------------------------


def daemon_body(pidfile: str, seconds: float, hide: bool) -> None:
    if hide:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
            os._exit(70)
    with open(pidfile + ".tmp", "w") as fh:
        fh.write(f"{os.getpid()}\n")
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(seconds)


def env_daemon(prompt: str) -> None:
    fa.init()
    pidfile = os.environ["FAKE_PIDFILE"]
    args = [sys.executable, ME, "--daemon", pidfile, os.environ.get("FAKE_DAEMON_SECONDS", "120"),
            os.environ.get("FAKE_NONDUMPABLE", "0")]
    if os.fork() == 0:  # intermediate: new session, fork the daemon, exit at once
        os.setsid()
        if os.fork():
            os._exit(0)
        fa._detach()
        os.execve(sys.executable, args, {})  # env -i: no marker, no PATH, nothing
    os.wait()
    fa._wait_file(pidfile)
    fa.text("daemon without an environment started")
    fa.hang()


MODES = {"chain": chain, "env_daemon": env_daemon}


def main() -> int:
    if sys.argv[1] == "--chain-tool":
        chain_tool(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5])
        return 0
    if sys.argv[1] == "--daemon":
        daemon_body(sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1")
        return 0
    MODES[sys.argv[1]](sys.argv[2] if len(sys.argv) > 2 else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
