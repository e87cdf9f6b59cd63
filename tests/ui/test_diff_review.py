"""The per-file, per-hunk diff under a turn (issue 18 item 1): a real git repository, a real fake
agent that edits files; clicking a changed file unfolds its diff; Accept marks a hunk reviewed
(and stays so after a restart); Revert undoes just that hunk; a hunk the user changed since says
why it no longer applies and offers Revert file; a long diff scrolls inside."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import fake_manifest, git, git_repo
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QPushButton
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, save_shot

from tolaria.chats.review import MARKER_HUNK_ACCEPTED, MARKER_HUNK_REVERTED
from tolaria.ui.review.diff_review import MAX_HEIGHT, MAX_HUNKS, FileDiffView
from tolaria.ui.review.turn_changes import TurnChangesRow

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ORIGINAL = [f"line {n}" for n in range(1, 41)]


def text_of(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def edited(**changes: str) -> list[str]:
    """ORIGINAL with line N (``l3="..."``) replaced."""
    lines = list(ORIGINAL)
    for key, value in changes.items():
        lines[int(key[1:]) - 1] = value
    return lines


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "proj", {"main.py": text_of(ORIGINAL)})


def edit_turn(drv: AppDriver, edits: dict[str, str | None]) -> str:
    drv.use_agent(fake_manifest("edit_files", env={"FAKE_EDITS": json.dumps(edits)}))
    stream = drv.send("edit")
    drv.wait_finished()
    return stream


def open_diff(drv: AppDriver, stream: str, path: str) -> tuple[TurnChangesRow, FileDiffView]:
    view = drv.pane.transcript.turn(stream)
    assert view is not None
    drv.qtbot.waitUntil(lambda: view.findChild(TurnChangesRow) is not None, timeout=10_000)
    row = view.findChild(TurnChangesRow)
    assert row is not None
    drv.qtbot.waitUntil(row.toggle.isVisible)
    if not row.toggle.isChecked():
        row.toggle.click()
    line = next(r for r in row.file_rows()
                if (lbl := r.findChild(QLabel, "changedFilePath")) and lbl.text() == path)
    label = line.findChild(QLabel, "changedFilePath")
    assert label is not None
    QTest.mouseClick(label, Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    diff = row.diff_view(path)
    assert diff is not None, "a click on the file unfolds its diff"
    drv.qtbot.waitUntil(lambda: diff.review is not None, timeout=10_000)
    return row, diff


def hunk_state(diff: FileDiffView) -> list[tuple[str, list[str]]]:
    """Per hunk: its state label ("" when open) and its buttons."""
    out = []
    for block in diff.hunk_blocks():
        state = block.findChild(QLabel, "hunkState")
        buttons = [b.text() for b in block.findChildren(QPushButton) if b.isVisibleTo(block)]
        out.append((state.text() if state else "", buttons))
    return out


def hunk_button(diff: FileDiffView, index: int, name: str) -> QPushButton:
    button = diff.hunk_blocks()[index].findChild(QPushButton, name)
    assert button is not None, f"hunk {index} has no {name}"
    return button


def test_accept_and_revert_hunks_of_a_turn(start_app: StartApp, qtbot: QtBot, repo: Path,
                                           tmp_path: Path) -> None:
    drv = start_app(cwd=str(repo))
    drv.window.resize(1000, 900)
    after = edited(l3="line 3 by the agent", l30="line 30 by the agent")
    stream = edit_turn(drv, {"main.py": text_of(after), "notes.md": "# Notes\nnew file\n"})
    row, diff = open_diff(drv, stream, "main.py")
    assert hunk_state(diff) == [("", ["Accept", "Revert"]), ("", ["Accept", "Revert"])]
    lines = diff.hunk_blocks()[0].findChild(QPlainTextEdit, "hunkLines")
    assert lines is not None
    shown = lines.toPlainText().splitlines()
    assert "    3       - line 3" in shown and "          3 + line 3 by the agent" in shown, (
        "old and new line numbers in the gutter")

    hunk_button(diff, 0, "acceptHunkButton").click()
    qtbot.waitUntil(lambda: hunk_state(diff)[0] == ("✓ Accepted", ["Revert"]))
    assert (repo / "main.py").read_text() == text_of(after), "Accept changes no file"

    hunk_button(diff, 1, "revertHunkButton").click()
    qtbot.waitUntil(lambda: hunk_state(diff)[1] == ("Reverted", []))
    qtbot.waitUntil(row.undo_button.isVisible)
    assert row.undo_button.text() == "↶ Undo revert of a change in main.py"
    assert (repo / "main.py").read_text() == text_of(edited(l3="line 3 by the agent")), (
        "only that hunk went back")
    _, notes = open_diff(drv, stream, "notes.md")
    assert len(notes.hunk_blocks()) == 1
    qtbot.wait(200)  # let the transcript lay the unfolded diffs out before the screenshot
    save_shot(drv.window, tmp_path, "review.png")
    store, cid = drv.app.store, drv.pane.conversation_id
    assert len(store.markers(cid, MARKER_HUNK_ACCEPTED)) == 1
    assert len(store.markers(cid, MARKER_HUNK_REVERTED)) == 1
    row.undo_button.click()  # the hunk comes back, and its Revert with it
    qtbot.waitUntil(lambda: hunk_state(diff)[1] == ("", ["Accept", "Revert"]))
    assert (repo / "main.py").read_text() == text_of(after)
    hunk_button(diff, 1, "revertHunkButton").click()
    qtbot.waitUntil(lambda: hunk_state(diff)[1] == ("Reverted", []))
    drv.close()

    again = start_app()  # what was accepted and reverted comes back from the store
    qtbot.waitUntil(lambda: len(again.pane.turn_views()) == 1 and not again.pane.transcript.busy)
    _, diff = open_diff(again, again.pane.turn_views()[0].stream_id, "main.py")
    assert hunk_state(diff) == [("✓ Accepted", ["Revert"]), ("Reverted", [])]


def test_a_hunk_changed_since_says_why_and_offers_revert_file(
        start_app: StartApp, qtbot: QtBot, repo: Path) -> None:
    drv = start_app(cwd=str(repo))
    stream = edit_turn(drv, {"main.py": text_of(edited(l3="agent 3", l30="agent 30"))})
    row, diff = open_diff(drv, stream, "main.py")
    users = text_of(edited(l3="the user's 3", l30="agent 30"))
    (repo / "main.py").write_text(users)
    hunk_button(diff, 0, "revertHunkButton").click()
    qtbot.waitUntil(lambda: diff.findChild(QLabel, "hunkError") is not None, timeout=10_000)
    error = diff.findChild(QLabel, "hunkError")
    assert error is not None
    assert error.text() == ("main.py has changed since this turn: that part no longer applies. "
                            "\"Revert whole file…\" first shows what it would do to the later "
                            "edits.")
    assert (repo / "main.py").read_text() == users
    assert hunk_state(diff)[0] == ("", ["Accept", "Revert", "Revert whole file…"])

    whole = diff.findChild(QPushButton, "revertWholeFileButton")
    assert whole is not None
    whole.click()  # not destructive by itself: the row shows the plan and asks
    qtbot.waitUntil(row.confirm.isVisible, timeout=10_000)
    assert "main.py: changed since this turn; put back as it was, the later edits go too" in (
        row.confirm_label.text())
    assert (repo / "main.py").read_text() == users, "nothing written before the yes"
    yes = row.confirm.findChild(QPushButton, "restoreConfirmButton")
    assert yes is not None and yes.text() == "Revert anyway"
    yes.click()
    qtbot.waitUntil(lambda: (repo / "main.py").read_text() == text_of(ORIGINAL))
    qtbot.waitUntil(lambda: [s for s, _ in hunk_state(diff)] == ["Reverted", "Reverted"])
    assert diff.status.text() == "The whole file was put back as it was before this turn."
    qtbot.waitUntil(row.undo_button.isVisible)
    assert row.undo_button.text() == "↶ Undo revert of main.py"
    row.undo_button.click()  # the user's line comes back, byte for byte
    qtbot.waitUntil(lambda: (repo / "main.py").read_text() == users)
    qtbot.waitUntil(lambda: not row.undo_button.isVisible())


def test_a_long_diff_scrolls_inside(start_app: StartApp, qtbot: QtBot, repo: Path) -> None:
    long = [f"{n}" for n in range(2000)]
    (repo / "long.txt").write_text(text_of(long))
    git(repo, "add", "long.txt")
    git(repo, "commit", "-qm", "long")
    drv = start_app(cwd=str(repo))
    big = "".join(f"g{n}\n" for n in range(4000))  # the agent's env holds it: < 128 KiB
    spaced = [f"changed {x}" if int(x) % 20 == 0 else x for x in long]
    stream = edit_turn(drv, {"big.txt": big, "long.txt": text_of(spaced)})
    _, diff = open_diff(drv, stream, "big.txt")
    [block] = diff.hunk_blocks()
    lines = block.findChild(QPlainTextEdit, "hunkLines")
    assert lines is not None
    assert lines.verticalScrollBar().maximum() > 0, "the hunk scrolls inside"
    assert lines.toPlainText().splitlines()[-1] == "… 1000 more lines"
    _, many = open_diff(drv, stream, "long.txt")
    assert many.review is not None and len(many.review.hunks) == 100
    assert len(many.hunk_blocks()) == MAX_HUNKS, "built in batches"
    assert diff.scroller.height() <= MAX_HEIGHT and many.scroller.height() == MAX_HEIGHT
    assert many.scroller.verticalScrollBar().maximum() > 0, "the file's hunks scroll inside"
    lots = [f"edited {x}" if int(x) % 8 == 0 else x for x in long]
    stream = edit_turn(drv, {"long.txt": text_of(lots)})
    _, capped = open_diff(drv, stream, "long.txt")
    assert capped.review is not None and len(capped.review.hunks) > MAX_HUNKS
    total = len(capped.review.hunks)
    assert len(capped.hunk_blocks()) == MAX_HUNKS
    assert capped.more_button.isVisibleTo(capped)
    assert capped.more_button.text() == f"Show {MAX_HUNKS} more of {total - MAX_HUNKS} changes"
    while capped.more_button.isVisibleTo(capped):
        capped.more_button.click()
    assert len(capped.hunk_blocks()) == total
    qtbot.wait(50)  # painted without freezing: the window still answers
    assert drv.pane.composer.isEnabled()
