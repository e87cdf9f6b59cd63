"""A host per chat (issue 25, item 1), in the real window: the header's Host control stores the
chat's host, its next turn runs there through the supervisor (a command target, ``env``: no
sshd needed) and Stop ends its tree; a bad host gets the inline error; changing the host while
a turn runs is refused; reopening keeps the host. Pictures of the header, light and dark
(``TOLARIA_DOCS_SHOTS=1``: docs/chat-host[-menu][-dark].png)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from helpers import cli_env, fake_manifest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, processes_of, save_shot

from tolaria.chats.mentions.hosted import hosted_where
from tolaria.ui import theme
from tolaria.ui.chat.header import ChatHeader
from tolaria.ui.sidebar.sidebar import SUBTITLE_ROLE

StartApp = Callable[..., AppDriver]


@pytest.fixture
def box(home: Path, tmp_path: Path) -> str:
    """A configured host ``box``: a command target that runs the supervisor right here."""
    cache = tmp_path / "remote-cache"
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\ncache_dir = "{cache}"\n')
    return "box"


def pick(header: ChatHeader, text: str) -> None:
    """Choose ``text`` in the Host menu (as a click on it does)."""
    menu = header.host_button.menu()
    menu.aboutToShow.emit()
    found = [a for a in menu.actions() if a.text() == text]
    assert found, [a.text() for a in menu.actions()]
    found[0].trigger()


def type_entry(header: ChatHeader, text: str) -> None:
    edit = header.entry.edit
    edit.clear()
    QTest.keyClicks(edit, text)
    QTest.keyClick(edit, Qt.Key.Key_Return)


def subtitle(drv: AppDriver, conversation_id: int) -> str:
    item = drv.window.sidebar._items[conversation_id]
    return str(item.data(SUBTITLE_ROLE))


def test_a_chat_on_a_host_runs_there_stops_and_keeps_its_host(
        start_app: StartApp, box: str, home: Path, tmp_path: Path, qtbot: QtBot,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_PIDFILE", str(tmp_path / "tool.pids"))
    folder = tmp_path / "on-the-host"
    folder.mkdir()
    drv = start_app()
    drv.use_agent(fake_manifest("tool"))
    header, chat = drv.window.header, drv.pane.conversation_id
    assert header.host_button.text() == "Host: local ▾"
    pick(header, box)
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == box)
    assert header.host_button.text() == "Host: box ▾"
    assert subtitle(drv, chat).endswith("· on box")
    assert drv.stored_conversation(chat).cwd is None  # the host's home until one is typed

    header.folder_button.click()  # the host's folders, listed there (no local folder dialog)
    dialog = header.remote_dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: dialog.shown is not None, timeout=20_000)  # its home folder
    dialog.path.setText(str(folder))
    QTest.keyClick(dialog.path, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: dialog.shown is not None and dialog.shown.path == str(folder)
                    and dialog.choose.isEnabled(), timeout=20_000)
    dialog.choose.click()
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).cwd == str(folder))
    # @ lists the folder there (ADR 0035, "@-mentions on a host"), never a local one.
    assert drv.pane.assist._where() == hosted_where(box, str(folder))

    stream_id = drv.send("work over there")
    drv.wait_tool_running(stream_id)
    tree = [" ".join(p.cmdline()) for p in processes_of(stream_id)]
    assert any("tolaria.core.remote.link" in line for line in tree), tree
    agent = [p for p in processes_of(stream_id) if "fake_agent" in " ".join(p.cmdline())]
    assert agent and agent[0].cwd() == str(folder), "the agent runs in the chat's folder there"
    assert not list(folder.glob(".git")), "a snapshot there writes nothing into the folder"

    streams = subprocess.Popen([sys.executable, "-m", "tolaria", "streams", "--json"],
                               stdout=subprocess.PIPE, text=True, env=cli_env(home))
    qtbot.waitUntil(lambda: streams.poll() is not None, timeout=20_000)  # the loop answers it
    listed = [s for s in json.loads(streams.communicate()[0]) if s["stream_id"] == stream_id]
    assert listed and listed[0]["host"] == box, listed

    pick(header, "Local (this computer)")  # refused: the turn keeps running where it is
    assert "Stop the running turn before changing the host" in header.entry.error.text()
    assert drv.stored_conversation(chat).host == box
    assert drv.pane.running_stream == stream_id

    drv.button("stopButton").click()
    turn = drv.wait_finished()
    assert turn.status == "cancelled"
    assert "I'll run a tool." in turn.text(), "partial output stays"
    assert processes_of(stream_id) == [], "0 survivors"
    pids = [int(p) for p in (tmp_path / "tool.pids").read_text().split()]
    assert pids and not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                            for p in pids)
    drv.close()

    again = start_app()
    again.window.open_conversation(chat)
    assert again.window.header.host_button.text() == "Host: box ▾"
    assert again.window.header.folder_button.text() == folder.name
    assert subtitle(again, chat).endswith("· on box")


def test_a_bad_host_gets_the_inline_error_and_a_good_one_is_kept(start_app: StartApp,
                                                                 qtbot: QtBot) -> None:
    drv = start_app()
    header, chat = drv.window.header, drv.pane.conversation_id
    pick(header, "Other host…")
    assert header.entry.isVisible() and header.entry.edit.hasFocus()
    type_entry(header, "-oProxyCommand=touch")
    assert "starts with '-'" in header.entry.error.text()
    type_entry(header, "ssh://me@devbox:99999")
    assert "not a port number" in header.entry.error.text()
    assert drv.stored_conversation(chat).host is None, "nothing stored from a bad host"
    QTest.keyClick(header.entry.edit, Qt.Key.Key_Escape)  # closes the entry, stops nothing
    assert not header.entry.isVisible()

    pick(header, "Other host…")
    type_entry(header, "ssh://me@devbox:2222")
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == "ssh://me@devbox:2222")
    assert not header.entry.isVisible()
    assert header.host_button.text() == "Host: ssh://me@devbox:2222 ▾"
    long = "exec:docker exec -i a-container-with-a-long-name"
    pick(header, "Other host…")
    type_entry(header, long)
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == long)
    assert header.host_button.text() == "Host: exec:docker exec -i a-conta… ▾"
    assert long in header.host_button.toolTip()
    pick(header, "Local (this computer)")
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host is None)
    assert header.host_button.text() == "Host: local ▾"


def test_what_the_host_refuses_is_said_in_the_chat(start_app: StartApp, home: Path,
                                                   qtbot: QtBot) -> None:
    """ssh's refusal (here a command target that says what ssh says of a host key it cannot
    accept and exits 255, as ssh does) ends the turn with an error card: the link's one line,
    ssh's own words in its stderr. Nothing is accepted silently (BatchMode stays on)."""
    (home / "settings.toml").write_text(
        '[hosts."changed"]\ncommand = "sh -c \'echo Host key verification failed. >&2; '
        'exit 255\'"\n')
    drv = start_app()
    drv.use_agent(fake_manifest("normal"))
    pick(drv.window.header, "changed")
    qtbot.waitUntil(lambda: drv.stored_conversation(drv.pane.conversation_id).host == "changed")
    drv.send("hello")
    turn = drv.wait_finished()
    assert turn.status == "failed"
    [card] = turn.error_cards()
    assert "host key of changed" in card.message and "never accepts" in card.message
    assert "Host key verification failed." in card.stderr_lines, "ssh's own words, under it"


def test_pictures_of_the_header_with_its_host(start_app: StartApp, box: str, qtbot: QtBot,
                                              tmp_path: Path) -> None:
    drv = start_app()
    drv.window.resize(1000, 640)
    header = drv.window.header
    pick(header, box)
    qtbot.waitUntil(lambda: header.host_button.text() == "Host: box ▾")
    try:
        for suffix, name in (("", "light"), ("-dark", "dark")):
            theme.apply_theme(name)
            pick(header, "Other host…")
            type_entry(header, "-oProxyCommand=x")
            qtbot.wait(50)
            assert save_shot(header, tmp_path, f"chat-host{suffix}.png").is_file()
            QTest.keyClick(header.entry.edit, Qt.Key.Key_Escape)
            button = header.host_button
            menu = button.menu()
            menu.popup(button.mapToGlobal(button.rect().bottomLeft()))
            qtbot.waitUntil(menu.isVisible)
            assert save_shot(menu, tmp_path, f"chat-host-menu{suffix}.png").is_file()
            menu.hide()
    finally:
        theme.apply_theme("light")
