"""What a turn's checkpoint leaves out is said under the turn (issue 21 item 4): a big file and
``node_modules/`` listed in one note and in the turn's marker; a chat in the home folder, in a
folder whose repository is the home folder, or in ``/`` gets no checkpoint and a note."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import async_test, git_repo

from tolaria.chats.checkpoints import (
    MARKER_TURN_CHANGES,
    TOO_WIDE,
    TurnCheckpoints,
)
from tolaria.core import checkpoints as ck
from tolaria.core.store.db import Store

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@async_test
async def test_what_a_snapshot_left_out_is_said_under_the_turn(
        store: Store, tmp_path: Path, tolaria_home: Path) -> None:
    repo = git_repo(tmp_path / "proj", {"a.txt": "a\n"})
    (repo / "node_modules" / "x").mkdir(parents=True)
    (repo / "node_modules" / "x" / "i.js").write_text("1\n")
    tolaria_home.mkdir(exist_ok=True)
    (tolaria_home / "settings.toml").write_text("[checkpoints]\nmax_file_mb = 1.0\n")
    with (repo / "dump.sql").open("wb") as out:
        out.truncate(2 * ck.MB)
    service = TurnCheckpoints(store)
    chat = store.create_conversation("c", "demo", str(repo))
    turn = store.start_turn(chat.id, "ai-agent-stream-" + "d" * 32, "demo", "t").id
    await service.before_turn(chat, turn, str(repo))
    (repo / "a.txt").write_text("edited\n")
    changed = await service.after_turn(chat, turn)
    assert changed is not None
    assert changed.files == (ck.FileChange("a.txt", "modified"),)
    assert changed.notice == "not tracked: 1 file over 1 MB (dump.sql), node_modules/"
    (marker,) = store.markers(chat.id, MARKER_TURN_CHANGES)
    assert marker.data["skipped"]["heavy"] == ["node_modules/"]
    assert marker.data["skipped"]["large"] == ["dump.sql"]


@async_test
async def test_the_home_folder_or_root_gets_no_checkpoint_and_a_note(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = git_repo(tmp_path / "userhome", {"dotfile": "x\n"})  # a home folder kept in git
    (home / "src").mkdir()
    monkeypatch.setenv("HOME", str(home))
    service = TurnCheckpoints(store)
    for n, folder in enumerate((home, home / "src", Path("/"))):
        chat = store.create_conversation(f"c{n}", "demo", str(folder))
        turn = store.start_turn(chat.id, f"ai-agent-stream-{n:032x}", "demo", "t").id
        await service.before_turn(chat, turn, str(folder))
        assert await service.after_turn(chat, turn) is None
        assert [c.notice for c in service.changes(chat.id)] == [TOO_WIDE]
    assert not ck.store_of(home).exists(), "nothing was snapshotted"


def test_a_turn_recorded_after_a_restart_takes_the_settings_limits(
        store: Store, tmp_path: Path, tolaria_home: Path) -> None:
    """``recover`` (the after-state of a turn whose process died) snapshots with the same
    ``[checkpoints]`` limits as a turn that ended normally, and says what it left out."""
    repo = git_repo(tmp_path / "proj", {"a.txt": "a\n"})
    tolaria_home.mkdir(exist_ok=True)
    (tolaria_home / "settings.toml").write_text("[checkpoints]\nmax_file_mb = 1.0\n")
    service = TurnCheckpoints(store)
    chat = store.create_conversation("c", "demo", str(repo))
    sid = "ai-agent-stream-" + "e" * 32
    turn = store.start_turn(chat.id, sid, "demo", "t").id
    service.take_before(chat, turn, str(repo))
    (repo / "a.txt").write_text("edited\n")
    with (repo / "dump.sql").open("wb") as out:  # 2 MB: under the default cap, over the setting
        out.truncate(2 * ck.MB)
    store.mark_interrupted(sid)  # the process died mid-turn
    restarted = TurnCheckpoints(store)
    assert restarted.recover(chat) == [turn]
    (changed,) = restarted.changes(chat.id)
    assert changed.late and changed.files == (ck.FileChange("a.txt", "modified"),)
    assert changed.notice == "not tracked: 1 file over 1 MB (dump.sql)"
    (marker,) = store.markers(chat.id, MARKER_TURN_CHANGES)
    assert marker.data["skipped"]["large"] == ["dump.sql"]


def test_revert_and_rewind_keep_their_safety_copy_with_the_settings_limits(
        store: Store, tmp_path: Path, tolaria_home: Path) -> None:
    """A file the turn created under a raised ``max_file_mb`` (12 MB, over the default 10 MB)
    is held by the revert's safety snapshot too, so the revert goes ahead and Undo gives it
    back; with the defaults the safety copy could not hold it and the revert refused."""
    from tolaria.chats.restore import TurnRestore
    from tolaria.chats.restore_plan import REVERT, YES

    repo = git_repo(tmp_path / "proj", {"a.txt": "a\n"})
    tolaria_home.mkdir(exist_ok=True)
    (tolaria_home / "settings.toml").write_text("[checkpoints]\nmax_file_mb = 20.0\n"
                                                "max_total_mb = 100.0\n")
    service = TurnCheckpoints(store)
    chat = store.create_conversation("c", "demo", str(repo))
    turn = store.start_turn(chat.id, "ai-agent-stream-" + "f" * 32, "demo", "t").id
    service.take_before(chat, turn, str(repo))
    data = b"weights " * (12 * ck.MB // 8)
    (repo / "model.bin").write_bytes(data)
    changed = service.record_after(chat, turn)
    assert changed is not None and changed.files == (ck.FileChange("model.bin", "added"),)
    restore = TurnRestore(service, writers=lambda _repo: [])
    done = restore.run(chat.id, turn, REVERT, ["model.bin"], confirmed=YES)
    assert done.done, done.plan
    assert not (repo / "model.bin").exists()
    undone = restore.undo(chat.id, turn, YES)
    assert undone.done and (repo / "model.bin").read_bytes() == data
