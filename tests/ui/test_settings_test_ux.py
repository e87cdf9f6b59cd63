"""Preferences → Test (issue 17, item 5): the elapsed time while testing, a Cancel that stops the
test run's processes, and the agent's reply shown on success."""

from __future__ import annotations

import sys
from collections.abc import Callable

import psutil
from PySide6.QtWidgets import QLabel, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import (
    FAKE_AGENT,
    add_custom_agent,
    child,
    close_preferences,
    open_preferences,
    select_agent,
)
from ui.uihelpers import AppDriver

Start = Callable[..., AppDriver]


def _fake_agents_running(mode: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmdline = proc.cmdline()
        except psutil.Error:
            continue
        if str(FAKE_AGENT) in cmdline and mode in cmdline:
            found.append(proc)
    return found


def test_a_test_shows_its_elapsed_time_and_cancel_stops_it(start_app: Start,
                                                            qtbot: QtBot) -> None:
    drv = start_app()
    add_custom_agent(drv, qtbot, "hanger", [sys.executable, str(FAKE_AGENT), "hang", "{prompt}"])
    dialog = open_preferences(drv)
    select_agent(dialog, "hanger")
    button = child(dialog, QPushButton, "agentTestButton")
    cancel = child(dialog, QPushButton, "agentTestCancel")
    result = child(dialog, QLabel, "agentTestResult")
    assert not cancel.isVisibleTo(dialog)
    button.click()
    assert cancel.isVisibleTo(dialog) and not button.isEnabled()
    assert result.text().startswith("Testing… 0 s"), result.text()
    qtbot.waitUntil(lambda: result.text().startswith("Testing… 2 s"), timeout=10_000)
    qtbot.waitUntil(lambda: bool(_fake_agents_running("hang")), timeout=10_000)
    cancel.click()
    qtbot.waitUntil(button.isEnabled, timeout=15_000)
    assert result.text() == "Test cancelled."
    assert not cancel.isVisibleTo(dialog)
    assert _fake_agents_running("hang") == [], "the test run's process is gone"
    close_preferences(drv, dialog, qtbot)


def test_a_successful_test_shows_the_reply(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    add_custom_agent(drv, qtbot, "talker", [sys.executable, str(FAKE_AGENT), "normal",
                                            "{prompt}"])
    dialog = open_preferences(drv)
    select_agent(dialog, "talker")
    button = child(dialog, QPushButton, "agentTestButton")
    result = child(dialog, QLabel, "agentTestResult")
    button.click()
    qtbot.waitUntil(button.isEnabled, timeout=30_000)
    assert result.text().startswith("✓ Works"), result.text()
    assert "Its reply: “Hello from fake" in result.text(), result.text()
    close_preferences(drv, dialog, qtbot)
