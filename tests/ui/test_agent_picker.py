"""Agent onboarding (issue 17, item 4): the picker grouped Ready / Needs setup / Not installed
with one-line hints, a local model server probed for liveness, a Copy button in Preferences."""

from __future__ import annotations

import socket
from collections.abc import Callable

from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QApplication, QLabel, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, close_preferences, open_preferences, select_agent
from ui.uihelpers import AppDriver

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.programs import discovery
from tolaria.ui.chat.agent_status import NEEDS_SETUP, NOT_INSTALLED, READY
from tolaria.ui.chat.header import GROUP_ROLE, HEADER_ROLE
from tolaria.ui.chat.picker_rows import hint_parts

Start = Callable[..., AppDriver]


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _with_agents(drv: AppDriver) -> None:
    """Only three agents: the demo, a missing CLI and a local model server that is down."""
    missing = Manifest(id="ghost", name="Ghost CLI", protocol="claude-stream-json",
                       command=("tolaria-no-such-program-xyz", "{prompt}"),
                       install_hint="npm install -g ghost-cli")
    server = Manifest(id="ollama", name="Ollama (local model)", protocol="openai-chat",
                      command=(), base_url=f"http://127.0.0.1:{_dead_port()}/v1", model="m")
    manifests = drv.app.adapters.manifests
    demo = manifests["demo"]
    manifests.clear()
    manifests.update({"demo": demo, "ghost": missing, "ollama": server})
    drv.window.set_manifests(list(manifests.values()))
    drv.run(drv.app.controller.detect_agents())


def test_the_picker_groups_agents_with_one_line_hints(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    _with_agents(drv)
    picker = drv.window.header.agent_picker
    assert picker.headers() == ["READY", "NEEDS SETUP", "NOT INSTALLED"]
    model = picker.model()
    assert isinstance(model, QStandardItemModel)
    rows = [(picker.itemText(r), picker.itemData(r), picker.itemData(r, GROUP_ROLE),
             model.item(r).isEnabled()) for r in range(picker.count())]
    assert rows == [
        ("READY", None, None, False),
        ("Demo agent (offline) 0.1.0", "demo", READY, True),
        ("NEEDS SETUP", None, None, False),
        ("Ollama (local model) — not running: start it with `ollama serve`", "ollama",
         NEEDS_SETUP, True),
        ("NOT INSTALLED", None, None, False),
        ("Ghost CLI — install: npm install -g ghost-cli", "ghost", NOT_INSTALLED, False),
    ]
    for row in range(picker.count()):
        assert bool(picker.itemData(row, HEADER_ROLE)) == (picker.itemData(row) is None)
    ghost = model.item(picker.findData("ghost"))
    assert "not found on PATH" not in ghost.toolTip(), "no list of searched folders"
    assert drv.window.header.agent_picker.current_agent() == "demo"


def test_preferences_say_the_next_step_with_a_copy_button(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    _with_agents(drv)
    dialog = open_preferences(drv)
    select_agent(dialog, "ghost")
    step = child(dialog, QLabel, "agentNextStep")
    copy = child(dialog, QPushButton, "agentCopyCommand")
    qtbot.waitUntil(lambda: step.text() == "install: npm install -g ghost-cli", timeout=10_000)
    assert copy.isVisibleTo(dialog)
    copy.click()
    clipboard = QApplication.clipboard()
    assert clipboard is not None and clipboard.text() == "npm install -g ghost-cli"
    assert copy.text() == "Copied"
    detected = child(dialog, QLabel, "agentDetected").text()
    assert detected == "not installed: no tolaria-no-such-program-xyz found"
    select_agent(dialog, "ollama")
    qtbot.waitUntil(lambda: "ollama serve" in step.text(), timeout=10_000)
    copy.click()
    assert clipboard.text() == "ollama serve"
    select_agent(dialog, "demo")
    qtbot.waitUntil(lambda: not step.isVisibleTo(dialog), timeout=10_000)
    assert not copy.isVisibleTo(dialog)
    close_preferences(drv, dialog, qtbot)


def test_hint_commands_are_the_backticked_parts() -> None:
    assert hint_parts("not running: start it with `ollama serve`") == [
        ("not running: start it with ", False), ("ollama serve", True)]
    assert hint_parts("install: npm i -g x") == [("install: npm i -g x", False)]


def test_opening_the_picker_asks_the_local_server_again(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    port = _dead_port()
    server = Manifest(id="ollama", name="Ollama (local model)", protocol="openai-chat",
                      command=(), base_url=f"http://127.0.0.1:{port}/v1", model="m")
    drv.app.adapters.manifests["ollama"] = server
    drv.window.set_manifests(list(drv.app.adapters.manifests.values()))
    drv.run(drv.app.controller.detect_agents())
    picker = drv.window.header.agent_picker
    status = picker.status("ollama")
    assert status is not None and status.group == NEEDS_SETUP
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        discovery._server_cache.clear()  # as if the 5 s cache had run out
        picker.showPopup()
        qtbot.waitUntil(lambda: getattr(picker.status("ollama"), "group", "") == READY,
                        timeout=10_000)
        picker.hidePopup()
