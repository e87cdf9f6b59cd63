"""Limits in the window: Preferences' limits reach the next run; a run that reaches one is stopped
the normal way (tree gone, partial output kept), its turn says "Stopped: ... limit reached", a
warning at 80 % shows once, and all of it comes back from the store. A chat's own limits win
over Preferences'."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialogButtonBox, QLabel, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, close_preferences, open_preferences
from ui.uihelpers import StartApp, processes_of

from tolaria.chats.engine.limits import chat_limits, set_chat_limits
from tolaria.config.settings import load_settings
from tolaria.core.events import Done
from tolaria.core.limits import RunLimits
from tolaria.core.store.db import MARKER_STOP_REQUESTED
from tolaria.ui.window.chat_limits import ChatLimitsDialog


def warnings_of(turn: QLabel | object) -> list[str]:
    assert hasattr(turn, "findChildren")
    return [label.text() for label in turn.findChildren(QLabel, "limitNotice")]


def test_a_time_limit_from_preferences_stops_the_run_and_the_turn_says_so(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    dialog = open_preferences(drv)
    dialog.behaviour.limits.minutes.setValue(0.1)  # 6 s
    child(dialog, QPushButton, "settingsSave").click()
    close_preferences(drv, dialog, qtbot)
    assert load_settings()[0].limit_time_seconds == 6.0

    stream_id = drv.send("please run something long")
    drv.wait_tool_running(stream_id)
    turn = drv.wait_finished(timeout_ms=20_000)
    assert processes_of(stream_id) == [], "the run's process tree must be gone"
    assert turn.status == "cancelled"
    assert turn.footer.text().startswith("Stopped: 6 s limit reached after ")
    assert "Stopped: 6 s limit reached" in drv.pane.status_line.text
    assert "I'll run a command" in turn.text(), "partial output stays"
    assert warnings_of(turn) == ["⚠ 80 % of the 6 s limit used"]
    if os.environ.get("TOLARIA_SHOTS"):
        drv.window.grab().save(str(Path(os.environ["TOLARIA_SHOTS"]) / "limit_stopped.png"))

    stored = drv.app.store.turn_by_stream(stream_id)
    assert stored is not None and stored.status == "cancelled"
    done = drv.app.store.events(stored.id)[-1]
    assert isinstance(done, Done) and (done.limit, done.limit_value) == ("time", 6.0)
    markers = drv.app.store.markers(stored.conversation_id, MARKER_STOP_REQUESTED)
    assert [m.data.get("limit") for m in markers] == ["time"]

    # The same turn rebuilt from the store (the chat opened again) says the same.
    conversation_id = drv.pane.conversation_id
    drv.window.new_action.trigger()
    qtbot.waitUntil(lambda: drv.pane.conversation_id != conversation_id)
    drv.window.sidebar.select(conversation_id)
    qtbot.waitUntil(lambda: drv.pane.conversation_id == conversation_id and
                    bool(drv.pane.turn_views()))
    again = drv.last_turn()
    qtbot.waitUntil(lambda: not again.busy)
    assert again.footer.text().startswith("Stopped: 6 s limit reached")
    assert warnings_of(again) == ["⚠ 80 % of the 6 s limit used"]


def test_a_user_stop_with_limits_set_is_a_plain_stop(
        start_app: StartApp, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    drv.app.controller.run_config.settings = load_settings()[0].__class__(
        limit_time_seconds=600.0)
    stream_id = drv.send("stop me")
    drv.wait_tool_running(stream_id)
    drv.button("stopButton").click()
    turn = drv.wait_finished()
    assert processes_of(stream_id) == []
    assert turn.footer.text().startswith("Stopped after ")
    stored = drv.app.store.turn_by_stream(stream_id)
    assert stored is not None
    done = drv.app.store.events(stored.id)[-1]
    assert isinstance(done, Done) and done.limit is None
    assert warnings_of(turn) == []


def test_a_chats_own_limits_win_over_preferences(
        start_app: StartApp, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    drv.app.controller.run_config.settings = load_settings()[0].__class__(
        limit_time_seconds=600.0)
    first = drv.send("first")  # makes the chat
    drv.wait_tool_running(first)
    drv.button("stopButton").click()
    drv.wait_finished()
    conversation_id = drv.pane.conversation_id
    assert conversation_id is not None
    set_chat_limits(drv.app.store, conversation_id, RunLimits(max_time_s=1.5))
    assert chat_limits(drv.app.store, conversation_id) == RunLimits(max_time_s=1.5)
    stream_id = drv.send("second")
    turn = drv.wait_finished(timeout_ms=20_000)
    assert processes_of(stream_id) == []
    assert turn.footer.text().startswith("Stopped: 1.5 s limit reached")
    # 0 in the chat's own: no limit of that kind, whatever Preferences say.
    set_chat_limits(drv.app.store, conversation_id, RunLimits(max_time_s=0))
    assert drv.app.controller.engine.limits_for(conversation_id).effective() == RunLimits()


def test_run_menu_chat_limits_keeps_the_chats_own(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    drv.window.limit_defaults = RunLimits(max_cost_usd=2.0)
    drv.send("make the chat")
    drv.wait_finished()
    conversation_id = drv.pane.conversation_id
    assert conversation_id is not None
    drv.window.chat_limits_action.trigger()
    dialog = drv.window.findChild(ChatLimitsDialog, "chatLimitsDialog")
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible)
    intro = dialog.findChild(QLabel)
    assert intro is not None and "Preferences' ($2.00)" in intro.text()
    assert dialog.fields.cost.text() == "Default"
    dialog.fields.tool_calls.setValue(12)
    dialog.fields.minutes.setValue(1.5)
    if os.environ.get("TOLARIA_SHOTS"):
        dialog.grab().save(str(Path(os.environ["TOLARIA_SHOTS"]) / "chat_limits.png"))
    buttons = dialog.findChild(QDialogButtonBox, "chatLimitsButtons")
    assert buttons is not None
    buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    engine = drv.app.controller.engine
    qtbot.waitUntil(lambda: chat_limits(drv.app.store, conversation_id)
                    == RunLimits(max_time_s=90.0, max_tool_calls=12))
    engine.limits = RunLimits(max_cost_usd=2.0, max_tool_calls=50)
    assert engine.limits_for(conversation_id) == RunLimits(90.0, 2.0, None, 12)
    # Opened again, it shows what was kept.
    qtbot.waitUntil(lambda: drv.window.findChild(ChatLimitsDialog) is None)
    drv.window.chat_limits_action.trigger()
    again = drv.window.findChild(ChatLimitsDialog, "chatLimitsDialog")
    assert again is not None
    assert (again.fields.tool_calls.value(), again.fields.minutes.value()) == (12, 1.5)
    again.reject()
