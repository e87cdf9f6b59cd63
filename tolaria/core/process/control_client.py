"""The client side of the control socket (``tolaria streams``, ``tolaria abort``), kept light.

``tolaria abort ID`` is how another terminal stops a run, so its start-up is part of the stop's
latency: this module imports no asyncio, no psutil, nothing of the runner or the store (the
test ``tests/cli/test_fast_commands.py`` holds it to that). It is synchronous: one non-blocking
socket per Tolaria process, all asked at once through one ``poll`` loop, so a slow or hung
process delays nobody else's answer beyond its own deadline. The server is
``tolaria.core.process.control.ControlServer``; the protocol is one JSON line each way.
"""

from __future__ import annotations

# The C modules, not socket.py, selectors.py or json: importing socket.py builds four IntEnums,
# selectors brings collections and math, json brings re; each is milliseconds of a command
# whose whole start-up is the budget (40 ms). Paths are strings (os.path), not pathlib.
import _socket
import os
import select
import sys
import time

from tolaria.core.stream_id import validate_stream_id
from tolaria.support import sockdir

try:
    import _json
except ImportError:  # pragma: no cover - an interpreter without the C accelerator
    _json = None  # type: ignore[assignment]

TYPE_CHECKING = False  # not typing's: importing typing costs ``tolaria abort`` ~3 ms
if TYPE_CHECKING:
    from typing import Any

REQUEST_TIMEOUT_S = 5.0
ABORT_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 2.0
#: An answer longer than this is not a Tolaria answer (a listing of hundreds of runs fits).
MAX_ANSWER = 4 * 1024 * 1024


class _DecodeContext:
    """What ``_json.make_scanner`` reads from a ``json.JSONDecoder``: the defaults of json.loads."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity: as json.loads


def loads(text: str) -> Any:
    """``json.loads(text)`` through the C scanner json itself uses, without importing json (and
    re behind it). Raises ValueError on anything that is not one JSON document."""
    if _json is None:  # pragma: no cover
        import json

        return json.loads(text)
    text = text.strip(" \t\n\r")
    try:
        # typeshed says the context is a make_scanner; C reads only _DecodeContext's attributes
        scan = _json.make_scanner(_DecodeContext())  # type: ignore[arg-type]
        value, end = scan(text, 0)
    except StopIteration as exc:
        raise ValueError(f"not JSON at character {exc.value}") from None
    if end != len(text):
        raise ValueError(f"extra data after JSON at character {end}")
    return value


def dumps_flat(request: dict[str, str]) -> str:
    """``json.dumps`` of a request: a flat object of strings (the only kind the client sends)."""
    if _json is None:  # pragma: no cover
        import json

        return json.dumps(request)
    enc = _json.encode_basestring_ascii
    return "{" + ", ".join(f"{enc(k)}: {enc(v)}" for k, v in request.items()) + "}"


def sockets(folder: str | os.PathLike[str] | None = None) -> list[str]:
    """The control sockets of this user's Tolaria processes (same ``TOLARIA_HOME``); none when
    the folder does not exist yet (nothing ever listened). A folder that is a symlink or another
    user's raises ``paths.UnsafeFolder``: their sockets could answer anything."""
    where = os.fspath(folder) if folder else sockdir.socket_dir()
    if not os.path.exists(where):
        return []
    sockdir.check_own_folder(where)
    try:
        names = os.listdir(where)
    except OSError:
        return []
    return sorted(os.path.join(where, n) for n in names if n.endswith(".sock"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def remove_if_stale(path: str) -> None:
    """Delete ``<pid>.sock`` when process ``pid`` is gone (a Tolaria that was SIGKILLed)."""
    try:
        pid = int(os.path.basename(path).removesuffix(".sock"))
    except ValueError:
        return
    if pid != os.getpid() and not _pid_alive(pid):
        try:  # not contextlib.suppress: contextlib is one more import on abort's path
            os.unlink(path)
        except OSError:  # removed by another client first
            return


class _Exchange:
    """One request to one socket: connect, send, read one line."""

    def __init__(self, path: str, payload: bytes) -> None:
        self.path = path
        self.out = payload
        self.buf = b""
        self.answer: dict[str, Any] | None = None
        self.sock: _socket.socket
        if sys.platform == "win32":  # no AF_UNIX in CPython there; ask_all returns before
            raise OSError("no control channel on Windows yet (docs/adr/0014-windows-job-objects.md)")
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.sock.setblocking(False)

    def connect(self) -> bool:
        """Start connecting; False when nobody listens there (a stale socket is removed)."""
        try:
            self.sock.connect(self.path)
        except (BlockingIOError, InterruptedError):
            # The listener's backlog is full (a Unix socket does not finish such a connect in
            # the background): wait for it a little, blocking.
            try:
                self.sock.settimeout(CONNECT_TIMEOUT_S / 4)
                self.sock.connect(self.path)
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
        try:
            answer = loads(self.buf.split(b"\n", 1)[0].decode())
        except ValueError:  # not JSON, or not UTF-8
            return True
        self.answer = answer if isinstance(answer, dict) else None
        return True


if sys.platform == "win32":  # no poll() there (and no channel: ask_all returns at once)
    _READ_EVENTS = 0
else:
    _READ_EVENTS = select.POLLIN | select.POLLHUP | select.POLLERR


def ask_all(request: dict[str, str], timeout: float, folder: str | os.PathLike[str] | None = None,
            ) -> list[dict[str, Any]]:
    """Send ``request`` to every Tolaria process at once; their answers (dicts) within
    ``timeout`` seconds. A process that does not answer in time is left out.

    One ``poll`` loop (not selectors: see the imports) over non-blocking sockets. None on
    Windows, where no Tolaria process listens (ADR 0014: named pipes, not built yet)."""
    if sys.platform == "win32":
        return []
    payload = dumps_flat(request).encode() + b"\n"
    pending = [ex for ex in (_Exchange(p, payload) for p in sockets(folder)) if ex.connect()]
    poller = select.poll()
    now = time.monotonic()
    deadline = now + timeout
    connect_deadline = now + min(timeout, CONNECT_TIMEOUT_S)
    live: dict[int, _Exchange] = {}

    def drop(ex: _Exchange) -> None:
        del live[ex.sock.fileno()]
        poller.unregister(ex.sock)

    try:
        for ex in pending:
            poller.register(ex.sock, select.POLLOUT)
            live[ex.sock.fileno()] = ex
        while live:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for fd, mask in poller.poll(max(1, int(left * 1000 + 0.999))):
                ex = live[fd]
                try:
                    if ex.out:
                        if mask & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                            raise ConnectionError("the socket closed before the request went")
                        ex.on_writable()
                        if not ex.out:
                            poller.modify(ex.sock, _READ_EVENTS)
                    elif ex.on_readable():
                        drop(ex)
                except OSError:  # refused, reset, gone: no answer from that one
                    drop(ex)
                    remove_if_stale(ex.path)
            if time.monotonic() > connect_deadline:  # still not connected: give up on those
                for ex in [e for e in live.values() if e.out]:
                    drop(ex)
    finally:
        for ex in pending:
            ex.sock.close()
    return [ex.answer for ex in pending if ex.answer is not None]


def list_streams(folder: str | os.PathLike[str] | None = None,
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


def live_stream_ids(folder: str | os.PathLike[str] | None = None, timeout: float = 3.0) -> set[str]:
    """The stream ids other Tolaria processes of this user are running now. Empty when none
    answer in time. Blocking; safe with or without a running event loop."""
    try:
        streams = list_streams(folder, timeout)
    except OSError:
        return set()
    return {str(s["stream_id"]) for s in streams if s.get("stream_id")}


def abort_remote(stream_id: str, folder: str | os.PathLike[str] | None = None,
                 timeout: float = ABORT_TIMEOUT_S) -> bool:
    """Ask every Tolaria process to stop ``stream_id``; True once the owner has stopped it (its
    answer comes when the tree is gone)."""
    validate_stream_id(stream_id)
    answers = ask_all({"op": "abort", "stream_id": stream_id}, timeout, folder)
    return any(bool(a.get("ok") and a.get("stopped")) for a in answers)
