"""Permission questions are state, not only signals (issue 22 item 4).

A question is kept with its turn in the store while it is open (``PermissionAsked``, then
``PermissionSettled``), so every view built later shows it again: Ctrl+F to an old turn (the
view is rebuilt around it, the running turn released) and back, a question asked while the
running turn's view is not built, the next start of the window. It is answered once, and the
watchdog notice says "waiting for your answer" instead of counting silence. Against the real
scripted ACP agent (tests/fakes/fake_acp_agent.py ``ask_permission``), real widgets, real SQLite.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from helpers import fill_chat
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, processes_of

from tolaria.core.adapters.manifest import Manifest, StopPolicy
from tolaria.core.events import PermissionAsked, PermissionSettled, TextDelta, ToolStart
from tolaria.core.permissions import PermissionChoice, PermissionRequest, asked_event
from tolaria.core.store.db import Store
from tolaria.ui.chat.chat_pane import ChatPane
from tolaria.ui.composer.notices import WAITING_TEXT
from tolaria.ui.transcript.permission_card import PermissionCard

pytest.importorskip("acp")

FAKES = Path(__file__).resolve().parent.parent / "fakes"
OLD_TURNS = 20


def asking_manifest(gate: Path | None = None) -> Manifest:
    env = {"FAKE_ASK_WHEN": str(gate)} if gate is not None else {}
    return Manifest(id="fake-acp-ask", name="Fake ACP agent", protocol="acp",
                    command=(sys.executable, str(FAKES / "fake_acp_agent.py"), "ask_permission"),
                    env=env, stop=StopPolicy(polite_window_ms=5000))


def start_long_chat(start_app: StartApp, home: Path, **kwargs: object) -> AppDriver:
    """A window on a stored chat of OLD_TURNS finished turns (more than its window holds)."""
    store = Store()
    try:
        conversation = store.create_conversation("Long chat", "demo", str(home))
        fill_chat(store, conversation.id, OLD_TURNS, text_chars=300)
    finally:
        store.close()
    drv = start_app(**kwargs)
    settle(drv.qtbot, drv.pane)
    return drv


def settle(qtbot: QtBot, pane: ChatPane) -> None:
    qtbot.waitUntil(lambda: bool(pane.turn_views()) and not pane.transcript.busy,
                    timeout=20_000)


def search(drv: AppDriver, text: str) -> None:
    bar = drv.pane.search_bar
    bar.open()
    bar.field.setText(text)
    bar.field.returnPressed.emit()


def open_card(drv: AppDriver, stream_id: str) -> PermissionCard:
    return open_card_of(drv, drv.pane, stream_id)


def jump_away(drv: AppDriver, stream_id: str) -> None:
    """Ctrl+F to an old turn: the window is rebuilt around it, the running turn released."""
    search(drv, "turn-2-marker")
    drv.qtbot.waitUntil(lambda: drv.pane.transcript.turn(stream_id) is None
                        and any(v.turn_id is not None and "turn-2-marker" in v.text()
                                for v in drv.pane.turn_views()), timeout=10_000)


def stored_questions(drv: AppDriver, stream_id: str) -> list[object]:
    turn = drv.stored_turn(stream_id)
    return [e for e in drv.app.store.events(turn.id)
            if isinstance(e, PermissionAsked | PermissionSettled)]


def test_a_search_jump_and_back_shows_the_open_question_again(
        start_app: StartApp, home: Path, tmp_path: Path) -> None:
    drv = start_long_chat(start_app, home)
    drv.use_agent(asking_manifest())
    stream_id = drv.send("clean up the build folder")
    card = open_card(drv, stream_id)
    key = card.key
    assert drv.app.controller.permissions.pending(stream_id) == [key]
    # Kept with the turn while open: the store has the question, unanswered.
    [asked] = stored_questions(drv, stream_id)
    assert isinstance(asked, PermissionAsked) and asked.key == key
    assert asked.title == "rm -rf build" and asked.input == {"command": "rm -rf build"}
    assert [(c["option_id"], c["kind"]) for c in asked.choices] == [
        ("yes", "allow_once"), ("always", "allow_always"), ("no", "reject_once")]
    assert asked.tool_kind == "execute"

    jump_away(drv, stream_id)
    watchdog = drv.pane.watchdog
    assert watchdog.isVisible() and watchdog.waiting and WAITING_TEXT in watchdog.text()
    # And back: Ctrl+F to the running turn's own prompt rebuilds the window around it.
    search(drv, "clean up the build")
    again = open_card(drv, stream_id)
    assert again is not card and again.key == key and again.pending
    assert "rm -rf build" in again.input_label.text()
    view = drv.pane.transcript.turn(stream_id)
    assert view is not None and [c.title for c in view.tool_cards()] == ["rm -rf build"]
    settle(drv.qtbot, drv.pane)  # laid out: the click lands on the button
    drv.qtbot.waitUntil(again.isVisible, timeout=5_000)
    QTest.mouseClick(again.buttons["allowOnceButton"], Qt.MouseButton.LeftButton)
    turn = drv.wait_finished()
    assert turn.status == "completed" and "permission: yes" in turn.text()
    assert again.outcome == "allow_once"
    # Answered once: a second answer (a stale card, a double click) is ignored, no error.
    assert drv.app.controller.answer_permission(stream_id, key, "no") is False
    asked_and_settled = stored_questions(drv, stream_id)
    assert [type(e).__name__ for e in asked_and_settled] == ["PermissionAsked",
                                                             "PermissionSettled"]
    settled = asked_and_settled[1]
    assert isinstance(settled, PermissionSettled) and settled.outcome == "allow_once"
    assert processes_of(stream_id) == []
    assert not watchdog.isVisible() and not watchdog.waiting


def test_a_question_asked_while_the_turn_is_not_built_is_not_dropped(
        start_app: StartApp, home: Path, tmp_path: Path) -> None:
    gate = tmp_path / "ask-now"
    drv = start_long_chat(start_app, home)
    drv.use_agent(asking_manifest(gate))
    stream_id = drv.send("clean up the build folder")
    view = drv.last_turn()
    drv.qtbot.waitUntil(lambda: [c.title for c in view.tool_cards()] == ["rm -rf build"],
                        timeout=10_000)
    jump_away(drv, stream_id)
    assert not drv.pane.watchdog.waiting
    gate.write_text("")  # the agent asks now, while its turn has no view
    controller = drv.app.controller
    drv.qtbot.waitUntil(lambda: bool(controller.permissions.pending(stream_id)),
                        timeout=10_000)
    [key] = controller.permissions.pending(stream_id)
    drv.qtbot.waitUntil(lambda: drv.pane.watchdog.waiting, timeout=5_000)
    assert drv.pane.transcript.turn(stream_id) is None
    # The notice's link (as Ctrl+Shift+A) brings the newest turns back and the question's
    # answers get the focus.
    assert drv.pane.show_open_question()
    card = open_card(drv, stream_id)
    assert card.key == key
    drv.qtbot.waitUntil(lambda: all(b.isVisible() for b in card.buttons.values())
                        and card.buttons["allowOnceButton"].hasFocus(), timeout=5_000)
    QTest.keyClick(card.buttons["allowOnceButton"], Qt.Key.Key_Tab)
    QTest.keyClick(card.buttons["allowAlwaysButton"], Qt.Key.Key_Tab)
    reject = card.buttons["rejectButton"]
    drv.qtbot.waitUntil(reject.hasFocus, timeout=2_000)
    QTest.keyClick(reject, Qt.Key.Key_Return)
    turn = drv.wait_finished()
    assert "permission: no" in turn.text() and card.outcome == "reject"
    assert processes_of(stream_id) == []


def test_the_watchdog_waits_for_the_answer_instead_of_counting_silence(
        start_app: StartApp, home: Path, qtbot: QtBot) -> None:
    (home / "settings.toml").write_text("[behaviour]\nwatchdog_seconds = 0.3\n")
    drv = start_app()
    drv.use_agent(asking_manifest())
    stream_id = drv.send("clean up")
    open_card(drv, stream_id)
    watchdog = drv.pane.watchdog
    qtbot.waitUntil(lambda: watchdog.isVisible() and watchdog.waiting, timeout=5_000)
    deadline = time.monotonic() + 1.0  # three thresholds of silence
    while time.monotonic() < deadline:
        qtbot.wait(100)
        assert watchdog.waiting and WAITING_TEXT in watchdog.text()
        assert "No output" not in watchdog.text()
    assert "Show the question" in watchdog.text()
    drv.app.controller.answer_permission(stream_id, drv.last_turn().permission_cards()[0].key,
                                         "yes")
    turn = drv.wait_finished()
    assert turn.status == "completed" and not watchdog.isVisible() and not watchdog.waiting


def test_a_question_left_open_by_a_crash_reads_closed_after_the_restart(
        start_app: StartApp, home: Path) -> None:
    """The window died while the agent waited: the next start finds the question in the
    store, its turn interrupted, and shows it closed (no buttons that could not work)."""
    sid = "ai-agent-stream-crashedquestion01"
    store = Store()
    try:
        conversation = store.create_conversation("Asked", "demo", str(home))
        store.start_turn(conversation.id, sid, "demo", "clean up")
        store.append_event(ToolStart(sid, tool_id="t-rm", name="rm -rf build",
                                     input={"command": "rm -rf build"}))
        store.append_event(asked_event("permission-1", PermissionRequest(
            sid, "t-rm", "rm -rf build", {"command": "rm -rf build"},
            (PermissionChoice("yes", "Allow", "allow_once"),
             PermissionChoice("no", "Reject", "reject_once")), "execute")))
        store.append_event(TextDelta(sid, text="waiting for you"))
        store.flush()
    finally:
        store.close()  # no Done: the turn is left running, as a crash leaves it
    drv = start_app()
    pane = drv.pane
    settle(drv.qtbot, pane)
    [view] = pane.turn_views()
    drv.qtbot.waitUntil(lambda: not view.busy, timeout=5_000)
    assert view.status == "interrupted"
    [card] = view.permission_cards()
    assert card.title == "rm -rf build" and card.outcome == "closed"
    assert not card.buttons["allowOnceButton"].isVisible()
    assert not pane.watchdog.isVisible()


def test_a_chat_opened_while_its_turn_waits_shows_the_question(start_app: StartApp) -> None:
    """A fan-out member asks; its chat, opened in the main window meanwhile, gets a new pane
    built from the store: the question is there, open, answerable there, and the watchdog of
    that pane waits for the answer. The fan-out pane's card then shows the same answer."""
    from ui.test_fanout import add_agent, fan_out, wait_pane_done

    drv = start_app()
    manifest = asking_manifest()
    add_agent(drv, manifest)
    view = fan_out(drv, "clean up the build folder", [manifest.id])
    [member] = view.panes()
    stream_id = member.running_stream
    assert stream_id is not None
    drv.qtbot.waitUntil(lambda: bool(drv.app.controller.permissions.pending(stream_id)),
                        timeout=10_000)
    fan_card = member.turn_views()[-1]
    drv.qtbot.waitUntil(lambda: bool(fan_card.permission_cards()), timeout=5_000)
    drv.window.sidebar.open_requested.emit(member.conversation_id)  # a click in the sidebar
    pane = drv.window.stack.pane(member.conversation_id)
    assert pane is not None and pane is not member and pane.running_stream == stream_id
    card = open_card_of(drv, pane, stream_id)
    assert pane.watchdog.waiting
    drv.qtbot.waitUntil(lambda: all(b.isVisible() for b in card.buttons.values()),
                        timeout=5_000)
    QTest.mouseClick(card.buttons["allowOnceButton"], Qt.MouseButton.LeftButton)
    wait_pane_done(drv.qtbot, pane)
    assert "permission: yes" in pane.turn_views()[-1].text()
    [other] = member.turn_views()[-1].permission_cards()
    drv.qtbot.waitUntil(lambda: other.outcome == "allow_once", timeout=5_000)
    assert not pane.watchdog.waiting and processes_of(stream_id) == []


def open_card_of(drv: AppDriver, pane: ChatPane, stream_id: str) -> PermissionCard:
    """The open card of the running turn, once its view is built and has applied it."""
    def shown() -> bool:
        view = pane.transcript.turn(stream_id)
        return view is not None and any(c.pending for c in view.permission_cards())
    drv.qtbot.waitUntil(shown, timeout=10_000)
    view = pane.transcript.turn(stream_id)
    assert view is not None
    [card] = view.permission_cards()  # once, though asked live and kept in the store
    return card


def test_stop_while_asking_stores_the_cancel_and_silences_the_watchdog(
        start_app: StartApp, home: Path, qtbot: QtBot) -> None:
    (home / "settings.toml").write_text("[behaviour]\nwatchdog_seconds = 0.3\n")
    drv = start_app()
    drv.use_agent(asking_manifest())
    stream_id = drv.send("clean up")
    card = open_card(drv, stream_id)
    qtbot.waitUntil(lambda: drv.pane.watchdog.waiting, timeout=5_000)
    drv.button("stopButton").click()
    turn = drv.wait_finished()
    assert turn.status == "cancelled" and card.outcome == "cancelled"
    qtbot.wait(500)  # past the watchdog's threshold: nothing counts a stopped turn's silence
    assert not drv.pane.watchdog.isVisible() and not drv.pane.watchdog.waiting
    outcomes = [e.outcome for e in stored_questions(drv, stream_id)
                if isinstance(e, PermissionSettled)]
    assert outcomes == ["cancelled"]
    assert processes_of(stream_id) == []


def test_a_running_tool_built_again_keeps_counting_from_its_real_start(
        start_app: StartApp, home: Path) -> None:
    """The tool card of a running turn that is built again (a search jump and back) shows the
    time since the call began, not since the rebuild."""
    drv = start_long_chat(start_app, home)
    drv.use_agent(asking_manifest())
    stream_id = drv.send("clean up the build folder")
    open_card(drv, stream_id)
    view = drv.pane.transcript.turn(stream_id)
    assert view is not None
    [tool] = view.tool_cards()
    began = tool.started
    assert began is not None
    jump_away(drv, stream_id)
    away = time.monotonic()
    drv.qtbot.waitUntil(lambda: time.monotonic() - away > 1.2, timeout=5_000)
    search(drv, "clean up the build")
    open_card(drv, stream_id)
    rebuilt = drv.pane.transcript.turn(stream_id)
    assert rebuilt is not None and rebuilt is not view
    [again] = rebuilt.tool_cards()
    assert again is not tool and again.started == began
    again.tick()
    label = again.findChild(QLabel, "toolElapsed")
    assert label is not None
    shown = label.text()
    assert shown.endswith(" s") and float(shown.split()[0]) >= 1.2, shown
    drv.button("stopButton").click()
    assert drv.wait_finished().status == "cancelled"
