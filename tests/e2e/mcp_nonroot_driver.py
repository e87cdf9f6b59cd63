"""One real-CLI MCP turn, run by tests/e2e/test_real_mcp_nonroot.py as the non-root test user.

argv[1]: a JSON spec {agent, prompt, cwd, env, server: {name, command, args, env}}. Prints one
JSON line per event (type, and the fields the test reads) and a last line {"done": ...}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tolaria.core.adapters.manifest import load_adapters
from tolaria.core.events import Diagnostic, Done, Error, Event, ToolDone, ToolStart
from tolaria.core.mcp.servers import McpServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id
from tolaria.core.turns.mcp_setup import run_folder
from tolaria.core.turns.runner import RunRequest, stream_ai_agent


def _line(event: object) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(event).__name__}
    if isinstance(event, ToolStart):
        out.update(name=event.name, server=event.server)
    elif isinstance(event, ToolDone):
        out.update(output=event.output[:500])
    elif isinstance(event, Diagnostic | Error):
        out.update(message=event.message[:500])
    elif isinstance(event, Done):
        out.update(stop_reason=event.stop_reason)
    return out


async def main(spec: dict[str, Any]) -> None:
    manifest = load_adapters().get(spec["agent"])
    server = spec["server"]
    servers = (McpServer(server["name"], command=server["command"], args=tuple(server["args"]),
                         env=tuple(server["env"].items())),)
    request = RunRequest(manifest, spec["prompt"], spec["cwd"], spec["env"],
                         permission_mode="full", mcp_servers=servers)
    stream_id = new_stream_id()
    print(json.dumps({"stream_id": stream_id, "folder": run_folder(stream_id)}), flush=True)

    def emit(event: Event) -> None:
        print(json.dumps(_line(event)), flush=True)

    done = await asyncio.wait_for(
        stream_ai_agent(request, stream_id, emit, registry=ProcessRegistry()), 240)
    print(json.dumps({"done": done.stop_reason}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
