"""No rule of a turn exists twice (issue 23): the same scripted turn sequences (send, stop
mid-turn, restart, retry of a failed turn, two messages queued behind a running turn and their
delivery, delete while running, crash recovery) run through the window's ChatController and
through the turn engine as ``tolaria run`` drives it (a separate process: its store, the default
registry, its printer observer; tests/chats/engine_sequences.py), each on its own real SQLite
store with the real demo agent, and store the same: turn statuses, prompts, text, markers,
queue. Plus a real ``tolaria run`` (a new chat, then ``--chat``) against the window, and a real
``tolaria run`` SIGKILLed mid-turn whose store both front ends then open alike."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chats.engine_sequences import SEQUENCES, Chat, add_broken_adapter, summary
from helpers import cli_env, git_repo, marker_pids, settle_orphans, tool_sleeping
from ui.uihelpers import AppDriver

from tolaria.chats.checkpoints import MARKER_TURN_CHANGES
from tolaria.chats.saved_runs import open_store
from tolaria.core.store.db import Store
from tolaria.core.store.queue import PAUSED_AFTER_CRASH
from tolaria.core.stream_id import new_stream_id

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "chats" / "engine_sequences.py"


def _env(home: Path, **extra: str) -> dict[str, str]:
    return cli_env(home, **{"TOLARIA_DEMO_DELAY": os.environ["TOLARIA_DEMO_DELAY"],
                            "TOLARIA_DEMO_TOOL_SECONDS": "0", **extra})


def _diff(window: dict[str, Any], engine: dict[str, Any]) -> str:
    import difflib

    return "\n".join(difflib.unified_diff(
        json.dumps(window, indent=1).splitlines(), json.dumps(engine, indent=1).splitlines(),
        "window", "engine", lineterm=""))


def _in_window(drv: AppDriver, folder: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    controller, store = drv.app.controller, drv.app.store
    found = {}
    for name in names:
        chat = Chat(controller, store, controller.new_conversation("demo", str(folder)).id)
        for action, arg in SEQUENCES[name]:
            condition = chat.waiting(action, arg)
            if condition is None:
                chat.act(action, arg)
            else:
                drv.qtbot.waitUntil(condition, timeout=60_000)
        found[name] = summary(store, chat.id)
    return found


def _through_engine(home: Path, folder: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    db, out = home / "data" / "tolaria.sqlite3", home / "chats.json"
    db.parent.mkdir(parents=True, exist_ok=True)
    ran = subprocess.run([sys.executable, str(SCRIPT), str(db), str(folder), str(out), *names],
                         env=_env(home), cwd=home, capture_output=True, text=True, timeout=300,
                         check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return {name: _stored(db, chat) for name, chat in json.loads(out.read_text()).items()}


def _stored(db: Path, chat: int) -> dict[str, Any]:
    store = Store(db)
    try:
        return summary(store, chat)
    finally:
        store.close()


@pytest.mark.parametrize("names", [["send", "stop", "restart"], ["retry", "queue", "delete"]],
                         ids=["send-stop-restart", "retry-queue-delete"])
def test_the_window_and_the_engine_of_tolaria_run_store_alike(
        names: list[str], start_app: Callable[..., AppDriver], home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")  # the steps change it; restored after
    folder = tmp_path / "folder"
    folder.mkdir()
    engine_home = tmp_path / "engine-home"
    for where in (home, engine_home):
        add_broken_adapter(where)
    drv = start_app()
    window = _in_window(drv, folder, names)
    drv.close()
    engine = _through_engine(engine_home, folder, names)
    for name in names:
        assert window[name] == engine[name], _diff(window[name], engine[name])
    if "stop" in window:
        assert [t["status"] for t in window["stop"]["turns"]] == ["cancelled"]
        assert ("stop_requested", 0, {"stream_id": "turn0"}) in window["stop"]["markers"]
    if "restart" in window:
        assert [t["status"] for t in window["restart"]["turns"]] == ["cancelled", "completed"]
        assert [t["prompt"] for t in window["restart"]["turns"]] == ["restart me"] * 2
    if "retry" in window:
        assert [(t["agent"], t["status"]) for t in window["retry"]["turns"]] == [
            ("broken", "failed"), ("demo", "completed")]
    if "queue" in window:
        assert [t["prompt"] for t in window["queue"]["turns"]] == ["first", "second\n\nthird"]
        assert window["queue"]["queue"]["messages"] == []
    if "delete" in window:
        assert window["delete"] == {"deleted": True, "turns": []}


def test_a_real_tolaria_run_and_the_window_store_alike(
        start_app: Callable[..., AppDriver], home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``tolaria run`` (a new chat, then ``--chat`` with a follow-up) against the window."""
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    folder = tmp_path / "folder"
    folder.mkdir()
    cli_home = tmp_path / "cli-home"
    cli_home.mkdir()
    drv = start_app()
    window = _in_window(drv, folder, ["send"])["send"]
    drv.close()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tolaria", "run", "--json", *args],
                              env=_env(cli_home), cwd=cli_home, capture_output=True, text=True,
                              timeout=120, check=False)

    first = run("--agent", "demo", "--cwd", str(folder), "hello there")
    assert first.returncode == 0, first.stderr
    chat = int(first.stderr.split("saved in chat ")[1].split()[0])
    second = run("--chat", str(chat), "and again")
    assert second.returncode == 0, second.stderr
    assert _stored(cli_home / "data" / "tolaria.sqlite3", chat) == window
    assert window["title"] == "hello there"
    assert [t["status"] for t in window["turns"]] == ["completed", "completed"]


def test_crash_recovery_is_the_same_in_the_window_and_the_engine(
        start_app: Callable[..., AppDriver], home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A store left by a SIGKILLed ``tolaria run``: a running turn (checkpointed before it, in a
    git folder) and an unpaused queue. Opened by the window and by the engine, the turn is
    interrupted (its partial text kept), its after-state recorded late, and the queue paused
    "after a crash", nothing sent by surprise."""
    folder = git_repo(tmp_path / "folder", {"a.txt": "a\n"})
    crash_home = tmp_path / "crash-home"
    crash_home.mkdir()
    sid = new_stream_id()
    app = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--json", "--stream-id", sid,
                            "--agent", "demo", "--cwd", str(folder), "crash me"],
                           env=_env(crash_home, TOLARIA_DEMO_TOOL_SECONDS="60"), cwd=crash_home,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    crash_db = crash_home / "data" / "tolaria.sqlite3"
    try:
        deadline = time.monotonic() + 30
        while not tool_sleeping(sid):
            assert app.poll() is None, "tolaria run ended early"
            assert time.monotonic() < deadline, "the demo's tool never started"
            time.sleep(0.02)
        with monkeypatch.context() as home_of_the_run:  # its control sockets: it is live
            home_of_the_run.setenv("TOLARIA_HOME", str(crash_home))
            live = open_store(crash_db)  # leaves the live run's turn running
        try:
            turn = live.turn_by_stream(sid)
            assert turn is not None and turn.status == "running"
            chat = turn.conversation_id
            live.queue_add(chat, "queued before the crash")
        finally:
            live.close()
        time.sleep(0.2)  # past the store's 50 ms flush of the streamed text
        app.kill()
        app.wait(10)
        deadline = time.monotonic() + 10
        while marker_pids(sid):  # the run's watchdog ends its tree
            assert time.monotonic() < deadline, "the killed run's tree survived"
            time.sleep(0.02)
        settle_orphans()
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(10)
    engine_home = tmp_path / "engine-home"
    for where in (home, engine_home):  # the store and the checkpoints' objects, as left
        shutil.copytree(crash_home / "data", where / "data", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*-shm", "crash-reports"))
    drv = start_app()  # opens the newest chat: its late after-state is recorded
    drv.qtbot.waitUntil(lambda: bool(drv.app.store.markers(chat, MARKER_TURN_CHANGES)),
                        timeout=30_000)
    window = summary(drv.app.store, chat)
    drv.close()
    engine = _through_engine(engine_home, folder, [])
    assert engine == {}
    assert _stored(engine_home / "data" / "tolaria.sqlite3", chat) == window
    assert [t["status"] for t in window["turns"]] == ["interrupted"]
    assert window["turns"][0]["text"], "the partial answer is kept"
    changes = [m for m in window["markers"] if m[0] == MARKER_TURN_CHANGES]
    assert len(changes) == 1 and changes[0][2]["late"] is True
    assert window["queue"] == {"paused": True, "reason": PAUSED_AFTER_CRASH,
                               "messages": ["queued before the crash"]}
