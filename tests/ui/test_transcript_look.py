"""The designed transcript: long code lines reachable, tool cards that say what runs, expanding
without a jump, the theme applied live to existing items, Retry and edit-and-resend."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import fake_manifest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, processes_of

from tolaria.core.events import TextDelta, ToolDone, ToolStart, ToolUpdate
from tolaria.core.store.db import MARKER_TURN_RESTARTED
from tolaria.ui import theme
from tolaria.ui.transcript.blocks import RichText
from tolaria.ui.transcript.cards.message import relative_time
from tolaria.ui.transcript.turn_view import Ending, TurnView
from tolaria.ui.transcript.view import TranscriptView

SID = "ai-agent-stream-lookstest01"
LONG_LINE = "x = [" + ", ".join(str(n) for n in range(400)) + "]  # the end of the line"


@pytest.fixture
def transcript(qtbot: QtBot) -> Iterator[TranscriptView]:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    view.show()
    qtbot.waitExposed(view)
    yield view
    theme.apply_theme("system")  # the palette is the application's: leave it as found


def _turn(view: TranscriptView, *events: object, sid: str = SID) -> TurnView:
    turn = view.add_turn("show me", "Demo agent", sid)
    for event in events:
        turn.enqueue(event)  # type: ignore[arg-type]
    view.schedule(turn)
    view.flush_all()
    return turn


def test_a_long_code_line_scrolls_sideways_and_is_never_clipped(
        transcript: TranscriptView, qtbot: QtBot) -> None:
    turn = _turn(transcript, TextDelta(SID, text=f"Here:\n\n```python\n{LONG_LINE}\nok()\n```\n"))
    [block] = turn.code_blocks()
    assert block.code() == f"{LONG_LINE}\nok()"
    viewport = transcript.viewport()
    qtbot.waitUntil(lambda: block.text.horizontalScrollBar().maximum() > 0)
    right = block.mapTo(viewport, QPoint(block.width(), 0)).x()
    assert right <= viewport.width(), "the block fits in the transcript"
    bar = block.text.horizontalScrollBar()
    bar.setValue(bar.maximum())  # scrolled to the end, the line's end is in view
    cursor = block.text.cursorForPosition(QPoint(block.text.viewport().width() - 30, 10))
    assert cursor.block().text() == LONG_LINE
    assert cursor.positionInBlock() > len(LONG_LINE) - 40
    assert transcript.horizontalScrollBar().maximum() == 0, "the transcript itself never scrolls"


def test_tool_card_shows_command_live_tail_elapsed_and_exit(transcript: TranscriptView) -> None:
    turn = _turn(transcript, ToolStart(SID, tool_id="t1", name="Bash",
                                       input={"command": "make test"}),
                 ToolUpdate(SID, tool_id="t1", output="compiling\nlinking\nrunning 12 tests\n"))
    [card] = turn.tool_cards()
    assert card.command == "$ make test"
    assert card.tail.splitlines()[-1] == "running 12 tests", "the last lines stream under it"
    assert card.status == "running" and card.started is not None
    card.started -= 3  # (as if it had run for three seconds)
    card.tick()
    assert card._elapsed.text().startswith("3.")
    turn.enqueue(ToolDone(SID, tool_id="t1", output="1 failed\nExit code 2", is_error=True))
    transcript.schedule(turn)
    transcript.flush_all()
    assert card.status == "failed" and "exit 2" in card._status.text()
    assert card.tail == "", "the tail goes once it has ended"
    assert not card.expanded
    card.set_expanded(True)  # the body is built on demand, raw JSON only behind Details
    assert card._output_box is not None and "Exit code 2" in card._output_box.toPlainText()
    assert card._details is not None and not card._details.expanded and card._input_box is None


def test_an_edit_tool_shows_its_file_and_diff(transcript: TranscriptView) -> None:
    turn = _turn(transcript, ToolStart(SID, tool_id="e1", name="Edit", input={
        "file_path": "src/app.py", "old_string": "a = 1\nb = 2\n", "new_string": "a = 1\nb = 3\n"}))
    [card] = turn.tool_cards()
    assert card.command == "src/app.py"
    assert card.expanded, "a small diff is shown at once"
    assert card._diff_box is not None
    diff = card._diff_box.toPlainText().splitlines()
    assert "-b = 2" in diff and "+b = 3" in diff


def test_expanding_a_card_keeps_it_in_place(transcript: TranscriptView, qtbot: QtBot) -> None:
    filler = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(60))
    turn = _turn(transcript, TextDelta(SID, text=filler),
                 ToolStart(SID, tool_id="t1", name="Bash", input={"command": "ls"}),
                 ToolDone(SID, tool_id="t1", output="\n".join(f"file{n}" for n in range(40))),
                 TextDelta(SID, text="\n\nThe end."))
    turn.end(Ending("completed", 1200))
    transcript.schedule(turn)
    transcript.flush_all()
    bar = transcript.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    [card] = turn.tool_cards()
    viewport = transcript.viewport()

    def header_y() -> int:
        return card.mapTo(viewport, QPoint(0, 0)).y()

    before = header_y()
    assert 0 <= before < viewport.height(), "the card is in view"
    card.set_expanded(True)
    qtbot.waitUntil(lambda: card._output_box is not None and card._output_box.height() > 100)
    qtbot.wait(50)  # (layout and scroll settle)
    assert header_y() == before, "the card opened downwards; nothing above it moved"


def _pixel(widget: QWidget) -> QColor:
    image = widget.grab().toImage()
    return image.pixelColor(image.width() - 4, image.height() // 2)


def test_theme_switch_restyles_existing_items(transcript: TranscriptView, qtbot: QtBot) -> None:
    turn = _turn(transcript, TextDelta(SID, text="Some text.\n\n```sh\nls -la\n```\n"),
                 ToolStart(SID, tool_id="t1", name="Bash", input={"command": "ls"}))
    [card], [code] = turn.tool_cards(), turn.code_blocks()
    theme.apply_theme("light")
    qtbot.waitUntil(lambda: _pixel(card).lightness() > 200)
    light_card, light_code = _pixel(card), _pixel(code)
    theme.apply_theme("dark")  # live: the same widgets, no rebuild
    qtbot.waitUntil(lambda: _pixel(card).lightness() < 80)
    assert _pixel(code).lightness() < 80 and light_code.lightness() > 200
    assert light_card != _pixel(card)
    name = turn.agent_header.name  # labels follow the palette (delivered as events)
    qtbot.waitUntil(lambda: name.palette().windowText().color().lightness() > 180)
    [tone_label] = [w for w in turn.findChildren(QWidget) if w.objectName() == "turnStatus"]
    qtbot.waitUntil(lambda: tone_label.palette().windowText().color() == theme.muted_text())
    assert theme.is_dark()


def test_theme_from_the_view_menu_is_applied_and_saved(
        start_app: Callable[..., AppDriver], home: Path, qtbot: QtBot) -> None:
    drv = start_app()
    try:
        drv.window.view_menu.theme_actions["dark"].trigger()
        assert theme.is_dark() and QApplication.palette().base().color().lightness() < 60
        saved = tomllib.loads((home / "settings.toml").read_text())
        assert saved["appearance"]["theme"] == "dark"
        assert drv.window.view_menu.theme_actions["dark"].isChecked()
    finally:
        theme.apply_theme("system")


def test_retry_reruns_a_failed_turn_and_edit_resends_the_last_prompt(
        start_app: Callable[..., AppDriver], qtbot: QtBot) -> None:
    drv = start_app()
    drv.use_agent(fake_manifest("stderr_exit"))
    first_stream = drv.send("fail please")
    failed = drv.wait_finished()
    assert failed.status == "failed"
    assert failed.retry_button is not None and failed.retry_button.isVisibleTo(failed)
    failed.retry_button.click()  # the real fake agent runs again, with the same prompt
    qtbot.waitUntil(lambda: drv.pane.turn_views()[-1].stream_id != first_stream)
    retried = drv.wait_finished()
    assert retried.prompt == "fail please" and retried.status == "failed"
    qtbot.waitUntil(lambda: failed.restarted)
    conversation_id = drv.pane.conversation_id
    store = drv.app.store
    assert [t.prompt for t in store.turns(conversation_id)] == ["fail please"] * 2
    abandoned = store.markers(conversation_id, MARKER_TURN_RESTARTED)
    assert [m.data["stream_id"] for m in abandoned] == [first_stream]
    assert [t.stream_id for t in drv.app.controller.answered_turns(conversation_id)] == [
        retried.stream_id], "the abandoned attempt is out of the next prompts' history"

    # Edit the last prompt and send it: it replaces that turn.
    assert retried.edit_button is not None and retried.edit_button.isVisibleTo(retried)
    assert failed.edit_button is None or not failed.edit_button.isVisibleTo(failed)
    retried.edit_button.click()
    assert drv.pane.composer.toPlainText() == "fail please"
    drv.send("fail differently")
    edited = drv.wait_finished()
    assert edited.prompt == "fail differently"
    qtbot.waitUntil(lambda: retried.restarted)
    assert [t.prompt for t in drv.app.controller.answered_turns(conversation_id)] == [
        "fail differently"]


def test_headings_stay_within_a_calm_type_scale(transcript: TranscriptView) -> None:
    turn = _turn(transcript, TextDelta(SID, text="# Title\n\n## Section\n\nBody text here.\n"))
    [segment] = [w for w in turn.findChildren(RichText) if "Title" in w.source_text]
    document = segment.document()
    sizes: dict[str, float] = {}
    block = document.begin()
    while block.isValid():
        fragment = block.begin().fragment()
        size = fragment.charFormat().fontPointSize() or document.defaultFont().pointSizeF()
        sizes[block.text()] = size
        block = block.next()
    body = sizes["Body text here."]
    assert body > 0
    assert sizes["Title"] <= 1.25 * body + 0.01 and sizes["Section"] <= sizes["Title"]
    assert sizes["Title"] > body, "a heading still stands out"


def test_message_time_says_how_long_ago_on_hover(transcript: TranscriptView) -> None:
    turn = transcript.add_turn("hello", "Demo agent", SID, started_at=1_000_000.0)
    assert relative_time(1_000_000.0, now=1_000_000.0 + 300) == "5 minutes ago"
    assert relative_time(1_000_000.0, now=1_000_000.0 + 2 * 86_400) == "2 days ago"
    assert relative_time(1_000_000.0, now=1_000_000.0 + 86_400) == "yesterday"
    tip = turn.you.time.tooltip_text()
    assert tip.split(" · ")[0] not in ("", "just now") and "1970" in tip


def test_copy_message_prompt_and_code(transcript: TranscriptView) -> None:
    turn = _turn(transcript, TextDelta(SID, text="Run this:\n\n```sh\nmake test\n```\n\nDone."))
    clipboard = QApplication.clipboard()
    turn.copy_answer.click()
    assert clipboard.text() == turn.text() and "```sh\nmake test\n```" in clipboard.text()
    turn.copy_prompt.click()
    assert clipboard.text() == "show me"
    [code] = turn.code_blocks()
    code.copy_button.click()
    assert clipboard.text() == "make test" and code.copy_button.text() == "Copied"


def test_the_demo_agents_running_tool_shows_its_live_output_tail(
        start_app: Callable[..., AppDriver], qtbot: QtBot,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    stream_id = drv.send("run something long")
    drv.wait_tool_running(stream_id)
    turn = drv.pane.transcript.turn(stream_id)
    assert turn is not None
    [card] = turn.tool_cards()
    qtbot.waitUntil(lambda: card.tail == "started", timeout=5_000)  # before the tool ends
    assert card.status == "running"
    drv.button("stopButton").click()
    assert drv.wait_finished().status == "cancelled"
    assert processes_of(stream_id) == []
