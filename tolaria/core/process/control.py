"""The local control socket: ``tolaria streams`` and ``tolaria abort`` from another terminal.

Every Tolaria process that runs agents (GUI or ``tolaria run``) listens on
``<socket_dir>/<pid>.sock``: a Unix socket, mode 0600 in a 0700 folder, that also checks the
peer's uid. It speaks one JSON line in, one JSON line out, and knows two requests:
``{"op": "list"}`` (each live run: stream_id, agent, state, cwd, started_at, elapsed_s, and what
the owner's ``details``, e.g. ``chat``) and ``{"op": "abort", "stream_id": ID}``. It
accepts stream ids only, never pids; an abort is answered once the stop is complete (tree gone).
A burst is queued, not reset (see ``ControlServer``). A ``tolaria run --stream-id`` listens
from its first lines, as ``<pid>.claim`` (tolaria/core/process/claim.py); ``start`` adopts
that socket. The client side is tolaria/core/process/control_client.py (synchronous, light).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import select
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tolaria.core.process import claim, control_client
from tolaria.core.process.registry import ProcessRegistry, default_registry
from tolaria.core.stream_id import InvalidStreamId, validate_stream_id
from tolaria.support import paths

log = logging.getLogger(__name__)

MAX_REQUEST = 4096
REQUEST_TIMEOUT_S = 5.0
#: A client that has not sent its request line after this long is dropped (ours send at once).
IDLE_TIMEOUT_S = 2.0
#: At most this many accepted connections wait for their request; newcomers queue behind.
MAX_CLIENTS = 32
#: With ``MAX_CLIENTS`` waiting and others queued behind them, a client silent this long (not a
#: byte unread) is dropped for them. Ours send their request with the connect.
PRESSED_IDLE_S = 0.01
#: An answer the client does not take within this long is given up.
SEND_TIMEOUT_S = 5.0
#: How long ``start`` waits for the requests queued on a claimed socket before it listened.
SETTLE_S = 0.5


def _default_max_clients() -> int:
    """``MAX_CLIENTS``, or fewer when this process has few fds: waiting clients never hold
    more than 1/16 of them, so a flood cannot starve the runs (a spawn needs fds too)."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # pragma: no cover - Windows
        return MAX_CLIENTS
    if soft == resource.RLIM_INFINITY:
        return MAX_CLIENTS
    return max(2, min(MAX_CLIENTS, soft // 16))
ABORT_TIMEOUT_S = 60.0


def _open_reserve() -> int | None:
    """One fd kept aside for ``ControlServer._shed`` (None if even that fails)."""
    try:
        return os.open(os.devnull, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


def _peer_uid(sock: socket.socket | None) -> int | None:
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class _Client:
    """One accepted connection: while it has not sent its whole request line, it *waits*."""

    __slots__ = ("buf", "conn", "dropped", "read", "reading", "since", "task")

    def __init__(self, conn: socket.socket, read: asyncio.Future[None]) -> None:
        self.conn = conn
        self.since = time.monotonic()
        #: What it sent so far, read by the loop's reader callback the moment it comes (not by
        #: a task that runs later): a client whose request is in is never taken for a silent
        #: one, however busy the loop is.
        self.buf = b""
        self.reading = False
        self.dropped = False
        self.task: asyncio.Task[None] | None = None
        #: Done once the request line is in (or the client is gone or dropped).
        self.read = read

    def line(self) -> bytes:
        """The request line (up to its newline, or what came before EOF or MAX_REQUEST)."""
        line, newline, _rest = self.buf.partition(b"\n")
        return line + newline if newline else self.buf

    def quiet(self) -> bool:
        """Nothing unread from it right now (an EOF or an error counts: it is leaving)."""
        try:
            return not self.conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return True


class ControlServer:
    """The control socket of this process.

    Every client of a burst is answered: accepted connections read their request at once
    (ours send it with the connect), and beyond ``max_clients`` still waiting for theirs the
    newcomers queue in the socket's listen queue (``claim.BACKLOG``), not reset. Hostile
    clients cannot starve it: a client that has not sent its request within ``idle_timeout``
    seconds is dropped, and one silent for ``PRESSED_IDLE_S`` while others queue behind a full
    ``max_clients`` is dropped for them (fewer than 32 when the fd limit is low); when the
    process runs out of file descriptors a reserved one is freed to accept and drop the
    pending connection, so the accept loop never spins on EMFILE and the rest of the process
    (a Stop) keeps its fds. A ``tolaria run --stream-id`` claimed its socket before it had a
    registry (tolaria/core/process/claim.py): ``start`` adopts it and takes the requests
    already queued (an early abort) before it returns, i.e. before the agent is spawned.
    """

    def __init__(self, registry: ProcessRegistry | None = None, folder: Path | None = None,
                 details: Callable[[str], dict[str, Any]] | None = None, *,
                 max_clients: int | None = None, idle_timeout: float = IDLE_TIMEOUT_S) -> None:
        self.registry = registry or default_registry()
        self.folder = folder or paths.socket_dir()
        self.path = self.folder / f"{os.getpid()}.sock"
        #: Extra fields (JSON values) of a live stream's ``list`` entry, e.g. ``chat``: its
        #: chat's title. The owner knows them; the registry does not.
        self.details = details
        self.max_clients = max_clients if max_clients is not None else _default_max_clients()
        self.idle_timeout = idle_timeout
        self._sock: socket.socket | None = None
        self._reserve: int | None = None
        #: Connections still waiting for their request, oldest first (the eviction order).
        self._waiting: dict[_Client, None] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Not accepting: ``max_clients`` wait, none silent long enough to drop (see _accept).
        self._paused = False
        self._resume_at: asyncio.TimerHandle | None = None
        #: Clients dropped for others queued behind them (and by the fd shed), for tests.
        self.dropped = 0

    def _streams(self) -> list[dict[str, Any]]:
        now = time.time()
        out = []
        for info in self.registry.live():
            extra: dict[str, Any] = {}
            if self.details is not None:
                try:
                    extra = dict(self.details(info["stream_id"]))
                except Exception:  # a listing never fails for want of a title
                    log.exception("control: details of %s", info["stream_id"])
            entry = {**extra, **info}
            entry["elapsed_s"] = round(max(0.0, now - float(info.get("started_at") or now)), 3)
            out.append(entry)
        return out

    async def start(self) -> None:
        claimed = claim.take(str(self.path))
        sock: socket.socket | None = None
        if claimed is not None:  # listening since the process's first lines, as <pid>.claim
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=claimed)
            try:  # the queued clients stay queued: they are connected to the socket, not a name
                os.replace(claim.claim_path(str(self.path)), self.path)
                sock.setblocking(False)
            except OSError:
                log.warning("control: could not rename the claimed socket", exc_info=True)
                sock.close()
                sock = None
                claimed = None
        if sock is None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(str(self.path))
                sock.listen(claim.BACKLOG)  # before anything else: a client seeing the file
                os.chmod(self.path, 0o600)  # can connect (the folder is 0700, and peers' uids
                sock.setblocking(False)  # are checked)
            except BaseException:
                sock.close()
                raise
        self._sock = sock
        self._reserve = _open_reserve()
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept)
        if claimed is not None:
            await self._settle()

    async def _settle(self) -> None:
        """Take the requests queued before this process listened: an abort among them stops
        the (reserved) run before its agent is spawned. Bounded: a client that connected
        without sending anything is not waited for long."""
        self._accept()
        queued = [client.read for client in self._waiting]
        if queued:
            await asyncio.wait(queued, timeout=SETTLE_S)

    @property
    def clients(self) -> int:
        """Connections being served right now (waiting for a request or being answered)."""
        return len(self._tasks)

    async def close(self) -> None:
        if self._sock is not None:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        if self._resume_at is not None:
            self._resume_at.cancel()
            self._resume_at = None
        if self._reserve is not None:
            os.close(self._reserve)
            self._reserve = None
        for client in list(self._waiting):  # silent clients go; answers in flight finish
            self._drop(client)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=1.0)
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    # -- accepting: a queue, not resets -------------------------------------------------------
    def _pending(self) -> bool:
        """Whether a connection waits in the listen queue."""
        assert self._sock is not None
        poller = select.poll()  # not select.select: it fails on fds past 1024
        poller.register(self._sock, select.POLLIN)
        return bool(poller.poll(0))

    def _accept(self) -> None:
        """Accept what is pending (a bounded batch per loop turn, so others get to run). With
        ``max_clients`` waiting for their request, make room by dropping those silent for
        ``PRESSED_IDLE_S`` (someone queues behind them), or else stop accepting: the listen
        queue holds the newcomers until a client's request is in or one has been silent long
        enough (``_pause``)."""
        if self._sock is None:
            return
        for _ in range(64):
            if len(self._waiting) >= self.max_clients:
                if not self._pending():
                    return
                if not self._make_room():
                    self._pause()
                    return
            try:
                conn, _addr = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self._shed()
                return
            self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        loop = asyncio.get_running_loop()
        client = _Client(conn, loop.create_future())
        self._waiting[client] = None
        loop.add_reader(conn.fileno(), self._on_readable, client)
        client.reading = True
        self._on_readable(client)  # the request is usually there already
        task = asyncio.ensure_future(self._serve(client))
        client.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # Also when the task is cancelled before its first step (its finally never runs).
        task.add_done_callback(lambda _task: self._close(client))

    def _on_readable(self, client: _Client) -> None:
        try:
            chunk = client.conn.recv(MAX_REQUEST + 1)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        client.buf += chunk
        if not chunk or b"\n" in client.buf or len(client.buf) > MAX_REQUEST:
            self._stop_reading(client)
            self._left(client)

    def _stop_reading(self, client: _Client) -> None:
        if client.reading:
            client.reading = False
            asyncio.get_running_loop().remove_reader(client.conn.fileno())

    def _close(self, client: _Client) -> None:
        self._stop_reading(client)  # before the fd goes (its number is reused at once)
        self._left(client)
        client.conn.close()

    def _make_room(self) -> bool:
        """Drop the waiting clients silent for ``PRESSED_IDLE_S``; True if one can come in."""
        cutoff = time.monotonic() - PRESSED_IDLE_S
        for client in [c for c in self._waiting if c.since <= cutoff]:
            if client.quiet():
                self._drop(client)
        return len(self._waiting) < self.max_clients

    def _pause(self) -> None:
        assert self._sock is not None
        if not self._paused:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._paused = True
        if self._resume_at is None and self._waiting:
            oldest = next(iter(self._waiting))
            delay = max(0.001, oldest.since + PRESSED_IDLE_S - time.monotonic())
            self._resume_at = asyncio.get_running_loop().call_later(delay, self._resume)

    def _resume(self) -> None:
        if self._resume_at is not None:
            self._resume_at.cancel()
            self._resume_at = None
        if self._paused and self._sock is not None:
            self._paused = False
            asyncio.get_running_loop().add_reader(self._sock.fileno(), self._accept)

    def _left(self, client: _Client) -> None:
        """``client`` no longer waits for its request (it is in, or the client is gone)."""
        if client in self._waiting:
            del self._waiting[client]
            if self._paused:
                self._resume()
        if not client.read.done():
            client.read.set_result(None)

    def _drop(self, client: _Client) -> None:
        """End a client that is still waiting for its request (its task closes it)."""
        self._stop_reading(client)
        client.dropped = True
        self._left(client)
        self.dropped += 1
        if client.task is not None:
            client.task.cancel()

    def _shed(self) -> None:
        """Out of fds: free the reserved one, accept the pending connection and drop it, take
        the reserve back; drop the oldest waiting client too, which frees one more."""
        if self._waiting:
            self._drop(next(iter(self._waiting)))
        if self._reserve is None or self._sock is None:
            return
        os.close(self._reserve)
        self._reserve = None
        with contextlib.suppress(OSError):
            conn, _addr = self._sock.accept()
            conn.close()
            self.dropped += 1
        self._reserve = _open_reserve()

    # -- serving ------------------------------------------------------------------------------
    async def _serve(self, client: _Client) -> None:
        conn = client.conn
        try:
            # Read the request even when refusing, so the client gets the answer rather than a
            # broken pipe.
            try:
                await asyncio.wait_for(asyncio.shield(client.read), self.idle_timeout)
                line = client.line()
            except TimeoutError:  # silent, or half a line: dropped with a word
                line = b""
            self._stop_reading(client)
            self._left(client)
            if client.dropped:  # for a newcomer, or at close: without a word
                return
            uid = _peer_uid(conn)
            if uid is not None and uid != os.getuid():
                reply: dict[str, Any] = {"ok": False, "error": "refused: another user"}
            else:
                reply = await self._answer(line)
            data = json.dumps(reply).encode() + b"\n"
            await asyncio.wait_for(asyncio.get_running_loop().sock_sendall(conn, data),
                                   SEND_TIMEOUT_S)
        except (ConnectionError, OSError, TimeoutError):
            pass
        finally:
            self._close(client)

    async def _answer(self, line: bytes) -> dict[str, Any]:
        if not line or len(line) > MAX_REQUEST:
            return {"ok": False, "error": "empty or oversized request"}
        try:
            request = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            return {"ok": False, "error": "request is not JSON"}
        if not isinstance(request, dict):
            return {"ok": False, "error": "request is not an object"}
        op = request.get("op")
        if op == "list":
            return {"ok": True, "pid": os.getpid(), "streams": self._streams()}
        if op == "abort":
            try:
                stream_id = validate_stream_id(request.get("stream_id"))
            except InvalidStreamId as exc:
                return {"ok": False, "error": f"invalid stream id: {exc}"}
            stopped = await self.registry.abort_and_wait(stream_id)
            return {"ok": True, "stopped": stopped}
        return {"ok": False, "error": "unknown request (known: list, abort)"}


# The client side lives in control_client (light and synchronous, for ``tolaria abort``); these
# names stay importable from here.
list_streams = control_client.list_streams
live_stream_ids = control_client.live_stream_ids
abort_remote = control_client.abort_remote
