"""The header's "Host: … ▾" menu lists each host's agents (issue 25 follow-up): under this
computer its agents, under a host the agents a look there found, with versions, those not there
greyed; a host not looked at yet offers "Look for agents on HOST"; picking an agent under a host
moves the chat there with that agent, refused while a turn runs. The host is the configured
command target of tests/ui/test_host_picker.py (the look runs right here through the probe).
Pictures light and dark (``TOLARIA_DOCS_SHOTS=1``: docs/host-menu-agents[-dark].png)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers import fake_manifest
from PySide6.QtGui import QAction
from pytestqt.qtbot import QtBot
from ui.test_host_picker import _agents, box  # noqa: F401 (the fixture)
from ui.uihelpers import AppDriver, save_shot

from tolaria.ui import theme
from tolaria.ui.chat.header import ChatHeader

StartApp = Callable[..., AppDriver]


def menu_rows(header: ChatHeader) -> list[QAction]:
    menu = header.host_button.menu()
    menu.aboutToShow.emit()
    return [a for a in menu.actions() if not a.isSeparator()]


def texts(header: ChatHeader) -> list[tuple[str, bool]]:
    return [(a.text(), a.isEnabled()) for a in menu_rows(header)]


def trigger(header: ChatHeader, text: str) -> None:
    found = [a for a in menu_rows(header) if a.text().strip() == text]
    assert found, texts(header)
    found[0].trigger()


def test_the_host_menu_lists_each_hosts_agents_and_moves_the_chat_with_one(
        start_app: StartApp, box: Path, qtbot: QtBot) -> None:  # noqa: F811
    drv = start_app()
    _agents(drv)
    header, chat = drv.window.header, drv.pane.conversation_id
    shown = texts(header)
    assert shown[0] == ("Local (this computer)", True)
    here = [t.strip() for t, _ok in shown[1:shown.index(("box", True))]]
    assert "Demo (built in)" in " ".join(here) or any("Demo" in t for t in here), here
    # box not looked at yet: one row asks it, through the same look as the picker's.
    assert ("    ↻ Look for agents on box", True) in shown
    trigger(header, "↻ Look for agents on box")
    qtbot.waitUntil(lambda: ("    Claude Code 2.1.7", True) in texts(header), timeout=20_000)
    shown = texts(header)
    under_box = [(t.strip(), ok) for t, ok in shown[shown.index(("box", True)) + 1:]]
    names = dict(under_box)
    assert names["Claude Code 2.1.7"] is True
    assert names["Aider — not on box"] is False, "greyed: not there"
    tip = next(a.toolTip() for a in menu_rows(header) if a.text().strip() == "Aider — not on box")
    assert "no aider on PATH or through the login shell there" in tip
    assert names["Qwen Code — needs setup"] is True, "installed there: choosable"
    assert all("Ollama" not in t for t, _ok in under_box), "an endpoint runs from here"
    assert drv.stored_conversation(chat).host is None

    trigger(header, "Claude Code 2.1.7")  # under box: the chat moves there with Claude
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == "box")
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).agent == "claude")
    assert header.host_button.text() == "Host: box ▾"
    assert header.agent_picker.current_agent() == "claude"

    trigger(header, next(t.strip() for t, _ok in texts(header)[1:] if "Demo" in t))
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host is None)
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).agent == "demo")


def test_picking_an_agent_under_a_host_is_refused_while_a_turn_runs(
        start_app: StartApp, box: Path, qtbot: QtBot) -> None:  # noqa: F811
    drv = start_app()
    drv.use_agent(fake_manifest("hang"))
    header, chat = drv.window.header, drv.pane.conversation_id
    drv.app.preferences.hosts.look("box")
    qtbot.waitUntil(lambda: header.agent_picker.menu_rows("box") is not None, timeout=20_000)
    drv.send("take your time")
    qtbot.waitUntil(lambda: drv.pane.running_stream is not None)
    under_box = menu_rows(header)
    start = [a.text() for a in under_box].index("box")
    usable = [a for a in under_box[start + 1:] if a.isEnabled() and a.text().startswith("    ")]
    assert usable
    usable[0].trigger()
    assert header.entry.isVisible()
    assert "Stop the running turn before changing the host" in header.entry.error.text()
    assert drv.stored_conversation(chat).host is None
    assert drv.stored_conversation(chat).agent == "fake-hang"
    drv.button("stopButton").click()
    drv.wait_finished()


def test_pictures_of_the_host_menu_with_agents(start_app: StartApp, box: Path,  # noqa: F811
                                               qtbot: QtBot, tmp_path: Path) -> None:
    drv = start_app()
    _agents(drv)
    drv.window.resize(1000, 640)
    header = drv.window.header
    drv.app.preferences.hosts.look("box")
    qtbot.waitUntil(lambda: header.agent_picker.menu_rows("box") is not None, timeout=20_000)
    qtbot.waitUntil(lambda: any(r.text.startswith("Demo agent (offline) 0")  # local versions
                                for r in header.agent_picker.menu_rows("") or []),
                    timeout=20_000)
    try:
        for suffix, name in (("", "light"), ("-dark", "dark")):
            theme.apply_theme(name)
            qtbot.wait(50)
            button = header.host_button
            menu = button.menu()
            menu.popup(button.mapToGlobal(button.rect().bottomLeft()))
            qtbot.waitUntil(menu.isVisible)
            assert save_shot(menu, tmp_path, f"host-menu-agents{suffix}.png").is_file()
            menu.hide()
    finally:
        theme.apply_theme("light")
