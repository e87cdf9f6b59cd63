"""The fan-out window (issue 17, item 6): equal columns, Ctrl+W closes it, Run → Jobs lists past
jobs and reopens them (also after a restart), and the members are grouped in the sidebar."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
from helpers import fake_manifest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot
from ui.test_fanout import add_agent, fan_out, wait_pane_done
from ui.uihelpers import AppDriver

from tolaria.ui.chat.chat_pane import ChatPane
from tolaria.ui.fanout.fanout_view import FanOutView

Start = Callable[..., AppDriver]


def _first_turn_completed(pane: ChatPane) -> bool:
    return bool(pane.turn_views()) and pane.turn_views()[0].status == "completed"


def _done_job(drv: AppDriver, qtbot: QtBot, prompt: str) -> FanOutView:
    view = fan_out(drv, prompt, ["demo", "fake-normal"])
    for pane in view.panes():
        wait_pane_done(qtbot, pane)
    return view


def test_columns_are_equal_and_ctrl_w_closes(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    add_agent(drv, fake_manifest("normal"))
    view = _done_job(drv, qtbot, "compare these")
    qtbot.waitExposed(view)
    widths = view.splitter.sizes()
    assert len(widths) == 2 and max(widths) - min(widths) <= 1, widths
    view.activateWindow()
    qtbot.waitUntil(view.isActiveWindow)
    QTest.keyClick(view.panes()[0].composer, Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not view.isVisible())
    assert drv.window.isVisible(), "only the job window closes"


def test_jobs_are_listed_reopened_and_grouped(start_app: Start, qtbot: QtBot) -> None:
    first = start_app()
    add_agent(first, fake_manifest("normal"))
    view = _done_job(first, qtbot, "first question")
    members = [m.conversation_id for m in view.job.members]
    job_id = view.job.job_id
    menu = first.window.jobs_menu
    qtbot.waitUntil(lambda: any("first question" in a.text() for a in menu.actions()))
    (entry,) = [a for a in menu.actions() if a.data() == job_id]
    assert entry.text() == "first question · 2 agents · done"
    groups = first.window.sidebar.groups()
    assert groups == [("first question · 2 agents · done", members)]
    view.close()
    entry.trigger()
    assert view.isVisible(), "the same window comes back"
    first.close()

    second = start_app()
    add_agent(second, fake_manifest("normal"))
    window = second.window
    assert window.sidebar.groups() == [("first question · 2 agents · done", members)]
    assert window.fan_out_views == {}
    (entry,) = [a for a in window.jobs_menu.actions() if a.data() == job_id]
    entry.trigger()
    reopened = window.fan_out_views[job_id]
    assert reopened.isVisible()
    for pane in reopened.panes():
        qtbot.waitUntil(partial(_first_turn_completed, pane), timeout=10_000)
    assert "Completed" in reopened.header.text()
    # Deleting a member keeps the group with the other one.
    window.delete_requested.emit(members[0])
    qtbot.waitUntil(lambda: window.sidebar.groups()[0][1] == members[1:])
    assert members[0] not in window.sidebar.ids()


def test_the_jobs_menu_says_when_there_is_none(start_app: Start) -> None:
    drv = start_app()
    (only,) = drv.window.jobs_menu.actions()
    assert only.text().startswith("No jobs yet") and not only.isEnabled()
    assert drv.window.sidebar.groups() == []


def test_the_quit_question_counts_fan_out_runs_live(
        start_app: Start, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    add_agent(drv, fake_manifest("normal"))
    view = fan_out(drv, "a long one", ["demo"])
    (pane,) = view.panes()
    stream_id = pane.running_stream
    assert stream_id is not None
    drv.wait_tool_running(stream_id, pane)
    drv.window.close()
    box = drv.window.findChild(QMessageBox, "quitDialog")
    assert box is not None and box.text().startswith("1 chat is still running")
    view.stop_job_button.click()
    qtbot.waitUntil(lambda: box.text() == "No chat is running any more.", timeout=15_000)
    box.button(QMessageBox.StandardButton.Cancel).click()
