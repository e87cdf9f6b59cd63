"""The supervisor's entry point: the process ssh started forks, the child is the supervisor
(loop.py), the parent stays as the watcher that ends the run if the supervisor is killed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys

# POSIX only: the imports follow the assert, so that mypy --platform win32 skips them too.
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (its frames: any)"

from .ending import end_tree  # noqa: E402
from .frames import GONE, READY, VERSION, frame  # noqa: E402
from .loop import Supervisor  # noqa: E402
from .plumbing import _exit_code, _ignore, _tell  # noqa: E402
from .procs import Tree, _become_subreaper  # noqa: E402
from .runfiles import remove_files_of, remove_written  # noqa: E402


def watch(child: int, news: int) -> int:
    """The watcher: the parent of the supervisor proper (``child``), idle until it ends.

    The supervisor tells it, on the ``news`` pipe, the run (``start STREAM_ID AGENT_PID``) and
    that it finished (``end``). When the pipe closes without ``end`` the supervisor died
    (killed with -9 on the host, a crash): the watcher, a subreaper whose descendants the
    orphaned tree now is, ends the run's processes (descent, session and group, marker) and
    sends the GONE frame in its stead, with how the supervisor ended. Killed itself, it ends the
    ssh session (sshd started it), so the supervisor ends the tree as on any disconnect.
    """
    null = os.open(os.devnull, os.O_RDONLY)  # the link's frames are the supervisor's alone
    os.dup2(null, 0)
    os.close(null)
    _become_subreaper()
    said = b""
    while True:
        try:
            data = os.read(news, 4096)
        except OSError:
            data = b""
        if not data:
            break
        said += data
    _, status = os.waitpid(child, 0)
    lines = said.decode(errors="replace").split("\n")
    run = lines[0].split() if lines else []
    if "end" in lines or len(run) != 3 or run[0] != "start":
        return _exit_code(status) & 0xFF
    tree = Tree(run[1], int(run[2]))
    survivors = end_tree(tree, 1.0, _reap_all)
    remove_files_of(run[1])  # the run's files (runfiles.py) go with it
    how = (f"killed (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status)
           else f"ended unexpectedly (exit code {os.WEXITSTATUS(status)})")
    payload = json.dumps({"exit_code": None, "survivors": survivors, "stopped": False,
                          "disconnected": False, "supervisor": how}).encode()
    with contextlib.suppress(OSError):
        os.write(1, frame(GONE, payload))
    return 0


def _reap_all() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] != 0:
            pass


def main() -> int:
    # Tolaria's interrupt reaches the agent as a frame, never the supervisor itself; a hangup
    # (sshd closing the session) is noticed as the end of stdin instead. A handler, not
    # SIG_IGN: an ignored signal would stay ignored in the agent across exec.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _ignore)
    news_r, news_w = os.pipe()  # close-on-exec: the agent never holds it
    child = os.fork()
    if child:
        os.close(news_w)
        return watch(child, news_r)
    os.close(news_r)
    supervisor = Supervisor(news_w)
    supervisor.send(READY, json.dumps({"version": VERSION, "pid": os.getpid(),
                                       "python": list(sys.version_info[:3]),
                                       "platform": sys.platform}).encode())
    code = supervisor.run()
    remove_written()
    _tell(news_w, b"end\n")
    return code

