"""A small, sometimes misbehaving MCP server for Preferences' Test: ``python mcp_server.py MODE``.

Written with the MCP Python SDK (``MCPServer``). Two tools with descriptions: ``echo`` and
``add`` (``FAKE_MCP_TOOL`` adds a third, named by its value, so a test sees its ``env`` arrive).

Modes (stdio unless said):
  ok            a well-behaved server
  exit          prints a line on stderr and exits 3 at once
  garbage       prints a banner on stdout (not MCP), then serves
  hang          reads stdin, never answers (hangs at initialize)
  ignore_term   ignores SIGTERM, serves
  daemon        double-forks a sleeper into a new session (its pid in ``FAKE_PIDFILE``), serves
  http          streamable HTTP on 127.0.0.1, a free port; prints the port on stdout first.
                ``FAKE_MCP_TOKEN``: requests without ``Authorization: Bearer <token>`` get 401
  sse           the same over SSE (endpoint ``/sse``)
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import Any


def build() -> Any:
    # Imported here: the bad modes misbehave before the SDK's import (a second, under load).
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("fake-tools")

    @server.tool(description="Repeat the given text back, unchanged.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers and return the sum.")
    def add(a: int, b: int) -> int:
        return a + b

    extra = os.environ.get("FAKE_MCP_TOOL")
    if extra:
        server.add_tool(lambda: extra, name=extra, description=f"A tool named by the env ({extra}).")
    return server


def daemonize_sleeper() -> None:
    """A grandchild in a session of its own, re-parented away from us (setsid + double fork)."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(read_end)
            os.write(write_end, f"{os.getpid()}\n".encode())
            os.close(write_end)
            for fd in (0, 1):  # the daemon holds no pipe of the server
                os.dup2(os.open(os.devnull, os.O_RDWR), fd)
            time.sleep(300)
        os._exit(0)
    os.close(write_end)
    pid = os.read(read_end, 64).decode().strip()
    os.close(read_end)
    os.wait()
    pidfile = os.environ.get("FAKE_PIDFILE")
    if pidfile:
        with open(pidfile + ".tmp", "w") as fh:
            fh.write(pid + "\n")
        os.replace(pidfile + ".tmp", pidfile)


def serve_http(server: Any, sse: bool) -> None:
    import anyio
    import uvicorn

    app: Any = server.sse_app() if sse else server.streamable_http_app()
    token = os.environ.get("FAKE_MCP_TOKEN")
    if token:
        inner = app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            headers = dict(scope.get("headers") or [])
            if scope["type"] == "http" and headers.get(b"authorization") != (
                    f"Bearer {token}".encode()):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
            await inner(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    if mode == "exit":
        print("fatal: cannot read ~/.fake-tools.json", file=sys.stderr, flush=True)
        sys.exit(3)
    if mode == "garbage":
        print("Fake tools v1.0 ready!", flush=True)
    if mode == "hang":
        for _line in sys.stdin:
            pass
        time.sleep(300)
        return
    if mode == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "daemon":
        daemonize_sleeper()
    server = build()
    if mode in ("http", "sse"):
        serve_http(server, sse=mode == "sse")
        return
    server.run()


if __name__ == "__main__":
    main()
