"""File → "Import sessions from" → a host (issue 25.6 in the window): the host's Claude Code
session becomes a chat on that host, listed off the GUI thread with "Looking on HOST…" and
Cancel (which kills the host's command), an unreachable host says its one line in the bar.

The "host" is a command target (``env``: the same round trip as ssh, no sshd needed; the ssh
one is tests/remote/test_remote_import_window.py) whose home is this test's ``HOME``. The menu
is the new-chat host picker's (this computer, configured and recent hosts, "Other host…")."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from chats.test_importing import SESSIONS
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, save_shot

from tolaria.ui.window.host_import import ImportFromMenu

SLOW = "29.25"  # the seconds the slow host's command sleeps: found by it among the processes


@pytest.fixture
def host_home(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The "host's" home with one Claude Code session; the hosts in the settings."""
    there = tmp_path / "there"
    shutil.copytree(SESSIONS / "claude", there)
    monkeypatch.setenv("HOME", str(there))
    slow = home / "slow-runner"
    slow.write_text(f"#!/bin/sh\nexec sleep {SLOW}\n")
    slow.chmod(0o755)
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n\n'
        f'[hosts."slow"]\ncommand = "{slow}"\npython = "python3"\n\n'
        f'[hosts."gone"]\ncommand = "{home}/no-such-runner"\npython = "python3"\n')
    return there


def pick(menu: ImportFromMenu, text: str) -> None:
    menu.fill()
    found = [a for a in menu.actions() if isinstance(a, QAction) and a.text() == text]
    assert found, [a.text() for a in menu.actions()]
    found[0].trigger()


def sleepers() -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] and proc.info["cmdline"][:2] == ["sleep", SLOW]:
            out.append(proc)
    return out


def test_a_hosts_session_becomes_a_chat_on_that_host(
        start_app: Callable[..., AppDriver], qtbot: QtBot, host_home: Path,
        tmp_path: Path) -> None:
    drv = start_app()
    window, bar = drv.window, drv.window.import_report
    menu = window.import_from_menu
    menu.fill()
    texts = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert texts[:2] == ["Import sessions from", "This computer"]
    assert {"box", "slow", "gone"} <= set(texts) and texts[-1] == "Other host…"
    before = set(window.sidebar.ids())

    pick(menu, "box")
    assert bar.running and bar.headline.text().startswith("Looking on box for the sessions")
    assert bar.cancel_button.isVisible()
    save_shot(window, tmp_path, "import-from-host-looking.png")
    bar.show_note("Made a git worktree")  # another action's note: under the running import
    assert bar.running and bar.cancel_button.isVisible()
    assert bar.details.text() == "Made a git worktree"
    pick(menu, "slow")  # one import at a time: ignored
    assert bar.headline.text().startswith("Looking on box")
    qtbot.waitUntil(lambda: not bar.running, timeout=30_000)
    assert bar.headline.text() == "From box: 1 chat imported: 1 from Claude Code"
    assert not bar.cancel_button.isVisible()
    (new,) = set(window.sidebar.ids()) - before
    stored = drv.stored_conversation(new)
    assert stored.host == "box" and stored.agent == "claude"
    window.open_conversation(new)  # its next turn runs there, resuming the CLI's session
    assert window.header.agent_picker.host == "box"
    assert stored.agent_session_id == session_stem(host_home), "the CLI's session, resumed"
    save_shot(window, tmp_path, "import-from-host-done.png")

    # The session grows on the host between two imports, its last line half written (the CLI
    # still writing it): the chat keeps what was whole, nothing twice, no new chat.
    (session,) = (host_home / ".claude" / "projects").glob("*/*.jsonl")
    turns = len(drv.app.store.turns(new))
    with session.open("a") as fh:
        fh.write('{"parentUuid":"x","type":"user","message":{"role":"user","cont')
    pick(menu, "box")
    qtbot.waitUntil(lambda: not bar.running, timeout=30_000)
    assert bar.headline.text().startswith("From box: nothing new to import"), bar.headline.text()
    assert set(window.sidebar.ids()) - before == {new}
    assert len(drv.app.store.turns(new)) == turns


def test_cancel_kills_the_hosts_command_and_an_unreachable_host_says_one_line(
        start_app: Callable[..., AppDriver], qtbot: QtBot, host_home: Path,
        tmp_path: Path) -> None:
    drv = start_app()
    window, bar = drv.window, drv.window.import_report
    before = set(window.sidebar.ids())
    pick(window.import_from_menu, "slow")
    qtbot.waitUntil(lambda: bool(sleepers()), timeout=10_000)
    assert bar.headline.text().startswith("Looking on slow")
    bar.cancel_button.click()
    qtbot.waitUntil(lambda: not bar.running, timeout=10_000)
    assert bar.headline.text() == "Import from slow cancelled: nothing was imported"
    deadline = time.monotonic() + 5
    while sleepers() and time.monotonic() < deadline:
        qtbot.wait(50)
    assert not sleepers(), "the host's command was killed"

    # "Other host…": typed under the New chat button, checked like ``--host``, Enter imports.
    window.import_from_menu.ask_other()
    entry = window.sidebar.new_host_entry
    assert entry.isVisible() and entry.label.text() == "Import sessions from:"
    QTest.keyClicks(entry.edit, "bad host")
    QTest.keyClick(entry.edit, Qt.Key.Key_Return)
    assert entry.error.text() and not bar.running, "a bad destination is said, not tried"
    save_shot(window, tmp_path, "import-from-other-host.png")
    entry.edit.clear()
    QTest.keyClicks(entry.edit, "gone")
    QTest.keyClick(entry.edit, Qt.Key.Key_Return)
    assert not entry.isVisible() and bar.running
    qtbot.waitUntil(lambda: not bar.running, timeout=30_000)
    said = bar.headline.text()
    assert said.startswith("Import from gone failed: "), said
    assert "\n" not in said and "Traceback" not in said, said
    assert set(window.sidebar.ids()) == before
    save_shot(window, tmp_path, "import-from-host-failed.png")

    # Quitting while an import from a host runs: cancelled, its command killed, a clean close.
    pick(window.import_from_menu, "slow")
    qtbot.waitUntil(lambda: bool(sleepers()), timeout=10_000)
    drv.close()
    deadline = time.monotonic() + 5
    while sleepers() and time.monotonic() < deadline:
        qtbot.wait(50)
    assert not sleepers(), "quitting killed the host's command"


def session_stem(there: Path) -> str:
    (session,) = (there / ".claude" / "projects").glob("*/*.jsonl")
    return session.stem
