"""Revert / Rewind / Undo never lose the user's work (issue 21.1), on real git repositories, real
files and a real store: edits made after a turn, files created after it, a submodule bump, a file
that became a folder, Undo with exact bytes (and after a restart), all-or-nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import git, git_repo

from tolaria.chats.checkpoints import TurnCheckpoints
from tolaria.chats.restore import RestoreInputError, TurnRestore
from tolaria.chats.restore_plan import DELETE, MERGE, RESTORE, REVERT, REWIND, YES
from tolaria.chats.review import REVERT as REVIEW_REVERT
from tolaria.chats.review import ReviewRequest, TurnReview, hunk_key
from tolaria.core import restore as core_restore
from tolaria.core.checkpoints import CheckpointError
from tolaria.core.store.db import Conversation, Store

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

A = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "proj", {"a.txt": A, "keep.txt": "k\n"})


def turn(service: TurnCheckpoints, chat: Conversation, edits: dict[str, str | None],
         cwd: Path) -> int:
    """One turn that makes ``edits`` (path -> text, None deletes), snapshotted around it."""
    store = service.store
    n = len(store.turns(chat.id)) + 1
    turn_id = store.start_turn(chat.id, f"ai-agent-stream-r{chat.id}x{n}", "demo", f"t{n}").id
    service.take_before(chat, turn_id, str(cwd))
    for path, text in edits.items():
        target = cwd / path
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    assert service.record_after(chat, turn_id) is not None
    return turn_id


def no_writers(_repo: Path) -> list[str]:
    return []


def test_revert_file_keeps_the_users_later_lines_and_asks_for_a_file_it_created(
        store: Store, repo: Path) -> None:
    """The issue's case: the agent edits a.txt and creates new.py, the user adds lines to
    both; Revert file must not lose them."""
    service = TurnCheckpoints(store)
    restore = TurnRestore(service, writers=no_writers)
    chat = store.create_conversation("c", "demo", str(repo))
    t1 = turn(service, chat, {"a.txt": A.replace("two", "TWO by agent"),
                              "new.py": "print('agent')\n"}, repo)
    user_a = A.replace("two", "TWO by agent") + "nine by the user\n"
    (repo / "a.txt").write_text(user_a)
    (repo / "new.py").write_text("print('agent')\nprint('user')\n")

    # a.txt: a yes is needed (the file changed since); the merge takes out the agent's line only
    asked = restore.run(chat.id, t1, REVERT, ["a.txt"])
    assert not asked.done and asked.plan.needs_confirm
    (line,) = asked.plan.files
    assert (line.path, line.action, line.later) == ("a.txt", MERGE, "changed since this turn")
    assert (repo / "a.txt").read_text() == user_a, "nothing written before the yes"
    done = restore.run(chat.id, t1, REVERT, ["a.txt"], confirmed=asked.plan.fingerprint)
    assert done.done and done.files == ("a.txt",)
    assert (repo / "a.txt").read_text() == A + "nine by the user\n"

    # new.py: created by the turn, edited since: the plan says the user's lines would go too
    asked = restore.run(chat.id, t1, REVERT, ["new.py"])
    assert not asked.done
    (line,) = asked.plan.files
    assert (line.action, line.later) == (DELETE, "changed since this turn")
    assert "the later edits go too" in "\n".join(asked.plan.lines())
    assert (repo / "new.py").read_text() == "print('agent')\nprint('user')\n"
    assert restore.run(chat.id, t1, REVERT, ["new.py"], confirmed=YES).done
    assert not (repo / "new.py").exists()

    # Undo (the last restore first) gives back the exact bytes, also in a new process' store
    assert restore.undo(chat.id).done
    assert (repo / "new.py").read_bytes() == b"print('agent')\nprint('user')\n"
    again = TurnRestore(TurnCheckpoints(store), writers=no_writers)
    assert again.undo(chat.id).done
    assert (repo / "a.txt").read_text() == user_a
    with pytest.raises(RestoreInputError, match="nothing to undo"):
        again.undo(chat.id)
    (changes,) = service.changes(chat.id)
    assert changes.reverted == frozenset() and changes.undo == ""


def test_a_clean_revert_goes_at_once_and_undo_checks_nothing_changed_since(
        store: Store, repo: Path) -> None:
    service = TurnCheckpoints(store)
    restore = TurnRestore(service, writers=no_writers)
    chat = store.create_conversation("c", "demo", str(repo))
    t1 = turn(service, chat, {"a.txt": "agent\n"}, repo)
    done = restore.run(chat.id, t1, REVERT, ["a.txt"])
    assert done.done and (repo / "a.txt").read_text() == A
    (changes,) = service.changes(chat.id)
    assert changes.reverted == {"a.txt"} and changes.undo == "revert of a.txt"
    (repo / "a.txt").write_text("the user's new text\n")  # edited after the revert
    asked = restore.undo(chat.id)
    assert not asked.done and asked.plan.files[0].later == "changed since the revert"
    assert (repo / "a.txt").read_text() == "the user's new text\n"
    assert restore.undo(chat.id, confirmed=asked.plan.fingerprint).done
    assert (repo / "a.txt").read_text() == "agent\n"


def test_rewind_restores_only_the_turns_files_in_the_chats_folder(
        store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "mono", {"app/a.txt": A, "other/o.txt": "o\n"})
    service = TurnCheckpoints(store)
    restore = TurnRestore(service, writers=no_writers)
    chat = store.create_conversation("c", "demo", str(repo / "app"))
    t1 = turn(service, chat, {"app/a.txt": "agent 1\n", "app/made.txt": "by agent\n",
                              "other/o.txt": "agent outside\n"}, repo)
    t2 = turn(service, chat, {"app/b.txt": "turn 2\n"}, repo)
    assert t2 > t1
    (repo / "app" / "mine.txt").write_text("created by the user after the turn\n")
    (repo / "app" / "b.txt").write_text("turn 2\nthe user's line\n")

    asked = restore.run(chat.id, t1, REWIND)
    assert not asked.done, "a rewind always asks"
    plan = asked.plan
    assert {(f.path, f.action, f.later) for f in plan.files} == {
        ("app/a.txt", RESTORE, ""), ("app/made.txt", DELETE, ""),
        ("app/b.txt", DELETE, "changed since turn 2")}
    assert plan.kept == ("app/mine.txt",)
    assert plan.outside == ("other/o.txt",)
    assert restore.run(chat.id, t1, REWIND, confirmed=plan.fingerprint).done
    assert (repo / "app" / "a.txt").read_text() == A
    assert not (repo / "app" / "made.txt").exists() and not (repo / "app" / "b.txt").exists()
    assert (repo / "app" / "mine.txt").exists(), "a file created after the turn is never deleted"
    assert (repo / "other" / "o.txt").read_text() == "agent outside\n", "outside the chat folder"
    assert [c.rewound for c in service.changes(chat.id)] == [True, True]

    assert restore.undo(chat.id).done
    assert (repo / "app" / "b.txt").read_text() == "turn 2\nthe user's line\n"
    assert (repo / "app" / "made.txt").read_text() == "by agent\n"
    assert [c.rewound for c in service.changes(chat.id)] == [False, False]


def test_a_stale_yes_shows_the_plan_again(store: Store, repo: Path) -> None:
    service = TurnCheckpoints(store)
    restore = TurnRestore(service, writers=no_writers)
    chat = store.create_conversation("c", "demo", str(repo))
    t1 = turn(service, chat, {"a.txt": "agent\n"}, repo)
    asked = restore.run(chat.id, t1, REWIND)
    (repo / "a.txt").write_text("typed while the confirm was shown\n")
    again = restore.run(chat.id, t1, REWIND, confirmed=asked.plan.fingerprint)
    assert not again.done and again.plan.stale
    assert again.plan.files[0].later
    assert (repo / "a.txt").read_text() == "typed while the confirm was shown\n"


def test_a_submodule_bump_or_a_file_turned_folder_stops_the_rewind_before_anything(
        store: Store, tmp_path: Path) -> None:
    sub = git_repo(tmp_path / "sub", {"s.txt": "1\n"})
    repo = git_repo(tmp_path / "proj", {"a.txt": A, "f.txt": "file\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "m")
    git(repo, "commit", "-qm", "sub")
    service = TurnCheckpoints(store)
    restore = TurnRestore(service, writers=no_writers)
    chat = store.create_conversation("c", "demo", str(repo))
    n = store.start_turn(chat.id, "ai-agent-stream-sub1", "demo", "bump").id
    service.take_before(chat, n, str(repo))
    (repo / "a.txt").write_text("agent\n")
    (repo / "m" / "s.txt").write_text("2\n")
    git(repo / "m", "commit", "-qam", "bump")
    assert service.record_after(chat, n) is not None
    assert {f.path for f in service.changes(chat.id)[0].files} == {"a.txt", "m"}
    result = restore.run(chat.id, n, REWIND, confirmed=YES)
    assert not result.done
    (blocked,) = result.plan.blocked
    assert blocked.path == "m" and "submodule" in blocked.blocker
    assert (repo / "a.txt").read_text() == "agent\n", "nothing changed: all or nothing"
    assert "cannot be restored" in result.plan.lines()[0]

    t2 = turn(service, chat, {"f.txt": "agent edit\n"}, repo)
    (repo / "f.txt").unlink()
    (repo / "f.txt").mkdir()
    (repo / "f.txt" / "inside").write_text("user data\n")
    result = restore.run(chat.id, t2, REVERT, confirmed=YES)
    assert not result.done and "is a folder now" in result.plan.blocked[0].blocker
    assert (repo / "f.txt" / "inside").read_text() == "user data\n"


def test_a_turn_recorded_after_a_restart_asks_before_a_hunk_goes(
        store: Store, repo: Path) -> None:
    """Item 6: the before-snapshot is stored at once; the process dies mid-turn; the next start
    records the after-state (it may hold the user's edits): marked late, every revert asks."""
    service = TurnCheckpoints(store)
    chat = store.create_conversation("c", "demo", str(repo))
    sid = "ai-agent-stream-late1"
    turn_id = store.start_turn(chat.id, sid, "demo", "t").id
    service.take_before(chat, turn_id, str(repo))
    (repo / "a.txt").write_text(A.replace("two", "agent's two"))
    store.mark_interrupted(sid)  # what opening the store after a crash does
    restarted = TurnCheckpoints(store)  # a new process: nothing in memory
    assert restarted.recover(chat, live={sid}) == [], "a stream still live elsewhere waits"
    assert restarted.recover(chat) == [turn_id]
    assert restarted.recover(chat) == [], "once"
    (changes,) = restarted.changes(chat.id)
    assert changes.late and [f.path for f in changes.files] == ["a.txt"]

    review = TurnReview(restarted)
    shown = review.handle_now(chat.id, ReviewRequest(turn_id, "a.txt"))
    (hunk,) = shown.hunks
    asked = review.handle_now(chat.id, ReviewRequest(turn_id, "a.txt", REVIEW_REVERT,
                                                     hunk_key(hunk)))
    assert asked.confirm_hunk == hunk_key(hunk) and "recorded after a restart" in asked.confirm
    assert (repo / "a.txt").read_text() == A.replace("two", "agent's two")
    done = review.handle_now(chat.id, ReviewRequest(turn_id, "a.txt", REVIEW_REVERT,
                                                    hunk_key(hunk), confirmed=asked.confirm_key))
    assert done.reverted == {hunk_key(hunk)} and (repo / "a.txt").read_text() == A
    assert TurnRestore(restarted, writers=no_writers).undo(chat.id).done
    assert (repo / "a.txt").read_text() == A.replace("two", "agent's two")
    again = review.handle_now(chat.id, ReviewRequest(turn_id, "a.txt"))
    assert again.reverted == frozenset(), "the undone revert no longer counts"


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_working_tree_hashes_match_git_in_either_object_format(
        tmp_path: Path, object_format: str) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", f"--object-format={object_format}")
    (repo / "bin.dat").write_bytes(bytes(range(256)) * 3)
    (repo / "link").symlink_to("bin.dat")
    state = core_restore.state_now(repo, "bin.dat")
    assert state.sha == git(repo, "hash-object", "--no-filters", "bin.dat").strip()
    link = core_restore.state_now(repo, "link")
    assert link.kind == core_restore.LINK and link.mode == "120000"
    assert core_restore.state_now(repo, "bin.dat/under").kind == core_restore.UNDER_FILE
    with pytest.raises(CheckpointError, match="outside the working tree"):
        core_restore.state_now(repo, "../escape")


def test_a_folder_turned_symlink_out_of_the_repo_blocks_the_revert(
        store: Store, repo: Path, tmp_path: Path) -> None:
    service = TurnCheckpoints(store)
    restore = TurnRestore(service, writers=no_writers)
    chat = store.create_conversation("c", "demo", str(repo))
    t1 = turn(service, chat, {"sub/x.txt": "agent\n"}, repo)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.rmtree(repo / "sub")
    (repo / "sub").symlink_to(outside)
    (outside / "x.txt").write_text("not the repository's\n")
    result = restore.run(chat.id, t1, REVERT, confirmed=YES)
    assert not result.done and "outside the working tree" in result.plan.blocked[0].blocker
    assert (outside / "x.txt").read_text() == "not the repository's\n"
