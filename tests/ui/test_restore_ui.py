"""Nothing the user wrote is lost in the window (issue 21.1, 21.6), with a real fake agent editing
a real git repository, the real app and real offscreen widgets:

- the issue's case: the agent edits a.txt and creates new.py, the user adds lines to both;
  Revert file shows what it will do (inline), keeps the user's lines in a.txt, asks before new.py
  goes, and Undo (also after a restart) gives back the exact bytes; screenshots light and dark;
- another chat's agent (this window) and another Tolaria process's agent (``tolaria run``)
  writing in the same repository are said in the rewind's confirm;
- a SIGKILLed window mid-turn: after the restart the turn still lists its files, says it was
  recorded after a restart, and reverting against it asks first."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli.test_cli import Background
from helpers import cli_env, git_repo, sigkill
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel, QPushButton, QWidget
from pytestqt.qtbot import QtBot
from ui.uihelpers import (
    AppDriver,
    StartApp,
    edit_turn,
    processes_of,
    revert_button,
    save_shot,
    window_process,
    window_script,
)
from ui.uihelpers import row_of as changes_row

from tolaria.core.stream_id import new_stream_id
from tolaria.ui import theme
from tolaria.ui.review.turn_changes import TurnChangesRow

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fakes" / "fake_agent.py"
A = "one\ntwo\nthree\nfour\nfive\nsix\n"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "proj", {"a.txt": A})


def row_of(drv: AppDriver, stream_id: str) -> TurnChangesRow:
    row = changes_row(drv, stream_id)
    drv.qtbot.waitUntil(row.toggle.isVisible, timeout=10_000)
    return row


def confirm_button(row: TurnChangesRow) -> QPushButton:
    button = row.confirm.findChild(QPushButton, "restoreConfirmButton")
    assert button is not None
    return button


def shot(drv: AppDriver, tmp_path: Path, name: str) -> None:
    drv.qtbot.wait(150)
    save_shot(drv.window, tmp_path, name)


@pytest.mark.parametrize("look", ["light", "dark"])
def test_revert_file_after_the_users_edits_keeps_them_and_undo_gives_them_back(
        start_app: StartApp, qtbot: QtBot, repo: Path, home: Path, tmp_path: Path,
        look: str) -> None:
    (home / "settings.toml").write_text(f'[appearance]\ntheme = "{look}"\n')
    try:
        drv = start_app(cwd=str(repo))
        agents_a = A.replace("two", "two by the agent")
        stream = edit_turn(drv, "edit a, create new.py", {"a.txt": agents_a,
                                                          "new.py": "print('agent')\n"})
        drv.wait_finished()
        row = row_of(drv, stream)
        row.toggle.click()
        users_a = agents_a + "seven, the user's\n"
        (repo / "a.txt").write_text(users_a)
        (repo / "new.py").write_text("print('agent')\nprint('the user')\n")

        revert_button(row, "new.py").click()
        qtbot.waitUntil(row.confirm.isVisible, timeout=10_000)
        assert row.confirm_title.text() == "Revert new.py?"
        text = row.confirm_label.text()
        assert ("new.py: changed since this turn; deleted (it did not exist then), the later "
                "edits go too") in text
        assert "Undo brings them back" in text
        assert confirm_button(row).text() == "Revert anyway"
        assert (repo / "new.py").exists(), "nothing is written before the yes"
        shot(drv, tmp_path, f"restore-confirm-{look}.png")
        row.confirm.findChild(QPushButton, "restoreCancelButton").click()  # type: ignore[union-attr]
        qtbot.waitUntil(lambda: not row.confirm.isVisible())

        revert_button(row, "a.txt").click()
        qtbot.waitUntil(row.confirm.isVisible, timeout=10_000)
        assert "a.txt: changed since this turn; only this turn's changes are taken out, the " \
               "later edits stay" in row.confirm_label.text()
        assert row.confirm_title.text() == "Revert a.txt?"
        assert confirm_button(row).text() == "Take out this turn's changes"
        confirm_button(row).click()
        qtbot.waitUntil(lambda: (repo / "a.txt").read_text() == A + "seven, the user's\n")
        qtbot.waitUntil(row.undo_button.isVisible)
        assert row.undo_button.text() == "↶ Undo revert of a.txt"
        assert (repo / "new.py").read_text() == "print('agent')\nprint('the user')\n"
        shot(drv, tmp_path, f"restore-undo-{look}.png")
        drv.close()

        again = start_app()  # Undo is kept across restarts
        qtbot.waitUntil(lambda: len(again.pane.turn_views()) == 1)
        back = row_of(again, again.pane.turn_views()[0].stream_id)
        qtbot.waitUntil(back.undo_button.isVisible)
        back.undo_button.click()
        qtbot.waitUntil(lambda: (repo / "a.txt").read_bytes() == users_a.encode())
        qtbot.waitUntil(lambda: not back.undo_button.isVisible())
    finally:
        theme.apply_theme("system")


def test_rewind_says_which_agents_write_in_the_repository(
        start_app: StartApp, qtbot: QtBot, repo: Path, home: Path) -> None:
    drv = start_app(cwd=str(repo))
    first = edit_turn(drv, "edit a", {"a.txt": "by chat one\n"})
    drv.wait_finished()
    row = row_of(drv, first)
    chat_one = drv.pane
    # the same repository: another chat of this window runs, and a `tolaria run` elsewhere
    drv.window.activateWindow()
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: drv.window.current_pane() is not chat_one)
    chat_two = drv.pane
    busy = edit_turn(drv, "busy", {"b.txt": "chat two\n"}, hang=True)
    qtbot.waitUntil(lambda: (repo / "b.txt").exists(), timeout=10_000)
    (home / "adapters").mkdir(exist_ok=True)
    (home / "adapters" / "editor.toml").write_text(
        f'id = "editor"\nprotocol = "claude-stream-json"\n'
        f'command = [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))}, "edit_files", '
        f'"{{prompt}}"]\n')
    sid = new_stream_id()
    env = cli_env(home, FAKE_EDITS=json.dumps({"c.txt": "other process\n"}), FAKE_EDIT_HANG="1")
    other = Background(["run", "--agent", "editor", "--cwd", str(repo), "--stream-id", sid,
                        "elsewhere"], env, repo)
    try:
        other.wait_until(lambda: (repo / "c.txt").exists(), "the other process's edit")
        drv.window.sidebar.select(chat_one.conversation_id)
        qtbot.waitUntil(lambda: drv.window.current_pane() is chat_one)
        row.rewind_button.click()
        qtbot.waitUntil(row.confirm.isVisible, timeout=15_000)
        text = row.confirm_label.text()
        assert "Agent running in this repository: " in text and busy in text, text
        assert chat_two.conversation_id != chat_one.conversation_id
        assert sid in text and str(other.proc.pid) in text, text
        assert (repo / "a.txt").read_text() == "by chat one\n"
        row.confirm.findChild(QPushButton, "restoreCancelButton").click()  # type: ignore[union-attr]
        qtbot.waitUntil(lambda: not row.confirm.isVisible())
    finally:
        # not blocking: the window's own control socket (this loop) must answer too
        abort = subprocess.Popen([sys.executable, "-m", "tolaria", "abort", sid],
                                 env=cli_env(home), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        qtbot.waitUntil(lambda: abort.poll() is not None, timeout=30_000)
        other.finish()
        other.kill()
    drv.button("stopButton", chat_two).click()
    drv.wait_finished(chat_two)


#: The real app: sends a turn to an agent that edits a.txt and hangs, prints its stream id.
EDITING_GUI = window_script('self.controller.send(pane.conversation_id, "edit then hang")',
                            'agent="editor", cwd=sys.argv[1]')


def test_a_sigkilled_window_mid_turn_still_shows_the_turns_files_after_a_restart(
        start_app: StartApp, qtbot: QtBot, repo: Path, home: Path, tmp_path: Path) -> None:
    (home / "adapters").mkdir(exist_ok=True)
    (home / "adapters" / "editor.toml").write_text(
        f'id = "editor"\nprotocol = "claude-stream-json"\n'
        f'command = [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))}, "edit_files", '
        f'"{{prompt}}"]\n')
    def watchdog_ended(stream_id: str) -> None:
        qtbot.waitUntil(lambda: not processes_of(stream_id), timeout=15_000)  # the watchdog

    with window_process(EDITING_GUI, str(repo), cwd=home, after=watchdog_ended,
                        FAKE_EDIT_HANG="1",
                        FAKE_EDITS=json.dumps({"a.txt": "half done by the agent\n"})) as (
                            proc, stream_id):
        qtbot.waitUntil(lambda: (repo / "a.txt").read_text() == "half done by the agent\n",
                        timeout=15_000)
        sigkill(proc)  # no after-snapshot, no shutdown
    assert proc.returncode == -signal.SIGKILL
    (repo / "a.txt").write_text("half done by the agent\nthe user's line, while closed\n")

    drv = start_app()
    qtbot.waitUntil(lambda: len(drv.pane.turn_views()) == 1)
    row = row_of(drv, stream_id)
    assert row.toggle.text() == "▸ 1 file changed"
    qtbot.waitUntil(row.late_label.isVisible)
    row.toggle.click()
    row.toggle_diff("a.txt")  # a hunk's Revert asks first too
    diff = row.diff_view("a.txt")
    assert diff is not None
    qtbot.waitUntil(lambda: len(diff.hunk_blocks()) == 1, timeout=10_000)
    hunk_revert = diff.findChild(QPushButton, "revertHunkButton")
    assert hunk_revert is not None
    hunk_revert.click()
    qtbot.waitUntil(lambda: diff.findChild(QPushButton, "revertHunkConfirmButton") is not None,
                    timeout=10_000)
    asking = diff.findChild(QWidget, "hunkConfirm")
    assert asking is not None
    said = asking.findChild(QLabel, "hunkError")
    assert said is not None and "recorded after a restart" in said.text()
    assert (repo / "a.txt").read_text().endswith("the user's line, while closed\n")
    shot(drv, tmp_path, "restore-late-light.png")
    cancel = diff.findChild(QPushButton, "revertHunkCancelButton")
    assert cancel is not None
    cancel.click()
    qtbot.waitUntil(lambda: diff.findChild(QWidget, "hunkConfirm") is None)
    row.toggle_diff("a.txt")
    revert_button(row, "a.txt").click()
    qtbot.waitUntil(row.confirm.isVisible, timeout=10_000)
    assert "recorded after a restart" in row.confirm_label.text()
    assert (repo / "a.txt").read_text().endswith("the user's line, while closed\n")
    confirm_button(row).click()
    qtbot.waitUntil(lambda: (repo / "a.txt").read_text() == A)
    qtbot.waitUntil(row.undo_button.isVisible)
    row.undo_button.click()
    qtbot.waitUntil(lambda: (repo / "a.txt").read_text().endswith(
        "the user's line, while closed\n"))
