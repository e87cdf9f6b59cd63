"""Checkpoints wired into turns (issue 18 item 1): a real git repository, a real fake agent that
edits files in its working folder; the window lists what each turn changed, reverts a file,
rewinds to before a turn (inline confirm) and marks the later turns rewound; non-git folders are
said so once; deleting the chat deletes its refs."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import git, git_repo
from PySide6.QtWidgets import QLabel, QPushButton
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp, edit_turn, processes_of, revert_button, row_of

from tolaria.chats.checkpoints import (
    MARKER_TURN_CHANGES,
    MARKER_TURNS_REWOUND,
    NOT_GIT,
    UndoRequest,
)
from tolaria.core import checkpoints as ck
from tolaria.ui.review.turn_changes import TurnChangesRow

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "proj", {"a.txt": "original a\n", "keep.txt": "keep me\n"})


def user_state(repo: Path) -> tuple[str, str, str]:
    return (git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
            git(repo, "branch", "-a"), git(repo, "stash", "list"))


def files_of(row: TurnChangesRow) -> list[tuple[str, str, str]]:
    """(badge, path, revert button text) per listed file."""
    out = []
    for file_row in row.file_rows():
        badge = file_row.findChild(QLabel, "changedFileStatus")
        path = file_row.findChild(QLabel, "changedFilePath")
        button = file_row.findChild(QPushButton, "revertFileButton")
        assert badge is not None and path is not None and button is not None
        out.append((badge.text(), path.text(), button.text()))
    return out


def test_changed_files_revert_and_rewind_in_a_git_folder(
        start_app: StartApp, qtbot: QtBot, repo: Path) -> None:
    clean = user_state(repo)
    drv = start_app(cwd=str(repo))
    first = edit_turn(drv, "change things", {"a.txt": "agent's a\n", "new.txt": "new\n",
                                             "keep.txt": None})
    drv.wait_finished()
    row = row_of(drv, first)
    qtbot.waitUntil(lambda: row.toggle.isVisible())
    assert row.toggle.text() == "▸ 3 files changed"
    row.toggle.click()
    assert row.files.isVisible()
    assert files_of(row) == [("M", "a.txt", "Revert file"), ("D", "keep.txt", "Revert file"),
                             ("A", "new.txt", "Revert file")]

    revert_button(row, "keep.txt").click()
    qtbot.waitUntil(lambda: (repo / "keep.txt").exists())
    assert (repo / "keep.txt").read_text() == "keep me\n"
    qtbot.waitUntil(lambda: ("D", "keep.txt", "Reverted") in files_of(row))
    assert (repo / "a.txt").read_text() == "agent's a\n", "only that file went back"

    second = edit_turn(drv, "more", {"b.txt": "b\n", "a.txt": "second a\n"})
    drv.wait_finished()
    later = row_of(drv, second)
    qtbot.waitUntil(lambda: later.toggle.text() == "▸ 2 files changed")

    row.rewind_button.click()  # planned, then an inline confirm, no dialog
    qtbot.waitUntil(row.confirm.isVisible)
    assert row.confirm_title.text() == "Rewind to before this turn?"
    text = row.confirm_label.text()
    assert "• a.txt: put back as it was" in text and "• b.txt: deleted" in text, text
    assert (repo / "b.txt").exists(), "nothing written before the yes"
    confirm = row.confirm.findChild(QPushButton, "restoreConfirmButton")
    assert confirm is not None and confirm.text() == "Rewind"
    confirm.click()
    qtbot.waitUntil(lambda: row.rewound_label.isVisible() and later.rewound_label.isVisible())
    assert (repo / "a.txt").read_text() == "original a\n"
    assert (repo / "keep.txt").read_text() == "keep me\n"
    assert not (repo / "new.txt").exists() and not (repo / "b.txt").exists()
    assert user_state(repo) == clean, "the user's index, branches and stash are untouched"
    assert not row.rewind_button.isVisible()
    store, cid = drv.app.store, drv.pane.conversation_id
    (rewound,) = store.markers(cid, MARKER_TURNS_REWOUND)
    assert rewound.data["turn_ids"] == [t.id for t in store.turns(cid)]
    drv.close()

    again = start_app()  # the rows come back from the store, rewound labels included
    pane = again.pane
    qtbot.waitUntil(lambda: len(pane.turn_views()) == 2 and not pane.transcript.busy)
    rows = [row_of(again, v.stream_id) for v in pane.turn_views()]
    assert [r.toggle.text() for r in rows] == ["▸ 3 files changed", "▸ 2 files changed"]
    assert all(r.rewound_label.isVisible() for r in rows)


def test_a_stopped_turn_records_its_changes_and_undo_waits_for_no_turn(
        start_app: StartApp, qtbot: QtBot, repo: Path) -> None:
    drv = start_app(cwd=str(repo))
    stream = edit_turn(drv, "edit then hang", {"a.txt": "half done\n"}, hang=True)
    qtbot.waitUntil(lambda: (repo / "a.txt").read_text() == "half done\n", timeout=10_000)
    drv.button("stopButton").click()
    turn = drv.wait_finished()
    assert turn.status == "cancelled"
    row = row_of(drv, stream)
    qtbot.waitUntil(lambda: row.toggle.text() == "▸ 1 file changed")
    marks = drv.app.store.markers(drv.pane.conversation_id, MARKER_TURN_CHANGES)
    assert [m.data["files"] for m in marks] == [[["a.txt", "modified"]]]

    hanging = edit_turn(drv, "busy", {}, hang=True)
    qtbot.waitUntil(lambda: not row.rewind_button.isEnabled())
    assert drv.pane.running_stream == hanging
    assert not drv.app.controller.undo(drv.pane.conversation_id, object()), "not a request"
    turn_id = drv.stored_turn(stream).id
    assert not drv.app.controller.undo(drv.pane.conversation_id, UndoRequest(turn_id)), (
        "refused while a turn runs")
    drv.button("stopButton").click()
    drv.wait_finished()
    assert (repo / "a.txt").read_text() == "half done\n"
    qtbot.waitUntil(row.rewind_button.isEnabled)


def test_a_folder_outside_git_says_so_once_and_offers_nothing(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    drv = start_app(cwd=str(plain))
    first = edit_turn(drv, "one", {"x.txt": "x\n"})
    drv.wait_finished()
    row = row_of(drv, first)
    qtbot.waitUntil(row.note.isVisible)
    assert row.note.text() == NOT_GIT
    assert not row.toggle.isVisible() and not row.rewind_button.isVisible()
    second = edit_turn(drv, "two", {"y.txt": "y\n"})
    drv.wait_finished()
    qtbot.wait(300)
    view = drv.pane.transcript.turn(second)
    assert view is not None
    later = view.findChild(TurnChangesRow)
    assert later is None or not later.isVisible(), "said once per chat"


def test_deleting_the_chat_deletes_its_refs(start_app: StartApp, qtbot: QtBot, repo: Path
                                            ) -> None:
    drv = start_app(cwd=str(repo))
    edit_turn(drv, "change", {"a.txt": "changed\n"})
    drv.wait_finished()
    store = f"--git-dir={ck.store_of(repo)}"  # Tolaria's checkpoint store of the repository
    qtbot.waitUntil(lambda: git(repo, store, "for-each-ref", "refs/tolaria").count("\n") == 2)
    drv.app.controller.delete(drv.pane.conversation_id)
    qtbot.waitUntil(lambda: git(repo, store, "for-each-ref", "refs/tolaria") == "",
                    timeout=10_000)
    assert (repo / "a.txt").read_text() == "changed\n", "deleting a chat never touches files"


def test_a_stop_during_the_before_snapshot_never_starts_the_agent(
        start_app: StartApp, qtbot: QtBot, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_snapshot = ck.snapshot
    started = threading.Event()

    def slow_snapshot(folder: Path, ref: str, **limits: Any) -> ck.Checkpoint:
        started.set()
        time.sleep(1.0)  # a big working tree: the agent must wait for it
        return real_snapshot(folder, ref, **limits)

    monkeypatch.setattr(ck, "snapshot", slow_snapshot)
    drv = start_app(cwd=str(repo))
    stream = edit_turn(drv, "never runs", {"made.txt": "x\n"})
    qtbot.waitUntil(started.is_set)
    drv.button("stopButton").click()
    turn = drv.wait_finished()
    assert turn.status == "cancelled"
    assert processes_of(stream) == []
    qtbot.wait(300)
    assert not (repo / "made.txt").exists(), "the agent never started"
    assert drv.stored_turn(stream).status == "cancelled"
