"""The supervisor proper: starts the agent, forwards its output and input, stops it on a frame,
a silent link or a closed pipe, and reports its end (ADR 0026)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time

# POSIX only: the imports follow the assert, so that mypy --platform win32 skips them too.
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (its frames: any)"

from .ending import end_tree  # noqa: E402
from .frames import (  # noqa: E402
    _CHUNK,
    ATTACH,
    FAILED,
    GONE,
    MARKER,
    SIGNAL,
    START,
    STDERR,
    STDIN,
    STDIN_EOF,
    STDOUT,
    STOP,
    FrameReader,
    frame,
)
from .keep import Keep  # noqa: E402
from .plumbing import _exit_code, _ignore, _read, _resolve, _tell  # noqa: E402
from .procs import Tree, _become_subreaper, _ignores, _send  # noqa: E402
from .relink import KeptLink, bridge  # noqa: E402
from .runfiles import run_files  # noqa: E402

_POLL_S = 0.05
#: How long the agent's pipes may stay open after it exited before its leftovers are ended.
_EXIT_MOMENT_S = 0.3
#: Keep-running: output queued for a slow link beyond which the agent's pipes wait.
_BACKLOG = 1 << 20


class Supervisor(KeptLink):
    def __init__(self, news: int = -1) -> None:
        #: The watcher's pipe (see watch()): told the run once it started, and its end.
        self.news = news
        self.reader = FrameReader()
        self.last_heard = time.monotonic()
        self.heartbeat_s = 5.0
        self.grace_s = 2.0
        self.proc: subprocess.Popen[bytes] | None = None
        self.tree: Tree | None = None
        self.status: int | None = None  # the agent's wait status, once reaped
        self.exited_at: float | None = None
        self.pipes: dict[int, bytes] = {}  # open agent fd -> frame kind
        self.stdin_buf = b""
        self.stdin_eof = False
        self.stopped = False
        #: Tolaria asked the agent to stop (a SIGNAL frame): once it exits, its leftovers go at
        #: once instead of after the exit moment.
        self.asked = False
        #: Woken by SIGCHLD (signal.set_wakeup_fd), so an exit is seen at once, not at a poll.
        self.wakeup_r, wakeup_w = os.pipe()
        for fd in (self.wakeup_r, wakeup_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wakeup_w)
        signal.signal(signal.SIGCHLD, _ignore)
        self.link_open = True
        #: Where the link is: our stdin/stdout, a reattached socket, -1 with nobody attached.
        self.link_in, self.link_out = 0, 1
        self.keep = Keep()
        self.first = b""  # the START or ATTACH frame as it came
        self.early: list[tuple[bytes, bytes]] = []

    # -- output to Tolaria ---------------------------------------------------------------------
    def send(self, kind: bytes, payload: bytes = b"") -> None:
        if self.keep.for_s:
            self.keep_send(kind, payload)
            return
        if not self.link_open:
            return
        data = frame(kind, payload)
        try:
            while data:
                data = data[os.write(1, data):]
        except OSError:
            self.link_open = False

    def send_json(self, kind: bytes, obj: object) -> None:
        self.send(kind, json.dumps(obj).encode())

    # -- start ---------------------------------------------------------------------------------
    def wait_start(self) -> dict[str, object] | None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([0], [], [], 1.0)
            if not ready:
                continue
            data = os.read(0, _CHUNK)
            if not data:
                return None
            frames = self.reader.feed(data)
            for i, (kind, payload) in enumerate(frames):
                if kind in (START, ATTACH):
                    spec = json.loads(payload.decode())
                    if isinstance(spec, dict):
                        self.first = frame(kind, payload)
                        self.early = frames[i + 1:]  # sent along (a stop held meanwhile)
                        return spec
        return None

    def start(self, spec: dict[str, object]) -> str | None:
        """Start the agent; a one-line reason when it cannot be."""
        argv = [str(a) for a in spec.get("argv") or []]  # type: ignore[attr-defined]
        cwd = str(spec.get("cwd") or "") or None
        extra = spec.get("env") or {}
        self.heartbeat_s = float(spec.get("heartbeat_s") or 5.0)  # type: ignore[arg-type]
        self.grace_s = float(spec.get("grace_s") or 2.0)  # type: ignore[arg-type]
        stream_id = str(spec.get("stream_id") or "")
        if not argv or not stream_id:
            return "the start request has no program or no stream id"
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in extra.items()})  # type: ignore[attr-defined]
        env[MARKER] = stream_id
        if cwd is not None:
            cwd = os.path.expanduser(cwd)
            if not os.path.isdir(cwd):
                return f"working folder {cwd} does not exist on this host"
            env["PWD"] = cwd
        problem = run_files(spec, stream_id, argv, env)
        if problem is not None:
            return problem
        program = _resolve(argv[0], env)
        if program is None:
            return (f"{argv[0]} is not installed on this host (not found on PATH or through "
                    "the login shell)")
        argv[0] = program
        if float(spec.get("keep_for_s") or 0) > 0:  # type: ignore[arg-type]
            problem = self.keep.setup(spec, stream_id)
            if problem is not None:
                return problem
        _become_subreaper()
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         start_new_session=True)
        except OSError as exc:
            return f"cannot start {argv[0]}: {exc.strerror or exc}"
        self.tree = Tree(stream_id, self.proc.pid)
        _tell(self.news, f"start {stream_id} {self.proc.pid}\n".encode())
        assert self.proc.stdout is not None and self.proc.stderr is not None
        assert self.proc.stdin is not None
        self.pipes = {self.proc.stdout.fileno(): STDOUT, self.proc.stderr.fileno(): STDERR}
        for fd in (*self.pipes, self.proc.stdin.fileno()):
            os.set_blocking(fd, False)
        return None

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> int:
        spec = self.wait_start()
        if spec is None:
            return 2
        if self.first[:1] == ATTACH:
            return bridge(self, spec)
        problem = self.start(spec)
        if problem is not None:
            self.send_json(FAILED, {"message": problem})
            return 1
        for kind, payload in self.early:
            self.on_frame(kind, payload)
        while True:
            self.reap()
            if self.status is not None and self.exited_at is None:
                self.exited_at = time.monotonic()
            if self.exited_at is not None and (
                    not self.pipes or self.asked
                    or time.monotonic() - self.exited_at > _EXIT_MOMENT_S):
                return self.finish()  # the agent ended by itself: its leftovers go too
            if self.keep.for_s:
                if self.unattended():
                    return self.finish(disconnected=True)
            elif not self.link_open:
                return self.finish(disconnected=True)
            elif time.monotonic() - self.last_heard > self.heartbeat_s:
                self.link_open = False  # Tolaria is silent: nobody will read a report
                return self.finish(disconnected=True)
            self.step()
            if self.stopped:
                return self.finish()

    def step(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        readers = [self.wakeup_r, *self.pipes] if len(self.keep.out) < _BACKLOG else [self.wakeup_r]
        readers += [fd for fd in (self.link_in, self.keep.listener_fd) if fd >= 0]
        writers = [self.proc.stdin.fileno()] if self.stdin_buf and not self.proc.stdin.closed \
            else []
        if self.keep.out:
            writers.append(self.link_out)
        try:
            ready, writable, _ = select.select(readers, writers, [], _POLL_S)
        except InterruptedError:
            return
        for fd in ready:
            if fd == self.wakeup_r:
                with contextlib.suppress(OSError):
                    os.read(fd, 512)
                continue
            if fd == self.keep.listener_fd:
                self.accept()
                continue
            if fd != self.link_in and fd not in self.pipes:
                continue  # a link let go meanwhile
            data = _read(fd)
            if data is None:
                continue
            if fd == self.link_in:
                if not data:
                    self.link_open = False
                    return
                self.last_heard = time.monotonic()
                try:
                    frames = self.reader.feed(data)
                except ValueError:
                    self.link_open = False
                    return
                for kind, payload in frames:
                    self.on_frame(kind, payload)
            elif data:
                self.send(self.pipes[fd], data)
            else:
                del self.pipes[fd]
        if self.keep.out and self.link_out in writable:
            self.flush()
        if set(writable) - {self.link_out}:
            self.write_stdin()

    def on_frame(self, kind: bytes, payload: bytes) -> None:
        assert self.proc is not None and self.tree is not None
        if kind == STDIN:
            self.stdin_buf += payload
            self.write_stdin()
        elif kind == STDIN_EOF:
            self.stdin_eof = True
            self.write_stdin()
        elif kind == SIGNAL:
            sig = int(payload.decode() or signal.SIGTERM)
            if self.status is None:
                if _ignores(self.proc.pid, sig):
                    # The kernel drops it: nothing can answer, so the tree goes at once.
                    self.send(STDERR, (f"tolaria supervisor: the agent ignores signal {sig}; "
                                       "ending its processes\n").encode())
                    self.stopped = True
                else:
                    self.asked = True
                    _send(self.proc.pid, sig)
        elif kind == STOP:
            self.stopped = True

    def write_stdin(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        stdin = self.proc.stdin
        if stdin.closed:
            self.stdin_buf = b""
            return
        try:
            while self.stdin_buf:
                self.stdin_buf = self.stdin_buf[os.write(stdin.fileno(), self.stdin_buf):]
        except BlockingIOError:
            return
        except OSError:
            self.stdin_buf = b""
        if self.stdin_eof and not self.stdin_buf:
            with contextlib.suppress(OSError):
                stdin.close()

    def reap(self) -> None:
        """Reap every child that ended (we are the subreaper of the tree); keep the agent's
        status."""
        assert self.proc is not None
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.proc.pid:
                self.status = status
                self.proc.returncode = _exit_code(status)

    # -- the end -------------------------------------------------------------------------------
    def finish(self, disconnected: bool = False) -> int:
        grace = min(self.grace_s, 1.0) if disconnected else self.grace_s
        survivors = self.kill_tree(grace)
        deadline = time.monotonic() + 1.0
        while self.status is None and time.monotonic() < deadline:  # a zombie counts as gone
            self.reap()
            if self.status is None:
                time.sleep(0.005)
        self.drain()
        code = self.proc.returncode if self.proc is not None else None
        gone = {"exit_code": code, "survivors": survivors, "stopped": self.stopped,
                "disconnected": disconnected}
        if self.keep.for_s:
            return self.keep_finish(gone, disconnected)
        self.send_json(GONE, gone)
        return 0

    def kill_tree(self, grace: float) -> list[list[object]]:
        assert self.tree is not None and self.proc is not None
        return end_tree(self.tree, grace, self.reap, self.status is None)

    def drain(self) -> None:
        """Forward what is left in the agent's pipes (its writers are gone)."""
        deadline = time.monotonic() + 0.5
        while self.pipes and time.monotonic() < deadline:
            ready, _, _ = select.select(list(self.pipes), [], [], 0.05)
            for fd in ready:
                data = _read(fd)
                if data is None:
                    continue
                if data:
                    self.send(self.pipes[fd], data)
                else:
                    del self.pipes[fd]
