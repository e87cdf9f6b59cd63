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
import json
import logging
import os
import socket
import struct
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


class ControlServer:
    def __init__(self, registry: ProcessRegistry | None = None, folder: Path | None = None,
                 details: Callable[[str], dict[str, Any]] | None = None) -> None:
        self.registry = registry or default_registry()
        self.folder = folder or paths.socket_dir()
        self.path = self.folder / f"{os.getpid()}.sock"
        self._server: asyncio.AbstractServer | None = None
        #: Extra fields (JSON values) of a live stream's ``list`` entry, e.g. ``chat``: its
        #: chat's title. The owner knows them; the registry does not.
        self.details = details

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
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._server = await asyncio.start_unix_server(self._handle, path=str(self.path))
        os.chmod(self.path, 0o600)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            uid = _peer_uid(writer.get_extra_info("socket"))
            try:
                # Read the request even when refusing, so the client gets the answer rather
                # than a broken pipe.
                line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)
            except (TimeoutError, ValueError, ConnectionError):
                line = b""
            if uid is not None and uid != os.getuid():
                reply: dict[str, Any] = {"ok": False, "error": "refused: another user"}
            else:
                reply = await self._answer(line)
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
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
