"""``tolaria changes / revert / rewind / undo`` (issue 21.8) and a crash mid-turn (21.6), with real
``tolaria`` processes, a real fake agent editing a real git repository, a real store:

- the user's lines added after a turn survive ``revert`` (exit 1 until ``--yes``; the merge
  keeps them), ``undo`` gives back the exact bytes, bad input exits 2;
- ``kill -9`` of a ``tolaria run`` whose agent already edited a file: the next ``tolaria`` (a
  restart) still lists the turn's files, marked as recorded after a restart, and reverting
  against it asks first;
- a second Tolaria process running an agent in the same repository makes ``rewind`` refuse,
  naming that run, until ``--yes``; ``chats --delete`` of the chat it runs refuses until it
  stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import psutil
import pytest
from cli.test_cli import Background, tolaria
from helpers import cli_env, git_repo, marker_pids
from nonroot import other_uid_gid, tolaria_as_other_user, world_reachable_folder

from tolaria.chats.checkpoints import TurnCheckpoints
from tolaria.core.store.db import Store
from tolaria.core.stream_id import new_stream_id

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fakes" / "fake_agent.py"
A = "one\ntwo\nthree\nfour\nfive\nsix\n"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def editor(home: Path) -> None:
    """An adapter whose agent writes FAKE_EDITS into its folder (and hangs with
    FAKE_EDIT_HANG=1)."""
    (home / "adapters").mkdir(exist_ok=True)
    (home / "adapters" / "editor.toml").write_text(
        f'id = "editor"\nprotocol = "claude-stream-json"\n'
        f'command = [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))}, "edit_files", '
        f'"{{prompt}}"]\n')


def run_env(home: Path, edits: dict[str, str | None], hang: bool = False) -> dict[str, str]:
    env = cli_env(home, FAKE_EDITS=json.dumps(edits))
    env.pop("TOLARIA_STREAM_ID", None)
    if hang:
        env["FAKE_EDIT_HANG"] = "1"
    return env


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "proj", {"a.txt": A})


def test_changes_revert_and_undo_from_the_command_line(tolaria_home: Path, repo: Path) -> None:
    editor(tolaria_home)
    agent_a = A.replace("two", "two by the agent")
    done = tolaria("run", "--agent", "editor", "--cwd", str(repo), "edit",
                   env=run_env(tolaria_home, {"a.txt": agent_a, "new.py": "agent\n"}), cwd=repo)
    assert done.returncode == 0, done.stderr
    env = cli_env(tolaria_home)
    listed = tolaria("changes", "1", "--json", "--diff", env=env, cwd=repo)
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)
    assert [(f["path"], f["status"]) for f in entry["files"]] == [("a.txt", "modified"),
                                                                   ("new.py", "added")]
    assert entry["turn"] == 1 and entry["late"] is False
    assert "+two by the agent" in entry["files"][0]["diff"]

    users_a = agent_a + "seven by the user\n"
    (repo / "a.txt").write_text(users_a)
    (repo / "new.py").write_text("agent\nuser\n")
    refused = tolaria("revert", "1", "1", env=env, cwd=repo)
    assert refused.returncode == 1, refused.stderr
    assert "a.txt: changed since this turn; only this turn's changes are taken out" in (
        refused.stderr)
    assert "new.py: changed since this turn; deleted (it did not exist then), the later " \
           "edits go too" in refused.stderr
    assert "--yes" in refused.stderr
    assert (repo / "a.txt").read_text() == users_a and (repo / "new.py").exists()

    as_json = tolaria("revert", "1", "1", "--json", env=env, cwd=repo)
    assert as_json.returncode == 1
    outcome = json.loads(as_json.stdout)
    assert outcome["done"] is False and outcome["needs_yes"] is True
    assert [(f["path"], f["action"], f["changed_since"]) for f in outcome["plan"]] == [
        ("a.txt", "merge", "changed since this turn"),
        ("new.py", "delete", "changed since this turn")]
    merged = tolaria("revert", "1", "1", "a.txt", "--yes", env=env, cwd=repo)
    assert merged.returncode == 0, merged.stderr
    assert (repo / "a.txt").read_text() == A + "seven by the user\n", "the user's line stays"
    assert "tolaria undo 1" in merged.stderr

    for bad in (["revert", "1", "1", "nope.txt"], ["revert", "9", "1"], ["rewind", "1", "5"],
                ["changes", "x"]):
        wrong = tolaria(*bad, env=env, cwd=repo)
        assert wrong.returncode == 2, (bad, wrong.stdout, wrong.stderr)
    assert "nope.txt is not a file this turn changed" in tolaria(
        "revert", "1", "1", "nope.txt", env=env, cwd=repo).stderr

    asked = tolaria("rewind", "1", "1", env=env, cwd=repo)
    assert asked.returncode == 1 and "Rewind to before this turn?" in asked.stderr
    assert tolaria("rewind", "1", "1", "--yes", env=env, cwd=repo).returncode == 0
    assert not (repo / "new.py").exists()

    (repo / "a.txt").write_text("typed after the rewind\n")
    careful = tolaria("undo", "1", env=env, cwd=repo)
    assert careful.returncode == 1 and "a.txt: changed since the rewind" in careful.stderr
    assert tolaria("undo", "1", "--yes", env=env, cwd=repo).returncode == 0
    assert (repo / "new.py").read_bytes() == b"agent\nuser\n", "exact bytes back"
    assert tolaria("undo", "1", env=env, cwd=repo).returncode == 0  # the merge-revert, next
    assert (repo / "a.txt").read_text() == users_a
    nothing = tolaria("undo", "1", env=env, cwd=repo)
    assert nothing.returncode == 2 and "nothing to undo" in nothing.stderr


def wait_gone(pids: list[int], within: float = 15) -> None:
    deadline = time.monotonic() + within
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
              for p in pids):
        assert time.monotonic() < deadline, f"still running: {pids}"
        time.sleep(0.05)


def test_kill_9_of_tolaria_run_mid_turn_still_shows_the_turns_files(
        tolaria_home: Path, repo: Path) -> None:
    editor(tolaria_home)
    sid = new_stream_id()
    runner = Background(["run", "--agent", "editor", "--cwd", str(repo), "--stream-id", sid,
                         "edit then hang"],
                        run_env(tolaria_home, {"a.txt": "half done by the agent\n"}, hang=True),
                        repo)
    try:
        runner.wait_until(lambda: (repo / "a.txt").read_text() == "half done by the agent\n",
                          "the agent's edit")
        agents = marker_pids(sid)
        assert agents
        os.kill(runner.proc.pid, signal.SIGKILL)  # no after-snapshot, no close()
        runner.finish()
        wait_gone(agents)  # the watchdog ends the orphaned agent
    finally:
        runner.kill()
    (repo / "a.txt").write_text("half done by the agent\nand the user's line while closed\n")

    env = cli_env(tolaria_home)
    listed = tolaria("changes", "1", "--json", env=env, cwd=repo)  # the restart
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)
    assert entry["status"] == "interrupted"
    assert [(f["path"], f["status"]) for f in entry["files"]] == [("a.txt", "modified")]
    assert entry["late"] is True
    text = tolaria("changes", "1", env=env, cwd=repo).stdout
    assert "recorded after a restart: may include edits made while Tolaria was closed" in text

    refused = tolaria("revert", "1", "1", env=env, cwd=repo)
    assert refused.returncode == 1
    assert "recorded after a restart" in refused.stderr and "a.txt" in refused.stderr
    assert tolaria("revert", "1", "1", "--yes", env=env, cwd=repo).returncode == 0
    assert (repo / "a.txt").read_text() == A
    assert tolaria("undo", "1", env=env, cwd=repo).returncode == 0
    assert (repo / "a.txt").read_text() == ("half done by the agent\n"
                                            "and the user's line while closed\n")


def test_rewind_refuses_while_another_tolaria_process_runs_an_agent_in_the_repo(
        tolaria_home: Path, repo: Path) -> None:
    editor(tolaria_home)
    done = tolaria("run", "--agent", "editor", "--cwd", str(repo), "edit",
                   env=run_env(tolaria_home, {"a.txt": "turn 1\n"}), cwd=repo)
    assert done.returncode == 0, done.stderr
    sid = new_stream_id()
    other = Background(["run", "--agent", "editor", "--cwd", str(repo / "."), "--stream-id",
                        sid, "busy elsewhere"],
                       run_env(tolaria_home, {"b.txt": "other chat\n"}, hang=True), repo)
    env = cli_env(tolaria_home)
    try:
        other.wait_until(lambda: (repo / "b.txt").exists(), "the other agent's edit")
        refused = tolaria("rewind", "1", "1", env=env, cwd=repo)
        assert refused.returncode == 1
        assert "Agent running in this repository: editor in chat" in refused.stderr
        assert sid in refused.stderr and str(other.proc.pid) in refused.stderr
        assert (repo / "a.txt").read_text() == "turn 1\n"
        aborted = subprocess.run([sys.executable, "-m", "tolaria", "abort", sid], env=env,
                                 capture_output=True, text=True, timeout=30, check=False)
        assert aborted.returncode == 0, aborted.stderr
        other.finish()
    finally:
        other.kill()
    asked = tolaria("rewind", "1", "1", env=env, cwd=repo)
    assert asked.returncode == 1 and "Agent running" not in asked.stderr
    assert tolaria("rewind", "1", "1", "--yes", env=env, cwd=repo).returncode == 0
    assert (repo / "a.txt").read_text() == A
    assert (repo / "b.txt").exists(), "the other chat's file is not this chat's to rewind"


def test_a_folder_the_user_cannot_write_stops_the_rewind_before_anything(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As a non-root user (root ignores modes): the turn created a file in a folder that is
    not theirs; the rewind names it and changes nothing, a.txt included."""
    with world_reachable_folder(owner_is_other_user=True) as top:
        home, repo = top / "home", git_repo(top / "proj", {"a.txt": A})
        monkeypatch.setenv("TOLARIA_HOME", str(home))  # checkpoints may live in its data
        (repo / "locked").mkdir()
        with closing(Store(home / "data" / "tolaria.sqlite3")) as store:
            service = TurnCheckpoints(store)
            chat = store.create_conversation("c", "demo", str(repo))
            turn_id = store.start_turn(chat.id, new_stream_id(), "demo", "edit").id
            service.take_before(chat, turn_id, str(repo))
            (repo / "a.txt").write_text("agent\n")
            (repo / "locked" / "made.txt").write_text("made by the agent\n")
            assert service.record_after(chat, turn_id) is not None
        if os.getuid() == 0:  # everything theirs but the folder the agent wrote into as root
            uid, gid = other_uid_gid()
            for path in [top, *top.rglob("*")]:
                if path != repo / "locked" and path.parent != repo / "locked":
                    os.lchown(path, uid, gid)
        else:
            (repo / "locked").chmod(0o555)
        refused = tolaria_as_other_user(home, "rewind", str(chat.id), "1", "--yes")
        assert refused.returncode == 1, (refused.stdout, refused.stderr)
        assert "locked/made.txt no permission to write in locked" in refused.stderr
        assert "Nothing was changed" in refused.stderr
        assert (repo / "a.txt").read_text() == "agent\n", "all or nothing"
        assert (repo / "locked" / "made.txt").exists()


def test_chats_delete_refuses_a_chat_whose_turn_runs_in_another_process(
        tolaria_home: Path, repo: Path) -> None:
    """``tolaria chats --delete ID --yes`` while another Tolaria process runs that chat's turn:
    refused (exit 1), the chat, its checkpoints and the agent's files kept; once the run is
    stopped the delete goes, with the checkpoints, and leaves the files alone."""
    editor(tolaria_home)
    sid = new_stream_id()
    running = Background(["run", "--agent", "editor", "--cwd", str(repo), "--stream-id", sid,
                          "busy"], run_env(tolaria_home, {"b.txt": "agent\n"}, hang=True), repo)
    env = cli_env(tolaria_home)
    try:
        running.wait_until(lambda: (repo / "b.txt").exists(), "the agent's edit")
        refused = tolaria("chats", "--delete", "1", "--yes", env=env, cwd=repo)
        assert refused.returncode == 1
        assert "chat 1 is running a turn: stop it first" in refused.stderr
        with closing(Store(tolaria_home / "data" / "tolaria.sqlite3")) as store:
            assert store.get_conversation(1) is not None
        aborted = subprocess.run([sys.executable, "-m", "tolaria", "abort", sid], env=env,
                                 capture_output=True, text=True, timeout=30, check=False)
        assert aborted.returncode == 0, aborted.stderr
        running.finish()
    finally:
        running.kill()
    deleted = tolaria("chats", "--delete", "1", "--yes", env=env, cwd=repo)
    assert deleted.returncode == 0, deleted.stderr
    assert "deleted chat 1 and 2 checkpoint refs" in deleted.stdout
    with closing(Store(tolaria_home / "data" / "tolaria.sqlite3")) as store:
        assert store.get_conversation(1) is None
    assert (repo / "b.txt").read_text() == "agent\n"
