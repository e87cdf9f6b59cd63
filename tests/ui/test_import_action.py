"""File → "Import sessions from CLIs…" (issue 18 item 2, the window's twin of ``tolaria import``):
the real files the five CLIs wrote (tests/fixtures/sessions) under a temporary HOME; the import
runs off the GUI thread, the sidebar shows the new chats, an inline report says what came from
where and which files were skipped and why; running it again adds nothing."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from chats.test_importing import AGENTS, SESSIONS, grow_qwen_session
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp

from tolaria.chats.importing import ImportReport, import_sessions
from tolaria.core.store.db import Store
from tolaria.qt import session_import
from tolaria.ui.window.actions import plain_text


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME with every CLI's captured files, as a user of all five would have it."""
    target = tmp_path / "home"
    for agent in AGENTS:
        shutil.copytree(SESSIONS / agent, target, dirs_exist_ok=True)
    broken = target / ".claude" / "projects" / "-broken"
    broken.mkdir(parents=True)
    (broken / "garbage.jsonl").write_text("not json\n{\"also\": \n")
    monkeypatch.setenv("HOME", str(target))
    return target


def test_import_from_the_file_menu_fills_the_sidebar_and_reports_inline(
        start_app: StartApp, qtbot: QtBot, cli_home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[threading.Thread] = []
    real = import_sessions

    def recorded(store: Store, home: Path) -> ImportReport:
        threads.append(threading.current_thread())
        return real(store, home)

    monkeypatch.setattr(session_import, "import_sessions", recorded)
    drv = start_app()
    window = drv.window
    action = window.import_action
    file_menu = window.menuBar().actions()[0].menu()
    assert isinstance(file_menu, QMenu) and action in file_menu.actions()
    assert action in window.registry.actions(), "in the command palette too"
    assert plain_text(action) == "Import sessions from CLIs"
    before = len(window.sidebar.ids())

    action.trigger()
    bar = window.import_report
    assert bar.isVisible() and bar.headline.text().startswith("Importing sessions from Claude")
    assert QApplication.activeModalWidget() is None, "nothing modal"
    qtbot.waitUntil(lambda: not bar.running, timeout=20_000)
    assert bar.headline.text() == (
        "5 chats imported: 1 from Claude Code, 1 from Codex, 1 from Gemini CLI, 1 from Qwen "
        "Code, 1 from opencode · 1 file skipped")
    assert bar.details.isVisible()
    assert bar.details.text().startswith(
        "Skipped ~/.claude/projects/-broken/garbage.jsonl: ")
    assert len(window.sidebar.ids()) == before + 5
    assert threads and threads[0] is not threading.main_thread(), "off the GUI thread"
    window.resize(1000, 600)
    qtbot.wait(50)
    assert window.grab().save(str(tmp_path / "import.png"))
    stored = {c.agent for c in drv.app.store.list_conversations()}
    assert set(AGENTS) <= stored

    window.command_palette.open_with([action])  # the palette runs the same action
    window.command_palette.close()
    action.trigger()
    qtbot.waitUntil(lambda: not bar.running, timeout=20_000)
    assert bar.headline.text() == (
        "Nothing new to import · 5 sessions already here, 1 file skipped")
    assert len(window.sidebar.ids()) == before + 5, "re-importing adds nothing"
    bar.close_button.click()
    assert not bar.isVisible()


def test_a_home_that_is_not_a_folder_says_so(start_app: StartApp, qtbot: QtBot,
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "gone"))
    drv = start_app()
    drv.window.import_action.trigger()
    bar = drv.window.import_report
    qtbot.waitUntil(lambda: not bar.running, timeout=10_000)
    assert bar.headline.text() == f"Import failed: {tmp_path / 'gone'} is not a folder"


def test_a_second_import_shows_its_new_turn_in_the_chat_already_open(
        start_app: StartApp, qtbot: QtBot, cli_home: Path) -> None:
    """The chat a session was imported into is open when the CLI's session grows and the import
    runs again: the open view shows the new turn without being reopened."""
    drv = start_app()
    window, store = drv.window, drv.app.store
    bar = window.import_report
    window.import_action.trigger()
    qtbot.waitUntil(lambda: not bar.running, timeout=20_000)
    [chat] = [c for c in store.list_conversations() if c.agent == "qwen"]
    window.open_conversation(chat.id)
    pane = window.stack.pane(chat.id)
    assert pane is not None
    qtbot.waitUntil(lambda: len(pane.transcript.turns()) == 2, timeout=5_000)

    grow_qwen_session(cli_home, "a third question")
    window.import_action.trigger()
    qtbot.waitUntil(lambda: not bar.running, timeout=20_000)
    assert bar.headline.text().startswith("1 chat")
    newest = store.turns(chat.id)[-1]
    assert newest.prompt == "a third question"
    qtbot.waitUntil(lambda: pane.transcript.turn(newest.stream_id) is not None, timeout=5_000)
    assert [t.stream_id for t in store.turns(chat.id)] == [
        v.stream_id for v in pane.transcript.turns()], "every turn once, in order"
    assert window.stack.pane(chat.id) is pane, "the same view, not a reopened one"
