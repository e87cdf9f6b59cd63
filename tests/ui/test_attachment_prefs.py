"""Preferences → Behaviour → Attachments (issue 26): the per-file and per-chat caps typed as MB;
bad input says what is wrong right under its field and holds Save; a good value is written to
settings.toml's ``[attachments]`` (atomically, by the settings writer) and holds the next file
attached at once."""

from __future__ import annotations

import tomllib
from pathlib import Path

from PySide6.QtWidgets import QLabel, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, open_preferences, type_into
from ui.uihelpers import StartApp, save_shot

from tolaria.core.attachments.model import MB
from tolaria.ui import theme


def test_attachment_caps_are_validated_and_saved(start_app: StartApp, qtbot: QtBot,
                                                 home: Path, tmp_path: Path) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    dialog.tabs.setCurrentWidget(dialog.behaviour)
    per_file = child(dialog, QLineEdit, "attachMaxFileMb")
    per_chat = child(dialog, QLineEdit, "attachMaxChatMb")
    file_error = child(dialog, QLabel, "attachMaxFileError")
    chat_error = child(dialog, QLabel, "attachMaxChatError")
    save = child(dialog, QPushButton, "settingsSave")
    assert (per_file.text(), per_chat.text()) == ("32", "256")
    assert file_error.isHidden() and chat_error.isHidden()
    for typed, problem in (("lots", "'lots' is not a number of MB"),
                           ("0", "Must be more than 0 MB"), ("5000", "At most 4096 MB"),
                           ("", "Type a number of MB")):
        type_into(per_file, typed)
        assert not file_error.isHidden() and file_error.text() == problem, typed
        assert not save.isEnabled()
    type_into(per_file, "8")
    type_into(per_chat, "4")
    assert file_error.isHidden()
    assert chat_error.text() == "Less than the per-file cap (8 MB)"
    assert not save.isEnabled()
    for name in ("light", "dark"):
        theme.apply_theme(name)
        save_shot(dialog, tmp_path, f"prefs-attachments-{name}.png")
    theme.apply_theme("light")
    type_into(per_chat, "64.5")
    assert chat_error.isHidden() and save.isEnabled()
    save.click()
    settings_file = home / "settings.toml"
    qtbot.waitUntil(lambda: settings_file.is_file()
                    and "attachments" in tomllib.loads(settings_file.read_text()), timeout=5_000)
    written = tomllib.loads(settings_file.read_text())["attachments"]
    assert written == {"max_file_mb": 8.0, "max_chat_mb": 64.5}
    qtbot.waitUntil(lambda: drv.app.attaching.desk.limits.max_file == 8 * MB, timeout=5_000)
    assert drv.app.attaching.desk.limits.max_chat == int(64.5 * MB)
