"""Replays a captured agent stdout for tests: ``python tests/fakes/replay_agent.py FILE [--hang]``.

Prints FILE line by line (flushed), like the real CLI printed it, then exits 0. With ``--hang`` it
stops after the first line that starts a tool (a ``tool_use`` / ``command_execution`` start) and
instead starts that "tool": a ``sleep 300`` child in a new session (as the real CLIs run their shell
tools, out of the agent's process group), writes the pids (agent and tool) to ``FAKE_PIDFILE`` if
set, and waits forever. Extra arguments (the prompt) are ignored.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # mypy knows this folder as ``fakes`` under tests/, the tests' import root
    from fakes import fake_agent as fa
else:
    import fake_agent as fa  # (this folder is on sys.path: the script's own)


def starts_a_tool(line: str) -> bool:
    try:
        data = json.loads(line)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    kind = data.get("type")
    if kind == "tool_use":  # gemini, opencode
        return True
    if kind == "item.started":  # codex
        return True
    if kind == "assistant":  # claude, qwen
        content = (data.get("message") or {}).get("content") or []
        return any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)
    return False


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: replay_agent.py FILE [--hang]", file=sys.stderr)
        return 64
    hang = "--hang" in argv[1:]
    with open(argv[0], encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    for line in lines:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if hang and starts_a_tool(line):
            fa.start_session_tool()
            while True:
                time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
