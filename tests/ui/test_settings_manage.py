"""Preferences > Agents: duplicate, remove a custom agent, reset a built-in, discard on reopen."""

from __future__ import annotations

from PySide6.QtWidgets import QLineEdit, QMessageBox, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import (
    child,
    close_preferences,
    open_preferences,
    picker_agents,
    select_agent,
    type_into,
)
from ui.uihelpers import StartApp

from tolaria.config.agents import load_overrides
from tolaria.support import paths
from tolaria.ui.window.inline_confirm import InlineConfirm


def test_duplicate_then_remove_a_custom_agent(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    select_agent(dialog, "demo")
    child(dialog, QPushButton, "duplicateAgentButton").click()
    copy = paths.user_adapters_dir() / "demo-copy.toml"
    assert copy.is_file()
    assert dialog.agents.current_agent() == "demo-copy"
    assert "demo-copy" in picker_agents(drv)
    assert not child(dialog, QPushButton, "removeAgentButton").isHidden()

    child(dialog, QPushButton, "removeAgentButton").click()
    assert dialog.findChild(QMessageBox) is None, "an inline confirm, not a message box"
    confirm = child(dialog, InlineConfirm, "removeAgentConfirm")
    assert confirm.isVisible() and "Remove the custom agent" in confirm.label.text()
    assert confirm.toolTip().endswith("demo-copy.toml"), "the file it deletes"
    child(confirm, QPushButton, "removeAgentConfirmAccept").click()
    qtbot.waitUntil(lambda: not copy.exists())
    assert "demo-copy" not in picker_agents(drv)
    assert "demo-copy" not in dialog.agents.agent_ids()


def test_reset_a_builtin_and_unsaved_edits_are_dropped_on_reopen(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    select_agent(dialog, "codex")
    type_into(child(dialog, QLineEdit, "agentExtraArgs"), "--search")
    child(dialog, QPushButton, "settingsSave").click()
    assert load_overrides()[0]["codex"].extra_args == ("--search",)
    assert not child(dialog, QPushButton, "removeAgentButton").isEnabled(), "built-ins stay"

    child(dialog, QPushButton, "resetAgentButton").click()
    assert "codex" not in load_overrides()[0]
    assert child(dialog, QLineEdit, "agentExtraArgs").text() == ""

    type_into(child(dialog, QLineEdit, "agentExtraArgs"), "--never-saved")
    close_preferences(drv, dialog, qtbot)
    dialog = open_preferences(drv)
    select_agent(dialog, "codex")
    assert child(dialog, QLineEdit, "agentExtraArgs").text() == ""
    assert dialog.agents.pending() == {}
