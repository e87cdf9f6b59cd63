"""A fake agent that reports how it was started: ``python tests/fakes/argv_agent.py ARGS...``.

Prints one JSON line ``{"argv": [...], "stdin": "...", "env": {...}}``: its arguments (without
the program), what it read on stdin (empty when stdin is not a pipe), and the variables named
in ``ARGV_AGENT_ENV`` (comma-separated). Copied under a real CLI's name into a folder on PATH,
it shows the exact argv a manifest makes Tolaria spawn. Exits 0.
"""

from __future__ import annotations

import json
import os
import stat
import sys


def main() -> int:
    mode = os.fstat(0).st_mode if not sys.stdin.closed else 0
    stdin = sys.stdin.read() if stat.S_ISFIFO(mode) else ""
    names = [n for n in os.environ.get("ARGV_AGENT_ENV", "").split(",") if n]
    env = {name: os.environ.get(name) for name in names}
    print(json.dumps({"argv": sys.argv[1:], "stdin": stdin, "env": env}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
