"""The abort race matrix: an abort at every moment of a run's life, from every kind of caller.

Whatever the moment, the contract is the same: ``abort`` answers True exactly when it stopped a
live run, the run's one ``done`` (last, nothing after it) agrees with that answer, and by the
time ``done`` arrives nothing the run started is alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path

import psutil
import pytest
from helpers import (
    Collector,
    assert_done_once_last,
    assert_run_gone,
    async_test,
    fake_manifest,
    is_gone,
    marker_pids,
    start_run,
    wait_pidfile,
    wait_until,
)

from tolaria.core.events import Event
from tolaria.core.process.registry import DuplicateStreamError, ProcessRegistry, Run
from tolaria.core.stream_id import InvalidStreamId, new_stream_id
from tolaria.core.turns.runner import RunRequest, abort_ai_agent_stream, stream_ai_agent

GRACE = 0.5


class _AbortOnRegister(ProcessRegistry):
    """A real registry whose first abort lands right after registration, before any spawn.

    That is the earliest moment an abort can reach a run; no code path of the run is replaced.
    """

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[bool] = []

    def register(self, run: Run) -> None:
        super().register(run)
        self.answers.append(self.abort(run.stream_id))


@async_test
async def test_abort_before_spawn_spawns_nothing(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    registry = _AbortOnRegister()
    run = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pidfile)},
                    registry=registry, grace_s=GRACE)
    done = await run.finish()
    assert registry.answers == [True]
    assert run.collector.kinds() == ["done"]
    assert done.stop_reason == "cancelled"
    assert done.exit_code is None  # no agent process ever existed
    assert not registry.is_live(run.stream_id)
    await asyncio.sleep(0.2)  # a wrongly spawned agent would have written its pidfile by now
    assert not pidfile.exists()
    assert_run_gone(run.stream_id)


@async_test
async def test_abort_on_the_next_loop_iteration_lands_during_spawn(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    registry = ProcessRegistry()
    sid = new_stream_id()
    seen: dict[str, object] = {}

    def abort_now() -> None:
        seen["state"] = next(i["state"] for i in registry.live() if i["stream_id"] == sid)
        seen["answer"] = registry.abort(sid)

    run = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pidfile)},
                    registry=registry, stream_id=sid, grace_s=GRACE)
    asyncio.get_running_loop().call_soon(abort_now)
    done = await run.finish()
    # The run was registered but not yet running: the spawn was in progress.
    assert seen == {"state": "pending", "answer": True}
    assert done.stop_reason == "cancelled"
    assert done.survivors == ()
    procs = await wait_pidfile(pidfile, within=0) if pidfile.exists() else []
    assert_run_gone(sid, procs)


class _AbortAtEvent(Collector):
    """Collects events and aborts its run from inside the callback at the n-th event."""

    def __init__(self, registry: ProcessRegistry, stream_id: str, at: int = 1) -> None:
        super().__init__()
        self.registry = registry
        self.stream_id = stream_id
        self.at = at
        self.answers: list[bool] = []

    def __call__(self, event: Event) -> None:
        super().__call__(event)
        if len(self.events) == self.at:
            self.answers.append(self.registry.abort(self.stream_id))


@async_test
async def test_abort_from_the_callback_at_first_output(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    registry = ProcessRegistry()
    sid = new_stream_id()
    collector = _AbortAtEvent(registry, sid)
    run = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pidfile)},
                    registry=registry, stream_id=sid, collector=collector, grace_s=GRACE)
    done = await run.finish()
    assert collector.answers == [True]
    assert collector.kinds()[0] == "init"
    assert done.stop_reason == "cancelled"
    assert done.survivors == ()
    procs = await wait_pidfile(pidfile, within=0) if pidfile.exists() else []
    assert_run_gone(sid, procs)


@async_test
async def test_abort_during_the_tool_with_the_default_registry(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    sid = new_stream_id()
    collector = Collector()
    request = RunRequest(fake_manifest("tool"), "hi", None, {"FAKE_PIDFILE": str(pidfile)})
    task = asyncio.ensure_future(stream_ai_agent(request, sid, collector, grace_s=GRACE))
    (sleeper,) = await wait_pidfile(pidfile)
    assert abort_ai_agent_stream(sid) is True
    done = await asyncio.wait_for(task, 15)
    assert_done_once_last(collector)
    assert done.stop_reason == "cancelled"
    assert_run_gone(sid, [sleeper])
    assert abort_ai_agent_stream(sid) is False


@async_test
async def test_abort_after_natural_exit_is_false() -> None:
    run = start_run(fake_manifest("normal"), grace_s=GRACE)
    done = await run.finish()
    assert done.stop_reason == "end_turn"
    assert run.abort() is False
    assert abort_ai_agent_stream(run.stream_id, run.registry) is False
    assert run.collector.events[-1] is done


@async_test
async def test_abort_as_the_agent_exits_agrees_with_done() -> None:
    """Abort from the callback on the last event before a natural exit: either answer is fine,
    but ``done`` must agree with it (True -> cancelled, False -> end_turn)."""
    for _ in range(4):
        registry = ProcessRegistry()
        sid = new_stream_id()
        collector = _AbortAtEvent(registry, sid, at=6)  # the usage event of the normal mode
        run = start_run(fake_manifest("normal"), registry=registry, stream_id=sid,
                        collector=collector, grace_s=GRACE)
        done = await run.finish()
        assert collector.events[5].kind == "usage"
        (answer,) = collector.answers
        assert done.stop_reason == ("cancelled" if answer else "end_turn")
        assert registry.abort(sid) is False
        assert_run_gone(sid)


@async_test
async def test_abort_twice(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    run = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pidfile)}, grace_s=GRACE)
    procs = await wait_pidfile(pidfile)
    assert run.abort() is True
    assert run.abort() is False
    done = await run.finish()
    assert run.abort() is False
    assert done.stop_reason == "cancelled"
    assert_run_gone(run.stream_id, procs)


@async_test
async def test_abort_from_eight_threads_at_once(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    run = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pidfile)}, grace_s=GRACE)
    procs = await wait_pidfile(pidfile)
    barrier = threading.Barrier(8)
    answers: list[bool] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def hammer() -> None:
        try:
            barrier.wait(timeout=5)
            answer = abort_ai_agent_stream(run.stream_id, run.registry)
        except BaseException as exc:
            with lock:
                errors.append(exc)
            return
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()

    def join_all() -> None:
        for thread in threads:
            thread.join(10)

    await asyncio.to_thread(join_all)
    assert errors == []
    assert sorted(answers) == [False] * 7 + [True]
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert done.survivors == ()
    assert_run_gone(run.stream_id, procs)


def test_abort_of_an_unknown_id_is_false() -> None:
    registry = ProcessRegistry()
    assert registry.abort(new_stream_id()) is False
    assert abort_ai_agent_stream(new_stream_id(), registry) is False
    assert abort_ai_agent_stream(new_stream_id()) is False


INVALID_IDS = [
    "",
    "not-an-id",
    "ai-agent-stream-",
    "AI-AGENT-STREAM-abc",
    "ai-agent-stream-abc def",
    "ai-agent-stream-../../etc",
    "ai-agent-stream-abc\n",
    "ai-agent-stream-" + "a" * 65,
    "1234",
    1234,
    None,
]


@pytest.mark.parametrize("bad", INVALID_IDS, ids=repr)
def test_invalid_id_is_refused_everywhere(bad: object) -> None:
    registry = ProcessRegistry()
    with pytest.raises(InvalidStreamId):
        registry.abort(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidStreamId):
        abort_ai_agent_stream(bad)  # type: ignore[arg-type]
    collector = Collector()

    async def body() -> None:
        request = RunRequest(fake_manifest("normal"), "hi")
        with pytest.raises(InvalidStreamId):
            await stream_ai_agent(request, bad, collector, registry=registry)  # type: ignore[arg-type]

    asyncio.run(body())
    assert collector.events == []
    assert registry.live() == []


@async_test
async def test_abort_of_one_run_never_touches_another(tmp_path: Path) -> None:
    registry = ProcessRegistry()
    pid_a, pid_b = tmp_path / "a", tmp_path / "b"
    run_a = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pid_a)},
                      registry=registry, grace_s=GRACE)
    run_b = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pid_b)},
                      registry=registry, grace_s=GRACE)
    (tool_a,) = await wait_pidfile(pid_a)
    (tool_b,) = await wait_pidfile(pid_b)
    agent_b = psutil.Process(tool_b.ppid())
    b_processes = set(marker_pids(run_b.stream_id))
    assert {agent_b.pid, tool_b.pid} <= b_processes

    assert run_a.abort() is True
    done_a = await run_a.finish()
    assert done_a.stop_reason == "cancelled"
    assert_run_gone(run_a.stream_id, [tool_a])

    await asyncio.sleep(0.3)  # give a stray signal time to land
    assert not is_gone(tool_b)
    assert not is_gone(agent_b)
    assert set(marker_pids(run_b.stream_id)) == b_processes
    assert not run_b.task.done()
    assert run_b.state() == "running"
    assert "done" not in run_b.collector.kinds()
    assert [i["stream_id"] for i in registry.live()] == [run_b.stream_id]

    assert run_b.abort() is True
    done_b = await run_b.finish()
    assert done_b.stop_reason == "cancelled"
    assert_run_gone(run_b.stream_id, [tool_b, agent_b])


@async_test
async def test_duplicate_live_stream_id_is_refused(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    run = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pidfile)}, grace_s=GRACE)
    procs = await wait_pidfile(pidfile)
    before = set(marker_pids(run.stream_id))
    second = Collector()
    request = RunRequest(fake_manifest("normal"), "hi")
    with pytest.raises(DuplicateStreamError):
        await stream_ai_agent(request, run.stream_id, second, registry=run.registry)
    assert second.events == []
    assert set(marker_pids(run.stream_id)) == before  # nothing was spawned for the duplicate
    assert run.state() == "running"  # and the live run was not disturbed
    assert run.abort() is True
    done = await run.finish()
    assert done.stop_reason == "cancelled"
    assert_run_gone(run.stream_id, procs)
    # Once finished, the id is free again.
    again = start_run(fake_manifest("normal"), registry=run.registry, stream_id=run.stream_id)
    assert (await again.finish()).stop_reason == "end_turn"


@async_test
async def test_nothing_is_delivered_after_done() -> None:
    """Abort mid-flood: lines still in the pipe may arrive before ``done``, never after it."""
    registry = ProcessRegistry()
    sid = new_stream_id()
    collector = _AbortAtEvent(registry, sid, at=100)
    run = start_run(fake_manifest("flood"), env={"FAKE_FLOOD_LINES": "200000"},
                    registry=registry, stream_id=sid, collector=collector, grace_s=GRACE)
    done = await run.finish()
    assert collector.answers == [True]
    assert done.stop_reason == "cancelled"
    count = len(collector.events)
    await asyncio.sleep(0.3)
    assert len(collector.events) == count
    assert collector.events[-1] is done
    assert_done_once_last(collector)
    assert_run_gone(sid)


@async_test
async def test_a_failing_callback_does_not_break_the_run() -> None:
    seen: list[str] = []

    def explode(event: Event) -> None:
        seen.append(event.kind)
        raise RuntimeError("callback bug")

    sid = new_stream_id()
    request = RunRequest(fake_manifest("normal"), "hi")
    done = await asyncio.wait_for(
        stream_ai_agent(request, sid, explode, registry=ProcessRegistry(), grace_s=GRACE), 15)
    assert done.stop_reason == "end_turn"
    assert seen[-1] == "done"
    assert seen.count("done") == 1
    assert_run_gone(sid)


@async_test
async def test_cancelling_the_run_task_still_ends_the_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    run = start_run(fake_manifest("tool"), env={"FAKE_PIDFILE": str(pidfile)}, grace_s=GRACE)
    procs = await wait_pidfile(pidfile)
    run.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run.task
    await asyncio.sleep(0.3)
    left_pids = {p.pid for p in procs if not is_gone(p)} | set(marker_pids(run.stream_id))
    left = [psutil.Process(pid) for pid in sorted(left_pids)]
    for proc in left:  # clean up here, so a regression fails this test, not the leak fixture
        with contextlib.suppress(psutil.Error):
            proc.kill()
    await wait_until(lambda: all(is_gone(p) for p in left), what="cleanup")
    assert left_pids == set(), f"cancelling the task left {sorted(left_pids)} alive"
    assert not run.registry.is_live(run.stream_id)
