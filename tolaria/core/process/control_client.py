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
#: A reset or refused connection is tried again at most this many times, 5, 10, 20 ... ms
#: apart (at most RETRY_MAX_S), within RETRY_WINDOW_S of the first try.
RETRIES = 12
RETRY_FIRST_S = 0.005
RETRY_MAX_S = 0.2
RETRY_WINDOW_S = 3.0
REFUSED_RETRIES = 2
#: How long ``abort`` waits for a ``tolaria run --stream-id ID`` found by its command line to
#: listen (it claims its socket in its first lines; tolaria/core/process/claim.py).
CLAIM_WAIT_S = 10.0


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
    for name in names:  # a run SIGKILLed while it started (tolaria/core/process/claim.py)
        if name.endswith(".claim"):
            remove_if_stale(os.path.join(where, name))
    return sorted(os.path.join(where, n) for n in names if n.endswith(".sock"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def _socket_pid(path: str) -> int | None:
    """The pid of ``<pid>.sock`` or ``<pid>.claim``; None for another name."""
    try:
        return int(os.path.basename(path).removesuffix(".sock").removesuffix(".claim"))
    except ValueError:
        return None


def remove_if_stale(path: str) -> None:
    """Delete ``<pid>.sock`` (or ``<pid>.claim``) when process ``pid`` is gone (a Tolaria
    that was SIGKILLed)."""
    pid = _socket_pid(path)
    if pid is not None and pid != os.getpid() and not _pid_alive(pid):
        try:  # not contextlib.suppress: contextlib is one more import on abort's path
            os.unlink(path)
        except OSError:  # removed by another client first
            return


class _Exchange:
    """One request to one socket: connect, send, read one line; again after a reset."""

    def __init__(self, path: str, payload: bytes) -> None:
        self.path = path
        self.payload = payload
        self.answer: dict[str, Any] | None = None
        self.tries = 0
        self.refused = 0
        self.retry_at = 0.0
        self.connected_at = 0.0
        self._fresh()

    def _fresh(self) -> None:
        self.out = self.payload
        self.buf = b""
        self.sock: _socket.socket
        if sys.platform == "win32":  # no AF_UNIX in CPython there; ask_all returns before
            raise OSError("no control channel on Windows yet (docs/adr/0014-windows-job-objects.md)")
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.sock.setblocking(False)

    def connect(self) -> str:
        """Start the exchange: ``"ok"`` (connected), ``"retry"`` (the listen queue is full, or
        refused while its process lives: it is about to listen or closing) or ``"gone"``
        (nobody listens there; a stale socket is removed)."""
        if self.tries:
            self.sock.close()
            self._fresh()
        try:
            self.sock.connect(self.path)
        except (BlockingIOError, InterruptedError):
            # The listen queue is full (a Unix socket does not finish such a connect later).
            return "retry"
        except ConnectionRefusedError:
            # Nobody listens: gone, or a process between bind and listen (or closing), which
            # takes microseconds, so only REFUSED_RETRIES tries: a dead Tolaria's pid reused
            # by another program must not cost every client the whole retry window.
            if self.refused < REFUSED_RETRIES and _socket_pid_alive(self.path):
                self.refused += 1
                return "retry"
            remove_if_stale(self.path)
            return "gone"
        except OSError:
            remove_if_stale(self.path)
            return "gone"
        return "ok"

    def on_writable(self) -> None:
        sent = self.sock.send(self.out)
        self.out = self.out[sent:]

    def on_readable(self) -> bool:
        """Read what is there; True once the exchange is over (answer or end)."""
        chunk = self.sock.recv(65536)
        if not chunk:
            if not self.buf:  # closed without a word: dropped before its request was read
                raise ConnectionResetError("closed without an answer")
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


def _socket_pid_alive(path: str) -> bool:
    pid = _socket_pid(path)
    return pid is not None and _pid_alive(pid)


if sys.platform == "win32":  # no poll() there (and no channel: ask_all returns at once)
    _READ_EVENTS = 0
else:
    _READ_EVENTS = select.POLLIN | select.POLLHUP | select.POLLERR


def _backoff(tries: int) -> float:
    """Seconds before try ``tries + 1``: 5, 10, 20 ... ms, at most ``RETRY_MAX_S``."""
    return min(RETRY_MAX_S, RETRY_FIRST_S * (1 << min(tries, 16)))


def ask_all(request: dict[str, str], timeout: float, folder: str | os.PathLike[str] | None = None,
            *, only: list[str] | None = None) -> list[dict[str, Any]]:
    """Send ``request`` to every Tolaria process at once (or to the sockets ``only``); their
    answers (dicts) within ``timeout`` seconds. A process that does not answer in time is left
    out. A connection refused by a living process, reset or closed before the answer (a server
    shedding clients under a flood), or a full listen queue is tried again with a bounded
    backoff (``RETRY_WINDOW_S``): the server drops a client only before it read its request, so
    a retried request is never acted on twice.

    One ``poll`` loop (not selectors: see the imports) over non-blocking sockets. None on
    Windows, where no Tolaria process listens (ADR 0014: named pipes, not built yet)."""
    return [answer for _path, answer in _ask(request, timeout, folder, only)]


def _ask(request: dict[str, str], timeout: float, folder: str | os.PathLike[str] | None,
         only: list[str] | None) -> list[tuple[str, dict[str, Any]]]:
    """``ask_all``'s answers, each with the socket it came from."""
    if sys.platform == "win32":
        return []
    payload = dumps_flat(request).encode() + b"\n"
    pending = [_Exchange(p, payload) for p in (sockets(folder) if only is None else only)]
    poller = select.poll()
    now = time.monotonic()
    deadline = now + timeout
    connect_deadline = now + min(timeout, CONNECT_TIMEOUT_S)
    retry_until = now + min(timeout, RETRY_WINDOW_S)
    live: dict[int, _Exchange] = {}
    later: list[_Exchange] = []

    def retry(ex: _Exchange) -> None:
        ex.sock.close()
        at = time.monotonic() + _backoff(ex.tries)
        if ex.tries < RETRIES and at < retry_until and _socket_pid_alive(ex.path):
            ex.tries += 1
            ex.retry_at = at
            later.append(ex)

    def begin(ex: _Exchange) -> None:
        outcome = ex.connect()
        if outcome == "ok":
            poller.register(ex.sock, select.POLLOUT)
            live[ex.sock.fileno()] = ex
            ex.connected_at = time.monotonic()
        elif outcome == "retry":
            retry(ex)

    def drop(ex: _Exchange) -> None:
        del live[ex.sock.fileno()]
        poller.unregister(ex.sock)

    try:
        for ex in pending:
            begin(ex)
        while live or later:
            now = time.monotonic()
            if now >= deadline:
                break
            for ex in [e for e in later if e.retry_at <= now]:
                later.remove(ex)
                begin(ex)
            wake = min([deadline, *(e.retry_at for e in later)])
            left = wake - time.monotonic()
            for fd, mask in poller.poll(max(0, int(left * 1000 + 0.999))) if live else ():
                ex = live[fd]
                try:
                    if ex.out:
                        if mask & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                            raise ConnectionResetError("the socket closed before the request")
                        ex.on_writable()
                        if not ex.out:
                            poller.modify(ex.sock, _READ_EVENTS)
                    elif ex.on_readable():
                        drop(ex)
                except (ConnectionResetError, BrokenPipeError):  # dropped unread: again
                    drop(ex)
                    retry(ex)
                except OSError:  # refused, gone: no answer from that one
                    drop(ex)
                    remove_if_stale(ex.path)
            if not live and later:
                time.sleep(max(0.0, min(e.retry_at for e in later) - time.monotonic()))
            if time.monotonic() > connect_deadline:  # connected long ago, request not sent
                for ex in [e for e in live.values()
                           if e.out and time.monotonic() - e.connected_at > CONNECT_TIMEOUT_S]:
                    drop(ex)
    finally:
        for ex in pending:
            ex.sock.close()
    return [(ex.path, ex.answer) for ex in pending if ex.answer is not None]


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
    answer comes when the tree is gone). A ``tolaria run --stream-id STREAM_ID`` that has been
    launched but does not listen yet (found by its command line) is waited for, then asked:
    False only when no process runs, or is about to run, that id, or when its stop left a
    process of the run alive (``abort_report`` says which)."""
    return abort_report(stream_id, folder, timeout)[0]


def abort_report(stream_id: str, folder: str | os.PathLike[str] | None = None,
                 timeout: float = ABORT_TIMEOUT_S) -> tuple[bool, list[tuple[int, str]]]:
    """``abort_remote``'s answer, and the (pid, name) of each process the owner's stop could
    not end (then the answer is False)."""
    validate_stream_id(stream_id)
    deadline = time.monotonic() + timeout
    request = {"op": "abort", "stream_id": stream_id}
    replies = _ask(request, timeout, folder, None)
    if any(bool(a.get("ok") and a.get("stopped")) for _path, a in replies):
        return True, []
    survivors = [s for _path, a in replies for s in _survivors(a)]
    from tolaria.core.process import claim  # only here: ``tolaria streams`` needs none of it

    # By their sockets' names: an abort's answer does not carry the pid (a ``list``'s does).
    answered = {_socket_pid(path) for path, _answer in replies}
    where = os.fspath(folder) if folder else sockdir.socket_dir()
    for pid in claim.find_runs(stream_id):
        if pid in answered:  # it listens, and said no: that run is over
            continue
        served = os.path.join(where, f"{pid}.sock")
        candidates = [served, claim.claim_path(served)]
        until = min(deadline, time.monotonic() + CLAIM_WAIT_S)
        while (path := _wait_for_claim(pid, candidates, until)) is not None:
            left = deadline - time.monotonic()
            answers = ask_all(request, left, only=[path]) if left > 0 else []
            if any(bool(a.get("ok") and a.get("stopped")) for a in answers):
                return True, []
            survivors += [s for a in answers for s in _survivors(a)]
            if answers or os.path.exists(path):  # it answered no, or did not in time
                break
            # Renamed from .claim to .sock between the look and the connect: again.
    return False, survivors


def _survivors(answer: dict[str, Any]) -> list[tuple[int, str]]:
    """The ``survivors`` of an abort's answer, ``[[pid, name], ...]``, as far as well formed."""
    found = answer.get("survivors")
    if not isinstance(found, list):
        return []
    return [(int(s[0]), str(s[1])) for s in found
            if isinstance(s, list) and len(s) == 2 and isinstance(s[0], int)]


def _wait_for_claim(pid: int, paths: list[str], until: float) -> str | None:
    """The first of ``paths`` process ``pid`` listens on, waiting for one to appear until
    ``until``; None once the process is gone (it ended before it listened) or at ``until``."""
    from tolaria.core.process import claim

    ticks = claim.start_ticks(pid)
    while True:
        for path in paths:
            if os.path.exists(path):
                return path
        alive = claim.start_ticks(pid) == ticks if ticks is not None else _pid_alive(pid)
        if not alive or time.monotonic() >= until:
            return None
        time.sleep(0.002)
