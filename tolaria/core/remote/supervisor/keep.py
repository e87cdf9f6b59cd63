"""Keep running when disconnected (ADR 0032): the ring of the agent's output and the socket a
new link attaches on, in the cache folder's runs/."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections import deque
from typing import Callable

# POSIX only: the imports follow the assert, so that mypy --platform win32 skips them too.
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (its frames: any)"

from .frames import ATTACHED, frame  # noqa: E402


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
    """The folder the supervisor is cached in: the package's (here: supervisor/), the bundle's
    on the host (a module's path in the zip goes through the zip file, which is no folder)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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

