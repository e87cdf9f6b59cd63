"""Pid hoppers that run for minutes (issue 22 item 2): on SIGTERM the tool becomes a
fork-and-exit chain (tests/fakes/hop_chain.py): every generation ``setsid()``s, forks and
exits, one process alive at a time, a new pid every ~ms. Stop freezes the run's processes
(a SIGSTOP sweep until a sweep finds nothing new: a stopped generation cannot fork), then
SIGKILLs them (tolaria/core/process/freeze.py), and reaps the dead generations it adopted.

From another process (``tolaria abort``) and as non-root: test_hop_chain_remote.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest
from helpers import (
    assert_run_gone,
    async_test,
    chain_alive,
    chain_generations,
    fake_manifest,
    start_run,
    wait_pidfile,
)

#: The promise: the chain is gone this soon after the abort.
GONE_WITHIN_S = 2.0
#: A grace period the stop must not wait out (the chain catches SIGTERM).
LONG_GRACE = 5.0


def _zombie_children() -> list[int]:
    """Our own children that have exited and were not reaped."""
    out = []
    for tid in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{tid}/children") as fh:
                kids = fh.read().split()
        except OSError:
            continue
        for kid in kids:
            try:
                with open(f"/proc/{kid}/stat", "rb") as fh:
                    if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                        out.append(int(kid))
            except (OSError, IndexError):
                continue
    return out


def _still_hopping(log: Path) -> list[int]:
    """Generations alive now, looked for over 100 ms: one look may miss a generation (listed
    alive, gone when read, its child born after the listing); a chain that still hops also
    grows its log."""
    before = chain_generations(log)
    seen: set[int] = set()
    for _ in range(20):
        seen.update(chain_alive(log))
        time.sleep(0.005)
    grown = chain_generations(log) - before
    return sorted(seen) + ([-grown] if grown else [])


def _kill_chain(log: Path) -> list[int]:
    """SIGSTOP then SIGKILL whatever of the chain lives (cleanup); return what was alive."""
    alive: list[int] = []
    for _ in range(50):
        found = chain_alive(log)
        if not found:
            break
        alive += found
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
        time.sleep(0.01)
    return alive


@pytest.mark.parametrize("mode", ["hopper_chain", "hopper_chain_bare"])
@async_test
async def test_a_minutes_long_hop_chain_is_ended_by_stop(tmp_path: Path, mode: str) -> None:
    """Marked (the chain keeps the run's environment) and bare (double-forked away with an
    empty environment: found as an orphan adopted by us). ``done`` comes within 2 s of the
    abort, no generation is alive then, none is reported as a survivor, and the dead
    generations adopted by us were reaped (no zombies pile up)."""
    log, pidfile = tmp_path / "hops", tmp_path / "pids"
    run = start_run(fake_manifest(mode), env={"FAKE_HOPLOG": str(log),
                                              "FAKE_PIDFILE": str(pidfile)},
                    grace_s=LONG_GRACE, cwd=tmp_path)
    await wait_pidfile(pidfile)
    await run.wait_for_kind("text_delta")
    started = time.monotonic()
    assert run.abort() is True
    try:
        done = await run.finish(within=30)
        elapsed = time.monotonic() - started
        zombies = _zombie_children()
        alive = _still_hopping(log)
    finally:
        leftover = _kill_chain(log)
    generations = chain_generations(log)
    print(f"{mode}: done {elapsed * 1000:.0f} ms after the abort, {generations} generations")
    assert alive == [] and leftover == [], f"chain alive after done: {alive}"
    assert done.stop_reason == "cancelled"
    assert done.survivors == ()
    assert generations >= 2, "the tool never hopped: the test proves nothing"
    assert elapsed < GONE_WITHIN_S, f"the stop took {elapsed:.2f} s"
    assert zombies == [], f"dead generations left as our zombies: {len(zombies)}"
    assert_run_gone(run.stream_id)
