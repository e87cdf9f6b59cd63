"""A broken settings file: the app starts and says where and why, offers to open the file, and
the Preferences window never saves over it."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QLabel, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, open_preferences
from ui.uihelpers import StartApp

from tolaria.ui.settings.behaviour_page import BehaviourPage

BROKEN = b"# hand-edited\n[shortcuts]\nstop = \"Esc\"\n[behaviour\nwatchdog_seconds = 30\n"


class UrlRecorder(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url)


def test_a_corrupt_settings_file_leaves_the_app_usable_and_the_file_untouched(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    settings_file = home / "settings.toml"
    settings_file.write_bytes(BROKEN)
    drv = start_app()
    problems = child(drv.window, QLabel, "settingsProblems")
    assert problems.isVisible()
    assert str(settings_file) in problems.text() and "4" in problems.text(), problems.text()

    # The chat works with the defaults.
    drv.send("hello")
    assert drv.wait_finished().status == "completed"

    # "Open the settings file" hands the file to the desktop (here: a handler we own).
    recorder = UrlRecorder()
    QDesktopServices.setUrlHandler("file", recorder, "open")  # type: ignore[arg-type]
    try:
        button = child(drv.window, QPushButton, "openSettingsFileButton")
        assert button.isVisible()
        button.click()
        dialog = open_preferences(drv)
        banner = child(dialog, QLabel, "settingsFileProblem")
        assert not banner.isHidden() and str(settings_file) in banner.text()
        child(dialog, QPushButton, "openSettingsFile").click()
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert [u.toLocalFile() for u in recorder.urls] == [str(settings_file)] * 2

    # Saving is refused, with the reason; the file is byte for byte what the user wrote.
    behaviour = dialog.findChild(BehaviourPage, "behaviourPage")
    assert behaviour is not None
    behaviour.grace.setValue(5.0)
    child(dialog, QPushButton, "settingsSave").click()
    error = child(dialog, QLabel, "settingsSaveError")
    assert not error.isHidden() and "Not saved" in error.text()
    assert str(settings_file) in error.text(), error.text()
    assert settings_file.read_bytes() == BROKEN
    assert drv.app.controller.grace_s == 1.0, "nothing was applied"
