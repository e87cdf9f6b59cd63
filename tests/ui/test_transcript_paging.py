"""Pages of stored turns loaded while scrolling are built a turn per tick, and the view stays
still meanwhile (tolaria/ui/transcript/view.py, ADR 0037): real store, real widgets."""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable
from pathlib import Path

from helpers import fill_chat
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.core.store.db import Store
from tolaria.core.store.pages import PAGE_TURNS
from tolaria.ui.transcript.view import MAX_LIVE_TURNS, TranscriptView


def _view(qtbot: QtBot) -> TranscriptView:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    view.show()
    return view


def _ids(view: TranscriptView) -> list[str]:
    return [turn.stream_id for turn in view.turns()]


def _full_window(qtbot: QtBot, store: Store, turns: int,
                 text_chars: int) -> tuple[TranscriptView, list[str], int]:
    """A view on a stored chat of ``turns`` turns, older pages loaded until its window holds
    ``MAX_LIVE_TURNS`` or more turns, all built: the view, the stream ids, the chat's id."""
    conversation = store.create_conversation("Long", "demo", "/tmp").id
    sids = fill_chat(store, conversation, turns, text_chars=text_chars)
    view = _view(qtbot)
    view.show_page(store.turns_page(conversation), {})
    qtbot.waitUntil(lambda: not view.busy, timeout=20_000)
    while len(view.turns()) < MAX_LIVE_TURNS:
        first = view.turns()[0].turn_id
        assert first is not None
        view.show_page(store.turns_page(conversation, first), {})
        qtbot.waitUntil(lambda: not view.busy, timeout=20_000)
    assert _ids(view) == sids[-len(view.turns()):]
    return view, sids, conversation


def test_an_older_page_is_built_one_turn_per_tick_and_the_view_keeps_still(
        qtbot: QtBot, store: Store) -> None:
    view, sids, conversation = _full_window(qtbot, store, 80, 1200)
    held = len(view.turns())

    # Read from the middle of the first turn held; an older page arrives.
    bar = view.verticalScrollBar()
    anchor = view.turns()[0]
    bar.setValue(anchor.y() + 40)
    assert anchor.y() - bar.value() == -40
    first = anchor.turn_id
    assert first is not None
    page = store.turns_page(conversation, first)
    assert len(page.turns) == PAGE_TURNS
    view.show_page(page, {})
    assert len(view.turns()) == held, "nothing is built in the call itself"
    counts = [len(view.turns())]
    while view.busy:
        view._timer.stop()  # the ticks are driven here, one at a time
        view._on_timer_timeout()
        view._timer.stop()
        counts.append(len(view.turns()))
        # Once the loop has laid the new turn out, the turn read is where it was.
        qtbot.waitUntil(lambda: anchor.y() - bar.value() == -40, timeout=2_000)
    steps = [b - a for a, b in itertools.pairwise(counts)]
    assert max(steps) == 1, f"one turn built per tick: {steps}"
    assert min(steps) == -1, "and one released per tick"
    assert steps.count(1) == PAGE_TURNS, "every turn of the page was built"
    # The page is above, in order; the turns released were the newest, far below.
    ids = _ids(view)
    start = sids.index(ids[0])
    assert ids == sids[start:start + len(ids)] and start == sids.index(anchor.stream_id) - 12
    assert len(ids) <= MAX_LIVE_TURNS and view.has_newer
    assert all(turn.ended and not turn.busy for turn in view.turns()), "all rendered"
    assert "turn-" in view.turns()[0].text()


def test_a_newer_page_is_built_below_and_the_oldest_released(
        qtbot: QtBot, store: Store) -> None:
    view, sids, conversation = _full_window(qtbot, store, 70, 800)
    # Jump into the middle (a search), then read the newer turns below it.
    view.show_page(store.turns_around(conversation, view.turns()[0].turn_id or 0), {})
    qtbot.waitUntil(lambda: not view.busy, timeout=20_000)
    bar = view.verticalScrollBar()
    while len(view.turns()) <= MAX_LIVE_TURNS and view.has_newer:
        last = view.turns()[-1].turn_id
        assert last is not None
        bar.setValue(bar.maximum())
        qtbot.wait(20)  # the scroll's own events (the view takes its anchor from them)
        # What the view keeps still: the turn under its top edge (ADR 0037).
        anchor = next(t for t in view.turns() if t.y() + t.height() > bar.value())
        before = anchor.y() - bar.value()
        page = store.turns_after(conversation, last)
        view.show_page(page, {})
        qtbot.waitUntil(lambda: not view.busy, timeout=20_000)
        if page.has_newer:  # (at the chat's very end the view sticks to the bottom)
            qtbot.waitUntil(lambda a=anchor, b=before: a.y() - bar.value() == b,  # type: ignore[misc]
                            timeout=2_000)
    ids = _ids(view)
    start = sids.index(ids[0])
    assert ids == sids[start:start + len(ids)], "contiguous, oldest first"
    assert len(ids) <= MAX_LIVE_TURNS


def test_a_live_event_of_a_turn_still_to_be_built_is_not_lost(
        qtbot: QtBot, store: Store) -> None:
    from tolaria.core.events import TextDelta

    conversation = store.create_conversation("Long", "demo", "/tmp").id
    sids = fill_chat(store, conversation, 30, text_chars=300)
    view = _view(qtbot)
    view.show_page(store.turns_page(conversation), {})
    qtbot.waitUntil(lambda: not view.busy, timeout=20_000)
    first = view.turns()[0].turn_id
    assert first is not None
    page = store.turns_page(conversation, first)
    view.show_page(page, {})
    view._timer.stop()
    view._on_timer_timeout()  # one built; the others wait
    view._timer.start()
    waiting = page.turns[0][0].stream_id
    assert view.turn(waiting) is None
    assert view.add_late(waiting, TextDelta(waiting, text=" and one more thing"))
    qtbot.waitUntil(lambda: not view.busy, timeout=20_000)
    built = view.turn(waiting)
    assert built is not None and built.text().endswith("and one more thing")
    assert sids.index(waiting) < sids.index(_ids(view)[-1])


def test_find_reaches_the_first_turn_of_a_long_chat(
        start_app: Callable[..., AppDriver], home: Path, qtbot: QtBot) -> None:
    store = Store()
    try:
        conversation = store.create_conversation("Long chat", "demo", str(home))
        sids = fill_chat(store, conversation.id, 400, text_chars=600)
    finally:
        store.close()
    pane = start_app().pane
    qtbot.waitUntil(lambda: bool(pane.turn_views()) and not pane.transcript.busy,
                    timeout=20_000)
    pane.search_bar.open()
    pane.search_bar.field.setText("turn-0-marker")
    pane.search_bar.field.returnPressed.emit()
    qtbot.waitUntil(lambda: sids[0] in [v.stream_id for v in pane.turn_views()],
                    timeout=10_000)
    assert pane.search_bar.count.text() == "1 of 1"
    qtbot.waitUntil(lambda: not pane.transcript.busy, timeout=20_000)
    first = pane.transcript.turn(sids[0])
    assert first is not None and "turn-0-marker" in first.text()
    assert first.needle == "turn-0-marker"
    assert pane.transcript.verticalScrollBar().value() <= first.y() + 2, "shown at the top"
    assert not pane.transcript.has_older
    # What the start made lives as long as the app: full collections do not walk it (one held
    # the loop for 45-145 ms while this was scrolled; ADR 0037).
    assert gc.get_freeze_count() > 10_000
