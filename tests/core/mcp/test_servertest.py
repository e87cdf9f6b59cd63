"""Preferences' Test of an MCP server, Qt-free: it lists a real server's tools, every bad input
ends in its own message within the timeout, and nothing it started outlives it (a daemon it
double-forked, a server ignoring SIGTERM, a Cancel at any moment)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import psutil
import pytest
from helpers import async_test, wait_until
from mcphelpers import (
    FAKE_MCP,
    TOOLS,
    live_fake_servers,
    refused_url,
    remote,
    served,
    silent_port,
    stdio_server,
    web_page,
)

from tolaria.core.mcp.servers import SSE, McpServer
from tolaria.core.mcp.servertest import test_server as run_test
from tolaria.core.process.registry import ProcessRegistry


@async_test
async def test_it_lists_the_tools_with_their_descriptions_and_env_reaches_the_server() -> None:
    server = stdio_server(env=(("FAKE_MCP_TOOL", "${MY_TOOL}"),))
    result = await run_test(server, {"MY_TOOL": "zap"}, timeout=30)
    assert result.ok, result.error
    assert result.tools == (*TOOLS, ("zap", "A tool named by the env (zap)."))
    assert result.detail.startswith("fake-tools")
    assert "3 tools" in result.detail
    assert 0 < result.elapsed < 30
    assert live_fake_servers() == []


@async_test
async def test_a_daemon_it_forked_and_a_server_that_ignores_sigterm_are_gone(tmp_path: Path
                                                                             ) -> None:
    pidfile = tmp_path / "daemon.pid"
    daemon = stdio_server("daemon", env=(("FAKE_PIDFILE", str(pidfile)),))
    result = await run_test(daemon, timeout=30, grace=0.5)
    assert result.ok, result.error
    assert result.survivors == ()
    pid = int(pidfile.read_text())
    try:
        status: str = psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        status = "gone"
    assert status in ("gone", psutil.STATUS_ZOMBIE)
    result = await run_test(stdio_server("ignore_term"), timeout=30, grace=0.5)
    assert result.ok, result.error
    assert live_fake_servers() == []


@async_test
async def test_each_bad_stdio_server_says_what_is_wrong(tmp_path: Path) -> None:
    cases: list[tuple[McpServer, str]] = [
        (McpServer("x", command="no-such-mcp-server-zz"),
         "command not found: no-such-mcp-server-zz is not on the PATH"),
        (McpServer("x", command=str(tmp_path / "missing")), "does not exist"),
        (stdio_server("exit"), "the server exited with code 3 before it answered initialize: "
                               "fatal: cannot read ~/.fake-tools.json"),
        (stdio_server("garbage"), "the server printed something that is not MCP on stdout: "
                                  "“Fake tools v1.0 ready!”"),
        (stdio_server("hang"), "no answer to initialize within 3 s; the server was stopped"),
        (stdio_server(env=(("TOKEN", "${NOT_SET_ANYWHERE}"),)),
         "env TOKEN: ${NOT_SET_ANYWHERE} is not set in Tolaria's environment"),
    ]
    for server, message in cases:
        result = await run_test(server, {}, timeout=3 if "hang" in server.args else 20)
        assert not result.ok
        assert message in result.error, (server.args, result.error)
        assert result.elapsed < 20
    assert live_fake_servers() == []


@async_test
async def test_stderr_secrets_are_hidden_in_the_detail() -> None:
    server = McpServer("x", command="sh", args=("-c", 'echo "token is $API_TOKEN" >&2; exit 1'),
                       env=(("API_TOKEN", "${T}"),))
    result = await run_test(server, {"T": "sk-verysecretvalue123"}, timeout=10)
    assert not result.ok
    assert "sk-verysecretvalue123" not in result.error + result.detail
    assert "token is" in result.error


@async_test
async def test_cancel_at_any_moment_leaves_nothing_running(tmp_path: Path) -> None:
    for mode in ("hang", "daemon", "ok"):
        for delay in (0.0, 0.05, 0.3):
            pidfile = tmp_path / f"{mode}-{delay}.pid"
            server = stdio_server(mode, env=(("FAKE_PIDFILE", str(pidfile)),))
            task = asyncio.ensure_future(run_test(server, timeout=30, grace=0.5))
            await asyncio.sleep(delay)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert live_fake_servers() == [], (mode, delay)
    # And once the server is surely up, with its daemon out of its session.
    pidfile = tmp_path / "up.pid"
    task = asyncio.ensure_future(run_test(stdio_server("daemon", env=(
        ("FAKE_PIDFILE", str(pidfile)),)), timeout=30, grace=0.5))
    await wait_until(pidfile.exists, 20, "the daemon")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert live_fake_servers() == []


@async_test
async def test_a_registered_test_is_listed_and_stopped_by_an_abort() -> None:
    registry = ProcessRegistry()
    task = asyncio.ensure_future(run_test(stdio_server("hang"), timeout=30, registry=registry,
                                          grace=0.5))
    await wait_until(lambda: registry.live() and live_fake_servers(), 20, "the server")
    [run] = registry.live()
    assert run["agent"] == "mcp:fake"
    assert registry.abort(run["stream_id"])
    result = await task
    assert not result.ok
    assert "stopped" in result.error
    assert registry.live() == []
    assert live_fake_servers() == []


@async_test
async def test_remote_servers_streamable_http_and_sse() -> None:
    with served("http", token="s3cret-token-value") as url:
        ok = await run_test(remote(url, headers=(("Authorization", "Bearer ${TOKEN}"),)),
                            {"TOKEN": "s3cret-token-value"}, timeout=20)
        assert ok.ok, ok.error
        assert ok.tools == TOOLS
        denied = await run_test(remote(url), {}, timeout=20)
        assert not denied.ok
        assert "answered HTTP 401 Unauthorized" in denied.error
        unset = await run_test(remote(url, headers=(("Authorization", "Bearer ${NOPE}"),)), {})
        assert unset.error == "header Authorization: ${NOPE} is not set in Tolaria's environment"
    with served("sse") as url:
        ok = await run_test(remote(url, SSE), {}, timeout=20)
        assert ok.ok, ok.error
        assert ok.tools == TOOLS


@async_test
async def test_a_url_that_refuses_is_not_mcp_or_never_answers() -> None:
    result = await run_test(remote(refused_url()), {}, timeout=5)
    assert "connection refused" in result.error
    with web_page() as url:
        for transport in ("http", SSE):
            result = await run_test(remote(url, transport), {}, timeout=5)
            assert "is not an MCP endpoint" in result.error, result.error
            assert "text/html" in result.error
    with silent_port() as url:
        result = await run_test(remote(url), {}, timeout=1.5)
        assert not result.ok
        assert "within 1.5 s" in result.error or "did not answer" in result.error, result.error
        assert result.elapsed < 5


@async_test
async def test_a_launcher_that_downloads_gets_a_hint_when_it_times_out(tmp_path: Path) -> None:
    npx = tmp_path / "npx"
    npx.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    npx.chmod(0o755)
    server = McpServer("x", command=str(npx), args=(str(FAKE_MCP), "hang"))
    result = await run_test(server, {}, timeout=2, grace=0.5)
    assert result.error.startswith("no answer to initialize within 2 s; the server was stopped")
    assert "a first run may still be downloading the package" in result.error
    assert live_fake_servers() == []
