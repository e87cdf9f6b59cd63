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
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tolaria.core.process import claim, control_client
from tolaria.core.process.control_queue import IDLE_TIMEOUT_S, MAX_REQUEST, AcceptQueue, Client
from tolaria.core.process.registry import ProcessRegistry, default_registry
from tolaria.core.stream_id import InvalidStreamId, validate_stream_id
from tolaria.support import paths

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 5.0
#: An answer the client does not take within this long is given up.
SEND_TIMEOUT_S = 5.0
#: How long ``start`` waits for the requests queued on a claimed socket before it listened.
SETTLE_S = 0.5
ABORT_TIMEOUT_S = 60.0


def _peer_uid(sock: socket.socket | None) -> int | None:
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class ControlServer(AcceptQueue):
    """The control socket of this process.

    Every client of a burst is answered, and hostile clients cannot starve it
    (tolaria/core/process/control_queue.py: newcomers beyond ``max_clients`` waiting for their
    request queue in the listen queue, ``claim.BACKLOG``; a client that sent nothing is dropped
    after ``idle_timeout``, or sooner while others queue behind it; EMFILE is shed with a
    reserved fd). A ``tolaria run --stream-id`` claimed its socket before it had a
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
        super().__init__(max_clients, idle_timeout)

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
        claimed = claim.take(str(self.path))
        if claimed is not None:  # listening since the process's first lines, as <pid>.claim
            try:  # the queued clients stay queued: they are connected to the socket, not a name
                os.replace(claim.claim_path(str(self.path)), self.path)
            except OSError:
                log.warning("control: could not rename the claimed socket", exc_info=True)
                os.close(claimed)
                claimed = None
                with contextlib.suppress(OSError):  # nobody can connect to it any more
                    os.unlink(claim.claim_path(str(self.path)))
        fd = claimed if claimed is not None else claim.listen(str(self.path)).detach()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
        sock.setblocking(False)
        self._listen_on(sock)
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

    async def close(self) -> None:
        await self._stop_listening()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    # -- serving ------------------------------------------------------------------------------
    async def _serve(self, client: Client) -> None:
        if sys.platform == "win32":  # never started there (see start)
            return
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
            stopped, survivors = await self.registry.abort_and_report(stream_id)
            answer: dict[str, Any] = {"ok": True, "stopped": stopped}
            if survivors:  # never "stopped" while a process of the run lives
                answer["survivors"] = [[s.pid, s.name] for s in survivors]
            return answer
        return {"ok": False, "error": "unknown request (known: list, abort)"}


# The client side lives in control_client (light and synchronous, for ``tolaria abort``); these
# names stay importable from here.
list_streams = control_client.list_streams
live_stream_ids = control_client.live_stream_ids
abort_remote = control_client.abort_remote
