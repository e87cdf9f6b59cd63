"""Operator control of in-flight work (issue 6): cancelled keeps its output and goes into the next
prompt's history, queued messages, restart of a wedged turn, awaiting the operator, delete."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

import psutil
import pytest
from helpers import fake_manifest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, processes_of

from tolaria.chats.inflight import RESUME, QueueChange
from tolaria.core.events import TextDelta
from tolaria.core.store.db import (
    MARKER_MESSAGE_QUEUED,
    MARKER_MESSAGE_UNQUEUED,
    MARKER_MESSAGES_DELIVERED,
    MARKER_STOP_REQUESTED,
    MARKER_TURN_RESTARTED,
)
from tolaria.ui.composer.queue_chips import QueuedChip


def chips(drv: AppDriver) -> list[QueuedChip]:
    return drv.pane.queued_chips.chips()


def chip_button(chip: QueuedChip, name: str) -> QPushButton:
    found = chip.findChild(QPushButton, name)
    assert found is not None
    return found


def type_and_enter(drv: AppDriver, text: str) -> None:
    drv.pane.composer.setPlainText(text)
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Return)


def agent_cmdline(stream_id: str) -> str:
    """The argv of the run's agent process (the fake gets the full prompt as its last arg)."""
    for proc in processes_of(stream_id):
        try:
            line = proc.cmdline()
        except psutil.Error:
            continue
        if any(part.endswith("fake_agent.py") for part in line):
            return "\n".join(line)
    return ""


def test_stopped_turn_is_cancelled_keeps_output_and_is_history(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    drv.use_agent(fake_manifest("tool"))
    stream_id = drv.send("run a long tool")
    drv.wait_tool_running(stream_id)
    qtbot.waitUntil(lambda: "I'll run a tool." in drv.last_turn().text())
    drv.button("stopButton").click()
    turn = drv.wait_finished()
    assert processes_of(stream_id) == []
    assert turn.status == "cancelled" and "Stopped" in turn.footer.text()
    assert "I'll run a tool." in turn.text()
    assert [c.status for c in turn.tool_cards()] == ["cancelled"]
    store = drv.app.store
    stored = store.turn_by_stream(stream_id)
    assert stored is not None and stored.status == "cancelled"  # not failed, not interrupted
    assert any(m.kind == MARKER_STOP_REQUESTED and m.turn_id == stored.id
               for m in store.markers(drv.pane.conversation_id))

    # The fake adapter cannot resume a session: the next prompt carries the stopped turn, marked.
    drv.use_agent(fake_manifest("hang"))
    follow = drv.send("and now?")
    qtbot.waitUntil(lambda: "and now?" in agent_cmdline(follow), timeout=10_000)
    argv = agent_cmdline(follow)
    assert "User: run a long tool" in argv
    assert "I'll run a tool." in argv and "[stopped by the user]" in argv
    drv.button("stopButton").click()
    drv.wait_finished()
    # (A resuming adapter, like the demo's, continues the agent's own session instead: the agent
    # kept what it did itself and nothing extra is sent; see ChatController's docstring.)


def test_queued_messages_can_be_edited_removed_and_go_right_after_a_stop(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    first = drv.send("busy")
    drv.wait_tool_running(first)
    composer = drv.pane.composer
    type_and_enter(drv, "first queued")
    type_and_enter(drv, "second queued")
    assert composer.isEnabled() and composer.toPlainText() == ""
    qtbot.waitUntil(lambda: len(chips(drv)) == 2)
    assert [c.label.text() for c in chips(drv)] == ["first queued", "second queued"]
    assert drv.pane.running_stream == first, "queueing never touches the running turn"

    chip_button(chips(drv)[0], "queuedRemoveButton").click()
    qtbot.waitUntil(lambda: [c.label.text() for c in chips(drv)] == ["second queued"])
    chip_button(chips(drv)[0], "queuedEditButton").click()
    qtbot.waitUntil(lambda: chips(drv) == [])
    assert composer.toPlainText() == "second queued"
    type_and_enter(drv, "second, edited")
    qtbot.waitUntil(lambda: [c.label.text() for c in chips(drv)] == ["second, edited"])
    assert drv.pane.queued_chips.isVisible()

    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")  # the delivered turn finishes quickly
    drv.button("stopButton").click()
    qtbot.waitUntil(lambda: drv.pane.running_stream not in (None, first), timeout=10_000)
    assert processes_of(first) == []
    assert chips(drv) == [] and not drv.pane.queued_chips.isVisible()
    delivered = drv.pane.running_stream
    turn = drv.wait_finished()
    assert turn.stream_id == delivered and turn.status == "completed"
    store, cid = drv.app.store, drv.pane.conversation_id
    assert [(t.prompt, t.status) for t in store.turns(cid)] == [
        ("busy", "cancelled"), ("second, edited", "completed")]
    marks = store.markers(cid, MARKER_MESSAGES_DELIVERED)
    assert len(marks) == 1, "delivered once"
    assert marks[0].turn_id == store.turns(cid)[1].id
    assert marks[0].data["messages"] == ["second, edited"]
    assert [m.data["text"] for m in store.markers(cid, MARKER_MESSAGE_QUEUED)] == [
        "first queued", "second queued", "second, edited"]
    assert [m.data["text"] for m in store.markers(cid, MARKER_MESSAGE_UNQUEUED)] == [
        "first queued", "second queued"]
    assert not drv.pane.awaiting.isVisible(), "the demo acted (a tool): it does not wait"


def test_queue_is_delivered_when_the_turn_ends_by_itself(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    first = drv.send("first")
    drv.wait_tool_running(first)
    type_and_enter(drv, "one")
    type_and_enter(drv, "two")
    qtbot.waitUntil(lambda: len(chips(drv)) == 2)
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    # End the demo's tool ourselves: the turn then completes on its own.
    for proc in processes_of(first):
        if proc.name() == "sleep":
            proc.kill()
    qtbot.waitUntil(lambda: drv.pane.running_stream not in (None, first), timeout=10_000)
    assert chips(drv) == []
    drv.wait_finished()
    store, cid = drv.app.store, drv.pane.conversation_id
    assert [(t.prompt, t.status) for t in store.turns(cid)] == [
        ("first", "completed"), ("one\n\ntwo", "completed")]
    assert len(store.markers(cid, MARKER_MESSAGES_DELIVERED)) == 1


def test_watchdog_offers_restart_and_restart_reruns_a_hung_turn(
        start_app: StartApp, home: Path, tmp_path: Path, qtbot: QtBot) -> None:
    (home / "settings.toml").write_text("[behaviour]\nwatchdog_seconds = 0.3\n")
    drv = start_app()
    drv.use_agent(fake_manifest("hang_once", env={"FAKE_ONCE_FILE": str(tmp_path / "once")}))
    old = drv.send("please do it")
    assert drv.button("restartButton").isVisible()
    qtbot.waitUntil(lambda: drv.pane.watchdog.isVisible(), timeout=5_000)
    silence = re.search(r"No output for (\d+\.\d) s", drv.pane.watchdog.text())
    assert silence and float(silence[1]) >= 0.3  # the real silence, not a fixed text
    assert "Restart turn?" in drv.pane.watchdog.text()
    # It only offers: the turn keeps running (on a loaded machine the agent may still be
    # starting when 0.3 s of silence have passed: it comes up and hangs). Wait for its mark:
    # a restart before the agent marked its first attempt would make the rerun hang too.
    qtbot.waitUntil(lambda: (tmp_path / "once").exists() and bool(processes_of(old)),
                    timeout=10_000)
    assert drv.pane.running_stream == old
    old_view = drv.last_turn()

    QTest.keyClick(drv.pane.composer, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: drv.pane.running_stream not in (None, old), timeout=10_000)
    assert processes_of(old) == [], "the abandoned attempt's tree is gone"
    new_view = drv.wait_finished()
    assert new_view is not old_view and new_view.status == "completed"
    assert "Finished." in new_view.text()
    assert old_view.status == "cancelled" and old_view.restarted
    assert not old_view.body.isVisible(), "the abandoned attempt is kept, collapsed"
    assert old_view.abandoned_toggle is not None
    old_view.abandoned_toggle.click()
    assert old_view.body.isVisible()
    assert not drv.pane.watchdog.isVisible()
    assert not drv.button("restartButton").isVisible()

    store, cid = drv.app.store, drv.pane.conversation_id
    turns = store.turns(cid)
    assert [(t.prompt, t.status) for t in turns] == [
        ("please do it", "cancelled"), ("please do it", "completed")]
    restarted = store.markers(cid, MARKER_TURN_RESTARTED)
    assert [(m.turn_id, m.data["restarted_as"]) for m in restarted] == [
        (turns[0].id, turns[1].stream_id)]
    # The abandoned attempt is not part of the history of later prompts.
    assert [t.id for t in drv.app.controller.answered_turns(cid)] == [turns[1].id]
    drv.close()

    again = start_app()  # reopened: still collapsed
    pane = again.pane
    qtbot.waitUntil(lambda: len(pane.turn_views()) == 2 and not pane.transcript.busy)
    assert pane.turn_views()[0].restarted and not pane.turn_views()[1].restarted


def test_a_turn_ending_with_a_question_waits_for_the_operator(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    drv.use_agent(fake_manifest("ask"))
    drv.send("fix the bug")
    turn = drv.wait_finished()
    assert turn.status == "completed"
    notice = drv.pane.awaiting
    assert notice.isVisible() and "waiting for your reply" in notice.text()
    drv.use_agent(fake_manifest("hang"))
    follow = drv.send("the one in main.py")
    assert not notice.isVisible()
    qtbot.waitUntil(lambda: "the one in main.py" in agent_cmdline(follow), timeout=10_000)
    assert "Which file should I change?" in agent_cmdline(follow), "the next message resumes it"
    drv.button("stopButton").click()
    drv.wait_finished()
    assert not notice.isVisible(), "a stopped turn is not waiting for an answer"


def test_delete_during_a_run_leaves_no_process_no_rows_and_no_delivery(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    cid = drv.pane.conversation_id
    stream_id = drv.send("doomed")
    drv.wait_tool_running(stream_id)
    type_and_enter(drv, "never delivered")
    qtbot.waitUntil(lambda: len(chips(drv)) == 1)
    store = drv.app.store
    turn = store.turn_by_stream(stream_id)
    assert turn is not None
    drv.window.delete_requested.emit(cid)
    qtbot.waitUntil(lambda: store.turn_by_stream(stream_id) is None, timeout=10_000)
    assert processes_of(stream_id) == []
    store.append_event(TextDelta(stream_id, text="late"))  # a straggler is ignored
    store.flush()
    assert store._query("SELECT COUNT(*) FROM events WHERE turn_id = ?", turn.id) == [(0,)]
    assert store._query("SELECT COUNT(*) FROM markers WHERE conversation_id = ?", cid) == [(0,)]
    assert drv.app.controller.queues.get(cid) == []
    qtbot.waitUntil(lambda: (pane := drv.window.current_pane()) is not None
                    and pane.conversation_id != cid)
    assert drv.app.controller.running_count() == 0
    assert all(t.prompt != "never delivered" for c in store.list_conversations()
               for t in store.turns(c.id))


def test_restart_button_reruns_with_the_same_history(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    drv = start_app()
    drv.send("first")
    drv.wait_finished()
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    old = drv.send("second")
    drv.wait_tool_running(old)
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    launch = drv.app.controller._launches[old]
    drv.button("restartButton").click()
    qtbot.waitUntil(lambda: drv.pane.running_stream not in (None, old), timeout=10_000)
    new = drv.pane.running_stream
    assert new is not None
    assert drv.app.controller._launches[new] == launch  # same prompt, history, agent, folder
    assert launch.resume_id is not None  # the demo resumes the first turn's session
    assert processes_of(old) == []
    turn = drv.wait_finished()
    assert turn.status == "completed" and 'You asked "second"' in turn.text()


def test_a_delivery_the_store_refuses_keeps_the_message_queued(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22 item 9, in the window: the queue's delivery is part of the transaction that
    starts the turn. When that write fails (here a trigger refuses the queue's delete, as a
    disk fault would at that point), no turn starts and the message stays queued, shown."""
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    first = drv.send("first")
    drv.wait_tool_running(first)
    type_and_enter(drv, "deliver me once")
    qtbot.waitUntil(lambda: len(chips(drv)) == 1)
    with closing(sqlite3.connect(drv.app.store.path)) as other:
        other.execute("CREATE TRIGGER refuse BEFORE DELETE ON queued_messages"
                      " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
        other.commit()
    drv.button("stopButton").click()  # the turn ends; the queue's delivery is refused
    drv.wait_finished()
    qtbot.wait(200)  # the delivery runs one loop turn after run_finished
    store, cid = drv.app.store, drv.pane.conversation_id
    assert [t.prompt for t in store.turns(cid)] == ["first"], "no turn without its delivery"
    assert [m.text for m in store.queued(cid)] == ["deliver me once"]
    assert store.markers(cid, MARKER_MESSAGES_DELIVERED) == []
    assert [c.message.text for c in chips(drv)] == ["deliver me once"]
    assert drv.pane.running_stream is None
    with closing(sqlite3.connect(drv.app.store.path)) as other:
        other.execute("DROP TRIGGER refuse")
        other.commit()
    # Once the store writes again, the message is delivered exactly once.
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    drv.app.controller.change_queue(cid, QueueChange(RESUME))
    qtbot.waitUntil(lambda: len(store.turns(cid)) == 2, timeout=10_000)
    drv.wait_finished()
    assert [t.prompt for t in store.turns(cid)] == ["first", "deliver me once"]
    assert store.queued(cid) == [] and chips(drv) == []
    assert len(store.markers(cid, MARKER_MESSAGES_DELIVERED)) == 1
