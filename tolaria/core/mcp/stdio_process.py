"""A stdio MCP server started by Tolaria itself (Preferences' Test), spoken to by the SDK's
``ClientSession`` over our own pipes.

Not the SDK's ``stdio_client``: that one ends the server by its process group, and a server
that daemonizes a helper into a session of its own (setsid + double fork) would outlive the
Test. Here the server is started like an agent (ADR 0002): an argv, never a shell; a session of
its own; the ``TOLARIA_STREAM_ID`` marker in its environment, so the core's tree kill
(proctree.TreeKiller) finds everything it started, escaped or not, and leak checks can name it.

Stdout lines become the SDK's messages; a line that is not JSON-RPC is kept as ``garbage`` (the
spec forbids anything else on a stdio server's stdout) and ``garbage_seen`` is set, so the Test
can say so at once instead of waiting for an answer that will never parse. Stderr is read
concurrently, its last lines kept for the error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Mapping, Sequence

import anyio
import mcp.types as types
import psutil
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from tolaria.core.events import Survivor
from tolaria.core.process import proctree
from tolaria.core.turns.spawn import ExitProtocol
from tolaria.support.redact import redact_text

#: A tools/list answer of a server with many tools is one long line (hundreds of KiB).
LINE_LIMIT = 16 * 1024 * 1024
_STDERR_LINES = 20
_SHOWN_CHARS = 200
#: How long a server gets to exit by itself once its stdin is closed (the spec's first step).
CLOSE_WAIT_S = 0.5


class StdioServerProcess:
    """One started server: its pipes as SDK streams, its stderr tail, its stop."""

    def __init__(self, proc: asyncio.subprocess.Process, protocol: ExitProtocol,
                 transport: asyncio.SubprocessTransport, stream_id: str, started: float,
                 secrets: Sequence[str], argv: Sequence[str] = ()) -> None:
        self.proc = proc
        #: What was started (the program resolved, then the arguments).
        self.argv = tuple(argv)
        self.protocol = protocol
        self.transport = transport
        self.stream_id = stream_id
        self._secrets = [s for s in secrets if s]
        try:
            root: psutil.Process | None = psutil.Process(proc.pid)
        except psutil.Error:
            root = None
        self.tree = proctree.TreeKiller(stream_id, root, since=started, sole_run=lambda: False)
        #: Lines of stdout that were not MCP messages (shortened, secrets hidden).
        self.garbage: list[str] = []
        self.garbage_seen = asyncio.Event()
        self.stderr_tail: deque[str] = deque(maxlen=_STDERR_LINES)
        self._to_session: MemoryObjectSendStream[SessionMessage | Exception]
        self.read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
        self._to_session, self.read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception](16)
        self.write_stream: MemoryObjectSendStream[SessionMessage]
        self._from_session: MemoryObjectReceiveStream[SessionMessage]
        self.write_stream, self._from_session = anyio.create_memory_object_stream[
            SessionMessage](16)
        self._tasks = [asyncio.ensure_future(self._read_stdout()),
                       asyncio.ensure_future(self._read_stderr()),
                       asyncio.ensure_future(self._write_stdin())]
        self._stopped = False

    @property
    def exited(self) -> asyncio.Event:
        return self.protocol.exited

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def _shown(self, line: str) -> str:
        text = line.strip()
        text = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 1] + "…"
        for secret in self._secrets:
            text = text.replace(secret, "••••••••")
        return redact_text(text)

    # -- pipes --------------------------------------------------------------------------------
    async def _read_stdout(self) -> None:
        reader = self.proc.stdout
        assert reader is not None
        try:
            while True:
                try:
                    raw = await reader.readline()
                except ValueError:  # over LINE_LIMIT: not a message we can take
                    self._garbage(f"a line over {LINE_LIMIT // (1024 * 1024)} MiB")
                    continue
                if not raw:
                    break
                line = raw.decode("utf-8", errors="replace").strip()
                if not line:
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError:
                    self._garbage(line)
                    continue
                await self._to_session.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self._to_session.close()  # the session sees the end of the connection

    def _garbage(self, line: str) -> None:
        self.garbage.append(self._shown(line))
        self.garbage_seen.set()

    async def _read_stderr(self) -> None:
        reader = self.proc.stderr
        assert reader is not None
        with contextlib.suppress(ValueError, OSError):  # ValueError: an endless line
            while raw := await reader.readline():
                line = raw.decode("utf-8", errors="replace").strip()
                if line:
                    self.stderr_tail.append(self._shown(line))

    async def _write_stdin(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.EndOfStream,
                                 ConnectionError, OSError):
            async for message in self._from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                stdin.write(data.encode("utf-8") + b"\n")
                await stdin.drain()

    # -- the end ------------------------------------------------------------------------------
    async def stop(self, grace: float) -> list[Survivor]:
        """Close stdin, give the server ``CLOSE_WAIT_S`` to exit, then end its whole tree
        (what it daemonized included) and wait for the readers; idempotent. Returns what
        could not be ended."""
        if self._stopped:
            return []
        self._stopped = True
        stdin = self.proc.stdin
        if stdin is not None:
            with contextlib.suppress(OSError):
                stdin.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.exited.wait(), CLOSE_WAIT_S)
        survivors = await self.tree.kill(grace)
        # Nobody reads the session's side any more: a reader blocked handing it a message
        # wakes up (BrokenResourceError) instead of waiting for the cancel below.
        self.read_stream.close()
        # The tree is gone, so its pipes are closed: the readers end (bounded all the same).
        readers = self._tasks[:2]
        _done, pending = await asyncio.wait(readers, timeout=1.0)
        for task in [*pending, self._tasks[2]]:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.write_stream.close()
        self._from_session.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 2.0)
        self.transport.close()
        proctree.forget_own_child(self.proc.pid)
        return survivors


async def start_stdio_server(argv: Sequence[str], env: Mapping[str, str], stream_id: str,
                             cwd: str | None = None, secrets: Sequence[str] = ()
                             ) -> StdioServerProcess:
    """Start ``argv`` (its program already resolved) with ``env`` plus the run's markers;
    OSError when it cannot start. ``secrets``: values never shown from its output."""
    loop = asyncio.get_running_loop()
    full_env = proctree.mark_env(dict(env), stream_id)
    if "TOLARIA_HOME" in os.environ:  # which Tolaria's it is (leak checks look for it too)
        full_env.setdefault("TOLARIA_HOME", os.environ["TOLARIA_HOME"])
    started = time.time()
    transport, protocol = await loop.subprocess_exec(
        lambda: ExitProtocol(limit=LINE_LIMIT, loop=loop), *argv,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd=cwd, env=full_env,
        # A session of its own: a Ctrl+C in our terminal does not reach it, and its group
        # and session are found and signalled as a whole when it is stopped.
        start_new_session=True)
    proc = asyncio.subprocess.Process(transport, protocol, loop)
    proctree.remember_own_child(proc.pid)
    return StdioServerProcess(proc, protocol, transport, stream_id, started, secrets, argv)
