"""The probe MCP server (tests/fakes/mcp_probe_server.py's ``mark_and_sleep``) in the standard
library only, for a host that has ``python3`` but not the MCP SDK (tests/remote).

Newline-delimited JSON-RPC over stdio (the MCP stdio transport): ``initialize``,
``tools/list``, ``tools/call``; notifications are read and not answered. The tool writes one
JSON line to ``$TOLARIA_TEST_MCP_MARKER`` (its pid, the ``TOLARIA_STREAM_ID`` and
``TOLARIA_MCP_SERVER`` it was started with, its argv), then sleeps the seconds asked.
"""

from __future__ import annotations

import json
import os
import sys
import time

TOOL = "mark_and_sleep"


def _answer(request_id: object, result: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


def _call(arguments: dict[str, object]) -> dict[str, object]:
    seconds = float(arguments.get("seconds") or 0.0)  # type: ignore[arg-type]
    path = os.environ.get("TOLARIA_TEST_MCP_MARKER")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "seconds": seconds,
                                  "stream_id": os.environ.get("TOLARIA_STREAM_ID"),
                                  "server": os.environ.get("TOLARIA_MCP_SERVER"),
                                  "argv": sys.argv[1:]}) + "\n")
    time.sleep(seconds)
    return {"content": [{"type": "text",
                         "text": f"probe marked (pid {os.getpid()}) and slept {seconds:g} s"}]}


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            version = (message.get("params") or {}).get("protocolVersion") or "2025-06-18"
            _answer(request_id, {"protocolVersion": version, "capabilities": {"tools": {}},
                                 "serverInfo": {"name": "probe", "version": "1"}})
        elif method == "tools/list":
            _answer(request_id, {"tools": [{
                "name": TOOL, "description": "Write the test's marker file, then sleep.",
                "inputSchema": {"type": "object",
                                "properties": {"seconds": {"type": "number"}}}}]})
        elif method == "tools/call":
            _answer(request_id, _call((message.get("params") or {}).get("arguments") or {}))
        else:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {
                "code": -32601, "message": f"no method {method}"}}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
