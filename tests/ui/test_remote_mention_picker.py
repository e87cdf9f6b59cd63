"""``@`` in a chat whose folder is on a host (issue 26.3 there, ADR 0035), in the real window
driven by real keys: the picker says it is listing on the host, then shows the host's files
(a command target, ``env``: the same round trip as ssh through hostgit.py, no sshd needed; the
ssh one is tests/remote/test_remote_mentions.py); Enter puts the host's path in the prompt. A
host that cannot be reached: its one line in the picker, no hang. Pictures: listing, results,
failure (``TOLARIA_DOCS_SHOTS=1``: docs/remote-mentions-*.png)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, save_shot

from tolaria.chats.mentions.hosted import hosted_where, shared_hosted


@pytest.fixture
def hosts(home: Path) -> None:
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n\n'
        f'[hosts."gone"]\ncommand = "{home}/no-such-runner"\npython = "python3"\n')


@pytest.fixture
def folder_there(tmp_path: Path) -> Path:
    """The chat's folder "on the host" (a git repository with an ignored file)."""
    top = tmp_path / "srv" / "app"
    (top / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    (top / ".gitignore").write_text("*.log\n")
    (top / "src" / "app.py").write_text("x")
    (top / "src" / "app test.py").write_text("x")
    (top / "debug.log").write_text("x")
    return top


def remote_chat(drv: AppDriver, qtbot: QtBot, host: str, folder: str) -> None:
    chat = drv.pane.conversation_id
    assert drv.app.controller.engine.set_host(chat, host, folder) is None
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == host)
    drv.window.open_conversation(chat)


def test_at_in_a_remote_chat_lists_the_hosts_files_and_inserts_the_hosts_path(
        start_app: Callable[..., AppDriver], qtbot: QtBot, hosts: None, folder_there: Path,
        tmp_path: Path) -> None:
    drv = start_app()
    remote_chat(drv, qtbot, "box", str(folder_there))
    pane, assist = drv.pane, drv.pane.assist
    pane.composer.setFocus()
    QTest.keyClicks(pane.composer, "look at @")
    assert assist.list.isVisible()
    assert assist.list.accessibleName() == "Listing files on box…"
    save_shot(drv.window, tmp_path, "remote-mentions-listing.png")
    qtbot.waitUntil(lambda: bool(assist.list.rows()), timeout=30_000)
    shown = {row.value for row in assist.list.rows()}
    assert {"src/", "src/app.py", ".gitignore", "src/app test.py"} <= shown, shown
    assert "debug.log" not in shown
    assert assist.list.accessibleName().startswith("Files and folders in app on box · ")
    QTest.keyClicks(pane.composer, "apptest")
    save_shot(drv.window, tmp_path, "remote-mentions-results.png")
    assert assist.list.current_row() is not None
    assert assist.list.current_row().value == "src/app test.py"  # type: ignore[union-attr]
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    assert pane.composer.toPlainText() == 'look at @"src/app test.py" '
    # The listing is the process's for (host, folder): the turn's request reads it, not disk.
    known = shared_hosted().get(hosted_where("box", str(folder_there)))
    assert known is not None and known.index.has("src/app test.py")


def test_an_unreachable_host_says_why_in_one_line(
        start_app: Callable[..., AppDriver], qtbot: QtBot, hosts: None, tmp_path: Path) -> None:
    drv = start_app()
    remote_chat(drv, qtbot, "gone", "/srv/nowhere")
    pane, assist = drv.pane, drv.pane.assist
    pane.composer.setFocus()
    QTest.keyClicks(pane.composer, "@")
    assert assist.list.accessibleName() == "Listing files on gone…"
    qtbot.waitUntil(lambda: assist.list.accessibleName().startswith("Cannot list files on gone: "),
                    timeout=30_000)
    said = assist.list.accessibleName()
    assert "\n" not in said and "Traceback" not in said, said
    save_shot(drv.window, tmp_path, "remote-mentions-failed.png")
    QTest.keyClicks(pane.composer, "x")  # typing on: the reason stays, no new connection
    assert assist.list.accessibleName() == said and not drv.app.window.isHidden()
