"""The local control socket: ``tolaria streams`` and ``tolaria abort`` from another terminal.

Every Tolaria process that runs agents (GUI or ``tolaria run``) listens on
``<socket_dir>/<pid>.sock``: a Unix socket, mode 0600 in a 0700 folder, that also checks the
peer's uid. It speaks one JSON line in, one JSON line out, and knows two requests:
``{"op": "list"}`` (each live run: stream_id, agent, state, cwd, started_at, elapsed_s, and what
the owner's ``details``, e.g. ``chat``) and ``{"op": "abort", "stream_id": ID}``. It
accepts stream ids only, never pids; an abort is answered once the stop is complete (tree gone).
The client side is tolaria/core/process/control_client.py (synchronous and light).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tolaria.core.process import control_client
from tolaria.core.process.registry import ProcessRegistry, default_registry
from tolaria.core.stream_id import InvalidStreamId, validate_stream_id
from tolaria.support import paths

log = logging.getLogger(__name__)

MAX_REQUEST = 4096
REQUEST_TIMEOUT_S = 5.0
#: A client that has not sent its request line after this long is dropped (ours send at once).
IDLE_TIMEOUT_S = 2.0
#: At most this many connections wait for their request; the oldest goes for a newcomer.
MAX_CLIENTS = 32


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


class ControlServer:
    """The control socket of this process.

    Hostile clients cannot starve it: a client must send its request within ``idle_timeout``
    seconds (a real one sends it at once), at most ``max_clients`` connections wait for their
    request (the oldest is dropped for a newcomer; fewer when the fd limit is low), and when the process runs out of file
    descriptors a reserved one is freed to accept and drop the pending connection, so the
    accept loop never spins on EMFILE and the rest of the process (a Stop) keeps its fds.
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
        self._waiting: dict[asyncio.StreamWriter, None] = {}
        self._tasks: set[asyncio.Task[None]] = set()

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
        if sys.platform == "win32":  # no AF_UNIX in CPython there (ADR 0014: named pipes)
            raise OSError(errno.EAFNOSUPPORT, "no control channel on Windows yet")
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(self.path))
            sock.listen(128)  # before anything else: a client seeing the file can connect
            os.chmod(self.path, 0o600)  # (the folder is 0700, and peers' uids are checked)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._reserve = _open_reserve()
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept)

    @property
    def clients(self) -> int:
        """Connections being served right now (waiting for a request or being answered)."""
        return len(self._tasks)

    async def close(self) -> None:
        if self._sock is not None:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        if self._reserve is not None:
            os.close(self._reserve)
            self._reserve = None
        for writer in list(self._waiting):  # silent clients go; answers in flight finish
            writer.transport.abort()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=1.0)
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _accept(self) -> None:
        """Accept what is pending (a bounded batch per loop turn, so others get to run)."""
        assert self._sock is not None
        for _ in range(64):
            try:
                conn, _addr = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self._shed()
                return
            conn.setblocking(False)
            task = asyncio.ensure_future(self._serve(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _shed(self) -> None:
        """Out of fds: free the reserved one, accept the pending connection and drop it, take
        the reserve back; drop the oldest waiting client too, which frees one more."""
        self._drop_oldest()
        if self._reserve is None or self._sock is None:
            return
        os.close(self._reserve)
        self._reserve = None
        with contextlib.suppress(OSError):
            conn, _addr = self._sock.accept()
            conn.close()
        self._reserve = _open_reserve()

    def _drop_oldest(self) -> None:
        """Drop the client that has been silent the longest (its task then ends at once)."""
        if self._waiting:
            oldest = next(iter(self._waiting))
            del self._waiting[oldest]
            oldest.transport.abort()

    async def _serve(self, conn: socket.socket) -> None:
        if sys.platform == "win32":  # never started there (see start)
            return
        try:
            reader, writer = await asyncio.open_unix_connection(sock=conn)
        except OSError:
            conn.close()
            return
        while len(self._waiting) >= self.max_clients:
            self._drop_oldest()
        self._waiting[writer] = None
        try:
            uid = _peer_uid(writer.get_extra_info("socket"))
            try:
                # Read the request even when refusing, so the client gets the answer rather
                # than a broken pipe.
                line = await asyncio.wait_for(reader.readline(), self.idle_timeout)
            except (TimeoutError, ValueError, ConnectionError):
                line = b""
            self._waiting.pop(writer, None)
            if writer.is_closing():  # dropped for a newcomer
                return
            if uid is not None and uid != os.getuid():
                reply: dict[str, Any] = {"ok": False, "error": "refused: another user"}
            else:
                reply = await self._answer(line)
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._waiting.pop(writer, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

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
