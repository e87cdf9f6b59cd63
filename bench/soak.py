"""Soak: many start/stop cycles over the fake-agent zoo in one process. See docs/RELIABILITY.md.

    python bench/soak.py [--cycles 1000] [--seed 1] [--json]

Each cycle starts one run of ``tests/fakes/fake_agent.py`` through the real backend
(``stream_ai_agent`` on one asyncio loop, one ``ProcessRegistry``, as the app does) in a mode
picked at random, and stops it at a random moment: before the spawn (abort right after
registration, when nothing is spawned yet: only ``done`` may follow), during the spawn (the next
loop iteration), at the first event, mid-run (a random 0-150 ms after the first event), or after
the agent has exited on its own (the abort must then return False; hanging modes are stopped
mid-run instead). Checked per cycle:
``done`` is the one terminal event and last, the stop reason fits the moment, and no process
carrying the run's ``TOLARIA_STREAM_ID`` is alive (a ``/proc`` scan independent of Tolaria).
At the end: open file descriptors (``/proc/self/fd``) and threads are back to the baseline taken
after a warm-up, and RSS growth is <= 10 MB. Exit status 0 only when every check passes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from helpers import Collector, fake_manifest, marker_pids  # noqa: E402

from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN  # noqa: E402
from tolaria.core.process.registry import ProcessRegistry, Run  # noqa: E402
from tolaria.core.stream_id import new_stream_id  # noqa: E402
from tolaria.core.turns.runner import RunRequest, stream_ai_agent  # noqa: E402

#: mode -> (extra env, whether it ends on its own with end_turn, grace for its stop)
ZOO: dict[str, tuple[dict[str, str], bool, float]] = {
    "normal": ({}, True, 0.5),
    "hang": ({}, False, 0.5),
    "tool": ({}, False, 0.5),
    "ignore_term": ({}, False, 0.2),
    "daemon": ({}, False, 0.5),
    "tree3": ({}, False, 0.5),
    "grandchild_stdout": ({}, True, 0.5),
    "flood": ({"FAKE_FLOOD_LINES": "200"}, True, 0.5),
}
MOMENTS = ("before_spawn", "during_spawn", "first_output", "mid_run", "after_exit")
RSS_LIMIT_MB = 10.0


class SoakRegistry(ProcessRegistry):
    """The real registry; when asked, the next run is aborted the moment it is registered.

    That is the earliest an abort can reach a run (nothing is spawned yet); no code path of the
    run is replaced.
    """

    abort_on_register = False

    def register(self, run: Run) -> None:
        super().register(run)
        if self.abort_on_register:
            self.abort_on_register = False
            self.abort(run.stream_id)


@dataclass
class Report:
    cycles: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    by_mode: Counter[str] = field(default_factory=Counter)
    by_moment: Counter[str] = field(default_factory=Counter)
    survivors: int = 0
    fds: tuple[int, int] = (0, 0)
    threads: tuple[int, int] = (0, 0)
    rss_mb: tuple[float, float] = (0.0, 0.0)

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_mb[1] - self.rss_mb[0]

    @property
    def ok(self) -> bool:
        return (not self.failures and self.survivors == 0 and self.fds[1] <= self.fds[0]
                and self.threads[1] <= self.threads[0] and self.rss_growth_mb <= RSS_LIMIT_MB)

    def as_dict(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "seconds": round(self.seconds, 1), "ok": self.ok,
                "failures": self.failures[:20], "survivors": self.survivors,
                "fds": list(self.fds), "threads": list(self.threads),
                "rss_mb": [round(v, 1) for v in self.rss_mb],
                "rss_growth_mb": round(self.rss_growth_mb, 2),
                "by_mode": dict(self.by_mode), "by_moment": dict(self.by_moment)}


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def thread_count() -> int:
    return threading.active_count()


def rss_mb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


async def one_cycle(registry: SoakRegistry, rng: random.Random, mode: str, moment: str,
                    report: Report) -> None:
    env, ends_alone, grace = ZOO[mode]
    if moment == "after_exit" and not ends_alone:
        moment = "mid_run"
    report.by_mode[mode] += 1
    report.by_moment[moment] += 1
    sid = new_stream_id()
    events = Collector()
    request = RunRequest(fake_manifest(mode, env=env), "soak", None, {})
    registry.abort_on_register = moment == "before_spawn"
    task = asyncio.ensure_future(stream_ai_agent(request, sid, events, registry=registry,
                                                 grace_s=grace))
    expect: str | None = None
    if moment == "before_spawn":
        expect = STOP_CANCELLED
    elif moment == "during_spawn":
        await asyncio.sleep(0)  # the task registers the run and is inside the spawn
        aborted = registry.abort(sid)
        expect = STOP_CANCELLED if aborted else None
    elif moment == "after_exit":
        await asyncio.wait_for(asyncio.shield(task), 30)
        if registry.abort(sid):
            report.failures.append(f"{mode}/{moment}: abort after exit returned True")
        expect = STOP_END_TURN
    else:
        deadline = time.monotonic() + 20
        while not events.events and not task.done() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.002)
        if moment == "mid_run":
            await asyncio.sleep(rng.uniform(0, 0.15))
        aborted = registry.abort(sid)
        expect = STOP_CANCELLED if aborted else None
    try:
        done = await asyncio.wait_for(asyncio.shield(task), 30)
    except Exception as exc:
        report.failures.append(f"{mode}/{moment}: run raised {exc!r}")
        return
    kinds = events.kinds()
    if kinds.count("done") != 1 or events.events[-1] is not done:
        report.failures.append(f"{mode}/{moment}: done not once and last: {kinds[-5:]}")
    if expect is not None and done.stop_reason != expect:
        report.failures.append(f"{mode}/{moment}: stop reason {done.stop_reason}, not {expect}")
    if moment == "before_spawn" and events.kinds() != ["done"]:
        report.failures.append(f"{mode}/{moment}: events before done: {kinds[:5]}")
    if done.survivors:
        report.failures.append(f"{mode}/{moment}: survivors reported {done.survivors}")
    left = marker_pids(sid)
    if left:
        report.survivors += len(left)
        report.failures.append(f"{mode}/{moment}: processes alive after done: {left}")
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)


async def soak(cycles: int, seed: int = 1, warmup: int = 8) -> Report:
    rng = random.Random(seed)
    registry = SoakRegistry()
    report = Report()
    modes = list(ZOO)
    for i in range(warmup):  # start the watchdog, warm caches, import lazily loaded modules
        await one_cycle(registry, rng, modes[i % len(modes)], "first_output", Report())
    await settle()
    report.fds, report.threads = (open_fds(), 0), (thread_count(), 0)
    report.rss_mb = (rss_mb(), 0.0)
    started = time.monotonic()
    for _ in range(cycles):
        await one_cycle(registry, rng, rng.choice(modes), rng.choice(MOMENTS), report)
        report.cycles += 1
    report.seconds = time.monotonic() - started
    await settle(report.fds[0], report.threads[0])
    report.fds = (report.fds[0], open_fds())
    report.threads = (report.threads[0], thread_count())
    report.rss_mb = (report.rss_mb[0], rss_mb())
    if registry.live_count():
        report.failures.append(f"{registry.live_count()} runs still registered")
    return report


async def settle(fds: int | None = None, threads: int | None = None, within: float = 3.0) -> None:
    """Let child-watcher threads and transports finish closing before counting."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        gc.collect()
        await asyncio.sleep(0.05)
        if fds is None or (open_fds() <= fds and thread_count() <= (threads or 0)):
            return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = asyncio.run(soak(args.cycles, args.seed))
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        d = report.as_dict()
        print(f"{d['cycles']} cycles in {d['seconds']} s: {'PASS' if report.ok else 'FAIL'}")
        print(f"  survivors {d['survivors']}; fds {d['fds'][0]} -> {d['fds'][1]}; threads "
              f"{d['threads'][0]} -> {d['threads'][1]}; RSS {d['rss_mb'][0]} -> {d['rss_mb'][1]} MB "
              f"(+{d['rss_growth_mb']} MB, limit {RSS_LIMIT_MB})")
        print(f"  modes {d['by_mode']}")
        print(f"  moments {d['by_moment']}")
        for failure in d["failures"]:
            print(f"  FAIL {failure}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
