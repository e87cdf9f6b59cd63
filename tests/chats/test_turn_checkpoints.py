"""The chat checkpoint service (tolaria/chats/checkpoints.py) on real git repositories and a real
store: what a turn changed, in order per chat, failures as notes, undo, deleting a chat's refs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from helpers import async_test, git, git_repo

from tolaria.chats.checkpoints import (
    MARKER_CHECKPOINT_NOTICE,
    NOT_GIT,
    TurnChanges,
    TurnCheckpoints,
)
from tolaria.chats.restore import TurnRestore
from tolaria.chats.restore_plan import REVERT, REWIND, YES
from tolaria.core.checkpoints import CheckpointError, FileChange, store_of
from tolaria.core.store.db import Conversation, Store

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "proj", {"a.txt": "a\n"})


def new_turn(store: Store, conversation: Conversation, n: int) -> int:
    return store.start_turn(conversation.id, f"ai-agent-stream-t{conversation.id}x{n}", "demo",
                            f"turn {n}").id


@async_test
async def test_each_turn_lists_only_its_own_changes_in_order(store: Store, repo: Path) -> None:
    service = TurnCheckpoints(store)
    chat = store.create_conversation("c", "demo", str(repo))
    first = new_turn(store, chat, 1)
    await service.before_turn(chat, first, str(repo))
    (repo / "a.txt").write_text("changed by turn 1\n")
    (repo / "one.txt").write_text("1\n")
    after_first = service.after_turn(chat, first)  # asked at once, as the controller does
    second = new_turn(store, chat, 2)
    before_second = service.before_turn(chat, second, str(repo))  # waits for after_first
    await before_second
    (repo / "two.txt").write_text("2\n")
    changed = await after_first
    assert changed == TurnChanges(first, f"ai-agent-stream-t{chat.id}x1", (
        FileChange("a.txt", "modified"), FileChange("one.txt", "added")))
    second_changes = await service.after_turn(chat, second)
    assert second_changes is not None
    assert second_changes.files == (FileChange("two.txt", "added"),)
    assert [c.turn_id for c in service.changes(chat.id)] == [first, second]

    restore = TurnRestore(service, writers=lambda _repo: [])
    with pytest.raises(CheckpointError, match="not a file this turn changed"):
        await service.in_order(chat.id, restore.run, chat.id, second, REVERT, ["a.txt"])
    done = await service.in_order(chat.id, restore.run, chat.id, first, REWIND, (), YES)
    assert done.done and done.files == ("a.txt", "one.txt", "two.txt")
    assert (repo / "a.txt").read_text() == "a\n"
    assert not (repo / "one.txt").exists() and not (repo / "two.txt").exists()
    assert [c.rewound for c in service.changes(chat.id)] == [True, True]


@async_test
async def test_a_failed_snapshot_becomes_a_note_and_a_plain_folder_is_said_once(
        store: Store, repo: Path, tmp_path: Path) -> None:
    service = TurnCheckpoints(store)
    chat = store.create_conversation("c", "demo", str(repo))
    turn = new_turn(store, chat, 1)
    await service.before_turn(chat, turn, str(repo))
    shutil.rmtree(repo / ".git")  # the folder stopped being a repository during the turn
    assert await service.after_turn(chat, turn) is None
    (note,) = store.markers(chat.id, MARKER_CHECKPOINT_NOTICE)
    assert note.turn_id == turn
    assert note.data["text"].startswith("Could not record what this turn changed: ")

    plain = tmp_path / "plain"
    plain.mkdir()
    other = store.create_conversation("p", "demo", str(plain))
    for n in (1, 2):
        t = new_turn(store, other, n)
        await service.before_turn(other, t, str(plain))
        assert await service.after_turn(other, t) is None
    notes = store.markers(other.id, MARKER_CHECKPOINT_NOTICE)
    assert [m.data["text"] for m in notes] == [NOT_GIT], "once per chat"
    assert [c.notice for c in service.changes(other.id)] == [NOT_GIT]


@async_test
async def test_deleting_a_chat_deletes_only_its_refs(store: Store, repo: Path) -> None:
    service = TurnCheckpoints(store)
    chats = [store.create_conversation(t, "demo", str(repo)) for t in ("one", "two")]
    for chat in chats:
        turn = new_turn(store, chat, 1)
        await service.before_turn(chat, turn, str(repo))
        await service.after_turn(chat, turn)
    store_dir = f"--git-dir={store_of(repo)}"  # Tolaria's store, not the user's repository
    assert len(git(repo, store_dir, "for-each-ref", "refs/tolaria").splitlines()) == 4
    assert git(repo, "for-each-ref", "refs/tolaria") == ""
    assert await service.delete_chat(chats[0], service.repos(chats[0])) == 2
    left = git(repo, store_dir, "for-each-ref", "--format=%(refname)", "refs/tolaria").split()
    assert len(left) == 2 and all(ref.startswith(f"refs/tolaria/{chats[1].id}-") for ref in left)


def test_tolaria_run_in_a_git_folder_records_what_the_turn_changed(
        repo: Path, tolaria_home: Path) -> None:
    fake = json.dumps(str(ROOT / "tests" / "fakes" / "fake_agent.py"))
    (tolaria_home / "adapters").mkdir()
    (tolaria_home / "adapters" / "editor.toml").write_text(
        f'id = "editor"\nprotocol = "claude-stream-json"\n'
        f'command = [{json.dumps(sys.executable)}, {fake}, "edit_files", "{{prompt}}"]\n')
    env = {k: v for k, v in os.environ.items() if k != "TOLARIA_STREAM_ID"}
    env.update(TOLARIA_HOME=str(tolaria_home), FAKE_EDITS=json.dumps({"a.txt": "by run\n"}),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "tolaria", "run", "--agent", "editor",
                           "--cwd", str(repo), "edit a"], env=env, cwd=repo, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    with closing(Store(tolaria_home / "data" / "tolaria.sqlite3")) as store:
        (chat,) = store.list_conversations()
        (changes,) = TurnCheckpoints(store).changes(chat.id)
        assert changes.files == (FileChange("a.txt", "modified"),)
    assert git(repo, "status", "--porcelain").strip() == "M a.txt", "the user's index untouched"
