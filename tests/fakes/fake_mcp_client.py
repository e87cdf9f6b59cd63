"""A fake agent that starts its MCP servers the way the real CLIs do: ``python
fake_mcp_client.py --mcp-config=PATH PROMPT``.

It reads the JSON file Tolaria generated (the ``claude-json`` form), starts each stdio server
with a *cleaned* environment (only what the MCP SDKs keep: HOME, LOGNAME, PATH, SHELL, TERM,
USER, plus the server's own ``env`` from the file), prints a Claude stream-json ``init`` naming
the servers and a tool call, then waits as if the tool were running (``FAKE_MCP_FINISH=1``: ends
the turn instead, leaving its servers to the run's end). So the only way a server carries the
run's marker is the configuration Tolaria wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

KEPT = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def emit(data: dict[str, object]) -> None:
    print(json.dumps(data), flush=True)


def start_servers(argv: list[str]) -> dict[str, dict[str, Any]]:
    """Start the stdio servers of ``--mcp-config=PATH`` in ``argv`` as the MCP SDK does."""
    config = next((a.split("=", 1)[1] for a in argv if a.startswith("--mcp-config=")), None)
    servers: dict[str, dict[str, Any]] = {}
    if config:
        with open(config, encoding="utf-8") as fh:
            servers = json.load(fh)["mcpServers"]
    for entry in servers.values():
        if entry.get("type", "stdio") != "stdio":
            continue
        env = {k: os.environ[k] for k in KEPT if k in os.environ}
        env.update(entry.get("env", {}))
        _children.append(subprocess.Popen([str(entry["command"]), *entry.get("args", [])],
                                          env=env, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE))
    return servers


_children: list[subprocess.Popen[bytes]] = []


def main() -> int:
    servers = start_servers(sys.argv[1:])
    emit({"type": "system", "subtype": "init", "session_id": "fake-mcp-session",
          "mcp_servers": [{"name": n, "status": "connected"} for n in servers]})
    emit({"type": "assistant", "message": {"content": [
        {"type": "text", "text": f"servers: {', '.join(sorted(servers))}"},
        {"type": "tool_use", "id": "toolu_mcp", "name": "mcp__daemon__work", "input": {}}]}})
    if os.environ.get("FAKE_MCP_FINISH") == "1":
        emit({"type": "result", "subtype": "success", "is_error": False, "result": "done",
              "session_id": "fake-mcp-session"})
        return 0
    while True:
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main())
