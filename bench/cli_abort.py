"""The cross-process stop of bench/stop_latency.py: ``tolaria abort ID`` from another process.

A user stops a run from another terminal with ``tolaria abort ID``; that process must start,
find the owner's control socket, ask, and wait for "stopped" (answered once the tree is gone).
So its start-up counts in the stop: ``CliAbort`` is the stop method ``abort-cli`` (the bench's
own process owns the run and listens on a control socket in a private ``TOLARIA_HOME``, exactly
as ``tolaria run`` does), and ``startup_times`` is how long ``tolaria abort`` / ``tolaria
streams`` take from process start to exit when nothing runs. See docs/PERFORMANCE.md.
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tolaria.core.process.control import ControlServer
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.stream_id import new_stream_id

ROOT = Path(__file__).resolve().parent.parent
#: The installed ``tolaria`` command (scripts/tolaria, run by this interpreter as the installer's
#: shebang would). ``python -m tolaria`` costs more: runpy imports importlib.util, contextlib...
TOLARIA = [str(ROOT / "scripts" / "tolaria")]


def cli_env(home: Path) -> dict[str, str]:
    """The environment of a ``tolaria`` command talking to the bench's control socket."""
    # Without PYTHONDONTWRITEBYTECODE: an installed Tolaria has its .pyc files, and compiling
    # every module at each start would triple the start-up measured.
    env = {k: v for k, v in os.environ.items()
           if k not in ("TOLARIA_STREAM_ID", "PYTHONDONTWRITEBYTECODE")}
    env["TOLARIA_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


class CliAbort:
    """Stops each run with ``tolaria abort ID`` (TOLARIA) in a new process (``stopper`` of
    ``stop_latency.tolaria_stop``). Create it on the series' event loop; ``close`` at the end."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = cli_env(home)
        folder = home / "run"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.server = ControlServer(ProcessRegistry(), folder=folder)
        #: ms from the spawn of ``tolaria abort`` to its exit (it exits once the tree is gone).
        self.exit_ms: list[float] = []

    async def start(self) -> None:
        await self.server.start()

    async def close(self) -> None:
        await self.server.close()

    async def __call__(self, registry: ProcessRegistry, sid: str,
                       on_request: Callable[[], None]) -> None:
        """Stop ``sid`` with ``tolaria abort``; ``on_request`` is called when its request
        arrives (the bench's monitor starts polling then: a 1 ms poller running during the
        command's start-up, on 2 cores, would triple that start-up)."""
        self.server.registry = _Announcing(registry, on_request)  # type: ignore[assignment]
        t0 = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *TOLARIA, "abort", sid, env=self.env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = await proc.communicate()
        self.exit_ms.append((time.monotonic() - t0) * 1000)
        if proc.returncode != 0 or out.strip() != b"true":
            raise RuntimeError(f"tolaria abort answered {out!r} (exit {proc.returncode}): "
                               f"{err.decode(errors='replace')[-500:]}")


class _Announcing:
    """The registry as the control server sees it, calling ``on_request`` at an abort."""

    def __init__(self, registry: ProcessRegistry, on_request: Callable[[], None]) -> None:
        self._registry = registry
        self._on_request = on_request

    def live(self) -> list[dict[str, Any]]:
        return self._registry.live()

    async def abort_and_wait(self, stream_id: str) -> bool:
        self._on_request()
        return await self._registry.abort_and_wait(stream_id)


def startup_times(runs: int, home: Path) -> dict[str, tuple[list[float], list[float]]]:
    """Per command, ms from process start to exit and ms of CPU (user + system) of ``tolaria
    abort UNKNOWN-ID`` and ``tolaria streams`` with nothing running, next to ``python -c pass``
    (the interpreter's own start-up). The CPU time hardly moves with the machine's load; the
    wall time does."""
    env = cli_env(home)
    commands = {"python -c pass": ["-c", "pass"],
                "tolaria abort (no such run)": [*TOLARIA, "abort", new_stream_id()],
                "tolaria streams": [*TOLARIA, "streams"],
                "python -m tolaria abort": ["-m", "tolaria", "abort", new_stream_id()]}
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in commands}
    for args in commands.values():  # unmeasured: writes the .pyc files
        subprocess.run([sys.executable, *args], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    for _ in range(runs):
        for name, args in commands.items():  # interleaved: a load spike hits all of them
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            subprocess.run([sys.executable, *args], env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            wall = (time.monotonic() - t0) * 1000
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
            times[name][0].append(wall)
            times[name][1].append(cpu)
    return times


def print_startup(times: dict[str, tuple[list[float], list[float]]]) -> None:
    print()
    print("Start-up, process start to exit (nothing running), target: tolaria commands <= 40 ms")
    for name, (wall, cpu) in times.items():
        med = statistics.median(wall)
        verdict = "" if name.startswith("python") else ("  PASS" if med <= 40 else "  FAIL")
        print(f"  {name:28} wall median {med:6.1f} ms (min {min(wall):5.1f}, max "
              f"{max(wall):6.1f}); CPU median {statistics.median(cpu):5.1f} ms  "
              f"({len(wall)} runs){verdict}")
