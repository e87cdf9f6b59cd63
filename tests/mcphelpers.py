"""Helpers for the MCP server tests: the fake server (tests/fakes/mcp_server.py) over stdio or
served on 127.0.0.1, a web page that is not MCP, and a port that never answers."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from tolaria.core.mcp.servers import HTTP, McpServer

FAKE_MCP = Path(__file__).resolve().parent / "fakes" / "mcp_server.py"
TOOLS = (("echo", "Repeat the given text back, unchanged."),
         ("add", "Add two integers and return the sum."))


def stdio_server(mode: str = "ok", name: str = "fake", **kw: object) -> McpServer:
    return McpServer(name, command=sys.executable, args=(str(FAKE_MCP), mode), **kw)  # type: ignore[arg-type]


def live_fake_servers() -> list[psutil.Process]:
    """Live fake MCP server processes of this test (its TOLARIA_HOME), daemons included.
    Those a Test started carry the home too, with the run's marker."""
    home = os.environ.get("TOLARIA_HOME", "")
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if str(FAKE_MCP) not in (proc.info["cmdline"] or []) or \
                    proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("TOLARIA_HOME") == home:
                found.append(proc)
        except psutil.Error:
            continue
    return found


@contextmanager
def served(mode: str = "http", token: str | None = None) -> Iterator[str]:
    """The fake server over streamable HTTP (``http``) or SSE (``sse``); yields its URL."""
    env = dict(os.environ)
    env.pop("FAKE_MCP_TOKEN", None)
    if token:
        env["FAKE_MCP_TOKEN"] = token
    proc = subprocess.Popen([sys.executable, str(FAKE_MCP), mode], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/" + ("sse" if mode == "sse" else "mcp")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@contextmanager
def web_page() -> Iterator[str]:
    """A plain web server that answers every request with an HTML page (not MCP)."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html><body>Welcome</body></html>")

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_port() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


def remote(url: str, transport: str = HTTP, **kw: object) -> McpServer:
    return McpServer("remote", transport, url=url, **kw)  # type: ignore[arg-type]
