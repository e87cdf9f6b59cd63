"""Tolaria's remote supervisor: one agent run on another machine, with the stop promise kept there.

A standalone program: the standard library only, Python >= 3.8 (checked statically: ruff's
per-file target version and tests/remote/test_host_programs_static.py). Tolaria copies this
package once per version into a cache folder on the host as one zip (content-addressed, checked
by its hash: see bundle.py and bootstrap.py) and starts it through ssh or a command prefix
(docker/podman/kubectl exec, wsl). Its modules: frames (the protocol, shared with Tolaria's
side), procs (the run's processes), ending (ending them), keep and relink (keep running when
disconnected), loop (the Supervisor), main (the watcher and the entry point). Imports between
them are relative: in the bundle the package has another name.

It speaks a small framed protocol on its stdin/stdout (ADR 0026): each frame is one kind byte, a
4-byte big-endian length and the payload. Tolaria sends START (the agent's argv, folder and
environment), STDIN data and EOF, SIGNAL (the agent's polite stop), STOP (end the whole tree) and
HEARTBEAT; the supervisor sends READY, the agent's STDOUT/STDERR, FAILED (it could not start) and
GONE (the tree is gone: exit code, survivors), then exits.

The promise, with its own small means: the agent starts in its own session with the run's
TOLARIA_STREAM_ID marker; on Linux the supervisor is a child subreaper, so orphans of the tree
come back to it; a stop signals every process of the run (found by descent, marker, session and
group), SIGKILL at once to what ignores SIGTERM (SigIgn), SIGKILL to the rest after the grace,
and reports what is still alive. If Tolaria goes silent (no frame for ``heartbeat_s``: ssh
killed, a silent network drop) or its end of the pipe closes, the tree is ended just the same.
The process ssh started forks first and stays as a watcher (watch()): if the supervisor itself
is killed on the host, the watcher ends the tree and says so.
"""

from __future__ import annotations

import sys

from .frames import (
    ATTACH,
    ATTACHED,
    FAILED,
    FILES,
    GONE,
    HEADER,
    HEARTBEAT,
    MARKER,
    MAX_FRAME,
    READY,
    SIGNAL,
    START,
    STDERR,
    STDIN,
    STDIN_EOF,
    STDOUT,
    STOP,
    VERSION,
    FrameReader,
    frame,
)

__all__ = ["ATTACH", "ATTACHED", "FAILED", "FILES", "GONE", "HEADER", "HEARTBEAT", "MARKER", "MAX_FRAME",
           "READY", "SIGNAL", "START", "STDERR", "STDIN", "STDIN_EOF", "STDOUT", "STOP", "VERSION",
           "FrameReader", "frame"]

# -- the frames above are shared with Tolaria's side (link.py, the MCP forms: on any platform);
# the rest of the package is the supervisor proper, which needs POSIX signals, sessions and
# groups: each of its modules asserts it.
if sys.platform == "win32" and __name__ == "tolaria_supervisor":  # the bundle, on the host
    sys.stdout.write("TOLARIA-ERROR Windows hosts are not supported yet (use WSL: "
                     "exec:wsl -d Ubuntu --)\n")
    sys.exit(7)
