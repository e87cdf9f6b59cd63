"""What the transcript shows: markdown, thinking, tool cards, error cards, floods."""

from __future__ import annotations

import time

import pytest
from helpers import fake_manifest
from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp

from tolaria.core.adapters.manifest import Manifest
from tolaria.ui.transcript import blocks
from tolaria.ui.transcript.blocks import MarkdownSegment, RichText


def test_demo_turn_renders_thinking_tool_card_and_markdown(start_app: StartApp) -> None:
    drv = start_app()
    drv.send("show me")
    turn = drv.wait_finished()
    assert turn.status == "completed"
    [thinking] = turn.thinking_blocks()
    assert not thinking.expanded and not thinking.body.isVisible(), "thinking starts collapsed"
    assert "demo" in thinking.text
    [card] = turn.tool_cards()
    assert card.status == "done" and card.output == "started\nfinished"
    assert not card.expanded
    card.set_expanded(True)
    assert card.expanded
    # The fenced block is a code block widget (language label, Copy, unwrapped lines).
    [code] = turn.code_blocks()
    assert code.language == "python" and code.label.text() == "python"
    assert "import subprocess" in code.code() and "```" not in code.code()
    segments = turn._widgets(MarkdownSegment)
    prose = "\n".join(r.document().toPlainText() for r in segments[-1].findChildren(RichText))
    assert "Done" in prose and "##" not in prose, "markdown is rendered"
    assert "```" not in prose, "the fence is not left in the prose"
    assert "Completed" in turn.footer.text() and "tokens" in turn.footer.text()


def test_missing_binary_says_how_to_install_it(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    missing = Manifest(id="ghost", name="Ghost CLI", protocol="claude-stream-json",
                       command=("tolaria-no-such-program-xyz", "{prompt}"),
                       install_hint="npm install -g ghost-cli")
    drv.use_agent(missing)
    drv.run(drv.app.controller.detect_agents())
    picker = drv.window.header.agent_picker
    row = picker.findData("ghost")
    model = picker.model()
    assert isinstance(model, QStandardItemModel)
    item = model.item(row)
    assert not item.isEnabled(), "a missing agent is greyed out"
    assert "npm install -g ghost-cli" in item.toolTip()
    drv.send("anyone there?")
    turn = drv.wait_finished()
    assert turn.status == "failed"
    [error] = turn.error_cards()
    assert "not found" in error.message and "npm install -g ghost-cli" in error.message
    qtbot.waitUntil(error.isVisible)


def test_error_card_has_the_stderr_tail(start_app: StartApp) -> None:
    drv = start_app()
    drv.use_agent(fake_manifest("stderr_exit"))
    drv.send("fail please")
    turn = drv.wait_finished()
    assert turn.status == "failed"
    [error] = turn.error_cards()
    assert "exited with code 2" in error.message
    assert "FATAL: model exploded" in error.stderr_lines
    assert "Failed" in turn.footer.text()


def test_a_flood_is_coalesced_and_bounded(
        start_app: StartApp, monkeypatch: pytest.MonkeyPatch, qtbot: QtBot) -> None:
    monkeypatch.setenv("FAKE_FLOOD_LINES", "3000")  # ~3 MB in 3000 deltas
    renders = []
    original = RichText.set_markdown

    def counting(self: RichText, text: str) -> None:
        renders.append(len(text))
        original(self, text)

    monkeypatch.setattr(RichText, "set_markdown", counting)
    drv = start_app()
    drv.use_agent(fake_manifest("flood"))
    started = time.monotonic()
    drv.send("flood me")
    turn = drv.wait_finished(timeout_ms=30_000)
    assert turn.status == "completed"
    assert turn.received_chars > 3_000_000
    assert len(renders) < 1500, "renders are per frame and per chunk, never per delta"
    assert max(renders) <= blocks.CHUNK_CHARS + 64
    shown = turn.text()
    assert len(shown) <= blocks.CHUNK_CHARS * (blocks.MAX_CHUNKS + 1)
    assert "flood 2999:" in shown, "the newest text is what stays on screen"
    note = turn.findChild(QLabel, "elidedNote")
    assert note is not None and note.isVisible() and "not shown" in note.text()
    assert time.monotonic() - started < 25


def test_hidden_chat_keeps_receiving(
        start_app: StartApp, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    drv = start_app()
    first = drv.pane
    drv.send("in the background")
    drv.window.new_action.trigger()
    qtbot.waitUntil(lambda: drv.window.current_pane() is not first)
    turn = drv.wait_finished(first)
    assert turn.status == "completed" and "## Done" in turn.text()
    sidebar = drv.window.sidebar
    item = sidebar._items[first.conversation_id]
    assert not item.data(Qt.ItemDataRole.UserRole + 2), "running badge cleared"
