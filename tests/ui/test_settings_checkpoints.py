"""Preferences > Checkpoints (issue 21 item 7): the size and count of each repository's
checkpoints; Prune asks inline and says what goes and what stays; it removes the checkpoints of
deleted chats, and those of older turns still shown only when asked (each such turn gets a note);
files in the work tree, also ones the user changed since, are never touched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import git, git_repo
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, close_preferences, open_preferences
from ui.uihelpers import StartApp, save_shot

from tolaria.chats.checkpoint_storage import PRUNED_NOTE
from tolaria.chats.checkpoints import TurnCheckpoints
from tolaria.core import checkpoints as ck
from tolaria.core.events import Done

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def store_refs(repo: Path) -> list[str]:
    return git(repo, f"--git-dir={ck.store_of(repo)}", "for-each-ref",
               "--format=%(refname)").split()


def test_checkpoints_page_measures_and_prunes(start_app: StartApp, qtbot: QtBot,
                                              tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "proj", {"a.txt": "a\n"})
    drv = start_app(cwd=str(repo))
    store = drv.app.store
    service = TurnCheckpoints(store)
    chats = [store.create_conversation(t, "demo", str(repo)) for t in ("gone", "kept")]
    turns = []
    for n, chat in enumerate(chats):
        stream = f"ai-agent-stream-{n + 1:032x}"
        turn = store.start_turn(chat.id, stream, "demo", "t").id
        service.take_before(chat, turn, str(repo))
        (repo / f"by{n}.txt").write_text(f"{n}\n")
        service.record_after(chat, turn)
        store.append_event(Done(stream))  # the turn ended
        turns.append(turn)
    store.delete_conversation(chats[0].id)  # as an older Tolaria did: its refs stayed
    old = 1_000_000_000  # objects as if written long ago (prune keeps fresh ones)
    for folder, _dirs, files in os.walk(ck.store_of(repo) / "objects"):
        for name in files:
            os.utime(os.path.join(folder, name), (old, old))

    dialog = open_preferences(drv)
    page = dialog.checkpoints
    dialog.tabs.setCurrentWidget(page)
    qtbot.waitUntil(lambda: page.table.rowCount() == 1, timeout=10_000)
    item = page.table.item(0, 0)
    assert item is not None and item.text() == str(repo)
    assert [page.table.item(0, c).text() for c in (2, 3)] == ["4", "2"]  # type: ignore[union-attr]
    save_shot(dialog, tmp_path, "preferences-checkpoints.png")

    (repo / "by1.txt").write_text("the user's edit after the turn\n")
    child(page, QPushButton, "pruneCheckpoints").click()
    qtbot.waitUntil(page.confirm.isVisible, timeout=10_000)
    assert page.confirm_text.text() == ("Removes 2 checkpoints of deleted chats. Kept: 2 of "
                                        "chats still shown.")
    assert len(store_refs(repo)) == 4, "nothing removed before Remove"
    child(page, QPushButton, "pruneRemove").click()
    qtbot.waitUntil(lambda: page.result.text().startswith("Done:"), timeout=10_000)
    assert len(store_refs(repo)) == 2
    qtbot.waitUntil(lambda: page.table.item(0, 3) is not None
                    and page.table.item(0, 3).text() == "0", timeout=10_000)  # type: ignore[union-attr]

    page.older.setChecked(True)
    page.days.setValue(0)
    child(page, QPushButton, "pruneCheckpoints").click()
    qtbot.waitUntil(page.confirm.isVisible, timeout=10_000)
    assert "Revert and Rewind (a note under each says so)" in page.confirm_text.text()
    save_shot(dialog, tmp_path, "preferences-checkpoints-prune.png")
    child(page, QPushButton, "pruneRemove").click()
    qtbot.waitUntil(lambda: store_refs(repo) == [], timeout=10_000)
    qtbot.waitUntil(lambda: page.result.text().startswith("Done:"), timeout=10_000)
    (kept,) = service.changes(chats[1].id)
    assert kept.notice == PRUNED_NOTE and kept.files
    assert (repo / "by1.txt").read_text() == "the user's edit after the turn\n"
    assert (repo / "a.txt").read_text() == "a\n" and (repo / "by0.txt").read_text() == "0\n"
    close_preferences(drv, dialog, qtbot)
