"""A run left behind by a crash: ``python crash_scenario.py MODE WORKDIR``.

Used by tests/core/process/test_aftercrash.py and test_nonroot.py (as a non-root user): starts
one run of tests/fakes/fake_agent.py MODE through the real registry and runner (this process
owns the registry, as the window's process does), waits until the daemon the fake reports
exists *and* the run's tracking file names it, prints one JSON line
``{"pid", "uid", "stream_id", "daemon", "environ_readable", "track"}`` and then waits to be
SIGKILLed (at most 120 s, then it stops the run itself).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

FAKE_AGENT = Path(__file__).resolve().parent / "fake_agent.py"


def _tracked(path: str | None, pid: int) -> bool:
    try:
        with open(path or "", encoding="utf-8") as fh:
            return any(p == pid for p, _start in json.load(fh)["procs"])
    except (OSError, ValueError, KeyError):
        return False


def _environ_readable(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb"):
            return True
    except OSError:
        return False


async def scenario(mode: str, work: Path) -> dict[str, Any]:
    from tolaria.core.adapters.manifest import Manifest
    from tolaria.core.events import Event
    from tolaria.core.process.registry import ProcessRegistry
    from tolaria.core.stream_id import new_stream_id
    from tolaria.core.turns.runner import RunRequest, stream_ai_agent

    pidfile = work / "pids"
    env = {"FAKE_PIDFILE": str(pidfile), "FAKE_NONDUMPABLE": os.environ.get("FAKE_NONDUMPABLE", "0")}
    manifest = Manifest(id="scenario", name=f"scenario {mode}", protocol="claude-stream-json",
                        command=(sys.executable, str(FAKE_AGENT), mode, "{prompt}"))
    registry = ProcessRegistry()
    sid = new_stream_id()
    events: list[Event] = []
    task = asyncio.ensure_future(stream_ai_agent(
        RunRequest(manifest, "go", str(work), env), sid, events.append, registry=registry))
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not any(e.kind == "text_delta" for e in events):
        if task.done() or time.monotonic() > deadline:
            raise SystemExit(f"the fake never got going: {[e.kind for e in events]}")
        await asyncio.sleep(0.01)
    daemon = int(pidfile.read_text().split()[0])
    (run,) = [r for r in registry._runs.values() if r.stream_id == sid]
    while not _tracked(run.track_path, daemon):
        if time.monotonic() > deadline:
            raise SystemExit("the run's tracking file never named the daemon")
        await asyncio.sleep(0.01)
    readable = _environ_readable(daemon)
    print(json.dumps({"pid": os.getpid(), "uid": os.getuid(), "stream_id": sid,
                      "daemon": daemon, "environ_readable": readable,
                      "track": run.track_path}), flush=True)
    await asyncio.sleep(120)  # the test SIGKILLs us long before
    registry.abort(sid)
    await task
    return {}


def main() -> int:
    asyncio.run(scenario(sys.argv[1], Path(sys.argv[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
