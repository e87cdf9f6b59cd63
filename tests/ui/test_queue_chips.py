"""The persistent queue (issue 18 item 3): queued messages are stored, survive a quit and a
SIGKILLed window (shown again, paused), can be reordered, edited in place, paused, and "Send now"
stops the running turn the normal way and sends that message next."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psutil
import pytest
from helpers import sigkill
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QPushButton
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, processes_of, window_process, window_script

from tolaria.core.store.db import MARKER_MESSAGES_DELIVERED
from tolaria.core.store.markers import MARKER_MESSAGE_STEERED
from tolaria.ui.composer.queue_chips import DRAG_MIME, QueuedChip, QueuedChips


def chips(drv: AppDriver) -> list[QueuedChip]:
    return drv.pane.queued_chips.chips()


def texts(drv: AppDriver) -> list[str]:
    return [c.label.text() for c in chips(drv)]


def stored(drv: AppDriver) -> list[str]:
    return [m.text for m in drv.app.store.queued(drv.pane.conversation_id)]


def chip_button(chip: QueuedChip, name: str) -> QPushButton:
    found = chip.findChild(QPushButton, name)
    assert found is not None
    return found


def queue_behind_a_long_turn(drv: AppDriver, *messages: str) -> str:
    running = drv.send("busy")
    drv.wait_tool_running(running)
    for text in messages:
        drv.pane.composer.setPlainText(text)
        QTest.keyClick(drv.pane.composer, Qt.Key.Key_Return)
    drv.qtbot.waitUntil(lambda: texts(drv) == list(messages))
    assert stored(drv) == list(messages), "stored the moment they were typed"
    return running


def drag_and_drop(bar: QueuedChips, chip: QueuedChip, where: QPoint) -> None:
    """What Qt delivers to the bar when ``chip`` is dragged over it and dropped at ``where``
    (``QDrag.exec`` itself runs a nested loop a test cannot drive)."""
    mime = QMimeData()
    mime.setData(DRAG_MIME, str(chip.message.id).encode())
    args = (Qt.DropAction.MoveAction, mime, Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier)
    assert QApplication.sendEvent(bar, QDragEnterEvent(where, *args))
    assert QApplication.sendEvent(bar, QDragMoveEvent(where, *args))
    assert QApplication.sendEvent(bar, QDropEvent(QPointF(where), *args))


def prompts(drv: AppDriver) -> list[tuple[str, str]]:
    return [(t.prompt, t.status) for t in drv.app.store.turns(drv.pane.conversation_id)]


def test_reorder_edit_in_place_and_a_paused_queue_is_not_delivered(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    first = queue_behind_a_long_turn(drv, "a", "b", "c")
    bar = drv.pane.queued_chips
    assert bar.header.text() == "3 queued · sent when this turn ends"
    assert not chip_button(chips(drv)[0], "queuedUpButton").isEnabled()

    chip_button(chips(drv)[0], "queuedDownButton").click()
    qtbot.waitUntil(lambda: texts(drv) == ["b", "a", "c"])
    chips(drv)[2].setFocus()
    QTest.keyClick(chips(drv)[2], Qt.Key.Key_Up, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: texts(drv) == ["b", "c", "a"])
    focused = next(c for c in chips(drv) if c.hasFocus())  # the moved chip keeps the keyboard
    QTest.keyClick(focused, Qt.Key.Key_Up, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: texts(drv) == ["c", "b", "a"])
    assert stored(drv) == ["c", "b", "a"]

    # Dragged: "c" dropped on the lower half of the last chip goes last.
    drag_and_drop(bar, chips(drv)[0], QPoint(10, chips(drv)[-1].geometry().bottom() - 1))
    qtbot.waitUntil(lambda: texts(drv) == ["b", "a", "c"])
    chips(drv)[2].setFocus()
    QTest.keyClick(chips(drv)[2], Qt.Key.Key_Up, Qt.KeyboardModifier.AltModifier)
    QTest.keyClick(next(c for c in chips(drv) if c.hasFocus()), Qt.Key.Key_Up,
                   Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: texts(drv) == ["c", "b", "a"])

    middle = chips(drv)[1]
    middle.setFocus()
    QTest.keyClick(middle, Qt.Key.Key_F2)
    assert middle.editor.isVisible()
    QTest.keyClick(middle.editor, Qt.Key.Key_Escape)
    assert not middle.editor.isVisible() and texts(drv) == ["c", "b", "a"]
    assert drv.pane.running_stream == first, "Esc in the editor cancels the edit, not the turn"
    QTest.mouseDClick(middle.label, Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    assert middle.editor.isVisible() and middle.editor.text() == "b"
    middle.editor.setText("b, edited in place")
    QTest.keyClick(middle.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: texts(drv) == ["c", "b, edited in place", "a"])
    assert stored(drv) == ["c", "b, edited in place", "a"], "an edit keeps the place"

    bar.pause_button.click()
    qtbot.waitUntil(lambda: "paused" in bar.header.text())
    assert bar.pause_button.text() == "Resume"
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    drv.button("stopButton").click()
    drv.wait_finished()
    qtbot.wait(300)  # the delivery would happen one loop turn after the end
    assert drv.pane.running_stream is None, "a paused queue is not delivered"
    assert prompts(drv) == [("busy", "cancelled")]
    assert texts(drv) == ["c", "b, edited in place", "a"]
    assert processes_of(first) == []

    bar.pause_button.click()  # resume with nothing running: delivered at once, in this order
    qtbot.waitUntil(lambda: drv.pane.running_stream is not None)
    drv.wait_finished()
    assert prompts(drv) == [("busy", "cancelled"), ("c\n\nb, edited in place\n\na", "completed")]
    assert texts(drv) == [] and stored(drv) == []
    assert len(drv.app.store.markers(drv.pane.conversation_id, MARKER_MESSAGES_DELIVERED)) == 1


def test_send_now_stops_the_turn_and_sends_that_message_next(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    first = queue_behind_a_long_turn(drv, "a", "b", "c")
    qtbot.waitUntil(lambda: drv.last_turn().text() != "")
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    chip_button(chips(drv)[1], "queuedSendNowButton").click()
    qtbot.waitUntil(lambda: drv.pane.running_stream not in (None, first), timeout=10_000)
    assert processes_of(first) == [], "stopped the normal way: the whole tree is gone"
    cancelled = drv.pane.transcript.turn(first)
    assert cancelled is not None
    qtbot.waitUntil(lambda: cancelled.status == "cancelled")  # (applied on the next frame)
    assert cancelled.text(), "the cancelled turn keeps its partial output"
    assert texts(drv) == ["a", "c"]
    drv.wait_finished()
    # Then the rest of the (unpaused) queue goes as usual.
    qtbot.waitUntil(lambda: len(prompts(drv)) == 3 and prompts(drv)[-1][1] == "completed",
                    timeout=15_000)
    assert prompts(drv) == [("busy", "cancelled"), ("b", "completed"), ("a\n\nc", "completed")]
    delivered = drv.app.store.markers(drv.pane.conversation_id, MARKER_MESSAGES_DELIVERED)
    assert [m.data["messages"] for m in delivered] == [["b"], ["a", "c"]]
    assert not drv.app.store.markers(drv.pane.conversation_id, MARKER_MESSAGE_STEERED), \
        "Send now never steers: it stopped the turn"
    drv.wait_finished()


def test_queue_survives_a_quit_and_comes_back_paused(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    queue_behind_a_long_turn(drv, "after the restart", "me too")
    drv.close()  # quits: the run is stopped, the queue kept (not delivered at quit)

    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    again = start_app()
    qtbot.waitUntil(lambda: texts(again) == ["after the restart", "me too"])
    bar = again.pane.queued_chips
    assert bar.isVisible()
    assert bar.header.text() == "2 queued · paused: not sent before Tolaria quit"
    qtbot.wait(300)
    assert again.pane.running_stream is None, "nothing is sent by surprise at start"
    bar.pause_button.click()
    qtbot.waitUntil(lambda: again.pane.running_stream is not None)
    again.wait_finished()
    assert prompts(again)[-1] == ("after the restart\n\nme too", "completed")


#: The real app (``tolaria.app.main.run``); once started it sends a long demo turn and queues two
#: messages through the window's composer, then says so and waits to be SIGKILLed.
QUEUEING_GUI = window_script("""
    self.controller.send(pane.conversation_id, "busy")
    for text in ("typed before the crash", "and this"):
        pane.composer.setPlainText(text)
        QTest.keyClick(pane.composer, Qt.Key.Key_Return)
""")


def _kill_tree_of(stream_id: str) -> None:
    """The killed window's agent and tool outlive it (new sessions): end them, as a test must."""
    for proc in processes_of(stream_id):
        try:
            proc.kill()
        except psutil.Error:
            continue
    deadline = time.monotonic() + 10
    while processes_of(stream_id) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_queue_survives_a_sigkilled_window_and_comes_back_paused(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    def end_tree(stream_id: str) -> None:
        if stream_id:
            _kill_tree_of(stream_id)

    with window_process(QUEUEING_GUI, cwd=home, after=end_tree,
                        TOLARIA_DEMO_TOOL_SECONDS="60") as (proc, _stream_id):
        sigkill(proc)  # at once: no shutdown, no flush interval
    assert proc.returncode == -signal.SIGKILL

    drv = start_app()
    qtbot.waitUntil(lambda: texts(drv) == ["typed before the crash", "and this"])
    bar = drv.pane.queued_chips
    assert bar.header.text() == ("2 queued · paused: Tolaria quit unexpectedly; "
                                 "these were not sent")
    assert [t.status for t in drv.app.store.turns(drv.pane.conversation_id)] == ["interrupted"]
    qtbot.wait(300)
    assert drv.pane.running_stream is None, "nothing is sent by surprise after a crash"
    chip_button(chips(drv)[0], "queuedRemoveButton").click()
    qtbot.waitUntil(lambda: texts(drv) == ["and this"])
    bar.pause_button.click()
    qtbot.waitUntil(lambda: drv.pane.running_stream is not None)
    drv.wait_finished()
    assert prompts(drv)[-1] == ("and this", "completed")
