"""The light, synchronous control-socket client (``tolaria abort`` / ``tolaria streams``).

Real Unix sockets: a live ``ControlServer`` next to a process that accepts and never answers,
and a socket file whose process is gone.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from helpers import async_test, fake_manifest, start_run, wait_until

from tolaria.core.process import control_client
from tolaria.core.process.control import ControlServer
from tolaria.core.process.registry import ProcessRegistry


@async_test
async def test_a_silent_listener_delays_nobody_beyond_the_deadline(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    registry = ProcessRegistry()
    server = ControlServer(registry, folder=folder, details=lambda sid: {"chat": "my chat"})
    await server.start()
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # accepts, never answers
    silent.bind(str(folder / "1.sock"))
    silent.listen()
    stale = folder / "999999999.sock"  # a Tolaria that was SIGKILLed: no process, no listener
    stale.touch()
    run = start_run(fake_manifest("hang"), registry=registry)
    try:
        await wait_until(lambda: registry.is_live(run.stream_id), what="the run")
        t0 = time.monotonic()
        streams = await asyncio.to_thread(control_client.list_streams, folder, 1.0)
        took = time.monotonic() - t0
        assert [s["stream_id"] for s in streams] == [run.stream_id]
        assert streams[0]["chat"] == "my chat"
        assert streams[0]["elapsed_s"] >= 0
        assert 0.9 <= took < 3.0  # the silent one was waited for once, up to the deadline
        assert not stale.exists()  # removed on the way

        stopped = await asyncio.to_thread(control_client.abort_remote, run.stream_id, folder, 5.0)
        assert stopped is True
        assert not registry.is_live(run.stream_id)
    finally:
        run.abort()
        await run.finish()
        silent.close()
        await server.close()


def test_no_folder_and_no_sockets_mean_no_streams(tmp_path: Path) -> None:
    assert control_client.list_streams(tmp_path / "nothing-here", 1.0) == []
    assert control_client.live_stream_ids(tmp_path / "nothing-here") == set()
