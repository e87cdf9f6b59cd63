"""Images inside imported CLI sessions show in the window (issue 26 item 2): File → Import of a
real Codex session with an image (tests/fixtures/sessions_image); the chat opened shows the
image's card, with its thumbnail, under the imported prompt. Screenshots light and dark."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from chats.test_importing_images import SESSIONS
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp, save_shot

from tolaria.ui import theme
from tolaria.ui.transcript.cards.attachment_card import AttachmentCard


def test_an_imported_image_shows_under_its_prompt(start_app: StartApp, qtbot: QtBot,
                                                  tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "cli-home"
    shutil.copytree(SESSIONS / "codex", home)
    monkeypatch.setenv("HOME", str(home))
    drv = start_app()
    window, store = drv.window, drv.app.store
    window.import_action.trigger()
    qtbot.waitUntil(lambda: not window.import_report.running, timeout=20_000)
    [chat] = [c for c in store.list_conversations() if c.agent == "codex"]
    window.open_conversation(chat.id)
    pane = window.stack.pane(chat.id)
    assert pane is not None
    qtbot.waitUntil(lambda: bool(pane.transcript.turns()), timeout=10_000)
    [view] = pane.transcript.turns()
    qtbot.waitUntil(lambda: bool(view.findChildren(AttachmentCard)), timeout=10_000)
    [card] = view.findChildren(AttachmentCard)
    assert card.parent() is view.attached_box and not view.body.isAncestorOf(card)
    assert card.attached.name == "1-screen_shot.png" and card.path is not None
    assert not card.thumb.pixmap().isNull(), "the image's thumbnail"
    words = " ".join(label.text() for label in card.findChildren(QLabel))
    assert "sent in the Codex session" in words
    window.resize(900, 520)
    qtbot.waitUntil(lambda: "Hello from the fake model!" in view.text(), timeout=10_000)
    qtbot.wait(100)  # laid out at the new size
    for name in ("light", "dark"):
        theme.apply_theme(name)  # live: the pane and its cards follow
        save_shot(window, tmp_path, f"imported-image-{name}.png")
    theme.apply_theme("light")
