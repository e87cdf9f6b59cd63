"""Stop the real CLIs mid-tool: time from Stop to zero processes, and survivors, per CLI, next to
the naive "SIGKILL the direct child" method on the same scenario. See docs/PERFORMANCE.md.

    python bench/real_cli_stop.py [--stops 3] [--clis claude,codex,gemini,qwen,opencode]

Scenario: the CLI (pinned version from the npm registry, cached like the e2e tier: tests/e2e/clis.py)
is asked, through the loopback fake model (tests/e2e/fake_model.py), to run
``echo started; sleep 300; echo finished``; once that ``sleep`` exists, the stop happens.

- ``tolaria``: ``stream_ai_agent`` + ``registry.abort`` (the real backend, built-in adapter,
  permission mode "full"). Latency: abort -> no process carrying the run's TOLARIA_STREAM_ID is
  alive (polled every 2 ms from a thread) and abort -> ``done``. Survivors: marked processes
  alive 2 s after ``done``.
- ``naive``: the same argv, environment and stdin, started with ``subprocess.Popen`` in its own
  session; SIGKILL to that child only; survivors are the marked processes (the ``sleep`` among
  them) still alive ``--baseline-wait`` s later. The bench then kills them itself.

Everything the bench starts is killed in a ``finally``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests" / "e2e"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from clis import CLIS, install, run_env  # noqa: E402
from fake_model import FakeModelServer  # noqa: E402

from tolaria.core.adapters.manifest import (  # noqa: E402
    CLAUDE_STREAM_INPUT,
    Manifest,
    build_argv,
    load_adapters,
)
from tolaria.core.events import Done, Event  # noqa: E402
from tolaria.core.process import proctree  # noqa: E402
from tolaria.core.process.registry import ProcessRegistry  # noqa: E402
from tolaria.core.stream_id import new_stream_id  # noqa: E402
from tolaria.core.turns.runner import RunRequest, stream_ai_agent  # noqa: E402
from tolaria.core.turns.spawn import build_env, resolve_program  # noqa: E402

PROMPT = "E2E-SLEEP: run the slow command"
SPAWN_TIMEOUT_S = 120.0


def marked(sid: str) -> list[psutil.Process]:
    needle = f"TOLARIA_STREAM_ID={sid}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            proc = psutil.Process(int(entry))
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def sleeper(sid: str) -> psutil.Process | None:
    for proc in marked(sid):
        with contextlib.suppress(psutil.Error):
            if proc.cmdline()[:2] == ["sleep", "300"]:
                return proc
    return None


def describe(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            out.append(f"{p.name()}[{p.pid}]")
    return out


def kill_all(sid: str) -> None:
    for _ in range(3):
        procs = marked(sid)
        if not procs:
            return
        for p in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(procs, timeout=2)


@dataclass
class Stop:
    all_gone_ms: float | None
    done_ms: float | None
    survivors: list[str] = field(default_factory=list)
    note: str = ""


def request_for(m: Manifest, cwd: str, env: dict[str, str]) -> RunRequest:
    return RunRequest(m, PROMPT, cwd, env, permission_mode="full")


async def tolaria_stop(m: Manifest, env: dict[str, str], cwd: str) -> Stop:
    sid, registry = new_stream_id(), ProcessRegistry()
    events: list[Event] = []
    task = asyncio.ensure_future(stream_ai_agent(request_for(m, cwd, env), sid, events.append,
                                                 registry=registry))
    try:
        deadline = time.monotonic() + SPAWN_TIMEOUT_S
        while sleeper(sid) is None:
            if task.done() or time.monotonic() > deadline:
                return Stop(None, None, note="the tool never started: "
                            + "; ".join(repr(e)[:200] for e in events[-5:]))
            await asyncio.sleep(0.05)
        gone_at: list[float] = []

        def watch() -> None:
            while marked(sid):
                time.sleep(0.002)
            gone_at.append(time.monotonic())

        t0 = time.monotonic()
        registry.abort(sid)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        done: Done = await asyncio.wait_for(task, 30)
        done_ms = (time.monotonic() - t0) * 1000
        await asyncio.to_thread(watcher.join, 30)
        await asyncio.sleep(2)
        left = marked(sid)
        return Stop((gone_at[0] - t0) * 1000 if gone_at else None, done_ms, describe(left),
                    note=f"done: {done.stop_reason}")
    finally:
        if not task.done():
            registry.abort(sid)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 30)
        kill_all(sid)


def naive_argv(m: Manifest, cwd: str, env: dict[str, str]) -> tuple[list[str], bytes | None]:
    argv = build_argv(m, prompt=PROMPT, cwd=cwd, session_id=None, mode="full")
    stdin: bytes | None = None
    if m.input == CLAUDE_STREAM_INPUT:
        stdin = (json.dumps({"type": "user", "message": {"role": "user", "content": PROMPT},
                             "parent_tool_use_id": None, "session_id": ""}) + "\n").encode()
    elif m.takes_prompt_on_stdin:
        stdin = PROMPT.encode()
    program = resolve_program(argv[0], env)
    assert program, f"{argv[0]} not found"
    argv[0] = program
    return argv, stdin


def naive_stop(m: Manifest, env: dict[str, str], cwd: str, wait_s: float) -> Stop:
    sid = new_stream_id()
    full_env = build_env(m, sid, {**m.permission_env.get("full", {}), **env})
    argv, stdin = naive_argv(m, cwd, full_env)
    proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    proctree.remember_own_child(proc.pid)
    drains = [threading.Thread(target=lambda s=s: s.read(), daemon=True)
              for s in (proc.stdout, proc.stderr)]
    for t in drains:
        t.start()
    try:
        assert proc.stdin is not None
        if stdin:
            proc.stdin.write(stdin)
            proc.stdin.flush()
        if m.input != CLAUDE_STREAM_INPUT:
            proc.stdin.close()  # as Tolaria does: EOF once the prompt (if any) is written
        deadline = time.monotonic() + SPAWN_TIMEOUT_S
        while sleeper(sid) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                return Stop(None, None, note="the tool never started")
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.kill()
        proc.wait()
        gone_ms = (time.monotonic() - t0) * 1000
        time.sleep(wait_s)
        return Stop(gone_ms, None, describe(marked(sid)))
    finally:
        with contextlib.suppress(OSError):
            if proc.stdin:
                proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        proctree.forget_own_child(proc.pid)
        kill_all(sid)
        # Orphans re-parented to us (child subreaper) are ours to reap.
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.Error, ChildProcessError):
                if child.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(child.pid, os.WNOHANG)


async def bench(args: argparse.Namespace) -> int:
    proctree.enable_child_subreaper()
    adapters = load_adapters()
    server = FakeModelServer().start()
    failed = False
    print(f"# real_cli_stop: {args.stops} stops per CLI and method; python "
          f"{platform.python_version()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'cli':<10} {'method':<8} {'stop->all gone ms (median, max)':<33} "
          f"{'stop->done ms':<14} survivors")
    try:
        for agent in args.clis.split(","):
            cli = CLIS[agent]
            install(cli)
            m = adapters.get(agent)
            for method in ("tolaria", "naive"):
                stops: list[Stop] = []
                for _ in range(args.stops):
                    with tempfile.TemporaryDirectory(prefix="tolaria-bench-") as tmp:
                        env = run_env(cli, Path(tmp) / "home", server.url)
                        work = Path(tmp) / "work"
                        work.mkdir()
                        if method == "tolaria":
                            stops.append(await tolaria_stop(m, env, str(work)))
                        else:
                            stops.append(await asyncio.to_thread(
                                naive_stop, m, env, str(work), args.baseline_wait))
                gone = [s.all_gone_ms for s in stops if s.all_gone_ms is not None]
                dones = [s.done_ms for s in stops if s.done_ms is not None]
                survivors = [name for s in stops for name in s.survivors]
                notes = {s.note for s in stops if s.note and not s.note.startswith("done: cancelled")}
                if method == "tolaria" and (survivors or len(gone) < len(stops)
                                            or any(g > 2000 for g in gone)):
                    failed = True
                cell = (f"{statistics.median(gone):.0f}, {max(gone):.0f}" if gone else "-")
                dcell = f"{statistics.median(dones):.0f}" if dones else "-"
                print(f"{agent:<10} {method:<8} {cell:<33} {dcell:<14} "
                      f"{len(survivors)} in {len(stops)} stops {sorted(set(survivors)) or ''}"
                      f"{' ' + '; '.join(sorted(notes)) if notes else ''}", flush=True)
    finally:
        server.stop()
    print("target: zero survivors for every CLI, <= 2000 ms each (tolaria):",
          "MISSED" if failed else "met")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--clis", default="claude,codex,gemini,qwen,opencode")
    parser.add_argument("--baseline-wait", type=float, default=2.0)
    return asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
