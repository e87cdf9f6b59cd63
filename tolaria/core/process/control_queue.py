"""The control socket's connections: accepted in a queue, never reset for a burst (issue 22.3).

``AcceptQueue`` is the accepting half of ``tolaria.core.process.control.ControlServer``: it
accepts, reads each request the moment it arrives (in the loop's reader callback, so a client
whose request is in is never taken for an idle one, however busy the loop is), and keeps the
limits against idle or hostile clients without resetting real ones: beyond ``max_clients``
accepted connections still waiting for their request, newcomers wait in the socket's listen
queue; a client that sent nothing is dropped after ``idle_timeout`` (2 s), or after
``PRESSED_IDLE_S`` while others queue behind a full set; out of file descriptors, a reserved
one is freed to accept and drop the pending connection, so the accept loop never spins on
EMFILE and the rest of the process (a Stop) keeps its fds. The subclass serves each client
(``_serve``): it awaits ``client.read``, answers, and ``_close``s.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import select
import socket
import sys
import time

MAX_REQUEST = 4096
#: A client that has not sent its request line after this long is dropped (ours send at once).
IDLE_TIMEOUT_S = 2.0
#: At most this many accepted connections wait for their request; newcomers queue behind. Room
#: for a whole 50-at-a-time burst: a real client that is slow to write (an asyncio client on a
#: loaded machine writes some ms after its connect) is then never taken for a silent one.
MAX_CLIENTS = 64
#: With ``MAX_CLIENTS`` waiting and others queued behind them, a client silent this long (not a
#: byte unread) is dropped for them. Ours send their request with the connect; others may take
#: a few ms (the burst test's asyncio clients lost 5 of 1,000 to a 10 ms limit under load).
PRESSED_IDLE_S = 0.03


def _default_max_clients() -> int:
    """``MAX_CLIENTS``, or fewer when this process has few fds: waiting clients never hold
    more than 1/16 of them, so a flood cannot starve the runs (a spawn needs fds too)."""
    if sys.platform == "win32":  # no rlimits
        return MAX_CLIENTS
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # pragma: no cover - Windows
        return MAX_CLIENTS
    if soft == resource.RLIM_INFINITY:
        return MAX_CLIENTS
    return max(2, min(MAX_CLIENTS, soft // 16))


def _open_reserve() -> int | None:
    """One fd kept aside for ``AcceptQueue._shed`` (None if even that fails)."""
    try:
        return os.open(os.devnull, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


class Client:
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


class AcceptQueue:
    """Accepting and reading requests; see the module's docstring."""

    def __init__(self, max_clients: int | None, idle_timeout: float) -> None:
        self.max_clients = max_clients if max_clients is not None else _default_max_clients()
        self.idle_timeout = idle_timeout
        self._sock: socket.socket | None = None
        self._reserve: int | None = None
        #: Connections still waiting for their request, oldest first (the eviction order).
        self._waiting: dict[Client, None] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Not accepting: ``max_clients`` wait, none silent long enough to drop (see _accept).
        self._paused = False
        self._resume_at: asyncio.TimerHandle | None = None
        #: Clients dropped for others queued behind them (and by the fd shed), for tests.
        self.dropped = 0

    @property
    def clients(self) -> int:
        """Connections being served right now (waiting for a request or being answered)."""
        return len(self._tasks)

    async def _serve(self, client: Client) -> None:
        raise NotImplementedError

    def _listen_on(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reserve = _open_reserve()
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept)

    async def _stop_listening(self) -> None:
        """Close the socket; silent clients go, answers in flight get a second to finish."""
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
        for client in list(self._waiting):
            self._drop(client)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=1.0)
        for task in list(self._tasks):
            task.cancel()

    def _pending(self) -> bool:
        """Whether a connection waits in the listen queue."""
        assert self._sock is not None
        if sys.platform == "win32":  # never listening there (ControlServer.start)
            return False
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
        client = Client(conn, loop.create_future())
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

    def _on_readable(self, client: Client) -> None:
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

    def _stop_reading(self, client: Client) -> None:
        if client.reading:
            client.reading = False
            asyncio.get_running_loop().remove_reader(client.conn.fileno())

    def _close(self, client: Client) -> None:
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

    def _left(self, client: Client) -> None:
        """``client`` no longer waits for its request (it is in, or the client is gone)."""
        if client in self._waiting:
            del self._waiting[client]
            if self._paused:
                self._resume()
        if not client.read.done():
            client.read.set_result(None)

    def _drop(self, client: Client) -> None:
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
