"""A long chat costs what a short one does: a window of turns, pages loaded on scroll, search in
the store (tolaria/ui/transcript/view.py, tolaria/core/store/pages.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers import fill_chat
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.core.store.db import Store
from tolaria.core.store.pages import PAGE_TURNS
from tolaria.ui.chat.chat_pane import ChatPane
from tolaria.ui.transcript.blocks import RichText
from tolaria.ui.transcript.view import MAX_LIVE_TURNS


def _stored_chat(home: Path, turns: int, text_chars: int) -> list[str]:
    store = Store()
    try:
        conversation = store.create_conversation("Long chat", "demo", str(home))
        return fill_chat(store, conversation.id, turns, text_chars=text_chars)
    finally:
        store.close()


def _open_stored(start_app: Callable[..., AppDriver], home: Path, qtbot: QtBot, turns: int,
                 text_chars: int) -> tuple[list[str], ChatPane]:
    """A stored chat of ``turns`` turns, opened by a started window and rendered."""
    sids = _stored_chat(home, turns, text_chars)
    pane = start_app().pane
    _settled(qtbot, pane)
    return sids, pane


def _settled(qtbot: QtBot, pane: ChatPane) -> None:
    qtbot.waitUntil(lambda: bool(pane.turn_views()) and not pane.transcript.busy,
                    timeout=20_000)


def _ids(pane: ChatPane) -> list[str]:
    return [view.stream_id for view in pane.turn_views()]


def _scroll_until(qtbot: QtBot, pane: ChatPane, wanted: str, *, up: bool) -> int:
    """Scroll to one end again and again (each time a page loads) until ``wanted`` is the
    turn at that end; returns the most turn widgets seen at once."""
    bar = pane.transcript.verticalScrollBar()
    end = 0 if up else -1
    most = 0
    for _ in range(60):
        before = _ids(pane)[end]
        if before == wanted:
            break
        _settled(qtbot, pane)
        bar.setValue(0 if up else bar.maximum())
        qtbot.waitUntil(lambda b=before: _ids(pane)[end] != b, timeout=5_000)  # type: ignore[misc]
        most = max(most, len(pane.turn_views()))
    return most


def test_a_2000_turn_chat_opens_with_a_bounded_window(
        start_app: Callable[..., AppDriver], home: Path, qtbot: QtBot) -> None:
    sids, pane = _open_stored(start_app, home, qtbot, 2000, 1500)
    shown = _ids(pane)
    assert shown[-1] == sids[-1], "the newest turn is shown"
    assert shown == sids[-len(shown):], "a contiguous run of the newest turns"
    assert len(shown) <= 2 * PAGE_TURNS, f"{len(shown)} of 2000 turns became widgets"
    content = pane.transcript.widget()
    assert content is not None
    chunks = content.findChildren(RichText)
    assert 0 < len(chunks) <= 4 * len(shown)
    assert pane.turn_views()[-1].status == "completed"
    assert "turn-1999-marker" in pane.turn_views()[-1].text()

    # Find (Ctrl+F) runs in the store and jumps to a turn far outside the window.
    pane.search_bar.open()
    pane.search_bar.field.setText("turn-3-marker")
    pane.search_bar.field.returnPressed.emit()
    qtbot.waitUntil(lambda: sids[3] in _ids(pane), timeout=10_000)
    assert pane.search_bar.count.text() == "1 of 1"
    assert len(pane.turn_views()) <= 2 * PAGE_TURNS
    assert sids[-1] not in _ids(pane), "the newest turns were released"
    _settled(qtbot, pane)
    target = pane.transcript.turn(sids[3])
    assert target is not None and target.needle == "turn-3-marker"
    bar = pane.transcript.verticalScrollBar()

    def at_top() -> bool:
        return abs(bar.value() - target.y()) <= 2 or bar.value() == bar.maximum()

    qtbot.waitUntil(at_top, timeout=5_000)  # the matching turn is at the top of the view


def test_scrolling_to_the_top_loads_the_first_turn_and_releases_the_last(
        start_app: Callable[..., AppDriver], home: Path, qtbot: QtBot) -> None:
    sids, pane = _open_stored(start_app, home, qtbot, 90, 600)
    most = _scroll_until(qtbot, pane, sids[0], up=True)
    _settled(qtbot, pane)
    shown = _ids(pane)
    assert shown[0] == sids[0], "scrolling up reached the first turn"
    assert shown == sids[:len(shown)], "the window is contiguous, oldest first"
    assert most <= MAX_LIVE_TURNS + PAGE_TURNS and len(shown) <= MAX_LIVE_TURNS
    assert sids[-1] not in shown and pane.transcript.has_newer
    assert "turn-0-marker" in pane.turn_views()[0].text()

    # And back down: the newest turn comes back from the store.
    _scroll_until(qtbot, pane, sids[-1], up=False)
    assert _ids(pane)[-1] == sids[-1] and not pane.transcript.has_newer
    assert len(pane.turn_views()) <= MAX_LIVE_TURNS


def test_find_opens_with_ctrl_f_and_esc_closes_it(
        start_app: Callable[..., AppDriver], home: Path, qtbot: QtBot) -> None:
    sids, pane = _open_stored(start_app, home, qtbot, 40, 300)
    QTest.keyClick(pane.composer, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: pane.search_bar.isVisible() and pane.search_bar.field.hasFocus())
    QTest.keyClicks(pane.search_bar.field, "turn-2-marker")
    QTest.keyClick(pane.search_bar.field, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: sids[2] in _ids(pane), timeout=10_000)
    assert pane.search_bar.count.text() == "1 of 1"
    QTest.keyClick(pane.search_bar.field, Qt.Key.Key_Escape)
    assert not pane.search_bar.isVisible() and pane.transcript.needle == ""
    assert pane.composer.hasFocus()
