"""Attachments in the window (ADR 0028), with real clipboard and drop events offscreen: Ctrl+V of
an image makes a chip with a thumbnail, a dropped file a chip with its size, a dropped FIFO a
refused chip that says why, 30 files at once a notice; Send takes the good ones with the turn;
an image for an agent that cannot take one is refused before it starts and the chips stay.
Screenshots in light and dark."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from attachfiles import write_png
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication, QImage
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLabel, QToolButton
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, save_shot

from tolaria.ui import theme
from tolaria.ui.composer.attachment_chip import READY, REFUSED
from tolaria.ui.transcript.cards.attachment_card import AttachmentCard

Start = Callable[..., AppDriver]


def _drop(widget: object, paths: list[Path]) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    viewport = widget.viewport()  # type: ignore[attr-defined]
    buttons, keys = Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(QPoint(10, 10), Qt.DropAction.CopyAction, mime, buttons, keys)
    QApplication.sendEvent(viewport, enter)
    assert enter.isAccepted(), "the composer does not take files dropped on it"
    drop = QDropEvent(QPointF(QPoint(10, 10)), Qt.DropAction.CopyAction, mime, buttons, keys)
    QApplication.sendEvent(viewport, drop)
    assert drop.isAccepted()


def test_paste_drop_chips_and_send(start_app: Start, qtbot: QtBot, tmp_path: Path) -> None:
    drv = start_app()
    pane = drv.pane
    tray = pane.attachments
    # Ctrl+V of an image (a real clipboard): a chip with a thumbnail.
    image = QImage(64, 48, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.darkCyan)
    QGuiApplication.clipboard().setImage(image)
    pane.composer.setFocus()
    QTest.keyClick(pane.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: [c.state for c in tray.chips.values()] == [READY], timeout=10_000)
    (pasted,) = tray.chips.values()
    assert pasted.attachment is not None and pasted.attachment.mime == "image/png"
    qtbot.waitUntil(lambda: not pasted.thumb.pixmap().isNull(), timeout=10_000)
    assert pane.composer.toPlainText() == ""  # the image did not go into the text
    # The demo agent takes no images: the chip says so before Send (not a refusal: another
    # agent could take it); an agent that takes images clears it.
    assert pasted.detail.text() == pasted.warning == "this agent takes no images"
    assert pasted.toolTip().startswith("Demo agent (offline) cannot take images")
    tray.set_agent("Claude Code", True)
    assert pasted.warning == "" and "image" in pasted.detail.text()
    tray.set_agent("Demo agent (offline)", False)
    # A dropped text file and a dropped FIFO.
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _drop(pane.composer, [tmp_path / "notes.txt", fifo])
    qtbot.waitUntil(lambda: len(tray.chips) == 3 and all(
        c.state in (READY, REFUSED) for c in tray.chips.values()), timeout=10_000)
    refused = [c for c in tray.chips.values() if c.state == REFUSED]
    assert len(refused) == 1 and "is a FIFO (named pipe), not a file" in refused[0].problem
    # Thirty files at once: the first ones up to the limit, a notice for the rest.
    many = []
    for i in range(30):
        many.append(tmp_path / f"f{i}.txt")
        many[-1].write_text(str(i))
    _drop(pane.composer, many)
    assert tray.notice.text() == "13 more files not attached: at most 20 per message"
    qtbot.waitUntil(lambda: all(c.state != "checking" for c in tray.chips.values()),
                    timeout=20_000)
    for chip in [c for c in tray.chips.values() if c.name.startswith("f")]:
        chip.remove.click()
    for name in ("light", "dark"):
        theme.apply_theme(name)  # live: the pane and its chips follow
        shot = save_shot(pane, tmp_path, f"attachments-{name}.png")
        assert QImage(str(shot)).width() > 100
    theme.apply_theme("light")
    # Send is held while a refused chip is there, and says why.
    pane.composer.setPlainText("read these")
    drv.button("sendButton").click()
    assert pane.running_stream is None
    assert "Remove the refused attachments" in pane.status_line.text
    refused[0].remove.click()
    # The demo agent takes no images: refused before it starts, said; chips and text stay.
    drv.button("sendButton").click()
    qtbot.waitUntil(lambda: "cannot take images" in drv.window.statusBar().currentMessage(),
                    timeout=5_000)
    assert pane.running_stream is None and len(tray.chips) == 2
    pasted.remove.click()
    drv.button("sendButton").click()
    qtbot.waitUntil(lambda: pane.running_stream is not None, timeout=5_000)
    stream = pane.running_stream
    assert stream is not None
    drv.wait_finished()
    turn = drv.app.store.turn_by_stream(stream)
    assert turn is not None
    assert [a.name for a in drv.app.store.attachments(turn.id)] == ["notes.txt"]
    assert not tray.chips and tray.isHidden()
    # The transcript shows it (from the stored ``attached`` event), with Copy.
    view = pane.transcript.turn(stream)
    assert view is not None
    (card,) = view.findChildren(AttachmentCard)
    # Under the prompt (the user's bubble), above the agent's answer: not part of the answer.
    assert view.attached_box is not None and card.parent() is view.attached_box
    assert not view.body.isAncestorOf(card)
    assert card.mapTo(view, card.rect().topLeft()).y() < view.agent_header.y()
    assert card.attached.name == "notes.txt" and "as a path to a private copy" in " ".join(
        label.text() for label in card.findChildren(QLabel))
    card.copy.click()
    assert QGuiApplication.clipboard().text() == "remember the milk\n"
    for name in ("light", "dark"):
        theme.apply_theme(name)  # live: the pane and its cards follow
        save_shot(pane, tmp_path, f"transcript-attachment-{name}.png")
    theme.apply_theme("light")


def test_the_attach_button_opens_a_file_picker(start_app: Start, qtbot: QtBot,
                                               tmp_path: Path) -> None:
    drv = start_app()
    write_png(tmp_path / "shot.png")
    button = drv.pane.attachments.button
    assert isinstance(button, QToolButton) and button.accessibleName() == "Attach files"
    button.click()
    dialog = drv.pane.attachments._dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible, timeout=5_000)
    dialog.filesSelected.emit([str(tmp_path / "shot.png")])
    dialog.close()
    qtbot.waitUntil(lambda: [c.state for c in drv.pane.attachments.chips.values()] == [READY],
                    timeout=10_000)
