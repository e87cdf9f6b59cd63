"""The composer's @-mention picker and / menu in the real window, driven by real key events
(issue 26 items 3 and 4), with a real git repository as the chat's folder."""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.chats.mentions import listing
from tolaria.chats.mentions.cache import IndexCache
from tolaria.qt.mention_source import MentionSource
from tolaria.ui.composer.assist import ComposerAssist
from tolaria.ui.composer.composer import Composer


@pytest.fixture
def repo() -> Path:
    """The test's working folder (tests/ui/conftest.py) as a git repository."""
    folder = Path.cwd()
    subprocess.run(["git", "init", "-q"], check=True)
    (folder / ".gitignore").write_text("*.log\n")
    (folder / "src" / "ui").mkdir(parents=True)
    (folder / "src" / "composer.py").write_text("x")
    (folder / "src" / "ui" / "picker.py").write_text("x")
    (folder / "README.md").write_text("x")
    (folder / "debug.log").write_text("x")
    subprocess.run(["git", "add", "src", ".gitignore"], check=True)
    return folder


def typed(qtbot: QtBot, drv: AppDriver, text: str) -> None:
    QTest.keyClicks(drv.pane.composer, text)


def test_at_opens_the_picker_and_enter_inserts_a_mention(
        start_app: Callable[..., AppDriver], qtbot: QtBot, repo: Path) -> None:
    drv = start_app()
    pane = drv.pane
    pane.composer.setFocus()
    typed(qtbot, drv, "fix @")
    assist = pane.assist
    qtbot.waitUntil(lambda: assist.list.isVisible() and bool(assist.list.rows()))
    typed(qtbot, drv, "compy")
    rows = assist.list.rows()
    assert rows[0].value == "src/composer.py" and rows[0].detail == "src"
    assert all(r.value != "debug.log" for r in assist.list.rows())
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    assert pane.composer.toPlainText() == "fix @src/composer.py "
    assert not assist.list.isVisible() and drv.pane.running_stream is None  # not sent
    # Tab goes into a folder, Enter then takes a file in it.
    typed(qtbot, drv, "@ui")
    qtbot.waitUntil(lambda: assist.list.isVisible())
    assert assist.list.current_row() is not None
    assert assist.list.current_row().value == "src/ui/"  # type: ignore[union-attr]
    QTest.keyClick(pane.composer, Qt.Key.Key_Tab)
    assert pane.composer.toPlainText().endswith("@src/ui/")
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    assert pane.composer.toPlainText() == "fix @src/composer.py @src/ui/picker.py "
    # Backspace after a mention removes all of it, like a chip.
    QTest.keyClick(pane.composer, Qt.Key.Key_Backspace)  # the space
    QTest.keyClick(pane.composer, Qt.Key.Key_Backspace)
    assert pane.composer.toPlainText() == "fix @src/composer.py "


def test_esc_closes_the_picker_without_stopping_and_down_moves(
        start_app: Callable[..., AppDriver], qtbot: QtBot, repo: Path) -> None:
    drv = start_app()
    pane = drv.pane
    pane.composer.setFocus()
    typed(qtbot, drv, "@")
    qtbot.waitUntil(lambda: pane.assist.list.isVisible() and bool(pane.assist.list.rows()))
    first = pane.assist.list.current_row()
    QTest.keyClick(pane.composer, Qt.Key.Key_Down)
    assert pane.assist.list.current_row() != first
    QTest.keyClick(pane.composer, Qt.Key.Key_Escape)
    assert not pane.assist.list.isVisible() and pane.composer.toPlainText() == "@"
    typed(qtbot, drv, "s")  # the same mention: stays closed after Esc
    assert not pane.assist.list.isVisible()
    typed(qtbot, drv, " @")  # a new one opens again
    qtbot.waitUntil(pane.assist.list.isVisible)


def test_a_mention_is_sent_as_typed_to_an_at_agent(
        start_app: Callable[..., AppDriver], qtbot: QtBot, repo: Path) -> None:
    drv = start_app()
    pane = drv.pane
    pane.composer.setFocus()
    typed(qtbot, drv, "read @READ")
    qtbot.waitUntil(lambda: bool(pane.assist.list.rows()))
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)  # the list is closed: this one sends
    view = drv.wait_finished()
    assert view.prompt == "read @README.md "


def test_slash_lists_tolaria_and_claude_commands_and_runs_or_inserts(
        start_app: Callable[..., AppDriver], qtbot: QtBot, repo: Path, home: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    commands = repo / ".claude" / "commands"
    (commands / "git").mkdir(parents=True)
    (commands / "review.md").write_text("---\ndescription: Review the diff\n---\nReview it\n")
    (commands / "git" / "sync.md").write_text("# Pull and rebase\n\nDo it.\n")
    drv = start_app()
    pane = drv.pane
    assist = pane.assist
    assist.set_context(str(repo), "claude", "Claude Code")
    pane.composer.setFocus()
    typed(qtbot, drv, "/")
    assert assist.mode == "slash" and assist.list.isVisible()
    names = [r.text for r in assist.list.rows()]
    assert {"/stop", "/rename", "/export", "/new", "/model", "/clear", "/review", "/git:sync"} \
        <= set(names)
    review = next(r for r in assist.list.rows() if r.text == "/review")
    assert review.detail == "Review the diff" and review.kind == "agent"
    typed(qtbot, drv, "rev")
    assert assist.list.current_row().text == "/review"  # type: ignore[union-attr]
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    assert pane.composer.toPlainText() == "/review "
    pane.composer.clear()
    # One of Tolaria's runs: /rename opens the sidebar's rename editor for this chat.
    with qtbot.waitSignal(pane.command_requested) as seen:
        typed(qtbot, drv, "/renam")
        QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    assert seen.args == [pane.conversation_id, "rename"]
    assert pane.composer.toPlainText() == ""
    count = len(drv.app.store.list_conversations())
    typed(qtbot, drv, "/new")
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(drv.app.store.list_conversations()) == count + 1)


def test_the_window_keeps_answering_while_a_huge_folder_is_listed(
        qtbot: QtBot, qapp: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing runs on a worker: the window's timers keep firing and typing goes on."""
    gate = threading.Event()
    real = listing.list_folder

    def slow(root: str, cancel: object = None, **kw: object) -> listing.Listing:
        gate.wait(10)  # a monorepo that takes its time
        return real(root)

    monkeypatch.setattr("tolaria.chats.mentions.cache.list_folder", slow)
    (tmp_path / "a.py").write_text("x")
    source = MentionSource(IndexCache())
    composer = Composer()
    assist = ComposerAssist(composer, source)
    assist.set_context(str(tmp_path), "codex")
    composer.show()
    qtbot.waitExposed(composer)
    ticks: list[float] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start(10)
    composer.setFocus()
    started = time.monotonic()
    QTest.keyClicks(composer, "@a")
    assert time.monotonic() - started < 1.0
    assert assist.list.isVisible() and "Listing" in assist.list.accessibleName()
    qtbot.wait(300)
    assert len(ticks) >= 10 and max(b - a for a, b in itertools.pairwise(ticks)) < 0.25
    gate.set()
    qtbot.waitUntil(lambda: bool(assist.list.rows()))
    assert assist.list.rows()[0].value == "a.py"
    timer.stop()
    source.shutdown()
    composer.close()


def test_a_huge_folder_listing_is_cancelled_at_shutdown(tmp_path: Path) -> None:
    for i in range(200):
        (tmp_path / f"d{i}").mkdir()
    source = MentionSource(IndexCache())
    source.request(str(tmp_path))
    source.shutdown()
    assert not source.busy(str(tmp_path))
    assert os.path.isdir(tmp_path)


def test_esc_closes_the_list_first_and_stops_the_run_only_then(
        start_app: Callable[..., AppDriver], qtbot: QtBot, repo: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    pane = drv.pane
    running = drv.send("busy")
    drv.wait_tool_running(running)
    pane.composer.setFocus()
    QTest.keyClicks(pane.composer, "next: @src")
    qtbot.waitUntil(lambda: pane.assist.list.isVisible() and bool(pane.assist.list.rows()))
    QTest.keyClick(pane.composer, Qt.Key.Key_Escape)
    assert not pane.assist.list.isVisible()
    qtbot.wait(200)
    assert pane.running_stream == running  # the list took that Esc
    QTest.keyClick(pane.composer, Qt.Key.Key_Escape)
    drv.wait_finished()
    assert pane.running_stream is None
    assert pane.composer.toPlainText() == "next: @src"


def test_slash_lists_the_commands_an_acp_agent_says_it_has(
        start_app: Callable[..., AppDriver], qtbot: QtBot) -> None:
    import json
    import sys

    from tolaria.core.adapters.manifest import Manifest

    pytest.importorskip("acp")
    fake = Path(__file__).resolve().parent.parent / "fakes" / "fake_acp_agent.py"
    listed = [{"name": "init", "description": "Create an AGENTS.md file"},
              {"name": "memory show", "description": "Shows the memory", "input": None}]
    drv = start_app()
    drv.use_agent(Manifest(id="fake-acp-cmds", name="Fake ACP agent", protocol="acp",
                           command=(sys.executable, str(fake), "normal"),
                           env={"FAKE_ACP_COMMANDS": json.dumps(listed)}))
    pane = drv.pane
    pane.composer.setFocus()
    typed(qtbot, drv, "/")
    assert "/init" not in [r.text for r in pane.assist.list.rows()]  # not known before a run
    pane.composer.clear()
    drv.send("hello")
    drv.wait_finished()
    pane.composer.setFocus()
    typed(qtbot, drv, "/")
    rows = {r.text: r for r in pane.assist.list.rows()}
    assert rows["/init"].detail == "Create an AGENTS.md file" and rows["/init"].kind == "agent"
    assert "/memory show" in rows and "/stop" in rows  # the agent's, then Tolaria's
    typed(qtbot, drv, "ini")
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    assert pane.composer.toPlainText() == "/init "  # inserted for the agent, not run
