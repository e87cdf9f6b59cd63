"""Preferences' Test of one MCP server: start it (or connect), ``initialize``, ``tools/list``,
stop it; through the MCP Python SDK's ``ClientSession``.

Never raises for a failing server: every way one can fail ends in a result with one specific
sentence (command not found, exited at once with its last stderr line, garbage on stdout, no
answer in time, a ``${VAR}`` not set, a URL that refuses, is not MCP, wants credentials), and
nothing it started is left running: a stdio server's whole tree is ended by the core's tree
kill (stdio_process.py), at the end, on timeout, and when the caller cancels (Cancel, the
window closing), which may come at any moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2
import mcp.types as types
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tolaria.core.mcp.servers import DEFAULT_TEST_TIMEOUT_S, SSE, McpConfigError, McpServer, expand
from tolaria.core.mcp.stdio_process import StdioServerProcess, start_stdio_server
from tolaria.core.process.registry import RUNNING, ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.support.redact import is_secret_name

DEFAULT_TIMEOUT_S = DEFAULT_TEST_TIMEOUT_S
#: A server that pages its tools list forever is not waited for.
_MAX_PAGES = 50
#: After the server exits, how long its last answer may still be on its way to the session.
_EXIT_SETTLE_S = 0.3


@dataclass(frozen=True)
class McpTestResult:
    __test__ = False  # not a pytest test class

    ok: bool
    #: (name, description) of each tool the server lists, in its order.
    tools: tuple[tuple[str, str], ...] = ()
    #: Seconds from the start to the answer (or the failure).
    elapsed: float = 0.0
    #: One sentence: why it failed ("" when ok).
    error: str = ""
    #: More lines: the server's name and version, a warning, its last stderr lines.
    detail: str = ""
    #: What could not be stopped (pid and name): should be empty.
    survivors: tuple[str, ...] = field(default=())


_Done = Callable[..., McpTestResult]


class _Failed(Exception):
    """A failure already said in the user's words."""


@dataclass
class _Progress:
    phase: str = "initialize"
    #: HTTP responses seen (status, content type), newest last: what a remote server answered.
    responses: list[tuple[int, str]] = field(default_factory=list)


async def test_server(server: McpServer,
                      environ: Mapping[str, str] | None = None,  # noqa: PT028
                      timeout: float = DEFAULT_TIMEOUT_S,  # noqa: PT028 (not a pytest test)
                      *, cwd: str | None = None,  # noqa: PT028
                      registry: ProcessRegistry | None = None,  # noqa: PT028
                      grace: float = 2.0) -> McpTestResult:  # noqa: PT028
    """Test ``server`` with ``environ`` (default: Tolaria's own) for its ``${VAR}`` references.

    ``registry``: the Test's stdio server is registered like a run (``tolaria streams`` lists
    it, an abort or the app's shutdown stops it)."""
    started = time.monotonic()

    def done(ok: bool, error: str = "", detail: str = "",
             tools: tuple[tuple[str, str], ...] = (), survivors: tuple[str, ...] = ()
             ) -> McpTestResult:
        return McpTestResult(ok, tools, time.monotonic() - started, error, detail, survivors)

    environ = os.environ if environ is None else environ
    try:
        if server.remote:
            return await _test_remote(server, environ, timeout, done)
        return await _test_stdio(server, environ, timeout, cwd, registry, grace, done)
    except _Failed as exc:
        return done(False, str(exc))


test_server.__test__ = False  # type: ignore[attr-defined]  # pytest: not a test


def _expanded(server: McpServer, key: str, pairs: tuple[tuple[str, str], ...],
              environ: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, value in pairs:
        try:
            out[name] = expand(value, environ)
        except McpConfigError as exc:
            raise _Failed(f"{key} {name}: {exc}") from None
    return out


async def _talk(session: ClientSession, progress: _Progress
                ) -> tuple[types.InitializeResult, list[types.Tool]]:
    progress.phase = "initialize"
    init = await session.initialize()
    progress.phase = "tools/list"
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _page in range(_MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        listed = await session.list_tools(params=params)
        tools.extend(listed.tools)
        cursor = listed.next_cursor
        if not cursor:
            break
    return init, tools


def _summary(init: types.InitializeResult, tools: list[types.Tool]
             ) -> tuple[tuple[tuple[str, str], ...], str]:
    info = init.server_info
    name = " ".join(x for x in (info.name, info.version) if x)
    found = tuple((t.name, " ".join((t.description or "").split())) for t in tools)
    count = f"{len(found)} tool" + ("" if len(found) == 1 else "s")
    return found, f"{name}: {count}" if name else count


# -- stdio ----------------------------------------------------------------------------------------

def _resolve(command: str, env: Mapping[str, str]) -> str:
    program = os.path.expanduser(command)
    if os.sep in program or (os.altsep and os.altsep in program):
        if not os.path.exists(program):
            raise _Failed(f"command not found: {program} does not exist")
        if not os.path.isfile(program) or not os.access(program, os.X_OK):
            raise _Failed(f"{program} is not an executable file (chmod +x it?)")
        return program
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise _Failed(f"command not found: {program} is not on the PATH (install it, or give "
                      "its full path)")
    return found


async def _test_stdio(server: McpServer, environ: Mapping[str, str], timeout: float,
                      cwd: str | None, registry: ProcessRegistry | None, grace: float,
                      done: _Done) -> McpTestResult:
    own_env = _expanded(server, "env", server.env, environ)
    env = {**get_default_environment(), **own_env}
    program = _resolve(server.command, env)
    secrets = [v for k, v in own_env.items() if is_secret_name(k)]
    stream_id = new_stream_id()
    run = registry.reserve(stream_id, f"mcp:{server.name}", cwd) if registry else None
    proc: StdioServerProcess | None = None
    talk: asyncio.Task[Any] | None = None
    try:
        try:
            proc = await start_stdio_server([program, *server.args], env, stream_id, cwd, secrets)
        except OSError as exc:
            raise _Failed(f"cannot start {server.command}: {exc.strerror or exc}") from None
        if run is not None and registry is not None:
            registry.transition(run, RUNNING)
        progress = _Progress()
        talk = asyncio.ensure_future(_stdio_talk(proc, progress))
        waits: set[asyncio.Future[Any]] = {
            talk, asyncio.ensure_future(proc.exited.wait()),
            asyncio.ensure_future(proc.garbage_seen.wait())}
        if run is not None:
            waits.add(asyncio.ensure_future(run.stop_event.wait()))
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits - {talk}:
                waiter.cancel()
        if proc.exited.is_set() and not talk.done():
            await asyncio.wait({talk}, timeout=_EXIT_SETTLE_S)
        elif talk.done() and not proc.exited.is_set() and (
                talk.cancelled() or talk.exception() is not None):
            # The connection closed under the session: usually the server is exiting now.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.exited.wait(), _EXIT_SETTLE_S * 3)
        if talk.done() and not talk.cancelled() and talk.exception() is None:
            tools, info = _summary(*talk.result())
            warning = _garbage_text(proc)
            return done(True, detail="\n".join(x for x in (info, warning) if x), tools=tools)
        error = _stdio_error(proc, progress, talk, timeout, run is not None and
                             run.stop_event.is_set())
        return done(False, error, detail="\n".join(proc.stderr_tail))
    finally:
        # Shielded: a Cancel (or the window closing) must still end the server's tree first.
        cleanup = asyncio.ensure_future(_end(proc, talk, grace))
        while True:
            try:
                survivors = await asyncio.shield(cleanup)
                break
            except asyncio.CancelledError:
                if cleanup.done():
                    survivors = cleanup.result()
                    break
        if run is not None and registry is not None:
            run.survivors = tuple(survivors)
            registry.unregister(run)


async def _stdio_talk(proc: StdioServerProcess, progress: _Progress
                      ) -> tuple[types.InitializeResult, list[types.Tool]]:
    async with ClientSession(proc.read_stream, proc.write_stream) as session:
        return await _talk(session, progress)


async def _end(proc: StdioServerProcess | None, talk: asyncio.Task[Any] | None, grace: float
               ) -> list[Any]:
    if talk is not None and not talk.done():
        talk.cancel()
    if talk is not None:
        with contextlib.suppress(BaseException):
            await talk
    return await proc.stop(grace) if proc is not None else []


def _garbage_text(proc: StdioServerProcess, lead: str = "It") -> str:
    if not proc.garbage:
        return ""
    more = f" (and {len(proc.garbage) - 1} more lines)" if len(proc.garbage) > 1 else ""
    return f"{lead} printed something that is not MCP on stdout: “{proc.garbage[0]}”{more}"


def _stdio_error(proc: StdioServerProcess, progress: _Progress, talk: asyncio.Task[Any],
                 timeout: float, aborted: bool) -> str:
    if aborted:
        return "stopped (tolaria abort, or the app is closing)"
    if proc.garbage:
        return (_garbage_text(proc, "the server") + " — a stdio server must print only "
                "JSON-RPC messages there (its logs belong on stderr)")
    if proc.exited.is_set():
        code = proc.returncode
        how = ("" if code is None else f" with code {code}" if code >= 0
               else f" on signal {-code}")
        last = (f": {proc.stderr_tail[-1]}" if proc.stderr_tail
                else " (it printed nothing on stderr)")
        return f"the server exited{how} before it answered {progress.phase}{last}"
    failure = talk.exception() if talk.done() and not talk.cancelled() else None
    if failure is not None:
        return _exception_text(failure, progress, "")
    hint = ""
    if os.path.basename(_program(proc)) in _DOWNLOADERS and progress.phase == "initialize":
        hint = (" (a first run may still be downloading the package: run the command once "
                "in a terminal)")
    return f"no answer to {progress.phase} within {timeout:g} s; the server was stopped{hint}"


#: Launchers that fetch the server before starting it (a first start can take long).
_DOWNLOADERS = {"npx", "uvx", "bunx", "pnpx", "pipx", "npx.cmd", "uvx.exe"}


def _program(proc: StdioServerProcess) -> str:
    return proc.argv[0] if proc.argv else ""


# -- http / sse -----------------------------------------------------------------------------------

async def _test_remote(server: McpServer, environ: Mapping[str, str], timeout: float,
                       done: _Done) -> McpTestResult:
    headers = _expanded(server, "header", server.headers, environ)
    progress = _Progress()

    async def seen(response: httpx2.Response) -> None:
        progress.responses.append((response.status_code,
                                   response.headers.get("content-type", "")))

    def client(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
               auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth,
                                  event_hooks={"response": [seen]})

    async def connect() -> tuple[types.InitializeResult, list[types.Tool]]:
        if server.transport == SSE:
            transport: Any = sse_client(server.url, headers=headers, timeout=timeout,
                                        sse_read_timeout=timeout, httpx_client_factory=client)
        else:
            transport = streamable_http_client(
                server.url, http_client=client(headers, httpx2.Timeout(timeout)))
        async with transport as (read, write), ClientSession(read, write) as session:
            return await _talk(session, progress)

    task = asyncio.ensure_future(connect())
    try:
        finished, _ = await asyncio.wait({task}, timeout=timeout)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    if not finished:
        return done(False, f"no answer to {progress.phase} within {timeout:g} s from "
                           f"{_where(server.url)}")
    exc = task.exception()
    if exc is None:
        tools, info = _summary(*task.result())
        return done(True, detail=info, tools=tools)
    return done(False, _exception_text(exc, progress, server.url))


def _where(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc or url


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


_STATUS = {401: "401 Unauthorized: the server wants credentials (an Authorization header?)",
           403: "403 Forbidden: these credentials may not use it",
           404: "404 Not Found: no MCP endpoint at this URL (check its path)",
           405: "405 Method Not Allowed: not an MCP endpoint (check its path, or the transport)"}


def _exception_text(exc: BaseException, progress: _Progress, url: str) -> str:
    leaves = _leaves(exc)
    where = _where(url) if url else ""
    for leaf in leaves:
        if isinstance(leaf, httpx2.ConnectTimeout):
            return f"cannot connect to {where}: no answer (timed out)"
        if isinstance(leaf, httpx2.TimeoutException):
            return f"{where} did not answer {progress.phase} in time"
        if isinstance(leaf, httpx2.ConnectError):
            return f"cannot connect to {where}: connection refused (is the server running?)"
    bad = [(s, t) for s, t in progress.responses if s >= 400]
    if bad:
        status, _ = bad[-1]
        return f"{where} answered HTTP " + _STATUS.get(status, f"{status}")
    for leaf in leaves:
        if isinstance(leaf, httpx2.HTTPError | httpx2.SSEError):
            kind = next((t for _, t in reversed(progress.responses) if t), "")
            shown = kind.split(";")[0] if kind else "something else"
            return (f"{where} is not an MCP endpoint: it answered {shown} "
                    f"({str(leaf) or type(leaf).__name__})")
        if isinstance(leaf, MCPError):
            if "content type" in leaf.message.lower():
                return f"{where or 'the server'} is not an MCP endpoint: {leaf.message}"
            return f"the server answered {progress.phase} with an error: {leaf.message}"
        if isinstance(leaf, RuntimeError) and "protocol version" in str(leaf):
            return str(leaf)
    first = leaves[0] if leaves else exc
    return f"{progress.phase} failed: {type(first).__name__}: {first}"
