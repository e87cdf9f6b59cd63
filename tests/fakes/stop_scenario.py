"""One stop of a hostile tree, as whoever runs this: ``python stop_scenario.py MODE WORKDIR``.

Used by tests/core/process/test_nonroot.py to run the zoo as a non-root user (the suite itself
runs as root in CI, where every /proc file is readable and the non-root failures hide). It
starts one run of tests/fakes/fake_agent.py MODE through the real registry and runner, waits
until the misbehaving processes exist, stops the run, and prints one JSON line:

    {"uid", "stop_reason", "survivors": [[pid, name]...], "pids": [...every process the fake
     reported...], "alive": [...those alive when done arrived...], "environ_readable": bool,
     "stop_ms": float}

Whatever is still alive after that is SIGKILLed here, so a failed stop never leaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

FAKE_AGENT = Path(__file__).resolve().parent / "fake_agent.py"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _environ_readable(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb"):
            return True
    except OSError:
        return False


def _pids(*files: Path) -> list[int]:
    out: dict[int, None] = {}  # ordered, without repeats (a hopper's pid is noted twice)
    for path in files:
        if path.exists():
            out.update(dict.fromkeys(int(p) for p in path.read_text().split()))
    return list(out)


async def scenario(mode: str, work: Path) -> dict[str, Any]:
    from tolaria.core.adapters.manifest import Manifest
    from tolaria.core.events import Done, Event
    from tolaria.core.process.registry import ProcessRegistry
    from tolaria.core.stream_id import new_stream_id
    from tolaria.core.turns.runner import RunRequest, stream_ai_agent

    pidfile, hoplog = work / "pids", work / "hops"
    env = {"FAKE_PIDFILE": str(pidfile), "FAKE_HOPLOG": str(hoplog),
           "FAKE_SSH_SOCK": str(work / "ssh.sock")}
    if mode == "hopper_hidden":
        mode, env["FAKE_NONDUMPABLE"] = "hopper", "1"
    # A hop chain catches SIGTERM: a long grace that the stop must not wait out.
    grace = 5.0 if mode.startswith("hopper_chain") else 0.5
    manifest = Manifest(id="scenario", name=f"scenario {mode}", protocol="claude-stream-json",
                        command=(sys.executable, str(FAKE_AGENT), mode, "{prompt}"))
    registry = ProcessRegistry()
    sid = new_stream_id()
    texts: list[Event] = []
    task = asyncio.ensure_future(stream_ai_agent(
        RunRequest(manifest, "go", str(work), env), sid, texts.append, registry=registry,
        grace_s=grace))
    deadline = time.monotonic() + 20
    while not any(e.kind == "text_delta" for e in texts):
        if task.done() or time.monotonic() > deadline:
            raise SystemExit(f"the fake never got going: {[e.kind for e in texts]}")
        await asyncio.sleep(0.01)
    pids = _pids(pidfile)
    readable = bool(pids) and _environ_readable(pids[0])
    started = time.monotonic()
    registry.abort(sid)
    done = await asyncio.wait_for(task, 30)
    stop_ms = (time.monotonic() - started) * 1000
    assert isinstance(done, Done)
    await asyncio.sleep(0.1)  # a chain that still hops grows its log meanwhile
    pids = _pids(pidfile, hoplog)
    return {"uid": os.getuid(), "stop_reason": done.stop_reason,
            "survivors": [[s.pid, s.name] for s in done.survivors], "pids": pids,
            "alive": [p for p in pids if _alive(p)], "environ_readable": readable,
            "stop_ms": stop_ms}


def main() -> int:
    mode, work = sys.argv[1], Path(sys.argv[2])
    result: dict[str, Any] = {}
    try:
        result = asyncio.run(scenario(mode, work))
    finally:
        for pid in _pids(work / "pids", work / "hops"):  # never leave anything behind
            if _alive(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
