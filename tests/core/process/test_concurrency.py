"""Twenty runs at once in one process, one registry (as the app): stopped one by one in random
order, and all together with ``abort_all``. Nothing survives, every run gets its own correct
``done``, and no run's events reach another run's stream. See docs/RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from helpers import LiveRun, assert_run_gone, async_test, fake_manifest, start_run, wait_until

from tolaria.core.events import STOP_CANCELLED
from tolaria.core.process.registry import ProcessRegistry

RUNS = 20
#: Modes that keep running until stopped, each leaving something behind in its own way.
MODES = ("tool", "hang", "daemon", "ignore_term", "tree3", "grandchild_stdout")
GRACE = 0.3


def _start_all(registry: ProcessRegistry) -> list[LiveRun]:
    runs = []
    for i in range(RUNS):
        mode = MODES[i % len(MODES)]
        # grandchild_stdout ends its turn by itself but leaves a grandchild: stop it mid-init.
        manifest = fake_manifest("hang" if mode == "grandchild_stdout" else mode)
        runs.append(start_run(manifest, prompt=f"run {i}", registry=registry, grace_s=GRACE))
    return runs


async def _all_started(runs: list[LiveRun]) -> None:
    await wait_until(lambda: all(r.collector.events for r in runs), within=60,
                     what="every run's first event")
    for run in runs:
        assert not run.task.done(), run.collector.kinds()


async def _check(runs: list[LiveRun], registry: ProcessRegistry) -> None:
    for run in runs:
        done = await run.finish(within=30)
        assert done.stop_reason == STOP_CANCELLED, (run.stream_id, run.collector.kinds())
        assert done.survivors == ()
        foreign = [e for e in run.collector.events if e.stream_id != run.stream_id]
        assert foreign == [], f"events of other runs in {run.stream_id}: {foreign[:3]}"
        assert_run_gone(run.stream_id)
    assert registry.live_count() == 0


@pytest.mark.parametrize("seed", [1, 2])
@async_test
async def test_twenty_runs_stopped_in_random_order(seed: int) -> None:
    registry = ProcessRegistry()
    runs = _start_all(registry)
    await _all_started(runs)
    rng = random.Random(seed)
    order = runs[:]
    rng.shuffle(order)
    for run in order:
        assert run.abort() is True
        await asyncio.sleep(rng.uniform(0, 0.02))
    await _check(runs, registry)


@async_test
async def test_twenty_runs_stopped_all_together() -> None:
    registry = ProcessRegistry()
    runs = _start_all(registry)
    await _all_started(runs)
    stopped = registry.abort_all()
    assert sorted(stopped) == sorted(r.stream_id for r in runs)
    assert registry.abort_all() == []  # idempotent: nothing left to stop
    await _check(runs, registry)
