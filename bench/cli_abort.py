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


def startup_times(runs: int, home: Path, base: Path | None = None,
                  ) -> dict[str, tuple[list[float], list[float]]]:
    """Per command, ms from process start to exit and ms of CPU (user + system) of ``tolaria
    abort UNKNOWN-ID`` and ``tolaria streams`` with nothing running, next to ``python -c pass``
    (the interpreter's own start-up). The CPU time hardly moves with the machine's load; the
    wall time does."""
    env = cli_env(home)
    commands = {"python -c pass": ["-c", "pass"],
                "tolaria abort (no such run)": [*TOLARIA, "abort", new_stream_id()],
                "tolaria streams": [*TOLARIA, "streams"],
                "python -m tolaria abort": ["-m", "tolaria", "abort", new_stream_id()],
                "tolaria abort, portable": [*TOLARIA, "abort", new_stream_id()]}
    envs = {name: env for name in commands}
    # The portable backend's abort imports psutil for its command-line scan (ADR 0016).
    envs["tolaria abort, portable"] = {**env, "TOLARIA_PROCESS_BACKEND": "portable"}
    if base is not None:
        name = f"tolaria abort, base {base.name}"
        commands[name] = [str(base / "scripts" / "tolaria"), "abort", new_stream_id()]
        envs[name] = {**env, "PYTHONPATH": str(base)}
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in commands}
    for name, args in commands.items():  # unmeasured: writes the .pyc files
        subprocess.run([sys.executable, *args], env=envs[name], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    for _ in range(runs):
        for name, args in commands.items():  # interleaved: a load spike hits all of them
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            subprocess.run([sys.executable, *args], env=envs[name], stdin=subprocess.DEVNULL,
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
        verdict = "" if name.startswith("python") or "base" in name or "portable" in name else (
            "  PASS" if med <= 40 else "  FAIL")
        print(f"  {name:28} wall median {med:6.1f} ms (min {min(wall):5.1f}, max "
              f"{max(wall):6.1f}); CPU median {statistics.median(cpu):5.1f} ms  "
              f"({len(wall)} runs){verdict}")


def _marked(stream_id: str) -> list[int]:
    """Live pids whose environment carries ``TOLARIA_STREAM_ID=stream_id``."""
    needle = f"TOLARIA_STREAM_ID={stream_id}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def early_abort_times(runs: int, home: Path, delays_ms: list[int],
                      ) -> dict[int, list[tuple[float, float, bool]]]:
    """Per delay: ``runs`` times, ``tolaria run --stream-id ID`` (the demo agent, a tool that
    would sleep a minute, not saved) launched, then ``tolaria abort ID`` that many ms later.
    Each entry: ms from the abort's spawn to its exit, ms from the run's launch to its exit,
    and whether all went as it must (abort ``true``, run exit 130, no marked process left)."""
    env = {**cli_env(home), "TOLARIA_DEMO_TOOL_SECONDS": "60", "TOLARIA_DEMO_DELAY": "0"}
    out: dict[int, list[tuple[float, float, bool]]] = {d: [] for d in delays_ms}
    for _ in range(runs):
        for delay in delays_ms:  # interleaved: a load spike hits all of them
            sid = new_stream_id()
            launched = time.monotonic()
            run = subprocess.Popen([sys.executable, *TOLARIA, "run", "--no-save", "--json",
                                    "--grace", "0.5", "--stream-id", sid, "--agent", "demo",
                                    "hello"], env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(delay / 1000)
                t0 = time.monotonic()
                abort = subprocess.run([sys.executable, *TOLARIA, "abort", sid], env=env,
                                       capture_output=True, text=True, timeout=60, check=False)
                abort_ms = (time.monotonic() - t0) * 1000
                code = run.wait(30)
                run_ms = (time.monotonic() - launched) * 1000
                ok = abort.stdout.strip() == "true" and code == 130 and not _marked(sid)
                out[delay].append((abort_ms, run_ms, ok))
            finally:
                if run.poll() is None:
                    run.kill()
                    run.wait()
                for pid in _marked(sid):
                    os.kill(pid, 9)
    return out


def print_early(times: dict[int, list[tuple[float, float, bool]]]) -> None:
    print()
    print("Early abort: `tolaria abort ID` D ms after `tolaria run --stream-id ID` was launched")
    for delay, rows in times.items():
        abort = [r[0] for r in rows]
        run = [r[1] for r in rows]
        ok = sum(r[2] for r in rows)
        print(f"  D = {delay:3d} ms: abort start to exit median {statistics.median(abort):6.1f} "
              f"ms (max {max(abort):6.1f}); run launch to exit median "
              f"{statistics.median(run):6.1f} ms; stopped as it must {ok}/{len(rows)}")


def main() -> int:
    """``python bench/cli_abort.py [--startup-runs 31] [--early-runs 0]``: the start-up lines
    of bench/stop_latency.py alone, and the early-abort series (issue 22.1)."""
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--startup-runs", type=int, default=31, metavar="N")
    ap.add_argument("--early-runs", type=int, default=0, metavar="N",
                    help="runs per delay of the early-abort series (0: none)")
    ap.add_argument("--delays", default="0,20,100,200", help="ms, comma-separated")
    ap.add_argument("--base", type=Path, metavar="DIR",
                    help="another checkout whose tolaria abort is timed alongside")
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load at start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    with tempfile.TemporaryDirectory(prefix="tolaria-bench-home-") as home:
        if args.startup_runs:
            print_startup(startup_times(args.startup_runs, Path(home), args.base))
        if args.early_runs:
            delays = [int(d) for d in args.delays.split(",")]
            print_early(early_abort_times(args.early_runs, Path(home), delays))
    load = os.getloadavg()
    print(f"load at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
