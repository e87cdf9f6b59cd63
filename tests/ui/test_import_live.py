"""The window's import of a session the CLI is still writing (issue 22 item 6): the real Claude
file copied mid-turn (tests/fixtures/sessions_live) comes in as an interrupted turn; with the
chat open, the next import completes that very turn in the open view and the report says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from chats.test_importing_live import LIVE
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp, save_shot


def test_an_open_chat_shows_its_interrupted_turn_completed_by_the_next_import(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    shutil.copytree(LIVE / "claude" / "mid", home, dirs_exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    drv = start_app()
    window, store = drv.window, drv.app.store
    bar = window.import_report
    window.import_action.trigger()
    qtbot.waitUntil(lambda: not bar.running, timeout=20_000)
    assert bar.headline.text() == ("1 chat imported: 1 from Claude Code · "
                                   "1 turn not answered yet (interrupted)")
    [chat] = [c for c in store.list_conversations() if c.agent == "claude"]
    window.open_conversation(chat.id)
    pane = window.stack.pane(chat.id)
    assert pane is not None
    qtbot.waitUntil(lambda: len(pane.transcript.turns()) == 1, timeout=5_000)
    [stored] = store.turns(chat.id)
    view = pane.transcript.turn(stored.stream_id)
    assert view is not None
    qtbot.waitUntil(lambda: view.status == "interrupted", timeout=5_000)

    shutil.copytree(LIVE / "claude" / "final", home, dirs_exist_ok=True)
    window.import_action.trigger()
    qtbot.waitUntil(lambda: not bar.running, timeout=20_000)
    assert bar.headline.text() == ("1 chat imported: 1 from Claude Code · 1 turn continued, "
                                   "1 turn not answered yet (interrupted)")
    turns = store.turns(chat.id)
    assert [t.status for t in turns] == ["completed", "interrupted", "completed"]
    assert turns[0].id == stored.id
    qtbot.waitUntil(lambda: len(pane.transcript.turns()) == 3, timeout=5_000)
    first = pane.transcript.turn(stored.stream_id)
    assert first is not None
    qtbot.waitUntil(lambda: first.status == "completed", timeout=5_000)
    assert "The command printed: started" in first.text()
    stopped = pane.transcript.turn(turns[1].stream_id)
    assert stopped is not None
    assert "no answer in the CLI's session yet" in stopped.footer.text()
    [card] = stopped.tool_cards()  # stopped while it ran: not "✗ failed", as in a live turn
    assert card.status == "interrupted"
    assert first.text().count("I'll run it.") == 1
    window.resize(1000, 700)
    qtbot.wait(100)
    save_shot(window, tmp_path, "import-live.png")
