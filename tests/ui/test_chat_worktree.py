"""A new git worktree per chat, from the window (issue 18 item 1): File → "New chat in a git
worktree" on a real repository makes the worktree on its own branch and the chat works there (a
real fake agent edits a file in it, the user's checkout untouched); deleting the chat asks
inline whether to remove the worktree too; git's refusal over uncommitted work is said and the
files stay; a clean worktree goes, its branch stays."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import fake_manifest, git, git_repo
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "proj", {"a.txt": "original\n"})


def new_worktree_chat(drv: AppDriver, qtbot: QtBot, repo: Path) -> tuple[int, Path]:
    before = set(drv.window.sidebar.ids())
    drv.window.new_worktree_action.trigger()
    qtbot.waitUntil(lambda: set(drv.window.sidebar.ids()) - before != set(), timeout=10_000)
    [chat] = set(drv.window.sidebar.ids()) - before
    worktree = repo.parent / f"proj-tolaria-{chat}"
    assert drv.stored_conversation(chat).cwd == str(worktree), "shown once it works there"
    return chat, worktree


def delete_with_worktree(drv: AppDriver, qtbot: QtBot, chat: int, worktree: Path) -> None:
    sidebar = drv.window.sidebar
    sidebar.select(chat)
    sidebar.list.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is sidebar.list)
    sidebar.delete_action.trigger()
    confirm = sidebar.confirm
    assert confirm.isVisible() and confirm.remove_worktree.isVisible()
    assert str(worktree) in confirm.remove_worktree.text()
    assert not confirm.remove_worktree.isChecked(), "kept unless the user says so"
    confirm.remove_worktree.setChecked(True)
    confirm.accept_button.click()
    qtbot.waitUntil(lambda: chat not in sidebar.ids())


def test_a_chat_in_its_own_worktree_and_removing_it(start_app: StartApp, qtbot: QtBot,
                                                    repo: Path) -> None:
    drv = start_app(cwd=str(repo))
    chat, worktree = new_worktree_chat(drv, qtbot, repo)
    bar = drv.window.import_report
    assert bar.headline.text() == (f"The new chat works in {worktree} on its own branch "
                                   f"tolaria/chat-{chat}")
    assert drv.window.current_conversation_id() == chat
    qtbot.waitUntil(lambda: drv.window.header.folder_button.text() == worktree.name)
    drv.use_agent(fake_manifest("edit_files",
                                env={"FAKE_EDITS": json.dumps({"a.txt": "the agent's\n"})}))
    drv.send("edit")
    drv.wait_finished()
    assert (worktree / "a.txt").read_text() == "the agent's\n"
    assert (repo / "a.txt").read_text() == "original\n", "the user's checkout is untouched"
    assert git(repo, "status", "--porcelain") == ""

    delete_with_worktree(drv, qtbot, chat, worktree)
    qtbot.waitUntil(lambda: bar.headline.text().startswith("Kept the worktree"), timeout=10_000)
    assert bar.headline.text() == (f"Kept the worktree {worktree}: it has uncommitted or "
                                   "untracked files (commit or move them, then remove it)")
    assert (worktree / "a.txt").read_text() == "the agent's\n", "uncommitted work never lost"

    clean, clean_tree = new_worktree_chat(drv, qtbot, repo)
    delete_with_worktree(drv, qtbot, clean, clean_tree)
    qtbot.waitUntil(lambda: bar.headline.text().startswith("Removed"), timeout=10_000)
    assert not clean_tree.exists()
    assert bar.headline.text() == (f"Removed the worktree {clean_tree}; its branch "
                                   f"tolaria/chat-{clean} is kept")
    assert git(repo, "branch", "--list", f"tolaria/chat-{clean}").strip()


def test_outside_git_the_new_chat_stays_in_its_folder_and_says_why(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    drv = start_app(cwd=str(plain))
    before = set(drv.window.sidebar.ids())
    drv.window.new_worktree_action.trigger()
    bar = drv.window.import_report
    assert bar.headline.text() == "Making a git worktree for the new chat…"
    qtbot.waitUntil(lambda: bar.headline.text().startswith("The new chat"), timeout=10_000)
    assert bar.headline.text() == (f"The new chat works in {plain}: {plain} is not inside a "
                                   "git repository: no worktree made")
    [chat] = set(drv.window.sidebar.ids()) - before
    assert drv.stored_conversation(chat).cwd == str(plain)
    drv.window.sidebar.select(chat)
    drv.window.sidebar.list.setFocus()
    drv.window.sidebar.delete_action.trigger()
    assert not drv.window.sidebar.confirm.remove_worktree.isVisible(), "no worktree to offer"
