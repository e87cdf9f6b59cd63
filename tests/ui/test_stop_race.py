"""A Stop that races the Send: before the run's task first runs, one or two loop iterations
later, during the checkpoint snapshot, at the spawn. Every way of stopping (the controller's
Stop, Stop all, ``tolaria abort``, deleting the chat, quitting, a fan-out job's Stop) ends the
run ``cancelled`` with its tree gone, and a second Stop is harmless (the autouse leak fixture
checks that no process is left)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import fake_manifest, git_repo
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, processes_of

from tolaria.core import checkpoints as ck
from tolaria.core.process import control_client


@pytest.fixture(autouse=True)
def _long_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Left alone, the demo's turn would run a minute: only a stop ends it in time."""
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")


def spin(iterations: int) -> None:
    """Let the event loop run ``iterations`` times (the run's task takes its first steps)."""
    for _ in range(iterations):
        QApplication.processEvents()


def assert_cancelled(drv: AppDriver, stream_id: str) -> None:
    """The turn ended ``cancelled`` (view and store) well before the agent would, tree gone."""
    turn = drv.wait_finished(timeout_ms=8_000)
    assert turn.status == "cancelled"
    assert drv.stored_turn(stream_id).status == "cancelled"
    assert processes_of(stream_id) == [], "the run's process tree must be gone"
    assert not drv.app.registry.is_live(stream_id)


def stored_status_after_quit(drv: AppDriver, stream_id: str) -> str:
    """The turn's status as the closed app left it in its database file."""
    with sqlite3.connect(drv.app.store.path) as db:
        row = db.execute("SELECT status FROM turns WHERE stream_id = ?", (stream_id,)).fetchone()
    assert row is not None, f"no stored turn for {stream_id}"
    return str(row[0])


@pytest.mark.parametrize("iterations", [0, 1, 2])
def test_stop_right_after_send_cancels_the_run(start_app: StartApp, iterations: int) -> None:
    drv = start_app()
    stream_id = drv.send("stop me at once")
    spin(iterations)
    conversation_id = drv.pane.conversation_id
    assert drv.app.controller.stop(conversation_id) is True, "the first Stop must take"
    assert drv.app.controller.stop(conversation_id) is False, "a second Stop is a no-op"
    assert_cancelled(drv, stream_id)
    assert drv.app.controller.stop(conversation_id) is False
    assert drv.app.controller.running_count() == 0


def test_stop_the_moment_the_agent_appears(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    stream_id = drv.send("stop me as I start")
    qtbot.waitUntil(lambda: bool(processes_of(stream_id)), timeout=10_000)
    assert drv.app.controller.stop(drv.pane.conversation_id) is True
    assert_cancelled(drv, stream_id)


def test_stop_button_twice_right_after_send(start_app: StartApp) -> None:
    drv = start_app()
    stream_id = drv.send("click, click")
    drv.button("stopButton").click()
    if drv.pane.running_stream is not None:  # the button may already be Send again
        drv.app.controller.stop(drv.pane.conversation_id)
    assert_cancelled(drv, stream_id)


def test_stop_all_right_after_send(start_app: StartApp) -> None:
    drv = start_app()
    stream_id = drv.send("stop all of us")
    assert drv.app.controller.stop_all() == [stream_id]
    assert drv.app.controller.stop_all() == [], "nothing is left to stop"
    assert_cancelled(drv, stream_id)


def test_deleting_the_chat_right_after_send_ends_the_run(start_app: StartApp,
                                                         qtbot: QtBot) -> None:
    drv = start_app()
    stream_id = drv.send("delete me")
    conversation_id = drv.pane.conversation_id
    drv.app.controller.delete(conversation_id)
    drv.app.controller.delete(conversation_id)  # twice: harmless
    qtbot.waitUntil(lambda: drv.app.store.get_conversation(conversation_id) is None,
                    timeout=8_000)
    assert processes_of(stream_id) == []
    assert not drv.app.registry.is_live(stream_id)
    assert drv.app.controller.running_count() == 0


def test_quitting_right_after_send_ends_the_run_cancelled(start_app: StartApp) -> None:
    drv = start_app()
    stream_id = drv.send("quit now")
    started = time.monotonic()
    drv.close()
    assert time.monotonic() - started < 8
    assert processes_of(stream_id) == []
    assert stored_status_after_quit(drv, stream_id) == "cancelled"


def test_a_fanout_job_stopped_right_after_it_starts(start_app: StartApp,
                                                    qtbot: QtBot) -> None:
    drv = start_app()
    hang = fake_manifest("hang")
    drv.app.adapters.manifests[hang.id] = hang
    job = drv.app.fanout.start_job("everyone stop", ["demo", hang.id])
    assert job is not None
    streams = [m.stream_id for m in job.members if m.stream_id is not None]
    assert streams
    assert sorted(drv.app.fanout.stop_job(job.job_id)) == sorted(streams)
    assert drv.app.fanout.stop_job(job.job_id) == []
    qtbot.waitUntil(lambda: drv.app.controller.running_count() == 0, timeout=8_000)
    for stream_id in streams:
        assert drv.stored_turn(stream_id).status == "cancelled"
        assert processes_of(stream_id) == []
    assert drv.app.fanout.status(job.job_id) == "cancelled"


@pytest.fixture
def slow_snapshot(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The ``before`` snapshot takes a second (a big working tree); set once it has begun."""
    real_snapshot = ck.snapshot
    started = threading.Event()

    def slow(folder: Path, ref: str, **options: Any) -> ck.Checkpoint:
        started.set()
        time.sleep(1.0)
        return real_snapshot(folder, ref, **options)

    monkeypatch.setattr(ck, "snapshot", slow)
    return started


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@needs_git
def test_tolaria_abort_during_the_checkpoint_snapshot(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path,
        slow_snapshot: threading.Event) -> None:
    repo = git_repo(tmp_path / "proj", {"a.txt": "a\n"})
    drv = start_app(cwd=str(repo))
    stream_id = drv.send("abort me from another terminal")
    qtbot.waitUntil(slow_snapshot.is_set)
    assert stream_id in [r["stream_id"] for r in drv.app.registry.live()], \
        "`tolaria streams` lists the run while it waits for the snapshot"
    # What `tolaria abort ID` does, through the app's control socket (answered once stopped).
    answer = drv.run(asyncio.to_thread(control_client.abort_remote, stream_id))
    assert answer is True
    assert_cancelled(drv, stream_id)
    assert drv.app.controller.stop(drv.pane.conversation_id) is False


@needs_git
@pytest.mark.parametrize("how", ["stop", "stop_all", "quit"])
def test_stop_during_the_checkpoint_snapshot(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path,
        slow_snapshot: threading.Event, how: str) -> None:
    repo = git_repo(tmp_path / "proj", {"a.txt": "a\n"})
    drv = start_app(cwd=str(repo))
    stream_id = drv.send("stop me while the folder is snapshotted")
    qtbot.waitUntil(slow_snapshot.is_set)
    if how == "stop":
        assert drv.app.controller.stop(drv.pane.conversation_id) is True
        assert drv.app.controller.stop(drv.pane.conversation_id) is False
    elif how == "stop_all":
        assert drv.app.controller.stop_all() == [stream_id]
    else:
        drv.close()
        assert stored_status_after_quit(drv, stream_id) == "cancelled"
        assert processes_of(stream_id) == []
        return
    assert_cancelled(drv, stream_id)
