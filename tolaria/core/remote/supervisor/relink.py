"""Keep running when disconnected (ADR 0032), the supervisor's side: output queued for the
link, a lost link let go, a new one accepted on the socket (and the attach mode that bridges a
new ssh session to it)."""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import time
from typing import Callable

# POSIX only: the imports follow the assert, so that mypy --platform win32 skips them too.
assert sys.platform != "win32", "the supervisor runs on POSIX hosts (its frames: any)"

from .frames import _CHUNK, ATTACH, FAILED, GONE, HEARTBEAT, STDERR, STDOUT, FrameReader, frame  # noqa: E402
from .keep import Keep, _in_folder, socket_path  # noqa: E402


class KeptLink:
    """The Supervisor's methods for a kept run (a mixin: the attributes are the Supervisor's)."""

    keep: Keep
    reader: FrameReader
    link_open: bool
    link_in: int
    link_out: int
    last_heard: float
    heartbeat_s: float
    stopped: bool
    asked: bool
    first: bytes
    early: list[tuple[bytes, bytes]]
    on_frame: Callable[[bytes, bytes], None]
    send_json: Callable[[bytes, object], None]

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


def bridge(sup: KeptLink, spec: dict[str, object]) -> int:
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
