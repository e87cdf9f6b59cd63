"""Agents die with the app: SIGKILL ``tolaria run`` (or the window's process) mid-run, and the
run's whole tree is gone within moments, thanks to tolaria.core.process.watchdog. See docs/RELIABILITY.md.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from helpers import (
    async_test,
    cli_env,
    fake_manifest,
    marker_pids,
    pid_gone,
    reap_adopted,
    start_run,
    tool_sleeping,
    watchdogs_of,
)

from tolaria.core.events import TextDelta
from tolaria.core.process import watchdog
from tolaria.core.process.registry import ProcessRegistry
from tolaria.core.store.db import STATUS_INTERRUPTED, Store
from tolaria.core.stream_id import new_stream_id

ROOT = Path(__file__).resolve().parents[3]
#: The issue's promise: the agent tree is gone this soon after the app is killed.
GONE_WITHIN_S = 2.0


def _env(home: Path, **extra: str) -> dict[str, str]:
    return cli_env(home, TOLARIA_DEMO_TOOL_SECONDS="60", **extra)


def _wait(predicate: Callable[[], object], what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


_watchdogs_of = watchdogs_of


def _kill_and_check_gone(app: subprocess.Popen[bytes], stream_id: str) -> float:
    """SIGKILL the app; return how long until no process of ``stream_id`` was left."""
    dogs = _watchdogs_of(app.pid)
    assert len(dogs) == 1, "the app should run exactly one watchdog"
    tree = [psutil.Process(pid) for pid in marker_pids(stream_id)]
    assert tree
    app.kill()
    killed = time.monotonic()
    app.wait(10)
    while marker_pids(stream_id) or not all(pid_gone(p.pid) for p in tree):
        if time.monotonic() - killed > GONE_WITHIN_S:
            for p in tree:  # clean up before failing
                p.kill()
            pytest.fail(f"the run's tree outlived the killed app by > {GONE_WITHIN_S} s")
        time.sleep(0.01)
    gone_after = time.monotonic() - killed
    print(f"tree of {stream_id} gone {gone_after * 1000:.0f} ms after SIGKILL of the app")
    _wait(lambda: pid_gone(dogs[0].pid), "the watchdog to exit", within=5)
    reap_adopted()  # the killed app's processes came back to us (the subreaper) to die
    return gone_after


# --- the watchdog itself ---------------------------------------------------------------------


def test_the_watchdog_knows_the_marker_without_importing_proctree() -> None:
    from tolaria.core.process import proctree

    assert watchdog.ENV_MARKER == proctree.ENV_MARKER


def test_serve_follows_starts_and_ends_and_ignores_a_torn_line() -> None:
    lines = io.BytesIO(b"+a\n+b\n-a\n+c\n+b\n-b\n-zzz\n+torn")
    assert watchdog.serve(lines) == {b"b", b"c"}


@pytest.mark.usefixtures("process_backend")
def test_kill_marked_kills_only_the_named_runs_tree(tmp_path: Path) -> None:
    mine, other = new_stream_id(), new_stream_id()
    procs = []
    for sid in (mine, mine, other):
        env = {**os.environ, "TOLARIA_STREAM_ID": sid}
        procs.append(subprocess.Popen(["sleep", "60"], env=env, start_new_session=True))
    try:
        assert watchdog.kill_marked([mine.encode()]) == 2
        for p in procs[:2]:
            assert p.wait(5) == -signal.SIGKILL
        assert procs[2].poll() is None
        assert marker_pids(mine) == []
    finally:
        for p in procs:
            p.kill()
            p.wait(5)


@async_test
async def test_one_watchdog_per_process_and_it_learns_every_run() -> None:
    for _ in range(3):
        run = start_run(fake_manifest("normal"), registry=ProcessRegistry())
        await run.finish()
    pid = watchdog.watchdog_pid()
    assert pid is not None
    assert [p.pid for p in _watchdogs_of(os.getpid())] == [pid]


# --- the app is killed ---------------------------------------------------------------------


@pytest.mark.usefixtures("process_backend")
def test_sigkill_of_tolaria_run_takes_the_agent_tree_with_it(tolaria_home: Path,
                                                              tmp_path: Path) -> None:
    sid = new_stream_id()
    app = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--json", "--stream-id", sid,
                            "--agent", "demo", "run a tool"], env=_env(tolaria_home),
                           cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        _wait(lambda: tool_sleeping(sid), "the demo's tool")
        _kill_and_check_gone(app, sid)
    finally:
        if app.poll() is None:
            app.kill()
        app.wait(10)


#: The window's process, minus the clicking: the app's own composition root, a real demo run
#: started through the controller (as the Send button does), then it waits to be killed.
GUI_SCRIPT = textwrap.dedent("""\
    import asyncio, sys
    from tolaria.app.main import Tolaria, make_qapplication
    from tolaria.qt import loop

    async def main() -> None:
        app = Tolaria(agent="demo", cwd=sys.argv[1])
        await app.start()
        conversation = app.controller.conversations()[0]
        stream_id = app.controller.send(conversation.id, "run a tool")
        print(stream_id, flush=True)
        await asyncio.sleep(3600)

    make_qapplication()
    loop.run(main())
""")


def test_sigkill_of_the_window_process_keeps_the_store_and_kills_the_tree(
        tolaria_home: Path, tmp_path: Path) -> None:
    app = subprocess.Popen([sys.executable, "-c", GUI_SCRIPT, str(tmp_path)],
                           env=_env(tolaria_home, QT_QPA_PLATFORM="offscreen"), cwd=tmp_path,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    try:
        assert app.stdout is not None
        sid = app.stdout.readline().decode().strip()
        assert sid.startswith("ai-agent-stream-"), sid
        _wait(lambda: tool_sleeping(sid), "the demo's tool", within=60)
        time.sleep(0.3)  # a few store flushes (every 50 ms) after the text before the tool
        _kill_and_check_gone(app, sid)
    finally:
        if app.poll() is None:
            app.kill()
        app.wait(10)
    db = next((tolaria_home).rglob("tolaria.sqlite3"))
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    store = Store(db)
    try:
        turn = store.turn_by_stream(sid)
        assert turn is not None
        assert turn.status == STATUS_INTERRUPTED
        text = "".join(e.text for e in store.events(turn.id) if isinstance(e, TextDelta))
        assert text, "the partial output before the tool was lost"
    finally:
        store.close()


#: A chat's kept agent process (docs/adr/0008), idle between turns, when the app is killed.
KEEPER_SCRIPT = textwrap.dedent("""\
    import asyncio, sys
    from tolaria.core.adapters.manifest import Manifest, StopPolicy
    from tolaria.core.turns.keeper import default_keepers
    from tolaria.core.turns.runner import RunRequest, stream_ai_agent
    from tolaria.core.stream_id import new_stream_id

    async def main() -> None:
        manifest = Manifest(id="fake-claude-stream", name="Fake Claude", protocol="claude-stream-json",
                            input="claude-stream-json", command=(sys.executable, sys.argv[1], "--linger"),
                            stop=StopPolicy(polite="interrupt"))
        request = RunRequest(manifest, "hello", sys.argv[2], keep_key="chat-1")
        done = await stream_ai_agent(request, new_stream_id(), lambda event: None)
        assert done.stop_reason == "end_turn", done
        print(default_keepers().stream_id("chat-1"), flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
""")


@pytest.mark.usefixtures("process_backend")
def test_sigkill_of_the_app_kills_an_idle_kept_agent(tolaria_home: Path, tmp_path: Path) -> None:
    fake = ROOT / "tests" / "fakes" / "fake_claude_stream.py"
    app = subprocess.Popen([sys.executable, "-c", KEEPER_SCRIPT, str(fake), str(tmp_path)],
                           env=_env(tolaria_home), cwd=tmp_path, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert app.stdout is not None
        keeper_sid = app.stdout.readline().decode().strip()
        assert keeper_sid.startswith("ai-agent-stream-"), keeper_sid
        assert marker_pids(keeper_sid), "the kept agent should be alive between turns"
        # Written down for the watchdog too, idle or not (tracking.py): what has no marker.
        track = tolaria_home / "data" / "run" / f"{app.pid}-{keeper_sid}.track.json"
        _wait(lambda: track.exists() and {p for p, _ in json.loads(track.read_text())["procs"]}
              & set(marker_pids(keeper_sid)), "the keeper's tracking file", within=10)
        _kill_and_check_gone(app, keeper_sid)
        _wait(lambda: not track.exists(), "the watchdog to remove the tracking file", within=5)
    finally:
        if app.poll() is None:
            app.kill()
        app.wait(10)


#: Run by a Tolaria whose own import path is not in the environment (an installed wheel, or an
#: editable install without PYTHONPATH): the watchdog must still import Tolaria and stay up.
_WATCHDOG_WITHOUT_PYTHONPATH = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from tolaria.core.process import watchdog
client = watchdog._Client()
client.run_started("ai-agent-stream-" + "0" * 32)
time.sleep(1.0)
pid = client.pid()
alive = pid is not None and os.waitpid(pid, os.WNOHANG) == (0, 0)
client.run_ended("ai-agent-stream-" + "0" * 32)
client.close()
print("alive" if alive else "dead")
"""


def test_the_watchdog_starts_without_pythonpath_from_any_folder(tmp_path: Path) -> None:
    """Before: the watchdog's import path pointed one folder too high; without PYTHONPATH (every
    real install) it died at once with "No module named 'tolaria'" and a crashed app left its
    agents running."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TOLARIA_STREAM_ID", "TOLARIA_OWNER")}
    done = subprocess.run([sys.executable, "-c", _WATCHDOG_WITHOUT_PYTHONPATH, str(ROOT)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "alive", done.stderr
    assert "watchdog did not take" not in done.stderr
