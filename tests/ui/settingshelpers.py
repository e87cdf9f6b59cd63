"""Helpers for the Preferences tests: open the window, type like a user, find its widgets."""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtCore import QObject, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLineEdit, QWidget
from pytestqt.qtbot import QtBot
from uihelpers import AppDriver

from tolaria.ui.settings import SettingsDialog

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
