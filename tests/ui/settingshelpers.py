"""Helpers for the Preferences tests: open the window, type like a user, find its widgets."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TypeVar

from PySide6.QtCore import QObject, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QComboBox, QLineEdit, QPushButton, QWidget
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.ui.settings import SettingsDialog
from tolaria.ui.settings.custom_agent_dialog import CustomAgentDialog

FAKE_AGENT = Path(__file__).resolve().parents[1] / "fakes" / "fake_agent.py"

W = TypeVar("W", bound=QObject)


def open_preferences(drv: AppDriver) -> SettingsDialog:
    drv.window.preferences_action.trigger()
    dialog = drv.window.findChild(SettingsDialog, "settingsDialog")
    assert dialog is not None and dialog.isVisible()
    drv.qtbot.waitExposed(dialog)
    return dialog


def child(parent: QWidget, cls: type[W], name: str) -> W:
    found = parent.findChild(cls, name)
    assert found is not None, f"no {cls.__name__} {name!r}"
    return found


def type_into(edit: QLineEdit, text: str) -> None:
    """Replace the text the way a user does (``textEdited`` fires, unlike ``setText``)."""
    edit.setFocus()
    edit.selectAll()
    if text:
        QTest.keyClicks(edit, text)
    else:
        QTest.keyClick(edit, Qt.Key.Key_Backspace)  # deletes the selection


def close_preferences(drv: AppDriver, dialog: SettingsDialog, qtbot: QtBot) -> None:
    dialog.close()
    qtbot.waitUntil(lambda: not dialog.isVisible())
    drv.window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is drv.window)


def select_agent(dialog: SettingsDialog, agent_id: str) -> None:
    dialog.agents.select(agent_id)
    assert dialog.agents.current_agent() == agent_id


def picker_agents(drv: AppDriver) -> list[str]:
    picker = drv.window.header.agent_picker
    return [picker.itemData(i) for i in range(picker.count())]


def pick_agent(drv: AppDriver, agent_id: str) -> None:
    """What choosing an entry in the header's agent list does."""
    picker = drv.window.header.agent_picker
    index = picker.findData(agent_id)
    assert index >= 0, f"{agent_id} is not in the picker"
    picker.setCurrentIndex(index)
    picker.activated.emit(index)


def add_custom_agent(drv: AppDriver, qtbot: QtBot, agent_id: str, command: list[str]) -> None:
    dialog = open_preferences(drv)
    child(dialog, QPushButton, "addAgentButton").click()
    custom = dialog.findChild(CustomAgentDialog, "customAgentDialog")
    assert custom is not None
    qtbot.waitExposed(custom)
    type_into(child(custom, QLineEdit, "custom_id"), agent_id)
    type_into(child(custom, QLineEdit, "custom_name"), "Fake CLI")
    protocol = child(custom, QComboBox, "customProtocol")
    protocol.setCurrentIndex(protocol.findText("claude-stream-json"))
    type_into(child(custom, QLineEdit, "custom_command"), shlex.join(command))
    save = child(custom, QPushButton, "customAgentSave")
    assert save.isEnabled(), [e.text() for e in custom.errors.values() if e.text()]
    save.click()
    qtbot.waitUntil(lambda: not custom.isVisible())
    assert dialog.agents.current_agent() == agent_id
    close_preferences(drv, dialog, qtbot)
