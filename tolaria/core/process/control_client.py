"""The client side of the control socket (``tolaria streams``, ``tolaria abort``), kept light.

``tolaria abort ID`` is how another terminal stops a run, so its start-up is part of the stop's
latency: this module imports no asyncio, no psutil, nothing of the runner or the store (the
test ``tests/cli/test_fast_commands.py`` holds it to that). It is synchronous: one non-blocking
socket per Tolaria process, all asked at once through one ``selectors`` loop, so a slow or hung
process delays nobody else's answer beyond its own deadline. The server is
``tolaria.core.process.control.ControlServer``; the protocol is one JSON line each way.
"""

from __future__ import annotations

# The C module, not socket.py: importing socket.py builds four IntEnums, a few milliseconds of a
# command whose whole start-up is the budget (40 ms). _socket has everything this client uses.
import _socket
import contextlib
import json
import os
import selectors
import time
from pathlib import Path

from tolaria.core.stream_id import validate_stream_id
from tolaria.support import paths

TYPE_CHECKING = False  # not typing's: importing typing costs ``tolaria abort`` ~3 ms
if TYPE_CHECKING:
    from typing import Any

REQUEST_TIMEOUT_S = 5.0
ABORT_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 2.0
#: An answer longer than this is not a Tolaria answer (a listing of hundreds of runs fits).
MAX_ANSWER = 4 * 1024 * 1024


def sockets(folder: Path | None = None) -> list[Path]:
    """The control sockets of this user's Tolaria processes (same ``TOLARIA_HOME``); none when
    the folder does not exist yet (nothing ever listened). A folder that is a symlink or another
    user's raises ``paths.UnsafeFolder``: their sockets could answer anything."""
    folder = folder or paths.socket_dir(create=False)
    if not folder.exists():
        return []
    paths.check_own_folder(folder)
    try:
        return sorted(folder.glob("*.sock"))
    except OSError:
        return []


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def remove_if_stale(path: Path) -> None:
    """Delete ``<pid>.sock`` when process ``pid`` is gone (a Tolaria that was SIGKILLed)."""
    try:
        pid = int(path.stem)
    except ValueError:
        return
    if pid != os.getpid() and not _pid_alive(pid):
        with contextlib.suppress(OSError):
            path.unlink()


class _Exchange:
    """One request to one socket: connect, send, read one line."""

    def __init__(self, path: Path, payload: bytes) -> None:
        self.path = path
        self.out = payload
        self.buf = b""
        self.answer: dict[str, Any] | None = None
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.sock.setblocking(False)

    def connect(self) -> bool:
        """Start connecting; False when nobody listens there (a stale socket is removed)."""
        try:
            self.sock.connect(str(self.path))
        except (BlockingIOError, InterruptedError):
            # The listener's backlog is full (a Unix socket does not finish such a connect in
            # the background): wait for it a little, blocking.
            try:
                self.sock.settimeout(CONNECT_TIMEOUT_S / 4)
                self.sock.connect(str(self.path))
                self.sock.setblocking(False)
            except OSError:
                self.sock.close()
                return False
        except OSError:
            self.sock.close()
            remove_if_stale(self.path)
            return False
        return True

    def on_writable(self) -> None:
        sent = self.sock.send(self.out)
        self.out = self.out[sent:]

    def on_readable(self) -> bool:
        """Read what is there; True once the exchange is over (answer or end)."""
        chunk = self.sock.recv(65536)
        if not chunk:
            return True
        self.buf += chunk
        if b"\n" not in self.buf and len(self.buf) <= MAX_ANSWER:
            return False
        with contextlib.suppress(ValueError):  # not JSON, or not UTF-8
            answer = json.loads(self.buf.split(b"\n", 1)[0])
            self.answer = answer if isinstance(answer, dict) else None
        return True


def ask_all(request: dict[str, Any], timeout: float, folder: Path | None = None,
            ) -> list[dict[str, Any]]:
    """Send ``request`` to every Tolaria process at once; their answers (dicts) within
    ``timeout`` seconds. A process that does not answer in time is left out."""
    payload = json.dumps(request).encode() + b"\n"
    pending = [ex for ex in (_Exchange(p, payload) for p in sockets(folder)) if ex.connect()]
    selector = selectors.DefaultSelector()
    now = time.monotonic()
    deadline = now + timeout
    connect_deadline = now + min(timeout, CONNECT_TIMEOUT_S)
    try:
        for ex in pending:
            selector.register(ex.sock, selectors.EVENT_WRITE, ex)
        live = set(pending)
        while live:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, mask in selector.select(left):
                ex = key.data
                try:
                    if mask & selectors.EVENT_WRITE:
                        ex.on_writable()
                        if not ex.out:
                            selector.modify(ex.sock, selectors.EVENT_READ, ex)
                    elif ex.on_readable():
                        live.discard(ex)
                        selector.unregister(ex.sock)
                except OSError:  # refused, reset, gone: no answer from that one
                    live.discard(ex)
                    selector.unregister(ex.sock)
                    remove_if_stale(ex.path)
            if time.monotonic() > connect_deadline:  # still not connected: give up on those
                for ex in [e for e in live if e.out]:
                    live.discard(ex)
                    selector.unregister(ex.sock)
    finally:
        selector.close()
        for ex in pending:
            ex.sock.close()
    return [ex.answer for ex in pending if ex.answer is not None]


def list_streams(folder: Path | None = None,
                 timeout: float = REQUEST_TIMEOUT_S) -> list[dict[str, Any]]:
    """Live runs of every Tolaria process of this user (same ``TOLARIA_HOME``), each with the
    answering process as ``owner_pid``."""
    streams: list[dict[str, Any]] = []
    for answer in ask_all({"op": "list"}, timeout, folder):
        if answer.get("ok"):
            for stream in answer.get("streams", []):
                if isinstance(stream, dict):
                    streams.append({**stream, "owner_pid": answer.get("pid")})
    return streams


def live_stream_ids(folder: Path | None = None, timeout: float = 3.0) -> set[str]:
    """The stream ids other Tolaria processes of this user are running now. Empty when none
    answer in time. Blocking; safe with or without a running event loop."""
    try:
        streams = list_streams(folder, timeout)
    except OSError:
        return set()
    return {str(s["stream_id"]) for s in streams if s.get("stream_id")}


def abort_remote(stream_id: str, folder: Path | None = None,
                 timeout: float = ABORT_TIMEOUT_S) -> bool:
    """Ask every Tolaria process to stop ``stream_id``; True once the owner has stopped it (its
    answer comes when the tree is gone)."""
    validate_stream_id(stream_id)
    answers = ask_all({"op": "abort", "stream_id": stream_id}, timeout, folder)
    return any(bool(a.get("ok") and a.get("stopped")) for a in answers)
