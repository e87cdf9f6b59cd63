"""Tolaria's remote supervisor: one agent run on another machine, with the stop promise kept there.

A standalone program: the standard library only, Python >= 3.8 (checked statically: ruff's
per-file target version and tests/remote/test_supervisor_static.py). Tolaria copies this file
once per version into a cache folder on the host (content-addressed, checked by its hash: see
bootstrap.py) and starts it through ssh or a command prefix (docker/podman/kubectl exec, wsl).

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

import contextlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import deque
from typing import Callable

VERSION = "1"
MARKER = "TOLARIA_STREAM_ID"

HEADER = struct.Struct(">cI")
MAX_FRAME = 1 << 24

# Tolaria -> supervisor
START = b"S"
STDIN = b"I"
STDIN_EOF = b"E"
SIGNAL = b"G"
STOP = b"K"
HEARTBEAT = b"H"
ATTACH = b"A"  # instead of START: reattach to a kept run (stream id, output offset)
# supervisor -> Tolaria
READY = b"V"
STDOUT = b"O"
STDERR = b"R"
FAILED = b"F"
GONE = b"D"
ATTACHED = b"T"  # the replay follows: where it starts, how many bytes were dropped

_CHUNK = 65536
_POLL_S = 0.05
#: How long the agent's pipes may stay open after it exited before its leftovers are ended.
_EXIT_MOMENT_S = 0.3
#: After SIGKILL, how long a process may take to go before it counts as a survivor.
_KILL_WAIT_S = 2.0
#: Keep-running: output queued for a slow link beyond which the agent's pipes wait.
_BACKLOG = 1 << 20


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    """One frame: kind, length, payload."""
    return HEADER.pack(kind, len(payload)) + payload


class FrameReader:
    """Frames out of a byte stream that arrives in pieces."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self._buf += data
        out = []
        while len(self._buf) >= HEADER.size:
            kind, size = HEADER.unpack_from(self._buf)
            if size > MAX_FRAME:
                raise ValueError(f"frame of {size} bytes is too large")
            end = HEADER.size + size
            if len(self._buf) < end:
                break
            out.append((kind, self._buf[HEADER.size:end]))
            self._buf = self._buf[end:]
        return out


# -- the frames above are shared with Tolaria's side (link.py, on any platform); below, the
# supervisor proper, which needs POSIX signals, sessions and groups.
if sys.platform == "win32" and __name__ == "__main__":
    sys.stdout.write("TOLARIA-ERROR Windows hosts are not supported yet (use WSL: "
                     "exec:wsl -d Ubuntu --)\n")
    sys.exit(7)
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (the frames above: any)"

# -- finding the run's processes ----------------------------------------------------------------

def _linux() -> bool:
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self")


def _proc_read(path: str) -> bytes | None:
    """A /proc file's bytes (None: gone or not ours). os.read, not open(): a scan reads one
    file per process, and file objects made it ~5x slower (12 against 2.5 ms, 150 processes)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    chunks: list[bytes] = []
    try:
        while True:
            data = os.read(fd, 65536)
            if not data:
                return b"".join(chunks)
            chunks.append(data)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgid, session) of a pid from /proc, None when it is gone."""
    try:
        fields = (_proc_read(f"/proc/{pid}/stat") or b"").rsplit(b")", 1)[1].split()
    except IndexError:
        return None
    return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3])


def _has_marker(pid: int, marker: bytes) -> bool:
    return marker in (_proc_read(f"/proc/{pid}/environ") or b"").split(b"\0")


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def _ignores(pid: int, sig: int) -> bool:
    """Whether ``pid`` ignores ``sig`` (SigIgn in /proc; False where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    except (OSError, ValueError):
        pass
    return False


def _table() -> dict[int, tuple[str, int, int, int]]:
    """Every process: pid -> (state, ppid, pgid, session)."""
    table = {}
    if _linux():
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                found = _stat(int(entry))
                if found is not None:
                    table[int(entry)] = found
        return table
    out = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "stat=", "-o", "ppid=", "-o", "pgid=",
                          "-o", "sess="], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         check=False).stdout.decode(errors="replace")
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0].isdigit():
            try:
                table[int(parts[0])] = (parts[1][:1], int(parts[2]), int(parts[3]), int(parts[4]))
            except ValueError:
                continue
    return table


class Tree:
    """The run's processes: the agent's descendants (ours too, as subreaper), its session and
    group, and every process that carries the run's marker."""

    def __init__(self, stream_id: str, agent_pid: int) -> None:
        self.marker = f"{MARKER}={stream_id}".encode()
        self.agent_pid = agent_pid
        self.me = os.getpid()

    def members(self) -> dict[int, tuple[str, int, int, int]]:
        table = _table()
        children: dict[int, list[int]] = {}
        for pid, (_state, ppid, _pgid, _sess) in table.items():
            children.setdefault(ppid, []).append(pid)
        found = set()
        todo = [self.me]
        while todo:  # descendants: with the subreaper, orphans of the tree are ours again
            for child in children.get(todo.pop(), ()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        for pid, (_state, _ppid, pgid, sess) in table.items():
            if self.agent_pid in (pgid, sess):
                found.add(pid)
        if _linux():
            # Not our own ancestors: through a command target on the same machine (a plain
            # prefix, unshare) Tolaria's link that started us carries the marker too.
            ancestors = set()
            pid = self.me
            while pid in table and pid not in ancestors:
                ancestors.add(pid)
                pid = table[pid][1]
            for pid in table:
                if pid not in found and pid not in ancestors and _has_marker(pid, self.marker):
                    found.add(pid)
        found.discard(self.me)
        return {pid: table[pid] for pid in found if pid in table and table[pid][0] not in "ZX"}


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _send(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


def _survivor_json(tree: Tree, alive: dict[int, tuple[str, int, int, int]]) -> list[list[object]]:
    return [[pid, _name(pid)] for pid in sorted(alive)]


# -- the supervisor -----------------------------------------------------------------------------

class Supervisor:
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

    # -- keep running when disconnected -------------------------------------------------------
    def keep_send(self, kind: bytes, payload: bytes) -> None:
        if kind in (STDOUT, STDERR):
            self.keep.remember(kind, payload)
        if self.link_open and self.link_out >= 0:
            self.keep.out += frame(kind, payload)
            self.flush()

    def flush(self, wait: float = 0.0) -> None:
        """Write what is queued for the link (non-blocking: a stalled link must not stop the
        heartbeat check or a reattach), waiting up to ``wait`` seconds for it to go."""
        out, deadline = self.keep.out, time.monotonic() + wait
        while out and self.link_out >= 0:
            try:
                del out[:os.write(self.link_out, out)]
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return
                select.select([], [self.link_out], [], 0.05)
            except OSError:
                self.lose_link()

    def unattended(self) -> bool:
        """Let a lost or silent link go; True once nobody was attached for ``keep.for_s``."""
        now = time.monotonic()
        if self.link_in >= 0 and (not self.link_open or now - self.last_heard > self.heartbeat_s):
            self.lose_link()
        if self.link_in >= 0 and now - self.keep.beat >= 1.0:  # the link's check of us
            self.keep.beat = now
            self.keep_send(HEARTBEAT, b"")
        return self.link_in < 0 and now - self.keep.since > self.keep.for_s

    def lose_link(self) -> None:
        """The run goes on without a link; its output is kept in the ring for a reattach."""
        self.link_open = False
        del self.keep.out[:]
        if self.keep.conn is not None:
            self.keep.conn.close()
            self.keep.conn = None
        elif self.link_in == 0:  # the ssh channel: a dead pipe from now on
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
        self.link_in = self.link_out = -1
        self.keep.since = time.monotonic()

    def accept(self) -> None:
        """A new link attaches (through bridge() on the host). It replaces the one we had (a
        silent link is noticed only at the heartbeat), gets the output it missed from its
        offset on, then the live stream."""
        assert self.keep.listener is not None
        try:
            conn = self.keep.listener.accept()[0]
        except OSError:
            return
        try:
            conn.settimeout(5)
            reader, frames = FrameReader(), []  # type: ignore[var-annotated]
            while not frames:
                data = conn.recv(_CHUNK)
                if not data:
                    raise OSError("closed")
                frames = reader.feed(data)
            offset = int(json.loads(frames[0][1].decode()).get("offset") or 0)
            if frames[0][0] != ATTACH:
                raise ValueError("not an attach")
        except (OSError, ValueError, AttributeError, TypeError):
            conn.close()
            return
        if self.link_in >= 0:
            self.lose_link()
        conn.setblocking(False)
        self.keep.conn, self.link_in, self.link_out = conn, conn.fileno(), conn.fileno()
        self.link_open, self.last_heard, self.reader = True, time.monotonic(), reader
        self.keep.out += self.keep.replay(offset)
        if self.keep.gone is not None:
            self.keep.out += frame(GONE, json.dumps(self.keep.gone).encode())
        self.flush()
        for kind, payload in frames[1:]:
            self.on_frame(kind, payload)

    def keep_finish(self, gone: dict[str, object], timed_out: bool) -> int:
        """The run is over: its end goes to the link, or waits for one to attach (an agent
        that finished while nobody was there) until the unattended time is up."""
        self.keep.gone = gone
        # Stopped by Tolaria: nobody waits for this end (a lost link then hears "gone").
        deadline = 0.0 if timed_out or self.stopped or self.asked else \
            self.keep.since + self.keep.for_s
        while True:
            if self.link_open and self.link_out >= 0:
                self.keep.out += frame(GONE, json.dumps(gone).encode())
                self.flush(wait=5.0)
                if self.link_open and not self.keep.out:
                    break
                self.lose_link()
            if time.monotonic() >= deadline or self.keep.listener is None:
                break
            if select.select([self.keep.listener], [], [], 0.5)[0]:
                self.accept()
                self.flush(wait=5.0)
                if self.link_open and not self.keep.out:
                    break
        self.keep.close()
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


class Keep:
    """Keep running when disconnected: the ring of the agent's output (its last ``cap`` bytes,
    by offset), what is queued for the link, and the socket a new link attaches on."""

    def __init__(self) -> None:
        self.for_s = 0.0  # 0: off; else how long the run goes on with nobody attached
        self.cap = 8 << 20
        self.ring: deque[tuple[int, bytes, bytes]] = deque()
        self.size = self.total = 0
        self.clean = True
        self.beat = 0.0
        self.out = bytearray()
        self.since = 0.0
        self.listener: socket.socket | None = None
        self.conn: socket.socket | None = None
        self.path = ""
        self.gone: dict[str, object] | None = None

    @property
    def listener_fd(self) -> int:
        return self.listener.fileno() if self.listener is not None else -1

    def setup(self, spec: dict[str, object], stream_id: str) -> str | None:
        path = socket_path(stream_id)
        if path is None:
            return f"not a stream id: {stream_id[:80]!r}"
        try:
            os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
            os.chmod(os.path.dirname(path), 0o700)
            with contextlib.suppress(OSError):
                os.unlink(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            old = os.umask(0o177)  # the socket 0600
            try:
                _in_folder(path, sock.bind)
            finally:
                os.umask(old)
            sock.listen(4)
            sock.setblocking(False)
        except OSError as exc:
            return f"cannot keep the run for a reattach ({path}): {exc.strerror or exc}"
        self.listener, self.path = sock, path
        self.cap = int(spec.get("buffer_bytes") or self.cap)  # type: ignore[call-overload]
        self.for_s = float(spec["keep_for_s"])  # type: ignore[arg-type]
        with contextlib.suppress(OSError):
            os.setsid()  # out of the ssh session's: it may end, the run goes on
        os.set_blocking(1, False)
        return None

    def remember(self, kind: bytes, payload: bytes) -> None:
        self.ring.append((self.total, kind, payload))
        self.total += len(payload)
        self.size += len(payload)
        while self.size > self.cap and len(self.ring) > 1:
            dropped = self.ring.popleft()[2]
            self.size -= len(dropped)
            self.clean = dropped.endswith(b"\n")  # the ring starts at a line

    def replay(self, offset: int) -> bytes:
        """ATTACHED, then the output from ``offset`` on (what the ring still has; after a gap,
        from the next whole line)."""
        start = self.ring[0][0] if self.ring else self.total
        offset = min(max(offset, 0), self.total)
        skip = start > offset and not self.clean
        frames = []
        for at, kind, payload in self.ring:
            if at + len(payload) > offset:
                piece = payload[max(offset - at, 0):]
                if skip:  # offset < start <= at: the whole frame, up to its first newline
                    cut = piece.find(b"\n") + 1 or len(piece)
                    skip = b"\n" not in piece
                    start, piece = at + cut, piece[cut:]
                if piece:
                    frames.append(frame(kind, piece))
        head = {"from": max(offset, start), "total": self.total, "dropped": max(start - offset, 0)}
        return frame(ATTACHED, json.dumps(head).encode()) + b"".join(frames)

    def close(self) -> None:
        for sock in (self.conn, self.listener):
            if sock is not None:
                sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def socket_path(stream_id: str) -> str | None:
    """A kept run's socket, in the cache folder's runs/ (0700); None for a bad stream id."""
    prefix = "ai-agent-stream-"
    suffix = stream_id[len(prefix):]
    if not stream_id.startswith(prefix) or not suffix or len(stream_id) > 80 or not all(
            c.isascii() and (c.isalnum() or c == "-") for c in suffix):
        return None
    return os.path.join(_cache_folder(), "runs", stream_id + ".sock")


def _cache_folder() -> str:
    """The folder the supervisor is cached in: the bundle's (a module's path in the zip goes
    through the zip file, which is no folder)."""
    here = os.path.dirname(os.path.abspath(__file__))
    while not os.path.isdir(here) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    return here


def _in_folder(path: str, act: Callable[[str], None]) -> None:
    """``act`` on the socket's name from inside its folder: a socket path is capped at ~100
    bytes, a cache folder is not."""
    here = os.open(".", os.O_RDONLY)
    try:
        os.chdir(os.path.dirname(path))
        act(os.path.basename(path))
    finally:
        os.fchdir(here)
        os.close(here)


def bridge(sup: Supervisor, spec: dict[str, object]) -> int:
    """Attach mode: this session's stdin/stdout bridged to a kept run's socket (the run's
    supervisor replays and serves; FAILED here when the stream id is bad or the run gone)."""
    sid = str(spec.get("stream_id") or "")
    path = socket_path(sid)
    if path is None:
        sup.send_json(FAILED, {"message": f"not a stream id: {sid[:80]!r}"})
        return 1
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _in_folder(path, sock.connect)
        sock.sendall(b"".join([sup.first, *(frame(*f) for f in sup.early), sup.reader._buf]))
    except OSError:
        sock.close()
        sup.send_json(FAILED, {"message": "the run is gone on this host (it ended, or nobody "
                                          "attached in time)", "gone": True})
        return 1
    try:
        while True:
            for ready in select.select([0, sock.fileno()], [], [])[0]:
                if ready == 0:
                    data = os.read(0, _CHUNK)
                    if not data:
                        return 0
                    sock.sendall(data)
                else:
                    data = sock.recv(_CHUNK)
                    if not data:
                        return 0
                    while data:
                        data = data[os.write(1, data):]
    except OSError:
        return 0
    finally:
        sock.close()


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


def _read(fd: int) -> bytes | None:
    """What a non-blocking ``fd`` has: b"" at its end (or an error), None when nothing yet."""
    try:
        return os.read(fd, _CHUNK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _resolve(program: str, env: dict[str, str]) -> str | None:
    """``program`` on PATH, else through the user's login shell (nvm, Homebrew, ~/.local)."""
    import shutil

    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    found = shutil.which(program, path=env.get("PATH"))
    if found:
        return found
    shell = env.get("SHELL") or "/bin/sh"
    try:
        out = subprocess.run([shell, "-lc", 'command -v "$0"', program], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10,
                             check=False).stdout.decode(errors="replace").strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[-1] if out and os.path.isabs(out[-1]) else None


def _ignore(_signum: int, _frame: object) -> None:
    """A signal the supervisor itself does not act on."""


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
    _tell(news_w, b"end\n")
    return code


def _tell(fd: int, line: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, line)


if __name__ == "__main__":
    sys.exit(main())
