"""``tolaria run`` and checkpoints, end to end (issue 21 items 2 and 4): a turn in a repository
that configures every command git could run (and a diff of it) runs none of them; a
``tolaria abort`` during a slow before-snapshot stops the run at once: git killed, the agent
never started, the turn cancelled."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import psutil
import pytest
from hostile_git import committed_repo, make_hostile, plain_git

from tolaria.chats.checkpoints import TurnCheckpoints
from tolaria.chats.review import ReviewRequest, TurnReview
from tolaria.core import checkpoints as ck
from tolaria.core.checkpoints import FileChange
from tolaria.core.store.db import Store

ROOT = Path(__file__).resolve().parents[2]
STREAM = "ai-agent-stream-" + "c" * 32

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def editor_env(tolaria_home: Path, edits: dict[str, str], **extra: str) -> dict[str, str]:
    fake = json.dumps(str(ROOT / "tests" / "fakes" / "fake_agent.py"))
    (tolaria_home / "adapters").mkdir(exist_ok=True)
    (tolaria_home / "adapters" / "editor.toml").write_text(
        f'id = "editor"\nprotocol = "claude-stream-json"\n'
        f'command = [{json.dumps(sys.executable)}, {fake}, "edit_files", "{{prompt}}"]\n')
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(TOLARIA_HOME=str(tolaria_home), FAKE_EDITS=json.dumps(edits),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
               **extra)
    return env


def test_tolaria_run_in_a_hostile_repository_runs_nothing_of_it(
        tmp_path: Path, tolaria_home: Path) -> None:
    repo = committed_repo(tmp_path / "proj")
    home = tmp_path / "home"
    marker = make_hostile(repo, home)
    env = editor_env(tolaria_home, {"a.txt": "by run\n", "new.txt": "new\n"}, HOME=str(home))
    done = subprocess.run([sys.executable, "-m", "tolaria", "run", "--agent", "editor",
                           "--cwd", str(repo), "edit"], env=env, cwd=repo, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    with closing(Store(tolaria_home / "data" / "tolaria.sqlite3")) as store:
        (chat,) = store.list_conversations()
        service = TurnCheckpoints(store)
        (changes,) = service.changes(chat.id)
        assert set(changes.files) == {FileChange("a.txt", "modified"),
                                      FileChange("new.txt", "added")}
        review = TurnReview(service).handle_now(chat.id, ReviewRequest(changes.turn_id, "a.txt"))
        assert "+by run" in review.hunks[0].body
    assert not marker.exists(), marker.read_text()


def cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def test_abort_during_a_slow_before_snapshot_stops_at_once(
        tmp_path: Path, tolaria_home: Path) -> None:
    repo = committed_repo(tmp_path / "proj")
    with (repo / "random.bin").open("wb") as out:  # hashed and compressed: a slow snapshot
        chunk = os.urandom(ck.MB)
        for n in range(160):
            out.write(chunk[::-1] if n % 2 else chunk)
    tolaria_home.mkdir(exist_ok=True)
    (tolaria_home / "settings.toml").write_text(
        "[checkpoints]\nmax_file_mb = 2000.0\nmax_total_mb = 2000.0\ntime_budget_seconds = 600.0\n")
    env = editor_env(tolaria_home, {"a.txt": "the agent ran\n"})
    run = subprocess.Popen([sys.executable, "-m", "tolaria", "run", "--agent", "editor",
                            "--stream-id", STREAM, "--cwd", str(repo), "edit"], env=env,
                           cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        parent = psutil.Process(run.pid)
        busy = None
        deadline = time.monotonic() + 60
        while busy is None and run.poll() is None and time.monotonic() < deadline:
            busy = next((p for p in parent.children(recursive=True)
                         if "hash-object" in cmdline(p)), None)
            time.sleep(0.02)
        assert busy is not None, "the snapshot ended before it could be stopped"
        stopped = subprocess.run([sys.executable, "-m", "tolaria", "abort", STREAM], env=env,
                                 capture_output=True, text=True, timeout=30, check=False)
        assert stopped.returncode == 0, stopped.stderr
        _out, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 130, err
    assert not busy.is_running() or busy.status() == psutil.STATUS_ZOMBIE
    assert (repo / "a.txt").read_text() == "a\n", "the agent never started"
    with closing(Store(tolaria_home / "data" / "tolaria.sqlite3")) as store:
        (chat,) = store.list_conversations()
        (turn,) = store.turns(chat.id)
        assert turn.status == "cancelled"
        assert TurnCheckpoints(store).changes(chat.id) == []
    # Killed, not finished: no checkpoint was stored.
    assert plain_git(repo, f"--git-dir={ck.store_of(repo)}", "for-each-ref") == ""
