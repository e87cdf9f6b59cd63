"""Preferences > Behaviour: grace and polite window reach the next run, quit confirmation can be
turned off, and a chat that finishes out of view is announced."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QCheckBox, QComboBox, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, close_preferences, open_preferences
from ui.uihelpers import StartApp, processes_of

from tolaria.config.settings import load_settings
from tolaria.core.adapters.manifest import Manifest
from tolaria.ui import theme


def test_behaviour_settings_are_saved_and_reach_new_runs(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    page = dialog.behaviour
    page.grace.setValue(3.5)
    page.polite_own.setChecked(False)
    page.polite.setValue(250)
    page.watchdog.setValue(20)
    child(dialog, QPushButton, "settingsSave").click()
    saved = load_settings()[0]
    assert (saved.grace_seconds, saved.polite_window_ms, saved.watchdog_seconds) == (3.5, 250, 20)
    assert drv.app.controller.grace_s == 3.5
    demo = drv.app.adapters.manifests["demo"]
    manifest = drv.app.controller.run_config.configure(demo).manifest
    assert isinstance(manifest, Manifest) and manifest.stop.polite_window_ms == 250
    assert drv.pane.watchdog.seconds == 20


def test_quit_without_confirmation_when_turned_off(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    dialog = open_preferences(drv)
    confirm = child(dialog, QCheckBox, "confirmQuit")
    confirm.click()
    assert not confirm.isChecked()
    child(dialog, QPushButton, "settingsSave").click()
    close_preferences(drv, dialog, qtbot)
    stream_id = drv.send("long")
    drv.wait_tool_running(stream_id)
    drv.window.close()
    assert not drv.window.isVisible(), "closed without asking"
    assert drv.window.findChild(QObject, "quitDialog") is None
    drv.close()  # the real shutdown: the run's tree is stopped on the way out
    assert processes_of(stream_id) == []


@pytest.mark.parametrize("notify", [True, False])
def test_a_background_chat_that_finishes_is_announced(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, notify: bool) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "1")
    drv = start_app()
    if not notify:
        dialog = open_preferences(drv)
        child(dialog, QCheckBox, "notifyBackground").click()
        child(dialog, QPushButton, "settingsSave").click()
        close_preferences(drv, dialog, qtbot)
    first = drv.pane
    drv.send("background work")
    drv.window.new_action.trigger()
    qtbot.waitUntil(lambda: drv.window.current_pane() is not first)
    drv.wait_finished(first)
    title = drv.stored_conversation(first.conversation_id).title
    if notify:
        assert title in drv.window.notifier.last_notice
        assert "finished" in drv.window.statusBar().currentMessage()
    else:
        assert drv.window.notifier.last_notice == ""


def test_a_hand_edit_made_while_the_window_is_open_survives_a_save(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    settings_file = home / "settings.toml"
    settings_file.write_text("# tuned by hand\n[behaviour]\nwatchdog_seconds = 90.0\n")
    dialog.behaviour.grace.setValue(4.0)
    child(dialog, QPushButton, "settingsSave").click()
    text = settings_file.read_text()
    assert "# tuned by hand" in text and "watchdog_seconds = 90.0" in text
    saved = load_settings()[0]
    assert (saved.grace_seconds, saved.watchdog_seconds) == (4.0, 90.0)
    assert dialog.behaviour.watchdog.value() == 90.0, "the window shows what is in effect"


@pytest.fixture
def leave_the_theme_as_found() -> Iterator[None]:
    yield
    theme.apply_theme("system")  # the palette is the application's


@pytest.mark.usefixtures("leave_the_theme_as_found")
def test_the_theme_is_picked_in_preferences_applied_live_and_kept(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    dialog.tabs.setCurrentWidget(dialog.behaviour)
    choice = child(dialog, QComboBox, "themeChoice")
    assert choice.currentData() == "system"
    choice.setCurrentIndex(choice.findData("dark"))  # as a user's pick does: no Save needed
    assert theme.is_dark() and QApplication.palette().base().color().lightness() < 60
    assert drv.window.view_menu.theme_actions["dark"].isChecked(), "the View menu follows"
    assert tomllib.loads((home / "settings.toml").read_text())["appearance"]["theme"] == "dark"
    choice.setCurrentIndex(choice.findData("light"))
    assert not theme.is_dark()
    assert load_settings()[0].theme == "light"


@pytest.mark.usefixtures("leave_the_theme_as_found")
def test_a_save_after_a_view_menu_theme_change_keeps_that_theme(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    """Before: Preferences, open while View → Theme → Dark was picked, wrote "system" back on
    its next Save (it held the settings it was opened with)."""
    drv = start_app()
    dialog = open_preferences(drv)
    dialog.behaviour.grace.setValue(5.0)  # an edit made before the menu is used: kept
    drv.window.view_menu.theme_actions["dark"].trigger()
    assert child(dialog, QComboBox, "themeChoice").currentData() == "dark", "the page follows"
    assert dialog.behaviour.grace.value() == 5.0
    dialog.behaviour.watchdog.setValue(30)
    child(dialog, QPushButton, "settingsSave").click()
    saved = load_settings()[0]
    assert (saved.theme, saved.grace_seconds, saved.watchdog_seconds) == ("dark", 5.0, 30.0)
    assert theme.is_dark() and drv.window.view_menu.theme_actions["dark"].isChecked()
