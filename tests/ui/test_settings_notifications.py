"""Preferences → Behaviour → Notifications: a switch per kind and the stall time, written to
``[notifications]`` like the rest of the settings and taken by the running window at once."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, close_preferences, open_preferences
from ui.uihelpers import StartApp, save_shot

from tolaria.chats.notify.notices import KINDS
from tolaria.config.settings import load_settings
from tolaria.ui import theme


@pytest.fixture
def leave_the_theme_as_found() -> Iterator[None]:
    yield
    theme.apply_theme("system")


def test_each_kind_is_a_setting_saved_and_applied(start_app: StartApp, qtbot: QtBot,
                                                  home: Path) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    dialog.tabs.setCurrentWidget(dialog.behaviour)
    assert all(child(dialog, QCheckBox, f"notify_{k}").isChecked() for k in KINDS)
    child(dialog, QCheckBox, "notify_stall").click()
    child(dialog, QCheckBox, "notify_finished").click()
    child(dialog, QDoubleSpinBox, "notifyStallMinutes").setValue(2.5)
    child(dialog, QPushButton, "settingsSave").click()
    written = tomllib.loads((home / "settings.toml").read_text("utf-8"))["notifications"]
    assert written == {"finished": False, "stall": False, "stall_minutes": 2.5}
    saved = load_settings()[0]
    assert saved.notify_kinds() == set(KINDS) - {"finished", "stall"}
    book = drv.app.notifications.book
    assert book.kinds == saved.notify_kinds() and book.enabled
    assert drv.app.notifications.stalls.after_s == 150
    master = child(dialog, QCheckBox, "notifyBackground")
    master.click()  # everything off: the kinds are greyed, and kept as they were
    assert not child(dialog, QCheckBox, "notify_failed").isEnabled()
    child(dialog, QPushButton, "settingsSave").click()
    assert not drv.app.notifications.book.enabled
    assert load_settings()[0].notify_kinds() == saved.notify_kinds()
    close_preferences(drv, dialog, qtbot)


@pytest.mark.usefixtures("leave_the_theme_as_found")
@pytest.mark.parametrize("name", ["light", "dark"])
def test_the_notifications_part_in_light_and_dark(start_app: StartApp, qtbot: QtBot,
                                                  tmp_path: Path, name: str) -> None:
    drv = start_app()
    drv.window.view_menu.theme_actions[name].trigger()
    assert theme.is_dark() == (name == "dark")
    dialog = open_preferences(drv)
    dialog.tabs.setCurrentWidget(dialog.behaviour)
    dialog.resize(820, 760)
    qtbot.wait(50)
    shot = save_shot(dialog, tmp_path, f"preferences-notifications-{name}.png")
    assert shot.stat().st_size > 10_000
    close_preferences(drv, dialog, qtbot)
