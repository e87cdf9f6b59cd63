"""Chat search highlights its match wherever the user sees it: in the answer and in the prompt
bubble (a match only in the prompt used to jump to a turn with nothing marked). Real window,
real store; the prompt stays plain text (its markup is shown, never interpreted)."""

from __future__ import annotations

from pathlib import Path

from helpers import fill_chat
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, StartApp, save_shot

from tolaria.core.events import STOP_END_TURN, Done, TextDelta
from tolaria.core.store.db import Store
from tolaria.core.stream_id import new_stream_id
from tolaria.ui.transcript.cards.style import Bubble, find_all

PROMPT = "Why does <b>the BUILD</b> fail?\n  (the build log is attached)"


def open_chat(start_app: StartApp, home: Path) -> tuple[AppDriver, str]:
    """A stored chat whose old turn has "build" only in its prompt, then 30 newer turns."""
    store = Store()
    try:
        chat = store.create_conversation("Builds", "demo", str(home))
        sid = new_stream_id()
        store.start_turn(chat.id, sid, "demo", PROMPT)
        store.append_event(TextDelta(sid, text="Because a test is red."))
        store.append_event(Done(sid, stop_reason=STOP_END_TURN, duration_ms=900))
        fill_chat(store, chat.id, 30, text_chars=300)
    finally:
        store.close()
    drv = start_app()
    drv.qtbot.waitUntil(lambda: bool(drv.pane.turn_views()) and not drv.pane.transcript.busy,
                        timeout=20_000)
    return drv, sid


def prompt_bubble(drv: AppDriver, sid: str) -> Bubble:
    view = drv.pane.transcript.turn(sid)
    assert view is not None
    bubble = view.findChild(Bubble, "promptBubble")
    assert bubble is not None
    return bubble


def test_a_match_in_the_prompt_is_marked_in_its_bubble(
        start_app: StartApp, home: Path, qtbot: QtBot, tmp_path: Path) -> None:
    drv, sid = open_chat(start_app, home)
    bar = drv.pane.search_bar
    bar.open()
    bar.field.setText("build")
    bar.field.returnPressed.emit()
    qtbot.waitUntil(lambda: drv.pane.transcript.turn(sid) is not None, timeout=10_000)
    bubble = prompt_bubble(drv, sid)
    qtbot.waitUntil(lambda: bubble.textFormat() == Qt.TextFormat.RichText, timeout=5_000)
    shown = bubble.text()
    # Both matches, any case, marked; the prompt's own markup escaped, not interpreted.
    assert shown.count("<span style=") == 2 and ">BUILD</span>" in shown
    assert ">build</span>" in shown and "&lt;b&gt;" in shown and "<b>" not in shown
    marked = bubble.grab().toImage()
    view = drv.pane.transcript.turn(sid)
    assert view is not None
    qtbot.waitUntil(lambda: "red" in view.text() and not drv.pane.transcript.busy,
                    timeout=10_000)
    save_shot(view, tmp_path, "search-prompt-match.png")

    # Esc closes the search: the bubble is the plain prompt again, and looks as before.
    QTest.keyClick(bar.field, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: bubble.textFormat() == Qt.TextFormat.PlainText, timeout=5_000)
    assert bubble.text() == PROMPT
    assert bubble.grab().toImage() != marked


def test_find_all_ignores_case_and_never_splits_a_character() -> None:
    assert find_all("Build the build", "BUILD") == [(0, 5), (10, 15)]
    assert find_all("aaaa", "aa") == [(0, 2), (2, 4)]
    assert find_all("Straße", "STRA") == [(0, 4)]  # ß folds to "ss": lower() offsets used
    assert find_all("anything", "") == []
    assert len(find_all("x" * 1000, "x")) == 200
