"""Preferences > Agents: add a custom agent and use it, invalid input refused, Test, disable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QCheckBox, QLabel, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import (
    FAKE_AGENT,
    add_custom_agent,
    child,
    open_preferences,
    pick_agent,
    picker_agents,
    select_agent,
    type_into,
)
from ui.uihelpers import StartApp, processes_of

from tolaria.config.agents import load_overrides
from tolaria.support import paths
from tolaria.ui.settings.custom_agent_dialog import CustomAgentDialog

ROOT = Path(__file__).resolve().parents[2]


def test_add_a_custom_agent_run_a_turn_and_stop_it(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    add_custom_agent(drv, qtbot, "fake-cli", [sys.executable, str(FAKE_AGENT), "tool", "{prompt}"])
    written = paths.user_adapters_dir() / "fake-cli.toml"
    assert written.is_file() and "fake_agent.py" in written.read_text()
    assert "fake-cli" in picker_agents(drv), "the picker updates at once"

    pick_agent(drv, "fake-cli")
    qtbot.waitUntil(lambda: drv.stored_conversation(
        drv.pane.conversation_id).agent == "fake-cli")
    stream_id = drv.send("use the tool")
    qtbot.waitUntil(lambda: "tool started" in drv.last_turn().text(), timeout=10_000)
    assert processes_of(stream_id)
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Escape)
    turn = drv.wait_finished()
    assert turn.status == "cancelled"
    assert processes_of(stream_id) == []
    assert drv.stored_turn(stream_id).agent == "fake-cli"


def test_invalid_custom_agent_is_refused_with_its_message(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    child(dialog, QPushButton, "addAgentButton").click()
    custom = dialog.findChild(CustomAgentDialog, "customAgentDialog")
    assert custom is not None
    save = child(custom, QPushButton, "customAgentSave")
    ident = child(custom, QLineEdit, "custom_id")
    id_error = child(custom, QLabel, "idError")

    type_into(ident, "Bad Id!")
    assert not save.isEnabled()
    assert "lowercase letters" in id_error.text()
    type_into(ident, "demo")
    assert "already used" in id_error.text() and not save.isEnabled()
    type_into(ident, "fine-id")
    assert id_error.text() == ""

    command = child(custom, QLineEdit, "custom_command")
    command_error = child(custom, QLabel, "commandError")
    type_into(command, "my-cli 'unclosed")
    assert not save.isEnabled() and "quote is not closed" in command_error.text()
    type_into(command, "my-cli {prompt} {prompt}")
    assert not save.isEnabled() and "{prompt}" in command_error.text()
    type_into(command, "")
    assert not save.isEnabled() and "Type the command" in command_error.text()

    QTest.keyClick(command, Qt.Key.Key_Return)  # Enter does not save an invalid agent either
    assert custom.isVisible()
    folder = paths.user_adapters_dir()
    assert not folder.exists() or list(folder.iterdir()) == [], "nothing is written"
    custom.reject()


def test_invalid_overrides_show_their_message_and_nothing_is_saved(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    settings_file = home / "settings.toml"
    original = b"# my settings, by hand\n[behaviour]\nwatchdog_seconds = 90\n"
    settings_file.write_bytes(original)
    drv = start_app()
    dialog = open_preferences(drv)
    select_agent(dialog, "demo")
    save = child(dialog, QPushButton, "settingsSave")
    assert save.isEnabled()

    type_into(child(dialog, QLineEdit, "agentExtraArgs"), '--flag "unclosed')
    error = child(dialog, QLabel, "extra_argsError")
    assert not error.isHidden() and "cannot split" in error.text()
    assert not save.isEnabled()
    type_into(child(dialog, QLineEdit, "agentExtraArgs"), "--fine 'two words'")
    assert error.isHidden() and save.isEnabled()

    type_into(child(dialog, QLineEdit, "agentPath"), "/no/such/program")
    path_error = child(dialog, QLabel, "pathError")
    assert "no such file" in path_error.text() and not save.isEnabled()
    save.click()  # disabled: does nothing
    assert settings_file.read_bytes() == original
    assert load_overrides()[0] == {}


def test_disabling_an_agent_removes_it_from_the_picker_at_once(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    drv = start_app()
    assert "codex" in picker_agents(drv)
    dialog = open_preferences(drv)
    select_agent(dialog, "codex")
    enabled = child(dialog, QCheckBox, "agentEnabled")
    enabled.click()
    assert not enabled.isChecked()
    assert "off" in dialog.agents.list.currentItem().text()
    assert "codex" in picker_agents(drv), "nothing changes before Save"
    child(dialog, QPushButton, "settingsSave").click()
    assert "codex" not in picker_agents(drv)
    assert "enabled = false" in (home / "settings.toml").read_text()
    assert load_overrides()[0]["codex"].enabled is False
    # And back.
    enabled.click()
    child(dialog, QPushButton, "settingsSave").click()
    assert "codex" in picker_agents(drv)


@pytest.fixture
def demo_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


@pytest.mark.usefixtures("demo_importable")
def test_test_button_shows_success_for_the_demo_agent(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    select_agent(dialog, "demo")
    button = child(dialog, QPushButton, "agentTestButton")
    result = child(dialog, QLabel, "agentTestResult")
    button.click()
    assert not button.isEnabled()
    qtbot.waitUntil(lambda: button.isEnabled(), timeout=30_000)
    assert result.text().startswith("✓ Works"), result.text()
    assert "tolaria-demo-agent" in result.text(), "shows the version"


def test_test_button_shows_the_exact_error_for_a_missing_program(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    add_custom_agent(drv, qtbot, "ghost", ["no-such-tolaria-cli-xyz", "{prompt}"])
    dialog = open_preferences(drv)
    select_agent(dialog, "ghost")
    button = child(dialog, QPushButton, "agentTestButton")
    button.click()
    qtbot.waitUntil(lambda: button.isEnabled(), timeout=30_000)
    text = child(dialog, QLabel, "agentTestResult").text()
    assert text.startswith("✗"), text
    assert "no-such-tolaria-cli-xyz" in text and "not installed" in text, text
    detected = child(dialog, QLabel, "agentDetected").text()
    assert "no-such-tolaria-cli-xyz" in detected
