"""Preferences: opens with Ctrl+, (non-blocking), and every page renders (screenshots)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp

from tolaria.ui.settings import SettingsDialog


def test_ctrl_comma_opens_preferences_without_blocking(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path) -> None:
    drv = start_app()
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    dialog = drv.window.findChild(SettingsDialog, "settingsDialog")
    assert dialog is not None
    qtbot.waitExposed(dialog)
    assert not dialog.isModal() and QApplication.activeModalWidget() is None
    for index, name in enumerate(("agents", "shortcuts", "behaviour")):
        dialog.tabs.setCurrentIndex(index)
        shot = dialog.grab()
        assert not shot.isNull() and shot.save(str(tmp_path / f"settings_{name}.png"))
    menu = drv.window.menuBar().actions()[0].menu()
    assert isinstance(menu, QMenu) and drv.window.preferences_action in menu.actions()
    # Chats keep working while it is open.
    drv.send("still works")
    assert drv.wait_finished().status == "completed"
