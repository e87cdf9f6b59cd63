"""A queued image after an agent switch (issue 26): a message queued with an image while the
chat's agent takes images, then the chat switched to one that takes none. The message's chip
says why it cannot go and the queue waits at it: what was typed before it goes, it and what
follows stay, in order; nothing is sent half. Removing the image (the chip's "Remove image")
or switching back lets it go. The hold survives a restart (the queue and its files are stored,
migration 9). Real engine, real widgets, the demo agent (one copy that takes images)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, save_shot

from tolaria.chats.engine.queue_hold import first_held
from tolaria.core.adapters.attach_spec import AT_PATH, AttachSpec
from tolaria.core.attachments.model import IMAGE, TEXT, Attachment
from tolaria.core.store.db import Conversation
from tolaria.core.store.queue import QueuedMessage, QueueState
from tolaria.ui import theme
from tolaria.ui.composer.attachment_chip import READY
from tolaria.ui.composer.queue_chips import QueuedChips

HELD = "Demo agent (offline) here takes no images: remove the image or switch back"


def with_eyes(drv: AppDriver) -> None:
    """The chat's agent: the demo agent, able to take images (as a path in the prompt)."""
    demo = drv.app.adapters.manifests["demo"]
    drv.use_agent(dataclasses.replace(demo, id="demo-eyes", name="Demo with eyes",
                                      attachments=AttachSpec(images=AT_PATH)))


def queue_text(drv: AppDriver, text: str) -> None:
    drv.pane.composer.setPlainText(text)
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Return)


def queue_image(drv: AppDriver, qtbot: QtBot, text: str) -> None:
    pane = drv.pane
    image = QImage(64, 48, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.darkCyan)
    QGuiApplication.clipboard().setImage(image)
    pane.composer.setFocus()
    QTest.keyClick(pane.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: [c.state for c in pane.attachments.chips.values()] == [READY],
                    timeout=10_000)
    queue_text(drv, text)


def queued(drv: AppDriver) -> list[tuple[str, int]]:
    return [(m.text, len(m.attachments)) for m in drv.app.store.queued(drv.pane.conversation_id)]


def prompts(drv: AppDriver) -> list[str]:
    return [t.prompt for t in drv.app.store.turns(drv.pane.conversation_id)]


def busy_then_queue(drv: AppDriver, qtbot: QtBot, *before: str) -> str:
    """A long turn runs; ``before`` (text), then an image message and a text are queued."""
    running = drv.send("busy")
    drv.wait_tool_running(running)
    for text in before:
        queue_text(drv, text)
    queue_image(drv, qtbot, "see this")
    queue_text(drv, "and this")
    want = [(t, 0) for t in before] + [("see this", 1), ("and this", 0)]
    qtbot.waitUntil(lambda: queued(drv) == want, timeout=10_000)
    return running


def stop_and_settle(drv: AppDriver, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    drv.button("stopButton").click()
    qtbot.waitUntil(lambda: drv.pane.running_stream is None, timeout=15_000)
    qtbot.wait(300)  # a delivery would have started by now


def test_switch_holds_the_image_removing_it_lets_it_go_across_a_restart(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    with_eyes(drv)
    chat = drv.pane.conversation_id
    busy_then_queue(drv, qtbot)
    bar = drv.pane.queued_chips
    assert bar.held_note is None, "the agent takes images: nothing held"

    drv.app.controller.set_agent(chat, "demo")  # takes no images
    qtbot.waitUntil(lambda: bar.held_note is not None, timeout=5_000)
    note = bar.held_note
    assert note is not None and note.label.text() == HELD
    assert note.remove.text() == "Remove image" and note.isVisible()
    assert bar.header.text() == "2 queued · waiting at message 1: it cannot go to this agent"
    for name in ("light", "dark"):
        theme.apply_theme(name)
        drv.window.resize(1000, 640)
        qtbot.wait(100)
        save_shot(drv.window, tmp_path, f"queue-held-image-{name}.png")
    theme.apply_theme("light")

    # "Send now" of the held message: said why; the running turn is not stopped for nothing.
    running = drv.pane.running_stream
    bar.send_now_requested.emit(note.message_id)
    qtbot.waitUntil(lambda: "takes no images" in drv.window.statusBar().currentMessage(),
                    timeout=5_000)
    qtbot.wait(200)
    assert drv.pane.running_stream == running

    stop_and_settle(drv, qtbot, monkeypatch)
    assert prompts(drv) == ["busy"], "nothing sent: not the image, not what waits behind it"
    assert queued(drv) == [("see this", 1), ("and this", 0)]
    drv.close()

    again = start_app()
    again.window.open_conversation(chat)
    bar = again.pane.queued_chips
    qtbot.waitUntil(lambda: bar.held_note is not None, timeout=10_000)
    assert bar.held_note is not None and bar.held_note.label.text() == HELD
    bar.pause_button.click()  # resume the queue paused at quit: it still waits at the image
    qtbot.wait(300)
    assert again.pane.running_stream is None and prompts(again) == ["busy"]

    bar.held_note.remove.click()
    qtbot.waitUntil(lambda: again.pane.running_stream is not None, timeout=10_000)
    stream = again.pane.running_stream
    again.wait_finished()
    assert prompts(again) == ["busy", "see this\n\nand this"]
    turn = again.app.store.turn_by_stream(stream or "")
    assert turn is not None and again.app.store.attachments(turn.id) == []
    assert queued(again) == [] and bar.held_note is None


def test_what_came_before_goes_and_switching_back_sends_the_image(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    with_eyes(drv)
    chat = drv.pane.conversation_id
    busy_then_queue(drv, qtbot, "plain first")
    drv.app.controller.set_agent(chat, "demo")
    bar = drv.pane.queued_chips
    qtbot.waitUntil(lambda: bar.held_note is not None, timeout=5_000)
    assert bar.header.text() == "3 queued · waiting at message 2: it cannot go to this agent"

    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    drv.button("stopButton").click()
    qtbot.waitUntil(lambda: prompts(drv)[-1:] == ["plain first"], timeout=15_000)
    drv.wait_finished()
    qtbot.wait(300)
    assert prompts(drv) == ["busy", "plain first"], "the text before it went alone"
    assert queued(drv) == [("see this", 1), ("and this", 0)]
    assert drv.pane.running_stream is None

    drv.app.controller.set_agent(chat, "demo-eyes")  # switched back: it goes at once
    qtbot.waitUntil(lambda: drv.pane.running_stream is not None, timeout=10_000)
    stream = drv.pane.running_stream
    drv.wait_finished()
    assert prompts(drv) == ["busy", "plain first", "see this\n\nand this"]
    turn = drv.app.store.turn_by_stream(stream or "")
    assert turn is not None and len(drv.app.store.attachments(turn.id)) == 1
    assert queued(drv) == [] and bar.held_note is None


def test_the_note_names_what_its_button_takes_off(qtbot: QtBot) -> None:
    """An agent that takes no images: only the images go ("Remove image", other files stay);
    on a host: all files ("Remove files")."""
    png = Attachment("shot.png", "a" * 64, 10, "image/png", IMAGE)
    txt = Attachment("notes.txt", "b" * 64, 5, "text/plain", TEXT)
    message = QueuedMessage(7, "look", 0.0, (png, txt))
    bar = QueuedChips()
    qtbot.addWidget(bar)
    bar.set_state(QueueState((message,), held=7, held_why=HELD))
    assert bar.held_note is not None and bar.held_note.remove.text() == "Remove image"
    on_host = first_held(Conversation(1, "c", "demo", None, 0.0, 0.0, None, host="devbox"),
                         None, [message])
    assert on_host is not None
    bar.set_state(QueueState((message,), held=7, held_why=on_host[1]))
    assert bar.held_note is not None and bar.held_note.remove.text() == "Remove files"
    dropped: list[int] = []
    bar.drop_files_requested.connect(dropped.append)
    bar.held_note.remove.click()
    assert dropped == [7]
    bar.set_state(QueueState((message,)))
    assert bar.held_note is None
