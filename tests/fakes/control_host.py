"""A Tolaria process that owns two long runs and listens on its control socket, as the window
does: ``python tests/fakes/control_host.py`` (``TOLARIA_HOME`` names the socket folder).

It prints ``{"pid": PID, "streams": [ID, ID]}`` once both agents run and its socket listens,
then serves until its stdin closes; it then stops what is left and prints each run's
``stop_reason`` as one JSON line. Used by tests/core/process/test_control_burst.py: unlike
``tolaria run``, it stays up after one of its runs is aborted, so a burst can go on.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from helpers import fake_manifest, marker_pids, start_run, wait_until

from tolaria.core.process.control import ControlServer
from tolaria.core.process.registry import ProcessRegistry


async def main() -> None:
    registry = ProcessRegistry()
    server = ControlServer(registry)
    await server.start()
    runs = [start_run(fake_manifest("hang"), registry=registry) for _ in range(2)]
    await wait_until(lambda: all(marker_pids(run.stream_id) for run in runs), 30, "the agents")
    print(json.dumps({"pid": os.getpid(), "streams": [run.stream_id for run in runs]}),
          flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    for run in runs:
        run.abort()
    reasons = [(await run.finish(20)).stop_reason for run in runs]
    await server.close()
    print(json.dumps({"stop_reasons": reasons, "dropped": server.dropped}), flush=True)


asyncio.run(main())
