"""Stop: the button, Esc, Esc under a popup, stop all, and several chats at once."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, processes_of

from tolaria.ui.chat.chat_pane import ChatPane


@pytest.fixture
def long_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")


def assert_stopped(drv: AppDriver, stream_id: str, pane: ChatPane | None=None) -> None:
    turn = drv.wait_finished(pane)
    assert processes_of(stream_id) == [], "the run's process tree must be gone"
    assert turn.status == "cancelled"
    assert "Stopped" in turn.footer.text()
    assert "I'll run a command" in turn.text(), "partial output stays"
    assert [c.status for c in turn.tool_cards()] == ["cancelled"]
    pane = pane or drv.pane
    assert pane.findChild(type(pane.button), "sendButton") is pane.button
    assert "Stopped" in pane.status_line.text
    stored = drv.app.store.turn_by_stream(stream_id)
    assert stored is not None and stored.status == "cancelled"


@pytest.mark.usefixtures("long_tool")
def test_stop_button_kills_the_tree_and_keeps_partial_output(start_app: StartApp) -> None:
    drv = start_app()
    stream_id = drv.send("please run something")
    drv.wait_tool_running(stream_id)
    assert drv.pane.button.objectName() == "stopButton"
    drv.button("stopButton").click()
    assert_stopped(drv, stream_id)


@pytest.mark.usefixtures("long_tool")
def test_esc_stops_the_focused_chat(start_app: StartApp) -> None:
    drv = start_app()
    stream_id = drv.send("esc me")
    drv.wait_tool_running(stream_id)
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Escape)
    assert_stopped(drv, stream_id)


@pytest.mark.usefixtures("long_tool")
def test_esc_with_an_open_popup_or_menu_does_not_stop(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    stream_id = drv.send("keep going")
    drv.wait_tool_running(stream_id)
    picker = drv.window.header.agent_picker
    picker.showPopup()
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is not None)
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Escape)  # the window's Stop must not act
    popup = QApplication.activePopupWidget()
    assert popup is not None
    QTest.keyClick(popup, Qt.Key.Key_Escape)  # closes the dropdown
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is None)

    menu = QMenu(drv.window)
    menu.addAction("Something")
    menu.popup(drv.window.mapToGlobal(QPoint(50, 50)))
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is menu)
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Escape)
    QTest.keyClick(menu, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is None)

    assert drv.pane.running_stream == stream_id
    assert processes_of(stream_id), "the run must still be alive"
    assert drv.last_turn().status == "running"
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Escape)  # now nothing owns Esc: it stops
    assert_stopped(drv, stream_id)


def test_two_chats_run_at_once_and_stopping_one_leaves_the_other(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_DELAY", "0.05")
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    first = drv.pane
    first_stream = drv.send("first chat")
    QTest.keyClick(drv.window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: drv.window.current_pane() is not first)
    second = drv.pane
    second_stream = drv.send("second chat")
    assert first.running_stream == first_stream and second.running_stream == second_stream
    qtbot.waitUntil(lambda: bool(processes_of(first_stream) and processes_of(second_stream)))

    drv.window.open_conversation(first.conversation_id)  # switching never stops a run
    assert second.running_stream == second_stream
    drv.button("stopButton", first).click()
    qtbot.waitUntil(lambda: first.running_stream is None, timeout=10_000)
    assert processes_of(first_stream) == []
    assert processes_of(second_stream), "the other chat keeps running"
    first_turn = first.turn_views()[-1]
    qtbot.waitUntil(lambda: first_turn.status == "cancelled")
    frozen = first_turn.text()

    second_turn = second.turn_views()[-1]
    seen = second_turn.received_chars
    qtbot.waitUntil(lambda: second_turn.received_chars > seen, timeout=10_000)
    assert second.running_stream == second_stream
    assert len(first.turn_views()) == 1 and first_turn.text() == frozen
    assert all(t.stream_id == second_stream for t in second.turn_views())

    # "Stop all runs" from the Run menu stops the rest.
    drv.window.stop_all_action.trigger()
    drv.wait_finished(second)
    assert processes_of(second_stream) == []
    assert second_turn.status == "cancelled"


@pytest.mark.usefixtures("long_tool")
def test_late_events_of_a_stopped_stream_never_reach_a_view(start_app: StartApp) -> None:
    from tolaria.core.events import Done, Error, TextDelta, ToolStart

    drv = start_app()
    stream_id = drv.send("stop me then talk")
    drv.wait_tool_running(stream_id)
    drv.button("stopButton").click()
    turn = drv.wait_finished()
    before = (turn.text(), len(turn.tool_cards()), len(turn.error_cards()), turn.footer.text(),
              turn.received_chars)
    stored_before = len(drv.app.store.events(drv.stored_turn(stream_id).id))
    bridge = drv.app.bridge
    for late in (TextDelta(stream_id, text="LATE TEXT"), ToolStart(stream_id, tool_id="t9",
                 name="Late"), Error(stream_id, message="late error"),
                 Done(stream_id, stop_reason="end_turn")):
        bridge.deliver(late)
    drv.pane.transcript.flush_all()
    after = (turn.text(), len(turn.tool_cards()), len(turn.error_cards()), turn.footer.text(),
             turn.received_chars)
    assert after == before
    assert turn.status == "cancelled"
    assert len(drv.app.store.events(drv.stored_turn(stream_id).id)) == stored_before


def test_content_after_stop_request_is_dropped(start_app: StartApp) -> None:
    from tolaria.core.events import TextDelta

    drv = start_app()
    bridge = drv.app.bridge
    seen: list[object] = []
    bridge.event_received.connect(lambda sid, ev: seen.append(ev))
    bridge.open_stream("ai-agent-stream-manual")
    bridge.deliver(TextDelta("ai-agent-stream-manual", text="before"))
    assert bridge.mark_stopping("ai-agent-stream-manual")
    bridge.deliver(TextDelta("ai-agent-stream-manual", text="after"))
    assert [e.text for e in seen] == ["before"]  # type: ignore[attr-defined]
