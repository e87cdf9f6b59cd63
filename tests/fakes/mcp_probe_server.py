"""A small stdio MCP server for the tests, written with the MCP Python SDK.

Its one tool, ``mark_and_sleep``, writes a marker file (``$TOLARIA_TEST_MCP_MARKER``: one JSON
line with the server's pid and the ``TOLARIA_STREAM_ID`` it was started with), then sleeps the
given seconds: the marker proves that a real agent called the tool through its MCP client, the
sleep gives a Stop something to interrupt. ``$TOLARIA_TEST_MCP_STARTED`` (optional) is written
when the server starts, so a test knows the agent started it.

Switches (argv), for the bad-input cases: ``--hang-at-initialize`` (reads stdin and never
answers), ``--garbage`` (prints non-JSON on stdout), ``--exit`` (exits at once with an error);
and for the stop zoo ``--daemon``: leaves the tree (setsid + double fork), ignores SIGTERM,
writes its pid and its environment to ``$TOLARIA_TEST_MCP_DAEMON`` and sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time


def _note(variable: str, what: dict[str, object]) -> None:
    path = os.environ.get(variable)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "at": time.time(),
                                  "stream_id": os.environ.get("TOLARIA_STREAM_ID"), **what})
                      + "\n")


def _daemonize() -> None:
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    path = os.environ["TOLARIA_TEST_MCP_DAEMON"]
    with open(path + ".tmp", "w", encoding="utf-8") as out:
        json.dump({"pid": os.getpid(), "environ": dict(os.environ)}, out)
    os.replace(path + ".tmp", path)
    for fd in (0, 1, 2):  # let go of the agent's pipes, as a daemon does
        with contextlib.suppress(OSError):
            os.close(fd)
    while True:
        time.sleep(60)


def main() -> None:
    args = sys.argv[1:]
    _note("TOLARIA_TEST_MCP_STARTED", {"argv": args})
    if "--exit" in args:
        print("probe: refusing to start (--exit)", file=sys.stderr)
        sys.exit(3)
    if "--daemon" in args:
        _daemonize()
        return
    if "--garbage" in args:
        sys.stdout.write("this is not JSON-RPC\n{{{ nor this\n")
        sys.stdout.flush()
        time.sleep(300)
        return
    if "--hang-at-initialize" in args:
        for _ in sys.stdin:  # read every request, answer none
            pass
        time.sleep(300)
        return

    from mcp.server.mcpserver import MCPServer

    server = MCPServer("probe")

    @server.tool()
    async def mark_and_sleep(seconds: float = 0.0) -> str:
        """Write the test's marker file, then sleep ``seconds`` (a slow tool to stop)."""
        _note("TOLARIA_TEST_MCP_MARKER", {"seconds": seconds})
        await asyncio.sleep(seconds)
        return f"probe marked (pid {os.getpid()}) and slept {seconds:g} s"

    server.run("stdio")


if __name__ == "__main__":
    main()
